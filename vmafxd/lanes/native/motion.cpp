// Integer motion's SAD for one CPU thread: the sum over a frame of |blur(prev - cur)|,
// libvmaf 3.2's integer_motion arithmetic (vmafxd/features/motion.py is the reference).
//
// One output row at a time: the vertical 5-tap pass on the difference of the two
// frames' rows (mirrored at the top and bottom), rounded half up and shifted by the
// bit depth into a row buffer with two mirrored columns at each end; then the
// horizontal pass, rounded half up and shifted by 16, whose absolute values are summed.
//
// Types, chosen so that the compiler vectorises with 16-bit products (SSE2 has no 32-bit
// multiply): up to 15 bits the differences are int16 and the vertical sum
// |sum taps * diff| <= 65536 * (2^bpc - 1) fits int32 (16-bit samples: int32 differences,
// int64 sums).  The shifted row values (|y| <= 2^16 + 1) are kept split in two int16 halves,
// and the horizontal sum, which reaches 2^33, is put together exactly from the halves'
// int32 sums (horizontal_sad).  The sum over a frame is the same in any order (integers),
// so rows add up as they come.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

constexpr int32_t OUTER = 3571, INNER = 16004, CENTRE = 26386;  // the taps sum to 65536

inline int mirror(int i, int n) {
    // libvmaf mirrors without repeating the edge sample: -1 -> 1, n -> n - 2
    if (i < 0) return -i;
    if (i >= n) return 2 * n - i - 2;
    return i;
}

// The horizontal pass in 16-bit products.  The row's values y (|y| <= 2^16 + 1) are split
// as y = 256 yh + yl (yh = y >> 8, yl = y & 255, both int16), so the five-tap sum
// S = 256 A + B with A = sum taps * yh and B = sum taps * yl: each an int16 tap times an
// int16 value summed in int32 (|A|, |B| < 2^25), which the compiler vectorises as
// widening multiplies.  With A = 256 qa + ra (qa = A >> 8, 0 <= ra < 256),
// (S + 2^15) >> 16 = qa + ((256 ra + B + 2^15) >> 16), every term within int32.
//
// sum over j < w of |(5 taps of y[j .. j + 4] + 2^15) >> 16|; yh / yl hold the row with its
// two mirrored columns at each end.  Chunks of 2^15 columns sum in uint32 (|value| <= 2^16 + 1,
// so a chunk cannot wrap), then in int64: the exact sum at any width.
int64_t horizontal_sad(const int16_t* __restrict__ yh, const int16_t* __restrict__ yl, int w) {
    const int16_t o = OUTER, in = INNER, c = CENTRE;
    int64_t total = 0;
    for (int j0 = 0; j0 < w; j0 += 1 << 15) {
        const int j1 = w - j0 < (1 << 15) ? w : j0 + (1 << 15);
        uint32_t part = 0;
        for (int j = j0; j < j1; j++) {
            // the symmetric taps paired first: the pair sums stay within int16 (|yh| <= 257)
            const int16_t ho = yh[j] + yh[j + 4], hi = yh[j + 1] + yh[j + 3];
            const int16_t lo = yl[j] + yl[j + 4], li = yl[j + 1] + yl[j + 3];
            const int32_t a = (int32_t)ho * o + (int32_t)hi * in + (int32_t)yh[j + 2] * c;
            const int32_t b = (int32_t)lo * o + (int32_t)li * in + (int32_t)yl[j + 2] * c;
            const int32_t v = (a >> 8) + ((((a & 255) << 8) + b + (1 << 15)) >> 16);
            part += static_cast<uint32_t>(v < 0 ? -v : v);
        }
        total += part;
    }
    return total;
}

