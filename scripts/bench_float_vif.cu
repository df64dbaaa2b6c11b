// Times float VIF's statistics kernels (float_vif.cu) of one build on a batch of 32 1080p 8-bit
// frames, scale by scale (vif_kernelscale 1: vx_fvif_stat_down_u8_17_9, _f32_9_5, _f32_5_3,
// vx_fvif_stat_f32_3), and prints a checksum of every scale's row sums and pictures: two builds
// of the same arithmetic must print the same (scripts/bench_float_vif.sh builds one binary a
// revision or variant). KERNEL_SOURCE: the translation unit (kernels.source("float_vif.cu"));
// TAPS_HEADER: the four filters (fv_bench_taps17/9/5/3), generated from the declaration.
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include KERNEL_SOURCE
#include TAPS_HEADER

static unsigned long long fold(const void* p, size_t bytes, unsigned long long s)
{
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < bytes; ++i) s = (s ^ b[i]) * 1099511628211ull;
    return s;
}

int main(int argc, char** argv)
{
    const int w = 1920, h = 1080, n = 32;
    const int flat = argc > 1 && !strcmp(argv[1], "flat");  // a smooth picture: most windows under sigma_nsq
    const size_t fb = (size_t)w * h;
    std::vector<unsigned char> r(fb * n), d(fb * n);
    unsigned s = 12345;
    for (size_t i = 0; i < fb * n; ++i) {
        s = s * 1103515245u + 12345u;
        const int x = (int)(i % w), y = (int)(i / w % h);
        int v = flat ? 64 + (x + y) / 32 + ((s >> 16) & 1) : (int)((s >> 16) & 255);
        r[i] = v;
        v = v + (int)((s >> 8) & 15) - 8;
        d[i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
    if (!flat)
        for (size_t i = 1; i < fb * n; ++i) { r[i] = (r[i] + 3 * r[i - 1]) / 4; d[i] = (d[i] + 3 * d[i - 1]) / 4; }
    const float* tapsets[4] = {fv_bench_taps17, fv_bench_taps9, fv_bench_taps5, fv_bench_taps3};
    const int widths[4] = {17, 9, 5, 3};
    float* dtaps[4];
    for (int k = 0; k < 4; ++k) {
        cudaMalloc(&dtaps[k], widths[k] * 4);
        cudaMemcpy(dtaps[k], tapsets[k], widths[k] * 4, cudaMemcpyHostToDevice);
    }
    unsigned char *dr, *dd;
    cudaMalloc(&dr, fb * n); cudaMalloc(&dd, fb * n);
    cudaMemcpy(dr, r.data(), fb * n, cudaMemcpyHostToDevice); cudaMemcpy(dd, d.data(), fb * n, cudaMemcpyHostToDevice);
    int sw[4], sh[4];
    long long pitch[4], fst[4];
    float* pic[4][2] = {};
    for (int k = 0; k < 4; ++k) {
        sw[k] = k ? sw[k - 1] / 2 : w; sh[k] = k ? sh[k - 1] / 2 : h;
        pitch[k] = (sw[k] + 63) / 64 * 64; fst[k] = pitch[k] * sh[k];
        if (k) for (int p = 0; p < 2; ++p) cudaMalloc(&pic[k][p], fst[k] * n * 4);
    }
    float *num, *den, *rows;
    cudaMalloc(&num, fst[0] * n * 4); cudaMalloc(&den, fst[0] * n * 4);
    cudaMalloc(&rows, (size_t)n * 2 * h * 4);
    const float gain = 100.0f, max_inv = (float)(4.0 / (255.0 * 255.0));
    const double nsq = 2.0;
    auto launch = [&](int k) {
        dim3 grid(1, (sh[k] + 7) / 8, n);
        const void* a = k ? (const void*)pic[k][0] : (const void*)dr;
        const void* b = k ? (const void*)pic[k][1] : (const void*)dd;
        const long long fs = k ? fst[k] : (long long)fb, pt = k ? pitch[k] : w;
        if (k == 0)
            vx_fvif_stat_down_u8_17_9<<<grid, 288>>>((const u8*)a, (const u8*)b, fs, sw[0], sh[0], pt, 0.0f, dtaps[0], 17,
                gain, nsq, max_inv, num, den, fst[0], pitch[0], rows, 2 * sh[0], dtaps[1], pic[1][0], pic[1][1], fst[1],
                pitch[1], sw[1], sh[1]);
        else if (k < 3)
            (k == 1 ? vx_fvif_stat_down_f32_9_5 : vx_fvif_stat_down_f32_5_3)<<<grid, 288>>>((const float*)a,
                (const float*)b, fs, sw[k], sh[k], pt, 0.0f, dtaps[k], widths[k], gain, nsq, max_inv, num, den, fst[k],
                pitch[k], rows, 2 * sh[k], dtaps[k + 1], pic[k + 1][0], pic[k + 1][1], fst[k + 1], pitch[k + 1],
                sw[k + 1], sh[k + 1]);
        else
            vx_fvif_stat_f32_3<<<grid, 288>>>((const float*)a, (const float*)b, fs, sw[k], sh[k], pt, 0.0f, dtaps[k], 3,
                gain, nsq, max_inv, num, den, fst[k], pitch[k], rows, 2 * sh[k]);
    };
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    printf("%s %s:", VARIANT, flat ? "flat " : "noise");
    float total = 0;
    for (int k = 0; k < 4; ++k) {
        float best = 1e9f;
        for (int rep = 0; rep < 5; ++rep) {
            cudaEventRecord(e0);
            for (int it = 0; it < 10; ++it) launch(k);
            cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
        }
        total += best * 100.0f;
        printf(" s%d %.1f", k, best * 100.0f);
    }
    // the checksum: every scale's row sums, in order, and the pictures it wrote
    unsigned long long sum = 1469598103934665603ull;
    std::vector<float> buf;
    for (int k = 0; k < 4; ++k) {
        launch(k);
        buf.resize((size_t)n * 2 * sh[k]);
        cudaMemcpy(buf.data(), rows, buf.size() * 4, cudaMemcpyDeviceToHost);
        sum = fold(buf.data(), buf.size() * 4, sum);
        if (k < 3)
            for (int p = 0; p < 2; ++p) {
                buf.resize((size_t)fst[k + 1] * n);
                cudaMemcpy(buf.data(), pic[k + 1][p], buf.size() * 4, cudaMemcpyDeviceToHost);
                for (int f = 0; f < n; ++f)
                    for (int y = 0; y < sh[k + 1]; ++y)
                        sum = fold(&buf[f * fst[k + 1] + y * pitch[k + 1]], sw[k + 1] * 4, sum);
            }
    }
    printf(" = %.1f us a batch (%.2f a frame), checksum %016llx, %s\n", total, total / n, sum,
           cudaGetErrorString(cudaGetLastError()));
    return 0;
}
