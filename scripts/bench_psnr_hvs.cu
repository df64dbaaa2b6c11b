// Times one PSNR-HVS kernel variant on a batch of 32 random 1080p 8-bit 4:2:0 frames
// (scripts/bench_psnr_hvs.sh builds one binary a variant; KERNEL_SOURCE is the full
// translation unit: prelude, generated tables, psnr_hvs.cu).  OLD_KERNEL: the one-launch
// kernel before the terms/sum split (vx_psnr_hvs_u8, 128 threads a plane).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include KERNEL_SOURCE
#ifndef VARIANT
#define VARIANT "?"
#endif

[[maybe_unused]] static int blocks(int w, int h) { return (w > 7 ? (w - 1) / 7 : 0) * (h > 7 ? (h - 1) / 7 : 0); }

int main() {
    const int w0 = 1920, h0 = 1080, wc = 960, hc = 540, n = 32;
    const size_t fs = (size_t)w0 * h0 + 2 * (size_t)wc * hc;  // one frame's samples
    std::vector<unsigned char> r(fs * n), d(fs * n);
    unsigned s = 12345;
    for (size_t i = 0; i < fs * n; ++i) {
        s = s * 1103515245u + 12345u;
        r[i] = (s >> 16) & 255;
    }
    // smooth the random picture (flat and busy areas), then a distortion of a few levels
    // with coarse spots, so that the errors take both sides of the masking threshold
    for (size_t i = 1; i < fs * n; ++i) r[i] = (r[i] + 7 * r[i - 1]) / 8;
    for (size_t i = 0; i < fs * n; ++i) {
        s = s * 1103515245u + 12345u;
        int v = r[i] + (int)((s >> 8) & 7) - 3;
        if (((s >> 20) & 63) == 0) v += (int)((s >> 12) & 63) - 32;
        d[i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
    unsigned char *dr, *dd;
    double* out;
    cudaMalloc(&dr, fs * n);
    cudaMalloc(&dd, fs * n);
    cudaMalloc(&out, n * 3 * 8);
    cudaMemcpy(dr, r.data(), fs * n, cudaMemcpyHostToDevice);
    cudaMemcpy(dd, d.data(), fs * n, cudaMemcpyHostToDevice);
    const u8 *r0 = dr, *r1 = dr + (size_t)w0 * h0, *r2 = r1 + (size_t)wc * hc;
    const u8 *d0 = dd, *d1 = dd + (size_t)w0 * h0, *d2 = d1 + (size_t)wc * hc;
    char regs[128];
#ifdef OLD_KERNEL
    cudaFuncAttributes fa;
    cudaFuncGetAttributes(&fa, vx_psnr_hvs_u8);
    snprintf(regs, sizeof regs, "regs %d (local %zu B)", fa.numRegs, fa.localSizeBytes);
#else
    cudaFuncAttributes ft, fsum;
    cudaFuncGetAttributes(&ft, vx_psnr_hvs_terms_u8);
    cudaFuncGetAttributes(&fsum, vx_psnr_hvs_sum);
    snprintf(regs, sizeof regs, "regs terms %d (local %zu B), sum %d (local %zu B)", ft.numRegs, ft.localSizeBytes,
             fsum.numRegs, fsum.localSizeBytes);
    const long long nb0 = blocks(w0, h0), nbc = blocks(wc, hc);
    const long long frame_terms = 64 * (nb0 + 2 * nbc);
    float* terms;
    cudaMalloc(&terms, (size_t)n * frame_terms * 4);
    const dim3 tgrid((unsigned)((nb0 + HVS_TERM_BLOCKS - 1) / HVS_TERM_BLOCKS + 2 * ((nbc + HVS_TERM_BLOCKS - 1) / HVS_TERM_BLOCKS)), 1, n);
#endif
    cudaEvent_t a, m, b;
    cudaEventCreate(&a);
    cudaEventCreate(&m);
    cudaEventCreate(&b);
    float best = 1e9f, best_terms = 1e9f, best_sum = 1e9f;
    for (int rep = 0; rep < 5; ++rep) {
        float total = 0, t1 = 0, t2 = 0;
        for (int it = 0; it < 10; ++it) {
            float x, y;
            cudaEventRecord(a);
#ifdef OLD_KERNEL
            vx_psnr_hvs_u8<<<dim3(3, 1, n), 128>>>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, w0, wc, (long long)fs, out, 3, 0);
            cudaEventRecord(m);
#else
            vx_psnr_hvs_terms_u8<<<tgrid, HVS_TERM_THREADS>>>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, w0, wc,
                                                             (long long)fs, terms, frame_terms);
            cudaEventRecord(m);
            vx_psnr_hvs_sum<<<dim3(3, 1, n), HVS_SUM_THREADS>>>(terms, frame_terms, w0, h0, wc, hc, out, 3, 0);
#endif
            cudaEventRecord(b);
            cudaEventSynchronize(b);
            cudaEventElapsedTime(&x, a, m);
            cudaEventElapsedTime(&y, m, b);
            t1 += x;
            t2 += y;
            total += x + y;
        }
        if (total < best) { best = total; best_terms = t1; best_sum = t2; }
    }
    std::vector<double> o(n * 3);
    cudaMemset(out, 0, n * 3 * 8);
#ifdef OLD_KERNEL
    vx_psnr_hvs_u8<<<dim3(3, 1, n), 128>>>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, w0, wc, (long long)fs, out, 3, 0);
#else
    vx_psnr_hvs_terms_u8<<<tgrid, HVS_TERM_THREADS>>>(r0, r1, r2, d0, d1, d2, w0, h0, wc, hc, w0, wc, (long long)fs,
                                                     terms, frame_terms);
    vx_psnr_hvs_sum<<<dim3(3, 1, n), HVS_SUM_THREADS>>>(terms, frame_terms, w0, h0, wc, hc, out, 3, 0);
#endif
    cudaMemcpy(o.data(), out, n * 3 * 8, cudaMemcpyDeviceToHost);
    unsigned long long sum = 0;
    for (int i = 0; i < n * 3; ++i) {
        unsigned long long bits;
        memcpy(&bits, &o[i], 8);
        sum = sum * 1000003ull + bits;
    }
    // per batch: best of 5 runs of 10 batches, divided by 10 (µs = ms * 1000 / 10)
    printf("%-24s %8.1f us per batch of 32 (%6.2f us/frame; terms %7.1f, sum %7.1f), checksum %016llx, "
           "Y sum of frame 0 %.9g, %s, err %s\n",
           VARIANT, best * 100.0f, best * 100.0f / n, best_terms * 100.0f, best_sum * 100.0f, sum, o[0], regs,
           cudaGetErrorString(cudaGetLastError()));
    return 0;
}
