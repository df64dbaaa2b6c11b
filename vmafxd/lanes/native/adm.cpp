// Integer ADM's 36 sums for one CPU thread: the twin of vmafxd.features.adm.compute_stats
// (the numpy twin in _adm_dwt.py / _adm_core.py documents every rule: C storage types and
// their wrap-arounds, arithmetic shifts, float-vs-double rounding, and where libvmaf's
// AVX-512 routines differ from its C leftovers).  This file only says how it maps them.
//
// Shape: per scale, one DWT level of ref and dist in row passes (per output row the
// vertical taps over whole input rows, then the horizontal taps along the row), then the
// statistics row by row over the scoring region: each band row of the region's ring is
// decoupled and CSF-weighted once (into one of three rolling row slots), and each region
// row is masked from the three slots of its neighbour rows.  libvmaf rounds and shifts the
// sum of each region row before adding rows, which the row order gives for free.
//
// Record (int64[36]): num[scale][band] at 0, den at 12, aim at 24 (band 0 h, 1 v, 2 d).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "isa.h"

typedef int16_t i16;
typedef int32_t i32;
typedef int64_t i64;
typedef uint32_t u32;
typedef uint64_t u64;

namespace {

const i32 LO[4] = {15826, 27411, 7345, -4240};
const i32 HI[4] = {-4240, -7345, 27411, -15826};
const i32 LO_SUM = 46342;

// Per-scale constants, packed by vmafxd/lanes/native/adm.py (_table) in this order.
enum {
    P_W, P_H, P_TOP, P_BOTTOM, P_LEFT, P_RIGHT,
    P_IRF, P_SUB = P_IRF + 3, P_SQ_ADD = P_SUB + 3, P_SQ_SHIFT = P_SQ_ADD + 3,
    P_CUB_ADD = P_SQ_SHIFT + 3, P_CUB_SHIFT = P_CUB_ADD + 3,
    P_ROW_ADD = P_CUB_SHIFT + 3, P_ROW_SHIFT, P_DEN_SQ_ADD, P_DEN_SQ_SHIFT, P_DEN_CUB_ADD, P_DEN_CUB_SHIFT,
    P_DEN_ROW_ADD, P_DEN_ROW_SHIFT, P_COUNT
};

// Q30 reciprocals floor(2^30 / i), libvmaf's division table (index 0 unused).
struct Recip {
    i32 v[32769];
    Recip() {
        v[0] = 0;
        for (int i = 1; i <= 32768; i++) v[i] = (i32)((1u << 30) / (u32)i);
    }
};
const Recip RECIP;

inline int tap(int e, int n) {  // the DWT's edges: -1 -> 1, n -> n - 1, n + 1 -> n - 2
    if (e < 0) return -e;
    if (e >= n) return 2 * n - e - 1;
    return e;
}

inline int neighbour(int e, int n) {  // masking's edges: -1 -> 1, n -> n - 1
    return e < 0 ? 1 : (e >= n ? n - 1 : e);
}

inline i32 abs32(i32 x) { return x < 0 ? (i32)(0u - (u32)x) : x; }  // INT_MIN stays INT_MIN
inline i64 low32(i64 x) { return (i64)(i32)(u32)(u64)x; }         // a store to int32

// ------------------------------------------------------------------------------------------
// DWT: one level of one plane.  Scales 1-3 here, from the previous LL band: 64-bit sums,
// each pass rounded, shifted and stored as int32 (wrapping, as C's stores).  Scale 0 from
// the luma: dwt0 below.
// ------------------------------------------------------------------------------------------

struct DwtRows {
    std::vector<i32> lo, hi;  // vertical sums of one output row, with the mirrored columns laid out in tap order
    std::vector<i32> vlo, vhi;
    std::vector<int> cmap;
};

template <typename In>
void dwt(const In* src, ptrdiff_t stride, int w, int h, int v_add, int v_shift, int h_add, int h_shift, i32* a,
         i32* hb, i32* v, i32* d, DwtRows& buf) {
    const int bw = (w + 1) / 2, bh = (h + 1) / 2;
    const int np = 2 * bw + 2;  // taps -1 .. 2 bw
    buf.lo.resize(np);
    buf.hi.resize(np);
    buf.vlo.resize(w);
    buf.vhi.resize(w);
    buf.cmap.resize(np);
    i32 *lo = buf.lo.data(), *hi = buf.hi.data(), *vlo = buf.vlo.data(), *vhi = buf.vhi.data();
    int* cmap = buf.cmap.data();
    for (int m = 0; m < np; m++) cmap[m] = tap(m - 1, w);  // input column of each tap position
    for (int i = 0; i < bh; i++) {
        const In* r0 = src + tap(2 * i - 1, h) * stride;
        const In* r1 = src + tap(2 * i, h) * stride;
        const In* r2 = src + tap(2 * i + 1, h) * stride;
        const In* r3 = src + tap(2 * i + 2, h) * stride;
        for (int c = 0; c < w; c++) {
            const i64 x0 = r0[c], x1 = r1[c], x2 = r2[c], x3 = r3[c];
            const i64 l = LO[0] * x0 + LO[1] * x1 + LO[2] * x2 + LO[3] * x3;
            const i64 g = HI[0] * x0 + HI[1] * x1 + HI[2] * x2 + HI[3] * x3;
            vlo[c] = (i32)((l + v_add) >> v_shift);
            vhi[c] = (i32)((g + v_add) >> v_shift);
        }
        for (int m = 0; m < np; m++) {
            lo[m] = vlo[cmap[m]];
            hi[m] = vhi[cmap[m]];
        }
        const ptrdiff_t row = (ptrdiff_t)i * bw;
        for (int j = 0; j < bw; j++) {
            const i32* l = lo + 2 * j;
            const i32* g = hi + 2 * j;
            const i64 sa = (i64)LO[0] * l[0] + (i64)LO[1] * l[1] + (i64)LO[2] * l[2] + (i64)LO[3] * l[3];
            const i64 sv = (i64)HI[0] * l[0] + (i64)HI[1] * l[1] + (i64)HI[2] * l[2] + (i64)HI[3] * l[3];
            const i64 sh = (i64)LO[0] * g[0] + (i64)LO[1] * g[1] + (i64)LO[2] * g[2] + (i64)LO[3] * g[3];
            const i64 sd = (i64)HI[0] * g[0] + (i64)HI[1] * g[1] + (i64)HI[2] * g[2] + (i64)HI[3] * g[3];
            a[row + j] = (i32)((sa + h_add) >> h_shift);
            v[row + j] = (i32)((sv + h_add) >> h_shift);
            hb[row + j] = (i32)((sh + h_add) >> h_shift);
            d[row + j] = (i32)((sd + h_add) >> h_shift);
        }
    }
}

// Scale 0, shaped for SSE2: the vertical pass's results fit int16 at every depth (the
// recentred sums lie within +-27411 * 2^bpc before the shift by bpc), so they are stored as
// int16, split by parity (even and odd taps, so that the horizontal taps are contiguous
// runs), and the horizontal pass multiplies int16 by int16 into int32 (at most
// 27411 * 54822 < 2^31 in magnitude: C's int32 sums cannot wrap there).  8-bit samples
// and the int16 coefficients multiply as int16 too; wider samples in uint32, wrapping as C.
struct Dwt0Rows {
    std::vector<i16> vlo, vhi, elo, olo, ehi, ohi;
};

// e[j] = v[tap(2j - 1)], o[j] = v[tap(2j)] for j <= bw: strided runs, the mirrored ends apart
inline void split_taps(const i16* v, int w, int bw, i16* e, i16* o) {
    e[0] = v[tap(-1, w)];
    const int ne = w / 2;  // e[1 .. ne] read v[1 .. 2 ne - 1] < w
    for (int j = 1; j <= ne; j++) e[j] = v[2 * j - 1];
    for (int j = ne + 1; j <= bw; j++) e[j] = v[tap(2 * j - 1, w)];
    for (int j = 0; j < bw; j++) o[j] = v[2 * j];  // 2 (bw - 1) < w
    o[bw] = v[tap(2 * bw, w)];
}

// out[j] = (C0 e[j] + C1 o[j] + C2 e[j + 1] + C3 o[j + 1] + 2^15) >> 16, stored int16
inline void horizontal0(const i16* e, const i16* o, const i32* cf, int n, i16* out) {
    const i32 c0 = cf[0], c1 = cf[1], c2 = cf[2], c3 = cf[3];
    for (int j = 0; j < n; j++) {
        const i32 s = c0 * e[j] + c1 * o[j] + c2 * e[j + 1] + c3 * o[j + 1];
        out[j] = (i16)((s + 32768) >> 16);
    }
}

template <typename In>
void dwt0(const In* src, ptrdiff_t stride, int w, int h, int bpc, bool lo_only, i16* a, i16* hb, i16* v, i16* d,
          Dwt0Rows& buf) {
    const int bw = (w + 1) / 2, bh = (h + 1) / 2;
    buf.vlo.resize(w);
    buf.vhi.resize(w);
    for (auto* x : {&buf.elo, &buf.olo, &buf.ehi, &buf.ohi}) x->resize(bw + 1);
    i16 *vlo = buf.vlo.data(), *vhi = buf.vhi.data();
    const i32 add = 1 << (bpc - 1);
    const i32 k_lo = (i32)((u32)add - (u32)LO_SUM * (u32)add), k_hi = add;
    for (int i = 0; i < bh; i++) {
        const In* r0 = src + tap(2 * i - 1, h) * stride;
        const In* r1 = src + tap(2 * i, h) * stride;
        const In* r2 = src + tap(2 * i + 1, h) * stride;
        const In* r3 = src + tap(2 * i + 2, h) * stride;
        if (sizeof(In) == 1) {
            for (int c = 0; c < w; c++) {
                const i16 x0 = r0[c], x1 = r1[c], x2 = r2[c], x3 = r3[c];
                const i32 l = (i32)(i16)LO[0] * x0 + (i32)(i16)LO[1] * x1 + (i32)(i16)LO[2] * x2 +
                              (i32)(i16)LO[3] * x3;
                const i32 g = (i32)(i16)HI[0] * x0 + (i32)(i16)HI[1] * x1 + (i32)(i16)HI[2] * x2 +
                              (i32)(i16)HI[3] * x3;
                vlo[c] = (i16)((l + k_lo) >> bpc);
                vhi[c] = (i16)((g + k_hi) >> bpc);
            }
        } else {
            for (int c = 0; c < w; c++) {
                const u32 x0 = r0[c], x1 = r1[c], x2 = r2[c], x3 = r3[c];
                const u32 l = (u32)LO[0] * x0 + (u32)LO[1] * x1 + (u32)LO[2] * x2 + (u32)LO[3] * x3;
                const u32 g = (u32)HI[0] * x0 + (u32)HI[1] * x1 + (u32)HI[2] * x2 + (u32)HI[3] * x3;
                vlo[c] = (i16)((i32)(l + (u32)k_lo) >> bpc);
                vhi[c] = (i16)((i32)(g + (u32)k_hi) >> bpc);
            }
        }
        const ptrdiff_t row = (ptrdiff_t)i * bw;
        split_taps(vlo, w, bw, buf.elo.data(), buf.olo.data());
        horizontal0(buf.elo.data(), buf.olo.data(), LO, bw, a + row);
        if (lo_only) continue;
        horizontal0(buf.elo.data(), buf.olo.data(), HI, bw, v + row);
        split_taps(vhi, w, bw, buf.ehi.data(), buf.ohi.data());
        horizontal0(buf.ehi.data(), buf.ohi.data(), LO, bw, hb + row);
        horizontal0(buf.ehi.data(), buf.ohi.data(), HI, bw, d + row);
    }
}

// ------------------------------------------------------------------------------------------
// Per-pixel stages (_adm_core.py)
// ------------------------------------------------------------------------------------------

// The 1-degree test at scale 0: int16 products summed modulo 2^32; C converts the exact sum
// (+2^31 only when every input is -32768), AVX-512 its int32 wrap; the right side is
// multiplied (cos^2 |u|^2) |v|^2 in C and (|u|^2 |v|^2) cos^2 in AVX-512.  (The divisions
// by 4096.0 are exact scalings: the twin leaves them out, libvmaf and this code do them;
// the outcome of the comparison is the same.)
inline bool angle_narrow(i32 oh, i32 ov, i32 th, i32 tv, bool vec, double cos2) {
    const u32 ot = (u32)(oh * th) + (u32)(ov * tv);
    const u32 om = (u32)(oh * oh) + (u32)(ov * ov);
    const u32 tm = (u32)(th * th) + (u32)(tv * tv);
    float fot, fom, ftm;
    if (vec) {
        fot = (float)(i32)ot;
        fom = (float)(i32)om;
        ftm = (float)(i32)tm;
    } else {
        fot = ot == 0x80000000u ? 2147483648.0f : (float)(i32)ot;
        fom = om == 0x80000000u ? 2147483648.0f : (float)(i32)om;
        ftm = tm == 0x80000000u ? 2147483648.0f : (float)(i32)tm;
    }
    const double dot = (double)fot / 4096.0, dom = (double)fom / 4096.0, dtm = (double)ftm / 4096.0;
    const double lhs = dot * dot;
    const bool within = vec ? lhs >= dom * dtm * cos2 : lhs >= cos2 * dom * dtm;
    return within && dot >= 0.0;
}

// Scales 1-3: 64-bit sums (wrapping as C's), no AVX-512 variant.
inline bool angle_wide(i32 oh, i32 ov, i32 th, i32 tv, double cos2) {
    const i64 ot = (i64)((u64)((i64)oh * th) + (u64)((i64)ov * tv));
    const i64 om = (i64)((u64)((i64)oh * oh) + (u64)((i64)ov * ov));
    const i64 tm = (i64)((u64)((i64)th * th) + (u64)((i64)tv * tv));
    const double dot = (double)(float)ot / 4096.0, dom = (double)(float)om / 4096.0,
                 dtm = (double)(float)tm / 4096.0;
    return dot * dot >= cos2 * dom * dtm && dot >= 0.0;
}

// Q15 gain clip(t / o, 0, 1) at scale 0: (recip[|o|] * sign(o) * t + 2^14) >> 15.
inline i32 gain_narrow(i32 o, i32 t) {
    if (o == 0) return 32768;
    i64 rc = RECIP.v[o < 0 ? -o : o];
    if (o < 0) rc = -rc;
    i64 k = (rc * t + 16384) >> 15;
    return (i32)(k < 0 ? 0 : (k > 32768 ? 32768 : k));
}

// Q15 gain at scales 1-3: |o| >= 2^15 is first rounded to its top 15 bits; the rounding
// term 1 << (14 + shift) is an int32 in libvmaf, -2^31 at shift 17.
inline i32 gain_wide(i32 o, i32 t) {
    if (o == 0) return 32768;
    const u32 ab = o < 0 ? 0u - (u32)o : (u32)o;
    i64 k;
    if (ab >= 32768u) {
        const int shift = 32 - __builtin_clz(ab) - 15;  // 1 .. 17
        const u32 msb = (u32)(((u64)ab + (1ull << (shift - 1))) >> shift);  // <= 2^15
        const i64 rnd = shift == 17 ? -2147483648ll : (1ll << (14 + shift));
        i64 num = (i64)RECIP.v[msb] * t;
        if (o < 0) num = -num;
        k = (num + rnd) >> (15 + shift);
    } else {
        i64 num = (i64)RECIP.v[ab] * t;
        if (o < 0) num = -num;
        k = (num + 16384) >> 15;
    }
    return (i32)(k < 0 ? 0 : (k > 32768 ? 32768 : k));
}

// r * egl: integral egl exactly; otherwise C truncates the double on the store and
// AVX-512 rounds it to nearest-even first.
inline i64 scaled(i64 rst, i64 egl_int, double egl, bool vec) {
    if (egl_int >= 0) return rst * egl_int;
    const double x = (double)rst * egl;
    return vec ? (i64)std::nearbyint(x) : (i64)x;
}

// CSF at scale 0 (Q21 / Q21 / Q23 weights; the diagonal rounds with 65535, libvmaf's constant).
const i32 CSF0_ADD[3] = {16384, 16384, 65535};
const int CSF0_SHIFT[3] = {15, 15, 17};

inline i32 csf_narrow32(i32 b, i32 rf, int theta) { return (b * rf + CSF0_ADD[theta]) >> CSF0_SHIFT[theta]; }

// the 1/30 magnitude at scale 0: of the int16 store in C, of the 32-bit value in AVX-512
inline i32 flt_narrow(i32 d32, bool vec) {
    const i32 d = (i16)d32;
    const i32 m = vec ? (d32 < 0 ? -d32 : d32) : (d < 0 ? -d : d);
    return (i16)((m * 4369 + 2048) >> 12);
}

// CSF at scales 1-3: Q32 weight (a uint32 AVX-512 multiplies as int32), rounded shift by 28.
inline i32 csf_wide(i32 b, i64 rf) { return (i32)(((i64)b * rf + (1ll << 27)) >> 28); }

// 1/30 magnitude at scales 1-3: the rounding constant (int32)(1u << 31) is -2^31.
inline i32 flt_wide(i32 d) { return (i32)(((i64)abs32(d) * 143165577ll - 2147483648ll) >> 32); }

inline i64 cube_narrow(i32 src, i32 irf, u32 thr, int sub, i64 sq_add, int sq_shift, i64 cub_add, int cub_shift) {
    const i32 x = src * irf;  // |int16 * uint16| < 2^31
    i32 xv = (i32)((u32)(x < 0 ? -x : x) - (thr << sub));  // int32 wrap, as C
    if (xv < 0) xv = 0;
    const i64 xsq = low32((i64)(((u64)(u32)xv * (u32)xv + (u64)sq_add) >> sq_shift));
    return (xsq * xv + cub_add) >> cub_shift;
}

// C: the weighted value and the threshold are int32 (wrapping); AVX-512: 64-bit, the
// weight as a signed int32.
inline i64 cube_wide(i32 src, i64 irf, i64 thr, bool vec, i64 sq_add, int sq_shift, i64 cub_add, int cub_shift) {
    i64 x;
    if (vec) {
        const i64 v = ((i64)src * (i64)(i32)(u32)irf + (1ll << 27)) >> 28;
        x = (v < 0 ? -v : v) - thr;
    } else {
        x = (i64)(i32)((u32)abs32(csf_wide(src, irf)) - (u32)(i32)thr);
    }
    if (x < 0) x = 0;
    x = low32(x);
    const i64 xsq = low32((x * x + sq_add) >> sq_shift);
    return (xsq * x + cub_add) >> cub_shift;
}

// ------------------------------------------------------------------------------------------
// Statistics of one scale
// ------------------------------------------------------------------------------------------

struct Masks {
    const uint8_t* vcol;  // per band column: AVX-512 decouple / CSF
    const uint8_t* gcol;  // per region column: AVX-512 masking ...
    const uint8_t* grow;  // ... and per region row (a pixel is vector when both are set)
};

// One decoupled band row of the ring: restored / additive parts and the per-pixel sums over
// bands of the 1/30 magnitudes of their CSF (fsA of csf(additive) masks num, fsR masks aim).
struct Slot {
    int row = -1;
    std::vector<i32> r[3], a[3];
    std::vector<i64> fsA, fsR;
};

struct Globals {
    i64 egl_int;
    double egl, cos2;
    bool skip_aim;
};

template <bool WIDE, typename B>
void decouple_row(const B* const o[3], const B* const t[3], int gy, int bw, const int* cols, int n,
                  const i64* p, const Masks& m, const Globals& g, Slot& s) {
    const ptrdiff_t off = (ptrdiff_t)gy * bw;
    for (int hx = 0; hx < n; hx++) {
        const int gx = cols[hx];
        const ptrdiff_t q = off + gx;
        i32 ov[3], tv[3];
        for (int b = 0; b < 3; b++) {
            ov[b] = o[b][q];
            tv[b] = t[b][q];
        }
        const bool vec = m.vcol[gx] != 0;
        const bool flag = WIDE ? angle_wide(ov[0], ov[1], tv[0], tv[1], g.cos2)
                               : angle_narrow(ov[0], ov[1], tv[0], tv[1], vec, g.cos2);
        i64 sa = 0, sr = 0;
        for (int b = 0; b < 3; b++) {
            const i32 oo = ov[b], tt = tv[b];
            i32 rr, aa;
            if (WIDE) {
                const i32 k = gain_wide(oo, tt);
                i64 rst = ((i64)k * oo + 16384) >> 15;
                if (flag && k > 0 && oo != 0) {
                    const i64 sc = scaled(rst, g.egl_int, g.egl, vec);
                    rst = oo > 0 ? (sc < tt ? sc : tt) : (sc > tt ? sc : tt);
                }
                rr = (i32)rst;
                aa = (i32)((i64)tt - rst);
                const i64 rf = vec ? (i64)(i32)(u32)p[P_IRF + b] : p[P_IRF + b];
                sa += flt_wide(csf_wide(aa, rf));
                if (!g.skip_aim) sr += flt_wide(csf_wide(rr, rf));
            } else {
                const i32 k = gain_narrow(oo, tt);
                i32 rst = (k * oo + 16384) >> 15;
                if (flag && k > 0 && oo != 0) {
                    const i32 sc = (i32)scaled(rst, g.egl_int, g.egl, vec);
                    rst = oo > 0 ? (sc < tt ? sc : tt) : (sc > tt ? sc : tt);
                }
                rr = (i16)rst;
                aa = (i16)(tt - rst);
                const i32 rf = (i32)p[P_IRF + b];
                sa += flt_narrow(csf_narrow32(aa, rf, b), vec);
                if (!g.skip_aim) sr += flt_narrow(csf_narrow32(rr, rf, b), vec);
            }
            s.r[b][hx] = rr;
            s.a[b][hx] = aa;
        }
        s.fsA[hx] = sa;
        s.fsR[hx] = sr;
    }
}

// num / aim / den sums (per band) of one scale into out[0..2], out[3..5], out[6..8].
template <bool WIDE, typename B>
void scale_stats(const B* const o[3], const B* const t[3], const i64* p, const Masks& m, const Globals& g,
                 i64 out[9]) {
    const int bw = (int)p[P_W], bh = (int)p[P_H];
    const int top = (int)p[P_TOP], bottom = (int)p[P_BOTTOM];
    const int left = (int)p[P_LEFT], right = (int)p[P_RIGHT];
    const int ncols = right - left, n = ncols + 2;
    std::vector<int> cols(n);
    for (int hx = 0; hx < n; hx++) cols[hx] = neighbour(left - 1 + hx, bw);
    Slot slots[3];
    for (Slot& s : slots) {
        for (int b = 0; b < 3; b++) {
            s.r[b].resize(n);
            s.a[b].resize(n);
        }
        s.fsA.resize(n);
        s.fsR.resize(n);
    }
    auto slot_of = [&](int gy) -> Slot& {
        Slot& s = slots[gy % 3];  // rows y - 1, y, y + 1 (mirrored) never share a slot
        if (s.row != gy) {
            decouple_row<WIDE, B>(o, t, gy, bw, cols.data(), n, p, m, g, s);
            s.row = gy;
        }
        return s;
    };
    i64 irf[3], sq_add[3], cub_add[3];
    int sub[3], sq_shift[3], cub_shift[3];
    for (int b = 0; b < 3; b++) {
        irf[b] = p[P_IRF + b];
        sub[b] = (int)p[P_SUB + b];
        sq_add[b] = p[P_SQ_ADD + b];
        sq_shift[b] = (int)p[P_SQ_SHIFT + b];
        cub_add[b] = p[P_CUB_ADD + b];
        cub_shift[b] = (int)p[P_CUB_SHIFT + b];
    }
    const u64 den_sq_add = (u64)p[P_DEN_SQ_ADD], den_cub_add = (u64)p[P_DEN_CUB_ADD];
    const int den_sq_shift = (int)p[P_DEN_SQ_SHIFT], den_cub_shift = (int)p[P_DEN_CUB_SHIFT];
    std::vector<i64> vsA(n), vsR(n);
    for (int q = 0; q < 9; q++) out[q] = 0;
    for (int y = top; y < bottom; y++) {
        const Slot& up = slot_of(neighbour(y - 1, bh));
        const Slot& dn = slot_of(neighbour(y + 1, bh));
        const Slot& c = slot_of(y);
        // vertical 3-sums of the neighbours' magnitudes (int32 modulo arithmetic at scale 0:
        // the order of additions does not matter)
        for (int hx = 0; hx < n; hx++) {
            vsA[hx] = up.fsA[hx] + c.fsA[hx] + dn.fsA[hx];
            vsR[hx] = up.fsR[hx] + c.fsR[hx] + dn.fsR[hx];
        }
        const bool vrow = m.grow[y - top] != 0;
        u64 acc[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
        const ptrdiff_t off = (ptrdiff_t)y * bw;
        for (int ix = 0; ix < ncols; ix++) {
            const int hx = ix + 1, x = left + ix;
            const bool vg = vrow && m.gcol[ix];
            const bool vr = m.vcol[x] != 0;
            i64 wa = vsA[hx - 1] + vsA[hx] + vsA[hx + 1] - c.fsA[hx];
            i64 wr = vsR[hx - 1] + vsR[hx] + vsR[hx + 1] - c.fsR[hx];
            if (WIDE) {
                for (int b = 0; b < 3; b++) {
                    const i64 rf = vr ? (i64)(i32)(u32)irf[b] : irf[b];
                    wa += ((i64)abs32(csf_wide(c.a[b][hx], rf)) * 286331153ll - 2147483648ll) >> 32;
                    if (!g.skip_aim) wr += ((i64)abs32(csf_wide(c.r[b][hx], rf)) * 286331153ll - 2147483648ll) >> 32;
                }
                for (int b = 0; b < 3; b++) {
                    acc[b] += (u64)cube_wide(c.r[b][hx], irf[b], wa, vg, sq_add[b], sq_shift[b], cub_add[b],
                                             cub_shift[b]);
                    if (!g.skip_aim)
                        acc[3 + b] += (u64)cube_wide(c.a[b][hx], irf[b], wr, vg, sq_add[b], sq_shift[b],
                                                     cub_add[b], cub_shift[b]);
                    const i32 ov = o[b][off + x];
                    const u64 av = (u64)(ov < 0 ? -(i64)ov : (i64)ov);
                    const u64 sq = (av * av + den_sq_add) >> den_sq_shift;
                    acc[6 + b] += (u64)((i64)(sq * av + den_cub_add) >> den_cub_shift);
                }
            } else {
                // C stores the centre's 1/15 term as int16 first; AVX-512 keeps 32 bits
                u32 na = (u32)wa, nr = (u32)wr;
                for (int b = 0; b < 3; b++) {
                    const i32 ca = (i16)csf_narrow32(c.a[b][hx], (i32)irf[b], b);
                    const i32 ta = ((ca < 0 ? -ca : ca) * 8738 + 2048) >> 12;
                    na += (u32)(vg ? ta : (i32)(i16)ta);
                    if (!g.skip_aim) {
                        const i32 cr = (i16)csf_narrow32(c.r[b][hx], (i32)irf[b], b);
                        const i32 tr = ((cr < 0 ? -cr : cr) * 8738 + 2048) >> 12;
                        nr += (u32)(vg ? tr : (i32)(i16)tr);
                    }
                }
                for (int b = 0; b < 3; b++) {
                    acc[b] += (u64)cube_narrow(c.r[b][hx], (i32)irf[b], na, sub[b], sq_add[b], sq_shift[b],
                                               cub_add[b], cub_shift[b]);
                    if (!g.skip_aim)
                        acc[3 + b] += (u64)cube_narrow(c.a[b][hx], (i32)irf[b], nr, sub[b], sq_add[b], sq_shift[b],
                                                       cub_add[b], cub_shift[b]);
                    const i32 ov = o[b][off + x];
                    const u32 av = (u32)(ov < 0 ? -ov : ov);  // <= 2^15
                    acc[6 + b] += (u64)(av * av) * av;
                }
            }
        }
        // libvmaf's per-row step: round and shift each row's sum before adding rows
        for (int q = 0; q < 9; q++) {
            const bool den = q >= 6;
            const i64 add = den ? p[P_DEN_ROW_ADD] : p[P_ROW_ADD];
            const int shift = (int)(den ? p[P_DEN_ROW_SHIFT] : p[P_ROW_SHIFT]);
            out[q] += (i64)(acc[q] + (u64)add) >> shift;
        }
    }
    if (g.skip_aim) out[3] = out[4] = out[5] = 0;
}

// The bands of one scale for ref and dist: a h v d each.
template <typename B>
struct Bands {
    std::vector<B> ref[4], dist[4];
    void size(size_t n) {
        for (int k = 0; k < 4; k++) {
            ref[k].resize(n);
            dist[k].resize(n);
        }
    }
};

struct Workspace {
    Bands<i16> s0;
    Bands<i32> s123[2];  // alternate: scale s reads scale s - 1's LL band
    DwtRows rows;
    Dwt0Rows rows0;
};

// (v_add, v_shift, h_add, h_shift) of scales 1..3, as _adm_dwt's _S123_* tables
const int S123_ROUNDING[3][4] = {{0, 0, 16384, 15}, {32768, 16, 32768, 16}, {32768, 16, 16384, 15}};

template <typename In>
void adm(Workspace& ws, const In* ref, ptrdiff_t ref_stride, const In* dist, ptrdiff_t dist_stride, int w, int h,
         int bpc, const i64* table, const uint8_t* const* masks, const Globals& g, bool skip0, i64* out) {
    for (int q = 0; q < 36; q++) out[q] = 0;
    int bw = (w + 1) / 2, bh = (h + 1) / 2;
    ws.s0.size((size_t)bw * bh);
    const int add = 1 << (bpc - 1);
    {
        Bands<i16>& b = ws.s0;
        dwt0<In>(ref, ref_stride, w, h, bpc, skip0, b.ref[0].data(), b.ref[1].data(), b.ref[2].data(),
                 b.ref[3].data(), ws.rows0);
        dwt0<In>(dist, dist_stride, w, h, bpc, skip0, b.dist[0].data(), b.dist[1].data(), b.dist[2].data(),
                 b.dist[3].data(), ws.rows0);
        if (!skip0) {
            const i16* o[3] = {b.ref[1].data(), b.ref[2].data(), b.ref[3].data()};
            const i16* t[3] = {b.dist[1].data(), b.dist[2].data(), b.dist[3].data()};
            Masks m = {masks[0], masks[1], masks[2]};
            i64 sums[9];
            scale_stats<false, i16>(o, t, table, m, g, sums);
            for (int k = 0; k < 3; k++) {
                out[k] = sums[k];
                out[24 + k] = sums[3 + k];
                out[12 + k] = sums[6 + k];
            }
        }
    }
    for (int s = 1; s < 4; s++) {
        const int pw = bw, ph = bh;
        bw = (pw + 1) / 2;
        bh = (ph + 1) / 2;
        Bands<i32>& b = ws.s123[(s - 1) % 2];
        b.size((size_t)bw * bh);
        const int* rd = S123_ROUNDING[s - 1];
        if (s == 1) {
            const i16* ra = ws.s0.ref[0].data();
            const i16* da = ws.s0.dist[0].data();
            dwt<i16>(ra, pw, pw, ph, rd[0], rd[1], rd[2], rd[3], b.ref[0].data(), b.ref[1].data(),
                     b.ref[2].data(), b.ref[3].data(), ws.rows);
            dwt<i16>(da, pw, pw, ph, rd[0], rd[1], rd[2], rd[3], b.dist[0].data(), b.dist[1].data(),
                     b.dist[2].data(), b.dist[3].data(), ws.rows);
        } else {
            const Bands<i32>& prev = ws.s123[s % 2];
            dwt<i32>(prev.ref[0].data(), pw, pw, ph, rd[0], rd[1], rd[2], rd[3], b.ref[0].data(),
                     b.ref[1].data(), b.ref[2].data(), b.ref[3].data(), ws.rows);
            dwt<i32>(prev.dist[0].data(), pw, pw, ph, rd[0], rd[1], rd[2], rd[3], b.dist[0].data(),
                     b.dist[1].data(), b.dist[2].data(), b.dist[3].data(), ws.rows);
        }
        const i32* o[3] = {b.ref[1].data(), b.ref[2].data(), b.ref[3].data()};
        const i32* t[3] = {b.dist[1].data(), b.dist[2].data(), b.dist[3].data()};
        Masks m = {masks[3 * s], masks[3 * s + 1], masks[3 * s + 2]};
        i64 sums[9];
        scale_stats<true, i32>(o, t, table + s * P_COUNT, m, g, sums);
        for (int k = 0; k < 3; k++) {
            out[3 * s + k] = sums[k];
            out[24 + 3 * s + k] = sums[3 + k];
            out[12 + 3 * s + k] = sums[6 + k];
        }
    }
}

// The frame in AVX-512 or AVX2 registers where the CPU has them, in SSE2 ones elsewhere: the same
// source compiled three times (flatten: every call inlined into the clone, so the compiler
// vectorises each loop for the clone's registers).  Integers, and doubles without fused
// operations (-ffp-contract=off; "avx2" does not enable FMA): the same values every way.
// tests/lanes/test_native_adm.py runs each the CPU has (vx_adm_set_isa).
using namespace vx_isa;

#define ADM_ARGS(In) Workspace& ws, const In* ref, ptrdiff_t rs, const In* dist, ptrdiff_t ds, int w, int h, int bpc, \
    const i64* table, const uint8_t* const* masks, const Globals& g, bool skip0, i64* out
#define ADM_CALL(In) adm<In>(ws, ref, rs, dist, ds, w, h, bpc, table, masks, g, skip0, out)

#ifdef VX_X86
__attribute__((target("avx512f,avx512bw,avx512vl,avx2"), flatten)) void adm8_avx512(ADM_ARGS(uint8_t)) {
    ADM_CALL(uint8_t);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx2"), flatten)) void adm16_avx512(ADM_ARGS(uint16_t)) {
    ADM_CALL(uint16_t);
}
__attribute__((target("avx2"), flatten)) void adm8_avx2(ADM_ARGS(uint8_t)) { ADM_CALL(uint8_t); }
__attribute__((target("avx2"), flatten)) void adm16_avx2(ADM_ARGS(uint16_t)) { ADM_CALL(uint16_t); }
#endif
__attribute__((flatten)) void adm8(ADM_ARGS(uint8_t)) { ADM_CALL(uint8_t); }
__attribute__((flatten)) void adm16(ADM_ARGS(uint16_t)) { ADM_CALL(uint16_t); }

int isa = best();

// the frame on the instruction set in use: a pointer to the clone, chosen by sample size
template <typename In>
void dispatch(ADM_ARGS(In)) {
    typedef void (*Frame)(ADM_ARGS(In));
    Frame f;
    if constexpr (sizeof(In) == 1) f = adm8; else f = adm16;
#ifdef VX_X86
    if constexpr (sizeof(In) == 1) {
        if (isa == AVX512) f = adm8_avx512; else if (isa == AVX2) f = adm8_avx2;
    } else {
        if (isa == AVX512) f = adm16_avx512; else if (isa == AVX2) f = adm16_avx2;
    }
#endif
    f(ws, ref, rs, dist, ds, w, h, bpc, table, masks, g, skip0, out);
}

}  // namespace

extern "C" {

int vx_adm_param_count(void) { return P_COUNT; }

void* vx_adm_new(void) { return new Workspace(); }

void vx_adm_free(void* ws) { delete static_cast<Workspace*>(ws); }

// The 36 sums of one pair of luma planes (strides in samples; bytes_per_sample 1 or 2).
// table: int64[4][P_COUNT]; masks: 12 pointers, per scale (vcol, gcol, grow).
void vx_adm_stats(void* ws, const void* ref, ptrdiff_t ref_stride, const void* dist, ptrdiff_t dist_stride, int w,
                  int h, int bpc, int bytes_per_sample, const i64* table, const uint8_t* const* masks, i64 egl_int,
                  double egl, double cos2, int skip0, int skip_aim, i64* out) {
    Globals g = {egl_int, egl, cos2, skip_aim != 0};
    Workspace& W = *static_cast<Workspace*>(ws);
    if (bytes_per_sample == 1)
        dispatch<uint8_t>(W, static_cast<const uint8_t*>(ref), ref_stride, static_cast<const uint8_t*>(dist),
                          dist_stride, w, h, bpc, table, masks, g, skip0 != 0, out);
    else
        dispatch<uint16_t>(W, static_cast<const uint16_t*>(ref), ref_stride, static_cast<const uint16_t*>(dist),
                           dist_stride, w, h, bpc, table, masks, g, skip0 != 0, out);
}

// For the tests: run the frames with this instruction set (0 baseline, 1 AVX2, 2 AVX-512), or the
// best the CPU has below it; returns the one now in use.
int vx_adm_set_isa(int wanted) {
    isa = clamp(wanted);
    return isa;
}

}  // extern "C"
