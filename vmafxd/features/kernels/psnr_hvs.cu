// PSNR-HVS (libvmaf's "psnr_hvs", Xiph's calc_psnrhvs): the device twin of
// vmafxd.features.psnr_hvs.plane_score.  The host turns each plane's float
// error sum into scores with the CPU twin's score_from_sum/metrics_from_stats
// (vmafxd/lanes/gpu/psnr_hvs.py).
//
// One launch per batch: grid (3 planes, 1, frames), one block per plane of a
// frame.  A block walks its plane's 8x8 blocks (every 7 samples) in raster
// order, blockDim of them at a time: each thread computes one 8x8 block's 64
// weighted squared errors exactly as the CPU twin does (float sums in C's
// order, Daala's integer DCT, float masks), into shared memory.
//
// The catch: libvmaf adds every one of a plane's errors into ONE float, one
// after another, and a float sum depends on its order.  Adding them in a tree
// would change the bits, so the block reproduces the sequential sum exactly,
// in parallel, from this property of rounding: while the running sum s stays
// within one binade [2^(e-1), 2^e) (grid step u), adding t >= 0 gives
// s + q u, where q depends only on t / u, except at an exact tie, where it is
// q or q + 1 by the parity of s / u.  So each error is a map "add b[parity]
// steps" (two integers), maps compose associatively (A then C:
// b[p] = A[p] + C[(p + A[p]) & 1]), and an in-order scan over the threads
// gives the sum after every thread's 64 errors.  The first thread whose
// scanned sum would reach the binade's top adds its errors one by one (a
// real float sum), and the scan restarts after it in the new binade.  The
// sum only doubles a few dozen times, so the serial part is small.  The result
// is the sequential float sum to the bit (the CPU twin's np.cumsum).
//
// Contraction into FMA is off (kernels.py), so every float operation rounds
// as written; float division and sqrt are IEEE (the compilers' defaults).

#if defined(VX_EMU)
#include <math.h>
#endif

#define HVS_THREADS 128
#define HVS_STEP 7

// Xiph's CSF tables (Y, then the 4:2:0 Cb and Cr ones): float hvs_csf[3][64], generated
// ahead of this source from the CPU twin's own table (DECLARATION.kernel_tables in
// vmafxd/features/psnr_hvs.py, values vmafxd/features/_psnr_hvs_dct.py's CSF).

// The masking table: (csf * k) squared in double, stored as float (psnr_hvs._mask).
VX_DEVICE float hvs_mask(int plane, int k)
{
    const double c = (double)hvs_csf[plane][k] * 0.3885746225901003;
    return (float)(c * c);
}

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
    for (int i = 0; i < 8; i++)
        hvs_fdct8(x + i, 8, z + 8 * i, 1);
    for (int i = 0; i < 8; i++)
        hvs_fdct8(z + i, 8, y + 8 * i, 1);
}

// A block's masking level from its samples and coefficients (psnr_hvs._masking).
VX_DEVICE float hvs_masking(const int* x, const int* c, int plane)
{
    float gmean = 0.0f;
    float qmean[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < 64; k++) {
        gmean += (float)x[k];
        qmean[((k >> 3) >= 4) + 2 * ((k & 7) >= 4)] += (float)x[k];
    }
    gmean /= 64.0f;
    for (int q = 0; q < 4; q++)
        qmean[q] /= 16.0f;
    float gvar = 0.0f;
    float qvar[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < 64; k++) {
        const int q = ((k >> 3) >= 4) + 2 * ((k & 7) >= 4);
        const float v = (float)x[k];
        gvar += (v - gmean) * (v - gmean);
        qvar[q] += (v - qmean[q]) * (v - qmean[q]);
    }
    const float gscale = (1.0f / 63.0f) * 64.0f;
    const float qscale = (1.0f / 15.0f) * 16.0f;
    gvar *= gscale;
    for (int q = 0; q < 4; q++)
        qvar[q] *= qscale;
    if (gvar > 0.0f)
        gvar = (((qvar[0] + qvar[1]) + qvar[2]) + qvar[3]) / gvar;
    float energy = 0.0f;
    for (int k = 1; k < 64; k++)
        energy += (float)(c[k] * c[k]) * hvs_mask(plane, k);
    return (float)(sqrt((double)(energy * gvar)) / 32.0);
}

