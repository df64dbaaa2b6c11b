// Integer VIF (libvmaf's integer_vif.c, the "vif" extractor) for one CPU thread.
//
// Produces, per scale, the four integer sums of the numpy twin
// (vmafxd/features/vif.py, compute_stats): num_log, den_log, num_non_log,
// den_non_log.  The twin's Python turns them into metrics.  Every value is an
// integer formed with libvmaf's shifts and roundings, or a double formed with
// its operations in its order (the gain g and the noise variance), so the sums
// are exact whatever the loop order or vector width.
//
// Shape, per scale (taps f, half width r; mirror padding without repeating the edge):
// * a row at a time: the vertical pass of the five quantities (the two means and
//   the three second moments) over the r rows either side, rounded and shifted;
//   the row mirrored by r columns; the horizontal pass; then the per-pixel
//   statistics (libvmaf's branch, scalar);
// * the next scale's picture: the vertical pass at even rows only and the
//   horizontal pass at even columns only (libvmaf filters every sample and then
//   keeps one in four: the kept ones are the same sums).
// The passes run over blocks of 8 or 16 columns with the taps inner and the sums
// in registers (GCC's vector extensions, built as AVX-512, AVX2 and baseline
// clones, the best the CPU has chosen at run time); a row's last columns go a tap
// at a time.  8-bit luma is widened to 16 bits once a frame.
//
// Where the moments' sums need 64 bits they are formed from two 32-bit sums:
// a moment m < 2^32 is hi * 2^16 + lo with hi, lo < 2^16, and as the taps sum to
// 2^16 each of sum f*hi and sum f*lo is below 2^32 (32-bit lanes, twice the
// vector width of 64-bit ones).  (sum f*m + 2^15) >> 16 is then
// sum f*hi + ((sum f*lo + 2^15) >> 16), both terms and the result below 2^32.
//
// vif_frame takes a frame's luma pair and writes int64[4][4]: per scale
// (num_log, den_log, num_non_log, den_non_log), zeros for a skipped scale 0.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "isa.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // vector types inside inlined helpers only: no ABI crosses them

namespace {

constexpr int SCALES = 4;
constexpr int MAX_HALF = 8;
constexpr int SLACK = 48;  // the horizontal passes' last blocks (16 lanes at most) read past the mirrored columns
constexpr std::int32_t SIGMA_NSQ = 2 << 16;
constexpr double EPS = 65536 * 1.0e-10;

const std::uint16_t TAPS[SCALES][17] = {
    {489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640, 935, 489},
    {1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244},
    {3571, 16004, 26386, 16004, 3571},
    {10904, 43728, 10904},
};
const int WIDTH[SCALES] = {17, 9, 5, 3};

struct Sums {
    std::int64_t num_log = 0, den_log = 0, num_non_log = 0, den_non_log = 0;
};

// A row of `n` values with MAX_HALF mirrored ones either side.
template <typename V>
struct Row {
    std::vector<V> data;
    void resize(int n) { data.assign(static_cast<std::size_t>(n) + 2 * MAX_HALF + SLACK, 0); }
    V* operator()() { return data.data() + MAX_HALF; }
};

struct Vif {
    int w, h, bpc;
    double gain_limit;
    bool skip0;
    std::uint16_t log2[65536];
    // the pictures of scales 1..3 (index 0 unused)
    std::vector<std::uint16_t> ref[SCALES], dis[SCALES];
    // 8-bit luma widened to 16 bits (allocated with the first 8-bit frame)
    std::vector<std::uint16_t> wide_ref, wide_dis;
    // vertical pass outputs (mirrored rows)
    Row<std::uint32_t> mu1, mu2, xx, yy, xy;
    // the vertical moments' 64-bit sums, and the horizontal pass's sums
    std::vector<std::uint64_t> xx64, yy64, xy64;
    std::vector<std::uint32_t> hmu1, hmu2, hxx_hi, hyy_hi, hxy_hi, hxx_lo, hyy_lo, hxy_lo;
    std::vector<std::uint32_t> xx_hi, yy_hi, xy_hi;  // the vertical moments split (mirrored like mu1)
    std::vector<std::uint32_t> xx_lo, yy_lo, xy_lo;
    std::vector<std::int32_t> s1, s2, s12;
};

inline int mirror(int i, int n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); }

template <typename V>
inline void mirror_row(V* row, int w, int r) {
    for (int f = 1; f <= r; f++) {
        row[-f] = row[f];
        row[w - 1 + f] = row[w - 1 - f];
    }
}

inline std::int32_t log2_32(const std::uint16_t* table, std::uint32_t v) {
    const int k = 16 - __builtin_clz(v);
    return table[v >> k] + 2048 * k;
}

