// Float PSNR (libvmaf's "float_psnr") at 16 bits: the double sum of squared
// float differences of the luma, in libvmaf's order.
//
// Device twin of vmafxd.features.float_psnr.noise_sum.  Up to 12 bits every
// term is exact and no addition of the sum rounds, so the GPU twin takes the
// integer sum of squared sample differences (psnr.cu) and scales it on the
// host (float_psnr.noise_from_sse).  At 16 bits (k / 256)^2 rounds in float
// and the double sum can round, so its value depends on the order of the
// additions: one thread per frame adds the terms row by row, left to right,
// as psnr.c does.  Slow (the frame's samples one after another), but the
// frames of a batch run side by side, and only 16-bit input takes this path.

VX_KERNEL void vx_fpsnr_noise_seq_u16(const u16* ref, const u16* dis, int w, int h, i64 pitch, i64 fstride,
                                      float div, double* out, int out_stride, int out_index)
{
    if (threadIdx.x != 0) return;
    const int f = blockIdx.z;
    const u16* a = ref + f * fstride;
    const u16* b = dis + f * fstride;
    double noise = 0.0;
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            // picture_copy with offset 0: sample / scaler (adding 0 changes no non-negative float)
            const float d = (float)a[(i64)y * pitch + x] / div - (float)b[(i64)y * pitch + x] / div;
            const float sq = d * d;
            noise += sq;
        }
    }
    out[f * out_stride + out_index] = noise;
}
