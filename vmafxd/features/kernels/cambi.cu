// CAMBI (libvmaf's cambi.c) on the device: the device twin of
// vmafxd.features._cambi_core, for a batch of frames (the frame in blockIdx.z).
//
// Per picture (the distorted luma; with full_ref also the reference luma):
//
//   vx_cambi_prep_*   nearest-neighbour resampling to the encode size (the
//                     host passes the source row/column of every output: libvmaf
//                     steps those positions in float32, one after another),
//                     conversion to 10 bits, the 2x2 anti-dithering average
//   vx_cambi_mask     flat pixels (equal to the right and lower neighbours)
//                     counted over the clipped 7x7 window, > mask_index
//   then per scale (5):
//   vx_cambi_filter   2x decimation of the previous scale's filtered image
//                     (not at scale 0) and the separable 3x3 mode filter
//   vx_cambi_cvalues_sat (nd <= 4) / _wN (larger nd)  the window counts of
//                     values v - nd .. v + nd around each evaluated pixel (from
//                     a shared-memory tile of the counted samples: summed-area
//                     tables of the values asked for, or a scan of the window)
//                     and its c-value, in libvmaf's float arithmetic:
//                     (float)(w * p0 * pmax) * lut[p0 + pmax]
//   vx_cambi_hist / vx_cambi_select (4 passes)  radix selection of the k-th
//                     largest c-value, 8 bits a pass (non-negative floats
//                     order as their bit patterns)
//   vx_cambi_sum      the sum of the c-values above it, each times 2^24 (an
//                     integer: every non-zero c-value is >= 0.5)
//
// Everything but the c-values is integer, and the c-values are single float
// operations on exact integer counts, so the device gives the CPU twin's
// bits.  The record of a picture holds per scale the integer sum above the
// threshold, the threshold's bits and how many samples equal to it belong to
// the top k; the host adds them up exactly (an integer) and divides as the
// CPU twin does.  Atomic adds here are on integers only: any order gives the
// same sums.

#define CB_TILE 16            // output pixels per block side (c-values)
#define CB_MAX_PAD 32         // windows up to 65 (libvmaf's reciprocal table)
#define CB_SPAN (CB_TILE + 2 * CB_MAX_PAD)
#define CB_NONE 0xFFFFu       // a sample that is not counted: matches no value
#define CB_THREADS 256

VX_DEVICE u16 cb_to10(u32 v, int bpc)
{
    if (bpc <= 8) return (u16)(v << (10 - bpc));
    if (bpc == 9) return (u16)(v << 1);
    const int shift = bpc - 10;
    const u32 rounding = shift == 0 ? 0u : 1u << (shift - 1);
    return (u16)((v + rounding) >> shift);
}

template <typename T>
VX_DEVICE void prep_impl(const T* luma, i64 pitch, i64 frame_stride, const i32* ys, const i32* xs,
                         int bpc, int anti_dither, u16* out, int w, int h)
{
    const int frame = blockIdx.z;
    const T* src = luma + frame * frame_stride;
    u16* dst = out + (i64)frame * w * h;
    for (int i = blockIdx.x; i < h; i += gridDim.x) {
        const T* r0 = src + ys[i] * pitch;
        const T* r1 = src + ys[i + 1 < h ? i + 1 : i] * pitch;
        for (int j = threadIdx.x; j < w; j += blockDim.x) {
            const int j1 = j + 1 < w ? j + 1 : j;
            u32 a = cb_to10(r0[xs[j]], bpc);
            if (anti_dither) {
                // cambi.c anti_dithering_filter: each output reads the samples to
                // its right and below before they are overwritten
                const u32 b = cb_to10(r0[xs[j1]], bpc);
                const u32 c = cb_to10(r1[xs[j]], bpc);
                const u32 d = cb_to10(r1[xs[j1]], bpc);
                if (i < h - 1 && j < w - 1) a = (a + b + c + d) >> 2;
                else if (i < h - 1) a = (a + c) >> 1;
                else if (j < w - 1) a = (a + b) >> 1;
            }
            dst[(i64)i * w + j] = (u16)a;
        }
    }
}

