// Integer motion (libvmaf 3.2): SAD of the blurred difference of two
// consecutive reference lumas, per frame.
//
// Device twin of vmafxd.features.motion.SadWorkspace: d = prev - cur; a
// vertical 5-tap pass (taps 3571 16004 26386 16004 3571, + 2^(bpc-1), >> bpc,
// arithmetic), a horizontal 5-tap pass (+ 2^15, >> 16), |.|, summed.  Both
// passes mirror without repeating the edge (-1 -> 1, n -> n - 2); the
// vertical pass is per column, so mirroring columns before or after it is
// the same.  Exact in integers: any reduction order gives the same SAD.
//
// Frame f of the batch compares luma f - gap with luma f (gap 1, or 2 with
// the five-frame window); a predecessor before the batch is `prev1` (the
// previous batch's last reference luma) or `prev2` (the one before).  Frames
// whose predecessor does not exist (the first of a session) are not launched
// (first_frame skips them): their motion is 0 by definition.

// Output tile of a block.  64 rows (16 before): a block's fixed work -- the 8-barrier block sum
// of its 256 partial SADs, the 4 halo rows staged and filtered twice -- is spread over 4096
// outputs instead of 1024 (halo: 68 x 68 staged differences for 64 x 64 outputs, 1.13 a
// pixel, against 1.33), and a 1080p frame is 510 blocks instead of 2,040.  Shared memory:
// 18.5 + 17.4 + 2 KB.  The host's grid uses the same (vmafxd/lanes/gpu/motion.py _TILE_H).
#define MT_W 64          // output columns per block
#ifndef MT_H
#define MT_H 64          // output rows per block
#endif
#define MT_THREADS 256

// Products and sums of the two passes.  From 8-bit samples they fit 32 bits: a difference is
// within +-255, so the vertical sum is within 2^16 * 255 = 16,711,680, its result within
// (16,711,680 + 128) >> 8 = 65,281, and each of the horizontal pass's three products within
// 16004 * 2 * 65,281 = 2,089,514,248 < 2^31 (3571 * 2 * 65,281 and 26386 * 65,281 are smaller);
// only their sum needs 64 bits.  From 16-bit samples everything is 64-bit.
template <typename T> struct MotionSum { typedef i64 type; };
template <> struct MotionSum<u8> { typedef i32 type; };

template <typename T>
VX_DEVICE void motion_impl(const T* luma, const T* prev1, const T* prev2, int gap, int w, int h, i64 pitch,
                           i64 frame_stride, int bpc, int first_frame, i64* out, int out_stride, int out_index)
{
    __shared__ i32 diff[MT_H + 4][MT_W + 4];
    __shared__ i32 vert[MT_H][MT_W + 4];
    __shared__ i64 scratch[MT_THREADS];
    const int frame = blockIdx.z + first_frame;
    const T* cur = luma + frame * frame_stride;
    const int src = frame - gap;
    const T* prev = src >= 0 ? luma + src * frame_stride : (src == -1 ? prev1 : prev2);
    const int x0 = blockIdx.x * MT_W, y0 = blockIdx.y * MT_H;
    const int t = threadIdx.x;

    // Blocks whose rows y0-2 .. y0+MT_H+1 and columns x0-4 .. x0+MT_W+3 lie inside the picture,
    // with rows aligned to 4 samples, load 4 samples a load (vx_load_quad) from x0 - 4 (a multiple
    // of 4) and keep columns x0-2 .. x0+MT_W+1: no mirror, no bounds, the same differences.
    typedef typename VxQuad<T>::type Q;
    const u64 align = 4 * sizeof(T) - 1;
    if (y0 >= 2 && y0 + MT_H + 2 <= h && x0 >= 4 && x0 + MT_W + 4 <= w &&
        (((u64)prev | (u64)cur) & align) == 0 && ((u64)pitch & 3) == 0) {
        const int bits = 8 * (int)sizeof(T);
        const Q mask = ((Q)1 << bits) - 1;
        const int QW = (MT_W + 8) / 4;  // quads a row
        for (int i = t; i < (MT_H + 4) * QW; i += blockDim.x) {
            const int ty = i / QW, q = i % QW;
            const i64 o = (i64)(y0 + ty - 2) * pitch + x0 - 4 + 4 * q;
            const Q a = vx_load_quad(prev + o), b = vx_load_quad(cur + o);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int tx = 4 * q + k - 2;
                if (tx >= 0 && tx < MT_W + 4)
                    diff[ty][tx] = (i32)((a >> (bits * k)) & mask) - (i32)((b >> (bits * k)) & mask);
            }
        }
    } else {
        for (int i = t; i < (MT_H + 4) * (MT_W + 4); i += blockDim.x) {
            const int ty = i / (MT_W + 4), tx = i % (MT_W + 4);
            const int gy = y0 + ty - 2, gx = x0 + tx - 2;
            i32 v = 0;
            if (gy < h + 2 && gx < w + 2) {
                const int sy = vx_mirror(gy, h), sx = vx_mirror(gx, w);
                v = (i32)prev[sy * pitch + sx] - (i32)cur[sy * pitch + sx];
            }
            diff[ty][tx] = v;
        }
    }
    __syncthreads();

    typedef typename MotionSum<T>::type Sum;
    const Sum round_y = (Sum)1 << (bpc - 1);
    for (int i = t; i < MT_H * (MT_W + 4); i += blockDim.x) {
        const int ty = i / (MT_W + 4), tx = i % (MT_W + 4);
        // 64-bit from 16-bit samples: there the sum reaches 2^32
        const Sum s = 3571 * ((Sum)diff[ty][tx] + diff[ty + 4][tx]) + 16004 * ((Sum)diff[ty + 1][tx] + diff[ty + 3][tx])
                      + 26386 * (Sum)diff[ty + 2][tx];
        vert[ty][tx] = (i32)((s + round_y) >> bpc);
    }
    __syncthreads();

    i64 acc = 0;
    for (int i = t; i < MT_H * MT_W; i += blockDim.x) {
        const int ty = i / MT_W, tx = i % MT_W;
        if (y0 + ty >= h || x0 + tx >= w) continue;
        const Sum p0 = 3571 * ((Sum)vert[ty][tx] + vert[ty][tx + 4]);
        const Sum p1 = 16004 * ((Sum)vert[ty][tx + 1] + vert[ty][tx + 3]);
        const Sum p2 = 26386 * (Sum)vert[ty][tx + 2];
        const i64 s = (i64)p0 + p1 + p2;
        i64 v = (s + 32768) >> 16;
        acc += v < 0 ? -v : v;
    }
    const i64 total = vx_block_sum_i64(acc, scratch);
    if (t == 0 && total != 0)
        vx_atomic_add_i64(out + frame * out_stride + out_index, total);
}

VX_KERNEL void vx_motion_sad_u8(const u8* luma, const u8* prev1, const u8* prev2, int gap, int w, int h,
                                i64 pitch, i64 frame_stride, int bpc, int first_frame, i64* out, int out_stride,
                                int out_index)
{
    motion_impl<u8>(luma, prev1, prev2, gap, w, h, pitch, frame_stride, bpc, first_frame, out, out_stride,
                    out_index);
}

VX_KERNEL void vx_motion_sad_u16(const u16* luma, const u16* prev1, const u16* prev2, int gap, int w, int h,
                                 i64 pitch, i64 frame_stride, int bpc, int first_frame, i64* out, int out_stride,
                                 int out_index)
{
    motion_impl<u16>(luma, prev1, prev2, gap, w, h, pitch, frame_stride, bpc, first_frame, out, out_stride,
                     out_index);
}
