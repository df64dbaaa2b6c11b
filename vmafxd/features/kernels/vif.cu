// Integer VIF (libvmaf's "vif"): per scale, the four integer sums of
// vmafxd.features.vif.ScaleAccumulators, and the decimation to the next
// scale.  Device twin of vmafxd.features.vif.compute_stats; the host turns
// the sums into scores with the CPU twin's metrics_from_stats.
//
// Fixed point, as libvmaf (see vif.py's module docstring):
//   vertical pass:   mu  = (sum f*x   + rnd(s_mu)) >> s_mu     (32-bit sums)
//                    sq  = (sum f*x*y + rnd(s_sq)) >> s_sq     (64-bit sums)
//   horizontal pass: mu  =  sum f*mu                           (32-bit, kept)
//                    sq  = (sum f*sq  + 2^15) >> 16            (64-bit)
// with (s_mu, s_sq) = (bpc, 2*(bpc-8)) at scale 0 and (16, 16) above;
// borders mirror without repeating the edge sample, rows and columns, at
// every scale.  The per-pixel double arithmetic (g, sv_sq) is IEEE double
// with contraction off, exactly as the C code computes it.  The sums are
// integers: blocks add them with 64-bit atomics in any order.
//
// Launches per batch: vx_vif_stats0_down_u8/_u16 (scale 0's sums and the scale-1 pictures;
// with vif_skip_scale0, vx_vif_down1_* alone), vx_vif_stats1_down, vx_vif_stats2_down (each
// scale's sums and the next scale's pictures) and vx_vif_stats3: 4 launches.

#define VIF_TAPS0 489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640, 935, 489
#define VIF_TAPS1 1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244
#define VIF_TAPS2 3571, 16004, 26386, 16004, 3571
#define VIF_TAPS3 10904, 43728, 10904
__constant__ u16 vif_taps0[17] = {VIF_TAPS0};
__constant__ u16 vif_taps1[9] = {VIF_TAPS1};
__constant__ u16 vif_taps2[5] = {VIF_TAPS2};
__constant__ u16 vif_taps3[3] = {VIF_TAPS3};

template <int FW>
VX_DEVICE u32 vif_tap(int k)
{
    if (FW == 17) return vif_taps0[k];
    if (FW == 9) return vif_taps1[k];
    if (FW == 5) return vif_taps2[k];
    return vif_taps3[k];
}

// VIF_HF64 (default 1): the horizontal pass's moments (sum f*v, v < 2^32, f < 2^16: below
// 2^48) as doubles on the FP64 pipe, which the integer pipe's multiply-adds leave idle.  Every
// term and partial sum is an integer below 2^53, so each fused multiply-add is exact and the
// sums are the same integers.  A u32 becomes a double by its bits (2^52 + v, minus 2^52: one
// add), and a sum below 2^52 an integer the same way back.  Timed on the H200
// (scripts/bench_vif_tiles.sh, scale 0 of 8-bit 1080p): 56.4 -> 52.0 us a frame, 49.4 with
// strips of 6 columns (VIF_RH 6).  VIF_HF64=0: widening integer multiply-adds.
#ifndef VIF_HF64
#define VIF_HF64 1
#endif
// VIF_VF64 (default 1): the same for the vertical pass of 16-bit samples (scales 1-3, and
// scale 0 above 8 bits: the unfolded path), whose moments sum f * a * b < 2^16 * 2^32 = 2^48:
// a row's three products (below 2^32, exact in u32) become doubles once and each tap is one
// fused multiply-add on the FP64 pipe instead of a widening integer one.  Every partial sum is
// an integer below 2^48: the same integers.
#ifndef VIF_VF64
#define VIF_VF64 1
#endif
#if VIF_HF64 || VIF_VF64
#if defined(VX_EMU)
#include <math.h>
#endif
__constant__ double vif_taps0d[17] = {VIF_TAPS0};
__constant__ double vif_taps1d[9] = {VIF_TAPS1};
__constant__ double vif_taps2d[5] = {VIF_TAPS2};
__constant__ double vif_taps3d[3] = {VIF_TAPS3};

template <int FW>
VX_DEVICE double vif_tapd(int k)
{
    if (FW == 17) return vif_taps0d[k];
    if (FW == 9) return vif_taps1d[k];
    if (FW == 5) return vif_taps2d[k];
    return vif_taps3d[k];
}

#define VIF_TWO52 4503599627370496.0
VX_DEVICE double vif_u32_f64(u32 v)
{
    const u64 bits = ((u64)0x43300000u << 32) | v;
#if defined(VX_EMU)
    double d;
    __builtin_memcpy(&d, &bits, 8);
    return d - VIF_TWO52;
#else
    return __longlong_as_double((long long)bits) - VIF_TWO52;
#endif
}

VX_DEVICE u64 vif_f64_u64(double d)  // 0 <= d < 2^52, an integer
{
    const double e = d + VIF_TWO52;
#if defined(VX_EMU)
    u64 bits;
    __builtin_memcpy(&bits, &e, 8);
#else
    const u64 bits = (u64)__double_as_longlong(e);
#endif
    return bits & (((u64)1 << 52) - 1);
}
#endif

// libvmaf's log2 of the top 16 bits, times 2048 (table: round(log2f(i)*2048), i in 32767..65535)
VX_DEVICE i32 vif_log2_32(const u16* table, u32 v)
{
    int k = 16 - __clz(v);
    return (i32)table[v >> k] + 2048 * k;
}

VX_DEVICE i32 vif_log2_64(const u16* table, u64 v)
{
    int k = 48 - __clzll(v);
    return (i32)table[v >> k] + 2048 * k;
}

// Tiles of the statistics kernels: VIF_TH x VIF_TW output pixels of one frame per block.
// Each thread keeps a strip of outputs in registers so that a shared-memory value it loads
// serves every output of the strip (a column strip of VIF_RV rows in the vertical pass, a row
// strip of VIF_RH columns in the horizontal one): about a third of the shared-memory loads
// of one output a thread.  The sums are exact integers, so the order of the taps is free.
// Row strips of 6 since the horizontal moments went to the FP64 pipe (VIF_HF64; each strip
// converts 22 values a moment for 6 outputs instead of 19 for 3): 49.4 against 52.0 us a
// 1080p frame at scale 0 with 3 (H200), though ptxas spills 16 bytes a thread there.
#ifndef VIF_TW  // (overridable for timing variants: scripts/bench_vif_tiles.sh)
#define VIF_TW 48
#define VIF_TH 32
#define VIF_RV 4
#define VIF_RH 6
#endif
#define VIF_THREADS 256
#define VIF_IW (VIF_TW + 16)  // input columns, with the widest filter's halo
// Row pitches of the vertical pass's results.  The horizontal pass gives a warp's 32 lanes
// 32 different rows at one column: an odd pitch in 32-bit words spreads them over the banks.
// The tensor-core vertical pass (VIF_MMA) stores a lane's results at rows g, columns 2q and
// 2q + 1 (g = lane / 4, q = lane % 4): pitches of 67 and 35 words (3 and 5 mod 32 rather
// than 1) put those 32 stores on at least 16 banks, where 65 and 33 put them on 8.
#define VIF_PITCH32 (VIF_IW + 3)
#define VIF_PITCH16 (VIF_IW + 6)

// The vertical pass's product sums, sum f*x*y.  8-bit samples come only to scale 0's u8 kernel,
// where s_sq = 2*(8-8) = 0 and the sums fit 32 bits: the 17 taps add up to 2^16, so a sum is at
// most 2^16 * 255 * 255 = 4,261,478,400 < 2^32.  There they stay in 32-bit registers (one
// multiply-add a tap instead of a widening one) and give the same integers; every other kernel
// (10 bits and up, and the scales above 0, whose inputs are 16-bit) needs 64.
template <typename T> struct VifSqSum { typedef u64 type; };
template <> struct VifSqSum<u8> { typedef u32 type; };

