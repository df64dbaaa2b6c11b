// The instruction sets a native kernel's frame is built for (vif.cpp, adm.cpp): the same source
// compiled as flattened clones for AVX-512 and AVX2 registers where GCC targets x86-64 (VX_X86),
// in SSE2 ones everywhere, one of them chosen at run time.  The build pastes this file in place
// of `#include "isa.h"` (vmafxd/lanes/native/__init__.py), so a library's cache key covers it.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define VX_X86 1
#endif

namespace vx_isa {

enum Isa { BASELINE = 0, AVX2 = 1, AVX512 = 2 };

// the best the CPU has
inline int best() {
#ifdef VX_X86
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return AVX512;
    if (__builtin_cpu_supports("avx2")) return AVX2;
#endif
    return BASELINE;
}

// `wanted` (0 baseline, 1 AVX2, 2 AVX-512), or the best the CPU has below it
inline int clamp(int wanted) {
    const int top = best();
    return wanted < BASELINE ? BASELINE : (wanted > top ? top : wanted);
}

}  // namespace vx_isa
