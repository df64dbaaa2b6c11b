// Float SSIM and MS-SSIM (libvmaf's "float_ssim" and "float_ms_ssim"): the
// device twin of vmafxd.features._ssim_core / ssim.compute_stats /
// ms_ssim.compute_stats.  The host turns the sums into scores with the CPU
// twins' metrics_from_stats (vmafxd/lanes/gpu/ssim.py).
//
// Kernels (all batched: the frame is blockIdx.z, or blockIdx.y for the reduction)
//   vx_ssim_box_u8/_u16     float_ssim's box decimation by `factor` (libvmaf's
//                           _iqa_decimate with a factor x factor box), straight
//                           from the staging samples into float pictures.
//   vx_ms_ssim_down_*       float_ms_ssim's 9x9 low-pass and 2:1 subsampling,
//                           one scale per launch (u8/u16 staging, or float);
//                           shared-memory tile, row sums, then outputs.
//   vx_ssim_stats[_exact]   the single-scale SSIM sums of a list of "jobs" (one
//                           per picture pair and scale: float_ssim has 1,
//                           float_ms_ssim 5, all in ONE launch): input rows
//                           through shared memory, the 11x11 Gaussian as two 1-D
//                           passes over the valid region (the vertical one from
//                           registers), the per-pixel l, c, s terms, and per-block
//                           double sums written to a per-block slot.
//   vx_ssim_reduce          sums each job's per-block slots in a fixed order
//                           into the frame's statistics record: deterministic
//                           (no floating-point atomics anywhere).
//
// Precision (see _ssim_core's module docstring for the CPU side):
//  * sample conversion, both decimations and the per-pixel terms are libvmaf's
//    arithmetic to the bit (and so the CPU twin's): float32 products, double
//    sums, libvmaf's float/double mix in l, c and s;
//  * the Gaussian passes come in two flavours (template EXACT):
//      EXACT=0            the CPU twin's float32 formula (taps folded around
//                         the centre sample), so the filtered moments are the
//                         CPU twin's bit for bit, and so are the scores (up to
//                         the order of the double sums);
//                         (the features' option exact_filter=false);
//      EXACT=1 (default)  libvmaf's own, and the CPU twin's default (option
//                         exact_filter=true): each float32 product widened to double,
//                         summed in tap order, rounded to float after each pass:
//                         libvmaf's fullprec scores to the bit on all 18
//                         reference pairs (emulator), but a float->double
//                         conversion per tap, and conversions run at 1/8 of the
//                         float rate on the H200: +52 us per 1080p frame.
//  * contraction into FMA is off (kernels.py), so every float operation rounds
//    as written, as on the CPU; the few fmaf/fma calls are deliberate.
//
// Cost on the H200 (1080p 8-bit, batches of 32, both features, EXACT=0): about
// 89 us a frame, of which MS-SSIM's statistics 53, its decimations 29 (scale 1:
// 22), float_ssim 7.  Measured alternatives (not taken, to keep the CPU twin's
// bits): the twin's formula with fmaf for multiply-add -5 us (scores within
// 3e-8), float accumulation in the 9x9 decimation -9 us (within 2e-7).

#if defined(VX_EMU)
#include <math.h>  // sqrtf: the device compilers have it built in
#endif

// libvmaf's 11-tap Gaussian (sigma 1.5) as 6-decimal double literals rounded to
// float, exactly as its float tables are initialised (a float literal "f" could
// round differently from the double -> float path numpy and libvmaf take).
__constant__ float ssim_taps[11] = {0.001028, 0.007599, 0.036001, 0.109361, 0.213006, 0.266012,
                                    0.213006, 0.109361, 0.036001, 0.007599, 0.001028};

// The float32 taps sum to 1 + SSIM_EXCESS (the exact double sum minus one,
// rounded to float): _ssim_core._TAP_EXCESS.
#define SSIM_EXCESS 0x1.0fa8p-19f

// C1 = (0.01 * 255)^2, C2 = (0.03 * 255)^2, C3 = C2 / 2, formed in float32 as
// libvmaf forms them (_ssim_core.C1/C2/C3).
#define SSIM_C1 0x1.a028f4p+2f
#define SSIM_C2 0x1.d42e12p+5f
#define SSIM_C3 0x1.d42e12p+4f