VX_KERNEL void vx_cambi_prep_u8(const u8* luma, i64 pitch, i64 frame_stride, const i32* ys, const i32* xs,
                                int bpc, int anti_dither, u16* out, int w, int h)
{
    prep_impl<u8>(luma, pitch, frame_stride, ys, xs, bpc, anti_dither, out, w, h);
}

VX_KERNEL void vx_cambi_prep_u16(const u16* luma, i64 pitch, i64 frame_stride, const i32* ys, const i32* xs,
                                 int bpc, int anti_dither, u16* out, int w, int h)
{
    prep_impl<u16>(luma, pitch, frame_stride, ys, xs, bpc, anti_dither, out, w, h);
}

#define CB_MASK_W 32          // mask outputs per block: 32 x 8
#define CB_MASK_H 8

// mask[i][j] = (flat pixels in the 7x7 window clipped to the picture) > mask_index;
// a pixel is flat when it equals its right and lower neighbours (the last
// column and row count as equal).  The flat bits of the block's area and its
// 3-pixel border (0 outside the picture) are made once in shared memory.
VX_KERNEL void vx_cambi_mask(const u16* imgs, int w, int h, int mask_index, u8* masks)
{
    __shared__ u8 flat[(CB_MASK_H + 6) * (CB_MASK_W + 6)];
    const int frame = blockIdx.z;
    const u16* img = imgs + (i64)frame * w * h;
    u8* mask = masks + (i64)frame * w * h;
    const int x0 = blockIdx.x * CB_MASK_W, y0 = blockIdx.y * CB_MASK_H;
    const int fw = CB_MASK_W + 6;
    for (int t = threadIdx.x; t < (CB_MASK_H + 6) * fw; t += blockDim.x) {
        const int r = y0 - 3 + t / fw, c = x0 - 3 + t % fw;
        u8 f = 0;
        if (r >= 0 && r < h && c >= 0 && c < w) {
            const u16 v = img[(i64)r * w + c];
            const int right = c == w - 1 || v == img[(i64)r * w + c + 1];
            const int below = r == h - 1 || v == img[(i64)(r + 1) * w + c];
            f = (u8)(right && below);
        }
        flat[t] = f;
    }
    __syncthreads();
    for (int o = threadIdx.x; o < CB_MASK_H * CB_MASK_W; o += blockDim.x) {
        const int ty = o / CB_MASK_W, tx = o % CB_MASK_W;
        const int i = y0 + ty, j = x0 + tx;
        if (i >= h || j >= w) continue;
        int n = 0;
        for (int r = 0; r < 7; r++)
            for (int c = 0; c < 7; c++) n += flat[(ty + r) * fw + tx + c];
        mask[(i64)i * w + j] = (u8)(n > mask_index);
    }
}

VX_DEVICE u16 cb_mode3(u16 a, u16 b, u16 c)
{
    if (a == b || a == c) return a;
    if (b == c) return b;
    const u16 m = a < b ? a : b;
    return m < c ? m : c;
}

// out = mode filter of D, D[i][j] = src[i * step][j * step] (step 2: decimation).
// cambi.c filter_mode: a horizontal mode of 3 (first and last columns kept),
// then a vertical mode of 3 of those rows; the first and last rows unchanged.
VX_KERNEL void vx_cambi_filter(const u16* srcs, int src_w, int src_h, int step, u16* outs, int w, int h)
{
    const int frame = blockIdx.z;
    const u16* src = srcs + (i64)frame * src_w * src_h;
    u16* out = outs + (i64)frame * w * h;
    const i64 rs = (i64)step * src_w;
    for (int i = blockIdx.x; i < h; i += gridDim.x) {
        for (int j = threadIdx.x; j < w; j += blockDim.x) {
            const u16* row = src + i * rs + (i64)j * step;
            if (i == 0 || i == h - 1) {
                out[(i64)i * w + j] = row[0];
                continue;
            }
            u16 hz[3];
            for (int k = 0; k < 3; k++) {
                const u16* r = row + (k - 1) * rs;
                hz[k] = (j == 0 || j == w - 1) ? r[0] : cb_mode3(r[-step], r[0], r[step]);
            }
            out[(i64)i * w + j] = cb_mode3(hz[0], hz[1], hz[2]);
        }
    }
}

