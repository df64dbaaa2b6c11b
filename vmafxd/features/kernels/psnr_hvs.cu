// PSNR-HVS (libvmaf's "psnr_hvs", Xiph's calc_psnrhvs): the device twin of
// vmafxd.features.psnr_hvs.plane_score.  The host turns each plane's float
// error sum into scores with the CPU twin's score_from_sum/metrics_from_stats
// (vmafxd/lanes/gpu/psnr_hvs.py).
//
// Two launches per batch:
//
// 1. vx_psnr_hvs_terms: every 8x8 block (every 7 samples) of every plane of
//    every frame at once: a thread per picture of a block (Daala's integer DCT,
//    the masking level's float sums in C's order) into shared memory, then a
//    thread per coefficient: the 64 weighted squared errors of each block
//    exactly as the CPU twin computes them, written coalesced to a scratch
//    array, each plane's errors in libvmaf's order (block-major, blocks in
//    raster order).  All the arithmetic is here, on every SM.
// 2. vx_psnr_hvs_sum: one block per plane of a frame adds that plane's errors
//    as libvmaf does, into ONE float, one after another.
//
// The catch in 2: a float sum depends on its order, and adding in a tree would
// change the bits, so the block reproduces the sequential sum exactly, in
// parallel, from this property of rounding: while the running sum s stays
// within one binade [2^(e-1), 2^e) (grid step u = 2^(e-24)), adding t >= 0
// gives s + q u, where q depends only on t / u, except at an exact tie, where
// it is q or q + 1 by the parity of s / u.  So each error is a map "add
// b[parity] steps" (two integers), maps compose associatively (A then C:
// b[p] = A[p] + C[(p + A[p]) & 1]), and an in-order scan over the threads (in
// warps with shuffles, then over the warps) gives the sum after every
// thread's HVS_CHUNK errors.  The one thread whose scanned sum reaches the
// binade's top adds its errors one by one (a real float sum), and the scan
// restarts after it in the new binade.  The sum only doubles a few dozen
// times, so the serial part is small.  The result is the sequential float sum
// to the bit (the CPU twin's np.add.accumulate).
//
// Contraction into FMA is off (kernels.py), so every float operation rounds
// as written; float division and sqrt are IEEE (the compilers' defaults).

#if defined(VX_EMU)
#include <math.h>
#endif

// 8x8 blocks a block of the terms kernel handles, and its threads (one a picture
// of an 8x8 block on the GPU)
#define HVS_TERM_BLOCKS 64
#define HVS_TERM_THREADS 128
// the sum kernel's threads (a power of two, at most 32 warps of 32 lanes)
#ifndef HVS_SUM_THREADS
#define HVS_SUM_THREADS 1024
#endif
// errors a thread of the sum kernel holds per window (a multiple of 4: float4 loads)
#ifndef HVS_CHUNK
#define HVS_CHUNK 16
#endif
#define HVS_STEP 7
// blocks of the terms kernel an SM should hold at once: 1 leaves its registers
// uncapped (150 on sm_90 with HVS_SPLIT_PHASES, 217 without; no spills); 4 caps them
// at 128 (a few spills)
#ifndef HVS_TERMS_MIN_BLOCKS
#define HVS_TERMS_MIN_BLOCKS 1
#endif

// 1: the terms kernel's DCTs and its masking variances in two phases (fewer registers);
// 0: both in one pass over the samples
#ifndef HVS_SPLIT_PHASES
#define HVS_SPLIT_PHASES 1
#endif

// The sum kernel runs HVS_SUM_THREADS threads a block: the compiler keeps its registers
// within what that allows (64 a thread at 1024 on NVIDIA's 64K-register SMs).
#if defined(VX_EMU)
#define HVS_SUM_BOUNDS
#define HVS_TERMS_BOUNDS
#else
#define HVS_SUM_BOUNDS __launch_bounds__(HVS_SUM_THREADS)
#define HVS_TERMS_BOUNDS __launch_bounds__(HVS_TERM_THREADS, HVS_TERMS_MIN_BLOCKS)
#endif