inline std::int32_t log2_64(const std::uint16_t* table, std::uint64_t v) {
    const int k = 48 - __builtin_clzll(v);
    return table[v >> k] + 2048 * k;
}

// --- row kernels (restrict parameters: contiguous loops the compiler vectorises) --------------------

// One tap of the vertical pass of the five quantities, 8-bit samples at scale 0 (32-bit moment sums).
template <typename T>
inline void vtap_narrow(std::uint32_t* __restrict m1, std::uint32_t* __restrict m2, std::uint32_t* __restrict a,
                        std::uint32_t* __restrict b, std::uint32_t* __restrict c, const T* __restrict x,
                        const T* __restrict y, std::uint32_t t, int w) {
    for (int j = 0; j < w; j++) {
        const std::uint32_t fx = t * x[j], fy = t * y[j];
        m1[j] += fx;
        m2[j] += fy;
        a[j] += fx * x[j];
        b[j] += fy * y[j];
        c[j] += fx * y[j];
    }
}

// One tap of the vertical pass, 64-bit moment sums.
template <typename T>
inline void vtap_wide(std::uint32_t* __restrict m1, std::uint32_t* __restrict m2, std::uint64_t* __restrict a,
                      std::uint64_t* __restrict b, std::uint64_t* __restrict c, const T* __restrict x,
                      const T* __restrict y, std::uint32_t t, int w) {
    for (int j = 0; j < w; j++) {
        const std::uint32_t fx = t * x[j], fy = t * y[j];
        m1[j] += fx;
        m2[j] += fy;
        a[j] += static_cast<std::uint64_t>(fx) * x[j];
        b[j] += static_cast<std::uint64_t>(fy) * y[j];
        c[j] += static_cast<std::uint64_t>(fx) * y[j];
    }
}

// (v + 2^(shift-1)) >> shift of 64-bit sums into 32 bits (nothing but the narrowing for shift 0).
inline void narrow_moment(std::uint32_t* __restrict out, const std::uint64_t* __restrict in, int shift, int w) {
    if (shift) {
        const std::uint64_t round = std::uint64_t(1) << (shift - 1);
        for (int j = 0; j < w; j++) out[j] = static_cast<std::uint32_t>((in[j] + round) >> shift);
    } else {
        for (int j = 0; j < w; j++) out[j] = static_cast<std::uint32_t>(in[j]);
    }
}

inline void round_shift(std::uint32_t* __restrict v, int shift, int w) {
    const std::uint32_t round = 1u << (shift - 1);
    for (int j = 0; j < w; j++) v[j] = (v[j] + round) >> shift;
}

// a moment's row (with its mirrored columns) as its high and low 16 bits
inline void split(std::uint32_t* __restrict hi, std::uint32_t* __restrict lo, const std::uint32_t* __restrict v,
                  int n) {
    for (int j = 0; j < n; j++) {
        hi[j] = v[j] >> 16;
        lo[j] = v[j] & 0xffff;
    }
}

// The horizontal pass of the two means and the three moments' halves, eight columns at a time with
// the sums in registers (GCC's vector extensions: AVX2 registers in the AVX2 clone, pairs of SSE
// ones elsewhere).  Inputs point at the first tap of column 0; the taps are symmetric, so the two
// samples of a tap pair are added before the product (each partial sum is below the whole one,
// below 2^32).  The last block's extra lanes read padding and are never used.
// V: a vector of 8 (AVX2) or 16 (AVX-512) uint32 lanes.
typedef std::uint32_t u32x8 __attribute__((vector_size(32)));
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));

template <typename V>
constexpr int lanes() {
    return sizeof(V) / sizeof(std::uint32_t);
}