// ---- the filter sums, with the mirrored taps folded ----------------------------------------
// Every filter is symmetric (tap k = tap FW-1-k), so a sum over the window is
//     sum_{k<HALF} f[k] * (x[k] + x[FW-1-k])  +  f[HALF] * x[HALF]
// (the ALU adds the mirrored pair, one multiply-add per pair instead of two).  All the values
// below are unsigned and every filter's taps add up to 2^16, so a partial sum never exceeds
// the whole sum: a sum type is wide enough when the whole sum fits, whatever the order of the
// terms, and the integers (hence libvmaf's rounding and shifts, applied to the whole sums
// exactly where they were) are the same.  Three sum types, each for the values it is given:
//   VifSum32   (u32): values v <= 65535 (a picture, 8 to 16 bits, or a 16-bit mean):
//              sum <= 2^16 * 65535 < 2^32; a pair v0 + v1 <= 131070 and f * (v0 + v1) <= 2^32
//              too.  Also the 8-bit products a * b <= 255^2 = 65025 (scale 0 of 8-bit input,
//              where s_sq = 0): sum <= 2^16 * 65025 = 4,261,478,400 < 2^32.
//   VifSumWide (u64): values below 2^32 (16-bit products, the vertical pass's moments): sum
//              < 2^16 * 2^32 = 2^48; one widening multiply-add a tap (a pair would need 33 bits).
//   VifSumSplit: the same values as Wide, their low and high 16 bits summed apart in 32 bits
//              (each half <= 65535, so each sum <= 2^16 * 65535 < 2^32 and a pair fits as in
//              VifSum32); the value is hi * 2^16 + lo = sum f * v exactly.  Pairs fold again,
//              for two 32-bit multiply-adds a pair instead of two widening ones; the halves
//              cost the ALU two operations a value.
// Where the 48-bit sums fold (VIF_HFOLD, VIF_VFOLD16), VIF_HSPLIT moments of the horizontal
// pass (of xx, yy, xy, in that order) and VIF_VSPLIT of the 16-bit vertical pass use
// VifSumSplit, the others VifSumWide.
//
// Which passes fold (compile-time, for timing A/B: scripts/bench_vif_tiles.sh).  The figures
// are sm_90 SASS from ptxas (NVRTC 13.0), a strip's unrolled loop body:
//   VIF_VFOLD (default 1): the vertical pass of 8-bit samples (vx_vif_stats0_u8 and _down_u8):
//     559 instructions a strip of 4 outputs, 299 on the multiply-add pipe, against 595 and 345
//     unfolded; that pass was multiply-add bound (an IMAD takes the pipe two cycles a warp).
//   VIF_VFOLD16 (default 0): the vertical pass of 16-bit samples too (its moments are 48-bit
//     sums: vx_vif_stats1_down's strip is 564 instructions folded against 390).
//   VIF_HFOLD (default 0): the horizontal pass.  Its moments are 48-bit sums: unfolded, one
//     widening multiply-add a tap; folded, ptxas's code is 996-1,023 instructions a strip of 3
//     outputs against 766 (9-84 widening multiply-adds against 156): a win only if a widening
//     multiply-add costs the pipe two issues -- for the device to decide.
//   VIF_SYM=0 sets them all to 0: the arithmetic as it was before the fold.
#ifndef VIF_SYM
#define VIF_SYM 1
#endif
#ifndef VIF_VFOLD
#define VIF_VFOLD VIF_SYM
#endif
#ifndef VIF_HFOLD
#define VIF_HFOLD 0
#endif
#ifndef VIF_VFOLD16
#define VIF_VFOLD16 0
#endif
#ifndef VIF_HSPLIT
#define VIF_HSPLIT 2
#endif
#ifndef VIF_VSPLIT
#define VIF_VSPLIT 2
#endif

// (member functions: VX_DEVICE is static)
#if defined(VX_EMU)
#define VIF_MEMBER inline
#else
#define VIF_MEMBER __device__ __forceinline__
#endif

struct VifSum32 {
    u32 s;
    VIF_MEMBER void zero() { s = 0; }
    VIF_MEMBER void one(u32 f, u32 v) { s += f * v; }
    VIF_MEMBER void pair(u32 f, u32 v0, u32 v1) { s += f * (v0 + v1); }
    VIF_MEMBER u32 value() const { return s; }
};

struct VifSumWide {
    u64 s;
    VIF_MEMBER void zero() { s = 0; }
    VIF_MEMBER void one(u32 f, u32 v) { s += (u64)f * v; }
    VIF_MEMBER void pair(u32 f, u32 v0, u32 v1) { one(f, v0), one(f, v1); }
    VIF_MEMBER u64 value() const { return s; }
};

struct VifSumSplit {
    u32 lo, hi;
    VIF_MEMBER void zero() { lo = hi = 0; }
    VIF_MEMBER void one(u32 f, u32 v) { lo += f * (v & 0xffffu); hi += f * (v >> 16); }
    VIF_MEMBER void pair(u32 f, u32 v0, u32 v1)
    {
        lo += f * ((v0 & 0xffffu) + (v1 & 0xffffu));
        hi += f * ((v0 >> 16) + (v1 >> 16));
    }
    VIF_MEMBER u64 value() const { return ((u64)hi << 16) + lo; }
};

// the sum type of moment m (0 xx, 1 yy, 2 xy) when `split` of the three are split
template <bool SPLIT> struct VifSumPick { typedef VifSumWide type; };
template <> struct VifSumPick<true> { typedef VifSumSplit type; };

// The vertical pass of a column strip: outputs j = 0..VIF_RV-1 filter rows j..j+FW-1 of the
// column at p (ref) / q (dist), rows VIF_IW apart.  The pairs go outermost, so a row's sample
// and its three products (computed once, kept in registers while the strip's outputs use
// them) live for about VIF_RV pair steps.  S: the moments' sum type (VifSum32 for 8-bit
// samples, VifSumWide/VifSumSplit otherwise).
template <int FW, typename SR, typename SD, typename SX>
VX_DEVICE void vif_vertical_sym(const u16* p, const u16* q, VifSum32* m1, VifSum32* m2, SR* rr, SD* dd, SX* rd)
{
    const int HALF = FW / 2;
#pragma unroll
    for (int j = 0; j < VIF_RV; ++j) m1[j].zero(), m2[j].zero(), rr[j].zero(), dd[j].zero(), rd[j].zero();
#pragma unroll
    for (int k = 0; k <= HALF; ++k) {
        const u32 f = vif_tap<FW>(k);
#pragma unroll
        for (int j = 0; j < VIF_RV; ++j) {
            // a row's sample and products (a * b < 2^32 for 16-bit samples: exact in u32)
            const int r0 = j + k, r1 = j + FW - 1 - k;
            const u32 a0 = p[r0 * VIF_IW], b0 = q[r0 * VIF_IW];
            const u32 aa0 = a0 * a0, bb0 = b0 * b0, ab0 = a0 * b0;
            if (k == HALF) {  // the centre tap
                m1[j].one(f, a0), m2[j].one(f, b0);
                rr[j].one(f, aa0), dd[j].one(f, bb0), rd[j].one(f, ab0);
            } else {
                const u32 a1 = p[r1 * VIF_IW], b1 = q[r1 * VIF_IW];
                const u32 aa1 = a1 * a1, bb1 = b1 * b1, ab1 = a1 * b1;
                m1[j].pair(f, a0, a1), m2[j].pair(f, b0, b1);
                rr[j].pair(f, aa0, aa1), dd[j].pair(f, bb0, bb1), rd[j].pair(f, ab0, ab1);
            }
        }
    }
}

