// PSNR: the sum of squared differences of one plane, per frame.
//
// Exact in 64-bit integers, so any reduction order gives the CPU twin's
// number (vmafxd.features.psnr.compute_stats).  One launch per plane for a
// whole batch: plane p of frame f sits at ref + f * frame_stride (elements),
// rows `pitch` elements apart; grid.z is the frame, grid.x strides rows.
// out[f * out_stride + out_index] += SSE (zeroed by the lane before).

template <typename T>
VX_DEVICE void sse_impl(const T* ref, const T* dist, int w, int h, i64 pitch, i64 frame_stride,
                        i64* out, int out_stride, int out_index)
{
    __shared__ i64 scratch[256];
    const int frame = blockIdx.z;
    const T* a = ref + frame * frame_stride;
    const T* b = dist + frame * frame_stride;
    i64 acc = 0;
    for (int r = blockIdx.x; r < h; r += gridDim.x) {
        const T* ra = a + r * pitch;
        const T* rb = b + r * pitch;
        for (int x = threadIdx.x; x < w; x += blockDim.x) {
            const i64 d = (i64)ra[x] - (i64)rb[x];
            acc += d * d;
        }
    }
    const i64 total = vx_block_sum_i64(acc, scratch);
    if (threadIdx.x == 0 && total != 0)
        vx_atomic_add_i64(out + frame * out_stride + out_index, total);
}

VX_KERNEL void vx_psnr_sse_u8(const u8* ref, const u8* dist, int w, int h, i64 pitch, i64 frame_stride,
                              i64* out, int out_stride, int out_index)
{
    sse_impl<u8>(ref, dist, w, h, pitch, frame_stride, out, out_stride, out_index);
}

VX_KERNEL void vx_psnr_sse_u16(const u16* ref, const u16* dist, int w, int h, i64 pitch, i64 frame_stride,
                               i64* out, int out_stride, int out_index)
{
    sse_impl<u16>(ref, dist, w, h, pitch, frame_stride, out, out_stride, out_index);
}