template <typename V>
inline V load(const std::uint32_t* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename V>
inline void store(std::uint32_t* p, V v) {
    std::memcpy(p, &v, sizeof v);
}

template <typename V, int NT>
inline void horizontal(const std::uint16_t* f, int w, const std::uint32_t* const in[8], std::uint32_t* const out[8]) {
    constexpr int R = NT / 2;
    for (int j = 0; j < w; j += lanes<V>()) {
        V acc[8];
        for (int q = 0; q < 8; q++) acc[q] = f[R] * load<V>(in[q] + j + R);
        for (int k = 0; k < R; k++) {
            const std::uint32_t t = f[k];
            for (int q = 0; q < 8; q++) acc[q] += t * (load<V>(in[q] + j + k) + load<V>(in[q] + j + NT - 1 - k));
        }
        for (int q = 0; q < 8; q++) store(out[q] + j, acc[q]);
    }
}

// sigma = moment - ((mu_a * mu_b + 2^31) >> 32), read as int32 (sigma2 clamped at 0); the moments
// are (hi + ((lo + 2^15) >> 16)): (sum f*m + 2^15) >> 16
inline void sigmas(std::int32_t* __restrict s1, std::int32_t* __restrict s2, std::int32_t* __restrict s12,
                   const std::uint32_t* __restrict m1, const std::uint32_t* __restrict m2,
                   const std::uint32_t* __restrict ah, const std::uint32_t* __restrict bh,
                   const std::uint32_t* __restrict ch, const std::uint32_t* __restrict al,
                   const std::uint32_t* __restrict bl, const std::uint32_t* __restrict cl, int w) {
    for (int j = 0; j < w; j++) {
        const std::uint64_t u1 = m1[j], u2 = m2[j];
        const std::uint32_t sq1 = static_cast<std::uint32_t>((u1 * u1 + 2147483648u) >> 32);
        const std::uint32_t sq2 = static_cast<std::uint32_t>((u2 * u2 + 2147483648u) >> 32);
        const std::uint32_t p12 = static_cast<std::uint32_t>((u1 * u2 + 2147483648u) >> 32);
        const std::uint32_t xxf = ah[j] + ((al[j] + 32768u) >> 16);
        const std::uint32_t yyf = bh[j] + ((bl[j] + 32768u) >> 16);
        const std::uint32_t xyf = ch[j] + ((cl[j] + 32768u) >> 16);
        s1[j] = static_cast<std::int32_t>(xxf - sq1);
        s2[j] = std::max(static_cast<std::int32_t>(yyf - sq2), 0);
        s12[j] = static_cast<std::int32_t>(xyf - p12);
    }
}

// libvmaf's per-pixel branch over a row of sigmas, into `acc`.
inline void accumulate(const std::int32_t* __restrict s1, const std::int32_t* __restrict s2,
                       const std::int32_t* __restrict s12, const std::uint16_t* __restrict table, double limit,
                       int w, Sums& acc) {
    std::int64_t num_log = 0, den_log = 0, num_non_log = 0, den_non_log = 0;
    for (int j = 0; j < w; j++) {
        const std::int32_t sigma1 = s1[j], sigma2 = s2[j], sigma12 = s12[j];
        if (sigma1 >= SIGMA_NSQ) {
            den_log += log2_32(table, static_cast<std::uint32_t>(SIGMA_NSQ + sigma1)) - 2048 * 17;
            if (sigma12 > 0 && sigma2 > 0) {
                double g = sigma12 / (sigma1 + EPS);
                // libvmaf converts sv to int32 and then clamps it at 0: a negative value (one below
                // INT32_MIN too, where the gain is large) is 0 either way
                const double sv = sigma2 - g * sigma12;
                const std::int32_t sv_sq = sv > 0 ? static_cast<std::int32_t>(sv) : 0;
                g = std::min(g, limit);
                const std::uint32_t numer1 = static_cast<std::uint32_t>(sv_sq + SIGMA_NSQ);
                const std::int64_t numer = static_cast<std::int64_t>(g * g * sigma1) + numer1;
                num_log += log2_64(table, static_cast<std::uint64_t>(numer)) - log2_64(table, numer1);
            }
        } else {
            num_non_log += sigma2;
            den_non_log++;
        }
    }
    acc.num_log += num_log;
    acc.den_log += den_log;
    acc.num_non_log += num_non_log;
    acc.den_non_log += den_non_log;
}

// One tap of the decimation's vertical pass over two pictures.
template <typename T>
inline void dtap(std::uint32_t* __restrict v1, std::uint32_t* __restrict v2, const T* __restrict x,
                 const T* __restrict y, std::uint32_t t, int w) {
    for (int j = 0; j < w; j++) {
        v1[j] += t * x[j];
        v2[j] += t * y[j];
    }
}

inline void store_even(std::uint16_t* __restrict o1, std::uint16_t* __restrict o2, const std::uint32_t* __restrict e1,
                       const std::uint32_t* __restrict e2, int w2) {
    for (int j = 0; j < w2; j++) {
        o1[j] = static_cast<std::uint16_t>((e1[j] + 32768u) >> 16);
        o2[j] = static_cast<std::uint16_t>((e2[j] + 32768u) >> 16);
    }
}

// The vertical pass over whole blocks of 8 columns (w8 of them), the sums in registers; the rows
// of the taps are xr[k], yr[k].  NARROW: 8-bit samples at scale 0, moments summed in 32 bits
// unshifted.  Otherwise each product p = x * y (below 2^32) is summed as its halves, p >> 16 and
// p & 0xffff (each sum below 2^32, see the top of the file), and the shifted moment is
// ((hi << 16) + lo + round) >> shift = (hi << (16 - shift)) + ((lo + round) >> shift), modulo 2^32
// as libvmaf's (uint32_t) conversion (shift <= 16).
template <typename V>
inline V widen(const std::uint16_t* p) {
    typedef std::uint16_t narrow __attribute__((vector_size(sizeof(V) / 2)));
    narrow v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, V);
}