// Xiph's CSF tables (Y, then the 4:2:0 Cb and Cr ones), float hvs_csf[3][64], and the
// masking tables float hvs_mask[3][64] ((csf * 0.3885746225901003)^2 in double, stored
// as float), generated ahead of this source from the CPU twin's own tables
// (DECLARATION.kernel_tables in vmafxd/features/psnr_hvs.py; _psnr_hvs_dct.py's CSF, MASK).

#if defined(VX_EMU)
struct hvs_float4 { float x, y, z, w; };
#else
typedef float4 hvs_float4;
#endif

// OD_DCT_RSHIFT(a, 1): halving that rounds toward zero.
VX_DEVICE int hvs_half(int a) { return (a + (a < 0)) >> 1; }

// A lifting step: (a * mul + 2^(bits-1)) >> bits.
VX_DEVICE int hvs_lift(int a, int mul, int bits) { return (a * mul + (1 << (bits - 1))) >> bits; }

// Daala's 8-point forward DCT (od_bin_fdct8): x[k * xs] -> y[k * ys].
VX_DEVICE void hvs_fdct8(const int* x, int xs, int* y, int ys)
{
    int t0 = x[0 * xs], t4 = x[1 * xs], t2 = x[2 * xs], t6 = x[3 * xs];
    int t7 = x[4 * xs], t3 = x[5 * xs], t5 = x[6 * xs], t1 = x[7 * xs];
    t1 = t0 - t1;
    const int t1h = hvs_half(t1);
    t0 -= t1h;
    t4 += t5;
    const int t4h = hvs_half(t4);
    t5 -= t4h;
    t3 = t2 - t3;
    t2 -= hvs_half(t3);
    t6 += t7;
    const int t6h = hvs_half(t6);
    t7 = t6h - t7;
    t0 += t6h;
    t6 = t0 - t6;
    t2 = t4h - t2;
    t4 = t2 - t4;
    t0 -= hvs_lift(t4, 13573, 15);
    t4 += hvs_lift(t0, 11585, 14);
    t0 -= hvs_lift(t4, 13573, 15);
    t6 -= hvs_lift(t2, 21895, 15);
    t2 += hvs_lift(t6, 15137, 14);
    t6 -= hvs_lift(t2, 21895, 15);
    t3 += hvs_lift(t5, 19195, 15);
    t5 += hvs_lift(t3, 11585, 14);
    t3 -= hvs_lift(t5, 7489, 13);
    t7 = hvs_half(t5) - t7;
    t5 -= t7;
    t3 = t1h - t3;
    t1 -= t3;
    t7 += hvs_lift(t1, 3227, 15);
    t1 -= hvs_lift(t7, 6393, 15);
    t7 += hvs_lift(t1, 3227, 15);
    t5 += hvs_lift(t3, 2485, 13);
    t3 -= hvs_lift(t5, 18205, 15);
    t5 += hvs_lift(t3, 2485, 13);
    y[0 * ys] = t0; y[1 * ys] = t1; y[2 * ys] = t2; y[3 * ys] = t3;
    y[4 * ys] = t4; y[5 * ys] = t5; y[6 * ys] = t6; y[7 * ys] = t7;
}

// od_bin_fdct8x8: each column's transform stored as a row, twice.
VX_DEVICE void hvs_fdct8x8(const int* x, int* y)
{
    int z[64];
#pragma unroll
    for (int i = 0; i < 8; i++)
        hvs_fdct8(x + i, 8, z + 8 * i, 1);
#pragma unroll
    for (int i = 0; i < 8; i++)
        hvs_fdct8(z + i, 8, y + 8 * i, 1);
}

