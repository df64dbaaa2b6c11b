// Integer motion's SAD for one CPU thread: the sum over a frame of |blur(prev - cur)|,
// libvmaf 3.2's integer_motion arithmetic (vmafxd/features/motion.py is the reference).
//
// One output row at a time: the vertical 5-tap pass on the difference of the two
// frames' rows (mirrored at the top and bottom), rounded half up and shifted by the
// bit depth into a row buffer with two mirrored columns at each end; then the
// horizontal pass, rounded half up and shifted by 16, whose absolute values are summed.
//
// Types: the vertical sum |sum taps * diff| <= 65536 * (2^bpc - 1) fits int32 up to 15
// bits (16-bit samples accumulate in int64); the shifted row values fit int32 at every
// depth.  The horizontal sum reaches 65536 * 2^16 = 2^32: it is split (horizontal_sad).
// The sum over a frame is the same in any order (integers), so rows add up as they come.

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

// The taps split as hi * 256 + lo, so that the horizontal pass runs in int32 (which the
// compiler vectorises without AVX-512, where int64 products are not):
// sum taps * x = 256 A + B with A = sum hi * x and B = sum lo * x, both within int32 for
// |x| <= 2^17.  With A = 256 qa + ra (qa = A >> 8, 0 <= ra < 256),
// (256 A + B + 2^15) >> 16 = qa + ((256 ra + B + 2^15) >> 16), every term within int32.
constexpr int32_t OUTER_HI = OUTER >> 8, OUTER_LO = OUTER & 255;
constexpr int32_t INNER_HI = INNER >> 8, INNER_LO = INNER & 255;
constexpr int32_t CENTRE_HI = CENTRE >> 8, CENTRE_LO = CENTRE & 255;

// sum over j < w of |(5 taps of x[j .. j + 4] + 2^15) >> 16|; x holds the row with its two
// mirrored columns at each end.  Chunks of 2^15 columns sum in uint32 (|value| <= 2^16 + 1,
// so a chunk cannot wrap), then in int64: the exact sum at any width.
int64_t horizontal_sad(const int32_t* x, int w) {
    int64_t total = 0;
    for (int j0 = 0; j0 < w; j0 += 1 << 15) {
        const int j1 = w - j0 < (1 << 15) ? w : j0 + (1 << 15);
        uint32_t part = 0;
        for (int j = j0; j < j1; j++) {
            const int32_t o = x[j] + x[j + 4], i = x[j + 1] + x[j + 3], c = x[j + 2];
            const int32_t a = o * OUTER_HI + i * INNER_HI + c * CENTRE_HI;
            const int32_t b = o * OUTER_LO + i * INNER_LO + c * CENTRE_LO;
            const int32_t v = (a >> 8) + ((((a & 255) << 8) + b + (1 << 15)) >> 16);
            part += static_cast<uint32_t>(v < 0 ? -v : v);
        }
        total += part;
    }
    return total;
}

template <typename Sample, typename Acc>
int64_t sad(const Sample* prev, ptrdiff_t prev_stride, const Sample* cur, ptrdiff_t cur_stride,
            int w, int h, int bpc) {
    std::vector<Acc> diff(5 * static_cast<size_t>(w));
    std::vector<int32_t> row(static_cast<size_t>(w) + 4);
    int tag[5] = {-1, -1, -1, -1, -1};  // the source row each ring slot holds
    const Acc y_round = Acc(1) << (bpc - 1);
    int64_t total = 0;
    for (int i = 0; i < h; i++) {
        // the five source rows' differences in tap order: each source row is differenced
        // once, into the ring slot of its index (the mirrored rows are rows already there)
        const Acc* d[5];
        for (int k = 0; k < 5; k++) {
            const int r = mirror(i - 2 + k, h);
            Acc* slot = diff.data() + static_cast<size_t>(r % 5) * w;
            if (tag[r % 5] != r) {
                tag[r % 5] = r;
                const Sample* p = prev + r * prev_stride;
                const Sample* c = cur + r * cur_stride;
                for (int j = 0; j < w; j++) slot[j] = Acc(p[j]) - Acc(c[j]);
            }
            d[k] = slot;
        }
        const Acc *d0 = d[0], *d1 = d[1], *d2 = d[2], *d3 = d[3], *d4 = d[4];
        int32_t* y = row.data() + 2;
        for (int j = 0; j < w; j++) {
            // the symmetric taps paired before scaling, as the twin does (same integers)
            Acc acc = (d0[j] + d4[j]) * OUTER + (d1[j] + d3[j]) * INNER + d2[j] * CENTRE;
            y[j] = static_cast<int32_t>((acc + y_round) >> bpc);
        }
        y[-1] = y[1];
        y[-2] = y[2];
        y[w] = y[w - 2];
        y[w + 1] = y[w - 3];
        total += horizontal_sad(row.data(), w);
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
        return sad<uint8_t, int32_t>(static_cast<const uint8_t*>(prev), prev_stride,
                                     static_cast<const uint8_t*>(cur), cur_stride, w, h, bpc);
    if (bpc <= 15)
        return sad<uint16_t, int32_t>(static_cast<const uint16_t*>(prev), prev_stride,
                                      static_cast<const uint16_t*>(cur), cur_stride, w, h, bpc);
    return sad<uint16_t, int64_t>(static_cast<const uint16_t*>(prev), prev_stride,
                                  static_cast<const uint16_t*>(cur), cur_stride, w, h, bpc);
}

}  // extern "C"
