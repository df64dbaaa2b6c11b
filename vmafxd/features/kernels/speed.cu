// SpEED (libvmaf's "speed_chroma" and "speed_temporal"): the pictures at the
// operating size and their covariance sums.
//
// Device twin of vmafxd.features._speed_core (downscale, covariance_sums):
// every picture of every frame of a batch (blockIdx.z = frame * P + picture;
// P = 4 for speed_chroma: Cb ref, Cb dis, Cr ref, Cr dis; 2 for
// speed_temporal: the reference's and the distorted's luma difference with
// the previous frame) is
//   1. read as floats (sample / div - 128; a difference of two such for
//      speed_temporal), resized on the fly (nearest or bilinear, from the CPU
//      twin's index tables), filtered vertically with the anti-aliasing taps at
//      every 16th row (sp_vert), horizontally at every 16th column (sp_horiz):
//      exactly the CPU twin's filtered values at the positions its decimation
//      keeps (each output is `acc = 0; acc += taps[k] * x[k]`, k ascending,
//      edges mirrored without repeating the edge sample);
//   2. minus its local mean (the scale-4 Gaussian, vertical then horizontal,
//      recomputed per output: the same operations), kept for the truncated
//      blocks into the frame's statistics record (sp_local);
//   3. its 25 submatrix means in float, one sequential sum each (sp_means),
//      and the 325 covariance sums in double as libvmaf's
//      compute_cov_kernel_avx512 adds them: 16 lanes (acc0, acc1) of fused
//      multiply-adds over the rows' blocks of 16, an 8-block into acc0, then
//      the fixed reduction tree and the scalar tail (sp_lanes, sp_reduce).
// The host finishes each frame with the CPU twin's own functions
// (covariance_from_sums, finish_scores): eigenvalues, the linear system,
// entropies and the score.  Contraction is off; fma() is the one fused
// operation, where libvmaf's AVX-512 code has one.

#if defined(VX_EMU)
#include <math.h>
#endif

#define SP_COLS 256
#define SP_BLOCK 5
#define SP_PAIRS 325

// One picture of the frame: the current plane and (speed_temporal) the previous frame's.
template <typename T>
VX_DEVICE float sp_value(const T* cur, const T* prev, i64 pitch, int y, int x, float div)
{
    const i64 at = (i64)y * pitch + x;
    const float v = vx_float_sample(cur[at], div);
    return prev ? vx_float_sample(prev[at], div) - v : v;
}

// The resized picture's sample (y, x): mode 0 none, 1 nearest, 2 bilinear (the CPU twin's tables).
template <typename T>
VX_DEVICE float sp_scaled(const T* cur, const T* prev, i64 pitch, int y, int x, float div, int mode,
                          const i64* yi1, const i64* yi2, const float* yf, const i64* xi1, const i64* xi2,
                          const float* xf)
{
    if (mode == 0) return sp_value(cur, prev, pitch, y, x, div);
    if (mode == 1) return sp_value(cur, prev, pitch, (int)yi1[y], (int)xi1[x], div);
    const float dy = yf[y], dx = xf[x];
    const float ody = 1.0f - dy, odx = 1.0f - dx;
    const int y1 = (int)yi1[y], y2 = (int)yi2[y], x1 = (int)xi1[x], x2 = (int)xi2[x];
    float out = (ody * odx) * sp_value(cur, prev, pitch, y1, x1, div);
    out = out + (ody * dx) * sp_value(cur, prev, pitch, y1, x2, div);
    out = out + (dy * odx) * sp_value(cur, prev, pitch, y2, x1, div);
    out = out + (dy * dx) * sp_value(cur, prev, pitch, y2, x2, div);
    return out;
}

// Vertical anti-aliasing pass at scaled row 16 * blockIdx.y, every scaled column.
// `table[2 p]`/`table[2 p + 1]`: picture p's current/previous plane offset (elements) from its
// frame's start, the previous being -1 for none; the previous frame of frame 0 is `history`.
template <typename T>
VX_DEVICE void sp_vert(const T* staging, const T* history, i64 fstride, const i64* table, int pics, i64 pitch,
                       int sw, int sh, float div, int mode, const i64* yi1, const i64* yi2, const float* yf,
                       const i64* xi1, const i64* xi2, const float* xf, const float* taps, int fw, float* tmp,
                       i64 tpitch, int oh)
{
    const int z = blockIdx.z, f = z / pics, p = z % pics, y = 16 * blockIdx.y, r = fw / 2;
    const T* frame = staging + f * fstride;
    const T* prev_frame = f > 0 ? frame - fstride : history;
    const T* cur = frame + table[2 * p];
    const T* prev = table[2 * p + 1] >= 0 ? prev_frame + table[2 * p + 1] : (const T*)0;
    float* dst = tmp + ((i64)z * oh + blockIdx.y) * tpitch;
    const int end = (blockIdx.x + 1) * SP_COLS < sw ? (blockIdx.x + 1) * SP_COLS : sw;
    for (int x = blockIdx.x * SP_COLS + threadIdx.x; x < end; x += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < fw; ++k)
            acc = acc + taps[k] * sp_scaled(cur, prev, pitch, vx_mirror(y - r + k, sh), x, div, mode, yi1, yi2, yf,
                                            xi1, xi2, xf);
        dst[x] = acc;
    }
}

