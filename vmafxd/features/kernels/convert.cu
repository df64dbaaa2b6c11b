// Gather and convert the planes of a batch of imported frames into the
// lane's planar staging buffers: one launch for the whole batch.
//
// Each copy job is 8 u64 words: src pointer, src pitch (bytes), source kind,
// width, height (samples to produce), dst pointer, dst pitch (elements), 0.
// Source kinds (what a buffer's plane holds -> what scoring reads):
//   0: planar 8-bit          -> u8
//   1: planar 16-bit (LE)    -> u16, as is (10-bit samples 0..1023)
//   2: NV12 CbCr, take Cb    -> u8 (even bytes)
//   3: NV12 CbCr, take Cr    -> u8 (odd bytes)
//   4: P010 luma             -> u16 >> 6 (P010 keeps 10 bits in the high bits)
//   5: P010 CbCr, take Cb    -> u16 >> 6
//   6: P010 CbCr, take Cr    -> u16 >> 6
// This is the device twin of vmafxd.core.picture.picture_from_buffer.

#define VX_CONVERT_ROWS 4

VX_KERNEL void vx_convert(const u64* jobs, int njobs)
{
    const int job = blockIdx.y;
    if (job >= njobs) return;
    const u64* j = jobs + 8 * job;
    const u8* src = (const u8*)j[0];
    const i64 src_pitch = (i64)j[1];
    const int kind = (int)j[2];
    const int width = (int)j[3];
    const int height = (int)j[4];
    const i64 dst_pitch = (i64)j[6];
    const int row0 = blockIdx.x * VX_CONVERT_ROWS;
    const int elem = (kind == 0 || kind == 2 || kind == 3) ? 1 : 2;
    for (int r = row0; r < row0 + VX_CONVERT_ROWS && r < height; ++r) {
        const u8* s = src + r * src_pitch;
        u8* drow = (u8*)j[5] + r * dst_pitch * elem;
        if ((kind == 0 || kind == 1) && (((u64)s | (u64)drow) & 7) == 0) {
            // a row copied as it is, both ends 8-byte aligned (the usual pitches): 8 bytes a thread
            const int bytes = width * elem, words = bytes >> 3;
            for (int x = threadIdx.x; x < words; x += blockDim.x) ((u64*)drow)[x] = ((const u64*)s)[x];
            for (int x = (words << 3) + threadIdx.x; x < bytes; x += blockDim.x) drow[x] = s[x];
            continue;
        }
        if (kind == 0 || kind == 2 || kind == 3) {
            u8* d = (u8*)j[5] + r * dst_pitch;
            for (int x = threadIdx.x; x < width; x += blockDim.x) {
                u8 v;
                if (kind == 0) v = s[x];
                else v = s[2 * x + (kind - 2)];
                d[x] = v;
            }
        } else {
            const u16* s16 = (const u16*)s;
            u16* d = (u16*)j[5] + r * dst_pitch;
            for (int x = threadIdx.x; x < width; x += blockDim.x) {
                u16 v;
                if (kind == 1) v = s16[x];
                else if (kind == 4) v = (u16)(s16[x] >> 6);
                else v = (u16)(s16[2 * x + (kind - 5)] >> 6);
                d[x] = v;
            }
        }
    }
}