#if defined(VX_EMU)
static inline unsigned atomicOr(unsigned* p, unsigned v)
{
    unsigned old = *p;
    *p = old | v;
    return old;
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
#endif

// The tile of a c-value block: the samples of rows y0 - pad .. and columns x0 - pad .. (span x span)
// of frame blockIdx.z, each CB_NONE unless it is inside the picture, counted by the mask and in the
// band.  With `have`, the values present are marked in that bitmap.
VX_DEVICE void cb_load_tile(u16* tile, const u16* imgs, const u8* masks, int w, int h, int mask_w, int mask_h,
                            int mask_step, int band_base, int band_size, int x0, int y0, int pad, int span,
                            u32* have)
{
    const int frame = blockIdx.z;
    const u16* img = imgs + (i64)frame * w * h;
    const u8* mask = masks + (i64)frame * mask_w * mask_h;
    for (int t = threadIdx.x; t < span * span; t += blockDim.x) {
        const int r = y0 - pad + t / span, c = x0 - pad + t % span;
        u16 v = CB_NONE;
        if (r >= 0 && r < h && c >= 0 && c < w) {
            const u16 s = img[(i64)r * w + c];
            const int counted = mask[(i64)r * mask_step * mask_w + (i64)c * mask_step]
                                && s >= band_base && s < band_base + band_size;
            if (counted) {
                v = s;
                if (have) atomicOr(&have[s >> 5], 1u << (s & 31));
            }
        }
        tile[t] = v;
    }
}

VX_DEVICE int cb_evaluated(int v, int nd, const i32* tvi, int vlt)
{
    int e = 0;
    if (v != (int)CB_NONE)
        for (int d = 0; d < nd; d++) e |= (v + nd <= tvi[d]) && (v + nd + d + 1 > vlt);
    return e;
}

// The sample under output pixel o (row o / CB_TILE, column o % CB_TILE) of the block's tile when a
// c-value is computed there, else -1 (outside the picture, or no contrast step evaluated).
VX_DEVICE int cb_evaluated_sample(const u16* tile, int o, int x0, int y0, int w, int h, int pad, int span, int nd,
                                  const i32* tvi, int vlt)
{
    const int ty = o / CB_TILE, tx = o % CB_TILE;
    if (y0 + ty >= h || x0 + tx >= w) return -1;
    const int v = tile[(ty + pad) * span + tx + pad];
    return cb_evaluated(v, nd, tvi, vlt) ? v : -1;
}

// c-values of one scale for 8 to 32 contrast steps (max_log_contrast 3..5),
// by a scan of every pixel's window in a shared-memory tile.  The counts of
// the 2 nd + 1 values around a pixel's own are packed 4 to a 64-bit word, 16
// bits each (a window holds at most 65 * 65 < 2^16 pixels); W words hold
// 4 W >= 2 nd + 1 counts.
template <int W>
VX_DEVICE void cvalues_impl(const u16* imgs, int w, int h, const u8* masks, int mask_w, int mask_h, int mask_step,
                            int pad, int nd, const i32* tvi, const i32* weights, int vlt, int band_base,
                            int band_size, const float* lut, float* cvals)
{
    __shared__ u16 tile[CB_SPAN * CB_SPAN];
    const int frame = blockIdx.z;
    float* cv = cvals + (i64)frame * w * h;
    const int x0 = blockIdx.x * CB_TILE, y0 = blockIdx.y * CB_TILE;
    const int span = CB_TILE + 2 * pad;
    cb_load_tile(tile, imgs, masks, w, h, mask_w, mask_h, mask_step, band_base, band_size, x0, y0, pad, span, nullptr);
    __syncthreads();
    for (int o = threadIdx.x; o < CB_TILE * CB_TILE; o += blockDim.x) {
        const int ty = o / CB_TILE, tx = o % CB_TILE;
        const int i = y0 + ty, j = x0 + tx;
        if (i >= h || j >= w) continue;
        const int v = tile[(ty + pad) * span + tx + pad];
        float c = 0.0f;
        int evaluated = 0;
        if (v != (int)CB_NONE) {
            for (int d = 0; d < nd; d++)
                evaluated |= (v + nd <= tvi[d]) && (v + nd + d + 1 > vlt);
        }
        if (evaluated) {
            u64 acc[W];
            for (int k = 0; k < W; k++) acc[k] = 0;
            const int lo = v - nd;  // count index 0 is the value v - nd
            for (int r = 0; r <= 2 * pad; r++) {
                const u16* row = tile + (ty + r) * span + tx;
                for (int q = 0; q <= 2 * pad; q++) {
                    const u32 k = (u32)((int)row[q] - lo);
                    if (k <= (u32)(2 * nd)) {
                        const u64 inc = (u64)1 << ((k & 3) * 16);
                        const u32 word = k >> 2;
                        for (int x = 0; x < W; x++) acc[x] += word == (u32)x ? inc : 0;
                    }
                }
            }
#define CB_COUNT(k) ((int)((acc[(k) >> 2] >> (((k) & 3) * 16)) & 0xFFFF))
            const int p0 = CB_COUNT(nd);
            for (int d = 0; d < nd; d++) {
                if ((v + nd <= tvi[d]) && (v + nd + d + 1 > vlt)) {
                    const int p1 = CB_COUNT(nd + d + 1);
                    const int p2 = CB_COUNT(nd - d - 1);
                    const int pm = p1 > p2 ? p1 : p2;
                    const float val = (float)(weights[d] * p0 * pm) * lut[pm + p0];
                    if (val > c) c = val;
                }
            }
#undef CB_COUNT
        }
        cv[(i64)i * w + j] = c;
    }
}

#define CB_CVALUES(W)                                                                                          \
    VX_KERNEL void vx_cambi_cvalues_w##W(const u16* imgs, int w, int h, const u8* masks, int mask_w,          \
                                         int mask_h, int mask_step, int pad, int nd, const i32* tvi,          \
                                         const i32* weights, int vlt, int band_base, int band_size,           \
                                         const float* lut, float* cvals)                                      \
    {                                                                                                          \
        cvalues_impl<W>(imgs, w, h, masks, mask_w, mask_h, mask_step, pad, nd, tvi, weights, vlt, band_base,  \
                        band_size, lut, cvals);                                                                \
    }