// The 64 weighted squared errors of the 8x8 block at (x0, y0).
template <typename T>
VX_DEVICE void hvs_block_terms(const T* ref, const T* dist, i64 pitch, int x0, int y0, int plane, float* out)
{
    int s[64], d[64], cs[64], cd[64];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            s[i * 8 + j] = (int)ref[(i64)(y0 + i) * pitch + x0 + j];
            d[i * 8 + j] = (int)dist[(i64)(y0 + i) * pitch + x0 + j];
        }
    hvs_fdct8x8(s, cs);
    hvs_fdct8x8(d, cd);
    float level = hvs_masking(s, cs, plane);
    const float level_d = hvs_masking(d, cd, plane);
    if (level_d > level)
        level = level_d;
    for (int k = 0; k < 64; k++) {
        const int diff = cs[k] - cd[k];
        float err = (float)(diff < 0 ? -diff : diff);
        if (k) {
            const float thr = level / hvs_mask(plane, k);
            err = err < thr ? 0.0f : err - thr;
        }
        const float w = err * hvs_csf[plane][k];
        out[k] = w * w;
    }
}

// "Add t to a float on the grid step u": steps for an even and an odd sum
// (see the header).  Steps saturate at 2^40: any count past 2^24 leaves the binade.
VX_DEVICE void hvs_step_map(float t, double u, i64* b0, i64* b1)
{
    const double x = (double)t / u;  // exact: u is a power of two
    double q = floor(x);
    const double cap = 1099511627776.0;  // 2^40
    if (q >= cap) {
        *b0 = *b1 = (i64)cap;
        return;
    }
    const double r = x - q;
    const i64 qi = (i64)q;
    if (r < 0.5) {
        *b0 = *b1 = qi;
    } else if (r > 0.5) {
        *b0 = *b1 = qi + 1;
    } else {  // a tie: to the even multiple of u
        *b0 = qi + (qi & 1);
        *b1 = qi + ((qi + 1) & 1);
    }
}

// A then C.
VX_DEVICE void hvs_compose(i64 a0, i64 a1, i64 c0, i64 c1, i64* r0, i64* r1)
{
    *r0 = a0 + ((a0 & 1) ? c1 : c0);
    *r1 = a1 + (((1 + a1) & 1) ? c1 : c0);
}