// the vertical pass for 8- and 16-bit samples: one entry point per sample type
#define VX_SPEED_VERT(T)                                                                                        \
    VX_KERNEL void vx_speed_vert_##T(const T* staging, const T* history, i64 fstride, const i64* table, int pics, \
                                     i64 pitch, int sw, int sh, float div, int mode, const i64* yi1,             \
                                     const i64* yi2, const float* yf, const i64* xi1, const i64* xi2,            \
                                     const float* xf, const float* taps, int fw, float* tmp, i64 tpitch, int oh) \
    {                                                                                                           \
        sp_vert<T>(staging, history, fstride, table, pics, pitch, sw, sh, div, mode, yi1, yi2, yf, xi1, xi2, xf, \
                   taps, fw, tmp, tpitch, oh);                                                                  \
    }
VX_SPEED_VERT(u8)
VX_SPEED_VERT(u16)

VX_KERNEL void vx_speed_horiz(const float* tmp, i64 tpitch, int sw, int oh, int ow, const float* taps, int fw,
                              float* small)
{
    const int z = blockIdx.z, y = blockIdx.y, r = fw / 2;
    const float* src = tmp + ((i64)z * oh + y) * tpitch;
    float* dst = small + ((i64)z * oh + y) * ow;
    const int end = (blockIdx.x + 1) * SP_COLS < ow ? (blockIdx.x + 1) * SP_COLS : ow;
    for (int j = blockIdx.x * SP_COLS + threadIdx.x; j < end; j += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < fw; ++k)
            acc = acc + taps[k] * src[vx_mirror(16 * j - r + k, sw)];
        dst[j] = acc;
    }
}

// The local mean removed (vertical then horizontal pass of `taps` over the oh x ow picture), for
// the truncated th x tw corner, into picture p of frame f's record.
VX_KERNEL void vx_speed_local(const float* small, int oh, int ow, int th, int tw, const float* taps, int fw,
                              int pics, u8* stats, i64 record_bytes)
{
    const int z = blockIdx.z, f = z / pics, p = z % pics, y = blockIdx.y, r = fw / 2;
    const float* pic = small + (i64)z * oh * ow;
    float* dst = (float*)(stats + f * record_bytes) + ((i64)p * th + y) * tw;
    const int end = (blockIdx.x + 1) * SP_COLS < tw ? (blockIdx.x + 1) * SP_COLS : tw;
    for (int x = blockIdx.x * SP_COLS + threadIdx.x; x < end; x += blockDim.x) {
        float mean = 0.0f;
        for (int k = 0; k < fw; ++k) {
            const int c = vx_mirror(x - r + k, ow);
            float v = 0.0f;
            for (int t = 0; t < fw; ++t)
                v = v + taps[t] * pic[(i64)vx_mirror(y - r + t, oh) * ow + c];
            mean = mean + taps[k] * v;
        }
        dst[x] = pic[(i64)y * ow + x] - mean;
    }
}

// compute_mean: the 25 submatrices' float sums, one thread each, row by row, then / (float)N.
VX_KERNEL void vx_speed_means(const u8* stats, i64 record_bytes, int pics, int th, int tw, float* means)
{
    const int z = blockIdx.z, f = z / pics, p = z % pics;
    const float* pic = (const float*)(stats + f * record_bytes) + (i64)p * th * tw;
    const int sh = th - SP_BLOCK + 1, sw = tw - SP_BLOCK + 1;
    for (int o = threadIdx.x; o < SP_BLOCK * SP_BLOCK; o += blockDim.x) {
        const float* sub = pic + (i64)(o / SP_BLOCK) * tw + o % SP_BLOCK;
        float acc = 0.0f;
        for (int i = 0; i < sh; ++i)
            for (int j = 0; j < sw; ++j)
                acc = acc + sub[(i64)i * tw + j];
        means[(i64)z * SP_BLOCK * SP_BLOCK + o] = acc / (float)(sh * sw);
    }
}

