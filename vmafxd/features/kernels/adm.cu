// Integer ADM (libvmaf's "adm" extractor) for a batch of frames: the device
// twin of vmafxd.features.adm.compute_stats.  Per frame it produces the 36
// int64 sums of adm.AdmStats, record layout
//     out[ 0 + 3 * scale + band]  num  (masked restored detail, the DLM numerator)
//     out[12 + 3 * scale + band]  den  (reference detail)
//     out[24 + 3 * scale + band]  aim  (masked additive impairment)
// (band 0 = h, 1 = v, 2 = d); the host turns them into scores with the CPU
// twin's adm.metrics_from_stats.  Every rule below (C storage types and
// their wrap-arounds, truncating and arithmetic shifts, float-vs-double
// rounding, libvmaf's AVX-512 vector columns against its C leftovers) is
// the one _adm_dwt.py / _adm_core.py reproduce and document; the comments
// here say only how the kernel maps them.
//
// Launches per batch (frame = blockIdx.z everywhere):
//   1. per scale s = 0..3, vx_adm_dwt0_u8 / _u16 (s = 0, from the staging luma) or
//      vx_adm_dwt_s16 (s = 1, from scale 0's int16 LL band) /
//      vx_adm_dwt_s32 (s = 2, 3): one DWT level of ref and dist, writing the
//      4 bands (a, h, v, d) of both to scratch (int16 at scale 0, int32 above;
//      every scale's bands stay until the batch's end);
//   2. vx_adm_stats_narrow (s = 0, after its DWT) and vx_adm_stats_wide3 (s = 1..3
//      in one launch, after the last DWT; vx_adm_stats_wide is one of them alone):
//      decouple, CSF, contrast masking, cubes and per-row sums of a scale, adding
//      the 9 sums (num, aim, den x 3 bands) of each block to the frame's record
//      with 64-bit atomics (integers: any order gives the same total).
// 6 launches (5 with adm_skip_scale0, whose DWT then writes only LL).
//
// DWT tiling: a block makes an ADM_DWT_TY x ADM_DWT_TX (8 x 124) tile of
// output band pixels for ref and dist.  Phase V: one item per (role, input
// column) of the tile (2 x 250 items; 8-bit tiles inside the picture: per
// role, half the rows and 4 columns, 2 x 2 x 63 items): a sliding window down
// the column reads each input row once and makes the low- and high-pass
// vertical sums of the output rows into shared memory (int32, 32 KB); phase H:
// one item per (role, two neighbouring output pixels): the horizontal taps
// from shared memory (a 16- and an 8-byte load of each sum), 4 bands written
// (coalesced along x).  All loop divisions are by constants.
//
// Stats tiling: a block owns a STRIP of TH region rows and walks it left to
// right in chunks of TW columns, because libvmaf rounds and shifts the sum of
// each whole region ROW before adding rows: a block that sees whole rows
// needs no per-row scratch in global memory and no second pass.  Per chunk:
//   phase 1, over the chunk grown by the one-pixel masking ring ((TH+2) x
//     (TW+2) positions, mirrored at the band edges as libvmaf's neighbour
//     rule says): load o = ref (h, v, d) and t = dist (h, v, d), decouple into
//     restored r and additive a, CSF both; keep in shared memory the per-pixel
//     sum over bands of the 1/30 "filtered" magnitudes of csf(a) (fsA, masks
//     the numerator) and of csf(r) (fsR, masks AIM), and, for the chunk's own
//     pixels, r and a (the sources of the two masked sums);
//   phase 2, over the chunk's own pixels: the 3x3 thresholds from fsA / fsR
//     (the centre term recomputed from the stored r / a: the CSF is a
//     multiply and a shift), the masked cubes of r (num) and a (aim) and the
//     cubes of |o| (den, o re-read from global memory: L1/L2 hits).  Thread
//     "segments" own one row's columns g, g + NG, g + 2 NG, ... of every chunk
//     and keep their 9 partial sums in shared memory across chunks (a slot is
//     written by its one owner thread only); after the last chunk the NG slots
//     of each row are added, rounded and shifted (libvmaf's per-row step),
//     rows added, and 9 atomics per block go to the record.
// Shared memory (default TH 8, TW 64): narrow 30.4 KB, wide 36.6 KB (with
// ADM_STATS_TH 16: TW 64 / 32, 41.4 / 36.8 KB); 256 threads.  Static arrays
// under 48 KB: no launch attribute needed.
//
// Cost on the H200 (1080p 8-bit, batch 32, per frame, ncu, fifteenth session):
// DWT 7.5 + 3.7 + 1.3 + 0.5 us, stats 10.7 (scale 0) + 7.0 (scales 1-3) us:
// 30.7 us for ADM.
//
// Arithmetic notes for speed: products that fit 32 bits are done in 32 bits
// (int16 bands, Q15 gains, CSF weights); 32x32->64 products use the widening
// multiply; 64-bit products only where libvmaf's values need them (scale 1-3
// gains and weights, cubes).  Integer wrap-arounds of C are done on unsigned
// types and converted back (never signed overflow).
//
// Loops stride by blockDim.x (the emulator runs one thread a block); every
// shared array is sized by constants; no warp-size assumption.

#if defined(VX_EMU)
#include <math.h>
#define __launch_bounds__(...)
#endif

#define ADM_THREADS 256
// Rows per stats block (a power of two dividing ADM_THREADS; the host's
// grid must use the same: vmafxd/lanes/gpu/adm.py _STATS_TH) and the
// minimum resident blocks per multiprocessor asked of the register allocator.
// Measured on the H200 at 1080p 8-bit, batch 32, per frame over the four
// scales: stats 21.1 us at TH 8 / MINB 4 (64 registers) and TH 16 / MINB 4,
// 22.9 to 26.3 us at TH 16 / MINB 1..3 (80 to 120 registers); TH 8 gives
// twice the blocks for small batches.  DWT 14.6 us at DWT_MINB 6 (40
// registers), 17.5 at DWT_MINB 1.
#ifndef ADM_STATS_TH
#define ADM_STATS_TH 8
#endif
#ifndef ADM_STATS_MINB
#define ADM_STATS_MINB 4
#endif
#ifndef ADM_DWT_MINB
#define ADM_DWT_MINB 6
#endif

// DWT output tile (band pixels) and its shared vertical-pass rows.
#define ADM_DWT_TX 124
#define ADM_DWT_TY 8
#define ADM_DWT_IW (2 * ADM_DWT_TX + 2)  // 250 input columns
#define ADM_DWT_PX ((ADM_DWT_TX + 1) / 2)  // pairs of outputs a tile row
#define ADM_DWT_QUADS ((ADM_DWT_IW + 3) / 4)  // groups of 4 shared columns covering IW (the 8-bit DWT)
// the shared rows' length: IW rounded up to 4, plus 4 (a last pair's 8-byte load past the
// tile's last column stays in its row), 16-byte aligned rows
#define ADM_DWT_SW (((ADM_DWT_IW + 3) & ~3) + 4)

