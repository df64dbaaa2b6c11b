// Float VIF (libvmaf's "float_vif"): per scale the float sums of the
// per-pixel numerator and denominator, and the decimation to the next scale.
//
// Device twin of vmafxd.features.float_vif / _float_vif_core, op for op in
// float (contraction off): the planes as floats (sample / div - 128, the
// prelude's vx_float_sample, read from the staged samples at scale 0), a
// separable Gaussian (vertical pass first; each output `acc = 0; acc = acc +
// taps[k] * x[k]`, k ascending, edges mirrored without repeating the edge),
// the moments x*x, y*y, x*y filtered the same way (the product of the two
// samples, then the tap), libvmaf's vif_statistic_s per pixel (with its double
// steps and its polynomial log2), and the sums in libvmaf's order: a float per
// row, left to right, then the rows top to bottom into one float.  Scales:
// the filtered pictures at even rows and columns.  The host computes the
// scores (the CPU twin's metrics_from_stats).
//
// Launches per scale s: vx_fvif_down_* (s > 0: the scale-s pictures from the
// scale-(s-1) ones, filtered at even rows and columns only), vx_fvif_stat_*
// (both passes, the statistic into num and den maps, and each row's sums,
// left to right, by the block that owns the row); after the last scale,
// vx_fvif_totals adds every scale's rows top to bottom (the prelude's
// vx_staged_row_sums).  At
// vif_kernelscale 1, the statistics kernels of scales 0 to 2 write the next
// scale's pictures as well (vx_fvif_stat_down_*, FvDown) and scales 1 to 3
// have no decimation launch (scale 1 has one below a skipped scale 0).
// Scale 0 is never converted to a float picture: the kernels convert
// the samples as they read them (the same float operations as the prelude's
// vx_float_sample).
//
// Plane layouts: pictures and maps with a pitch (elements), frame f at
// f * fstride; the reference and distorted pictures through two pointers with
// the same layout.

// The widest filter: 65 taps (vif_kernelscale 3.71 at scale 0; radius 32)
#define FV_MAXTAPS 65

// A picture's value at element i: a float picture's as it is, a staged sample's converted
// as the prelude's vx_float_sample converts it (sample / div - 128; div 0: no division).
// The staging holds u8 samples for 8 bits only, whose divisor is 0, and u16 samples for 10,
// 12 and 16 bits, whose divisors are 4, 16 and 256 (float_util.sample_divisor): so each
// element type takes one branch of vx_float_sample, written out here (a branch per sample
// would make the compiler duplicate the unrolled filter loops, one copy per branch).
VX_DEVICE float fv_value(const float* p, i64 i, float) { return p[i]; }
VX_DEVICE float fv_value(const u8* p, i64 i, float) { return (float)p[i] + -128.0f; }
VX_DEVICE float fv_value(const u16* p, i64 i, float div) { return (float)p[i] / div + -128.0f; }

struct VX_ALIGN(16) FvF32x4 {
    float x, y, z, w;
};

union fv_bits {
    float f;
    u32 u;
};

// libvmaf's log2f_approx (VIF_OPT_FAST_LOG2): exponent plus a degree-8
// polynomial of the mantissa in [1, 2) minus one, Horner in float.
VX_DEVICE float fv_log2(float x)
{
    const float poly[9] = {-0.012671635276421f, 0.064841182402670f, -0.157048836463065f, 0.257167726303123f,
                           -0.353800560300520f, 0.480131410397451f, -0.721314327952201f, 1.442694803896991f, 0.0f};
    fv_bits c;
    c.f = x;
    const int exponent = (int)((c.u & 0x7F800000u) >> 23) - 127;
    fv_bits m;
    m.u = (c.u & 0x007FFFFFu) | 0x3F800000u;
    const float t = m.f - 1.0f;
    float v = 0.0f;
    for (int i = 0; i < 9; ++i)
        v = v * t + poly[i];
    return (float)exponent + v;
}