// Covariance k (x_index >= y_index, k = x (x + 1) / 2 + y): its two submatrices (their first
// samples in `pic`) and their means (`means`: this picture's 25, as vx_speed_means left them).
VX_DEVICE void sp_pair(int k, const float* pic, int tw, const float* means, const float** px, const float** py,
                       double* mx, double* my)
{
    int x = 0;
    while ((x + 1) * (x + 2) / 2 <= k) ++x;
    const int y = k - x * (x + 1) / 2;
    *px = pic + (i64)(x / SP_BLOCK) * tw + x % SP_BLOCK;
    *py = pic + (i64)(y / SP_BLOCK) * tw + y % SP_BLOCK;
    *mx = (double)means[x];
    *my = (double)means[y];
}

// One accumulator lane of compute_cov_kernel_avx512 for one covariance: lanes 0..7 are acc0,
// 8..15 acc1 (blocks of 16: columns 16 b + lane); an 8-block after them goes to acc0.
VX_KERNEL void vx_speed_lanes(const u8* stats, i64 record_bytes, int pics, int th, int tw, const float* means,
                              double* lanes)
{
    const int z = blockIdx.z, f = z / pics, p = z % pics;
    const float* pic = (const float*)(stats + f * record_bytes) + (i64)p * th * tw;
    const int sh = th - SP_BLOCK + 1, sw = tw - SP_BLOCK + 1;
    const int n16 = sw / 16, has8 = sw - 16 * n16 >= 8;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < SP_PAIRS * 16; t += gridDim.x * blockDim.x) {
        const int k = t / 16, lane = t % 16;
        const float *px, *py;
        double mx, my;
        sp_pair(k, pic, tw, means + (i64)z * SP_BLOCK * SP_BLOCK, &px, &py, &mx, &my);
        double acc = 0.0;
        for (int i = 0; i < sh; ++i) {
            const float* rx = px + (i64)i * tw;
            const float* ry = py + (i64)i * tw;
            for (int b = 0; b < n16; ++b) {
                const int j = 16 * b + lane;
                acc = fma((double)rx[j] - mx, (double)ry[j] - my, acc);
            }
            if (has8 && lane < 8) {
                const int j = 16 * n16 + lane;
                acc = fma((double)rx[j] - mx, (double)ry[j] - my, acc);
            }
        }
        lanes[((i64)z * SP_PAIRS + k) * 16 + lane] = acc;
    }
}

// acc0 + acc1, _mm512_reduce_add_pd (upper half + lower half, twice, then the two lanes), then the
// scalar tail (product rounded, then added), into the record's sums after its pictures.
VX_KERNEL void vx_speed_reduce(const u8* stats_in, i64 record_bytes, int pics, int th, int tw, const float* means,
                               const double* lanes, u8* stats, i64 sums_offset)
{
    const int z = blockIdx.z, f = z / pics, p = z % pics;
    const float* pic = (const float*)(stats_in + f * record_bytes) + (i64)p * th * tw;
    const int sh = th - SP_BLOCK + 1, sw = tw - SP_BLOCK + 1;
    const int n16 = sw / 16, tail0 = 16 * n16 + (sw - 16 * n16 >= 8 ? 8 : 0);
    double* sums = (double*)(stats + f * record_bytes + sums_offset) + (i64)p * SP_PAIRS;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < SP_PAIRS; k += gridDim.x * blockDim.x) {
        const double* a = lanes + ((i64)z * SP_PAIRS + k) * 16;
        double acc[8], half[4], quarter[2];
        for (int l = 0; l < 8; ++l) acc[l] = a[l] + a[8 + l];
        for (int l = 0; l < 4; ++l) half[l] = acc[4 + l] + acc[l];
        for (int l = 0; l < 2; ++l) quarter[l] = half[2 + l] + half[l];
        double total = quarter[0] + quarter[1];
        if (tail0 < sw) {
            const float *px, *py;
            double mx, my;
            sp_pair(k, pic, tw, means + (i64)z * SP_BLOCK * SP_BLOCK, &px, &py, &mx, &my);
            double tail = 0.0;
            for (int i = 0; i < sh; ++i)
                for (int j = tail0; j < sw; ++j) {
                    const double prod = ((double)px[(i64)i * tw + j] - mx) * ((double)py[(i64)i * tw + j] - my);
                    tail = tail + prod;
                }
            total = total + tail;
        }
        sums[k] = total;
    }
}