// The horizontal pass of a row strip: outputs j = 0..VIF_RH-1 filter columns j..j+FW-1 of
// the vertical results from column 0 of the pointers.  Means: VifSum32 (16-bit means);
// moments (below 2^32): the first VIF_HSPLIT of xx, yy, xy split, the others wide.
template <int FW>
VX_DEVICE void vif_horizontal_sym(const u16* mu1p, const u16* mu2p, const u32* rrp, const u32* ddp, const u32* rdp,
                                  u32* mu1, u32* mu2, u64* xx, u64* yy, u64* xy)
{
    const int HALF = FW / 2;
    VifSum32 m1[VIF_RH], m2[VIF_RH];
    typename VifSumPick<(VIF_HSPLIT > 0)>::type sx[VIF_RH];
    typename VifSumPick<(VIF_HSPLIT > 1)>::type sy[VIF_RH];
    typename VifSumPick<(VIF_HSPLIT > 2)>::type sxy[VIF_RH];
#pragma unroll
    for (int j = 0; j < VIF_RH; ++j) m1[j].zero(), m2[j].zero(), sx[j].zero(), sy[j].zero(), sxy[j].zero();
#pragma unroll
    for (int k = 0; k <= HALF; ++k) {
        const u32 f = vif_tap<FW>(k);
#pragma unroll
        for (int j = 0; j < VIF_RH; ++j) {
            const int c0 = j + k, c1 = j + FW - 1 - k;
            if (k == HALF) {
                m1[j].one(f, mu1p[c0]), m2[j].one(f, mu2p[c0]);
                sx[j].one(f, rrp[c0]), sy[j].one(f, ddp[c0]), sxy[j].one(f, rdp[c0]);
            } else {
                m1[j].pair(f, mu1p[c0], mu1p[c1]), m2[j].pair(f, mu2p[c0], mu2p[c1]);
                sx[j].pair(f, rrp[c0], rrp[c1]), sy[j].pair(f, ddp[c0], ddp[c1]), sxy[j].pair(f, rdp[c0], rdp[c1]);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < VIF_RH; ++j) {
        mu1[j] = m1[j].value(), mu2[j] = m2[j].value();
        xx[j] = sx[j].value(), yy[j] = sy[j].value(), xy[j] = sxy[j].value();
    }
}

// the vertical pass's sum type of moment M (0 rr, 1 dd, 2 rd) for samples T: 8-bit products
// in 32 bits (VifSum32's bound), 16-bit ones split for the first VIF_VSPLIT moments
template <typename T, int M> struct VifMoment { typedef typename VifSumPick<(M < VIF_VSPLIT)>::type type; };
template <int M> struct VifMoment<u8, M> { typedef VifSum32 type; };

// Stage the ih x iw rectangle of both pictures from row gy0, column gx0 in shared memory (row
// pitch in_pitch), mirrored as libvmaf mirrors.  Rows and columns past the mirror's reach
// (h + half, w + half) feed only outputs past the picture: they stay zero.
template <typename T>
VX_DEVICE void vif_stage(const T* r, const T* d, i64 pitch, int w, int h, int half, int gy0, int gx0, int ih, int iw,
                         u16* in_r, u16* in_d, int in_pitch)
{
    for (int i = threadIdx.x; i < ih * iw; i += blockDim.x) {
        const int ty = i / iw, tx = i % iw;
        const int gy = gy0 + ty, gx = gx0 + tx;
        u16 a = 0, b = 0;
        if (gy < h + half && gx < w + half) {
            const i64 o = (i64)vx_mirror(gy, h) * pitch + vx_mirror(gx, w);
            a = (u16)r[o];
            b = (u16)d[o];
        }
        in_r[ty * in_pitch + tx] = a;
        in_d[ty * in_pitch + tx] = b;
    }
}

// vif_stage for a block whose rectangle lies inside the picture (no mirror, no bounds) and
// whose rows are aligned to 4 samples: 4 samples a load (vx_load_quad), then one 8-byte
// shared-memory store of the 4 (in_r / in_d 8-byte aligned, in_pitch a multiple of 4).  The
// same values as vif_stage.  A thread issues the loads of VIF_STAGE_AHEAD items before it
// stores any: one trip to memory instead of one an item (1080p 8-bit: the 3 items of a thread
// at scale 0).  On the H200 (ncu source counters, 1080p 8-bit scale 0, fifteenth session) a
// thread's loads one item at a time left the staging with 27 % of the kernel's warp stall
// samples for 8 % of its instructions, mostly waiting on those loads.
#ifndef VIF_STAGE_AHEAD
#define VIF_STAGE_AHEAD 4
#endif

// 4 samples of one quad as 4 u16 (sample k in bits [16 k, 16 k + 16))
VX_DEVICE u64 vif_widen_quad(u32 q)  // 8-bit samples
{
    return (u64)(q & 0xffu) | ((u64)(q & 0xff00u) << 8) | ((u64)(q & 0xff0000u) << 16) | ((u64)(q & 0xff000000u) << 24);
}
VX_DEVICE u64 vif_widen_quad(u64 q) { return q; }  // 16-bit samples: already so

template <typename T>
VX_DEVICE void vif_stage_inside(const T* r, const T* d, i64 pitch, int gy0, int gx0, int ih, int iw, u16* in_r,
                                u16* in_d, int in_pitch)
{
    typedef typename VxQuad<T>::type Q;
    const int qw = iw / 4, n = ih * qw, step = blockDim.x;
    for (int i0 = threadIdx.x; i0 < n; i0 += VIF_STAGE_AHEAD * step) {
        Q a[VIF_STAGE_AHEAD], b[VIF_STAGE_AHEAD];
#pragma unroll
        for (int g = 0; g < VIF_STAGE_AHEAD; ++g) {
            const int i = i0 + g * step;
            if (i < n) {
                const int ty = i / qw, tx = (i % qw) * 4;
                const i64 o = (i64)(gy0 + ty) * pitch + gx0 + tx;
                a[g] = vx_load_quad(r + o);
                b[g] = vx_load_quad(d + o);
            }
        }
#pragma unroll
        for (int g = 0; g < VIF_STAGE_AHEAD; ++g) {
            const int i = i0 + g * step;
            if (i < n) {
                const int ty = i / qw, tx = (i % qw) * 4;
                vx_st_vec<u64>(in_r + ty * in_pitch + tx, vif_widen_quad(a[g]));
                vx_st_vec<u64>(in_d + ty * in_pitch + tx, vif_widen_quad(b[g]));
            }
        }
    }
}

// vif_stage, or vif_stage_inside where it gives the same values (the rectangle inside the
// picture, rows aligned to 4 samples): most blocks of a picture
template <typename T>
VX_DEVICE void vif_stage_block(const T* r, const T* d, i64 pitch, int w, int h, int half, int gy0, int gx0, int ih,
                               int iw, u16* in_r, u16* in_d, int in_pitch)
{
    const u64 align = 4 * sizeof(T) - 1;  // a quad's bytes
    if (iw % 4 == 0 && in_pitch % 4 == 0 && gy0 >= 0 && gx0 >= 0 && gy0 + ih <= h && gx0 + iw <= w &&
        (((u64)r | (u64)d) & align) == 0 && ((u64)pitch & 3) == 0 && (gx0 & 3) == 0)
        vif_stage_inside(r, d, pitch, gy0, gx0, ih, iw, in_r, in_d, in_pitch);
    else
        vif_stage(r, d, pitch, w, h, half, gy0, gx0, ih, iw, in_r, in_d, in_pitch);
}

// ---- scale 0 of 8-bit samples: the vertical pass on the tensor cores (VIF_MMA) ------------
// On CUDA devices of compute capability 8.0 and up, vx_vif_stats0_down_u8 / vx_vif_stats0_u8
// compute the vertical pass as integer matrix products (mma.sync m16n8k32, u8 x u8 -> s32):
// a tile's 32 x 64 vertical sums of column c are F * X, where X holds the column's 48 staged
// rows and F[y][k] = f[k - y] (0 <= k - y <= 16, else 0) is the 17-tap filter as a band.  An
// output block of 16 rows reads 32 input rows: one k32 product.  The operands are bytes, so
// every 16-bit value is taken as its two bytes, v = 256 vh + vl, and a sum of products as the
// products of the parts:
//   sum f x     = 256 (Fh X) + (Fl X)                                  (the means)
//   sum f x y   = 65536 (Fh H) + 256 (Fh L + Fl H) + (Fl L),  x y = 256 H + L   (the moments)
// with f = 256 fh + fl.  Every part is a sum of at most 17 products of bytes (below 2^21; the
// cross part two such sums), so the s32 accumulators hold them exactly, and the whole sums
// are the integers the scalar pass adds: below 2^24 for a mean, and at most 2^16 * 255^2 <
// 2^32 for a moment (VifSum32's bound), so the parts combine in u32 arithmetic without loss.
// The rounding after the vertical pass (s_mu = 8, s_sq = 0 at scale 0 of 8-bit samples) is
// then applied as before: the same integers, hence the same sums and pictures.
//
// The staging keeps 8-bit samples column by column (column c's row k at cols[c * VIF_CPB + k])
// so that a product's operand, four consecutive rows of a column, is one word.  A warp takes
// the 8 columns of one n-block for both 16-row blocks; the block must be VIF_THREADS = 256
// threads (8 warps for the tile's 64 columns) and the tile 48 x 32 (other shapes, timing
// variants, run the scalar passes).  The emulator and HIP run the scalar pass.
#if !defined(VIF_MMA)
#if defined(VX_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && VIF_TW == 48 && VIF_TH == 32
#define VIF_MMA 1
#else
#define VIF_MMA 0
#endif
#endif
// VIF_HMMA (default: VIF_MMA): the horizontal pass of those tiles on the tensor cores too
// (vif_horizontal_mma); 0: the vertical pass alone, the horizontal one as for every kernel.
#if !VIF_MMA
#undef VIF_HMMA
#define VIF_HMMA 0
#elif !defined(VIF_HMMA)
#define VIF_HMMA 1
#endif
// bytes a staged column: 48 rows and a pad word, so that a warp's staging stores (8 column
// groups x 4 row groups) and its operand loads (8 columns x 4 row words) spread over the banks
#define VIF_CPB 52

template <bool COLS>
VX_DEVICE u32 vif_staged(const u16* in, int row, int col)
{
    return COLS ? (u32)((const u8*)in)[col * VIF_CPB + row] : (u32)in[row * VIF_IW + col];
}

#if VIF_MMA
// acc += a * b: the m16n8k32 product of a 16 x 32 byte matrix (a, row fragments) and a 32 x 8
// one (b0, b1, column fragments), s32 accumulators (PTX ISA, "mma.m16n8k32")
VX_DEVICE void vif_mma(u32 (&acc)[4], const u32 (&a)[4], u32 b0, u32 b1)
{
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Stage the tile's (VIF_TH + 16) x VIF_IW samples of both pictures column by column (see
// above), mirrored as vif_stage.  Inside the picture, with 4-byte aligned rows, an item is a
// block of 4 rows x 4 columns: four word loads, a byte transpose, four word stores; a warp's
// 32 items are 8 column groups x 4 row groups, whose stores land on 32 different banks.
VX_DEVICE void vif_stage_cols(const u8* r, const u8* d, i64 pitch, int w, int h, int gy0, int gx0, u8* cr, u8* cd)
{
    const int IH = VIF_TH + 16, IW = VIF_IW;
    if (gy0 >= 0 && gx0 >= 0 && gy0 + IH <= h && gx0 + IW <= w && (((u64)r | (u64)d | (u64)pitch | (u64)gx0) & 3) == 0) {
        for (int i = threadIdx.x; i < (IH / 4) * (IW / 4); i += blockDim.x) {
            const int cg = (i & 7) | ((i >> 5) & 1) << 3, rg = ((i >> 3) & 3) | (i >> 6) << 2;
            const i64 o = (i64)(gy0 + 4 * rg) * pitch + gx0 + 4 * cg;
            u32 a[4], b[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) a[k] = *(const u32*)(r + o + k * pitch), b[k] = *(const u32*)(d + o + k * pitch);
            const u32 a01 = __byte_perm(a[0], a[1], 0x5140), a23 = __byte_perm(a[2], a[3], 0x5140);
            const u32 a01h = __byte_perm(a[0], a[1], 0x7362), a23h = __byte_perm(a[2], a[3], 0x7362);
            const u32 b01 = __byte_perm(b[0], b[1], 0x5140), b23 = __byte_perm(b[2], b[3], 0x5140);
            const u32 b01h = __byte_perm(b[0], b[1], 0x7362), b23h = __byte_perm(b[2], b[3], 0x7362);
            u32* pr = (u32*)(cr + 4 * cg * VIF_CPB + 4 * rg);
            u32* pd = (u32*)(cd + 4 * cg * VIF_CPB + 4 * rg);
            const int cw = VIF_CPB / 4;  // a column's words
            pr[0] = __byte_perm(a01, a23, 0x5410), pr[cw] = __byte_perm(a01, a23, 0x7632);
            pr[2 * cw] = __byte_perm(a01h, a23h, 0x5410), pr[3 * cw] = __byte_perm(a01h, a23h, 0x7632);
            pd[0] = __byte_perm(b01, b23, 0x5410), pd[cw] = __byte_perm(b01, b23, 0x7632);
            pd[2 * cw] = __byte_perm(b01h, b23h, 0x5410), pd[3 * cw] = __byte_perm(b01h, b23h, 0x7632);
        }
        return;
    }
    for (int i = threadIdx.x; i < IH * IW; i += blockDim.x) {
        const int ty = i / IW, tx = i % IW;
        const int gy = gy0 + ty, gx = gx0 + tx;
        u8 a = 0, b = 0;
        if (gy < h + 8 && gx < w + 8) {
            const i64 o = (i64)vx_mirror(gy, h) * pitch + vx_mirror(gx, w);
            a = r[o];
            b = d[o];
        }
        cr[tx * VIF_CPB + ty] = a;
        cd[tx * VIF_CPB + ty] = b;
    }
}

// The filter's fragments (the 16 x 32 band F, its high bytes then its low bytes; word m of
// lane l at frag[m * 32 + l]): thread t < 256 writes word t.  Fragment layout of m16n8k32's
// first operand: lane l's word j holds row l / 4 + 8 (j & 1), columns 4 (l % 4) + 16 (j >> 1)
// + 0..3, one byte each.
VX_DEVICE void vif_mma_filter(u32* frag)
{
    const int t = threadIdx.x;
    if (t >= 256) return;
    const int m = t >> 5, l = t & 31, j = m & 3, high = m < 4;
    const int y = (l >> 2) + 8 * (j & 1), k0 = 4 * (l & 3) + 16 * (j >> 1);
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int k = k0 + i - y;
        const u32 f = k >= 0 && k <= 16 ? vif_taps0[k] : 0u;
        word |= (high ? f >> 8 : f & 0xffu) << (8 * i);
    }
    frag[t] = word;
}

// a word's 4 bytes times another's, byte by byte (4 products below 2^16), as the high bytes
// and the low bytes of the products (byte i of each for product i)
VX_DEVICE void vif_byte_products(u32 x, u32 y, u32& hi, u32& lo)
{
    u32 p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = __byte_perm(x, 0, 0x4440 | i) * __byte_perm(y, 0, 0x4440 | i);
    const u32 p01 = __byte_perm(p[0], p[1], 0x5410), p23 = __byte_perm(p[2], p[3], 0x5410);
    lo = __byte_perm(p01, p23, 0x6420);
    hi = __byte_perm(p01, p23, 0x7531);
}

#if VIF_HMMA
// The vertical results as byte planes, the horizontal pass's operands: plane P + b holds byte b
// (b = 0 the lowest) of a result, P = VIF_PL_MU1 / _MU2 (16-bit means, 2 planes) and VIF_PL_RR
// / _RD / _DD (32-bit moments, 4 planes); a plane is the tile's VIF_TH rows of 64 bytes.  Word
// c of row y (columns 4 c .. 4 c + 3) sits at word c ^ 4 ((y >> 1) & 3) of the row: the
// horizontal pass's loads (a warp's 8 rows at 4 consecutive words) and the vertical pass's
// stores (8 rows at 2 words) then meet every bank at most once, with no padding.
enum { VIF_PL_MU1 = 0, VIF_PL_MU2 = 2, VIF_PL_RR = 4, VIF_PL_RD = 8, VIF_PL_DD = 12, VIF_PLANES = 16 };
#define VIF_PL_WORDS (VIF_TH * 16)

VX_DEVICE int vif_plane_word(int y, int c)
{
    return y * 16 + (c ^ (((y >> 1) & 3) << 2));
}

// results v0, v1 of columns c0, c0 + 1 (c0 even) of row y into planes p0 .. p0 + nbytes - 1
VX_DEVICE void vif_plane_pair(u8* planes, int p0, int y, int c0, u32 v0, u32 v1, int nbytes)
{
    const int off = 4 * vif_plane_word(y, c0 >> 2) + (c0 & 3);
#pragma unroll
    for (int b = 0; b < nbytes; ++b)
        *(u16*)(planes + 4 * VIF_PL_WORDS * (p0 + b) + off) = (u16)__byte_perm(v0, v1, b | (4 + b) << 4);
}
#endif

// The vertical pass of a tile (see above): warp w's columns 8 w .. 8 w + 7, rows 0..31, into
// the shared results: as the scalar pass writes them, or as byte planes for the horizontal
// pass on the tensor cores (VIF_HMMA, vif_plane_pair).  cr / cd: the staged columns; frag: the
// filter's fragments (vif_mma_filter).
VX_DEVICE void vif_vertical_mma(const u8* cr, const u8* cd, const u32* frag, u32 rnd_mu, int s_mu,
                                u16 (*v_mu1)[VIF_PITCH16], u16 (*v_mu2)[VIF_PITCH16], u32 (*v_rr)[VIF_PITCH32],
                                u32 (*v_dd)[VIF_PITCH32], u32 (*v_rd)[VIF_PITCH32], u8* planes)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    u32 fh[4], fl[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) fh[j] = frag[j * 32 + lane], fl[j] = frag[(4 + j) * 32 + lane];
    // the column's words of rows 4q.., 16 + 4q.., 32 + 4q..: the second operand's (b0, b1)
    // are words (0, 1) for output rows 0..15 and (1, 2) for rows 16..31
    const int col = 8 * warp + g;
    u32 a[3], b[3];
#pragma unroll
    for (int s = 0; s < 3; ++s)
        a[s] = *(const u32*)(cr + col * VIF_CPB + 16 * s + 4 * q), b[s] = *(const u32*)(cd + col * VIF_CPB + 16 * s + 4 * q);
    const int c0 = 8 * warp + 2 * q;  // a lane's result columns c0, c0 + 1 at rows g, g + 8
    // the means
#pragma unroll
    for (int mb = 0; mb < 2; ++mb) {
        u32 ah[4] = {0, 0, 0, 0}, al[4] = {0, 0, 0, 0}, bh[4] = {0, 0, 0, 0}, bl[4] = {0, 0, 0, 0};
        vif_mma(ah, fh, a[mb], a[mb + 1]);
        vif_mma(al, fl, a[mb], a[mb + 1]);
        vif_mma(bh, fh, b[mb], b[mb + 1]);
        vif_mma(bl, fl, b[mb], b[mb + 1]);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int y = 16 * mb + g + 8 * half;
            const u32 m0 = ((ah[2 * half] << 8) + al[2 * half] + rnd_mu) >> s_mu;
            const u32 m1 = ((ah[2 * half + 1] << 8) + al[2 * half + 1] + rnd_mu) >> s_mu;
            const u32 n0 = ((bh[2 * half] << 8) + bl[2 * half] + rnd_mu) >> s_mu;
            const u32 n1 = ((bh[2 * half + 1] << 8) + bl[2 * half + 1] + rnd_mu) >> s_mu;
#if VIF_HMMA
            vif_plane_pair(planes, VIF_PL_MU1, y, c0, m0, m1, 2);
            vif_plane_pair(planes, VIF_PL_MU2, y, c0, n0, n1, 2);
#else
            *(u32*)&v_mu1[y][c0] = m0 | m1 << 16;
            *(u32*)&v_mu2[y][c0] = n0 | n1 << 16;
#endif
        }
    }
    // the moments, one at a time: x x (rr), x y (rd), y y (dd)
#pragma unroll
    for (int m = 0; m < 3; ++m) {
        u32 ph[3], pl[3];
#pragma unroll
        for (int s = 0; s < 3; ++s)
            vif_byte_products(m == 2 ? b[s] : a[s], m == 0 ? a[s] : b[s], ph[s], pl[s]);
#if !VIF_HMMA
        u32 (*out)[VIF_PITCH32] = m == 0 ? v_rr : m == 1 ? v_rd : v_dd;
#endif
#pragma unroll
        for (int mb = 0; mb < 2; ++mb) {
            u32 hh[4] = {0, 0, 0, 0}, x[4] = {0, 0, 0, 0}, ll[4] = {0, 0, 0, 0};
            vif_mma(hh, fh, ph[mb], ph[mb + 1]);
            vif_mma(x, fh, pl[mb], pl[mb + 1]);
            vif_mma(x, fl, ph[mb], ph[mb + 1]);
            vif_mma(ll, fl, pl[mb], pl[mb + 1]);
#if VIF_HMMA
#pragma unroll
            for (int half = 0; half < 2; ++half)
                vif_plane_pair(planes, VIF_PL_RR + 4 * m, 16 * mb + g + 8 * half, c0,
                               (hh[2 * half] << 16) + (x[2 * half] << 8) + ll[2 * half],
                               (hh[2 * half + 1] << 16) + (x[2 * half + 1] << 8) + ll[2 * half + 1], 4);
#else
#pragma unroll
            for (int e = 0; e < 4; ++e)
                out[16 * mb + g + 8 * (e >> 1)][c0 + (e & 1)] = (hh[e] << 16) + (x[e] << 8) + ll[e];
#endif
        }
    }
}

