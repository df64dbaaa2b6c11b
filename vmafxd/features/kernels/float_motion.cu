// Float motion (libvmaf's "float_motion"): the float sum of
// |blurred[f - 1] - blurred[f]| over the reference luma of consecutive frames.
//
// Device twin of vmafxd.features.float_motion: the luma as floats
// (sample / div - 128, div 0 meaning none: the prelude's vx_float_sample), a
// separable filter, vertical pass first, each output `acc = 0; acc += taps[k] * x[k]`
// with k ascending and edges mirrored without repeating the edge sample (vx_mirror).
// The SAD is summed as libvmaf sums it: a float per row, left to right, then
// the rows top to bottom into one float: the same additions in the same
// order as the CPU twin.  The host divides by w * h and applies the temporal
// rules (the CPU twin's push_score).
//
// vx_fmotion_rows_* does it all from the staged samples but the rows' total.
// Block (g, 0, f) takes FM_ROWS rows of frame f and walks them left to right,
// FM_COLS columns (a chunk) at a time, in three phases a chunk, every thread of
// the block taking part in the first two:
//
// * vertical: a thread takes one column of one frame for FM_SEG rows (the
//   chunk's columns with the filter's halo on both sides, mirrored) and slides
//   the filter down it, the window's samples in registers, so each sample is
//   read and converted once (plus FW - 1 rows of halo a segment); a segment
//   whose rows all lie inside the picture steps a row pointer, the top and
//   bottom blocks' edge segments mirror each row;
// * horizontal: a thread four pixels of a row: both frames' filter along the
//   vertical values (read once into registers), |prev - cur| into a staged tile;
// * one thread a row adds the tile's values to the row's running float, in
//   column order: the additions of one thread walking the row.
//
// Each frame is blurred twice (as the current and as the previous frame) and no
// blurred plane is stored: the filter's arithmetic is cheap, the planes' memory
// traffic was not.
//
// Exactness of the filters: every output is sum_j taps[j] * x[j], j ascending,
// as the twin's `acc = 0; acc += ...`, but starting from the first product
// rather than 0 + product.  The two differ only when the first product is -0
// (0 + -0 is +0); a partial sum that is zero either way can differ only in its
// sign, a nonzero one not at all, and the sign of a zero goes no further than
// |prev - cur| (a -0 difference adds to the row's sum as +0 does): the row sums
// are the same floats.

// Rows and threads of a block, columns of a chunk, rows of a vertical segment,
// the widest filter's radius (5 taps)
#define FM_ROWS 32
#define FM_THREADS 256
#define FM_COLS 64
#define FM_SEG 16
#define FM_HALO 2
// vertical columns a chunk: x0 - r .. x0 + FM_COLS + r - 1 for the widest filter
#define FM_VW (FM_COLS + 2 * FM_HALO)

// Shared memory: 2 x 32 x 69 + 32 x 65 + 32 floats = 26.1 KB (under 48).  Odd pitches:
// the row adders (a thread a row, reading one column) read 32 banks.
struct FmShared {
    float vert[2][FM_ROWS][FM_VW + 1];  // the chunk's vertical pass: prev, cur
    float stage[FM_ROWS][FM_COLS + 1];  // |prev - cur|
    float acc[FM_ROWS];                 // the rows' running sums
};

// sum_j tp[j] * win[j], j ascending (see the exactness note above)
template <int FW>
VX_DEVICE float fm_taps(const float* tp, const float* win)
{
    float a = tp[0] * win[0];
#pragma unroll
    for (int j = 1; j < FW; ++j)
        a = a + tp[j] * win[j];
    return a;
}

// One vertical column of one frame: outputs o0 .. o1 - 1 into out[o * (FM_VW + 1)], input
// row i (output o reads rows o - o0 .. o - o0 + FW - 1) read as sample(i), the window in
// registers (each sample read and converted once)
template <int FW, typename Sample>
VX_DEVICE void fm_column(Sample sample, float div, const float* tp, float* out, int o0, int o1)
{
    float win[FW];
#pragma unroll
    for (int i = 0; i < FW - 1; ++i)
        win[i] = vx_float_sample(sample(i), div);
#pragma unroll 4
    for (int o = o0; o < o1; ++o) {
        win[FW - 1] = vx_float_sample(sample(o - o0 + FW - 1), div);
        out[o * (FM_VW + 1)] = fm_taps<FW>(tp, win);
#pragma unroll
        for (int i = 0; i < FW - 1; ++i)  // slide: renamings in the unrolled loop
            win[i] = win[i + 1];
    }
}

