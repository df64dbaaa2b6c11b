// vmafx kernel prelude: the only place where CUDA and HIP differ.
//
// Every kernel source under features/kernels/ is compiled as this prelude
// followed by the source, by NVRTC (CUDA) or HIPRTC (HIP), at first use for
// the device's architecture.  Kernels use only what both dialects share:
// __global__/__shared__/__syncthreads, blockIdx/threadIdx, 64-bit atomicAdd
// on unsigned long long, and the integer and IEEE double/float arithmetic
// both compile the same way once contraction into FMA is off (--fmad=false /
// -ffp-contract=off): integer features must match the CPU twins bit for bit.

#if defined(VX_EMULATE)
// The CPU emulator (vmafxd/lanes/emulated.py): the same source compiled by a
// host C++ compiler, every block run by ONE thread, blocks one after another.
// With blockDim == 1 each barrier-separated phase of a block runs to the end
// before the next, so __syncthreads() is a no-op and the arithmetic, the
// indexing and the mirroring are exactly the device's; what the emulator
// cannot show is a race between threads (the GPU runs decide that).  Kernels
// therefore stride their loops by blockDim, never by a constant.
#include <stdint.h>
#include <cstddef>
#include <utility>
#define __global__
#define __device__
#define __forceinline__ inline
// A block's shared memory lives as long as the block: with one thread a block
// and the block one call of the kernel, that is the call's own stack (every
// __shared__ array is declared in the function a block runs once; the device
// caps them at 48 KiB).  So several host threads may run launches at once,
// and the arrays cost no thread_local lookups.  blockIdx is the thread's own.
#define __shared__
#define __constant__ static const
struct vx_dim3 { unsigned x, y, z; };
static thread_local vx_dim3 vx_emu_blockIdx = {0, 0, 0};
static thread_local vx_dim3 vx_emu_gridDim = {1, 1, 1};
static constexpr vx_dim3 vx_emu_threadIdx = {0, 0, 0};
static constexpr vx_dim3 vx_emu_blockDim = {1, 1, 1};
#define blockIdx vx_emu_blockIdx
#define threadIdx vx_emu_threadIdx
#define blockDim vx_emu_blockDim
#define gridDim vx_emu_gridDim
// A launch: every block of the grid in turn, the kernel's arguments read from
// CUDA's packed form (args[i] points at argument i).  The emulator appends one
// VX_EMU_LAUNCHER(kernel) per kernel: ``vx_launch_<kernel>``, one host call a launch.
template <typename... A, std::size_t... I>
static void vx_emu_grid(void (*kernel)(A...), unsigned gx, unsigned gy, unsigned gz, void* const* args,
                        std::index_sequence<I...>)
{
    vx_emu_gridDim = {gx, gy, gz};
    for (unsigned z = 0; z < gz; ++z)
        for (unsigned y = 0; y < gy; ++y)
            for (unsigned x = 0; x < gx; ++x) {
                vx_emu_blockIdx = {x, y, z};
                kernel(*static_cast<A*>(args[I])...);
            }
}
template <typename... A>
static void vx_emu_grid(void (*kernel)(A...), unsigned gx, unsigned gy, unsigned gz, void* const* args)
{
    vx_emu_grid(kernel, gx, gy, gz, args, std::index_sequence_for<A...>());
}
#define VX_EMU_LAUNCHER(k) \
    extern "C" void vx_launch_##k(unsigned gx, unsigned gy, unsigned gz, void* const* args) \
    { vx_emu_grid(k, gx, gy, gz, args); }
static inline void __syncthreads() {}
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v)
{
    unsigned long long old = *p;
    *p = old + v;
    return old;
}
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline int __clzll(unsigned long long x) { return x ? __builtin_clzll(x) : 64; }
#define VX_EMU 1
#elif defined(__HIPCC_RTC__) || defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#define VX_HIP 1
#else
#define VX_CUDA 1
#endif

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define VX_KERNEL extern "C" __global__
// VX_BOUNDS(threads, blocks): at most `threads` a block, and registers for at
// least `blocks` blocks an SM (CUDA's __launch_bounds__; HIP takes the thread
// count only, its second argument means something else; nothing on the emulator).
#if defined(VX_EMU)
#define VX_BOUNDS(threads, blocks)
#elif defined(VX_HIP)
#define VX_BOUNDS(threads, blocks) __launch_bounds__(threads)
#else
#define VX_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#endif
#define VX_DEVICE static __device__ __forceinline__
// A device function kept out of line (a path rarely taken): its code once, not at every call.
#if defined(VX_EMU)
#define VX_DEVICE_COLD static __attribute__((noinline))
#else
#define VX_DEVICE_COLD static __device__ __noinline__
#endif