// vif_statistic_s of one pixel's filtered values: its numerator and denominator terms, in the
// twin's order, without the work whose result the twin overwrites: below sigma_nsq (s1 after
// its clamp to 0 under eps) both terms are the flat window's, and for s12 < 0 the numerator
// is 0, so no logarithm or division runs there (a warp whose pixels all take one branch
// skips the other).  nsq_inv: 1 / sigma_nsq where x / sigma_nsq is exactly x * nsq_inv
// (sigma_nsq a power of two, libvmaf's default 2: fv_exact_inverse), else 0.
VX_DEVICE void fv_stat(float mu1, float mu2, float xx, float yy, float xy, float gain_limit, double sigma_nsq,
                       double nsq_inv, float sigma_max_inv, float* num, float* den)
{
    const float eps = 1.0e-10f;
    float s1 = xx - mu1 * mu1;
    float s2 = yy - mu2 * mu2;
    const float s12 = xy - mu1 * mu2;
    s1 = s1 > 0.0f ? s1 : 0.0f;
    s2 = s2 > 0.0f ? s2 : 0.0f;
    const float s1_raw = s1;  // the gain's divisor: s1 before the clamp below
    const bool s1_low = s1 < eps;
    if (s1_low) s1 = 0.0f;
    if ((double)s1 < sigma_nsq) {
        *num = 1.0f - s2 * sigma_max_inv;
        *den = 1.0f;
        return;
    }
    const double q = nsq_inv != 0.0 ? (double)s1 * nsq_inv : (double)s1 / sigma_nsq;
    *den = fv_log2((float)(1.0 + q));
    if (s12 < 0.0f) {
        *num = 0.0f;
        return;
    }
    float g = s12 / (s1_raw + eps);
    float sv = s2 - g * s12;
    if (s1_low) {
        g = 0.0f;
        sv = s2;
    }
    if (s2 < eps) {
        g = 0.0f;
        sv = 0.0f;
    }
    if (g < 0.0f) {
        sv = s2;
        g = 0.0f;
    }
    sv = sv > eps ? sv : eps;
    g = g < gain_limit ? g : gain_limit;
    const float gg = g * g * s1;
    *num = fv_log2((float)(1.0 + (double)gg / ((double)sv + sigma_nsq)));
}

// 1 / x where dividing by x is multiplying by it, exactly: x a positive normal power of two
// (no mantissa bits, an exponent neither 0 nor all ones); else 0.
VX_DEVICE double fv_exact_inverse(double x)
{
    const u32 hi = vx_double_high(x), exponent = (hi >> 20) & 0x7FFu;
    const bool pow2 = x > 0.0 && (hi & 0xFFFFFu) == 0 && vx_double_low(x) == 0 && exponent != 0 && exponent != 0x7FFu;
    return pow2 ? 1.0 / x : 0.0;
}

// ---- the statistics and their row sums: vx_fvif_stat_<type>_<taps> ----------------------
// Block (0, y, f) computes a band of FV_RV rows of frame f from y * FV_RV, across the whole
// width in segments of fv_tile_width(fw) columns, left to right:
//   A. vertical pass: a thread a column of the segment and its halo (FV_VCOLS columns at
//      most: the segment's outputs read columns x0 - r .. x0 + tw - 1 + r, each mirrored as
//      the horizontal pass mirrors it), the band's FV_RV rows in registers: each input row's
//      a, b and products a*a, b*b, a*b are computed once and serve every output whose window
//      holds the row.  Output j's terms come in as the rows come, k ascending:
//      acc_j = acc_j + t[k - j] * x[k], from acc_j = 0 -- the twin's order.  The five planes
//      go to shared memory (vs).
//   B. horizontal pass: a thread a strip of FV_RH outputs of one row, read from vs the same
//      way (each value loaded once for the strip), then vif_statistic_s per output, into the
//      num and den maps (a whole strip in 16-byte stores).  Strips of 4 outputs rather than
//      8: 20 sums a thread in registers instead of 40 and a smaller kernel, 15-25 % faster
//      on the H200 (scripts/bench_float_vif.sh).
//   C. row sums: one thread per (map, row), in a warp of their own (the block's last, with
//      no work in A, and in B only FvDown's horizontal pass), adds the segment's values to
//      the row's running float, left to right (libvmaf's order: the segments come left to
//      right and each is added in order),
//      reading back the maps the block has just written (after the barrier every thread's
//      writes are visible to the block).  The running floats end in rows[f][m][y];
//      vx_fvif_totals adds them top to bottom.
// Barriers: after A (vs written; the previous segment's C done) and after B (maps written;
// vs read).  C and the next segment's A need none between them: A writes vs, which C does
// not read, and B, the next writer of the maps (other columns), comes after the next
// barrier.  So while the adding warp adds, the others run the next segment's vertical pass.
// Shared memory: 5 planes x FV_RV rows x FV_VPITCH floats = 41,120 bytes (+ the taps of an
// any-width filter and the running sums), under the 48 KiB of static shared memory.
// FV_VPITCH = 257 = 1 mod 32: the horizontal pass's warp reads FV_RH rows x FV_WSTRIPS strips
// (FV_RH columns apart) at one offset: banks row + FV_RH strip + offset mod 32, all 32 different.
#define FV_THREADS 256  // the threads of A and B
#define FV_BLOCK (FV_THREADS + 32)  // and a warp of its own for C
#define FV_RV 8
#define FV_RH 4
#define FV_WSTRIPS (32 / FV_RH)  // the strips of a warp's items in the horizontal pass
static_assert(FV_RV % FV_RH == 0 && 32 % FV_RH == 0, "a warp's items: FV_RH rows of the band");
#define FV_VCOLS FV_THREADS
#define FV_VPITCH (FV_VCOLS + 1)
#define FV_CHAINS (2 * FV_RV)  // the row sums of a band: (map, row)