template <typename V, typename T, int NT>
inline void vertical_narrow(const T* const* xr, const T* const* yr, const std::uint16_t* f, int w8,
                            std::uint32_t* const out[5]) {
    for (int j = 0; j < w8; j += lanes<V>()) {
        V m1 = {}, m2 = {}, a = {}, b = {}, c = {};
        for (int k = 0; k < NT; k++) {
            const V x = widen<V>(xr[k] + j), y = widen<V>(yr[k] + j);
            const std::uint32_t t = f[k];
            const V fx = t * x, fy = t * y;
            m1 += fx;
            m2 += fy;
            a += fx * x;
            b += fy * y;
            c += fx * y;
        }
        store(out[0] + j, m1);
        store(out[1] + j, m2);
        store(out[2] + j, a);
        store(out[3] + j, b);
        store(out[4] + j, c);
    }
}

template <typename V, typename T, int NT>
inline void vertical_wide(const T* const* xr, const T* const* yr, const std::uint16_t* f, int w8, int shift,
                          std::uint32_t* const out[5]) {
    const std::uint32_t round = shift ? 1u << (shift - 1) : 0u;
    const int up = 16 - shift;
    for (int j = 0; j < w8; j += lanes<V>()) {
        V m1 = {}, m2 = {}, ah = {}, al = {}, bh = {}, bl = {}, ch = {}, cl = {};
        for (int k = 0; k < NT; k++) {
            const V x = widen<V>(xr[k] + j), y = widen<V>(yr[k] + j);
            const std::uint32_t t = f[k];
            m1 += t * x;
            m2 += t * y;
            const V pa = x * x, pb = y * y, pc = x * y;
            ah += t * (pa >> 16);
            al += t * (pa & 0xffff);
            bh += t * (pb >> 16);
            bl += t * (pb & 0xffff);
            ch += t * (pc >> 16);
            cl += t * (pc & 0xffff);
        }
        store(out[0] + j, m1);
        store(out[1] + j, m2);
        store(out[2] + j, (ah << up) + ((al + round) >> shift));
        store(out[3] + j, (bh << up) + ((bl + round) >> shift));
        store(out[4] + j, (ch << up) + ((cl + round) >> shift));
    }
}

template <typename V, typename T, bool NARROW, int NT>
inline void vertical_blocks(const T* const* xr, const T* const* yr, const std::uint16_t* f, int w8, int shift,
                            std::uint32_t* const out[5]) {
    if (NARROW)
        vertical_narrow<V, T, NT>(xr, yr, f, w8, out);
    else
        vertical_wide<V, T, NT>(xr, yr, f, w8, shift, out);
}

// --- one scale's statistics ------------------------------------------------------------------------

// The vertical pass at row i into s.mu1 .. s.xy (mirrored by r columns).  NARROW: 8-bit samples at
// scale 0, whose moments' sums fit 32 bits and are not shifted.
template <typename V, typename T, bool NARROW>
__attribute__((always_inline)) inline void stat_vertical(Vif& s, const T* ref, std::ptrdiff_t rs, const T* dis,
                                                         std::ptrdiff_t ds, int w, int h, int i, int scale,
                                                         int mu_shift, int sq_shift) {
    const std::uint16_t* f = TAPS[scale];
    const int nt = WIDTH[scale], r = nt / 2;
    std::uint32_t* m1 = s.mu1();
    std::uint32_t* m2 = s.mu2();
    std::uint32_t* a = s.xx();
    std::uint32_t* b = s.yy();
    std::uint32_t* c = s.xy();
    const T* xr[17];
    const T* yr[17];
    for (int k = 0; k < nt; k++) {
        xr[k] = ref + mirror(i - r + k, h) * rs;
        yr[k] = dis + mirror(i - r + k, h) * ds;
    }
    // whole blocks of lanes<V>() columns with the sums in registers, then the rest a tap at a time
    const int w8 = w - w % lanes<V>();
    std::uint32_t* const out[5] = {m1, m2, a, b, c};
    switch (nt) {
        case 17: vertical_blocks<V, T, NARROW, 17>(xr, yr, f, w8, sq_shift, out); break;
        case 9: vertical_blocks<V, T, NARROW, 9>(xr, yr, f, w8, sq_shift, out); break;
        case 5: vertical_blocks<V, T, NARROW, 5>(xr, yr, f, w8, sq_shift, out); break;
        default: vertical_blocks<V, T, NARROW, 3>(xr, yr, f, w8, sq_shift, out); break;
    }
    const int n = w - w8;
    if (n) {
        std::fill(m1 + w8, m1 + w, 0u);
        std::fill(m2 + w8, m2 + w, 0u);
        if (NARROW) {
            std::fill(a + w8, a + w, 0u);
            std::fill(b + w8, b + w, 0u);
            std::fill(c + w8, c + w, 0u);
            for (int k = 0; k < nt; k++) vtap_narrow(m1 + w8, m2 + w8, a + w8, b + w8, c + w8, xr[k] + w8, yr[k] + w8, f[k], n);
        } else {
            std::uint64_t* a64 = s.xx64.data();
            std::uint64_t* b64 = s.yy64.data();
            std::uint64_t* c64 = s.xy64.data();
            std::fill(a64, a64 + n, 0u);
            std::fill(b64, b64 + n, 0u);
            std::fill(c64, c64 + n, 0u);
            for (int k = 0; k < nt; k++) vtap_wide(m1 + w8, m2 + w8, a64, b64, c64, xr[k] + w8, yr[k] + w8, f[k], n);
            narrow_moment(a + w8, a64, sq_shift, n);
            narrow_moment(b + w8, b64, sq_shift, n);
            narrow_moment(c + w8, c64, sq_shift, n);
        }
    }
    round_shift(m1, mu_shift, w);
    round_shift(m2, mu_shift, w);
    mirror_row(m1, w, r);
    mirror_row(m2, w, r);
    mirror_row(a, w, r);
    mirror_row(b, w, r);
    mirror_row(c, w, r);
}

