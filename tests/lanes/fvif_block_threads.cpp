// float_vif.cu's statistics and decimation kernels (and the two in one, vx_fvif_stat_down_u8_17_9)
// run with blocks of real threads: one std::thread per CUDA thread, __syncthreads() a
// std::barrier of the block, __shared__ arrays shared by the block's threads (a block at a time).  Built by
// test_float_vif_tiles.py from the emulator's prelude with those three changes; the maps, the
// row sums and the decimated pictures must equal the one-thread emulator's (the lane tests
// check those against the CPU twin), so the thread mapping the emulator never runs (the
// statistics' warp for the row sums, strips and columns past the block's threads) is checked
// too; under ThreadSanitizer a barrier missing between two phases is a reported race.
#include <barrier>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

static std::unique_ptr<std::barrier<>> block_barrier;
void __syncthreads()
{
    if (block_barrier) block_barrier->arrive_and_wait();
}

// every block of a (gx, gy, 1) grid, `threads` threads a block: the block's threads made once
// and taking the blocks in turn, a barrier between one block and the next (its shared arrays
// are the next block's)
template <typename F>
static void launch(unsigned gx, unsigned gy, int threads, F kernel)
{
    vx_emu_blockDim = {(unsigned)threads, 1, 1};
    vx_emu_gridDim = {gx, gy, 1};
    auto body = [&](int t) {
        for (unsigned y = 0; y < gy; ++y)
            for (unsigned x = 0; x < gx; ++x) {
                vx_emu_blockIdx = {x, y, 0};
                vx_emu_threadIdx = {(unsigned)t, 0, 0};
                kernel();
                __syncthreads();
            }
    };
    if (threads == 1) {
        block_barrier.reset();
        body(0);
        return;
    }
    block_barrier = std::make_unique<std::barrier<>>(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back(body, t);
    for (auto& th : ts) th.join();
}

struct Out {
    std::vector<float> maps, rows, down;
};

static bool same(const std::vector<float>& x, const std::vector<float>& y)
{
    return x.size() == y.size() && !memcmp(x.data(), y.data(), x.size() * sizeof(float));
}

// a picture element's kernels: the statistics (fixed width FW, or any), the decimation, and the
// two in one for FW and FWD taps
template <typename T> struct Kernels;
template <> struct Kernels<u8> {
    static constexpr int FW = 17, FWD = 9;
    static constexpr auto stat_fixed = vx_fvif_stat_u8_17, stat_any = vx_fvif_stat_u8_any;
    static constexpr auto down = vx_fvif_down_u8;
    static constexpr auto stat_down = vx_fvif_stat_down_u8_17_9;
};
template <> struct Kernels<float> {
    static constexpr int FW = 9, FWD = 5;
    static constexpr auto stat_fixed = vx_fvif_stat_f32_9, stat_any = vx_fvif_stat_f32_any;
    static constexpr auto down = vx_fvif_down_f32;
    static constexpr auto stat_down = vx_fvif_stat_down_f32_9_5;
};

// the statistics (maps, rows) and the decimation with `dtaps` (down): by vx_fvif_stat_* and
// vx_fvif_down_*, or (fold) by vx_fvif_stat_down_* alone
template <typename T>
static Out run(bool block, bool fold, int w, int h, const std::vector<T>& a, const std::vector<T>& b,
               const std::vector<float>& taps, const std::vector<float>& dtaps)
{
    typedef Kernels<T> K;
    Out o;
    o.maps.assign(2 * (size_t)w * h, -7.0f);
    o.rows.assign(2 * (size_t)h, -7.0f);
    const int fw = (int)taps.size(), w2 = w / 2, h2 = h / 2;
    o.down.assign(2 * (size_t)w2 * h2, -7.0f);
    launch(1, (h + FV_RV - 1) / FV_RV, block ? FV_BLOCK : 1, [&] {
        if (fold)
            K::stat_down(a.data(), b.data(), (i64)w * h, w, h, w, 0.0f, taps.data(), fw, 100.0f, 2.0, 0.0001f,
                         o.maps.data(), o.maps.data() + (size_t)w * h, 2 * (i64)w * h, w, o.rows.data(), 2 * h,
                         dtaps.data(), o.down.data(), o.down.data() + (size_t)w2 * h2, 2 * (i64)w2 * h2, w2, w2, h2);
        else
            (fw == K::FW ? K::stat_fixed : K::stat_any)(
                a.data(), b.data(), (i64)w * h, w, h, w, 0.0f, taps.data(), fw, 100.0f, 2.0, 0.0001f, o.maps.data(),
                o.maps.data() + (size_t)w * h, 2 * (i64)w * h, w, o.rows.data(), 2 * h);
    });
    if (!fold)
        launch((w2 + FV_DCOLS - 1) / FV_DCOLS, h2, block ? 256 : 1, [&] {
            K::down(a.data(), b.data(), (i64)w * h, w, h, w, 0.0f, dtaps.data(), (int)dtaps.size(), o.down.data(),
                    o.down.data() + (size_t)w2 * h2, 2 * (i64)w2 * h2, w2, w2);
        });
    return o;
}

// one-thread and block runs of the two kernels (and of the fold where FW and FWD are its
// widths): every value equal, none left unset
// The filter of n taps (17, 9, 5 or 3): the declaration's table that the kernels compiled for
// that width read (the others read the filter they are given, the same values here)
static std::vector<float> gauss(int n)
{
    const float* t = n == 17 ? fv_gauss17 : n == 9 ? fv_gauss9 : n == 5 ? fv_gauss5 : fv_gauss3;
    return std::vector<float>(t, t + n);
}

template <typename T>
static int check(int w, int h, const std::vector<T>& a, const std::vector<T>& b, int fw, int dw)
{
    const std::vector<float> taps = gauss(fw), dtaps = gauss(dw);
    const bool fold = fw == Kernels<T>::FW && dw == Kernels<T>::FWD;
    const Out one = run<T>(false, false, w, h, a, b, taps, dtaps), block = run<T>(true, false, w, h, a, b, taps, dtaps);
    int unset = 0;
    for (float v : one.rows) unset += v == -7.0f;
    for (float v : one.down) unset += v == -7.0f;
    bool ok = same(one.maps, block.maps) && same(one.rows, block.rows) && same(one.down, block.down);
    if (fold) {
        const Out fone = run<T>(false, true, w, h, a, b, taps, dtaps);
        const Out fblock = run<T>(true, true, w, h, a, b, taps, dtaps);
        for (const Out* o : {&fone, &fblock})
            ok = ok && same(one.maps, o->maps) && same(one.rows, o->rows) && same(one.down, o->down);
    }
    printf("%s %dx%d, %d/%d taps%s: %s, %d values unset\n", sizeof(T) == 1 ? "u8" : "f32", w, h, fw, dw,
           fold ? " (and folded)" : "", ok ? "equal" : "DIFFERENT", unset);
    return !ok || unset;
}

int main()
{
    // (483 x 27: the last band holds 3 rows, the last segment 1 scale-1 column; 481 x 19: a last
    // segment with no scale-1 column, a last band of 3 rows with one kept)
    const int sizes[][2] = {{497, 37}, {241, 9}, {16, 16}, {960, 20}, {483, 27}, {481, 19}};
    int bad = 0;
    for (auto& sz : sizes) {
        const int w = sz[0], h = sz[1];
        std::mt19937 rng(w * 31 + h);
        std::vector<u8> a((size_t)w * h), b((size_t)w * h);
        for (auto& v : a) v = (u8)(rng() & 255);
        for (size_t i = 0; i < b.size(); ++i) b[i] = (u8)((a[i] + rng() % 61) & 255);
        // u8: the statistics with 17 or 9 taps, the decimation with 17 or 9 (and 17 with 9, the
        // fold too); f32 (a picture of the next scales): 9 taps with 5, the fold too
        for (auto [fw, dw] : {std::pair{17, 17}, std::pair{9, 9}, std::pair{17, 9}})
            bad += check<u8>(w, h, a, b, fw, dw);
        std::vector<float> fa(a.size()), fb(b.size());
        for (size_t i = 0; i < a.size(); ++i) {
            fa[i] = (float)a[i] - 128.0f;
            fb[i] = (float)b[i] - 128.0f;
        }
        bad += check<float>(w, h, fa, fb, 9, 5);
    }
    return bad != 0;
}
