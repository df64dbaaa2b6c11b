// CAMBI for one CPU thread: the per-picture integer work of the numpy twin
// (vmafxd/features/_cambi_core.py), shaped like libvmaf's cambi.c.
//
// For one luma plane: resampling to the encode size, 10-bit conversion and
// anti-dithering, the spatial mask, then per scale the decimation, the 3x3
// mode filter, the c-values from a sliding window histogram, and the exact
// integer sum of the top-k c-values (each times 2^24).  Python turns the five
// sums into the score with the twin's own float arithmetic (pooled_mean,
// weight_scales), so the score is the twin's bit for bit.
//
// The window histogram is libvmaf's: one histogram per column, hist[v][c] the
// count of counted pixels of value v in the window around column c of the
// current row (clipped to the picture), slid down by adding the row that
// enters and removing the one that leaves.  A row is added run by run: a run
// of equal values j0..j1 adds to column c the number of its pixels within the
// window's half-width of c, so a flat run costs its length plus the window
// instead of its length times the window.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace {

constexpr int kScales = 5;
constexpr int kMaskPad = 3;  // the 7x7 window of the spatial mask
// The largest sample after preprocessing: 10 bits, but above 10 bits the conversion
// rounds, and the top samples ((1 << bd) - 1 + rounding) >> (bd - 10) become 1024.
constexpr int kMaxValue = 1024;

struct Tables {
    int num_diffs;
    const int32_t* tvi_for_diff;  // [num_diffs]: the highest v + num_diffs at which step d + 1 is taken
    const int32_t* weights;       // [num_diffs]
    int vlt_luma;
    int band_lo, band_hi;         // counted values: band_lo <= v < band_hi
    const float* lut;             // libvmaf's reciprocal table
};

struct Context {
    std::vector<uint16_t> img, tmp, hz;
    std::vector<uint8_t> mask, mask_tmp, flat;
    std::vector<uint16_t> col_sums;
    std::vector<uint16_t> hist;
    std::vector<float> nonzero;
};

// ---------------------------------------------------------------------------
// preprocessing
// ---------------------------------------------------------------------------

template <typename T>
void to_10_bits(const T* luma, ptrdiff_t stride, int bitdepth, int out_w, int out_h, const int32_t* ys,
                const int32_t* xs, uint16_t* out) {
    for (int r = 0; r < out_h; r++) {
        const T* src = luma + (ys ? ys[r] : r) * stride;
        uint16_t* dst = out + static_cast<ptrdiff_t>(r) * out_w;
        if (bitdepth <= 10) {
            const int shift = 10 - bitdepth;
            if (xs)
                for (int c = 0; c < out_w; c++) dst[c] = static_cast<uint16_t>(src[xs[c]] << shift);
            else
                for (int c = 0; c < out_w; c++) dst[c] = static_cast<uint16_t>(src[c] << shift);
        } else {
            const int shift = bitdepth - 10;
            const int32_t rounding = 1 << (shift - 1);
            if (xs)
                for (int c = 0; c < out_w; c++)
                    dst[c] = static_cast<uint16_t>((int32_t(src[xs[c]]) + rounding) >> shift);
            else
                for (int c = 0; c < out_w; c++)
                    dst[c] = static_cast<uint16_t>((int32_t(src[c]) + rounding) >> shift);
        }
    }
}

// The 2x2 average below 10-bit encodes; in place, row by row: each output reads
// only samples to its right and below, not yet overwritten.
void anti_dither(uint16_t* d, int w, int h) {
    for (int r = 0; r + 1 < h; r++) {
        uint16_t* a = d + static_cast<ptrdiff_t>(r) * w;
        const uint16_t* b = a + w;
        for (int c = 0; c + 1 < w; c++) a[c] = static_cast<uint16_t>((a[c] + a[c + 1] + b[c] + b[c + 1]) >> 2);
        a[w - 1] = static_cast<uint16_t>((a[w - 1] + b[w - 1]) >> 1);
    }
    uint16_t* last = d + static_cast<ptrdiff_t>(h - 1) * w;
    for (int c = 0; c + 1 < w; c++) last[c] = static_cast<uint16_t>((last[c] + last[c + 1]) >> 1);
}

// ---------------------------------------------------------------------------
// the spatial mask: more than mask_index flat pixels in the clipped 7x7 window
// ---------------------------------------------------------------------------