// The variance part of a block's masking (psnr_hvs._masking): the sum of the
// quadrants' variances over the block's, in float, C's order.
VX_DEVICE float hvs_variance_ratio(const int* x)
{
    float gmean = 0.0f;
    float qmean[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < 64; k++) {
        gmean += (float)x[k];
        qmean[((k >> 3) >= 4) + 2 * ((k & 7) >= 4)] += (float)x[k];
    }
    gmean /= 64.0f;
#pragma unroll
    for (int q = 0; q < 4; q++)
        qmean[q] /= 16.0f;
    float gvar = 0.0f;
    float qvar[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < 64; k++) {
        const int q = ((k >> 3) >= 4) + 2 * ((k & 7) >= 4);
        const float v = (float)x[k];
        gvar += (v - gmean) * (v - gmean);
        qvar[q] += (v - qmean[q]) * (v - qmean[q]);
    }
    const float gscale = (1.0f / 63.0f) * 64.0f;
    const float qscale = (1.0f / 15.0f) * 16.0f;
    gvar *= gscale;
#pragma unroll
    for (int q = 0; q < 4; q++)
        qvar[q] *= qscale;
    if (gvar > 0.0f)
        gvar = (((qvar[0] + qvar[1]) + qvar[2]) + qvar[3]) / gvar;
    return gvar;
}

// The AC energy part of a block's masking: the coefficients' squares weighted by the mask.
VX_DEVICE float hvs_energy(const int* c, int plane)
{
    float energy = 0.0f;
#pragma unroll
    for (int k = 1; k < 64; k++)
        energy += (float)(c[k] * c[k]) * hvs_mask[plane][k];
    return energy;
}

// A picture's 8x8 block at p: its 64 samples into x.
template <typename T>
VX_DEVICE void hvs_load(const T* p, i64 pitch, int* x)
{
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            x[i * 8 + j] = (int)p[(i64)i * pitch + j];
}

// A block's masking level (psnr_hvs._masking) from its variance ratio and its coefficients.
VX_DEVICE float hvs_level(float gvar, const int* c, int plane)
{
    return (float)(sqrt((double)(hvs_energy(c, plane) * gvar)) / 32.0);
}

// Blocks per row and column of a w x h plane (0 under 8 samples).
VX_DEVICE int hvs_blocks(int w, int h)
{
    const int nx = w > 7 ? (w - 1) / HVS_STEP : 0;
    const int ny = h > 7 ? (h - 1) / HVS_STEP : 0;
    return nx * ny;
}

// Where a plane's errors start in a frame's part of the scratch array: Y, then Cb, then Cr.
VX_DEVICE i64 hvs_plane_offset(int plane, int w0, int h0, int wc, int hc)
{
    return plane == 0 ? 0 : 64 * ((i64)hvs_blocks(w0, h0) + (plane == 2 ? (i64)hvs_blocks(wc, hc) : 0));
}

