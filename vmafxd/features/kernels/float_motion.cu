// Float motion (libvmaf's "float_motion"): the blurred reference luma of every
// frame, and the float sum of |blurred[f - 1] - blurred[f]|.
//
// Device twin of vmafxd.features.float_motion: the luma as floats
// (sample / div - 128, div 0 meaning none), a separable filter (vertical pass
// into shared memory, then horizontal: fm_blur), each output `acc = 0; acc += taps[k] * x[k]`
// with k ascending and edges mirrored without repeating the edge sample.
// The SAD is summed as libvmaf sums it: a float per row, left to right, then
// the rows top to bottom into one float (vx_staged_row_sums: the values staged
// in shared memory by the block, one thread a row adding them in order): the
// same additions in the same order as the CPU twin.  The host
// divides by w * h and applies the temporal rules (the CPU twin's push_score).

#define FM_COLS 256

// The end of this block's columns: FM_COLS of them from blockIdx.x * FM_COLS, cut at the width.
VX_DEVICE int fm_cols_end(int w)
{
    const int end = (blockIdx.x + 1) * FM_COLS;
    return end < w ? end : w;
}

// The widest filter's radius (5 taps)
#define FM_HALO 2

// The blur of row y: block (x, y, f) runs the vertical pass of the columns its
// FM_COLS pixels' horizontal pass reads (x0 - r .. x0 + FM_COLS - 1 + r, each
// mirrored as the horizontal pass mirrors it) into shared memory, then the
// horizontal pass from there: the same operations on the same values as a
// vertical pass into a plane and a horizontal pass over it, without the plane.
template <typename T>
VX_DEVICE void fm_blur(const T* luma, i64 fstride, int w, int h, i64 pitch, float div, const float* taps, int fw,
                       float* out, i64 ostride, i64 opitch)
{
    __shared__ float tile[FM_COLS + 2 * FM_HALO];
    const int f = blockIdx.z, y = blockIdx.y, r = fw / 2;
    const int x0 = blockIdx.x * FM_COLS;
    const int end = fm_cols_end(w);
    const T* src = luma + f * fstride;
    for (int i = threadIdx.x; i < end - x0 + 2 * r; i += blockDim.x) {
        const int x = vx_mirror(x0 - r + i, w);
        float acc = 0.0f;
        for (int k = 0; k < fw; ++k)
            acc = acc + taps[k] * vx_float_sample(src[(i64)vx_mirror(y - r + k, h) * pitch + x], div);
        tile[i] = acc;
    }
    __syncthreads();
    float* dst = out + f * ostride + y * opitch;
    for (int i = threadIdx.x; i < end - x0; i += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < fw; ++k)
            acc = acc + taps[k] * tile[i + k];
        dst[x0 + i] = acc;
    }
}

VX_KERNEL void vx_fmotion_blur_u8(const u8* luma, i64 fstride, int w, int h, i64 pitch, float div, const float* taps,
                                  int fw, float* out, i64 ostride, i64 opitch)
{
    fm_blur<u8>(luma, fstride, w, h, pitch, div, taps, fw, out, ostride, opitch);
}

VX_KERNEL void vx_fmotion_blur_u16(const u16* luma, i64 fstride, int w, int h, i64 pitch, float div,
                                   const float* taps, int fw, float* out, i64 ostride, i64 opitch)
{
    fm_blur<u16>(luma, fstride, w, h, pitch, div, taps, fw, out, ostride, opitch);
}

// Row sums of |prev - cur| for frames first .. of the batch: frame f compares
// blurred[f - 1] with blurred[f]; frame 0 of the batch compares `history`
// (the previous batch's last blurred frame) with blurred[0].  Block (x, 0, f)
// sums VX_SUM_ROWS rows (vx_staged_row_sums: each row left to right in one float).
VX_KERNEL void vx_fmotion_rows(const float* blurred, const float* history, i64 stride, i64 pitch, int w, int h,
                               int first, float* rows, i64 rows_stride)
{
    const int f = blockIdx.z + first;
    const float* cur = blurred + f * stride;
    const float* prev = f == 0 ? history : blurred + (f - 1) * stride;
    const int y0 = blockIdx.x * VX_SUM_ROWS;
    const int nrows = h - y0 < VX_SUM_ROWS ? h - y0 : VX_SUM_ROWS;
    vx_staged_row_sums(y0, nrows, w, [&](int y, int x) {
        const float d = prev[(i64)y * pitch + x] - cur[(i64)y * pitch + x];
        return d < 0.0f ? -d : d;
    }, rows + f * rows_stride + y0, 1);
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
