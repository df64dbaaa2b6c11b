// Times one VIF statistics kernel variant on a batch of 32 random 1080p 8-bit frames
// (scripts/bench_vif_tiles.sh builds one binary a variant; KERNEL_SOURCE is the prelude + vif.cu).
//   -DFUSED:         vx_vif_stats0_down_u8 (scale 0's statistics and the scale-1 pictures, one launch)
//   -DSEPARATE_DOWN: vx_vif_stats0_u8 then vx_vif_down1_u8 (the same work in two launches)
// Either prints a checksum of the scale-1 pictures too: the two must print the same.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include KERNEL_SOURCE
#ifndef TW_HOST
#define TW_HOST 32
#define TH_HOST 16
#endif
int main() {
    const int w = 1920, h = 1080, n = 32;
    const size_t fb = (size_t)w * h;
    std::vector<unsigned char> r(fb * n), d(fb * n);
    unsigned s = 12345;
    for (size_t i = 0; i < fb * n; ++i) { s = s * 1103515245u + 12345u; r[i] = (s >> 16) & 255; int v = r[i] + (int)((s >> 8) & 15) - 8; d[i] = v < 0 ? 0 : v > 255 ? 255 : v; }
    // smooth the random picture a little so that the statistics take both branches
    for (size_t i = 1; i < fb * n; ++i) { r[i] = (r[i] + 3 * r[i - 1]) / 4; d[i] = (d[i] + 3 * d[i - 1]) / 4; }
    std::vector<unsigned short> table(65536);
    for (int i = 1; i < 65536; ++i) table[i] = (unsigned short)(log2f((float)i) * 2048.0f + 0.5f);
    unsigned char *dr, *dd; unsigned short* dt; long long* out;
    cudaMalloc(&dr, fb * n); cudaMalloc(&dd, fb * n); cudaMalloc(&dt, 65536 * 2); cudaMalloc(&out, n * 16 * 8);
    cudaMemcpy(dr, r.data(), fb * n, cudaMemcpyHostToDevice); cudaMemcpy(dd, d.data(), fb * n, cudaMemcpyHostToDevice);
    cudaMemcpy(dt, table.data(), 65536 * 2, cudaMemcpyHostToDevice);
    // the scale-1 pictures (u16), as vmafxd/lanes/gpu/vif.py lays them: a pitch of 256 bytes
    const int w2 = w / 2, h2 = h / 2;
    const long long dpitch = ((w2 * 2 + 255) / 256 * 256) / 2, dfs = dpitch * h2;
    unsigned short *d1r, *d1d;
    cudaMalloc(&d1r, dfs * n * 2); cudaMalloc(&d1d, dfs * n * 2);
    cudaMemset(d1r, 0, dfs * n * 2); cudaMemset(d1d, 0, dfs * n * 2);
    dim3 grid((w + TW_HOST - 1) / TW_HOST, (h + TH_HOST - 1) / TH_HOST, n);
    auto launch = [&]() {
#if defined(FUSED)
        vx_vif_stats0_down_u8<<<grid, 256>>>(dr, dd, (long long)fb, w, h, w, 8, 0, dt, 100.0, out, 16, 0, d1r, d1d,
                                             dfs, dpitch);
#else
        vx_vif_stats0_u8<<<grid, 256>>>(dr, dd, (long long)fb, w, h, w, 8, 0, dt, 100.0, out, 16, 0);
#if defined(SEPARATE_DOWN)
        dim3 dgrid((w2 + 31) / 32, (h2 + 15) / 16, n);
        vx_vif_down1_u8<<<dgrid, 256>>>(dr, dd, (long long)fb, w, h, w, 8, d1r, d1d, dfs, dpitch);
#endif
#endif
    };
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    float best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
        cudaMemset(out, 0, n * 16 * 8);
        cudaEventRecord(a);
        for (int it = 0; it < 10; ++it) launch();
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
    }
    std::vector<long long> o(n * 16);
    cudaMemset(out, 0, n * 16 * 8);
    launch();
    cudaMemcpy(o.data(), out, n * 16 * 8, cudaMemcpyDeviceToHost);
    long long sum = 0; for (int i = 0; i < n * 16; ++i) sum = sum * 31 + o[i];
    long long dsum = 0;
#if defined(FUSED) || defined(SEPARATE_DOWN)
    std::vector<unsigned short> p(dfs * n);
    for (unsigned short* src : {d1r, d1d}) {
        cudaMemcpy(p.data(), src, dfs * n * 2, cudaMemcpyDeviceToHost);
        for (int f = 0; f < n; ++f)
            for (int y = 0; y < h2; ++y)
                for (int x = 0; x < w2; ++x) dsum = dsum * 31 + p[f * dfs + y * dpitch + x];
    }
#endif
    printf("%s: %.1f us per batch of 32 (%.2f us/frame), checksum %lld, scale-1 checksum %lld, err %s\n", VARIANT,
           best * 100.0f, best * 100.0f / 32, sum, dsum, cudaGetErrorString(cudaGetLastError()));
    return 0;
}