// Block (x, 0, frame): HVS_TERM_BLOCKS 8x8 blocks of one plane of the frame (a grid of
// ceil(Y's blocks / HVS_TERM_BLOCKS) + 2 ceil(Cb's / HVS_TERM_BLOCKS) blocks across, at least 1).
// Phase 1, a thread per picture of an 8x8 block (reference, distorted): its DCT and
// masking level, into shared memory.  Phase 2, a thread per error: the 64 errors of
// each 8x8 block from both pictures' coefficients, written coalesced.
template <typename T>
VX_DEVICE void hvs_terms(const T* r0, const T* r1, const T* r2, const T* d0, const T* d1, const T* d2,
                         int w0, int h0, int wc, int hc, i64 pitch0, i64 pitchc, i64 frame_stride,
                         float* terms, i64 frame_terms)
{
    // a picture's 64 coefficients a row, 65 apart so that the 32 lanes writing
    // their k-th coefficient hit 32 different banks
    __shared__ int coef[HVS_TERM_BLOCKS * 2 * 65];
    __shared__ float level[HVS_TERM_BLOCKS * 2];
    // the plane's masks then CSF weights: phase 2's lanes read different k at once,
    // which the constant cache would serialise
    __shared__ float table[128];
    // blockIdx.x runs over Y's groups of HVS_TERM_BLOCKS 8x8 blocks, then Cb's, then Cr's
    const int gy = (hvs_blocks(w0, h0) + HVS_TERM_BLOCKS - 1) / HVS_TERM_BLOCKS;
    const int gc = (hvs_blocks(wc, hc) + HVS_TERM_BLOCKS - 1) / HVS_TERM_BLOCKS;
    const int gx = blockIdx.x;
    const int plane = gx < gy ? 0 : gx < gy + gc ? 1 : 2;
    const int w = plane ? wc : w0, h = plane ? hc : h0;
    const int nblocks = hvs_blocks(w, h);
    const int first = (gx - (plane == 0 ? 0 : plane == 1 ? gy : gy + gc)) * HVS_TERM_BLOCKS;
    if (first >= nblocks)
        return;  // the whole block: only the grid of 1 block when no plane has any
    const int cnt = nblocks - first < HVS_TERM_BLOCKS ? nblocks - first : HVS_TERM_BLOCKS;
    const int nx = (w - 1) / HVS_STEP;
    const i64 f = (i64)blockIdx.z * frame_stride;
    const T* ref = (plane == 0 ? r0 : plane == 1 ? r1 : r2) + f;
    const T* dist = (plane == 0 ? d0 : plane == 1 ? d1 : d2) + f;
    const i64 pitch = plane ? pitchc : pitch0;
    for (int k = threadIdx.x; k < 128; k += blockDim.x)
        table[k] = k < 64 ? hvs_mask[plane][k] : hvs_csf[plane][k - 64];
    // thread i: picture i & 1 (reference, distorted) of 8x8 block first + i / 2
#define HVS_PICTURE(i) (((i) & 1 ? dist : ref) + (i64)(((first + ((i) >> 1)) / nx) * HVS_STEP) * pitch \
                        + ((first + ((i) >> 1)) % nx) * HVS_STEP)
#if HVS_SPLIT_PHASES
    // the DCTs, then (after a barrier, so that the compiler cannot interleave them) the
    // variances from the samples read again (from the cache) and the levels: each phase
    // needs far fewer live registers than both at once (occupancy)
    for (int i = threadIdx.x; i < 2 * cnt; i += blockDim.x) {
        int x[64];
        hvs_load<T>(HVS_PICTURE(i), pitch, x);
        hvs_fdct8x8(x, coef + i * 65);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * cnt; i += blockDim.x) {
        int x[64];
        hvs_load<T>(HVS_PICTURE(i), pitch, x);
        level[i] = hvs_level(hvs_variance_ratio(x), coef + i * 65, plane);
    }
#else
    for (int i = threadIdx.x; i < 2 * cnt; i += blockDim.x) {
        int x[64];
        hvs_load<T>(HVS_PICTURE(i), pitch, x);
        const float gvar = hvs_variance_ratio(x);
        hvs_fdct8x8(x, coef + i * 65);
        level[i] = hvs_level(gvar, coef + i * 65, plane);
    }
#endif
#undef HVS_PICTURE
    __syncthreads();
    float* out = terms + (i64)blockIdx.z * frame_terms + hvs_plane_offset(plane, w0, h0, wc, hc) + (i64)first * 64;
    for (int q = threadIdx.x; q < cnt * 64; q += blockDim.x) {
        const int i = q >> 6, k = q & 63;
        float lv = level[2 * i];
        const float lv_d = level[2 * i + 1];
        if (lv_d > lv)
            lv = lv_d;
        const int diff = coef[i * 130 + k] - coef[i * 130 + 65 + k];
        float term = 0.0f;
        // diff == 0: err 0 stays 0 whatever the threshold (thr >= 0: 0 < thr gives 0,
        // thr == 0 gives 0 - 0 = +0), and 0 * csf squared is +0, so the division is skipped
        if (diff != 0) {
            float err = (float)(diff < 0 ? -diff : diff);
            if (k) {
                const float thr = lv / table[k];
                err = err < thr ? 0.0f : err - thr;
            }
            const float wt = err * table[64 + k];
            term = wt * wt;
        }
        out[q] = term;
    }
}

// ---- the plane's sequential float sum ------------------------------------------------