// A float's bits, a double's low and high 32 bits (and the double of high bits over
// zeros), and warp shuffles for in-warp scans (VX_WARP lanes; the
// emulator's "warp" is its one thread, so a shuffle there is never read).
#if defined(VX_EMU)
#define VX_WARP 1
static inline u32 vx_float_bits(float f) { union { float f; u32 u; } c; c.f = f; return c.u; }
static inline u32 vx_double_low(double d) { union { double d; u64 u; } c; c.d = d; return (u32)c.u; }
static inline u32 vx_double_high(double d) { union { double d; u64 u; } c; c.d = d; return (u32)(c.u >> 32); }
static inline double vx_double_from_high(u32 hi) { union { double d; u64 u; } c; c.u = (u64)hi << 32; return c.d; }
static inline u32 vx_shfl_up_u32(u32 v, int) { return v; }
#elif defined(VX_HIP)
#define VX_WARP warpSize
VX_DEVICE u32 vx_float_bits(float f) { return __float_as_uint(f); }
VX_DEVICE u32 vx_double_low(double d) { return (u32)__double2loint(d); }
VX_DEVICE u32 vx_double_high(double d) { return (u32)__double2hiint(d); }
VX_DEVICE double vx_double_from_high(u32 hi) { return __hiloint2double((int)hi, 0); }
VX_DEVICE u32 vx_shfl_up_u32(u32 v, int d) { return __shfl_up(v, d); }
#else
#define VX_WARP 32
VX_DEVICE u32 vx_float_bits(float f) { return __float_as_uint(f); }
VX_DEVICE u32 vx_double_low(double d) { return (u32)__double2loint(d); }
VX_DEVICE u32 vx_double_high(double d) { return (u32)__double2hiint(d); }
VX_DEVICE double vx_double_from_high(u32 hi) { return __hiloint2double((int)hi, 0); }
VX_DEVICE u32 vx_shfl_up_u32(u32 v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
#endif

// An approximation of 1 / x, relative error below 2^-20, to start Newton steps from:
// one instruction of the hardware's on CUDA (x normal, not huge), the division elsewhere.
#if defined(VX_CUDA)
VX_DEVICE double vx_rcp_approx(double x)
{
    double r;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(x));
    return r;
}
VX_DEVICE float vx_rcp_approxf(float x)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
#else
VX_DEVICE double vx_rcp_approx(double x) { return 1.0 / x; }
VX_DEVICE float vx_rcp_approxf(float x) { return 1.0f / x; }
#endif

// Block-wide sum of one value per thread (every thread gets the sum).
// Tree reduction in shared memory, portable across warp sizes 32 and 64;
// the block's thread count must be a power of two.  `scratch` holds one
// value per thread; callers __syncthreads() before reusing it.
template <typename T>
VX_DEVICE T vx_block_sum(T v, T* scratch)
{
    const int n = blockDim.x * blockDim.y * blockDim.z;
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    scratch[t] = v;
    __syncthreads();
    for (int s = n >> 1; s > 0; s >>= 1) {
        if (t < s)
            scratch[t] += scratch[t + s];
        __syncthreads();
    }
    return scratch[0];
}

VX_DEVICE u64 vx_shfl_up_u64(u64 v, int d)
{
    return (u64)vx_shfl_up_u32((u32)v, d) | ((u64)vx_shfl_up_u32((u32)(v >> 32), d) << 32);
}