// Row sums of |blur(prev) - blur(cur)| for frames first .. of the batch: frame f
// compares luma f - 1 with luma f; frame 0 of the batch compares `history` (the
// previous batch's last reference luma, same pitch) with luma 0.  rows[f][y].
// FW taps (3 or 5; radius r = FW / 2 <= FM_HALO), held in registers; w and h at
// least r + 1 (vx_mirror's single reflection).
template <typename T, int FW>
VX_DEVICE void fm_sad_rows(FmShared& sh, const T* luma, const T* history, i64 fstride, int w, int h, i64 pitch,
                           float div, const float* taps, int first, float* rows, i64 rows_stride)
{
    const int r = FW / 2;
    const int f = blockIdx.z + first, y0 = blockIdx.x * FM_ROWS;
    const int t = threadIdx.x, n = blockDim.x;
    const int nrows = h - y0 < FM_ROWS ? h - y0 : FM_ROWS;
    const T* prev = f == 0 ? history : luma + (f - 1) * fstride;
    const T* cur = luma + f * fstride;
    float tp[FW];
    for (int j = 0; j < FW; ++j)
        tp[j] = taps[j];
    for (int k = t; k < nrows; k += n)
        sh.acc[k] = 0.0f;
    for (int x0 = 0; x0 < w; x0 += FM_COLS) {
        const int cols = w - x0 < FM_COLS ? w - x0 : FM_COLS;
        const int vw = cols + 2 * r;
        // vertical: item k is vertical column j = k % FM_VW (picture column x0 - r + j,
        // mirrored) of frame k / FM_VW / 2, rows seg * FM_SEG .. + FM_SEG - 1 of the block;
        // output row o reads input rows o .. o + FW - 1, input row i being picture row y0 - r + i
        for (int k = t; k < 2 * (FM_ROWS / FM_SEG) * FM_VW; k += n) {
            const int j = k % FM_VW, seg = (k / FM_VW) % (FM_ROWS / FM_SEG), fr = k / FM_VW / (FM_ROWS / FM_SEG);
            const int o0 = seg * FM_SEG, o1 = nrows < o0 + FM_SEG ? nrows : o0 + FM_SEG;
            if (j >= vw || o0 >= o1) continue;
            const T* src = (fr ? cur : prev) + vx_mirror(x0 - r + j, w);
            float* out = &sh.vert[fr][0][j];
            const int top = y0 - r + o0;
            if (top >= 0 && top + (o1 - o0) + FW - 2 < h) {
                // every input row inside the picture (all but the top and bottom blocks'
                // edge segments): a stepped pointer, no mirror
                const T* base = src + (i64)top * pitch;
                fm_column<FW>([&](int i) { return base[(i64)i * pitch]; }, div, tp, out, o0, o1);
            } else {
                fm_column<FW>([&](int i) { return src[(i64)vx_mirror(top + i, h) * pitch]; }, div, tp, out, o0,
                                 o1);
            }
        }
        __syncthreads();
        // horizontal: output column x0 + c reads vertical columns c .. c + 2r.  Item k: row
        // k % FM_ROWS (a warp's threads: 32 rows, banks 5y + c apart: all 32), columns
        // 4g .. 4g + 3 for g = k / FM_ROWS, their 4 + 2r vertical values read once a frame
        for (int k = t; k < FM_ROWS * (FM_COLS / 4); k += n) {
            const int y = k % FM_ROWS, c0 = (k / FM_ROWS) * 4;
            if (y >= nrows || c0 >= cols) continue;
            float vp[4 + FW - 1], vq[4 + FW - 1];
#pragma unroll
            for (int i = 0; i < 4 + FW - 1; ++i) {
                // past the chunk's last vertical column only for outputs past `cols` (not stored)
                const int j = c0 + i < vw ? c0 + i : vw - 1;
                vp[i] = sh.vert[0][y][j];
                vq[i] = sh.vert[1][y][j];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float d = fm_taps<FW>(tp, vp + i) - fm_taps<FW>(tp, vq + i);
                if (c0 + i < cols)
                    sh.stage[y][c0 + i] = d < 0.0f ? -d : d;
            }
        }
        __syncthreads();
        for (int k = t; k < nrows; k += n) {
            float s = sh.acc[k];
            for (int c = 0; c < cols; ++c)
                s = s + sh.stage[k][c];
            sh.acc[k] = s;
        }
        // the next chunk's vertical pass writes sh.vert only: the adders read sh.stage,
        // which the next horizontal pass writes after the next barrier
    }
    // each row's adder wrote its own acc
    for (int k = t; k < nrows; k += n)
        rows[f * rows_stride + y0 + k] = sh.acc[k];
}

template <typename T>
VX_DEVICE void fm_sad_rows_any(const T* luma, const T* history, i64 fstride, int w, int h, i64 pitch, float div,
                               const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    __shared__ FmShared sh;  // one copy for both instances
    if (fw == 3)
        fm_sad_rows<T, 3>(sh, luma, history, fstride, w, h, pitch, div, taps, first, rows, rows_stride);
    else
        fm_sad_rows<T, 5>(sh, luma, history, fstride, w, h, pitch, div, taps, first, rows, rows_stride);
}

// fw: 3 or 5 taps (float_motion.filter_for); grid (ceil(h / FM_ROWS), 1, frames), FM_THREADS a block.
// Six blocks an SM: 40 registers, no spills (sm_90); on the H200 it beat five (43 registers)
// at 4K by 3-6 % and tied at 1080p (docs/gpu-runs.md, eighth session)
VX_KERNEL void VX_BOUNDS(FM_THREADS, 6)
vx_fmotion_rows_u8(const u8* luma, const u8* history, i64 fstride, int w, int h, i64 pitch, float div,
                   const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    fm_sad_rows_any<u8>(luma, history, fstride, w, h, pitch, div, taps, fw, first, rows, rows_stride);
}

VX_KERNEL void VX_BOUNDS(FM_THREADS, 6)
vx_fmotion_rows_u16(const u16* luma, const u16* history, i64 fstride, int w, int h, i64 pitch, float div,
                    const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    fm_sad_rows_any<u16>(luma, history, fstride, w, h, pitch, div, taps, fw, first, rows, rows_stride);
}

// The rows of each frame added top to bottom into one float, into the frame's record
// (block (0, 0, f), staged as the rows are).
VX_KERNEL void vx_fmotion_total(const float* rows, i64 rows_stride, int h, int first, float* out, int out_stride,
                                int out_index)
{
    const int f = blockIdx.z + first;
    const float* r = rows + f * rows_stride;
    vx_staged_row_sums(0, 1, h, [&](int, int x) { return r[x]; }, out + f * out_stride + out_index, 1);
}