__constant__ i32 adm_lo[4] = {15826, 27411, 7345, -4240};
__constant__ i32 adm_hi[4] = {-4240, -7345, 27411, -15826};

// The DWT's 4-tap sums of the low (HI false) or high filter: in u32 at scale 0 (libvmaf's
// int32 sums, wrapping as the device wraps them), in 64 bits above.
template <bool HI> VX_DEVICE i32 adm_filter_tap(int k) { return HI ? adm_hi[k] : adm_lo[k]; }

template <bool HI>
VX_DEVICE u32 adm_taps_u32(u32 x0, u32 x1, u32 x2, u32 x3)
{
    return (u32)adm_filter_tap<HI>(0) * x0 + (u32)adm_filter_tap<HI>(1) * x1 + (u32)adm_filter_tap<HI>(2) * x2 +
           (u32)adm_filter_tap<HI>(3) * x3;
}

template <bool HI>
VX_DEVICE i64 adm_taps_i64(i32 x0, i32 x1, i32 x2, i32 x3)
{
    return (i64)adm_filter_tap<HI>(0) * x0 + (i64)adm_filter_tap<HI>(1) * x1 + (i64)adm_filter_tap<HI>(2) * x2 +
           (i64)adm_filter_tap<HI>(3) * x3;
}
#define ADM_LO_SUM 46342

// Per-scale constants: a table of int64 built on the host from the CPU twin's
// plan (vmafxd/lanes/gpu/adm.py).  Its indices P_* and P_COUNT are generated
// from the feature's declaration (DECLARATION.kernel_params in
// vmafxd/features/adm.py) and prepended to this source by the kernel compiler
// (vmafxd/lanes/gpu/kernels.py: source()); the host fills the table by the
// same names, so the two sides cannot drift apart.
#ifndef P_COUNT
#error "adm.cu needs its generated parameter indices: compile it through vmafxd.lanes.gpu.kernels.source()"
#endif

union adm_bits {
    i64 i;
    double d;
};

VX_DEVICE double adm_double(i64 bits)
{
    adm_bits b;
    b.i = bits;
    return b.d;
}

VX_DEVICE i32 adm_abs32(i32 x)  // C's abs on int32: INT_MIN stays INT_MIN
{
    return x < 0 ? (i32)(0u - (u32)x) : x;
}

VX_DEVICE i64 adm_low32(i64 x)  // the low 32 bits, sign-extended (a store to int32)
{
    return (i64)(i32)(u32)(u64)x;
}

// libvmaf's DWT edge rule: -1 -> 1 (whole-sample mirror), n -> n-1, n+1 -> n-2.
VX_DEVICE int adm_tap(int e, int n)
{
    if (e < 0) return -e;
    if (e >= n) return 2 * n - e - 1;
    return e;
}

// ------------------------------------------------------------------------------------
// DWT
// ------------------------------------------------------------------------------------

// One DWT level of ref and dist.  A block makes an ADM_DWT_TY x ADM_DWT_TX
// tile of output band pixels.
//
// Phase V: one item per (role, input column) of the tile (2 * IW = 500
// items, 2 per thread): a sliding window down the column loads each of the
// 2 * TY + 2 input rows once and makes the low- and high-pass vertical sums
// of the TY output rows (shared memory, int32).  8-bit scale 0 of a tile whose
// columns lie inside the picture: an item is 4 columns and half the output
// rows (adm_dwt_quad: a 4-byte load for 4 columns, 16-byte shared stores), 252
// items.  The tile is 124 wide (not 127, which filled 256 columns) so that its
// first input column 2 ox0 - 1 is 3 mod 4 in every tile and 63 groups of 4
// cover its 250 columns.
// Phase H: one item per (role, output pair j, j + 1): the horizontal taps of
// both from 6 shared columns (2j .. 2j + 5: 16-byte aligned, conflict-free),
// 4 bands written (consecutive threads, consecutive column pairs).  On the
// H200 (ncu, 1080p 8-bit, batch 32, docs/gpu-runs.md fifteenth session) the
// scale-0 DWT went from 270 to 240 us a batch; before, the one-column items
// loaded one byte a column a row and phase H's stride-2 reads met 2-way bank
// conflicts.
//
// S0 (scale 0, u8/u16 luma in): int32 sums wrapping as C's (done in u32),
// the vertical pass recentres and shifts by bpc, the horizontal by 16, bands
// stored as int16.  Scales 1-3 (the previous LL band in, int16 or int32):
// 64-bit sums (32x32->64 products), each pass rounded, shifted and stored
// as int32.  Band planes of a scale: role * 4 + (0 a, 1 h, 2 v, 3 d).
// Phase V of one input column: the low- and high-pass vertical sums of the tile's ny output
// rows, from tap row y (= 2 oy0 - 1) down, into lo[r * ADM_DWT_SW] / hi[r * ADM_DWT_SW].
// MIRROR: rows through adm_tap (the block touches the top or bottom edge); otherwise every
// tap row is inside the picture and the rows are read by a stepped pointer.
template <bool MIRROR, typename T, bool S0>
VX_DEVICE void adm_dwt_column(const T* s, int y, int h, int pitch, int ny, u32 k_lo, u32 k_hi, int v_add,
                              int v_shift, i32* lo_out, i32* hi_out)
{
    const i64 p1 = pitch, p2 = 2 * (i64)pitch, p3 = 3 * (i64)pitch;
    const T* p = s + (MIRROR ? 0 : (i64)y * pitch);
    i32 x0, x1;
    if (MIRROR) {
        x0 = s[adm_tap(y, h) * pitch];
        x1 = s[adm_tap(y + 1, h) * pitch];
    } else {
        x0 = p[0];
        x1 = p[p1];
    }
#pragma unroll
    for (int r = 0; r < ADM_DWT_TY; ++r) {
        if (r >= ny) break;
        i32 x2, x3;
        if (MIRROR) {
            x2 = s[adm_tap(y + 2, h) * pitch];
            x3 = s[adm_tap(y + 3, h) * pitch];
        } else {
            x2 = p[p2];
            x3 = p[p3];
            p += p2;
        }
        if (S0) {
            const u32 lo = adm_taps_u32<false>(x0, x1, x2, x3), hi = adm_taps_u32<true>(x0, x1, x2, x3);
            lo_out[r * ADM_DWT_SW] = (i32)(lo + k_lo) >> v_shift;
            hi_out[r * ADM_DWT_SW] = (i32)(hi + k_hi) >> v_shift;
        } else {
            const i64 lo = adm_taps_i64<false>(x0, x1, x2, x3), hi = adm_taps_i64<true>(x0, x1, x2, x3);
            lo_out[r * ADM_DWT_SW] = (i32)((lo + v_add) >> v_shift);
            hi_out[r * ADM_DWT_SW] = (i32)((hi + v_add) >> v_shift);
        }
        x0 = x2;
        x1 = x3;
        y += 2;
    }
}