// A segment's output columns for a filter of fw taps: its columns and their halo fill at most
// FV_VCOLS, in whole horizontal strips (fw = 17: 240; 9: 248; 5 and 3: 252; 65: 192; the
// kernels that also decimate take FV_DOWN_TW, FvDown).  The host's twin:
// vmafxd.lanes.gpu.float_vif.tile_width.
VX_DEVICE int fv_tile_width(int fw) { return (FV_VCOLS - (fw - 1)) / FV_RH * FV_RH; }

// The first thread of C: the last FV_CHAINS threads of the block (in the warp past the
// FV_THREADS of A and B, which has no columns there, a segment's being at most FV_VCOLS =
// FV_THREADS, and no strips, B's items going to the first FV_THREADS threads only); with
// fewer threads than chains (the emulator's one), thread 0, each thread taking every
// blockDim-th chain.
VX_DEVICE int fv_chain_first() { return (int)blockDim.x > FV_CHAINS ? (int)blockDim.x - FV_CHAINS : 0; }

// (member functions: VX_DEVICE is static)
#if defined(VX_EMU)
#define FV_MEMBER inline
#else
#define FV_MEMBER __device__ __forceinline__
#endif

// The tap k of a filter of FW taps.  The kernels compiled for vif_kernelscale 1's widths (17,
// 9, 5, 3) read the declaration's tables fv_gauss* (generated from the twin's filters: a
// width's Gaussian has sigma width / 5, so the width alone decides every tap); once the loops
// are unrolled each tap is a constant operand of its multiplication, neither a load nor a
// register.  FW = 0 (any width): the block's copy in shared memory.
template <int FW>
struct FvTaps;
#define FV_GAUSS(N)                                                                     \
    template <>                                                                         \
    struct FvTaps<N> {                                                                  \
        FV_MEMBER void load(const float*) {}                                            \
        FV_MEMBER float operator[](int k) const { return fv_gauss##N[k]; }              \
    };
FV_GAUSS(17)
FV_GAUSS(9)
FV_GAUSS(5)
FV_GAUSS(3)
template <>
struct FvTaps<0> {
    const float* t;
    FV_MEMBER void load(const float* s) { t = s; }
    FV_MEMBER float operator[](int k) const { return t[k]; }
};

// s + p[0] + p[1] + ... + p[n - 1], added in that order.  The values come from global memory
// (L2: the block wrote them just before), so 16 are loaded ahead of their adds: each batch of
// 16 is loaded before the previous one is added.
VX_DEVICE float fv_add_run(float s, const float* p, int n)
{
    int c = 0;
    float v[16];
    if (n >= 16) {
#pragma unroll
        for (int u = 0; u < 16; ++u) v[u] = p[u];
        // invariant: v holds p[c .. c + 15], c + 16 <= n
        for (; c + 32 <= n; c += 16) {
            float next[16];
#pragma unroll
            for (int u = 0; u < 16; ++u) next[u] = p[c + 16 + u];
#pragma unroll
            for (int u = 0; u < 16; ++u) s = s + v[u];
#pragma unroll
            for (int u = 0; u < 16; ++u) v[u] = next[u];
        }
#pragma unroll
        for (int u = 0; u < 16; ++u) s = s + v[u];
        c += 16;
    }
    for (; c < n; ++c)
        s = s + p[c];
    return s;
}

// ---- the next scale's pictures from a band: FvDown<FW, FWD> ----------------------------------
// vx_fvif_stat_down_* (vif_kernelscale 1: scale 0's FW = 17 taps with scale 1's FWD = 9, scale
// 1's 9 with 5, scale 2's 5 with 3) write the next scale's pictures from the band as
// vx_fvif_down_* would, in its order: output (ox, oy) is the filtered picture at (2 ox, 2 oy),
// vertical pass first.  The band of rows yc .. yc + 7 (yc a multiple of 8) holds the kept
// rows 2 oy for oy = yc / 2 .. yc / 2 + 3 (those < h2 = h / 2: then 2 oy <= h - 2, a row of
// the band); their vertical passes read rows 2 oy - FWD/2 .. 2 oy + FWD/2, inside the band's
// yc - FW/2 .. yc + 7 + FW/2 (FWD <= FW), and below h - 1 + FW/2, where the band clamps: so
// in A each of the band's input rows, as the statistics read it (the same mirrored row and
// column, the same float a and b), is also the term k - (FW/2 - FWD/2) - 2 jj of kept row
// jj's sum, k ascending from 0.0f: the twin's `acc = acc + taps[k] * x[k]`.  A stores them
// for the segment's columns x0 - FWD/2 .. x0 + TW - 2 + FWD/2 (COLS of them: thread column c
// is picture column x0 - FW/2 + c, so these are c = FW/2 - FWD/2 .. FW/2 - FWD/2 + COLS - 1
// < FV_VCOLS), mirrored as fv_down mirrors them (gx < w + FW/2 there: no thread of them
// skipped).  In B the block then filters them horizontally at the segment's even columns
// x0 + 2 q, q < TW / 2 (x0 is even), those with ox = x0 / 2 + q < w2 = w / 2: dv column
// 2 q + k is picture column 2 ox - FWD/2 + k, tap k, k ascending.  dv is read in B only,
// written in A only: the barriers after A and after B order them.  Segments of TW =
// FV_DOWN_TW = 240 columns whatever FW (fv_tile_width(17); 9 or 5 taps would give 248 or 252, and
// their dv would not fit; each row's running float takes the segments left to right, so
// its additions do not depend on the width).  Shared memory: 41,120 (vs) + 2 x 4 x COLS x 4
// (dv: COLS = 238 + FWD, 7,904 bytes at most) + 64 (run) + 4 (tap_s, unused: both filters'
// taps are constants, FvTaps): 49,092 bytes at most, under the 49,152 of static shared memory.
#define FV_DOWN_TW 240
struct FvDownArgs {
    float* out_r;       // the next scale's pictures, w2 x h2, frame f at f * fstride
    float* out_d;
    i64 fstride, pitch;
    int w2, h2;
};

template <int FW, int FWD>
struct FvDown {
    enum {
        TW = FV_DOWN_TW,
        ROWS = FWD > 0 ? FV_RV / 2 : 1,
        COLS = FWD > 0 ? TW - 2 + FWD : 1,
    };
    static_assert(FWD == 0 || TW + FW - 1 <= FV_VCOLS, "a segment's columns and halo: a thread each");
    static_assert(4 * (5 * FV_RV * FV_VPITCH + 2 * ROWS * COLS + FV_CHAINS + 1) <= 49152,
                  "static shared memory");
    static FV_MEMBER void horizontal(float (*dv)[ROWS][COLS], const FvTaps<FWD>& dt, const FvDownArgs& dn,
                                     int f, int x0, int yc)
    {
        const int ox0 = x0 / 2, oy0 = yc / 2;
        const int n = dn.w2 - ox0 < TW / 2 ? dn.w2 - ox0 : TW / 2;
        const int nr = dn.h2 - oy0 < ROWS ? dn.h2 - oy0 : ROWS;
        if (n <= 0 || nr <= 0) return;
        // outputs x0 / 2 + q of kept row jj of picture p: a warp's lanes along a row (dv read 2
        // apart, the outputs written side by side).  Taken by the adding warp, which has nothing
        // to do in B (its threads past FV_THREADS: 2 x 4 rows of 120 outputs of 9 taps at most,
        // beside the other warps' 480 strips of 4 outputs, 5 planes and 17 taps); where the block
        // has no threads past FV_THREADS (the emulator's one), by every thread.
        const int first = (int)blockDim.x > FV_THREADS ? FV_THREADS : 0;
        if ((int)threadIdx.x < first) return;
        for (int p = 0; p < 2; ++p)
            for (int jj = 0; jj < nr; ++jj) {
                float* out = (p ? dn.out_d : dn.out_r) + f * dn.fstride + (i64)(oy0 + jj) * dn.pitch + ox0;
                for (int q = (int)threadIdx.x - first; q < n; q += (int)blockDim.x - first) {
                    float m = 0.0f;
#pragma unroll
                    for (int k = 0; k < FWD; ++k)
                        m = m + dt[k] * dv[p][jj][2 * q + k];
                    out[q] = m;
                }
            }
    }
};

// T: the picture's element (u8/u16 staged samples at scale 0, float above); FW: the filter's
// taps when fixed (0: fw_arg, any width up to FV_MAXTAPS); FWD: the next scale's taps where
// the band also writes the next scale's pictures (FvDown; 0: it does not).
template <typename T, int FW, int FWD>
VX_DEVICE void fv_stat_band(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div,
                            const float* taps, int fw_arg, float gain_limit, double sigma_nsq, float sigma_max_inv,
                            float* num, float* den, i64 mfstride, i64 mpitch, float* rows_out, i64 rows_fstride,
                            const FvDownArgs& dn)
{
    static_assert(FWD == 0 || (FW > 0 && FWD <= FW && FWD % 2 == 1), "the fold needs fixed widths, FWD <= FW");
    typedef FvDown<FW, FWD> Down;
    __shared__ float vs[5][FV_RV][FV_VPITCH];
    // the filter's taps where its width is not fixed (FvTaps<0>)
    __shared__ float tap_s[FW > 0 ? 1 : FV_MAXTAPS];
    __shared__ float run[FV_CHAINS];
    __shared__ float dv[2][Down::ROWS][Down::COLS];  // FvDown: the vertical pass at the even rows
    const int fw = FW > 0 ? FW : fw_arg, r = fw / 2;
    const int tw = FWD > 0 ? (int)Down::TW : fv_tile_width(fw), vcols = tw + fw - 1;
    const int f = blockIdx.z, yc = blockIdx.y * FV_RV;
    const int rows = h - yc < FV_RV ? h - yc : FV_RV;
    const T* a_pic = ref + f * fstride;
    const T* b_pic = dis + f * fstride;
    for (int k = threadIdx.x; FW == 0 && k < fw; k += blockDim.x)
        tap_s[k] = taps[k];
    for (int q = (int)threadIdx.x - fv_chain_first(); q < FV_CHAINS; q += blockDim.x)
        if (q >= 0) run[q] = 0.0f;
    __syncthreads();
    FvTaps<FW> tp;
    tp.load(tap_s);
    FvTaps<FWD> dt;  // (FWD = 0: never read)
    dt.load(tap_s);
    const double nsq_inv = fv_exact_inverse(sigma_nsq);
    // the maps' rows start 16-byte aligned (the lane's 256-byte pitches; a strip's first column
    // is a multiple of FV_RH = 4 from a segment's, a multiple of 4 too: fv_tile_width, FV_DOWN_TW)
    const bool vec_rows = ((u64)num % 16 == 0) && ((u64)den % 16 == 0) && mfstride % 4 == 0 && mpitch % 4 == 0;
    for (int x0 = 0; x0 < w; x0 += tw) {
        // A. vertical pass: column c of the segment is picture column vx_mirror(x0 - r + c)
        for (int c = threadIdx.x; c < vcols; c += blockDim.x) {
            const int gx = x0 - r + c;
            if (gx >= w + r) continue;  // read only by outputs past the picture (x >= w)
            const int col = vx_mirror(gx, w);  // -r <= gx < w + r and r < w: inside the picture
            float m1[FV_RV], m2[FV_RV], xx[FV_RV], yy[FV_RV], xy[FV_RV];
            float d1[Down::ROWS], d2[Down::ROWS];  // FvDown: band rows 0, 2, 4, 6
#pragma unroll
            for (int j = 0; j < FV_RV; ++j) m1[j] = m2[j] = xx[j] = yy[j] = xy[j] = 0.0f;
#pragma unroll
            for (int j = 0; j < Down::ROWS; ++j) d1[j] = d2[j] = 0.0f;
            const int nk = FV_RV + fw - 1;  // input rows yc - r .. yc + FV_RV - 1 + r
#pragma unroll
            for (int k = 0; k < nk; ++k) {
                // rows past h - 1 + r feed only output rows past the picture: clamped there
                // (vx_mirror(h - 1 + r) = h - 1 - r >= 0); above, yc - r >= -r > -h
                int gy = yc - r + k;
                gy = gy < h - 1 + r ? gy : h - 1 + r;
                const i64 at = (i64)vx_mirror(gy, h) * pitch + col;
                const float a = fv_value(a_pic, at, div), b = fv_value(b_pic, at, div);
                const float aa = a * a, bb = b * b, ab = a * b;
#pragma unroll
                for (int j = 0; j < FV_RV; ++j) {
                    const int tk = k - j;  // row k is output j's tap k - j
                    if (tk < 0 || tk >= fw) continue;
                    const float t = tp[tk];
                    m1[j] = m1[j] + t * a;
                    m2[j] = m2[j] + t * b;
                    xx[j] = xx[j] + t * aa;
                    yy[j] = yy[j] + t * bb;
                    xy[j] = xy[j] + t * ab;
                }
                // FvDown: row k is band row 2 jj's decimation tap k - (r - FWD / 2) - 2 jj
#pragma unroll
                for (int jj = 0; jj < Down::ROWS; ++jj) {
                    const int tk = k - (r - FWD / 2) - 2 * jj;
                    if (FWD == 0 || tk < 0 || tk >= FWD) continue;
                    const float t = dt[tk];
                    d1[jj] = d1[jj] + t * a;
                    d2[jj] = d2[jj] + t * b;
                }
            }
#pragma unroll
            for (int j = 0; j < FV_RV; ++j) {
                vs[0][j][c] = m1[j];
                vs[1][j][c] = m2[j];
                vs[2][j][c] = xx[j];
                vs[3][j][c] = yy[j];
                vs[4][j][c] = xy[j];
            }
            const int dc = c - (r - FWD / 2);  // FvDown: dv column dc is picture column x0 - FWD / 2 + dc
            if (FWD > 0 && dc >= 0 && dc < Down::COLS) {
#pragma unroll
                for (int jj = 0; jj < Down::ROWS; ++jj) {
                    dv[0][jj][dc] = d1[jj];
                    dv[1][jj][dc] = d2[jj];
                }
            }
        }
        __syncthreads();  // vs written; the previous segment's C done
        // B. horizontal pass and the statistic: a strip of FV_RH outputs an item, on the threads
        // of A (the adding warp's part of B is FvDown's); a warp's items are FV_RH rows by
        // FV_WSTRIPS strips, so that its lanes read banks j + c0 + k mod 32 (FV_VPITCH = 1 mod
        // 32), all 32 different; the strips padded to whole warps
        const int strips = tw / FV_RH, spad = (strips + FV_WSTRIPS - 1) / FV_WSTRIPS * FV_WSTRIPS;
        const int b_threads = (int)blockDim.x > FV_THREADS ? FV_THREADS : (int)blockDim.x;
        for (int i = threadIdx.x; i < FV_RV * spad && (int)threadIdx.x < b_threads; i += b_threads) {
            const int lane = i % 32, wi = i / 32;
            const int j = lane % FV_RH + FV_RH * (wi % (FV_RV / FV_RH));
            const int st = lane / FV_RH + FV_WSTRIPS * (wi / (FV_RV / FV_RH));
            const int c0 = st * FV_RH;  // output x0 + c0 + q reads columns c0 + q + tk
            if (st >= strips || j >= rows || x0 + c0 >= w) continue;
            float acc[5][FV_RH];
#pragma unroll
            for (int p = 0; p < 5; ++p)
#pragma unroll
                for (int q = 0; q < FV_RH; ++q) acc[p][q] = 0.0f;
            const int nk = FV_RH + fw - 1;
#pragma unroll
            for (int k = 0; k < nk; ++k) {
                float v[5];
#pragma unroll
                for (int p = 0; p < 5; ++p) v[p] = vs[p][j][c0 + k];
#pragma unroll
                for (int q = 0; q < FV_RH; ++q) {
                    const int tk = k - q;
                    if (tk < 0 || tk >= fw) continue;
                    const float t = tp[tk];
#pragma unroll
                    for (int p = 0; p < 5; ++p) acc[p][q] = acc[p][q] + t * v[p];
                }
            }
            const i64 row = f * mfstride + (i64)(yc + j) * mpitch + x0 + c0;
            // the strip's outputs inside the picture (1 .. FV_RH; one statistic code a column)
            const int nv = w - x0 - c0 < FV_RH ? w - x0 - c0 : FV_RH;
            float nums[FV_RH], dens[FV_RH];
#pragma unroll
            for (int q = 0; q < FV_RH; ++q) {
                nums[q] = dens[q] = 0.0f;
                if (q < nv)
                    fv_stat(acc[0][q], acc[1][q], acc[2][q], acc[3][q], acc[4][q], gain_limit, sigma_nsq, nsq_inv,
                            sigma_max_inv, nums + q, dens + q);
            }
            if (vec_rows && nv == FV_RH) {  // a whole strip: 16-byte stores
#pragma unroll
                for (int q = 0; q < FV_RH; q += 4) {
                    vx_st_vec<FvF32x4>(num + row + q, FvF32x4{nums[q], nums[q + 1], nums[q + 2], nums[q + 3]});
                    vx_st_vec<FvF32x4>(den + row + q, FvF32x4{dens[q], dens[q + 1], dens[q + 2], dens[q + 3]});
                }
            } else {
#pragma unroll
                for (int q = 0; q < FV_RH; ++q)
                    if (q < nv) {
                        num[row + q] = nums[q];
                        den[row + q] = dens[q];
                    }
            }
        }
        if (FWD > 0) Down::horizontal(dv, dt, dn, f, x0, yc);  // FvDown: the even columns
        __syncthreads();  // the maps written (for C), vs read (before the next A writes it)
        // C. row sums: chain q (map q / FV_RV, row q % FV_RV) on the adding warp's thread q
        // (fv_chain_first): it adds while the other warps run the next segment's vertical pass
        const int n = w - x0 < tw ? w - x0 : tw;
        for (int q = (int)threadIdx.x - fv_chain_first(); q < FV_CHAINS; q += blockDim.x) {
            if (q < 0 || q % FV_RV >= rows) continue;
            const float* map = (q < FV_RV ? num : den) + f * mfstride + (i64)(yc + q % FV_RV) * mpitch + x0;
            run[q] = fv_add_run(run[q], map, n);
        }
    }
    // each chain's running sum is read and written by its own thread only
    for (int q = (int)threadIdx.x - fv_chain_first(); q < FV_CHAINS; q += blockDim.x) {
        if (q < 0 || q % FV_RV >= rows) continue;
        rows_out[f * rows_fstride + (q / FV_RV) * h + yc + q % FV_RV] = run[q];
    }
}


// Blocks of FV_BLOCK threads an SM the statistics kernels' registers leave room for.  3 (at
// most 72 registers): sm_90 ptxas fits every kernel but the 16-bit 17-tap one without spills,
// and the H200 ran 8-bit 1080p float VIF at 124 us a frame against 136 with 2 (gpu-runs.md,
// sixth section, call 7).  The 16-bit kernels keep 2 (at most 112: _u16_17 takes 93; with 3 it
// spills 48 bytes).  (Overridable to time another: -DFV_STAT_MINB=2 / -DFV_STAT_MINB_U16=3.)
#ifndef FV_STAT_MINB
#define FV_STAT_MINB 3
#endif
#ifndef FV_STAT_MINB_U16
#define FV_STAT_MINB_U16 2
#endif

#define FV_STAT_KERNEL(NAME, T, FW, MINB)                                                                        \
    VX_KERNEL void VX_BOUNDS(FV_BLOCK, MINB)                                                                   \
        NAME(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div, const float* taps,      \
             int fw, float gain_limit, double sigma_nsq, float sigma_max_inv, float* num, float* den,            \
             i64 mfstride, i64 mpitch, float* rows, i64 rows_fstride)                                            \
    {                                                                                                            \
        const FvDownArgs none = {0, 0, 0, 0, 0, 0};                                                              \
        fv_stat_band<T, FW, 0>(ref, dis, fstride, w, h, pitch, div, taps, fw, gain_limit, sigma_nsq,             \
                               sigma_max_inv, num, den, mfstride, mpitch, rows, rows_fstride, none);             \
    }

// The same with the next scale's pictures (FvDown): its taps (FWD of them), its two pictures,
// their frame stride and pitch (elements) and size (w / 2, h / 2).  Both filters here have
// fixed widths, so the kernel reads fv_gauss<FW> and fv_gauss<FWD> (the same values) and
// neither `taps` nor `dtaps`: the pointers keep the statistics kernels' one signature.
#define FV_STAT_DOWN_KERNEL(NAME, T, FW, FWD, MINB)                                                              \
    VX_KERNEL void VX_BOUNDS(FV_BLOCK, MINB)                                                                   \
        NAME(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div, const float* taps,      \
             int fw, float gain_limit, double sigma_nsq, float sigma_max_inv, float* num, float* den,            \
             i64 mfstride, i64 mpitch, float* rows, i64 rows_fstride, const float* dtaps, float* out_r,          \
             float* out_d, i64 ofstride, i64 opitch, int w2, int h2)                                             \
    {                                                                                                            \
        (void)dtaps;                                                                                             \
        const FvDownArgs dn = {out_r, out_d, ofstride, opitch, w2, h2};                                          \
        fv_stat_band<T, FW, FWD>(ref, dis, fstride, w, h, pitch, div, taps, fw, gain_limit, sigma_nsq,           \
                                 sigma_max_inv, num, den, mfstride, mpitch, rows, rows_fstride, dn);             \
    }

// Scale 0 from the staged samples (vif_kernelscale 1: 17 taps; any other scale, any width),
// scales 1-3 from float pictures (vif_kernelscale 1: 9, 5, 3 taps).  The host picks the
// fixed width where it has one (vmafxd.lanes.gpu.float_vif.STAT_FIXED).
FV_STAT_KERNEL(vx_fvif_stat_u8_17, u8, 17, FV_STAT_MINB)
FV_STAT_KERNEL(vx_fvif_stat_u8_any, u8, 0, FV_STAT_MINB)
FV_STAT_KERNEL(vx_fvif_stat_u16_17, u16, 17, FV_STAT_MINB_U16)
FV_STAT_KERNEL(vx_fvif_stat_u16_any, u16, 0, FV_STAT_MINB_U16)
FV_STAT_KERNEL(vx_fvif_stat_f32_9, float, 9, FV_STAT_MINB)
FV_STAT_KERNEL(vx_fvif_stat_f32_5, float, 5, FV_STAT_MINB)
FV_STAT_KERNEL(vx_fvif_stat_f32_3, float, 3, FV_STAT_MINB)
FV_STAT_KERNEL(vx_fvif_stat_f32_any, float, 0, FV_STAT_MINB)
// A scale and the next scale's pictures at vif_kernelscale 1 (17 and 9 taps, 9 and 5, 5 and
// 3): one launch for two (vmafxd.lanes.gpu.float_vif.STAT_DOWN; elsewhere, and below a
// skipped scale 0, vx_fvif_down_* before the next scale's statistics).
FV_STAT_DOWN_KERNEL(vx_fvif_stat_down_u8_17_9, u8, 17, 9, FV_STAT_MINB)
FV_STAT_DOWN_KERNEL(vx_fvif_stat_down_u16_17_9, u16, 17, 9, FV_STAT_MINB_U16)
FV_STAT_DOWN_KERNEL(vx_fvif_stat_down_f32_9_5, float, 9, 5, FV_STAT_MINB)
FV_STAT_DOWN_KERNEL(vx_fvif_stat_down_f32_5_3, float, 5, 3, FV_STAT_MINB)

// ---- the decimation: vx_fvif_down_<type> ----------------------------------------------------
// Block (x, y, f): row y of the next scale's pictures of frame f, FV_DCOLS columns from
// x * FV_DCOLS.  Output (ox, y) is the filtered picture at (2 ox, 2 y): the vertical pass of
// row 2 y at the columns its horizontal pass reads (2 ox0 - r .. 2 (ox0 + n - 1) + r, each
// mirrored, at most 2 FV_DCOLS - 2 + FV_MAXTAPS of them) into shared memory, then the
// horizontal pass at the even columns: the twin's values at the points it keeps, and nothing
// at the rows and columns it drops.  FV_DCOLS = 120: the vertical pass's 2 * 119 + fw columns
// are one column a thread of 256 for every filter of 17 taps or fewer (scale 1's 9 at
// vif_kernelscale 1); wider ones take a thread two columns.
#define FV_DCOLS 120

template <typename T>
VX_DEVICE void fv_down(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div,
                       const float* taps, int fw, float* out_r, float* out_d, i64 ofstride, i64 opitch, int w2)
{
    __shared__ float vrow[2][2 * FV_DCOLS + FV_MAXTAPS];
    __shared__ float tap_s[FV_MAXTAPS];
    const int f = blockIdx.z, oy = blockIdx.y, ox0 = blockIdx.x * FV_DCOLS, r = fw / 2;
    const int n = w2 - ox0 < FV_DCOLS ? w2 - ox0 : FV_DCOLS;
    const int cols = 2 * (n - 1) + fw;
    const T* a_pic = ref + f * fstride;
    const T* b_pic = dis + f * fstride;
    for (int k = threadIdx.x; k < fw; k += blockDim.x)
        tap_s[k] = taps[k];
    __syncthreads();
    // 2 ox - r >= -r > -w and 2 (w2 - 1) + r <= w - 2 + r < 2 w - 1 (r < w): every column and
    // row index below mirrors into the picture
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const int col = vx_mirror(2 * ox0 - r + c, w);
        float m1 = 0.0f, m2 = 0.0f;
        for (int k = 0; k < fw; ++k) {
            const i64 at = (i64)vx_mirror(2 * oy - r + k, h) * pitch + col;
            const float t = tap_s[k];
            m1 = m1 + t * fv_value(a_pic, at, div);
            m2 = m2 + t * fv_value(b_pic, at, div);
        }
        vrow[0][c] = m1;
        vrow[1][c] = m2;
    }
    __syncthreads();
    // a thread an output of one picture: threads 0 .. n-1 the reference, n .. 2n-1 the distorted
    for (int i = threadIdx.x; i < 2 * n; i += blockDim.x) {
        const int p = i < n ? 0 : 1, ox = i - p * n;
        float m = 0.0f;
        for (int k = 0; k < fw; ++k)
            m = m + tap_s[k] * vrow[p][2 * ox + k];
        (p ? out_d : out_r)[f * ofstride + (i64)oy * opitch + ox0 + ox] = m;
    }
}