// The horizontal pass of the row s.mu1 .. s.xy, then the per-pixel statistics into `acc`.
template <typename V>
__attribute__((always_inline)) inline void stat_horizontal(Vif& s, int w, int scale, Sums& acc) {
    const std::uint16_t* f = TAPS[scale];
    const int nt = WIDTH[scale], r = nt / 2;
    const int n = w + 2 * r;
    // xx_hi[j] is the high half of xx[j - r] (the row from its first mirrored column)
    split(s.xx_hi.data(), s.xx_lo.data(), s.xx() - r, n);
    split(s.yy_hi.data(), s.yy_lo.data(), s.yy() - r, n);
    split(s.xy_hi.data(), s.xy_lo.data(), s.xy() - r, n);
    std::uint32_t* m1 = s.hmu1.data();
    std::uint32_t* m2 = s.hmu2.data();
    std::uint32_t* ah = s.hxx_hi.data();
    std::uint32_t* bh = s.hyy_hi.data();
    std::uint32_t* ch = s.hxy_hi.data();
    std::uint32_t* al = s.hxx_lo.data();
    std::uint32_t* bl = s.hyy_lo.data();
    std::uint32_t* cl = s.hxy_lo.data();
    const std::uint32_t* const in[8] = {s.mu1() - r, s.mu2() - r, s.xx_hi.data(), s.yy_hi.data(), s.xy_hi.data(),
                                        s.xx_lo.data(), s.yy_lo.data(), s.xy_lo.data()};
    std::uint32_t* const out[8] = {m1, m2, ah, bh, ch, al, bl, cl};
    switch (nt) {
        case 17: horizontal<V, 17>(f, w, in, out); break;
        case 9: horizontal<V, 9>(f, w, in, out); break;
        case 5: horizontal<V, 5>(f, w, in, out); break;
        default: horizontal<V, 3>(f, w, in, out); break;
    }
    sigmas(s.s1.data(), s.s2.data(), s.s12.data(), m1, m2, ah, bh, ch, al, bl, cl, w);
    accumulate(s.s1.data(), s.s2.data(), s.s12.data(), s.log2, s.gain_limit, w, acc);
}

template <typename V, typename T, bool NARROW>
__attribute__((always_inline)) inline Sums scale_stats(Vif& s, const T* ref, std::ptrdiff_t rs, const T* dis,
                                                       std::ptrdiff_t ds, int w, int h, int scale) {
    int mu_shift = 16, sq_shift = 16;
    if (scale == 0) {
        mu_shift = s.bpc;
        sq_shift = 2 * (s.bpc - 8);
    }
    Sums acc;
    for (int i = 0; i < h; i++) {
        stat_vertical<V, T, NARROW>(s, ref, rs, dis, ds, w, h, i, scale, mu_shift, sq_shift);
        stat_horizontal<V>(s, w, scale, acc);
    }
    return acc;
}

// --- the next scale's picture ---------------------------------------------------------------------