// Phase V of four neighbouring shared columns c .. c + 3 (c a multiple of 4) of 8-bit samples
// (scale 0 of blocks whose columns lie inside the picture): input columns c0 + c .. + 3, where
// c0 = 3 mod 4 (2 ox0 - 1 with ox0 a multiple of 4), are bytes 3 of the aligned 4-byte word at
// s and 0 .. 2 of the next (s: the input row's byte c0 + c - 3); a 16-byte store a row for
// each of the low and high sums, conflict-free.  The tile's output rows r0 .. r0 + n - 1
// (lo_out, hi_out: row r0, column c), from tap row y = 2 (oy0 + r0) - 1 down.  The same sums
// as adm_dwt_column<MIRROR, u8, true> of each column.
VX_DEVICE u32 adm_dwt_quad_row(const u8* s)  // input columns c0 + c .. + 3 as bytes 0 .. 3
{
    return (vx_load_quad(s) >> 24) | (vx_load_quad(s + 4) << 8);
}

// The low (HI false) or high vertical sums of 4 columns from their tap rows x0 .. x3 (column
// k in byte k), recentred and shifted, stored as one 16-byte run at `out`
template <bool HI>
VX_DEVICE void adm_dwt_quad_sums(u32 x0, u32 x1, u32 x2, u32 x3, u32 k_add, int v_shift, i32* out)
{
    i32 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const u32 a = (x0 >> (8 * k)) & 255u, b = (x1 >> (8 * k)) & 255u, e = (x2 >> (8 * k)) & 255u,
                  d = (x3 >> (8 * k)) & 255u;
        v[k] = (i32)(adm_taps_u32<HI>(a, b, e, d) + k_add) >> v_shift;
    }
    vx_st_vec<VxI32x4>(out, VxI32x4{v[0], v[1], v[2], v[3]});
}

template <bool MIRROR>
VX_DEVICE void adm_dwt_quad(const u8* s, int y, int h, int pitch, int n, u32 k_lo, u32 k_hi, int v_shift,
                            i32* lo_out, i32* hi_out)
{
    const i64 p1 = pitch, p2 = 2 * (i64)pitch, p3 = 3 * (i64)pitch;
    const u8* p = s + (MIRROR ? 0 : (i64)y * pitch);
    u32 x0, x1;
    if (MIRROR) {
        x0 = adm_dwt_quad_row(s + (i64)adm_tap(y, h) * pitch);
        x1 = adm_dwt_quad_row(s + (i64)adm_tap(y + 1, h) * pitch);
    } else {
        x0 = adm_dwt_quad_row(p);
        x1 = adm_dwt_quad_row(p + p1);
    }
#pragma unroll
    for (int r = 0; r < ADM_DWT_TY / 2; ++r) {
        if (r >= n) break;
        u32 x2, x3;
        if (MIRROR) {
            x2 = adm_dwt_quad_row(s + (i64)adm_tap(y + 2, h) * pitch);
            x3 = adm_dwt_quad_row(s + (i64)adm_tap(y + 3, h) * pitch);
        } else {
            x2 = adm_dwt_quad_row(p + p2);
            x3 = adm_dwt_quad_row(p + p3);
            p += p2;
        }
        adm_dwt_quad_sums<false>(x0, x1, x2, x3, k_lo, v_shift, lo_out + r * ADM_DWT_SW);
        adm_dwt_quad_sums<true>(x0, x1, x2, x3, k_hi, v_shift, hi_out + r * ADM_DWT_SW);
        x0 = x2;
        x1 = x3;
        y += 2;
    }
}

// The four bands of one output from the horizontal taps' inputs: l0..l3 of the low vertical
// sums (a: low taps, v: high), g0..g3 of the high ones (h: low taps, d: high); only a when
// lo_only.
template <typename TOUT, bool S0>
VX_DEVICE void adm_dwt_bands(TOUT* o, int plane_stride, int lo_only, int h_add, int h_shift, i32 l0, i32 l1, i32 l2,
                             i32 l3, i32 g0, i32 g1, i32 g2, i32 g3)
{
    if (S0) {
        const u32 a = adm_taps_u32<false>(l0, l1, l2, l3);
        o[0] = (TOUT)((i32)(a + 32768u) >> 16);
        if (lo_only) return;
        const u32 v = adm_taps_u32<true>(l0, l1, l2, l3);
        const u32 hh = adm_taps_u32<false>(g0, g1, g2, g3), d = adm_taps_u32<true>(g0, g1, g2, g3);
        o[plane_stride] = (TOUT)((i32)(hh + 32768u) >> 16);
        o[2 * plane_stride] = (TOUT)((i32)(v + 32768u) >> 16);
        o[3 * plane_stride] = (TOUT)((i32)(d + 32768u) >> 16);
    } else {
        const i64 a = adm_taps_i64<false>(l0, l1, l2, l3), v = adm_taps_i64<true>(l0, l1, l2, l3);
        const i64 hh = adm_taps_i64<false>(g0, g1, g2, g3), d = adm_taps_i64<true>(g0, g1, g2, g3);
        o[0] = (TOUT)((a + h_add) >> h_shift);
        o[plane_stride] = (TOUT)((hh + h_add) >> h_shift);
        o[2 * plane_stride] = (TOUT)((v + h_add) >> h_shift);
        o[3 * plane_stride] = (TOUT)((d + h_add) >> h_shift);
    }
}