void spatial_mask(Context& cx, const uint16_t* img, int w, int h, int mask_index, uint8_t* mask) {
    cx.flat.resize(static_cast<size_t>(w) * h);
    uint8_t* flat = cx.flat.data();
    for (int r = 0; r < h; r++) {
        const uint16_t* a = img + static_cast<ptrdiff_t>(r) * w;
        const uint16_t* below = r + 1 < h ? a + w : a;  // the last row compares with itself: equal
        uint8_t* f = flat + static_cast<ptrdiff_t>(r) * w;
        for (int c = 0; c + 1 < w; c++) f[c] = (a[c] == a[c + 1]) & (a[c] == below[c]);
        f[w - 1] = a[w - 1] == below[w - 1];
    }
    // column sums over rows r - 3 .. r + 3 (clipped), slid down; then along each row
    cx.col_sums.assign(static_cast<size_t>(w) + 2 * kMaskPad, 0);
    uint16_t* cs = cx.col_sums.data() + kMaskPad;  // zero padding either side
    for (int r = 0; r < kMaskPad && r < h; r++) {
        const uint8_t* f = flat + static_cast<ptrdiff_t>(r) * w;
        for (int c = 0; c < w; c++) cs[c] += f[c];
    }
    for (int r = 0; r < h; r++) {
        if (r + kMaskPad < h) {
            const uint8_t* f = flat + static_cast<ptrdiff_t>(r + kMaskPad) * w;
            for (int c = 0; c < w; c++) cs[c] += f[c];
        }
        if (r - kMaskPad - 1 >= 0) {
            const uint8_t* f = flat + static_cast<ptrdiff_t>(r - kMaskPad - 1) * w;
            for (int c = 0; c < w; c++) cs[c] -= f[c];
        }
        uint8_t* m = mask + static_cast<ptrdiff_t>(r) * w;
        const uint16_t* p = cs - kMaskPad;
        for (int c = 0; c < w; c++) {
            int sum = 0;
            for (int k = 0; k <= 2 * kMaskPad; k++) sum += p[c + k];
            m[c] = sum > mask_index;
        }
    }
}

// ---------------------------------------------------------------------------
// decimation and the mode filter
// ---------------------------------------------------------------------------

template <typename T>
void decimate(const T* in, int w, T* out, int ow, int oh) {
    for (int r = 0; r < oh; r++) {
        const T* a = in + static_cast<ptrdiff_t>(2 * r) * w;
        T* o = out + static_cast<ptrdiff_t>(r) * ow;
        for (int c = 0; c < ow; c++) o[c] = a[2 * c];
    }
}

// The value two of three share, else the smallest: with lo <= mid <= hi sorted,
// hi when mid == hi, else lo (as the twin's _mode3; branch-free so it vectorises).
inline uint16_t mode3(uint16_t a, uint16_t b, uint16_t c) {
    uint16_t mn = std::min(a, b), mx = std::max(a, b);
    uint16_t lo = std::min(mn, c), hi = std::max(mx, c);
    uint16_t mid = std::max(mn, std::min(mx, c));
    return mid == hi ? hi : lo;
}

// cambi.c filter_mode: a horizontal mode of 3 (end columns kept), then a vertical
// mode of 3 of those rows; the first and last rows keep their samples.  In place.
void mode_filter(Context& cx, uint16_t* img, int w, int h) {
    if (h < 3) return;  // no row has both neighbours (and the end rows are kept)
    cx.hz.resize(static_cast<size_t>(w) * h);
    uint16_t* hz = cx.hz.data();
    for (int r = 0; r < h; r++) {
        const uint16_t* a = img + static_cast<ptrdiff_t>(r) * w;
        uint16_t* o = hz + static_cast<ptrdiff_t>(r) * w;
        o[0] = a[0];
        for (int c = 1; c + 1 < w; c++) o[c] = mode3(a[c - 1], a[c], a[c + 1]);
        o[w - 1] = a[w - 1];
    }
    for (int r = 1; r + 1 < h; r++) {
        const uint16_t* up = hz + static_cast<ptrdiff_t>(r - 1) * w;
        uint16_t* o = img + static_cast<ptrdiff_t>(r) * w;
        for (int c = 0; c < w; c++) o[c] = mode3(up[c], up[c + w], up[c + 2 * w]);
    }
}

// ---------------------------------------------------------------------------
// c-values and their pooling
// ---------------------------------------------------------------------------