// The decimation's vertical pass (scale 1's 9 taps at the even rows) the same way: the tile's
// 16 x 56 sums of column c0 + c are D * X with D[t][j] = f9[j - 2 t] (0 <= j - 2 t <= 8), the
// rows j counted from the staged row r0; j reaches 2 * 15 + 8 = 38, so two k32 products, the
// second reading rows past the column's 48 (the pad word, then the next column's bytes: every
// one of them meets a zero of D).  Each sum is below 2^16 * 255 < 2^24 and each part below
// 2^16, as above.  frag: D's fragments, step s's high bytes at words (4 s + j) * 32 + lane and
// its low bytes at (8 + 4 s + j) * 32 + lane; thread t < 512 writes word t
// (vif_mma_down_filter).  Warp w < 7 writes columns 8 w .. 8 w + 7 of out_r / out_d.
VX_DEVICE void vif_mma_down_filter(u32* frag)
{
    for (int t = threadIdx.x; t < 512; t += blockDim.x) {
        const int m = t >> 5, l = t & 31, j = m & 3, s = (m >> 2) & 1, high = m < 8;
        const int y = (l >> 2) + 8 * (j & 1), k0 = 4 * (l & 3) + 16 * (j >> 1) + 32 * s;
        u32 word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int k = k0 + i - 2 * y;
            const u32 f = k >= 0 && k <= 8 ? vif_taps1[k] : 0u;
            word |= (high ? f >> 8 : f & 0xffu) << (8 * i);
        }
        frag[t] = word;
    }
}