template <typename T, typename TOUT, bool S0>
VX_DEVICE void adm_dwt_impl(const T* src_r, const T* src_d, i64 src_fstride, int src_pitch, int w, int h,
                            int v_add, int v_shift, int h_add, int h_shift, int lo_only, TOUT* dst,
                            i64 dst_fstride, int dst_pitch, int plane_stride)
{
    __shared__ VX_ALIGN(16) i32 vlo[2][ADM_DWT_TY][ADM_DWT_SW];
    __shared__ VX_ALIGN(16) i32 vhi[2][ADM_DWT_TY][ADM_DWT_SW];
    const int frame = blockIdx.z;
    const int t = threadIdx.x;
    const int bw = (w + 1) / 2, bh = (h + 1) / 2;
    const int ox0 = blockIdx.x * ADM_DWT_TX, oy0 = blockIdx.y * ADM_DWT_TY;
    const int nx = bw - ox0 < ADM_DWT_TX ? bw - ox0 : ADM_DWT_TX;
    const int ny = bh - oy0 < ADM_DWT_TY ? bh - oy0 : ADM_DWT_TY;
    const int ncol = 2 * nx + 2;
    const int c0 = 2 * ox0 - 1;  // input column of shared column 0 (tap -1 of output ox0)
    // S0: recentring constants, int32 arithmetic as C (v_add = 2^(bpc-1), v_shift = bpc)
    const u32 k_lo = (u32)v_add - (u32)ADM_LO_SUM * (u32)v_add;
    const u32 k_hi = (u32)v_add;
    // Blocks whose tap rows all lie inside the picture (all but the first and last block rows)
    // read them without the edge rule: a pointer stepped two rows at a time instead of
    // adm_tap's compares, selects and a multiply per row (the same rows, the same integers).
    const bool rows_inside = 2 * oy0 - 1 >= 0 && 2 * (oy0 + ny - 1) + 2 <= h - 1;
    // 8-bit scale 0, the tile's columns inside the picture (c0 = 3 mod 4, every load below
    // within the row), rows aligned: four columns an item (adm_dwt_quad; items (role, half of
    // the output rows, group of 4 shared columns): 2 x 2 x 63 of 256 threads)
    if (sizeof(T) == 1 && S0 && c0 >= 3 && (c0 & 3) == 3 && c0 - 3 + 4 * ADM_DWT_QUADS + 4 <= w && (src_pitch & 3) == 0 &&
        (((u64)src_r | (u64)src_d | (u64)src_fstride) & 3) == 0) {
        const int half = ADM_DWT_TY / 2;
        for (int i = t; i < 4 * ADM_DWT_QUADS; i += blockDim.x) {
            const int role = i / (2 * ADM_DWT_QUADS), rh = (i / ADM_DWT_QUADS) & 1, m = i % ADM_DWT_QUADS;
            const int r0 = rh * half, n = ny - r0;
            if (n <= 0) continue;
            const u8* s = (const u8*)(role ? src_d : src_r) + frame * src_fstride + c0 - 3 + 4 * m;
            if (rows_inside)
                adm_dwt_quad<false>(s, 2 * (oy0 + r0) - 1, h, src_pitch, n, k_lo, k_hi, v_shift,
                                    &vlo[role][r0][4 * m], &vhi[role][r0][4 * m]);
            else
                adm_dwt_quad<true>(s, 2 * (oy0 + r0) - 1, h, src_pitch, n, k_lo, k_hi, v_shift,
                                   &vlo[role][r0][4 * m], &vhi[role][r0][4 * m]);
        }
    } else for (int i = t; i < 2 * ADM_DWT_IW; i += blockDim.x) {
        const int role = i / ADM_DWT_IW, c = i - role * ADM_DWT_IW;
        if (c >= ncol) continue;
        const T* s = (role ? src_d : src_r) + frame * src_fstride + adm_tap(c0 + c, w);
        if (rows_inside)
            adm_dwt_column<false, T, S0>(s, 2 * oy0 - 1, h, src_pitch, ny, k_lo, k_hi, v_add, v_shift,
                                         &vlo[role][0][c], &vhi[role][0][c]);
        else
            adm_dwt_column<true, T, S0>(s, 2 * oy0 - 1, h, src_pitch, ny, k_lo, k_hi, v_add, v_shift,
                                        &vlo[role][0][c], &vhi[role][0][c]);
    }
    __syncthreads();
    // Phase H: an item is two neighbouring outputs j, j + 1 of a row (j even), whose taps are
    // shared columns 2j .. 2j + 5 of the low and high sums: a 16- and an 8-byte load each
    for (int i = t; i < 2 * ADM_DWT_TY * ADM_DWT_PX; i += blockDim.x) {
        const int role = i / (ADM_DWT_TY * ADM_DWT_PX), rem = i - role * (ADM_DWT_TY * ADM_DWT_PX);
        const int r = rem / ADM_DWT_PX, j = 2 * (rem - r * ADM_DWT_PX);
        if (r >= ny || j >= nx) continue;
        TOUT* o = dst + frame * dst_fstride + role * 4 * plane_stride + ((oy0 + r) * dst_pitch + ox0 + j);
        const VxI32x4 l = vx_ld_vec<VxI32x4>(&vlo[role][r][2 * j]);
        const VxI32x2 ln = vx_ld_vec<VxI32x2>(&vlo[role][r][2 * j + 4]);
        VxI32x4 g = {0, 0, 0, 0};
        VxI32x2 gn = {0, 0};
        if (!(S0 && lo_only)) {
            g = vx_ld_vec<VxI32x4>(&vhi[role][r][2 * j]);
            gn = vx_ld_vec<VxI32x2>(&vhi[role][r][2 * j + 4]);
        }
        adm_dwt_bands<TOUT, S0>(o, plane_stride, lo_only, h_add, h_shift, l.x, l.y, l.z, l.w, g.x, g.y, g.z, g.w);
        if (j + 1 < nx)
            adm_dwt_bands<TOUT, S0>(o + 1, plane_stride, lo_only, h_add, h_shift, l.z, l.w, ln.x, ln.y, g.z, g.w,
                                    gn.x, gn.y);
    }
}

// Scale 0 from the staging luma (ref and dist planes, frame stride and pitch in elements).
VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_DWT_MINB) vx_adm_dwt0_u8(const u8* src_r, const u8* src_d, i64 src_fstride, int src_pitch, int w, int h,
                              int bpc, int lo_only, i16* dst, i64 dst_fstride, int dst_pitch, int plane_stride)
{
    adm_dwt_impl<u8, i16, true>(src_r, src_d, src_fstride, src_pitch, w, h, 1 << (bpc - 1), bpc, 0, 0, lo_only,
                                dst, dst_fstride, dst_pitch, plane_stride);
}

VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_DWT_MINB) vx_adm_dwt0_u16(const u16* src_r, const u16* src_d, i64 src_fstride, int src_pitch, int w, int h,
                               int bpc, int lo_only, i16* dst, i64 dst_fstride, int dst_pitch, int plane_stride)
{
    adm_dwt_impl<u16, i16, true>(src_r, src_d, src_fstride, src_pitch, w, h, 1 << (bpc - 1), bpc, 0, 0, lo_only,
                                 dst, dst_fstride, dst_pitch, plane_stride);
}

// Scales 1-3 from the previous scale's LL band: `src` is that scale's plane
// 0 (ref a); dist a is plane 4, `src_plane_stride` elements per plane.
VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_DWT_MINB) vx_adm_dwt_s16(const i16* src, i64 src_fstride, int src_pitch, int src_plane_stride, int w, int h,
                              int v_add, int v_shift, int h_add, int h_shift, i32* dst, i64 dst_fstride,
                              int dst_pitch, int plane_stride)
{
    adm_dwt_impl<i16, i32, false>(src, src + 4 * (i64)src_plane_stride, src_fstride, src_pitch, w, h, v_add,
                                  v_shift, h_add, h_shift, 0, dst, dst_fstride, dst_pitch, plane_stride);
}

VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_DWT_MINB) vx_adm_dwt_s32(const i32* src, i64 src_fstride, int src_pitch, int src_plane_stride, int w, int h,
                              int v_add, int v_shift, int h_add, int h_shift, i32* dst, i64 dst_fstride,
                              int dst_pitch, int plane_stride)
{
    adm_dwt_impl<i32, i32, false>(src, src + 4 * (i64)src_plane_stride, src_fstride, src_pitch, w, h, v_add,
                                  v_shift, h_add, h_shift, 0, dst, dst_fstride, dst_pitch, plane_stride);
}

// ------------------------------------------------------------------------------------
// Per-pixel stages (_adm_core.py)
// ------------------------------------------------------------------------------------

// (float)x / 4096.0: one rounding of the integer to float, exact scaling in double.
VX_DEVICE double adm_over4096(float f)
{
    return (double)f / 4096.0;
}

// The 1-degree test at scale 0 (int16 bands).  The exact sums are below
// 2^31 in magnitude except +2^31 itself (all inputs -32768): C converts the
// exact (64-bit) sum, AVX-512 its int32 wrap (-2^31).  The right side is
// multiplied (cos^2 |u|^2) |v|^2 in C, (|u|^2 |v|^2) cos^2 in AVX-512.
VX_DEVICE bool adm_angle_narrow(i32 oh, i32 ov, i32 th, i32 tv, bool vec, double cos2)
{
    // int16 products fit int32; their sums are taken modulo 2^32
    const u32 ot = (u32)(oh * th) + (u32)(ov * tv);
    const u32 om = (u32)(oh * oh) + (u32)(ov * ov);
    const u32 tm = (u32)(th * th) + (u32)(tv * tv);
    float fot, fom, ftm;
    if (vec) {
        fot = (float)(i32)ot;
        fom = (float)(i32)om;
        ftm = (float)(i32)tm;
    } else {
        // the exact sum: (i32) unless it is +2^31 (then 0x80000000 as u32, exact in float)
        fot = ot == 0x80000000u ? 2147483648.0f : (float)(i32)ot;
        fom = om == 0x80000000u ? 2147483648.0f : (float)(i32)om;
        ftm = tm == 0x80000000u ? 2147483648.0f : (float)(i32)tm;
    }
    const double dot = adm_over4096(fot), dom = adm_over4096(fom), dtm = adm_over4096(ftm);
    const double lhs = dot * dot;
    const bool within = vec ? lhs >= dom * dtm * cos2 : lhs >= cos2 * dom * dtm;
    return within && dot >= 0.0;
}

// Scales 1-3 (int32 bands): 64-bit sums (wrapping like C's), no AVX-512 variant.
VX_DEVICE bool adm_angle_wide(i32 oh, i32 ov, i32 th, i32 tv, double cos2)
{
    const i64 ot = (i64)((u64)((i64)oh * th) + (u64)((i64)ov * tv));
    const i64 om = (i64)((u64)((i64)oh * oh) + (u64)((i64)ov * ov));
    const i64 tm = (i64)((u64)((i64)th * th) + (u64)((i64)tv * tv));
    const double dot = adm_over4096((float)ot), dom = adm_over4096((float)om), dtm = adm_over4096((float)tm);
    const double lhs = dot * dot;
    return lhs >= cos2 * dom * dtm && dot >= 0.0;
}

// Q15 gain clip(t / o, 0, 1) at scale 0: libvmaf's (recip[o] * t + 2^14) >> 15
// with recip[o] = sign(o) * floor(2^30 / |o|).
VX_DEVICE i32 adm_gain_narrow(i32 o, i32 t)
{
    if (o == 0) return 32768;
    const u32 ab = (u32)(o < 0 ? -o : o);
    i32 rc = (i32)((1u << 30) / ab);
    if (o < 0) rc = -rc;
    i64 k = ((i64)rc * t + 16384) >> 15;  // 32x32 -> 64
    k = k < 0 ? 0 : (k > 32768 ? 32768 : k);
    return (i32)k;
}

// Q15 gain at scales 1-3: |o| >= 2^15 is first rounded to its top 15 bits;
// the rounding term 1 << (14 + shift) is an int32 in libvmaf, -2^31 at shift 17.
VX_DEVICE i32 adm_gain_wide(i32 o, i32 t)
{
    if (o == 0) return 32768;
    const u32 ab = o < 0 ? 0u - (u32)o : (u32)o;  // |INT_MIN| = 2^31 fits u32
    i64 k;
    if (ab >= 32768u) {
        const int shift = 32 - __clz(ab) - 15;  // 1 .. 17
        const u32 msb = (u32)(((u64)ab + (1ull << (shift - 1))) >> shift);  // <= 2^15
        const i64 rnd = shift + 14 == 31 ? -2147483648ll : (1ll << (14 + shift));
        i64 num = (i64)((1u << 30) / msb) * t;
        if (o < 0) num = -num;
        k = (num + rnd) >> (15 + shift);
    } else {
        i64 num = (i64)(i32)((1u << 30) / ab) * t;
        if (o < 0) num = -num;
        k = (num + 16384) >> 15;
    }
    k = k < 0 ? 0 : (k > 32768 ? 32768 : k);
    return (i32)k;
}

// r * egl (egl > 1 possibly non-integral): C truncates the double toward zero
// on the store, AVX-512 rounds it to nearest-even first.
VX_DEVICE i64 adm_scaled(i64 rst, i64 egl_int, double egl, bool vec)
{
    if (egl_int >= 0) return rst * egl_int;
    const double x = (double)rst * egl;
    return vec ? (i64)rint(x) : (i64)x;
}

// decouple of one band at scale 0: restored (r) and additive (a) parts, int16.
VX_DEVICE void adm_decouple_narrow(i32 o, i32 t, bool flag, i64 egl_int, double egl, bool vec, i32& r, i32& a)
{
    const i32 k = adm_gain_narrow(o, t);
    i32 rst = (k * o + 16384) >> 15;  // |k * o| <= 2^30
    if (flag && k > 0 && o != 0) {
        const i32 s = (i32)adm_scaled(rst, egl_int, egl, vec);
        rst = o > 0 ? (s < t ? s : t) : (s > t ? s : t);
    }
    r = (i16)rst;
    a = (i16)(t - rst);
}

// decouple of one band at scales 1-3: 64-bit work, int32 stores.
VX_DEVICE void adm_decouple_wide(i32 o, i32 t, bool flag, i64 egl_int, double egl, bool vec, i32& r, i32& a)
{
    const i32 k = adm_gain_wide(o, t);
    i64 rst = ((i64)k * o + 16384) >> 15;
    if (flag && k > 0 && o != 0) {
        const i64 s = adm_scaled(rst, egl_int, egl, vec);
        rst = o > 0 ? (s < t ? s : t) : (s > t ? s : t);
    }
    r = (i32)rst;
    a = (i32)((i64)t - rst);
}