// The pictures of `scale` (1..3) from those of scale - 1 (w x h): the taps of `scale`, the
// vertical pass shifted by `vshift` at even rows, the horizontal pass shifted by 16 at even columns.
// The decimation's vertical pass over whole blocks of lanes<V>() columns (w8 of them), the sums in
// registers, the two samples of a symmetric tap pair added first (each partial sum below the whole).
template <typename V, int NT>
inline void down_vertical(const std::uint16_t* const* xr, const std::uint16_t* const* yr, const std::uint16_t* f,
                          int w8, std::uint32_t* v1, std::uint32_t* v2) {
    constexpr int R = NT / 2;
    for (int j = 0; j < w8; j += lanes<V>()) {
        V a = f[R] * widen<V>(xr[R] + j), b = f[R] * widen<V>(yr[R] + j);
        for (int k = 0; k < R; k++) {
            const std::uint32_t t = f[k];
            a += t * (widen<V>(xr[k] + j) + widen<V>(xr[NT - 1 - k] + j));
            b += t * (widen<V>(yr[k] + j) + widen<V>(yr[NT - 1 - k] + j));
        }
        store(v1 + j, a);
        store(v2 + j, b);
    }
}

// The decimation's horizontal pass at even columns from the row's deinterleaved halves (ev[m] and
// od[m] the columns 2m - r and 2m + 1 - r): output j is sum_k f[k] * row[2j - r + k], tap k reading
// ev (even k) or od (odd k) at j + k / 2, contiguous loads for whole blocks of outputs.
template <typename V, int NT>
inline void down_horizontal(const std::uint32_t* ev1, const std::uint32_t* od1, const std::uint32_t* ev2,
                            const std::uint32_t* od2, const std::uint16_t* f, int w2, std::uint32_t* e1,
                            std::uint32_t* e2) {
    for (int j = 0; j < w2; j += lanes<V>()) {
        V a = {}, b = {};
        for (int k = 0; k < NT; k++) {
            const std::uint32_t t = f[k];
            a += t * load<V>((k & 1 ? od1 : ev1) + j + k / 2);
            b += t * load<V>((k & 1 ? od2 : ev2) + j + k / 2);
        }
        store(e1 + j, a);
        store(e2 + j, b);
    }
}

inline void deinterleave(const std::uint32_t* __restrict row, int n, std::uint32_t* __restrict ev,
                         std::uint32_t* __restrict od) {
    for (int m = 0; m < n; m++) {
        ev[m] = row[2 * m];
        od[m] = row[2 * m + 1];
    }
}

template <typename V, typename T>
__attribute__((always_inline)) inline void downsample(Vif& s, const T* ref, std::ptrdiff_t rs, const T* dis,
                                                      std::ptrdiff_t ds, int w, int h, int scale, int vshift) {
    const std::uint16_t* f = TAPS[scale];
    const int nt = WIDTH[scale], r = nt / 2;
    const int w2 = w / 2, h2 = h / 2;
    std::uint32_t* v1 = s.mu1();
    std::uint32_t* v2 = s.mu2();
    std::uint32_t* e1 = s.hmu1.data();
    std::uint32_t* e2 = s.hmu2.data();
    for (int i = 0; i < h2; i++) {
        const T* xr[9];
        const T* yr[9];
        for (int k = 0; k < nt; k++) {
            xr[k] = ref + mirror(2 * i - r + k, h) * rs;
            yr[k] = dis + mirror(2 * i - r + k, h) * ds;
        }
        const int w8 = w - w % lanes<V>();
        switch (nt) {
            case 9: down_vertical<V, 9>(xr, yr, f, w8, v1, v2); break;
            case 5: down_vertical<V, 5>(xr, yr, f, w8, v1, v2); break;
            default: down_vertical<V, 3>(xr, yr, f, w8, v1, v2); break;
        }
        std::fill(v1 + w8, v1 + w, 0u);
        std::fill(v2 + w8, v2 + w, 0u);
        for (int k = 0; k < nt; k++) dtap(v1 + w8, v2 + w8, xr[k] + w8, yr[k] + w8, f[k], w - w8);
        round_shift(v1, vshift, w);
        round_shift(v2, vshift, w);
        mirror_row(v1, w, r);
        mirror_row(v2, w, r);
        // the halves up to the last block's reads (w2 + r + lanes, inside the rows' slack)
        const int half = w2 + r + lanes<V>();
        std::uint32_t* ev1 = s.xx_hi.data();
        std::uint32_t* od1 = s.xx_lo.data();
        std::uint32_t* ev2 = s.yy_hi.data();
        std::uint32_t* od2 = s.yy_lo.data();
        deinterleave(v1 - r, half, ev1, od1);
        deinterleave(v2 - r, half, ev2, od2);
        switch (nt) {
            case 9: down_horizontal<V, 9>(ev1, od1, ev2, od2, f, w2, e1, e2); break;
            case 5: down_horizontal<V, 5>(ev1, od1, ev2, od2, f, w2, e1, e2); break;
            default: down_horizontal<V, 3>(ev1, od1, ev2, od2, f, w2, e1, e2); break;
        }
        store_even(s.ref[scale].data() + static_cast<std::ptrdiff_t>(i) * w2,
                   s.dis[scale].data() + static_cast<std::ptrdiff_t>(i) * w2, e1, e2, w2);
    }
}