// The same for N integers a thread, whose sums any order gives (each v[m] becomes its block
// sum, in every thread): each warp adds its lanes' values by shuffles (its last lane ends
// with the warp's sums), every thread adds the warps' sums from `scratch` (N x 32 values):
// one barrier instead of the tree's log2(n) + 1 for each.  A block whose size is not a
// multiple of the warp takes the tree, value by value.  Same contract for `scratch`.
template <int N>
VX_DEVICE void vx_block_sums_i64(i64 (&v)[N], i64* scratch)
{
    const int n = blockDim.x * blockDim.y * blockDim.z;
    if (n % VX_WARP != 0) {
        for (int m = 0; m < N; ++m) {
            v[m] = vx_block_sum<i64>(v[m], scratch);
            __syncthreads();
        }
        return;
    }
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int lane = t % VX_WARP, warp = t / VX_WARP;
    u64 s[N];
    for (int m = 0; m < N; ++m)
        s[m] = (u64)v[m];
    for (int off = 1; off < VX_WARP; off <<= 1) {
        for (int m = 0; m < N; ++m) {
            const u64 p = vx_shfl_up_u64(s[m], off);
            if (lane >= off)
                s[m] += p;
        }
    }
    if (lane == VX_WARP - 1) {
        for (int m = 0; m < N; ++m)
            scratch[m * 32 + warp] = (i64)s[m];
    }
    __syncthreads();
    for (int m = 0; m < N; ++m) {
        u64 total = 0;
        for (int k = 0; k < n / VX_WARP; ++k)
            total += (u64)scratch[m * 32 + k];
        v[m] = (i64)total;
    }
}

VX_DEVICE i64 vx_block_sum_i64(i64 v, i64* scratch)
{
    i64 one[1] = {v};
    vx_block_sums_i64<1>(one, scratch);
    return one[0];
}
VX_DEVICE double vx_block_sum_f64(double v, double* scratch) { return vx_block_sum<double>(v, scratch); }

// Add a signed 64-bit value to a 64-bit counter (two's complement: the
// unsigned add is the signed add).
VX_DEVICE void vx_atomic_add_i64(i64* dst, i64 v)
{
    atomicAdd((u64*)dst, (u64)v);
}

// Two or four consecutive i32 (or the bytes of any V) in one access (8- or 16-byte aligned),
// for kernels whose threads each take a run of a row; shared arrays read so are declared
// VX_ALIGN(16).  The emulator copies the bytes (no aliasing of the caller's values as V).
#if defined(VX_EMU)
#define VX_ALIGN(n) alignas(n)
#else
#define VX_ALIGN(n) __align__(n)
#endif
struct VX_ALIGN(8) VxI32x2 { i32 x, y; };
struct VX_ALIGN(16) VxI32x4 { i32 x, y, z, w; };

template <typename V, typename P>
VX_DEVICE V vx_ld_vec(const P* p)
{
#if defined(VX_EMU)
    V v;
    __builtin_memcpy(&v, p, sizeof(V));
    return v;
#else
    return *(const V*)p;
#endif
}

template <typename V, typename P>
VX_DEVICE void vx_st_vec(P* p, V v)
{
#if defined(VX_EMU)
    __builtin_memcpy(p, &v, sizeof(V));
#else
    *(V*)p = v;
#endif
}

// Four consecutive samples in one load (a u32 of 8-bit samples, a u64 of 16-bit ones), for
// staging loops whose rows are aligned to 4 samples; sample k is bits [k * 8 * sizeof(T), ...)
// (little-endian on every target): vx_ld_vec of the wider type.
template <typename T> struct VxQuad { typedef u64 type; };
template <> struct VxQuad<u8> { typedef u32 type; };

template <typename T>
VX_DEVICE typename VxQuad<T>::type vx_load_quad(const T* p)
{
    return vx_ld_vec<typename VxQuad<T>::type>(p);
}

// libvmaf's mirror without repeating the edge sample: -1 -> 1, n -> n - 2.
VX_DEVICE int vx_mirror(int i, int n)
{
    if (i < 0) return -i;
    if (i >= n) return 2 * (n - 1) - i;
    return i;
}

// A sample as libvmaf's float features read a picture (picture_copy /
// picture_copy_hbd, libvmaf/src/feature/picture_copy.c): in float, divided by
// `div` (2^(bpc-8); 0: 8-bit, no division), then offset by -128.
template <typename T>
VX_DEVICE float vx_float_sample(T s, float div)
{
    float v = (float)s;
    if (div != 0.0f) v = v / div;
    return v + -128.0f;
}