CB_CVALUES(5)
CB_CVALUES(9)
CB_CVALUES(17)

// c-values of one scale for up to 4 contrast steps (nd <= 4, libvmaf's default
// max_log_contrast 2 and below), counting with summed-area tables instead of a
// scan of every window.  Per block: the values the block's pixels ask for
// (v - nd .. v + nd) that occur among the counted samples of the tile get a
// slot; each slot's indicator over the tile becomes a summed-area table in
// shared memory (as many slots at a time as fit), and every pixel reads its
// window count of each asked-for value from four corners.  In flat areas,
// where the mask is, a tile holds few values, so this is a few passes over
// the tile instead of (2 pad + 1)^2 reads per pixel.
#define CB_VALUE_WORDS 36                 // bitmaps over values 0 .. 1151 (samples <= 1024, + nd)
#define CB_SAT_CELLS (13 * 1024)          // u16 summed-area cells in shared memory (all shared data < 48 KB)
#define CB_MAX_COUNTS 9                   // 2 nd + 1 for nd <= 4

VX_DEVICE float cb_cvalue(const u16* counts, int v, int nd, const i32* tvi, const i32* weights, int vlt,
                          const float* lut)
{
    float c = 0.0f;
    const int p0 = counts[nd];
    for (int d = 0; d < nd; d++) {
        if ((v + nd <= tvi[d]) && (v + nd + d + 1 > vlt)) {
            const int p1 = counts[nd + d + 1];
            const int p2 = counts[nd - d - 1];
            const int pm = p1 > p2 ? p1 : p2;
            const float val = (float)(weights[d] * p0 * pm) * lut[pm + p0];
            if (val > c) c = val;
        }
    }
    return c;
}

