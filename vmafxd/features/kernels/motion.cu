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

// Output tile of a block.  64 rows (16 before): a block's fixed work -- the block sum of its
// 256 partial SADs, the 4 halo rows staged and filtered twice -- is spread over 4096 outputs
// instead of 1024 (halo: 68 x 68 staged differences for 64 x 64 outputs, 1.13 a pixel,
// against 1.33), and a 1080p frame is 510 blocks instead of 2,040.  The host's grid uses the
// same (vmafxd/lanes/gpu/motion.py _TILE_H).
#define MT_W 64          // output columns per block
#ifndef MT_H
#define MT_H 64          // output rows per block
#endif
#define MT_THREADS 256
// Staged columns x0-2 .. x0+MT_W+1: MT_SW i32 a row, 17 runs of 4 (rows 16-byte aligned).
#define MT_SW (MT_W + 4)
#define MT_SQ (MT_SW / 4)
#ifndef MT_AHEAD
#define MT_AHEAD 5       // staged quads whose loads a thread issues together
#endif

// Each thread takes runs of 4 columns of a row (a 16-byte shared access each): the
// vertical pass reads a run from 5 staged rows and writes one run; the horizontal pass
// reads 8 consecutive blurred values (two runs) for 4 outputs.  So a pixel costs about
// 1.5 shared loads instead of 10, and its index arithmetic is shared by four: about 41
// instructions a pixel (sm_90 SASS) against 78 with one output an item, which was
// issue-bound (82 % of issue slots, ncu); on the H200, 248 -> 184 us a 1080p 8-bit batch of
// 32 (ncu, docs/gpu-runs.md, fifteenth session).
//
// Products and sums of the two passes.  From 8-bit samples the vertical pass fits 32
// bits: a difference is within +-255, so its sum is within 2^16 * 255 = 16,711,680.  From
// 16-bit samples it is 64-bit.  A vertical result stays within 2^16 in magnitude at every
// bit depth whose samples keep to it ((2^16 (2^bpc - 1) + 2^(bpc-1)) >> bpc), 2^22 with
// stray high bits in 16-bit words; the horizontal sum of 65536 of them needs 64 bits: its
// products are i32 x constant -> i64 (one widening multiply-add each).  A horizontal
// result is within 2^16 (2^22), so a thread's sum of its 16 (4,096 on the emulator's
// one-thread blocks) fits i32 from 8-bit samples; from 16-bit ones it is i64.
template <typename T> struct MotionSum { typedef i64 type; };
template <> struct MotionSum<u8> { typedef i32 type; };

// the vertical 5 taps of one column, rounded and shifted by the bit depth
template <typename Sum>
VX_DEVICE i32 motion_vert(i32 a, i32 b, i32 c, i32 d, i32 e, Sum round, int bpc)
{
    const Sum s = 3571 * (Sum)(a + e) + 16004 * (Sum)(b + d) + 26386 * (Sum)c;
    return (i32)((s + round) >> bpc);
}

// |the horizontal 5 taps, + 2^15, >> 16|
template <typename Sum>
VX_DEVICE Sum motion_horiz_abs(i32 a, i32 b, i32 c, i32 d, i32 e)
{
    const i64 s = (i64)(a + e) * 3571 + ((i64)(b + d) * 16004 + ((i64)c * 26386 + 32768));
    const Sum v = (Sum)(s >> 16);
    return v < 0 ? -v : v;
}