// libvmaf's float sums run a float left to right (the CPU twins' row_major_sum:
// a float per row, then the rows top to bottom): n values added in order.
VX_DEVICE float vx_float_sum(const float* p, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; ++i)
        s = s + p[i];
    return s;
}

// Row sums of maps `plane` elements apart, one thread a row: block (x, m, f)
// sums COLS rows of map m of frame f into rows[f][m][y].  (Its strided reads are
// slow: vx_staged_row_sums below does the same additions faster.)
template <int COLS>
VX_DEVICE void vx_float_map_rows(const float* maps, i64 fstride, i64 pitch, i64 plane, int w, int h, float* rows,
                                 i64 rows_fstride)
{
    const int f = blockIdx.z, m = blockIdx.y;
    for (int i = threadIdx.x; i < COLS; i += blockDim.x) {
        const int y = blockIdx.x * COLS + i;
        if (y >= h) break;
        rows[f * rows_fstride + m * h + y] = vx_float_sum(maps + f * fstride + m * plane + y * pitch, w);
    }
}

// Each map's row sums added top to bottom into one float, at out[frame][index + m]
// (thread 0 of block (0, m, f)).
VX_DEVICE void vx_float_map_totals(const float* rows, i64 rows_fstride, int h, float* out, int out_stride,
                                   int out_index)
{
    const int f = blockIdx.z, m = blockIdx.y;
    if (threadIdx.x != 0) return;
    out[f * out_stride + out_index + m] = vx_float_sum(rows + f * rows_fstride + m * h, h);
}

// Row sums in libvmaf's order (a float per row, left to right), the fast way:
// nrows (<= VX_SUM_ROWS) rows from y0 of the values value(y, x), x < w, into
// out[r * out_step].  The block's threads stage VX_SUM_COLS columns of the rows
// at a time in shared memory (coalesced reads, the per-value work in parallel),
// then one thread a row adds the staged values to its running float in order:
// the same additions in the same order as one thread walking the row, without
// its strided reads (one thread a row reads 32 rows' cache lines per warp load).
// Launch with a power-of-two block of at least VX_SUM_ROWS threads (128 fits).
#define VX_SUM_ROWS 32
#define VX_SUM_COLS 128
template <typename F>
VX_DEVICE void vx_staged_row_sums(int y0, int nrows, int w, F value, float* out, i64 out_step)
{
    __shared__ float chunk[VX_SUM_ROWS][VX_SUM_COLS + 1];  // + 1: a row's adder reads its own bank
    __shared__ float acc[VX_SUM_ROWS];
    const int t = threadIdx.x, n = blockDim.x;
    for (int r = t; r < nrows; r += n)
        acc[r] = 0.0f;
    for (int x0 = 0; x0 < w; x0 += VX_SUM_COLS) {
        const int cols = w - x0 < VX_SUM_COLS ? w - x0 : VX_SUM_COLS;
        __syncthreads();  // the previous chunk added
        for (int i = t; i < VX_SUM_ROWS * VX_SUM_COLS; i += n) {
            const int r = i / VX_SUM_COLS, c = i % VX_SUM_COLS;
            if (r < nrows && c < cols)
                chunk[r][c] = value(y0 + r, x0 + c);
        }
        __syncthreads();
        for (int r = t; r < nrows; r += n) {
            float s = acc[r];
            for (int c = 0; c < cols; ++c)
                s = s + chunk[r][c];
            acc[r] = s;
        }
    }
    for (int r = t; r < nrows; r += n)
        out[r * out_step] = acc[r];
}

// vx_float_map_totals the fast way: block (0, m, f) (128 threads) adds map m's
// row sums top to bottom into out[frame][index + m].
VX_DEVICE void vx_float_map_totals_staged(const float* rows, i64 rows_fstride, int h, float* out, int out_stride,
                                          int out_index)
{
    const int f = blockIdx.z, m = blockIdx.y;
    const float* r = rows + f * rows_fstride + m * h;
    vx_staged_row_sums(0, 1, h, [&](int, int x) { return r[x]; }, out + f * out_stride + out_index + m, 1);
}