VX_DEVICE void vif_down_vertical_mma(const u8* cr, const u8* cd, int r0, int c0, const u32* frag, u32 rnd, int s_mu,
                                     u32 (*out_r)[VIF_PITCH32], u32 (*out_d)[VIF_PITCH32])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    if (warp >= 7) return;
    const u8* pr = cr + (c0 + 8 * warp + g) * VIF_CPB + r0 + 4 * q;
    const u8* pd = cd + (c0 + 8 * warp + g) * VIF_CPB + r0 + 4 * q;
    u32 rh[4] = {0, 0, 0, 0}, rl[4] = {0, 0, 0, 0}, dh[4] = {0, 0, 0, 0}, dl[4] = {0, 0, 0, 0};
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        u32 fh[4], fl[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) fh[j] = frag[(4 * s + j) * 32 + lane], fl[j] = frag[(8 + 4 * s + j) * 32 + lane];
        const u32 a0 = *(const u32*)(pr + 32 * s), a1 = *(const u32*)(pr + 32 * s + 16);
        const u32 b0 = *(const u32*)(pd + 32 * s), b1 = *(const u32*)(pd + 32 * s + 16);
        vif_mma(rh, fh, a0, a1);
        vif_mma(rl, fl, a0, a1);
        vif_mma(dh, fh, b0, b1);
        vif_mma(dl, fl, b0, b1);
    }
    const int c = 8 * warp + 2 * q;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int ty = g + 8 * (e >> 1), cc = c + (e & 1);
        out_r[ty][cc] = ((rh[e] << 8) + rl[e] + rnd) >> s_mu;
        out_d[ty][cc] = ((dh[e] << 8) + dl[e] + rnd) >> s_mu;
    }
}
#endif

// One pixel's contribution to the four sums, from its filtered moments (libvmaf's
// vif_statistic, integer path), with libvmaf's branches.  A branch-free form (every pixel
// through the log branch's arithmetic with inputs that make it add 0, a strip's pixels a step
// at a time so that their divisions and table loads interleave) was slower on the H200: the
// scale-0 kernel 1.46 -> 1.78 ms a 1080p batch of 32, the engine 101 -> 112 us a frame
// (docs/gpu-runs.md, fifteenth session, call 5): the skipped pixels' work and the spills
// cost more than the chains' latency.
VX_DEVICE void vif_pixel(u32 mu1, u32 mu2, u64 xx, u64 yy, u64 xy, const u16* log2_table, double gain_limit,
                         i64& num_log, i64& den_log, i64& num_non_log, i64& den_non_log)
{
    const i32 sigma_nsq = 65536 << 1;
    const double eps = 65536 * 1.0e-10;
    const u32 mu1_sq = (u32)(((u64)mu1 * mu1 + 2147483648ull) >> 32);
    const u32 mu2_sq = (u32)(((u64)mu2 * mu2 + 2147483648ull) >> 32);
    const u32 mu1_mu2 = (u32)(((u64)mu1 * mu2 + 2147483648ull) >> 32);
    const u32 xx_f = (u32)((xx + 32768) >> 16);
    const u32 yy_f = (u32)((yy + 32768) >> 16);
    const u32 xy_f = (u32)((xy + 32768) >> 16);
    const i32 sigma1_sq = (i32)(xx_f - mu1_sq);
    i32 sigma2_sq = (i32)(yy_f - mu2_sq);
    const i32 sigma12 = (i32)(xy_f - mu1_mu2);
    sigma2_sq = sigma2_sq > 0 ? sigma2_sq : 0;
    if (sigma1_sq >= sigma_nsq) {
        den_log += vif_log2_32(log2_table, (u32)(sigma_nsq + sigma1_sq)) - 2048 * 17;
        if (sigma12 > 0 && sigma2_sq > 0) {
            double g = sigma12 / (sigma1_sq + eps);
            i32 sv_sq = (i32)(sigma2_sq - g * sigma12);
            sv_sq = sv_sq > 0 ? sv_sq : 0;
            g = g < gain_limit ? g : gain_limit;
            const u32 numer1 = (u32)(sv_sq + sigma_nsq);
            const i64 numer1_tmp = (i64)(g * g * sigma1_sq) + numer1;
            num_log += vif_log2_64(log2_table, (u64)numer1_tmp) - vif_log2_64(log2_table, (u64)numer1);
        }
    } else {
        num_non_log += sigma2_sq;
        den_non_log += 1;
    }
}