// CSF at scale 0: Q21/Q23 weights, int16 result d; returns d and sets the
// 1/30 magnitude f (of the int16 in C, of the 32-bit value in AVX-512).
__constant__ i32 adm_csf0_add[3] = {16384, 16384, 65535};  // 65535 for d: libvmaf's constant
__constant__ i32 adm_csf0_shift[3] = {15, 15, 17};

VX_DEVICE i32 adm_csf_narrow(i32 b, i32 rf, int theta, bool vec, i32& f)
{
    const i32 d32 = (b * rf + adm_csf0_add[theta]) >> adm_csf0_shift[theta];  // fits int32
    const i32 d = (i16)d32;
    const i32 m = vec ? (d32 < 0 ? -d32 : d32) : (d < 0 ? -d : d);
    f = (i16)((m * 4369 + 2048) >> 12);
    return d;
}

// the narrow csf value alone (the masking centre term uses the int16 d in both paths)
VX_DEVICE i32 adm_csf_narrow_value(i32 b, i32 rf, int theta)
{
    return (i16)((b * rf + adm_csf0_add[theta]) >> adm_csf0_shift[theta]);
}

// CSF at scales 1-3: Q32 weight (uint32; AVX-512 multiplies it as int32),
// rounded shift by 28, int32 result.
VX_DEVICE i32 adm_csf_wide_value(i32 b, i64 rf)
{
    return (i32)(((i64)b * rf + (1ll << 27)) >> 28);  // |b * rf| < 2^63
}

// 1/30 magnitude at scales 1-3: the rounding constant (int32)(1u << 31) is -2^31.
VX_DEVICE i32 adm_flt_wide(i32 d)
{
    return (i32)(((i64)adm_abs32(d) * 143165577ll - 2147483648ll) >> 32);
}

// ------------------------------------------------------------------------------------
// Stats kernel
// ------------------------------------------------------------------------------------

template <bool WIDE>
struct AdmTile;

// TH rows x TW columns a chunk; NG segments a row (NG * TH = ADM_THREADS), each
// owning TW / NG columns of every chunk.
template <>
struct AdmTile<false> {
    typedef i16 band_t;
    enum { TH = ADM_STATS_TH, TW = 64, NG = ADM_THREADS / ADM_STATS_TH };
};

template <>
struct AdmTile<true> {
    typedef i32 band_t;
    enum { TH = ADM_STATS_TH, TW = 32 * (ADM_STATS_TH < 16 ? 2 : 1), NG = ADM_THREADS / ADM_STATS_TH };
};

// Masked cube of one narrow pixel/band: max(|src * irf| - (thr << sub), 0)^3
// with libvmaf's rounded intermediate shifts (the square stored as int32).
VX_DEVICE i64 adm_cube_narrow(i32 src, i32 irf, u32 thr, int sub, i64 sq_add, int sq_shift, i64 cub_add,
                              int cub_shift)
{
    const i32 x = src * irf;  // |int16 * uint16| < 2^31
    i32 xv = (i32)((u32)(x < 0 ? -x : x) - (thr << sub));  // int32 wrap, as C
    if (xv < 0) xv = 0;
    const i64 xsq = adm_low32((i64)(((u64)(u32)xv * (u32)xv + (u64)sq_add) >> sq_shift));
    return (xsq * xv + cub_add) >> cub_shift;
}

// Masked cube of one wide pixel/band.  C: the weighted value and the
// threshold are int32 (wrapping); AVX-512: 64-bit, the weight as signed int32.
VX_DEVICE i64 adm_cube_wide(i32 src, i64 irf, i64 thr, bool vec, i64 sq_add, int sq_shift, i64 cub_add,
                            int cub_shift)
{
    i64 x;
    if (vec) {
        const i64 v = ((i64)src * (i64)(i32)(u32)irf + (1ll << 27)) >> 28;
        x = (v < 0 ? -v : v) - thr;
    } else {
        const i32 x32 = adm_csf_wide_value(src, irf);
        x = (i64)(i32)((u32)adm_abs32(x32) - (u32)(i32)thr);
    }
    if (x < 0) x = 0;
    x = adm_low32(x);
    const i64 xsq = adm_low32((x * x + sq_add) >> sq_shift);
    return (xsq * x + cub_add) >> cub_shift;
}