// libvmaf's 9x9 low-pass table for MS-SSIM (ms_ssim.LOW_PASS): a 2-D table in
// its own right, not the outer product of its 1-D taps.  Listed once (X-macro),
// instantiated as the float table libvmaf multiplies with and as the same
// values widened to double (for the exact products of the decimation).
#define MS_LPF_ROWS(E)                                                                                         \
    {E(0.000714), E(-0.000450), E(-0.002090), E(0.007132), E(0.016114), E(0.007132), E(-0.002090), E(-0.000450), E(0.000714)}, \
    {E(-0.000450), E(0.000283), E(0.001316), E(-0.004490), E(-0.010146), E(-0.004490), E(0.001316), E(0.000283), E(-0.000450)}, \
    {E(-0.002090), E(0.001316), E(0.006115), E(-0.020867), E(-0.047149), E(-0.020867), E(0.006115), E(0.001316), E(-0.002090)}, \
    {E(0.007132), E(-0.004490), E(-0.020867), E(0.071207), E(0.160885), E(0.071207), E(-0.020867), E(-0.004490), E(0.007132)}, \
    {E(0.016114), E(-0.010146), E(-0.047149), E(0.160885), E(0.363505), E(0.160885), E(-0.047149), E(-0.010146), E(0.016114)}, \
    {E(0.007132), E(-0.004490), E(-0.020867), E(0.071207), E(0.160885), E(0.071207), E(-0.020867), E(-0.004490), E(0.007132)}, \
    {E(-0.002090), E(0.001316), E(0.006115), E(-0.020867), E(-0.047149), E(-0.020867), E(0.006115), E(0.001316), E(-0.002090)}, \
    {E(-0.000450), E(0.000283), E(0.001316), E(-0.004490), E(-0.010146), E(-0.004490), E(0.001316), E(0.000283), E(-0.000450)}, \
    {E(0.000714), E(-0.000450), E(-0.002090), E(0.007132), E(0.016114), E(0.007132), E(-0.002090), E(-0.000450), E(0.000714)}
#define MS_AS_FLOAT(x) ((float)(x))
#define MS_AS_DOUBLE(x) ((double)(float)(x))
__constant__ float ms_lpf[9][9] = {MS_LPF_ROWS(MS_AS_FLOAT)};
__constant__ double ms_lpf_d[9][9] = {MS_LPF_ROWS(MS_AS_DOUBLE)};