// Vertical 5-tap sums of one output row from the five source rows' differences (tap order),
// rounded half up, shifted by the bit depth and split into yh / yl (from column 2 on: the
// two mirrored columns at each end are filled after).  Diff: int16 up to 15 bits (the
// products are int16 x int16, |sum| <= 65536 (2^15 - 1) + 2^14 < 2^31), int64 at 16 bits.
template <typename Diff, typename Acc>
void vertical(const Diff* __restrict__ d0, const Diff* __restrict__ d1, const Diff* __restrict__ d2,
              const Diff* __restrict__ d3, const Diff* __restrict__ d4, int w, int bpc,
              int16_t* __restrict__ yh, int16_t* __restrict__ yl) {
    const Acc y_round = Acc(1) << (bpc - 1);
    const Diff o = OUTER, in = INNER, c = CENTRE;
    for (int j = 0; j < w; j++) {
        const Acc acc = (Acc)d0[j] * o + (Acc)d1[j] * in + (Acc)d2[j] * c + (Acc)d3[j] * in + (Acc)d4[j] * o;
        const int32_t y = static_cast<int32_t>((acc + y_round) >> bpc);
        yh[j] = static_cast<int16_t>(y >> 8);
        yl[j] = static_cast<int16_t>(y & 255);
    }
}

template <typename Sample, typename Diff, typename Acc>
int64_t sad(const Sample* prev, ptrdiff_t prev_stride, const Sample* cur, ptrdiff_t cur_stride,
            int w, int h, int bpc) {
    std::vector<Diff> diff(5 * static_cast<size_t>(w));
    std::vector<int16_t> rh(static_cast<size_t>(w) + 4), rl(static_cast<size_t>(w) + 4);
    int tag[5] = {-1, -1, -1, -1, -1};  // the source row each ring slot holds
    int64_t total = 0;
    for (int i = 0; i < h; i++) {
        // the five source rows' differences in tap order: each source row is differenced
        // once, into the ring slot of its index (the mirrored rows are rows already there)
        const Diff* d[5];
        for (int k = 0; k < 5; k++) {
            const int r = mirror(i - 2 + k, h);
            Diff* slot = diff.data() + static_cast<size_t>(r % 5) * w;
            if (tag[r % 5] != r) {
                tag[r % 5] = r;
                const Sample* p = prev + r * prev_stride;
                const Sample* c = cur + r * cur_stride;
                for (int j = 0; j < w; j++) slot[j] = Diff(p[j]) - Diff(c[j]);
            }
            d[k] = slot;
        }
        int16_t* yh = rh.data() + 2;
        int16_t* yl = rl.data() + 2;
        vertical<Diff, Acc>(d[0], d[1], d[2], d[3], d[4], w, bpc, yh, yl);
        for (int16_t* y : {yh, yl}) {  // libvmaf's mirror of the columns
            y[-1] = y[1];
            y[-2] = y[2];
            y[w] = y[w - 2];
            y[w + 1] = y[w - 3];
        }
        total += horizontal_sad(rh.data(), rl.data(), w);
    }
    return total;
}

}  // namespace

extern "C" {

// The SAD of two luma planes (strides in samples); bytes_per_sample 1 (uint8) or 2 (uint16).
// The caller checks w, h >= 3 (the mirror of a 5-tap window needs 3 samples per axis).
int64_t vx_motion_sad(const void* prev, ptrdiff_t prev_stride, const void* cur, ptrdiff_t cur_stride,
                      int w, int h, int bpc, int bytes_per_sample) {
    if (bytes_per_sample == 1)
        return sad<uint8_t, int16_t, int32_t>(static_cast<const uint8_t*>(prev), prev_stride,
                                              static_cast<const uint8_t*>(cur), cur_stride, w, h, bpc);
    if (bpc <= 15)
        return sad<uint16_t, int16_t, int32_t>(static_cast<const uint16_t*>(prev), prev_stride,
                                               static_cast<const uint16_t*>(cur), cur_stride, w, h, bpc);
    return sad<uint16_t, int32_t, int64_t>(static_cast<const uint16_t*>(prev), prev_stride,
                                           static_cast<const uint16_t*>(cur), cur_stride, w, h, bpc);
}

}  // extern "C"