template <bool WIDE>
VX_DEVICE void adm_stats_impl(const typename AdmTile<WIDE>::band_t* bands, i64 fstride, i64 pitch, i64 plane_stride,
                              const i64* prm, i64* out, int out_stride, int scale, int strip)
{
    typedef typename AdmTile<WIDE>::band_t B;
    enum { TH = AdmTile<WIDE>::TH, TW = AdmTile<WIDE>::TW, NG = AdmTile<WIDE>::NG };
    enum { HH = TH + 2, HW = TW + 2, NSEG = TH * NG, G = TW / NG };
    __shared__ i32 fsA[HH][HW];      // sum over bands of flt(csf(additive)): masks num
    __shared__ i32 fsR[HH][HW];      // sum over bands of flt(csf(restored)): masks aim
    __shared__ B srcR[3][TH][TW];    // restored, the chunk's own pixels
    __shared__ B srcA[3][TH][TW];    // additive
    __shared__ u64 segacc[9][NSEG];  // per segment: num h v d, aim h v d, den h v d
    __shared__ i64 rowres[9][TH];

    const int t = threadIdx.x;
    const int frame = blockIdx.z;
    const int bw = (int)prm[P_W], bh = (int)prm[P_H];
    const int top = (int)prm[P_TOP], bottom = (int)prm[P_BOTTOM];
    const int left = (int)prm[P_LEFT], right = (int)prm[P_RIGHT];
    const int y0 = top + strip * TH;
    if (y0 >= bottom) return;  // (whole block: no barrier skipped by some threads only)
    const int nrows = bottom - y0 < TH ? bottom - y0 : TH;
    const int vr_lo = (int)prm[P_VR_LO], vr_hi = (int)prm[P_VR_HI];
    const int vg_lo = (int)prm[P_VG_LO], vg_hi = (int)prm[P_VG_HI];
    const int vg_rlo = (int)prm[P_VG_RLO], vg_rhi = (int)prm[P_VG_RHI];
    const i64 egl_int = prm[P_EGL_INT];
    const double egl = adm_double(prm[P_EGL_BITS]);
    const double cos2 = adm_double(prm[P_COS_BITS]);
    const bool skip_aim = prm[P_SKIP_AIM] != 0;
    // the per-band constants, in registers (loops over bands are unrolled)
    i64 irf[3], sq_add[3], cub_add[3];
    int sub[3], sq_shift[3], cub_shift[3];
#pragma unroll
    for (int b = 0; b < 3; ++b) {
        irf[b] = prm[P_IRF + b];
        sub[b] = (int)prm[P_SUB + b];
        sq_add[b] = prm[P_SQ_ADD + b];
        sq_shift[b] = (int)prm[P_SQ_SHIFT + b];
        cub_add[b] = prm[P_CUB_ADD + b];
        cub_shift[b] = (int)prm[P_CUB_SHIFT + b];
    }
    const u64 den_sq_add = (u64)prm[P_DEN_SQ_ADD], den_cub_add = (u64)prm[P_DEN_CUB_ADD];
    const int den_sq_shift = (int)prm[P_DEN_SQ_SHIFT], den_cub_shift = (int)prm[P_DEN_CUB_SHIFT];

    const B* fr = bands + frame * fstride;
    // planes: ref a h v d = 0..3, dist a h v d = 4..7; band theta (h, v, d) is plane 1 + theta
    const B* o_pl = fr + plane_stride;
    const B* t_pl = fr + 5 * plane_stride;

    for (int i = t; i < 9 * NSEG; i += blockDim.x) (&segacc[0][0])[i] = 0;
    __syncthreads();

    for (int x0 = left; x0 < right; x0 += TW) {
        const int ncols = right - x0 < TW ? right - x0 : TW;
        // ---- phase 1: decouple and CSF over the chunk and its ring
        // At scale 0 a thread loads its next position's six band values before it works on the
        // current one, so the loads' latency overlaps that work (on the H200, ncu source counters,
        // fifteenth session: a position's loads waited on alone held 14 % of the scale-0
        // kernel's warp stall samples).  Every position's neighbour column and row are clamped
        // into the band, so the loads of positions past the chunk (skipped) stay inside it.
        auto column = [&](int hx) {
            // libvmaf's masking neighbours: before the start mirror (-1 -> 1),
            // past the end repeat the last sample (n -> n-1)
            const int gx = x0 - 1 + hx;
            return gx < 0 ? 1 : (gx >= bw ? bw - 1 : gx);
        };
        auto load = [&](int i, i32* o, i32* tt) {
            const int hy = i / HW, hx = i - hy * HW;  // (a division by a constant)
            int gy = y0 - 1 + hy;
            gy = gy < 0 ? 1 : (gy >= bh ? bh - 1 : gy);
            const i64 off = (i64)gy * pitch + column(hx);
#pragma unroll
            for (int b = 0; b < 3; ++b) {
                o[b] = o_pl[off + b * plane_stride];
                tt[b] = t_pl[off + b * plane_stride];
            }
        };
        // (Scale 0 only: the wide kernels' registers would spill.)
        i32 o_next[3], t_next[3];
        if (!WIDE && t < HH * HW)
            load(t, o_next, t_next);
        for (int i = t; i < HH * HW; i += blockDim.x) {
            i32 o[3], tt[3];
            if (WIDE) {
                load(i, o, tt);
            } else {
#pragma unroll
                for (int b = 0; b < 3; ++b)
                    o[b] = o_next[b], tt[b] = t_next[b];
                if (i + (int)blockDim.x < HH * HW)
                    load(i + blockDim.x, o_next, t_next);
            }
            const int hy = i / HW, hx = i - hy * HW;
            if (hy >= nrows + 2 || hx >= ncols + 2) continue;
            const int gx = column(hx);
            const bool vec = gx >= vr_lo && gx < vr_hi;
            const bool flag = WIDE ? adm_angle_wide(o[0], o[1], tt[0], tt[1], cos2)
                                   : adm_angle_narrow(o[0], o[1], tt[0], tt[1], vec, cos2);
            i32 rr[3], aa[3];
            u32 sa = 0, sr = 0;
#pragma unroll
            for (int b = 0; b < 3; ++b) {
                if (WIDE) {
                    adm_decouple_wide(o[b], tt[b], flag, egl_int, egl, vec, rr[b], aa[b]);
                    const i64 rf = vec ? (i64)(i32)(u32)irf[b] : irf[b];
                    sa += (u32)adm_flt_wide(adm_csf_wide_value(aa[b], rf));
                    if (!skip_aim) sr += (u32)adm_flt_wide(adm_csf_wide_value(rr[b], rf));
                } else {
                    adm_decouple_narrow(o[b], tt[b], flag, egl_int, egl, vec, rr[b], aa[b]);
                    i32 f;
                    adm_csf_narrow(aa[b], (i32)irf[b], b, vec, f);
                    sa += (u32)f;
                    if (!skip_aim) {
                        adm_csf_narrow(rr[b], (i32)irf[b], b, vec, f);
                        sr += (u32)f;
                    }
                }
            }
            // (wide: each flt is below 2^27 in magnitude, so the int32 sum of three is exact)
            fsA[hy][hx] = (i32)sa;
            fsR[hy][hx] = (i32)sr;
            const int iy = hy - 1, ix = hx - 1;
            if (iy >= 0 && iy < nrows && ix >= 0 && ix < ncols) {
#pragma unroll
                for (int b = 0; b < 3; ++b) {
                    srcR[b][iy][ix] = (B)rr[b];
                    srcA[b][iy][ix] = (B)aa[b];
                }
            }
        }
        __syncthreads();
        // ---- phase 2: thresholds and cubes of the chunk's own pixels
        for (int seg = t; seg < NSEG; seg += blockDim.x) {
            const int r = seg / NG, g = seg - r * NG;
            if (r >= nrows) continue;
            const int y = y0 + r;
            const bool vrow = y >= vg_rlo && y < vg_rhi;
            i64 acc[9];
#pragma unroll
            for (int q = 0; q < 9; ++q) acc[q] = 0;
            for (int m = 0; m < G; ++m) {
                const int c = g + m * NG;
                if (c >= ncols) break;
                const int x = x0 + c;
                const bool vg = vrow && x >= vg_lo && x < vg_hi;  // AVX-512 masking pixel
                const bool vr = x >= vr_lo && x < vr_hi;          // AVX-512 CSF column
                // 3x3 sums minus the centre (which is replaced by the 1/15 term below)
                u32 na = 0, nr = 0;
                i64 wa = 0, wr = 0;
#pragma unroll
                for (int dy = 0; dy < 3; ++dy)
#pragma unroll
                    for (int dx = 0; dx < 3; ++dx) {
                        if (WIDE) {
                            wa += fsA[r + dy][c + dx];
                            wr += fsR[r + dy][c + dx];
                        } else {
                            na += (u32)fsA[r + dy][c + dx];
                            nr += (u32)fsR[r + dy][c + dx];
                        }
                    }
                if (WIDE) {
                    wa -= fsA[r + 1][c + 1];
                    wr -= fsR[r + 1][c + 1];
                } else {
                    na -= (u32)fsA[r + 1][c + 1];
                    nr -= (u32)fsR[r + 1][c + 1];
                }
                // centre terms: 1/15 magnitudes of the centre's csf (of a for num, of r for aim)
#pragma unroll
                for (int b = 0; b < 3; ++b) {
                    if (WIDE) {
                        const i64 rf = vr ? (i64)(i32)(u32)irf[b] : irf[b];
                        const i32 ca = adm_csf_wide_value(srcA[b][r][c], rf);
                        wa += ((i64)adm_abs32(ca) * 286331153ll - 2147483648ll) >> 32;
                        if (!skip_aim) {
                            const i32 cr = adm_csf_wide_value(srcR[b][r][c], rf);
                            wr += ((i64)adm_abs32(cr) * 286331153ll - 2147483648ll) >> 32;
                        }
                    } else {
                        // C stores this term as int16 first; AVX-512 keeps 32 bits
                        const i32 ca = adm_csf_narrow_value(srcA[b][r][c], (i32)irf[b], b);
                        const i32 ta = ((ca < 0 ? -ca : ca) * 8738 + 2048) >> 12;
                        na += (u32)(vg ? ta : (i32)(i16)ta);
                        if (!skip_aim) {
                            const i32 cr = adm_csf_narrow_value(srcR[b][r][c], (i32)irf[b], b);
                            const i32 tr = ((cr < 0 ? -cr : cr) * 8738 + 2048) >> 12;
                            nr += (u32)(vg ? tr : (i32)(i16)tr);
                        }
                    }
                }
                const i64 off = (i64)y * pitch + x;
#pragma unroll
                for (int b = 0; b < 3; ++b) {
                    if (WIDE) {
                        acc[b] += adm_cube_wide(srcR[b][r][c], irf[b], wa, vg, sq_add[b], sq_shift[b], cub_add[b],
                                                cub_shift[b]);
                        if (!skip_aim)
                            acc[3 + b] += adm_cube_wide(srcA[b][r][c], irf[b], wr, vg, sq_add[b], sq_shift[b],
                                                        cub_add[b], cub_shift[b]);
                        // den: |o|^3 with libvmaf's shifts (the square rounded with a whole 2^shift)
                        const i32 ov = o_pl[off + b * plane_stride];
                        const u64 av = (u64)(ov < 0 ? -(i64)ov : (i64)ov);
                        const u64 sq = (av * av + den_sq_add) >> den_sq_shift;
                        acc[6 + b] += (i64)(sq * av + den_cub_add) >> den_cub_shift;
                    } else {
                        acc[b] += adm_cube_narrow(srcR[b][r][c], (i32)irf[b], na, sub[b], sq_add[b], sq_shift[b],
                                                  cub_add[b], cub_shift[b]);
                        if (!skip_aim)
                            acc[3 + b] += adm_cube_narrow(srcA[b][r][c], (i32)irf[b], nr, sub[b], sq_add[b],
                                                          sq_shift[b], cub_add[b], cub_shift[b]);
                        const i32 ov = o_pl[off + b * plane_stride];
                        const u32 av = (u32)(ov < 0 ? -ov : ov);  // <= 2^15
                        acc[6 + b] += (i64)((u64)(av * av) * av);
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < 9; ++q) segacc[q][seg] += (u64)acc[q];
        }
        __syncthreads();  // phase 1 of the next chunk overwrites the tiles
    }

    // ---- per row: add the row's segments, round and shift (libvmaf's per-row step)
    for (int i = t; i < 9 * TH; i += blockDim.x) {
        const int q = i / TH, r = i - q * TH;
        if (r >= nrows) continue;
        u64 s = 0;
        for (int g = 0; g < NG; ++g) s += segacc[q][r * NG + g];
        const bool den = q >= 6;
        const i64 add = den ? prm[P_DEN_ROW_ADD] : prm[P_ROW_ADD];
        const int shift = (int)(den ? prm[P_DEN_ROW_SHIFT] : prm[P_ROW_SHIFT]);
        rowres[q][r] = (i64)(s + (u64)add) >> shift;
    }
    __syncthreads();
    i64* rec = out + frame * (i64)out_stride;
    for (int q = t; q < 9; q += blockDim.x) {
        if (q >= 3 && q < 6 && skip_aim) continue;
        u64 s = 0;
        for (int r = 0; r < nrows; ++r) s += (u64)rowres[q][r];
        // record: num 0.., den 12.., aim 24..
        const int base = q < 3 ? 0 : (q < 6 ? 24 : 12);
        if (s) vx_atomic_add_i64(rec + base + 3 * scale + q % 3, (i64)s);
    }
}

VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_STATS_MINB) vx_adm_stats_narrow(const i16* bands, i64 fstride, i64 pitch, i64 plane_stride, const i64* prm,
                                   i64* out, int out_stride, int scale)
{
    adm_stats_impl<false>(bands, fstride, pitch, plane_stride, prm, out, out_stride, scale, blockIdx.x);
}

VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_STATS_MINB) vx_adm_stats_wide(const i32* bands, i64 fstride, i64 pitch, i64 plane_stride, const i64* prm,
                                 i64* out, int out_stride, int scale)
{
    adm_stats_impl<true>(bands, fstride, pitch, plane_stride, prm, out, out_stride, scale, blockIdx.x);
}