VX_KERNEL void vx_cambi_cvalues_sat(const u16* imgs, int w, int h, const u8* masks, int mask_w, int mask_h,
                                    int mask_step, int pad, int nd, const i32* tvi, const i32* weights, int vlt,
                                    int band_base, int band_size, const float* lut, float* cvals)
{
    __shared__ u16 tile[CB_SPAN * CB_SPAN];
    __shared__ u16 sat[CB_SAT_CELLS];
    __shared__ u16 counts[CB_TILE * CB_TILE * CB_MAX_COUNTS];
    __shared__ u32 need[CB_VALUE_WORDS];
    __shared__ u32 have[CB_VALUE_WORDS];
    __shared__ u32 rank_base[CB_VALUE_WORDS];
    __shared__ u16 slot_value[CB_VALUE_WORDS * 32];
    __shared__ int nslots;
    const int frame = blockIdx.z;
    float* cv = cvals + (i64)frame * w * h;
    const int x0 = blockIdx.x * CB_TILE, y0 = blockIdx.y * CB_TILE;
    const int span = CB_TILE + 2 * pad;
    const int ncounts = 2 * nd + 1;
    for (int t = threadIdx.x; t < CB_VALUE_WORDS; t += blockDim.x) need[t] = have[t] = 0;
    for (int t = threadIdx.x; t < CB_TILE * CB_TILE * ncounts; t += blockDim.x) counts[t] = 0;
    __syncthreads();
    cb_load_tile(tile, imgs, masks, w, h, mask_w, mask_h, mask_step, band_base, band_size, x0, y0, pad, span, have);
    __syncthreads();
    // the values needed: v - nd .. v + nd (those >= 0) around every evaluated pixel
    for (int o = threadIdx.x; o < CB_TILE * CB_TILE; o += blockDim.x) {
        const int v = cb_evaluated_sample(tile, o, x0, y0, w, h, pad, span, nd, tvi, vlt);
        if (v < 0) continue;
        for (int u = v - nd > 0 ? v - nd : 0; u <= v + nd; u++) atomicOr(&need[u >> 5], 1u << (u & 31));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int m = 0;
        for (int wd = 0; wd < CB_VALUE_WORDS; wd++) {
            rank_base[wd] = m;
            u32 bits = need[wd] & have[wd];
            need[wd] = bits;  // from here on: the values with a slot
            while (bits) {
                slot_value[m++] = (u16)(wd * 32 + __ffs((int)bits) - 1);
                bits &= bits - 1u;
            }
        }
        nslots = m;
    }
    __syncthreads();
    const int side = span + 1;
    const int per_chunk = CB_SAT_CELLS / (side * side);
    for (int first = 0; first < nslots; first += per_chunk) {
        const int m = nslots - first < per_chunk ? nslots - first : per_chunk;
        // rows: running counts along each row of each slot; row 0 and column 0 zero
        for (int t = threadIdx.x; t < m * side; t += blockDim.x) {
            const int sl = t / side, r = t % side;
            u16* row = sat + sl * side * side + r * side;
            row[0] = 0;
            if (r == 0) {
                for (int c = 1; c < side; c++) row[c] = 0;
                continue;
            }
            const u16 val = slot_value[first + sl];
            const u16* src = tile + (r - 1) * span;
            u16 run = 0;
            for (int c = 1; c < side; c++) {
                run += src[c - 1] == val;
                row[c] = run;
            }
        }
        __syncthreads();
        // columns: add the rows up
        for (int t = threadIdx.x; t < m * side; t += blockDim.x) {
            const int sl = t / side, c = t % side;
            u16* col = sat + sl * side * side + c;
            for (int r = 1; r < side; r++) col[r * side] += col[(r - 1) * side];
        }
        __syncthreads();
        for (int o = threadIdx.x; o < CB_TILE * CB_TILE; o += blockDim.x) {
            const int v = cb_evaluated_sample(tile, o, x0, y0, w, h, pad, span, nd, tvi, vlt);
            if (v < 0) continue;
            const int ty = o / CB_TILE, tx = o % CB_TILE;
            for (int k = 0; k < ncounts; k++) {
                const int u = v - nd + k;
                if (u < 0 || !(need[u >> 5] >> (u & 31) & 1u)) continue;
                const int sl = (int)rank_base[u >> 5] + __popc(need[u >> 5] & ((1u << (u & 31)) - 1u)) - first;
                if (sl < 0 || sl >= m) continue;
                // the window's rows ty .. ty + 2 pad and columns tx .. tx + 2 pad of the tile
                const u16* s0 = sat + sl * side * side;
                const int r0 = ty * side, r1 = (ty + 2 * pad + 1) * side;
                const int c0 = tx, c1 = tx + 2 * pad + 1;
                counts[o * ncounts + k] = (u16)(s0[r1 + c1] - s0[r0 + c1] - s0[r1 + c0] + s0[r0 + c0]);
            }
        }
        __syncthreads();
    }
    for (int o = threadIdx.x; o < CB_TILE * CB_TILE; o += blockDim.x) {
        const int ty = o / CB_TILE, tx = o % CB_TILE;
        const int i = y0 + ty, j = x0 + tx;
        if (i >= h || j >= w) continue;
        const int v = cb_evaluated_sample(tile, o, x0, y0, w, h, pad, span, nd, tvi, vlt);
        cv[(i64)i * w + j] = v < 0 ? 0.0f : cb_cvalue(counts + o * ncounts, v, nd, tvi, weights, vlt, lut);
    }
}