// One frame from 16-bit luma planes; NARROW: they hold 8-bit samples.
template <typename V, bool NARROW>
__attribute__((always_inline)) inline void frame_planes(Vif& s, const std::uint16_t* ref, std::ptrdiff_t rs,
                                                        const std::uint16_t* dis, std::ptrdiff_t ds,
                                                        std::int64_t* out) {
    std::memset(out, 0, sizeof(std::int64_t) * SCALES * 4);
    int w = s.w, h = s.h;
    for (int scale = 0; scale < SCALES; scale++) {
        Sums acc;
        if (scale == 0) {
            if (!s.skip0) acc = scale_stats<V, std::uint16_t, NARROW>(s, ref, rs, dis, ds, w, h, 0);
            downsample<V, std::uint16_t>(s, ref, rs, dis, ds, w, h, 1, s.bpc);
        } else {
            const std::uint16_t* r = s.ref[scale].data();
            const std::uint16_t* d = s.dis[scale].data();
            acc = scale_stats<V, std::uint16_t, false>(s, r, w, d, w, w, h, scale);
            if (scale + 1 < SCALES) downsample<V, std::uint16_t>(s, r, w, d, w, w, h, scale + 1, 16);
        }
        if (scale > 0 || !s.skip0) {
            out[4 * scale + 0] = acc.num_log;
            out[4 * scale + 1] = acc.den_log;
            out[4 * scale + 2] = acc.num_non_log;
            out[4 * scale + 3] = acc.den_non_log;
        }
        if (scale + 1 < SCALES) {
            w /= 2;
            h /= 2;
        }
    }
}

// 8-bit samples are widened to 16 bits first, once a frame: the vector loops read 16-bit rows
// (a widening load from 8 bits is no single instruction without AVX2's intrinsics).
inline void widen_plane(const std::uint8_t* __restrict src, std::ptrdiff_t stride, int w, int h,
                        std::uint16_t* __restrict dst) {
    for (int i = 0; i < h; i++)
        for (int j = 0; j < w; j++) dst[static_cast<std::ptrdiff_t>(i) * w + j] = src[i * stride + j];
}

template <typename V, typename T>
__attribute__((always_inline)) inline void frame(Vif& s, const T* ref, std::ptrdiff_t rs, const T* dis,
                                                 std::ptrdiff_t ds, std::int64_t* out) {
    if constexpr (sizeof(T) == 1) {
        widen_plane(ref, rs, s.w, s.h, s.wide_ref.data());
        widen_plane(dis, ds, s.w, s.h, s.wide_dis.data());
        frame_planes<V, true>(s, s.wide_ref.data(), s.w, s.wide_dis.data(), s.w, out);
    } else {
        frame_planes<V, false>(s, ref, rs, dis, ds, out);
    }
}

// The frame in AVX-512 registers (16 lanes) or AVX2 ones (8) where the CPU has them, in pairs of
// SSE2 ones elsewhere (integers, and doubles without fused operations: the same values every way).
// tests/lanes/test_native_vif.py runs each the CPU has (vif_set_isa).
using namespace vx_isa;

#ifdef VX_X86
__attribute__((target("avx512f,avx512bw,avx512vl,avx2"), flatten)) void frame8_avx512(
    Vif& s, const std::uint8_t* r, std::ptrdiff_t rs, const std::uint8_t* d, std::ptrdiff_t ds, std::int64_t* o) {
    frame<u32x16>(s, r, rs, d, ds, o);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx2"), flatten)) void frame16_avx512(
    Vif& s, const std::uint16_t* r, std::ptrdiff_t rs, const std::uint16_t* d, std::ptrdiff_t ds, std::int64_t* o) {
    frame<u32x16>(s, r, rs, d, ds, o);
}
__attribute__((target("avx2"), flatten)) void frame8_avx2(Vif& s, const std::uint8_t* r, std::ptrdiff_t rs,
                                                          const std::uint8_t* d, std::ptrdiff_t ds, std::int64_t* o) {
    frame<u32x8>(s, r, rs, d, ds, o);
}
__attribute__((target("avx2"), flatten)) void frame16_avx2(Vif& s, const std::uint16_t* r, std::ptrdiff_t rs,
                                                           const std::uint16_t* d, std::ptrdiff_t ds, std::int64_t* o) {
    frame<u32x8>(s, r, rs, d, ds, o);
}
#endif
__attribute__((flatten)) void frame8(Vif& s, const std::uint8_t* r, std::ptrdiff_t rs, const std::uint8_t* d,
                                     std::ptrdiff_t ds, std::int64_t* o) {
    frame<u32x8>(s, r, rs, d, ds, o);
}
__attribute__((flatten)) void frame16(Vif& s, const std::uint16_t* r, std::ptrdiff_t rs, const std::uint16_t* d,
                                      std::ptrdiff_t ds, std::int64_t* o) {
    frame<u32x8>(s, r, rs, d, ds, o);
}