// Scales 1-3 in one launch, after the three DWT levels: blocks [0, strips1) take scale 1's
// strips, the next strips2 scale 2's, the rest scale 3's (each block one strip of one scale,
// exactly as vx_adm_stats_wide's launch of that scale would).  One launch instead of three:
// the small scales' blocks fill the device beside the larger one's instead of each launch
// draining alone (scale 3 of 1080p is 17 strips a frame).  The bands of scale s start
// off[s - 1] elements into `bands` (pitch and plane stride likewise), and its parameter row
// is prm + s * prm_row.
VX_KERNEL void __launch_bounds__(ADM_THREADS, ADM_STATS_MINB) vx_adm_stats_wide3(const i32* bands, i64 fstride, i64 off1, i64 off2, i64 off3,
                                  i64 pitch1, i64 pitch2, i64 pitch3, i64 plane1, i64 plane2, i64 plane3,
                                  const i64* prm, int prm_row, i64* out, int out_stride, int strips1,
                                  int strips2)
{
    int strip = blockIdx.x, scale = 1;
    i64 off = off1, pitch = pitch1, plane = plane1;
    if (strip >= strips1 + strips2) {
        strip -= strips1 + strips2, scale = 3, off = off3, pitch = pitch3, plane = plane3;
    } else if (strip >= strips1) {
        strip -= strips1, scale = 2, off = off2, pitch = pitch2, plane = plane2;
    }
    adm_stats_impl<true>(bands + off, fstride, pitch, plane, prm + (i64)scale * prm_row, out, out_stride, scale,
                         strip);
}