// Radix selection, pass p (0..3) over the c-values' bit patterns: the
// histogram of digit p (bits 31-8p .. 24-8p) among the values whose higher
// digits equal the prefix chosen so far.  hist: u64[frame][256], zero on entry.
VX_KERNEL void vx_cambi_hist(const float* cvals, i64 count, const u32* state, int pass, u64* hist)
{
    __shared__ u64 bins[256];
    const int frame = blockIdx.z;
    const u32* bits = (const u32*)(cvals + frame * count);
    const int shift = 24 - 8 * pass;
    const u32 high = pass == 0 ? 0u : ~((1u << (shift + 8)) - 1u);
    const u32 prefix = pass == 0 ? 0u : state[frame * 2];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    // c-values repeat (zeros above all): a thread adds a run of equal digits at
    // once, which keeps most shared atomics off the hottest bin
    u32 run_bin = 0;
    u64 run = 0;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (i64)gridDim.x * blockDim.x) {
        const u32 x = bits[e];
        if ((x & high) != prefix) continue;
        const u32 bin = (x >> shift) & 255u;
        if (bin != run_bin && run) {
            atomicAdd((unsigned long long*)&bins[run_bin], (unsigned long long)run);
            run = 0;
        }
        run_bin = bin;
        run++;
    }
    if (run) atomicAdd((unsigned long long*)&bins[run_bin], (unsigned long long)run);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (bins[b]) atomicAdd((unsigned long long*)&hist[frame * 256 + b], (unsigned long long)bins[b]);
}

// The digit of pass p holding the k-th largest value; state[frame] = (prefix,
// how many of the remaining rank are still to take).  Clears the histogram.
VX_KERNEL void vx_cambi_select(u64* hist, u32* state, int pass, i64 k)
{
    const int frame = blockIdx.z;
    if (threadIdx.x != 0) return;
    u64* hst = hist + frame * 256;
    const int shift = 24 - 8 * pass;
    u32 prefix = pass == 0 ? 0u : state[frame * 2];
    u64 rank = pass == 0 ? (u64)k : (u64)state[frame * 2 + 1];
    u64 above = 0;
    int digit = 0;
    for (int b = 255; b >= 0; b--) {
        if (above + hst[b] >= rank) {
            digit = b;
            break;
        }
        above += hst[b];
    }
    for (int b = 0; b < 256; b++) hst[b] = 0;
    state[frame * 2] = prefix | ((u32)digit << shift);
    state[frame * 2 + 1] = (u32)(rank - above);
}

// After the 4 passes the prefix is the k-th largest value t and the rank is
// how many samples equal to t complete the top k.  record[0] += the sum of
// 2^24 x (each value above t); record[1] = t's bits | (rank << 32).
VX_KERNEL void vx_cambi_sum(const float* cvals, i64 count, const u32* state, i64* records, int record_stride,
                            int record_index)
{
    __shared__ i64 scratch[CB_THREADS];
    const int frame = blockIdx.z;
    const u32* bits = (const u32*)(cvals + frame * count);
    const float* vals = cvals + frame * count;
    const u32 t = state[frame * 2];
    i64 acc = 0;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (i64)gridDim.x * blockDim.x)
        if (bits[e] > t) acc += (i64)((double)vals[e] * 16777216.0);
    const i64 total = vx_block_sum_i64(acc, scratch);
    i64* rec = records + (i64)frame * record_stride + record_index;
    if (threadIdx.x == 0 && total != 0) vx_atomic_add_i64(rec, total);
    if (threadIdx.x == 0 && blockIdx.x == 0) rec[1] = (i64)((u64)t | ((u64)state[frame * 2 + 1] << 32));
}
