// Integer PSNR's sums of squared errors (libvmaf's integer_psnr.c) for one CPU thread.
//
// psnr_sse: one plane pair's sum of squared differences.  8-bit samples: each row
// summed in 32 bits, wrapping as libvmaf's per-row sum does (past 66,000 samples a
// row), the rows in 64; deeper samples: every square (below 2^32) summed in 64
// bits.  Integers: any order gives the twin's sums (vmafxd/features/psnr.py).

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace {

inline std::uint32_t row8(const std::uint8_t* __restrict x, const std::uint8_t* __restrict y, int w) {
    // in pieces of 32768 samples, whose sums of squares (at most 255^2 each) fit an int32: the
    // compiler pairs the 16-bit products (pmaddwd); the pieces add up wrapping as libvmaf's uint32
    std::uint32_t sum = 0;
    for (int j0 = 0; j0 < w; j0 += 32768) {
        const int n = std::min(w - j0, 32768);
        const std::uint8_t* __restrict a = x + j0;
        const std::uint8_t* __restrict b = y + j0;
        std::int32_t part = 0;
        for (int j = 0; j < n; j++) {
            const std::int16_t e = static_cast<std::int16_t>(a[j] - b[j]);
            part += static_cast<std::int32_t>(e) * e;
        }
        sum += static_cast<std::uint32_t>(part);
    }
    return sum;
}

inline std::uint64_t row16(const std::uint16_t* __restrict x, const std::uint16_t* __restrict y, int w) {
    std::uint64_t sum = 0;
    for (int j = 0; j < w; j++) {
        const std::int64_t e = static_cast<std::int64_t>(x[j]) - y[j];
        sum += static_cast<std::uint64_t>(e * e);
    }
    return sum;
}

template <typename T>
__attribute__((always_inline)) inline std::uint64_t sse(const T* ref, std::ptrdiff_t rs, const T* dis,
                                                        std::ptrdiff_t ds, int w, int h) {
    std::uint64_t total = 0;
    for (int i = 0; i < h; i++) {
        if constexpr (sizeof(T) == 1)
            total += row8(ref + i * rs, dis + i * ds, w);
        else
            total += row16(ref + i * rs, dis + i * ds, w);
    }
    return total;
}

// AVX2 where the CPU has it (integers: the same sums either way), SSE2 elsewhere.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"), flatten)) std::uint64_t sse8_avx2(const std::uint8_t* r, std::ptrdiff_t rs,
                                                                 const std::uint8_t* d, std::ptrdiff_t ds, int w, int h) {
    return sse(r, rs, d, ds, w, h);
}
__attribute__((target("avx2"), flatten)) std::uint64_t sse16_avx2(const std::uint16_t* r, std::ptrdiff_t rs,
                                                                  const std::uint16_t* d, std::ptrdiff_t ds, int w,
                                                                  int h) {
    return sse(r, rs, d, ds, w, h);
}
#endif

__attribute__((flatten)) std::uint64_t sse8(const std::uint8_t* r, std::ptrdiff_t rs, const std::uint8_t* d,
                                            std::ptrdiff_t ds, int w, int h) {
    return sse(r, rs, d, ds, w, h);
}
__attribute__((flatten)) std::uint64_t sse16(const std::uint16_t* r, std::ptrdiff_t rs, const std::uint16_t* d,
                                             std::ptrdiff_t ds, int w, int h) {
    return sse(r, rs, d, ds, w, h);
}

bool has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
#else
    return false;
#endif
}

}  // namespace

extern "C" {

// The sum of squared errors of a w x h plane pair (samples of `bytes` bytes, strides in samples).
std::uint64_t psnr_sse(const void* ref, std::ptrdiff_t ref_stride, const void* dis, std::ptrdiff_t dis_stride, int w,
                       int h, int bytes) {
    if (bytes == 1) {
        auto r = static_cast<const std::uint8_t*>(ref);
        auto d = static_cast<const std::uint8_t*>(dis);
#if defined(__x86_64__) && defined(__GNUC__)
        if (has_avx2()) return sse8_avx2(r, ref_stride, d, dis_stride, w, h);
#endif
        return sse8(r, ref_stride, d, dis_stride, w, h);
    }
    auto r = static_cast<const std::uint16_t*>(ref);
    auto d = static_cast<const std::uint16_t*>(dis);
#if defined(__x86_64__) && defined(__GNUC__)
    if (has_avx2()) return sse16_avx2(r, ref_stride, d, dis_stride, w, h);
#endif
    return sse16(r, ref_stride, d, dis_stride, w, h);
}

}  // extern "C"