// libvmaf's KBND_SYMMETRIC border: the edge sample IS repeated (-1 -> 0,
// n -> n - 1), unlike vx_mirror.  The clamp only matters for positions far
// outside small pictures, which feed outputs that are never written.
VX_DEVICE int ssim_mirror(int i, int n)
{
    if (i < 0) i = -1 - i;
    else if (i >= n) i = 2 * n - 1 - i;
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

VX_DEVICE int ssim_min(int a, int b) { return a < b ? a : b; }

// A sample as libvmaf's picture_copy makes it: (float)x for 8-bit, (float)x /
// divisor for 10/12/16-bit; decimated scales are float already.  The divisor
// is a power of two, so multiplying by its (exact) reciprocal gives the same
// float as libvmaf's division, at a fraction of an IEEE division's cost.
VX_DEVICE float ssim_load(const u8* p, i64 o, float) { return (float)p[o]; }
VX_DEVICE float ssim_load(const u16* p, i64 o, float inv_divisor) { return (float)p[o] * inv_divisor; }
VX_DEVICE float ssim_load(const float* p, i64 o, float) { return p[o]; }

// ---------------------------------------------------------------------------
// float_ssim's box decimation (ssim.BoxDecimator): output (y, x) is the mean
// of the factor x factor block starting factor/2 samples above and left of
// (factor y, factor x), mirrored at the borders.  libvmaf multiplies each
// float sample by the float weight 1/factor^2 and adds the products in double,
// then rounds to float; that sum is exact, so the result is libvmaf's (and the
// CPU twin's) to the bit.  One thread per output pixel, straight from global
// memory (a 1080p frame is read once); blocks away from the borders (nearly
// all) take the unmirrored path.
// ---------------------------------------------------------------------------
#define BOX_TW 32
#define BOX_TH 8

// F: the factor as a compile-time constant (2..10: the scale option's range,
// and the automatic one up to about 2600 lines), so a row's F loads are all in
// flight at once and the loops unroll.
template <typename T, int F>
VX_DEVICE void ssim_box_f(const T* s, i64 src_pitch, float inv, int w, int h, float* d, i64 dst_pitch, int ow,
                          int oh, int oy0, int ox0)
{
    const float weight = 1.0f / (float)(F * F);  // libvmaf: 1.0f / (scale * scale)
    for (int i = threadIdx.x; i < BOX_TH * BOX_TW; i += blockDim.x) {
        const int oy = oy0 + i / BOX_TW, ox = ox0 + i % BOX_TW;
        if (oy >= oh || ox >= ow) continue;
        const int gy = oy * F - F / 2, gx = ox * F - F / 2;
        const bool inside = gy >= 0 && gx >= 0 && gy + F <= h && gx + F <= w;
        int cols[F];
#pragma unroll
        for (int u = 0; u < F; ++u)
            cols[u] = inside ? gx + u : ssim_mirror(gx + u, w);
        double sum = 0.0;
#pragma unroll
        for (int v = 0; v < F; ++v) {
            const T* row = s + (i64)(inside ? gy + v : ssim_mirror(gy + v, h)) * src_pitch;
            float x[F];
#pragma unroll
            for (int u = 0; u < F; ++u)
                x[u] = ssim_load(row, cols[u], inv);
#pragma unroll
            for (int u = 0; u < F; ++u)
                sum += (double)(x[u] * weight);
        }
        d[(i64)oy * dst_pitch + ox] = (float)sum;
    }
}

// Any factor (automatic scales pass 10 above about 2600 lines): runtime loops.
template <typename T>
VX_DEVICE void ssim_box_any(const T* s, i64 src_pitch, float inv, int w, int h, int factor, float* d,
                            i64 dst_pitch, int ow, int oh, int oy0, int ox0)
{
    const float weight = 1.0f / (float)(factor * factor);
    for (int i = threadIdx.x; i < BOX_TH * BOX_TW; i += blockDim.x) {
        const int oy = oy0 + i / BOX_TW, ox = ox0 + i % BOX_TW;
        if (oy >= oh || ox >= ow) continue;
        const int gy = oy * factor - factor / 2, gx = ox * factor - factor / 2;
        double sum = 0.0;
        for (int v = 0; v < factor; ++v) {
            const T* row = s + (i64)ssim_mirror(gy + v, h) * src_pitch;
            for (int u = 0; u < factor; ++u)
                sum += (double)(ssim_load(row, ssim_mirror(gx + u, w), inv) * weight);
        }
        d[(i64)oy * dst_pitch + ox] = (float)sum;
    }
}

// The plane a block of the box/down kernels works on: frame blockIdx.z, role (ref, dist) the
// low bit of blockIdx.y (the rest of blockIdx.y is the tile row).
template <typename P>
VX_DEVICE P* ssim_block_plane(P* base, i64 frame_stride, i64 role_stride)
{
    const int frame = blockIdx.z;
    const int role = blockIdx.y & 1;
    return base + frame * frame_stride + role * role_stride;
}

template <typename T>
VX_DEVICE void ssim_box_impl(const T* src, i64 src_frame_stride, i64 src_role_stride, i64 src_pitch,
                             int divisor, int w, int h, int factor, float* dst, i64 dst_frame_stride,
                             i64 dst_role_stride, i64 dst_pitch, int ow, int oh)
{
    const int oy0 = (blockIdx.y >> 1) * BOX_TH, ox0 = blockIdx.x * BOX_TW;
    const T* s = ssim_block_plane(src, src_frame_stride, src_role_stride);
    float* d = ssim_block_plane(dst, dst_frame_stride, dst_role_stride);
    const float inv = 1.0f / (float)divisor;
    switch (factor) {
    case 2: ssim_box_f<T, 2>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 3: ssim_box_f<T, 3>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 4: ssim_box_f<T, 4>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 5: ssim_box_f<T, 5>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 6: ssim_box_f<T, 6>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 7: ssim_box_f<T, 7>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 8: ssim_box_f<T, 8>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 9: ssim_box_f<T, 9>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    case 10: ssim_box_f<T, 10>(s, src_pitch, inv, w, h, d, dst_pitch, ow, oh, oy0, ox0); break;
    default: ssim_box_any<T>(s, src_pitch, inv, w, h, factor, d, dst_pitch, ow, oh, oy0, ox0); break;
    }
}

#define SSIM_BOX(NAME, T)                                                                                     \
    VX_KERNEL void NAME(const T* src, i64 src_frame_stride, i64 src_role_stride, i64 src_pitch, int divisor,   \
                        int w, int h, int factor, float* dst, i64 dst_frame_stride, i64 dst_role_stride,        \
                        i64 dst_pitch, int ow, int oh)                                                        \
    {                                                                                                         \
        ssim_box_impl<T>(src, src_frame_stride, src_role_stride, src_pitch, divisor, w, h, factor, dst,        \
                         dst_frame_stride, dst_role_stride, dst_pitch, ow, oh);                                \
    }

SSIM_BOX(vx_ssim_box_u8, u8)
SSIM_BOX(vx_ssim_box_u16, u16)

// ---------------------------------------------------------------------------
// float_ms_ssim's decimation (ms_ssim.LowPassDecimator): output (y, x) is the
// 9x9 table applied around (2y, 2x), mirrored borders; libvmaf forms 81 float
// products e * S and adds them in double, then rounds to float.  Those double
// sums are exact for picture data, so any grouping gives libvmaf's value, and
// the result must be EXACT, not merely close: a fair share of the exact sums
// lie exactly halfway between two floats (measured: 1 output in ~3000 at scale
// 2), and an error of 1e-15 there already picks the other float.
//
// Grouping: ROW sums first (9 products each), then 9 row sums per output.  A
// row sum depends on the input row, the output column and |dy| only, and even
// input rows meet |dy| in {0, 2, 4}, odd rows {1, 3}: 5 row sums per two input
// rows instead of 9 (the CPU twin shares products the same way).
//
// Two exact ways to a row sum (template FMA):
//  FMA=0  libvmaf's: each float product widened to double, summed.  One
//         float->double conversion per product, and conversions run at 1/8 of
//         the float rate on the GPUs we target (they bounded the first version
//         on the H200).  Used for float input (scales 2-4, small).
//  FMA=1  for integer-valued input (scale 1 from the staging samples, 8 to 12
//         bits): sum(fl(e * S)) = sum(e * S) - sum(r), with r = e * S - fl(e * S)
//         = fmaf(S, e, -fl(S * e)) exactly (an error-free transformation).
//         Both sums are exact: samples are multiples of 2^-4 below 256 and
//         table entries multiples of 2^-35, so every e * S and every partial
//         sum is a multiple of 2^-39 below 2^8 (47 bits: the double FMAs never
//         round); each |r| is at most half an ulp of its product, so the r and
//         their partial sums stay below 2^-16 on the same 2^-39 grid (23 bits:
//         the float sum never rounds either).  Symmetric taps share a table
//         entry and S[4 - m] + S[4 + m] is exact in float, so the double part
//         takes 5 conversions and 5 DFMAs per row sum.  (16-bit samples, on a
//         2^-8 grid, would need 27 bits for the r: they take FMA=0.)
// One block: DN_TH x DN_TW outputs of one picture (ref or dist: blockIdx.y & 1).
// ---------------------------------------------------------------------------
// keep DN_TW, DN_TH, SS_BW and SS_ROWS in step with vmafxd/lanes/gpu/ssim.py
#define DN_TW 32
#define DN_TH 16
#define DN_IH (2 * DN_TH + 7)
#define DN_IW (2 * DN_TW + 7)
#define DN_LOADS ((DN_IH * (DN_IW + 1) + 255) / 256)  // tile elements per thread (256 threads): one batch

// Row sum of table row ROW (4 + |dy|) over samples S[0..8]; `pairs` holds
// S[4], S[3] + S[5], S[2] + S[6], S[1] + S[7], S[0] + S[8] in double (FMA=1).
template <int ROW, int FMA>
VX_DEVICE double ms_row_sum(const float* S, const double* pairs)
{
    if (!FMA) {
        double sum = 0.0;
#pragma unroll
        for (int u = 0; u < 9; ++u)
            sum += (double)(S[u] * ms_lpf[ROW][u]);  // libvmaf: sample * table entry, in double
        return sum;
    }
    float removed = 0.0f;
#pragma unroll
    for (int u = 0; u < 9; ++u) {
        const float p = S[u] * ms_lpf[ROW][u];
        removed += fmaf(S[u], ms_lpf[ROW][u], -p);
    }
    double exact = pairs[0] * ms_lpf_d[ROW][4];
#pragma unroll
    for (int m = 1; m < 5; ++m)
        exact = fma(pairs[m], ms_lpf_d[ROW][4 + m], exact);
    return exact - (double)removed;
}

template <int FMA>
VX_DEVICE void ms_row_sums(int r, int x, const float (*tile)[DN_IW + 1], double (*rows)[3][DN_TW])
{
    float S[9];
    double pairs[5];
#pragma unroll
    for (int u = 0; u < 9; ++u)
        S[u] = tile[r][2 * x + u];
    if (FMA) {
        pairs[0] = (double)S[4];
#pragma unroll
        for (int m = 1; m < 5; ++m)
            pairs[m] = (double)(S[4 - m] + S[4 + m]);  // exact: integer-valued samples
    }
    // Input row r (relative) meets output row j with dy = r - 2j - 4, so r's
    // parity fixes |dy|'s: class k is |dy| = 2k (even r) or 2k + 1 (odd r).
    if (r & 1) {
        rows[r][0][x] = ms_row_sum<5, FMA>(S, pairs);
        rows[r][1][x] = ms_row_sum<7, FMA>(S, pairs);
    } else {
        rows[r][0][x] = ms_row_sum<4, FMA>(S, pairs);
        rows[r][1][x] = ms_row_sum<6, FMA>(S, pairs);
        rows[r][2][x] = ms_row_sum<8, FMA>(S, pairs);
    }
}

template <typename T>
VX_DEVICE void ms_down_impl(const T* src, i64 src_frame_stride, i64 src_role_stride, i64 src_pitch, int divisor,
                            int w, int h, float* dst, i64 dst_frame_stride, i64 dst_role_stride, i64 dst_pitch,
                            int ow, int oh)
{
    __shared__ float tile[DN_IH][DN_IW + 1];
    // row sums: [input row][|dy| >> 1][output column]
    __shared__ double rows[DN_IH][3][DN_TW];
    __shared__ i64 row_off[DN_IH];
    __shared__ int col_idx[DN_IW];

    const int oy0 = (blockIdx.y >> 1) * DN_TH, ox0 = blockIdx.x * DN_TW;
    const T* s = ssim_block_plane(src, src_frame_stride, src_role_stride);
    float* d = ssim_block_plane(dst, dst_frame_stride, dst_role_stride);
    const float inv = 1.0f / (float)divisor;
    const int t = threadIdx.x;

    // mirrored coordinates once per row and column, not per sample
    for (int i = t; i < DN_IH; i += blockDim.x)
        row_off[i] = (i64)ssim_mirror(2 * oy0 - 4 + i, h) * src_pitch;
    for (int i = t; i < DN_IW; i += blockDim.x)
        col_idx[i] = ssim_mirror(2 * ox0 - 4 + i, w);
    __syncthreads();
    // All of a thread's loads in flight before the stores (see
    // ssim_load_column); the tile is walked as one flat array, pad column too.
    {
        float* flat = &tile[0][0];
        const int n = DN_IH * (DN_IW + 1);
        for (int e0 = 0; e0 < n; e0 += DN_LOADS * blockDim.x) {
            float v[DN_LOADS];
#pragma unroll
            for (int q = 0; q < DN_LOADS; ++q) {
                // clamped, not skipped: unconditional loads keep the addressing
                // out of predicated blocks (the compiler re-derived the shared
                // base in every one); the pad column reads a real sample
                const int e = ssim_min(e0 + q * blockDim.x + t, n - 1);
                const int ty = e / (DN_IW + 1), tx = ssim_min(e - ty * (DN_IW + 1), DN_IW - 1);
                v[q] = ssim_load(s, row_off[ty] + col_idx[tx], inv);
            }
#pragma unroll
            for (int q = 0; q < DN_LOADS; ++q) {
                const int e = e0 + q * blockDim.x + t;
                if (e < n)
                    flat[e] = v[q];
            }
        }
    }
    __syncthreads();

    // integer-valued samples of at most 12 bits: the FMA form (see above)
    const bool fma_form = sizeof(T) == 1 || (sizeof(T) == 2 && divisor <= 16);
    for (int i = t; i < DN_IH * DN_TW; i += blockDim.x) {
        if (fma_form)
            ms_row_sums<1>(i / DN_TW, i % DN_TW, tile, rows);
        else
            ms_row_sums<0>(i / DN_TW, i % DN_TW, tile, rows);
    }
    __syncthreads();

    for (int i = t; i < DN_TH * DN_TW; i += blockDim.x) {
        const int j = i / DN_TW, x = i % DN_TW;
        const int oy = oy0 + j, ox = ox0 + x;
        if (oy >= oh || ox >= ow) continue;
        double sum = 0.0;
#pragma unroll
        for (int v = 0; v < 9; ++v) {
            const int ady = v < 4 ? 4 - v : v - 4;
            sum += rows[2 * j + v][ady >> 1][x];
        }
        d[(i64)oy * dst_pitch + ox] = (float)sum;
    }
}

#define MS_DOWN(NAME, T)                                                                                      \
    VX_KERNEL void NAME(const T* src, i64 src_frame_stride, i64 src_role_stride, i64 src_pitch, int divisor,   \
                        int w, int h, float* dst, i64 dst_frame_stride, i64 dst_role_stride, i64 dst_pitch,    \
                        int ow, int oh)                                                                       \
    {                                                                                                         \
        ms_down_impl<T>(src, src_frame_stride, src_role_stride, src_pitch, divisor, w, h, dst,                 \
                        dst_frame_stride, dst_role_stride, dst_pitch, ow, oh);                                 \
    }

MS_DOWN(vx_ms_ssim_down_u8, u8)
MS_DOWN(vx_ms_ssim_down_u16, u16)
MS_DOWN(vx_ms_ssim_down_f32, float)

// ---------------------------------------------------------------------------
// The SSIM sums.  A job (16 i64 words) describes one picture pair at one scale:
//   0 kind      sample type: 0 u8, 1 u16 (staging), 2 float (decimated scratch)
//   1 base      0: the `staging` argument, 1: the `scratch` argument
//   2 offset    bytes from that base to frame 0's reference plane
//   3 role      elements from a frame's reference plane to its distorted plane
//   4 fstride   elements from one frame to the next
//   5 pitch     elements per row
//   6 w, 7 h    picture size (the valid region is (w - 10) x (h - 10))
//   8 tiles_x   blocks per row of the valid region
//   9 first     first blockIdx.x of the job; 10 nblocks: its block count
//   11 divisor  staging samples are divided by it (1, 4, 16, 256)
//   12 lcs      also sum l * c * s
// Jobs are in blockIdx.x order.  Each block writes its 4 double sums
// (l, c, s, l*c*s) to partials[(frame * total_blocks + blockIdx.x) * 4].
//
// A block covers SS_BW output columns by SS_ROWS output rows.  Each thread owns
// one output column and walks down it: per input row it forms the horizontal
// pass of the five maps (mu1, mu2, E[x^2], E[y^2], E[xy]) at its column and
// keeps the last 11 such rows in registers, from which the vertical pass and
// the per-pixel terms of the output row 10 rows up follow at once.  Nothing but
// the input rows goes through shared memory, and the horizontal pass is done
// once per input row (halo cost (SS_ROWS + 10) / SS_ROWS).  The row loop
// takes SS_U rows a step and then shifts the kept rows down by SS_U registers:
// 50 / SS_U moves a row, and SS_U copies of the row code.  (A ring unrolled 11
// times needs no moves, but its 89 KB of code thrashed the instruction cache
// on the H200: "no instruction" was the top stall.)
// Input rows come in chunks of SS_CH, loaded into shared memory by the whole
// block between two barriers.
//
// Emulation (one thread a block): the thread takes the columns one after
// another (the outer `group` loop), re-loading the chunks for each, so the
// arithmetic and the order of the per-column work are the device's.  On the
// device blockDim.x == SS_BW and the group loop runs once, so every thread
// meets the same barriers.
// ---------------------------------------------------------------------------
#define JOB_WORDS 16
#define SS_BW 128                             // output columns per block == blockDim.x on the device
#define SS_CH 16                              // input rows per chunk
#define SS_CHUNKS 8                           // chunks per block
#define SS_U 2                                // input rows per step of the row loop
#define SS_ROWS (SS_CH * SS_CHUNKS - 10)      // output rows per block (118)

// One 11-tap pass.  EXACT=0: the CPU twin's _window_pass, operation for
// operation: start from centre * (sum(taps) - 1), add the folded, centred
// pairs smallest taps first, add the centre last.  The partial sums stay
// small where the picture is flat, which is what keeps the variances
// (differences of two large, nearly equal moments) close to libvmaf's.
// EXACT=1: libvmaf's _iqa_convolve: float products, double sum, in tap order.
template <int EXACT>
VX_DEVICE float ssim_window(const float* v)
{
    if (EXACT) {
        double sum = 0.0;
#pragma unroll
        for (int i = 0; i < 11; ++i)
            sum += (double)(v[i] * ssim_taps[i]);
        return (float)sum;
    }
    const float c = v[5];
    const float twice = c + c;
    float out = c * SSIM_EXCESS;
#pragma unroll
    for (int i = 0; i < 5; ++i) {
        float pair = v[i] + v[10 - i];
        pair = pair - twice;
        pair = pair * ssim_taps[i];
        out = out + pair;
    }
    return out + c;
}

struct SsimSums {
    double l, c, s, lcs;
};

// The per-pixel terms, in libvmaf's mix of float and double (ssim_tools.c,
// _iqa_ssim's default case; the CPU twin's _add_terms step by step).
VX_DEVICE void ssim_terms(float mu1, float mu2, float e11, float e22, float e12, int with_lcs, SsimSums& acc)
{
    const float sq1 = mu1 * mu1, sq2 = mu2 * mu2;
    float var1 = e11 - sq1, var2 = e22 - sq2;
    // libvmaf's MAX(0.0, v): keeps v unless 0 is larger (a NaN would stay)
    var1 = 0.0f > var1 ? 0.0f : var1;
    var2 = 0.0f > var2 ? 0.0f : var2;
    const float cov = e12 - mu1 * mu2;
    // sqrt of a float product; libvmaf takes it in double and stores a float:
    // the same correctly rounded value as sqrtf
    const float sd = sqrtf(var1 * var2);
    // l = (2.0 * mu1 * mu2 + C1) / (mu1^2 + mu2^2 + C1): numerator in double,
    // denominator in float, double quotient
    const double l = (2.0 * (double)mu1 * (double)mu2 + (double)SSIM_C1) / (double)(sq1 + sq2 + SSIM_C1);
    // c = (2.0 * sigma12 + C2) / (var1 + var2 + C2): the same mix
    const double c = (2.0 * (double)sd + (double)SSIM_C2) / (double)(var1 + var2 + SSIM_C2);
    // s, all float; a slightly negative covariance over a flat window is
    // rounding noise and libvmaf zeroes it (so flat identical areas give s = 1)
    const float cov_clamped = (cov < 0.0f && sd <= 0.0f) ? 0.0f : cov;
    const float s = (cov_clamped + SSIM_C3) / (sd + SSIM_C3);
    acc.l += l;
    acc.c += c;
    acc.s += (double)s;
    if (with_lcs)
        acc.lcs += l * c * (double)s;
}

// Horizontal pass of one input row at one column: the five maps, the squares
// and the product formed in float from the samples as libvmaf forms its maps.
template <int EXACT>
VX_DEVICE void ssim_hpass(const float* a_row, const float* b_row, float* out)
{
    float a[11], b[11], v[11];
#pragma unroll
    for (int k = 0; k < 11; ++k) {
        a[k] = a_row[k];
        b[k] = b_row[k];
    }
    out[0] = ssim_window<EXACT>(a);
    out[1] = ssim_window<EXACT>(b);
#pragma unroll
    for (int k = 0; k < 11; ++k) v[k] = a[k] * a[k];
    out[2] = ssim_window<EXACT>(v);
#pragma unroll
    for (int k = 0; k < 11; ++k) v[k] = b[k] * b[k];
    out[3] = ssim_window<EXACT>(v);
#pragma unroll
    for (int k = 0; k < 11; ++k) v[k] = a[k] * b[k];
    out[4] = ssim_window<EXACT>(v);
}

// SS_CH rows of one column of both pictures (rows at and past `rows` read as
// 0), every load issued before the first is used: a load-store pair per step
// would wait a full memory latency per element (issue is in order), which
// bounded an earlier version.
template <typename T>
VX_DEVICE void ssim_load_column(const T* p, i64 o, i64 role, i64 pitch, int rows, float inv, float* a, float* b)
{
#pragma unroll
    for (int r = 0; r < SS_CH; ++r) {
        a[r] = r < rows ? ssim_load(p, o + r * pitch, inv) : 0.0f;
        b[r] = r < rows ? ssim_load(p, o + r * pitch + role, inv) : 0.0f;
    }
}

template <int EXACT>
VX_DEVICE void ssim_stats_impl(const i64* jobs, int njobs, const u8* staging, const u8* scratch, double* partials,
                               int total_blocks)
{
    __shared__ float in_r[SS_CH][SS_BW + 10];
    __shared__ float in_d[SS_CH][SS_BW + 10];
    __shared__ double red[4][SS_BW];

    const int frame = blockIdx.z;
    const int t = threadIdx.x;
    int j = 0;
    while (j + 1 < njobs && (i64)blockIdx.x >= jobs[JOB_WORDS * (j + 1) + 9])
        ++j;
    const i64* job = jobs + JOB_WORDS * j;
    const int kind = (int)job[0];
    const u8* base = (job[1] ? scratch : staging) + job[2];
    const i64 role = job[3], pitch = job[5];
    const int w = (int)job[6], h = (int)job[7], tiles_x = (int)job[8];
    const int bi = (int)(blockIdx.x - job[9]);
    const float inv = 1.0f / (float)job[11];
    const int with_lcs = (int)job[12];
    const int ox0 = (bi % tiles_x) * SS_BW, oy0 = (bi / tiles_x) * SS_ROWS;
    const int ow = w - 10, oh = h - 10;
    const i64 frame_off = frame * job[4];
    // input rows this block reads: oy0 .. oy0 + SS_ROWS + 9, within the picture
    const int in_rows = (h - oy0 < SS_ROWS + 10) ? h - oy0 : SS_ROWS + 10;
    const int chunks = (in_rows + SS_CH - 1) / SS_CH;

    SsimSums acc = {0.0, 0.0, 0.0, 0.0};
    for (int group = 0; group < SS_BW; group += blockDim.x) {
        const int x = group + t;  // this thread's column in the block
        const bool active = x < SS_BW && ox0 + x < ow;
        const int span = blockDim.x + 10;  // input columns of this group
        // horizontal-pass rows, oldest first: after a step, [u .. u + 10] is
        // the window of the step's row u
        float win[10 + SS_U][5];
        for (int c = 0; c < chunks; ++c) {
            __syncthreads();  // the previous chunk is consumed
            for (int cc0 = 0; cc0 < span; cc0 += blockDim.x) {
                const int cc = cc0 + t;
                const int gx = ox0 + group + cc;
                if (cc >= span)
                    continue;
                float a[SS_CH], b[SS_CH];
                const int gy0 = oy0 + SS_CH * c;
                const i64 o = frame_off + gy0 * pitch + gx;
                const int rows = gx < w ? h - gy0 : 0;
                if (kind == 0)
                    ssim_load_column((const u8*)base, o, role, pitch, rows, inv, a, b);
                else if (kind == 1)
                    ssim_load_column((const u16*)base, o, role, pitch, rows, inv, a, b);
                else
                    ssim_load_column((const float*)base, o, role, pitch, rows, inv, a, b);
#pragma unroll
                for (int r = 0; r < SS_CH; ++r) {
                    in_r[r][cc] = a[r];
                    in_d[r][cc] = b[r];
                }
            }
            __syncthreads();
            if (!active)
                continue;
            // rows of this chunk, rounded up to whole steps of SS_U (rows past
            // the picture were loaded as 0 and produce no output)
            int rows_here = in_rows - SS_CH * c < SS_CH ? in_rows - SS_CH * c : SS_CH;
            rows_here = (rows_here + SS_U - 1) / SS_U * SS_U;
#pragma unroll 1
            for (int r = 0; r < rows_here; r += SS_U) {
#pragma unroll
                for (int k = 0; k < 10; ++k)
#pragma unroll
                    for (int q = 0; q < 5; ++q)
                        win[k][q] = win[k + SS_U][q];
#pragma unroll
                for (int u = 0; u < SS_U; ++u)
                    ssim_hpass<EXACT>(&in_r[r + u][t], &in_d[r + u][t], win[10 + u]);
#pragma unroll
                for (int u = 0; u < SS_U; ++u) {
                    const int i = SS_CH * c + r + u;  // input row within the block
                    if (i >= 10 && oy0 + i - 10 < oh) {
                        float m[5];
#pragma unroll
                        for (int q = 0; q < 5; ++q) {
                            float col[11];
#pragma unroll
                            for (int k = 0; k < 11; ++k)
                                col[k] = win[u + k][q];
                            m[q] = ssim_window<EXACT>(col);
                        }
                        ssim_terms(m[0], m[1], m[2], m[3], m[4], with_lcs, acc);
                    }
                }
            }
        }
    }

    // block sums (a fixed tree: deterministic) into this block's slot
    red[0][t] = acc.l;
    red[1][t] = acc.c;
    red[2][t] = acc.s;
    red[3][t] = acc.lcs;
    __syncthreads();
    for (int half = blockDim.x >> 1; half > 0; half >>= 1) {
        if (t < half) {
#pragma unroll
            for (int k = 0; k < 4; ++k)
                red[k][t] += red[k][t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        double* out = partials + ((i64)frame * total_blocks + blockIdx.x) * 4;
#pragma unroll
        for (int k = 0; k < 4; ++k)
            out[k] = red[k][0];
    }
}

VX_KERNEL void vx_ssim_stats(const i64* jobs, int njobs, const u8* staging, const u8* scratch, double* partials,
                             int total_blocks)
{
    ssim_stats_impl<0>(jobs, njobs, staging, scratch, partials, total_blocks);
}

VX_KERNEL void vx_ssim_stats_exact(const i64* jobs, int njobs, const u8* staging, const u8* scratch,
                                   double* partials, int total_blocks)
{
    ssim_stats_impl<1>(jobs, njobs, staging, scratch, partials, total_blocks);
}

// One block per (job, frame): the job's per-block slots summed in a fixed
// order (thread i takes slots i, i + blockDim.x, ...; then the block's tree),
// written to record[frame * out_stride + out_index + 4 * job + (l, c, s, lcs)].
#define RED_THREADS 256

VX_KERNEL void vx_ssim_reduce(const double* partials, int total_blocks, const i64* jobs, double* out,
                              int out_stride, int out_index)
{
    __shared__ double red[RED_THREADS];
    const int j = blockIdx.x, frame = blockIdx.y;
    const i64* job = jobs + JOB_WORDS * j;
    const int first = (int)job[9], nblocks = (int)job[10];
    const double* p = partials + ((i64)frame * total_blocks + first) * 4;
    double* o = out + (i64)frame * out_stride + out_index + 4 * j;
    for (int k = 0; k < 4; ++k) {
        double v = 0.0;
        for (int b = threadIdx.x; b < nblocks; b += blockDim.x)
            v += p[4 * b + k];
        const double sum = vx_block_sum_f64(v, red);
        if (threadIdx.x == 0) o[k] = sum;
        __syncthreads();
    }
}