// Step counts are u32, saturated at HVS_CAP = 2^30.  Why that changes no result:
// hvs_sum uses a count c only through the test c < room, room = 2^24 - at <= 2^24.
// Counts only grow as maps compose (a + c' >= a), so a count that passes the test
// (< 2^24 < HVS_CAP) was never saturated on the way, and is the true count.  A
// saturated count is >= HVS_CAP > room, so it fails the test as the true count
// (>= HVS_CAP) would, and stays >= HVS_CAP under any later composition (its parity
// is then not the true one, but whatever it selects, the sum saturates again).
// No overflow: a composition adds two counts <= 2^30, at most 2^31 < 2^32.
#define HVS_CAP (1u << 30)

// A float t >= 0 as m * 2^k, k >= -149, m < 2^24: the mantissa with its hidden bit
// (a subnormal: its bits, on the 2^-149 grid).  For a running sum s, 2^k is the grid
// step of s's binade and m the steps s is.
VX_DEVICE u32 hvs_split(float t, int* k)
{
    const u32 b = vx_float_bits(t);
    const int ex = (int)(b >> 23);
    *k = (ex ? ex : 1) - 150;
    return ex ? (b & 0x7fffffu) | 0x800000u : b;
}

// The steps of 2^ku that adding t (>= 0, finite) moves a float sum on the
// grid 2^ku, for an even (b0) and an odd (b1) sum: t / 2^ku rounded to the
// nearest integer, ties to the sum's even neighbour.  kb = ku + 150.  Branch-free:
// t = m * 2^kt, and r = ku - kt is how many of m's low bits fall below one step.
VX_DEVICE void hvs_steps(float t, int kb, u32* b0, u32* b1)
{
    const u32 bits = vx_float_bits(t);
    const int ex = (int)(bits >> 23);
    const u32 m = (bits & 0x7fffffu) | (ex ? 0x800000u : 0u);  // m < 2^24 (hvs_split)
    const int r = kb - (ex > 1 ? ex : 1);                       // ku - kt
    u32 q, frac;
    if (r > 0) {
        // q = m >> r, and the bits below the step as a 32-bit fraction (half: 2^31).
        // r is clamped to 31 (no shift past 31): for r >= 24 q is 0 either way, and
        // m << (32 - r) < 2^24 * 2^7 = 2^31 for r >= 25 is below half, as is the true
        // fraction m / 2^r < 2^24 / 2^25
        const int rr = r < 31 ? r : 31;
        q = m >> rr;
        frac = m << (32 - rr);
    } else {
        // t is a whole number of steps, m << -r: below 2^24 * 2^6 = 2^30 for -r <= 6;
        // for -r >= 7, t is normal (a subnormal has kt = -149 <= ku, so -r <= 0), so
        // m >= 2^23 and m << 7 >= 2^30 (< 2^31, no overflow): saturated either way
        const int l = -r < 7 ? -r : 7;
        q = m << l < HVS_CAP ? m << l : HVS_CAP;
        frac = 0u;
    }
    const u32 up = frac > 0x80000000u;
    const u32 tie = frac == 0x80000000u;
    // a tie goes to the even sum: from an even sum q + (q odd), from an odd one q + (q even)
    *b0 = q + (up | (tie & (q & 1u)));
    *b1 = q + (up | (tie & ((q & 1u) ^ 1u)));
}

// A then C, saturating.
VX_DEVICE void hvs_compose(u32 a0, u32 a1, u32 c0, u32 c1, u32* r0, u32* r1)
{
    const u32 x0 = a0 + ((a0 & 1u) ? c1 : c0);
    const u32 x1 = a1 + ((a1 & 1u) ? c0 : c1);
    *r0 = x0 < HVS_CAP ? x0 : HVS_CAP;
    *r1 = x1 < HVS_CAP ? x1 : HVS_CAP;
}