// hist row of value v: hist + (v - vlo) * w; rows vlo .. vlo + nrows - 1 cover every
// counted value +- num_diffs.  Adds (sign 1) or removes (sign -1) one picture row.  The
// counts are 16-bit, as libvmaf's: a window holds at most 65 x 65 pixels (init checks
// it), and a removal is an addition modulo 2^16 of a count that was added before.
void slide_row(uint16_t* hist, int vlo, const uint16_t* img, const uint8_t* counted, int w, int pad, int sign) {
    int j = 0;
    while (j < w) {
        if (!counted[j]) {
            j++;
            continue;
        }
        const uint16_t v = img[j];
        int j1 = j;
        while (j1 + 1 < w && counted[j1 + 1] && img[j1 + 1] == v) j1++;
        uint16_t* row = hist + static_cast<ptrdiff_t>(v - vlo) * w;
        const int c0 = std::max(0, j - pad), c1 = std::min(w - 1, j1 + pad);
        if (j1 == j) {
            const uint16_t s = static_cast<uint16_t>(sign);
            for (int c = c0; c <= c1; c++) row[c] = static_cast<uint16_t>(row[c] + s);
        } else {
            // column c sees the run's pixels max(j, c - pad) .. min(j1, c + pad)
            for (int c = c0; c <= c1; c++) {
                const int n = std::min(j1, c + pad) - std::max(j, c - pad) + 1;
                row[c] = static_cast<uint16_t>(row[c] + sign * n);
            }
        }
        j = j1 + 1;
    }
}

// The non-zero c-values of one scale, into cx.nonzero[0 .. count - 1]; returns count.
// With `heat`, every pixel's c-value (0 where none is computed) also goes there.
size_t c_values(Context& cx, const uint16_t* img, const uint8_t* mask, int w, int h, int window, const Tables& t,
                float* heat) {
    const int nd = t.num_diffs;
    const int pad = window >> 1;
    const size_t n = static_cast<size_t>(w) * h;
    // counted: masked and in the band (one unsigned compare: below the band wraps above
    // it); the range of the counted values, without branches.
    std::vector<uint8_t>& counted = cx.mask_tmp;
    counted.resize(n);
    uint8_t* cnt = counted.data();
    const uint16_t band_lo = static_cast<uint16_t>(t.band_lo);
    const uint16_t band_size = static_cast<uint16_t>(t.band_hi - t.band_lo);
    int16_t vmin = kMaxValue + 1, vmax = -1;
    for (size_t i = 0; i < n; i++) {
        const uint16_t v = img[i];
        const uint8_t in = (mask[i] != 0) & (static_cast<uint16_t>(v - band_lo) < band_size);
        cnt[i] = in;
        vmin = std::min<int16_t>(vmin, in ? static_cast<int16_t>(v) : int16_t(kMaxValue + 1));
        vmax = std::max<int16_t>(vmax, in ? static_cast<int16_t>(v) : int16_t(-1));
    }
    if (heat) std::fill(heat, heat + n, 0.0f);
    if (vmax < 0) return 0;
    // the contrast steps d each value takes (bit d): v + nd <= tvi_for_diff[d] and
    // v + nd + d + 1 > vlt_luma, cambi.c's test; a value that takes none has c-value 0
    uint32_t steps[kMaxValue + 1];
    for (int v = 0; v <= kMaxValue; v++) {
        steps[v] = 0;
        for (int d = 0; d < nd; d++)
            if (v + nd <= t.tvi_for_diff[d] && v + nd + d + 1 > t.vlt_luma) steps[v] |= 1u << d;
    }
    const int vlo = vmin - nd;
    const size_t nrows = static_cast<size_t>(vmax - vmin + 2 * nd + 1);
    cx.hist.assign(nrows * w, 0);
    uint16_t* hist = cx.hist.data();
    if (cx.nonzero.size() < n) cx.nonzero.resize(n);
    float* out = cx.nonzero.data();
    size_t count = 0;
    const int32_t* weights = t.weights;
    const float* lut = t.lut;
    auto row_of = [&](int r) { return static_cast<ptrdiff_t>(r) * w; };
    for (int r = 0; r < pad && r < h; r++) slide_row(hist, vlo, img + row_of(r), cnt + row_of(r), w, pad, 1);
    for (int i = 0; i < h; i++) {
        if (i + pad < h) slide_row(hist, vlo, img + row_of(i + pad), cnt + row_of(i + pad), w, pad, 1);
        if (i - pad - 1 >= 0) slide_row(hist, vlo, img + row_of(i - pad - 1), cnt + row_of(i - pad - 1), w, pad, -1);
        const uint16_t* a = img + row_of(i);
        const uint8_t* m = cnt + row_of(i);
        for (int c = 0; c < w; c++) {
            uint32_t bits = m[c] ? steps[a[c]] : 0;
            if (!bits) continue;
            const uint16_t* at = hist + static_cast<ptrdiff_t>(a[c] - vlo) * w + c;
            const int p0 = at[0];
            float best = 0.0f;
            do {
                const int d = __builtin_ctz(bits);
                bits &= bits - 1;
                const int up = at[static_cast<ptrdiff_t>(d + 1) * w];
                const int down = at[-static_cast<ptrdiff_t>(d + 1) * w];
                const int pm = up > down ? up : down;
                // (float)(weight * p0 * pmax) * reciprocal[p0 + pmax]: libvmaf's float operations
                const float val = static_cast<float>(weights[d] * p0 * pm) * lut[pm + p0];
                if (val > best) best = val;
            } while (bits);
            out[count] = best;
            count += best > 0.0f;
            if (heat) heat[row_of(i) + c] = best;
        }
    }
    return count;
}

