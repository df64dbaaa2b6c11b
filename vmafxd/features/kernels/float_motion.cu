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

// Rows of a block and columns of a chunk: a chunk's columns with the widest filter's
// halo (radius FM_HALO, 5 taps) are FM_IN_W = 128, so a flat index k splits into
// row k >> 7 and column k & 127.
#define FM_ROWS 16
#define FM_HALO 2
#define FM_IN_W 128
#define FM_COLS (FM_IN_W - 2 * FM_HALO)
#define FM_IN_H (FM_ROWS + 2 * FM_HALO)
#define FM_THREADS 256

// Row sums of |blur(prev) - blur(cur)| for frames first .. of the batch: frame f
// compares luma f - 1 with luma f; frame 0 of the batch compares `history` (the
// previous batch's last reference luma, same pitch) with luma 0.  rows[f][y].
// FW taps (3 or 5; radius r = FW / 2 <= FM_HALO), held in registers.
// Shared memory: (2 x 20 x 128 + 2 x 16 x 128 + 16 x 125 + 16) floats = 44.9 KB (under 48).
struct FmShared {
    float in[2][FM_IN_H][FM_IN_W];      // samples as floats: prev, cur
    float vert[2][FM_ROWS][FM_IN_W];    // vertical pass: prev, cur
    float stage[FM_ROWS][FM_COLS + 1];  // |prev - cur|; + 1: a row's adder reads its own bank
    float acc[FM_ROWS];                 // the rows' running sums
};

template <typename T, int FW>
VX_DEVICE void fm_sad_rows(FmShared& sh, const T* luma, const T* history, i64 fstride, int w, int h, i64 pitch,
                           float div, const float* taps, int first, float* rows, i64 rows_stride)
{
    float (*in)[FM_IN_H][FM_IN_W] = sh.in;
    float (*vert)[FM_ROWS][FM_IN_W] = sh.vert;
    float (*stage)[FM_COLS + 1] = sh.stage;
    float* acc = sh.acc;
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
        acc[k] = 0.0f;
    for (int x0 = 0; x0 < w; x0 += FM_COLS) {
        const int cols = w - x0 < FM_COLS ? w - x0 : FM_COLS;
        const int cols_in = cols + 2 * r;  // <= FM_IN_W
        __syncthreads();  // the previous chunk added
        // in[.][iy][ix]: sample (y0 - r + iy, x0 - r + ix), both mirrored, for iy < nrows + 2r, ix < cols_in
        for (int k = t; k < (nrows + 2 * r) * FM_IN_W; k += n) {
            const int iy = k >> 7, ix = k & (FM_IN_W - 1);
            if (ix >= cols_in) continue;
            const i64 at = (i64)vx_mirror(y0 - r + iy, h) * pitch + vx_mirror(x0 - r + ix, w);
            in[0][iy][ix] = vx_float_sample(prev[at], div);
            in[1][iy][ix] = vx_float_sample(cur[at], div);
        }
        __syncthreads();
        // vertical pass of row y0 + ty at column x0 - r + ix: input rows ty .. ty + 2r
        for (int k = t; k < nrows * FM_IN_W; k += n) {
            const int ty = k >> 7, ix = k & (FM_IN_W - 1);
            if (ix >= cols_in) continue;
            float a = 0.0f, b = 0.0f;
            for (int j = 0; j < FW; ++j)
                a = a + tp[j] * in[0][ty + j][ix];
            for (int j = 0; j < FW; ++j)
                b = b + tp[j] * in[1][ty + j][ix];
            vert[0][ty][ix] = a;
            vert[1][ty][ix] = b;
        }
        __syncthreads();
        // horizontal pass of output x0 + tx: vertical columns tx .. tx + 2r
        for (int k = t; k < nrows * FM_IN_W; k += n) {
            const int ty = k >> 7, tx = k & (FM_IN_W - 1);
            if (tx >= cols) continue;
            float bp = 0.0f, bc = 0.0f;
            for (int j = 0; j < FW; ++j)
                bp = bp + tp[j] * vert[0][ty][tx + j];
            for (int j = 0; j < FW; ++j)
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

// fw: 3 or 5 taps (float_motion.filter_for)
VX_KERNEL void VX_BOUNDS(FM_THREADS, 4)
vx_fmotion_rows_u8(const u8* luma, const u8* history, i64 fstride, int w, int h, i64 pitch, float div,
                   const float* taps, int fw, int first, float* rows, i64 rows_stride)
{
    fm_sad_rows_any<u8>(luma, history, fstride, w, h, pitch, div, taps, fw, first, rows, rows_stride);
}

VX_KERNEL void VX_BOUNDS(FM_THREADS, 4)
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