#if VIF_HMMA
// The horizontal pass of scale 0's 8-bit tiles on the tensor cores, and each result's pixel
// statistic.  Transposed, a row's horizontal sums are the vertical pass's product again:
// output columns j0 .. j0 + 15 of picture rows r0 .. r0 + 7 are F * X, with F the same 16 x 32
// band (vif_mma_filter's fragments, in frag) and X[k][n] the vertical result at row r0 + n,
// column j0 + k.  Each result goes in as its bytes (the planes), so a sum is the products of
// the parts with their shifts: a mean's v = 256 vh + vl gives
//     sum f v  = 65536 (Fh Vh) + 256 (Fh Vl + Fl Vh) + (Fl Vl)
// and a moment's four bytes v = sum_b 256^b Vb give the parts A_s (shift 8 s, s = 0 .. 4)
//     A_0 = Fl V0,  A_s = Fh V(s-1) + Fl Vs (s = 1 .. 3),  A_4 = Fh V3.
// A part adds at most 2 x 17 products of bytes (below 2^22): exact in the s32 accumulators.
// The sums are the scalar pass's integers: a mean's below 65536 * 65280 < 2^32 (u32; every part
// is below the sum), a moment's below 2^16 * 2^32 = 2^48, put together as
// (A_0 + 256 A_1) + 2^16 (A_2 + 256 A_3) + 2^32 A_4, where both brackets stay below 2^30.
// The tile's 32 x 48 results are 12 products of 16 columns by 8 rows; warp w takes products w
// and w + 8.  A lane's results are columns j0 + g and j0 + g + 8 of rows r0 + 2 q and
// r0 + 2 q + 1 (m16n8's accumulator layout).
VX_DEVICE void vif_horizontal_mma(const u8* planes, const u32* frag, int x0, int y0, int w, int h,
                                  const u16* log2_table, double gain_limit, i64& num_log, i64& den_log,
                                  i64& num_non_log, i64& den_non_log)
{
    static_assert(VIF_TW == 48 && VIF_TH % 8 == 0 && VIF_THREADS == 256, "the tile's shapes");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    u32 fh[4], fl[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) fh[j] = frag[j * 32 + lane], fl[j] = frag[(4 + j) * 32 + lane];
    const u32* pw = (const u32*)planes;
    for (int task = warp; task < 3 * (VIF_TH / 8); task += VIF_THREADS / 32) {
        const int j0 = 16 * (task % 3), r0 = 8 * (task / 3);
        // the second operand's words: row r0 + g, columns j0 + 4 q .. and j0 + 16 + 4 q ..
        const int w0 = vif_plane_word(r0 + g, (j0 >> 2) + q), w1 = vif_plane_word(r0 + g, (j0 >> 2) + 4 + q);
        u32 mu[2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            const u32* p = pw + VIF_PL_WORDS * (m ? VIF_PL_MU2 : VIF_PL_MU1);
            const u32 l0 = p[w0], l1 = p[w1], h0 = p[VIF_PL_WORDS + w0], h1 = p[VIF_PL_WORDS + w1];
            u32 s16[4] = {0, 0, 0, 0}, s8[4] = {0, 0, 0, 0}, s0[4] = {0, 0, 0, 0};
            vif_mma(s16, fh, h0, h1);
            vif_mma(s8, fh, l0, l1);
            vif_mma(s8, fl, h0, h1);
            vif_mma(s0, fl, l0, l1);
#pragma unroll
            for (int e = 0; e < 4; ++e) mu[m][e] = (s16[e] << 16) + (s8[e] << 8) + s0[e];
        }
        u64 mo[3][4];  // rr, rd, dd
#pragma unroll
        for (int m = 0; m < 3; ++m) {
            const u32* p = pw + VIF_PL_WORDS * (VIF_PL_RR + 4 * m);
            u32 a[5][4];
#pragma unroll
            for (int k = 0; k < 5; ++k) a[k][0] = a[k][1] = a[k][2] = a[k][3] = 0;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const u32 d0 = p[VIF_PL_WORDS * b + w0], d1 = p[VIF_PL_WORDS * b + w1];
                vif_mma(a[b], fl, d0, d1);
                vif_mma(a[b + 1], fh, d0, d1);
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const u32 lo = a[0][e] + (a[1][e] << 8), hi = a[2][e] + (a[3][e] << 8);
                mo[m][e] = (u64)lo + ((u64)hi << 16) + ((u64)a[4][e] << 32);
            }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int x = j0 + g + 8 * (e >> 1), ty = r0 + 2 * q + (e & 1);
            if (y0 + ty >= h || x0 + x >= w) continue;
            vif_pixel(mu[0][e], mu[1][e], mo[0][e], mo[2][e], mo[1][e], log2_table, gain_limit, num_log, den_log,
                      num_non_log, den_non_log);
        }
    }
}
#endif

// VIF_BSUM (default 1): the block's four sums in one pass of the prelude's shuffle sums
// (vx_block_sums_i64), one barrier; VIF_BSUM=0: four tree sums, nine barriers each (H200,
// scale 0 at 1080p: 54.0 against 49.8 us a frame).
#ifndef VIF_BSUM
#define VIF_BSUM 1
#endif

// The decimation to scale s + 1 fused into scale s's statistics (DOWN, s = 0..2): the stats
// block's staged input (its tile and a halo of HALF = FW/2 rows and columns, mirrored) holds
// every sample that the scale-(s+1) pixels of its tile need (those at even rows and columns
// 2 oy, 2 ox inside the tile, whose windows of the next scale's DF = FW/2 + 1 taps reach
// DH = DF/2 <= HALF past it), so the block filters them from shared memory too and the
// separate decimation launch (vx_vif_down<s+1>, which staged the same picture again) goes.
// The arithmetic is vif_down_impl's: vertical (sum f*x + 2^(s_mu-1)) >> s_mu in 32 bits
// (s_mu = bpc at scale 0, 16 above; <= 2^16 (2^b - 1) + 2^(b-1) < 2^32), horizontal
// (sum f*v + 2^15) >> 16 (<= 2^16 * 65535 + 2^15 < 2^32), mirrored as libvmaf (the staged
// halo is that mirror), the same integers.
struct VifDownOut {
    u16* ref;
    u16* dis;
    i64 frame_stride, pitch;
};