// Inclusive (i0, i1) and exclusive (e0, e1) scan of the threads' maps, in thread
// order: in each warp by shuffles, then over the warps' totals by warp 0.
// `wsum` holds 2 x 32 values; the caller separates two calls by a barrier.
VX_DEVICE void hvs_block_scan(u32 m0, u32 m1, u32* wsum, u32* i0, u32* i1, u32* e0, u32* e1)
{
    const int t = threadIdx.x, lane = t % VX_WARP, warp = t / VX_WARP;
    const int nwarps = (blockDim.x + VX_WARP - 1) / VX_WARP;
    for (int off = 1; off < VX_WARP; off <<= 1) {
        const u32 p0 = vx_shfl_up_u32(m0, off), p1 = vx_shfl_up_u32(m1, off);
        if (lane >= off)
            hvs_compose(p0, p1, m0, m1, &m0, &m1);
    }
    u32 x0 = vx_shfl_up_u32(m0, 1), x1 = vx_shfl_up_u32(m1, 1);
    if (lane == 0)
        x0 = x1 = 0;  // the identity
    if (lane == VX_WARP - 1 || t == (int)blockDim.x - 1) {
        wsum[warp] = m0;
        wsum[32 + warp] = m1;
    }
    __syncthreads();
    if (warp == 0) {  // nwarps <= VX_WARP: scan the warps' totals, exclusive, in place
        u32 w0 = lane < nwarps ? wsum[lane] : 0u, w1 = lane < nwarps ? wsum[32 + lane] : 0u;
        for (int off = 1; off < VX_WARP; off <<= 1) {
            const u32 p0 = vx_shfl_up_u32(w0, off), p1 = vx_shfl_up_u32(w1, off);
            if (lane >= off)
                hvs_compose(p0, p1, w0, w1, &w0, &w1);
        }
        u32 y0 = vx_shfl_up_u32(w0, 1), y1 = vx_shfl_up_u32(w1, 1);
        if (lane == 0)
            y0 = y1 = 0;
        if (lane < nwarps) {
            wsum[lane] = y0;
            wsum[32 + lane] = y1;
        }
    }
    __syncthreads();
    const u32 w0 = wsum[warp], w1 = wsum[32 + warp];
    hvs_compose(w0, w1, m0, m1, i0, i1);
    hvs_compose(w0, w1, x0, x1, e0, e1);
}

// A thread's HVS_CHUNK errors from terms[from ...] (from a multiple of 4, terms 16-byte
// aligned: float4 loads), zeros past n: they add nothing (s + 0 == s, also at s == +0).
VX_DEVICE void hvs_load_chunk(const float* terms, i64 n, i64 from, float* dst)
{
#pragma unroll
    for (int c = 0; c < HVS_CHUNK; c += 4) {
        if (from + c < n) {  // n is a multiple of 64, so the whole float4 is inside
            const hvs_float4 q = *(const hvs_float4*)(terms + from + c);
            dst[c] = q.x;
            dst[c + 1] = q.y;
            dst[c + 2] = q.z;
            dst[c + 3] = q.w;
        } else {
            dst[c] = dst[c + 1] = dst[c + 2] = dst[c + 3] = 0.0f;
        }
    }
}