// The exact sum of the top k c-values times 2^24.  Each non-zero c-value is at
// least 0.5, so a whole multiple of 2^-24: the products are integers.  The zeros
// add nothing, so the top k are the non-zero ones when there are at most k.
int64_t pooled_total(float* nz, size_t count, int64_t k) {
    float* first = nz;
    float* last = nz + count;
    if (static_cast<int64_t>(count) > k) {
        first = last - k;
        std::nth_element(nz, first, last);
    }
    int64_t total = 0;
    for (const float* it = first; it != last; ++it)
        total += static_cast<int64_t>(static_cast<double>(*it) * 16777216.0);
    return total;
}

}  // namespace

extern "C" {

void* cambi_context_new() { return new (std::nothrow) Context(); }

void cambi_context_free(void* cx) { delete static_cast<Context*>(cx); }

// The top-k sums (times 2^24) of the five scales of one luma plane.
//   luma: in_w x in_h samples (bytes 1 or 2), rows `stride` samples apart, of `bitdepth` bits
//   ys, xs: the nearest-neighbour source rows / columns of the out_w x out_h encode size (null
//           when the sizes are equal)
//   topk_counts[scale]: how many c-values the pooling takes at each scale
//   heatmaps: null, or room for every scale's c-values, one scale after the other
// Returns 0, or -1 when memory runs out.
int cambi_plane(void* cxp, const void* luma, int bytes, ptrdiff_t stride, int bitdepth, int out_w, int out_h,
                const int32_t* ys, const int32_t* xs, int enc_bitdepth, int mask_index, int window,
                int high_res_speedup, int num_diffs, const int32_t* tvi_for_diff, const int32_t* weights,
                int vlt_luma, int band_lo, int band_hi, const float* lut, const int64_t* topk_counts,
                int64_t* totals, float* heatmaps) {
    Context& cx = *static_cast<Context*>(cxp);
    try {
        const Tables t{num_diffs, tvi_for_diff, weights, vlt_luma, band_lo, std::min(band_hi, kMaxValue + 1), lut};
        int w = out_w, h = out_h;
        const size_t n = static_cast<size_t>(w) * h;
        cx.img.resize(n);
        cx.mask.resize(n);
        if (bytes == 1)
            to_10_bits(static_cast<const uint8_t*>(luma), stride, bitdepth, w, h, ys, xs, cx.img.data());
        else
            to_10_bits(static_cast<const uint16_t*>(luma), stride, bitdepth, w, h, ys, xs, cx.img.data());
        if (enc_bitdepth < 10) anti_dither(cx.img.data(), w, h);
        spatial_mask(cx, cx.img.data(), w, h, mask_index, cx.mask.data());
        std::vector<uint8_t> mask_half;
        for (int scale = 0; scale < kScales; scale++) {
            if (scale > 0 || high_res_speedup) {
                const int ow = (w + 1) >> 1, oh = (h + 1) >> 1;
                cx.tmp.resize(static_cast<size_t>(ow) * oh);
                decimate(cx.img.data(), w, cx.tmp.data(), ow, oh);
                cx.img.swap(cx.tmp);
                mask_half.resize(static_cast<size_t>(ow) * oh);
                decimate(cx.mask.data(), w, mask_half.data(), ow, oh);
                cx.mask.swap(mask_half);
                w = ow;
                h = oh;
            }
            mode_filter(cx, cx.img.data(), w, h);
            const size_t count = c_values(cx, cx.img.data(), cx.mask.data(), w, h, window, t, heatmaps);
            if (heatmaps) heatmaps += static_cast<size_t>(w) * h;
            totals[scale] = pooled_total(cx.nonzero.data(), count, topk_counts[scale]);
        }
    } catch (const std::bad_alloc&) {
        return -1;
    }
    return 0;
}

}  // extern "C"