#define FV_DOWN_KERNEL(NAME, T)                                                                                 \
    VX_KERNEL void NAME(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div,             \
                        const float* taps, int fw, float* out_r, float* out_d, i64 ofstride, i64 opitch, int w2) \
    {                                                                                                           \
        fv_down<T>(ref, dis, fstride, w, h, pitch, div, taps, fw, out_r, out_d, ofstride, opitch, w2);          \
    }

FV_DOWN_KERNEL(vx_fvif_down_u8, u8)
FV_DOWN_KERNEL(vx_fvif_down_u16, u16)
FV_DOWN_KERNEL(vx_fvif_down_f32, float)

// Every scale's two map totals in one launch, after the last statistics: block (0, 2 (s -
// first) + m, f) adds the rows of scale s's map m (s >= first) top to bottom into one float,
// out[f][2 s + m].  Scale s's pictures are h0 >> s rows high (each scale halves, rounding
// down), and its row sums lie after the lower scales', frames * 2 * (h0 + ... + (h0 >> (s -
// 1))) floats into `rows`, frame f's map m at f * 2 h + m h.  One launch instead of one a
// scale: each was a few microseconds of in-order adds on a mostly idle device.
VX_KERNEL void vx_fvif_totals(const float* rows, int h0, int first, float* out, int out_stride)
{
    const int f = blockIdx.z, s = first + (int)blockIdx.y / 2, m = (int)blockIdx.y % 2;
    i64 off = 0;
    for (int t = 0; t < s; ++t)
        off += (i64)gridDim.z * 2 * (h0 >> t);
    const int h = h0 >> s;
    const float* r = rows + off + (i64)f * 2 * h + (i64)m * h;
    vx_staged_row_sums(0, 1, h, [&](int, int x) { return r[x]; }, out + (i64)f * out_stride + 2 * s + m, 1);
}