// The sequential float sum of terms[0 .. n - 1] (n a multiple of 64), into *out.
// Windows of blockDim x HVS_CHUNK errors, thread t holding errors t * HVS_CHUNK ...
VX_DEVICE void hvs_sum(const float* terms, i64 n, double* out)
{
    __shared__ u32 wsum[64];
    __shared__ float state;
    __shared__ int hit;
    const int nt = blockDim.x, t = threadIdx.x;
    const i64 window = (i64)nt * HVS_CHUNK;
    if (t == 0)
        state = 0.0f;
    float v[HVS_CHUNK], next[HVS_CHUNK];
    hvs_load_chunk(terms, n, (i64)t * HVS_CHUNK, next);
    for (i64 base = 0; base < n; base += window) {
#pragma unroll
        for (int c = 0; c < HVS_CHUNK; c++)
            v[c] = next[c];
        if (base + window < n)  // the next window's errors load while this one is added
            hvs_load_chunk(terms, n, base + window + (i64)t * HVS_CHUNK, next);
        // whether this thread has an error other than +0 (a warp of zeros skips the maps)
        u32 nonzero = 0;
#pragma unroll
        for (int c = 0; c < HVS_CHUNK; c++)
            nonzero |= vx_float_bits(v[c]);
        int start = 0;  // threads before start have added their errors
        while (start < nt) {
            __syncthreads();  // state is final; nobody reads last round's hit any more
            const float s = state;
            int ku;
            const u32 at = hvs_split(s, &ku);  // s = at * 2^ku, at < 2^24 (the grid of s's binade)
            // the binade's top is 2^24 steps (for s < 2^-125, the subnormal and first
            // normal binades together: one grid 2^-149 up to 2^24 of its steps)
            const u32 room = (1u << 24) - at;
            if (t == 0)
                hit = nt;
            u32 m0 = 0, m1 = 0;
            if (t >= start && nonzero) {  // zeros are the identity map (0, 0)
#pragma unroll
                for (int c = 0; c < HVS_CHUNK; c++) {
                    u32 c0, c1;
                    hvs_steps(v[c], ku + 150, &c0, &c1);
                    hvs_compose(m0, m1, c0, c1, &m0, &m1);
                }
            }
            u32 i0, i1, e0, e1;
            hvs_block_scan(m0, m1, wsum, &i0, &i1, &e0, &e1);
            const u32 incl = (at & 1u) ? i1 : i0, excl = (at & 1u) ? e1 : e0;
            // the counts only grow along the threads, so at most one thread crosses
            if (t >= start && excl < room && incl >= room)
                hit = t;
            if (t == nt - 1 && incl < room)  // every thread stays: the window's sum
                state = (float)((double)s + (double)incl * ldexp(1.0, ku));  // exact: on the grid, below top
            __syncthreads();
            const int j = hit;
            if (j == nt)
                break;
            if (t == j) {  // this thread's errors leave the binade: add them one by one
                float x = (float)((double)s + (double)excl * ldexp(1.0, ku));
                for (int c = 0; c < HVS_CHUNK; c++)
                    x = x + v[c];
                state = x;
            }
            start = j + 1;
        }
        __syncthreads();  // the window's loads of wsum/hit/state are done before the next one's
    }
    if (t == 0)
        out[0] = (double)state;
}

VX_KERNEL void HVS_TERMS_BOUNDS vx_psnr_hvs_terms_u8(const u8* r0, const u8* r1, const u8* r2, const u8* d0, const u8* d1,
                                    const u8* d2, int w0, int h0, int wc, int hc, i64 pitch0, i64 pitchc,
                                    i64 frame_stride, float* terms, i64 frame_terms)
{
    hvs_terms<u8>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, pitch0, pitchc, frame_stride, terms, frame_terms);
}

VX_KERNEL void HVS_TERMS_BOUNDS vx_psnr_hvs_terms_u16(const u16* r0, const u16* r1, const u16* r2, const u16* d0, const u16* d1,
                                     const u16* d2, int w0, int h0, int wc, int hc, i64 pitch0, i64 pitchc,
                                     i64 frame_stride, float* terms, i64 frame_terms)
{
    hvs_terms<u16>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, pitch0, pitchc, frame_stride, terms, frame_terms);
}

// Block (plane, 0, frame): the plane's float error sum, as a double, at out[frame][out_index + plane].
VX_KERNEL void HVS_SUM_BOUNDS vx_psnr_hvs_sum(const float* terms, i64 frame_terms, int w0, int h0, int wc, int hc, double* out,
                               int out_stride, int out_index)
{
    const int plane = blockIdx.x;
    const i64 n = 64 * (i64)(plane ? hvs_blocks(wc, hc) : hvs_blocks(w0, h0));
    hvs_sum(terms + (i64)blockIdx.z * frame_terms + hvs_plane_offset(plane, w0, h0, wc, hc), n,
            out + (i64)blockIdx.z * out_stride + out_index + plane);
}