template <typename T, int FW, bool DOWN>
VX_DEVICE void vif_stats_impl(const T* ref, const T* dis, i64 frame_stride, int w, int h, i64 pitch,
                              int s_mu, int s_sq, const u16* log2_table, double gain_limit,
                              i64* out, int out_stride, int out_index, VifDownOut down = VifDownOut())
{
    const int HALF = FW / 2;
    const int IW = VIF_TW + FW - 1;  // tile columns incl. halo
    const int IH = VIF_TH + FW - 1;
    __shared__ VX_ALIGN(16) u16 in_r[VIF_TH + 16][VIF_IW];
    __shared__ VX_ALIGN(16) u16 in_d[VIF_TH + 16][VIF_IW];
    // the vertical pass's results: the means (they fit 16 bits: (2^16 (2^b - 1) + 2^(b-1)) >> b
    // <= 65535 for inputs of b <= 16 bits) and the moments, as arrays; or, where the horizontal
    // pass runs on the tensor cores (VIF_HMMA), the same memory as byte planes
    enum { MU_BYTES = VIF_TH * VIF_PITCH16 * 2, SQ_BYTES = VIF_TH * VIF_PITCH32 * 4 };
    __shared__ VX_ALIGN(16) u8 v_raw[2 * MU_BYTES + 3 * SQ_BYTES];
    u16 (*v_mu1)[VIF_PITCH16] = (u16 (*)[VIF_PITCH16])v_raw;
    u16 (*v_mu2)[VIF_PITCH16] = (u16 (*)[VIF_PITCH16])(v_raw + MU_BYTES);
    u32 (*v_rr)[VIF_PITCH32] = (u32 (*)[VIF_PITCH32])(v_raw + 2 * MU_BYTES);
    u32 (*v_dd)[VIF_PITCH32] = (u32 (*)[VIF_PITCH32])(v_raw + 2 * MU_BYTES + SQ_BYTES);
    u32 (*v_rd)[VIF_PITCH32] = (u32 (*)[VIF_PITCH32])(v_raw + 2 * MU_BYTES + 2 * SQ_BYTES);
    static_assert(MU_BYTES % 16 == 0 && SQ_BYTES % 16 == 0, "aligned views");
    __shared__ i64 scratch[VIF_THREADS];

    const int frame = blockIdx.z;
    const T* r = ref + frame * frame_stride;
    const T* d = dis + frame * frame_stride;
    const int x0 = blockIdx.x * VIF_TW, y0 = blockIdx.y * VIF_TH;
    const int t = threadIdx.x;

    const u32 rnd_mu = s_mu ? (1u << (s_mu - 1)) : 0u;
#if VIF_MMA
    // 8-bit samples at scale 0 (s_mu = 8, s_sq = 0): the vertical pass on the tensor cores
    constexpr bool COLS = sizeof(T) == 1 && FW == 17;
    if constexpr (COLS) {
        vif_mma_filter((u32*)scratch);
        vif_stage_cols((const u8*)r, (const u8*)d, pitch, w, h, y0 - HALF, x0 - HALF, (u8*)&in_r[0][0], (u8*)&in_d[0][0]);
        __syncthreads();
#if VIF_HMMA
        static_assert(sizeof(v_raw) >= VIF_PLANES * VIF_PL_WORDS * 4, "the planes fit");
#endif
        vif_vertical_mma((const u8*)&in_r[0][0], (const u8*)&in_d[0][0], (const u32*)scratch, rnd_mu, s_mu, v_mu1,
                         v_mu2, v_rr, v_dd, v_rd, v_raw);
    } else
#else
    constexpr bool COLS = false;
#endif
    {
    vif_stage_block(r, d, pitch, w, h, HALF, y0 - HALF, x0 - HALF, IH, IW, &in_r[0][0], &in_d[0][0], VIF_IW);
    __syncthreads();

    // vertical pass: a thread item is a column strip of VIF_RV rows
    typedef typename VifSqSum<T>::type SqSum;
    const u64 rnd_sq = s_sq ? ((u64)1 << (s_sq - 1)) : 0;
    for (int i = t; i < (VIF_TH / VIF_RV) * VIF_IW; i += blockDim.x) {
        const int tx = i % VIF_IW, y = (i / VIF_IW) * VIF_RV;
        if (tx >= IW) continue;
        u32 m1[VIF_RV], m2[VIF_RV];
        SqSum rr[VIF_RV], dd[VIF_RV], rd[VIF_RV];
        if (VIF_VFOLD && (sizeof(T) == 1 || VIF_VFOLD16)) {
            VifSum32 s1[VIF_RV], s2[VIF_RV];
            typename VifMoment<T, 0>::type sr[VIF_RV];
            typename VifMoment<T, 1>::type sd[VIF_RV];
            typename VifMoment<T, 2>::type srd[VIF_RV];
            vif_vertical_sym<FW>(&in_r[y][tx], &in_d[y][tx], s1, s2, sr, sd, srd);
#pragma unroll
            for (int j = 0; j < VIF_RV; ++j)
                m1[j] = s1[j].value(), m2[j] = s2[j].value(), rr[j] = sr[j].value(), dd[j] = sd[j].value(),
                rd[j] = srd[j].value();
        } else {  // unfolded
#pragma unroll
            for (int j = 0; j < VIF_RV; ++j) m1[j] = m2[j] = 0, rr[j] = dd[j] = rd[j] = 0;
#if VIF_VF64
            double pr[VIF_RV], pd[VIF_RV], prd[VIF_RV];
#pragma unroll
            for (int j = 0; j < VIF_RV; ++j) pr[j] = pd[j] = prd[j] = 0.0;
#endif
#pragma unroll
            for (int k = 0; k < VIF_RV + FW - 1; ++k) {
                const u32 a = in_r[y + k][tx], b = in_d[y + k][tx];
#if VIF_VF64
                const double aa = vif_u32_f64(a * a), bb = vif_u32_f64(b * b), ab = vif_u32_f64(a * b);
#endif
#pragma unroll
                for (int j = 0; j < VIF_RV; ++j) {
                    if (k - j < 0 || k - j >= FW) continue;
                    const u32 f = vif_tap<FW>(k - j);
                    const u32 fa = f * a, fb = f * b;
                    m1[j] += fa;
                    m2[j] += fb;
#if VIF_VF64
                    const double fd = vif_tapd<FW>(k - j);
                    pr[j] = fma(fd, aa, pr[j]);
                    pd[j] = fma(fd, bb, pd[j]);
                    prd[j] = fma(fd, ab, prd[j]);
#else
                    rr[j] += (SqSum)fa * a;
                    dd[j] += (SqSum)fb * b;
                    rd[j] += (SqSum)fa * b;
#endif
                }
            }
#if VIF_VF64
#pragma unroll
            for (int j = 0; j < VIF_RV; ++j)
                rr[j] = (SqSum)vif_f64_u64(pr[j]), dd[j] = (SqSum)vif_f64_u64(pd[j]), rd[j] = (SqSum)vif_f64_u64(prd[j]);
#endif
        }
#pragma unroll
        for (int j = 0; j < VIF_RV; ++j) {
            v_mu1[y + j][tx] = (u16)((m1[j] + rnd_mu) >> s_mu);
            v_mu2[y + j][tx] = (u16)((m2[j] + rnd_mu) >> s_mu);
            v_rr[y + j][tx] = (u32)((rr[j] + rnd_sq) >> s_sq);
            v_dd[y + j][tx] = (u32)((dd[j] + rnd_sq) >> s_sq);
            v_rd[y + j][tx] = (u32)((rd[j] + rnd_sq) >> s_sq);
        }
    }
    }
    __syncthreads();

    // horizontal pass and the per-pixel statistics: a thread item is a row strip of VIF_RH
    // columns; consecutive lanes take consecutive rows (see VIF_PITCH32)
    i64 num_log = 0, den_log = 0, num_non_log = 0, den_non_log = 0;
#if VIF_HMMA
    if constexpr (COLS) {
        vif_horizontal_mma(v_raw, (const u32*)scratch, x0, y0, w, h, log2_table, gain_limit, num_log, den_log,
                           num_non_log, den_non_log);
        __syncthreads();  // every warp has read the filter's fragments before the block sums reuse scratch
    } else
#endif
    for (int i = t; i < VIF_TH * (VIF_TW / VIF_RH); i += blockDim.x) {
        const int ty = i % VIF_TH, x = (i / VIF_TH) * VIF_RH;
        if (y0 + ty >= h || x0 + x >= w) continue;
        u32 mu1[VIF_RH], mu2[VIF_RH];
        u64 xx[VIF_RH], yy[VIF_RH], xy[VIF_RH];
#if VIF_SYM && VIF_HFOLD
        vif_horizontal_sym<FW>(&v_mu1[ty][x], &v_mu2[ty][x], &v_rr[ty][x], &v_dd[ty][x], &v_rd[ty][x], mu1, mu2, xx,
                               yy, xy);
#elif VIF_HF64
        double dx[VIF_RH], dy[VIF_RH], dxy[VIF_RH];
#pragma unroll
        for (int j = 0; j < VIF_RH; ++j) mu1[j] = mu2[j] = 0, dx[j] = dy[j] = dxy[j] = 0.0;
#pragma unroll
        for (int k = 0; k < VIF_RH + FW - 1; ++k) {
            const u32 a = v_mu1[ty][x + k], b = v_mu2[ty][x + k];
            const double p = vif_u32_f64(v_rr[ty][x + k]), q = vif_u32_f64(v_dd[ty][x + k]);
            const double c = vif_u32_f64(v_rd[ty][x + k]);
#pragma unroll
            for (int j = 0; j < VIF_RH; ++j) {
                if (k - j < 0 || k - j >= FW) continue;
                const u32 f = vif_tap<FW>(k - j);
                const double fd = vif_tapd<FW>(k - j);
                mu1[j] += f * a;
                mu2[j] += f * b;
                dx[j] = fma(fd, p, dx[j]);
                dy[j] = fma(fd, q, dy[j]);
                dxy[j] = fma(fd, c, dxy[j]);
            }
        }
#pragma unroll
        for (int j = 0; j < VIF_RH; ++j) xx[j] = vif_f64_u64(dx[j]), yy[j] = vif_f64_u64(dy[j]), xy[j] = vif_f64_u64(dxy[j]);
#else
#pragma unroll
        for (int j = 0; j < VIF_RH; ++j) mu1[j] = mu2[j] = 0, xx[j] = yy[j] = xy[j] = 0;
#pragma unroll
        for (int k = 0; k < VIF_RH + FW - 1; ++k) {
            const u32 a = v_mu1[ty][x + k], b = v_mu2[ty][x + k];
            const u32 p = v_rr[ty][x + k], q = v_dd[ty][x + k], c = v_rd[ty][x + k];
#pragma unroll
            for (int j = 0; j < VIF_RH; ++j) {
                if (k - j < 0 || k - j >= FW) continue;
                const u32 f = vif_tap<FW>(k - j);
                mu1[j] += f * a;
                mu2[j] += f * b;
                xx[j] += (u64)f * p;
                yy[j] += (u64)f * q;
                xy[j] += (u64)f * c;
            }
        }
#endif
#pragma unroll
        for (int j = 0; j < VIF_RH; ++j) {
            if (x0 + x + j >= w) break;
            vif_pixel(mu1[j], mu2[j], xx[j], yy[j], xy[j], log2_table, gain_limit, num_log, den_log, num_non_log,
                      den_non_log);
        }
    }
    i64* o = out + frame * out_stride + out_index;
#if VIF_BSUM
    i64 sums[4] = {num_log, den_log, num_non_log, den_non_log};
    vx_block_sums_i64<4>(sums, scratch);
    for (int m = 0; m < 4 && t == 0; ++m)
        if (sums[m]) vx_atomic_add_i64(o + m, sums[m]);
#else
    i64 s;
    s = vx_block_sum_i64(num_log, scratch);
    if (t == 0 && s) vx_atomic_add_i64(o + 0, s);
    __syncthreads();
    s = vx_block_sum_i64(den_log, scratch);
    if (t == 0 && s) vx_atomic_add_i64(o + 1, s);
    __syncthreads();
    s = vx_block_sum_i64(num_non_log, scratch);
    if (t == 0 && s) vx_atomic_add_i64(o + 2, s);
    __syncthreads();
    s = vx_block_sum_i64(den_non_log, scratch);
    if (t == 0 && s) vx_atomic_add_i64(o + 3, s);
#endif
    if (!DOWN) return;

    // ---- the next scale's pixels of this tile (see VifDownOut), from the staged input
    const int DF = FW / 2 + 1, DH = DF / 2;  // the next scale's taps: 9, 5, 3
    const int DW = VIF_TW / 2, DHT = VIF_TH / 2;  // its pixels a tile
    const int DCOLS = VIF_TW + DF - 2;      // staged columns their windows read (2 (DW-1) + DF)
    const int w2 = w / 2, h2 = h / 2, oy0 = y0 / 2, ox0 = x0 / 2;
    // staged row/column of the first tap of pixel (0, 0): 2 * 0 - DH, offset by HALF; the last
    // tap of the last pixel, HALF + DH + VIF_TH - 2 (rows) / VIF_TW - 2 (columns), is inside
    // the staged IH x IW because DH <= HALF + 1
    const int r0 = HALF - DH, c0 = HALF - DH;
    const u32 rnd = 1u << (s_mu - 1);       // s_mu = bpc >= 8 at scale 0, 16 above
    // the vertical sums reuse v_rr / v_dd (the horizontal pass read them before the barriers
    // of the block sums above)
#if VIF_MMA
    if constexpr (COLS) {  // on the tensor cores, D's fragments in v_mu1 (free as v_rr is)
        static_assert(MU_BYTES >= 512 * 4 && DCOLS <= 56 && DHT == 16, "the tile's shapes");
        vif_mma_down_filter((u32*)&v_mu1[0][0]);
        __syncthreads();
        vif_down_vertical_mma((const u8*)&in_r[0][0], (const u8*)&in_d[0][0], r0, c0, (const u32*)&v_mu1[0][0],
                              rnd, s_mu, v_rr, v_dd);
    } else
#endif
    for (int i = t; i < DHT * DCOLS; i += blockDim.x) {
        const int ty = i / DCOLS, c = i % DCOLS;
        if (oy0 + ty >= h2) continue;
        u32 ar = 0, ad = 0;
#pragma unroll
        for (int k = 0; k < DF; ++k) {
            const u32 f = vif_tap<DF>(k);
            ar += f * vif_staged<COLS>(&in_r[0][0], r0 + 2 * ty + k, c0 + c);
            ad += f * vif_staged<COLS>(&in_d[0][0], r0 + 2 * ty + k, c0 + c);
        }
        v_rr[ty][c] = (ar + rnd) >> s_mu;
        v_dd[ty][c] = (ad + rnd) >> s_mu;
    }
    __syncthreads();
    for (int i = t; i < DHT * DW; i += blockDim.x) {
        const int ty = i / DW, tx = i % DW;
        const int oy = oy0 + ty, ox = ox0 + tx;
        if (oy >= h2 || ox >= w2) continue;
        u32 ar = 0, ad = 0;
#pragma unroll
        for (int k = 0; k < DF; ++k) {
            const u32 f = vif_tap<DF>(k);
            ar += f * v_rr[ty][2 * tx + k];
            ad += f * v_dd[ty][2 * tx + k];
        }
        const i64 o2 = frame * down.frame_stride + (i64)oy * down.pitch + ox;
        down.ref[o2] = (u16)((ar + 32768) >> 16);
        down.dis[o2] = (u16)((ad + 32768) >> 16);
    }
}