int isa = best();

template <typename T>
void dispatch(Vif& s, const T* r, std::ptrdiff_t rs, const T* d, std::ptrdiff_t ds, std::int64_t* o) {
#ifdef VX_X86
    if (isa == AVX512) {
        if constexpr (sizeof(T) == 1) frame8_avx512(s, r, rs, d, ds, o); else frame16_avx512(s, r, rs, d, ds, o);
        return;
    }
    if (isa == AVX2) {
        if constexpr (sizeof(T) == 1) frame8_avx2(s, r, rs, d, ds, o); else frame16_avx2(s, r, rs, d, ds, o);
        return;
    }
#endif
    if constexpr (sizeof(T) == 1) frame8(s, r, rs, d, ds, o); else frame16(s, r, rs, d, ds, o);
}

}  // namespace

extern "C" {

// A context for one extractor: the picture size (16 x 16 at least: every scale wider and taller than
// its filter's half width), the bit depth (8-16), the gain limit, whether scale 0 is skipped, and the
// twin's log2 table (65536 entries).
void* vif_new(int w, int h, int bpc, double gain_limit, int skip0, const std::uint16_t* log2_table) {
    if (w < 16 || h < 16 || bpc < 8 || bpc > 16) return nullptr;
    Vif* s = new (std::nothrow) Vif();
    if (!s) return nullptr;
    try {
        s->w = w;
        s->h = h;
        s->bpc = bpc;
        s->gain_limit = gain_limit;
        s->skip0 = skip0 != 0;
        std::memcpy(s->log2, log2_table, sizeof(s->log2));
        for (int scale = 1; scale < SCALES; scale++) {
            const std::size_t n = static_cast<std::size_t>(w >> scale) * (h >> scale);
            s->ref[scale].resize(n);
            s->dis[scale].resize(n);
        }
        for (auto* row : {&s->mu1, &s->mu2, &s->xx, &s->yy, &s->xy}) row->resize(w);
        for (auto* v : {&s->xx64, &s->yy64, &s->xy64}) v->resize(w);
        for (auto* v : {&s->hmu1, &s->hmu2, &s->hxx_hi, &s->hyy_hi, &s->hxy_hi, &s->hxx_lo, &s->hyy_lo, &s->hxy_lo,
                        &s->xx_hi, &s->yy_hi, &s->xy_hi, &s->xx_lo, &s->yy_lo, &s->xy_lo})
            v->resize(static_cast<std::size_t>(w) + 2 * MAX_HALF + SLACK);
        for (auto* v : {&s->s1, &s->s2, &s->s12}) v->resize(w);
    } catch (...) {
        delete s;
        return nullptr;
    }
    return s;
}

void vif_free(void* ctx) { delete static_cast<Vif*>(ctx); }

// One frame's luma pair (w x h samples of `bytes` bytes, strides in samples) -> int64[16]; returns
// 0, or -1 where the memory for widening 8-bit samples cannot be had.
int vif_frame(void* ctx, const void* ref, std::ptrdiff_t ref_stride, const void* dis, std::ptrdiff_t dis_stride,
              int bytes, std::int64_t* out) {
    Vif& s = *static_cast<Vif*>(ctx);
    if (bytes == 1) {
        if (s.wide_ref.empty()) {
            try {
                s.wide_ref.resize(static_cast<std::size_t>(s.w) * s.h);
                s.wide_dis.resize(static_cast<std::size_t>(s.w) * s.h);
            } catch (...) {
                s.wide_ref.clear();
                s.wide_dis.clear();
                return -1;
            }
        }
        dispatch(s, static_cast<const std::uint8_t*>(ref), ref_stride, static_cast<const std::uint8_t*>(dis),
                 dis_stride, out);
        return 0;
    }
    dispatch(s, static_cast<const std::uint16_t*>(ref), ref_stride, static_cast<const std::uint16_t*>(dis), dis_stride,
             out);
    return 0;
}

// For the tests: run the frames with this instruction set (0 baseline, 1 AVX2, 2 AVX-512), or the
// best the CPU has below it; returns the one now in use.
int vif_set_isa(int wanted) {
    isa = clamp(wanted);
    return isa;
}

}  // extern "C"
