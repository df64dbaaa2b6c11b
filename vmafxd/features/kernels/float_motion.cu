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
// vx_fmotion_rows_* does it all from the staged samples but the rows' total:
// block (g, 0, f) takes FM_ROWS rows of frame f, FM_COLS columns at a time.
// Per chunk it converts the samples of both frames its outputs read (the rows
// and columns with an FM_HALO halo, mirrored) once into shared memory, runs the
// vertical pass of both frames there, then the horizontal pass and |prev - cur|
// per pixel into shared memory, and one thread a row adds the chunk's values to
// the row's running float in order.  Each frame is blurred twice (as the
// current and as the previous frame) and no blurred plane is stored: the
// filter's arithmetic is cheap, the planes' memory traffic was not.

// Rows of a block, columns of a chunk, and the widest filter's radius (5 taps).
#define FM_ROWS 16
#define FM_COLS 128
#define FM_HALO 2
#define FM_THREADS 256
#define FM_MAX_TAPS (2 * FM_HALO + 1)
// the samples a chunk reads: its rows and columns with the halo on every side
#define FM_IN_H (FM_ROWS + 2 * FM_HALO)
#define FM_IN_W (FM_COLS + 2 * FM_HALO)

// Row sums of |blur(prev) - blur(cur)| for frames first .. of the batch: frame f
// compares luma f - 1 with luma f; frame 0 of the batch compares `history` (the
// previous batch's last reference luma, same pitch) with luma 0.  rows[f][y].
// Shared memory: 2 x 20 x 132 + 2 x 16 x 132 + 16 x 129 + 16 + 5 floats = 46.3 KB (under 48).
template <typename T>
VX_DEVICE void fm_sad_rows(const T* luma, const T* history, i64 fstride, int w, int h, i64 pitch, float div,
                           const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    __shared__ float in[2][FM_IN_H][FM_IN_W];         // samples as floats: prev, cur
    __shared__ float vert[2][FM_ROWS][FM_IN_W];       // vertical pass: prev, cur
    __shared__ float stage[FM_ROWS][FM_COLS + 1];     // |prev - cur|; + 1: a row's adder reads its own bank
    __shared__ float acc[FM_ROWS];
    __shared__ float tp[FM_MAX_TAPS];
    const int f = blockIdx.z + first, y0 = blockIdx.x * FM_ROWS, r = fw / 2;
    const int t = threadIdx.x, n = blockDim.x;
    const int nrows = h - y0 < FM_ROWS ? h - y0 : FM_ROWS;
    const T* prev = f == 0 ? history : luma + (f - 1) * fstride;
    const T* cur = luma + f * fstride;
    for (int k = t; k < fw; k += n)
        tp[k] = taps[k];
    for (int k = t; k < nrows; k += n)
        acc[k] = 0.0f;
    for (int x0 = 0; x0 < w; x0 += FM_COLS) {
        const int cols = w - x0 < FM_COLS ? w - x0 : FM_COLS;
        __syncthreads();  // the previous chunk added
        // in[p][iy][ix]: sample (y0 - r + iy, x0 - r + ix), both mirrored, for iy < nrows + 2r, ix < cols + 2r
        for (int k = t; k < 2 * FM_IN_H * FM_IN_W; k += n) {
            const int p = k / (FM_IN_H * FM_IN_W), iy = k / FM_IN_W % FM_IN_H, ix = k % FM_IN_W;
            if (iy >= nrows + 2 * r || ix >= cols + 2 * r) continue;
            const int y = vx_mirror(y0 - r + iy, h), x = vx_mirror(x0 - r + ix, w);
            in[p][iy][ix] = vx_float_sample((p ? cur : prev)[(i64)y * pitch + x], div);
        }
        __syncthreads();
        // vertical pass of rows y0 + ty at column x0 - r + ix: input rows ty .. ty + 2r
        for (int k = t; k < 2 * FM_ROWS * FM_IN_W; k += n) {
            const int p = k / (FM_ROWS * FM_IN_W), ty = k / FM_IN_W % FM_ROWS, ix = k % FM_IN_W;
            if (ty >= nrows || ix >= cols + 2 * r) continue;
            float a = 0.0f;
            for (int j = 0; j < fw; ++j)
                a = a + tp[j] * in[p][ty + j][ix];
            vert[p][ty][ix] = a;
        }
        __syncthreads();
        // horizontal pass of output x0 + tx: vertical columns tx .. tx + 2r
        for (int k = t; k < FM_ROWS * FM_COLS; k += n) {
            const int ty = k / FM_COLS, tx = k % FM_COLS;
            if (ty >= nrows || tx >= cols) continue;
            float bp = 0.0f, bc = 0.0f;
            for (int j = 0; j < fw; ++j)
                bp = bp + tp[j] * vert[0][ty][tx + j];
            for (int j = 0; j < fw; ++j)
                bc = bc + tp[j] * vert[1][ty][tx + j];
            const float d = bp - bc;
            stage[ty][tx] = d < 0.0f ? -d : d;
        }
        __syncthreads();
        for (int k = t; k < nrows; k += n) {
            float s = acc[k];
            for (int c = 0; c < cols; ++c)
                s = s + stage[k][c];
            acc[k] = s;
        }
    }
    // each row's adder wrote its own acc: no barrier needed before reading it back
    for (int k = t; k < nrows; k += n)
        rows[f * rows_stride + y0 + k] = acc[k];
}

VX_KERNEL void VX_BOUNDS(FM_THREADS, 4)
vx_fmotion_rows_u8(const u8* luma, const u8* history, i64 fstride, int w, int h, i64 pitch, float div,
                   const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    fm_sad_rows<u8>(luma, history, fstride, w, h, pitch, div, taps, fw, first, rows, rows_stride);
}

VX_KERNEL void VX_BOUNDS(FM_THREADS, 4)
vx_fmotion_rows_u16(const u16* luma, const u16* history, i64 fstride, int w, int h, i64 pitch, float div,
                    const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    fm_sad_rows<u16>(luma, history, fstride, w, h, pitch, div, taps, fw, first, rows, rows_stride);
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