// Decimation to the next scale: filter with that scale's taps (FW), keep even
// rows and columns.  Output (w/2) x (h/2) u16, pitch `out_pitch`.  A block's
// input rectangle is staged in shared memory once (mirrored as it is read), so
// the vertical taps read neighbours there rather than the picture FW times.
#define VD_TW 32
#define VD_TH 16
#define VD_IW (2 * VD_TW + 16)
#define VD_IH (2 * VD_TH + 16)

template <typename T, int FW>
VX_DEVICE void vif_down_impl(const T* ref, const T* dis, i64 frame_stride, int w, int h, i64 pitch, int s_mu,
                             u16* out_ref, u16* out_dis, i64 out_frame_stride, i64 out_pitch)
{
    const int HALF = FW / 2;
    const int IW = 2 * VD_TW + FW - 1;  // input columns for VD_TW outputs
    const int IH = 2 * VD_TH + FW - 2;  // input rows for VD_TH outputs (the even rows' windows)
    __shared__ VX_ALIGN(16) u16 in_r[VD_IH][VD_IW];
    __shared__ VX_ALIGN(16) u16 in_d[VD_IH][VD_IW];
    __shared__ u32 v_r[VD_TH][VD_IW];
    __shared__ u32 v_d[VD_TH][VD_IW];
    const int frame = blockIdx.z;
    const T* r = ref + frame * frame_stride;
    const T* d = dis + frame * frame_stride;
    const int w2 = w / 2, h2 = h / 2;
    const int ox0 = blockIdx.x * VD_TW, oy0 = blockIdx.y * VD_TH;
    const int ix0 = 2 * ox0 - HALF, iy0 = 2 * oy0 - HALF;
    const u32 rnd = s_mu ? (1u << (s_mu - 1)) : 0u;
    const int t = threadIdx.x;
    vif_stage(r, d, pitch, w, h, HALF, iy0, ix0, IH, IW, &in_r[0][0], &in_d[0][0], VD_IW);
    __syncthreads();
    for (int i = t; i < VD_TH * IW; i += blockDim.x) {
        const int ty = i / IW, tx = i % IW;
        u32 ar = 0, ad = 0;
        if (oy0 + ty < h2) {
#pragma unroll
            for (int k = 0; k < FW; ++k) {
                const u32 f = vif_tap<FW>(k);
                ar += f * (u32)in_r[2 * ty + k][tx];
                ad += f * (u32)in_d[2 * ty + k][tx];
            }
        }
        v_r[ty][tx] = (ar + rnd) >> s_mu;
        v_d[ty][tx] = (ad + rnd) >> s_mu;
    }
    __syncthreads();
    for (int i = t; i < VD_TH * VD_TW; i += blockDim.x) {
        const int ty = i / VD_TW, tx = i % VD_TW;
        const int oy = oy0 + ty, ox = ox0 + tx;
        if (oy >= h2 || ox >= w2) continue;
        u32 ar = 0, ad = 0;
#pragma unroll
        for (int k = 0; k < FW; ++k) {
            const u32 f = vif_tap<FW>(k);
            ar += f * v_r[ty][2 * tx + k];
            ad += f * v_d[ty][2 * tx + k];
        }
        const i64 o = frame * out_frame_stride + (i64)oy * out_pitch + ox;
        out_ref[o] = (u16)((ar + 32768) >> 16);
        out_dis[o] = (u16)((ad + 32768) >> 16);
    }
}

#if defined(VX_EMU)
#define __launch_bounds__(...)
#endif
// three blocks a multiprocessor (at most 85 registers a thread; shared memory allows four)
#ifndef VIF_STATS_MINB
#define VIF_STATS_MINB 3
#endif

#define VIF_STATS(NAME, T, FW)                                                                              \
    VX_KERNEL void __launch_bounds__(VIF_THREADS, VIF_STATS_MINB) NAME(const T* ref, const T* dis, i64 frame_stride, int w, int h, i64 pitch, int s_mu,      \
                        int s_sq, const u16* log2_table, double gain_limit, i64* out, int out_stride,          \
                        int out_index)                                                                       \
    {                                                                                                        \
        vif_stats_impl<T, FW, false>(ref, dis, frame_stride, w, h, pitch, s_mu, s_sq, log2_table, gain_limit,  \
                                     out, out_stride, out_index);                                            \
    }

// scale s's statistics and the decimation to scale s + 1 in one launch (VifDownOut); the grid
// is the statistics' (VIF_TW x VIF_TH tiles), the next scale's pictures as vx_vif_down<s+1>'s
#define VIF_STATS_DOWN(NAME, T, FW)                                                                         \
    VX_KERNEL void __launch_bounds__(VIF_THREADS, VIF_STATS_MINB) NAME(const T* ref, const T* dis, i64 frame_stride, int w, int h, i64 pitch, int s_mu,      \
                        int s_sq, const u16* log2_table, double gain_limit, i64* out, int out_stride,          \
                        int out_index, u16* out_ref, u16* out_dis, i64 out_frame_stride, i64 out_pitch)      \
    {                                                                                                        \
        VifDownOut down;                                                                                     \
        down.ref = out_ref, down.dis = out_dis, down.frame_stride = out_frame_stride, down.pitch = out_pitch; \
        vif_stats_impl<T, FW, true>(ref, dis, frame_stride, w, h, pitch, s_mu, s_sq, log2_table, gain_limit,   \
                                    out, out_stride, out_index, down);                                       \
    }

// (vx_vif_stats0_u8, scale 0's statistics alone, is not launched by the lane: it stays for
// scripts/bench_vif_tiles.sh's A/B against earlier revisions)
VIF_STATS(vx_vif_stats0_u8, u8, 17)
VIF_STATS(vx_vif_stats3, u16, 3)
VIF_STATS_DOWN(vx_vif_stats0_down_u8, u8, 17)
VIF_STATS_DOWN(vx_vif_stats0_down_u16, u16, 17)
VIF_STATS_DOWN(vx_vif_stats1_down, u16, 9)
VIF_STATS_DOWN(vx_vif_stats2_down, u16, 5)

#define VIF_DOWN(NAME, T, FW)                                                                                \
    VX_KERNEL void NAME(const T* ref, const T* dis, i64 frame_stride, int w, int h, i64 pitch, int s_mu,      \
                        u16* out_ref, u16* out_dis, i64 out_frame_stride, i64 out_pitch)                     \
    {                                                                                                        \
        vif_down_impl<T, FW>(ref, dis, frame_stride, w, h, pitch, s_mu, out_ref, out_dis, out_frame_stride,  \
                             out_pitch);                                                                     \
    }

// scale 0's decimation alone: with vif_skip_scale0 (and for scripts/bench_vif_tiles.sh)
VIF_DOWN(vx_vif_down1_u8, u8, 9)
VIF_DOWN(vx_vif_down1_u16, u16, 9)