template <typename T>
VX_DEVICE void motion_impl(const T* luma, const T* prev1, const T* prev2, int gap, int w, int h, i64 pitch,
                           i64 frame_stride, int bpc, int first_frame, i64* out, int out_stride, int out_index)
{
    __shared__ VX_ALIGN(16) i32 diff[(MT_H + 4) * MT_SW];
    __shared__ VX_ALIGN(16) i32 vert[MT_H * MT_SW];
    __shared__ i64 scratch[MT_THREADS];
    const int frame = blockIdx.z + first_frame;
    const T* cur = luma + frame * frame_stride;
    const int src = frame - gap;
    const T* prev = src >= 0 ? luma + src * frame_stride : (src == -1 ? prev1 : prev2);
    const int x0 = blockIdx.x * MT_W, y0 = blockIdx.y * MT_H;
    const int t = threadIdx.x;

    // Blocks whose rows y0-2 .. y0+MT_H+1 and columns x0-4 .. x0+MT_W+3 lie inside the picture,
    // with rows aligned to 4 samples, load 4 samples a load (vx_load_quad) from x0 - 4 (a multiple
    // of 4) and keep columns x0-2 .. x0+MT_W+1: no mirror, no bounds, the same differences.  A
    // load's 4 differences are staged columns 4q-2 .. 4q+1: two 8-byte stores.
    typedef typename VxQuad<T>::type Q;
    const u64 align = 4 * sizeof(T) - 1;
    if (y0 >= 2 && y0 + MT_H + 2 <= h && x0 >= 4 && x0 + MT_W + 4 <= w &&
        (((u64)prev | (u64)cur) & align) == 0 && ((u64)pitch & 3) == 0) {
        const int bits = 8 * (int)sizeof(T);
        const Q mask = ((Q)1 << bits) - 1;
        const int QW = (MT_W + 8) / 4, n = (MT_H + 4) * QW;  // quads a row, quads
        // a thread issues the loads of MT_AHEAD quads before it stores any (one trip to memory
        // for them instead of one a quad; 5 quads a thread)
        for (int i0 = t; i0 < n; i0 += MT_AHEAD * blockDim.x) {
            Q a[MT_AHEAD], b[MT_AHEAD];
#pragma unroll
            for (int g = 0; g < MT_AHEAD; ++g) {
                const int i = i0 + g * blockDim.x;
                if (i < n) {
                    const i64 o = (i64)(y0 + i / QW - 2) * pitch + x0 - 4 + 4 * (i % QW);
                    a[g] = vx_load_quad(prev + o);
                    b[g] = vx_load_quad(cur + o);
                }
            }
#pragma unroll
            for (int g = 0; g < MT_AHEAD; ++g) {
                const int i = i0 + g * blockDim.x;
                if (i >= n)
                    continue;
                const int ty = i / QW, q = i % QW;
                i32 dq[4];
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    dq[k] = (i32)((a[g] >> (bits * k)) & mask) - (i32)((b[g] >> (bits * k)) & mask);
                i32* row = diff + ty * MT_SW + 4 * q;
                if (q > 0)
                    vx_st_vec<VxI32x2>(row - 2, VxI32x2{dq[0], dq[1]});
                if (q < QW - 1)
                    vx_st_vec<VxI32x2>(row, VxI32x2{dq[2], dq[3]});
            }
        }
    } else {
        for (int i = t; i < (MT_H + 4) * MT_SW; i += blockDim.x) {
            const int ty = i / MT_SW, tx = i % MT_SW;
            const int gy = y0 + ty - 2, gx = x0 + tx - 2;
            i32 v = 0;
            if (gy < h + 2 && gx < w + 2) {
                const int sy = vx_mirror(gy, h), sx = vx_mirror(gx, w);
                v = (i32)prev[sy * pitch + sx] - (i32)cur[sy * pitch + sx];
            }
            diff[ty * MT_SW + tx] = v;
        }
    }
    __syncthreads();

    typedef typename MotionSum<T>::type Sum;
    const Sum round_y = (Sum)1 << (bpc - 1);
    // item i: row i / MT_SQ, columns 4 (i % MT_SQ) ..: its runs lie 16 i bytes into each row
    for (int i = t; i < MT_H * MT_SQ; i += blockDim.x) {
        const int ty = i / MT_SQ, k = i % MT_SQ;
        const i32* s = diff + ty * MT_SW + 4 * k;
        const VxI32x4 r0 = vx_ld_vec<VxI32x4>(s), r1 = vx_ld_vec<VxI32x4>(s + MT_SW),
                      r2 = vx_ld_vec<VxI32x4>(s + 2 * MT_SW), r3 = vx_ld_vec<VxI32x4>(s + 3 * MT_SW),
                      r4 = vx_ld_vec<VxI32x4>(s + 4 * MT_SW);
        const VxI32x4 o = {motion_vert<Sum>(r0.x, r1.x, r2.x, r3.x, r4.x, round_y, bpc),
                           motion_vert<Sum>(r0.y, r1.y, r2.y, r3.y, r4.y, round_y, bpc),
                           motion_vert<Sum>(r0.z, r1.z, r2.z, r3.z, r4.z, round_y, bpc),
                           motion_vert<Sum>(r0.w, r1.w, r2.w, r3.w, r4.w, round_y, bpc)};
        vx_st_vec<VxI32x4>(vert + ty * MT_SW + 4 * k, o);
    }
    __syncthreads();

    // item i: row i / (MT_W / 4), outputs x0 + 4 k .. + 3 (k = i % (MT_W / 4)), which read
    // staged columns 4 k .. 4 k + 7
    Sum acc = 0;
    for (int i = t; i < MT_H * (MT_W / 4); i += blockDim.x) {
        const int ty = i / (MT_W / 4), k = i % (MT_W / 4);
        const int left = w - (x0 + 4 * k);  // outputs of the run inside the picture
        if (y0 + ty >= h || left <= 0)
            continue;
        const i32* s = vert + ty * MT_SW + 4 * k;
        const VxI32x4 p = vx_ld_vec<VxI32x4>(s), q = vx_ld_vec<VxI32x4>(s + 4);
        const Sum v1 = motion_horiz_abs<Sum>(p.y, p.z, p.w, q.x, q.y);
        const Sum v2 = motion_horiz_abs<Sum>(p.z, p.w, q.x, q.y, q.z);
        const Sum v3 = motion_horiz_abs<Sum>(p.w, q.x, q.y, q.z, q.w);
        acc += motion_horiz_abs<Sum>(p.x, p.y, p.z, p.w, q.x) + (left > 1 ? v1 : 0) + (left > 2 ? v2 : 0) +
               (left > 3 ? v3 : 0);
    }
    const i64 total = vx_block_sum_i64((i64)acc, scratch);
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