template <typename T>
VX_DEVICE void hvs_plane(const T* ref, const T* dist, int w, int h, i64 pitch, int plane, double* out)
{
    __shared__ float terms[HVS_THREADS * 64];
    __shared__ i64 m0[2][HVS_THREADS];
    __shared__ i64 m1[2][HVS_THREADS];
    __shared__ float after[HVS_THREADS];
    __shared__ i64 count_scratch[HVS_THREADS];
    __shared__ float state;
    const int n = blockDim.x;
    const int t = threadIdx.x;
    const int nx = w > 7 ? (w - 1) / HVS_STEP : 0;
    const int ny = h > 7 ? (h - 1) / HVS_STEP : 0;
    const int nblocks = nx * ny;
    if (t == 0)
        state = 0.0f;
    __syncthreads();
    for (int base = 0; base < nblocks; base += n) {
        const int cnt = nblocks - base < n ? nblocks - base : n;
        if (t < cnt) {
            const int b = base + t;
            hvs_block_terms<T>(ref, dist, pitch, (b % nx) * HVS_STEP, (b / nx) * HVS_STEP, plane, terms + t * 64);
        }
        __syncthreads();
        int start = 0;
        while (start < cnt) {
            const float s = state;
            int e;
            double u, top;
            if (s < 1.17549435e-38f) {  // zero or subnormal: the subnormal grid
                u = ldexp(1.0, -149);
                top = ldexp(1.0, -126);
            } else {
                frexp((double)s, &e);  // s in [2^(e-1), 2^e)
                u = ldexp(1.0, e - 24);
                top = ldexp(1.0, e);
            }
            const int parity = (int)((i64)((double)s / u) & 1);
            i64 b0 = 0, b1 = 0;
            if (t >= start && t < cnt) {
                for (int k = 0; k < 64; k++) {
                    i64 c0, c1, r0, r1;
                    hvs_step_map(terms[t * 64 + k], u, &c0, &c1);
                    hvs_compose(b0, b1, c0, c1, &r0, &r1);
                    b0 = r0;
                    b1 = r1;
                }
            }
            // inclusive scan of the maps, in thread order
            int cur = 0;
            m0[0][t] = b0;
            m1[0][t] = b1;
            __syncthreads();
            for (int off = 1; off < n; off <<= 1) {
                i64 r0 = m0[cur][t], r1 = m1[cur][t];
                if (t >= off)
                    hvs_compose(m0[cur][t - off], m1[cur][t - off], m0[cur][t], m1[cur][t], &r0, &r1);
                m0[cur ^ 1][t] = r0;
                m1[cur ^ 1][t] = r1;
                __syncthreads();
                cur ^= 1;
            }
            const i64 steps = parity ? m1[cur][t] : m0[cur][t];
            const double reached = (double)s + (double)steps * u;  // exact while below top
            const int stays = t >= start && t < cnt && reached < top;
            after[t] = (float)reached;
            // the sums only grow, so the threads that stay in the binade come first
            const int j = start + (int)vx_block_sum_i64(stays, count_scratch);
            __syncthreads();
            if (t == 0) {
                float v = j > start ? after[j - 1] : s;
                if (j < cnt) {  // thread j's errors leave the binade: add them one by one
                    for (int k = 0; k < 64; k++)
                        v = v + terms[j * 64 + k];
                }
                state = v;
            }
            __syncthreads();
            start = j < cnt ? j + 1 : cnt;
        }
        __syncthreads();
    }
    if (t == 0)
        out[0] = (double)state;
}

template <typename T>
VX_DEVICE void hvs_impl(const T* r0, const T* r1, const T* r2, const T* d0, const T* d1, const T* d2,
                        int w0, int h0, int wc, int hc, i64 pitch0, i64 pitchc, i64 frame_stride,
                        double* out, int out_stride, int out_index)
{
    const int plane = blockIdx.x;
    const i64 f = (i64)blockIdx.z * frame_stride;
    const T* ref = plane == 0 ? r0 : plane == 1 ? r1 : r2;
    const T* dist = plane == 0 ? d0 : plane == 1 ? d1 : d2;
    hvs_plane<T>(ref + f, dist + f, plane ? wc : w0, plane ? hc : h0, plane ? pitchc : pitch0, plane,
                 out + (i64)blockIdx.z * out_stride + out_index + plane);
}

VX_KERNEL void vx_psnr_hvs_u8(const u8* r0, const u8* r1, const u8* r2, const u8* d0, const u8* d1, const u8* d2,
                              int w0, int h0, int wc, int hc, i64 pitch0, i64 pitchc, i64 frame_stride,
                              double* out, int out_stride, int out_index)
{
    hvs_impl<u8>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, pitch0, pitchc, frame_stride, out, out_stride, out_index);
}

VX_KERNEL void vx_psnr_hvs_u16(const u16* r0, const u16* r1, const u16* r2, const u16* d0, const u16* d1,
                               const u16* d2, int w0, int h0, int wc, int hc, i64 pitch0, i64 pitchc,
                               i64 frame_stride, double* out, int out_stride, int out_index)
{
    hvs_impl<u16>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, pitch0, pitchc, frame_stride, out, out_stride, out_index);
}
