// Float ANSNR (libvmaf's "float_ansnr"): the filtered luma planes' float sums
// sig = sum ref_f^2 and noise = sum (ref_f - dis_f)^2, per frame.
//
// Device twin of vmafxd.features.float_ansnr.signal_noise.  The luma as floats
// (sample / div - 128, div 0 meaning none); ref_f is the 3x3 kernel of the
// reference, dis_f the 5x5 kernel of the distorted picture, each as
// ansnr_filter2d_s computes it: per kernel row a float sum left to right
// (`inner = 0; inner += f * x`), the rows added top to bottom into `accum`,
// with its edges (-i above the top, 2n - i - 1 below the bottom).  The two
// maps are summed as libvmaf sums them: a float per row, left to right, then
// the rows top to bottom (the prelude's vx_float_map_rows / _totals).
// Records: out[f * out_stride + out_index] = sig, [... + 1] = noise.

#define FA_COLS 256

// ansnr_filter2d_s's edges: unlike vx_mirror, the bottom and right edges repeat the edge sample.
VX_DEVICE int fa_mirror(int i, int n)
{
    if (i < 0) return -i;
    if (i >= n) return 2 * n - i - 1;
    return i;
}

template <typename T>
VX_DEVICE float fa_filter(const T* src, i64 pitch, int w, int h, int y, int x, float div, const float* f, int fw)
{
    float accum = 0.0f;
    for (int fi = 0; fi < fw; ++fi) {
        const T* row = src + (i64)fa_mirror(y - fw / 2 + fi, h) * pitch;
        float inner = 0.0f;
        for (int fj = 0; fj < fw; ++fj)
            inner = inner + f[fi * fw + fj] * vx_float_sample(row[fa_mirror(x - fw / 2 + fj, w)], div);
        accum = accum + inner;
    }
    return accum;
}

// Block (x, y, f): FA_COLS columns of row y of frame f into maps 0 (ref_f^2) and 1 ((ref_f - dis_f)^2).
template <typename T>
VX_DEVICE void fa_maps(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div,
                       const float* fref, const float* fdis, float* maps, i64 mstride, i64 mpitch, i64 mplane)
{
    const int f = blockIdx.z, y = blockIdx.y;
    const T* r = ref + f * fstride;
    const T* d = dis + f * fstride;
    float* sig = maps + f * mstride + y * mpitch;
    float* noise = sig + mplane;
    for (int i = threadIdx.x; i < FA_COLS; i += blockDim.x) {
        const int x = blockIdx.x * FA_COLS + i;
        if (x >= w) break;
        const float rf = fa_filter(r, pitch, w, h, y, x, div, fref, 3);
        const float df = fa_filter(d, pitch, w, h, y, x, div, fdis, 5);
        const float e = rf - df;
        sig[x] = rf * rf;
        noise[x] = e * e;
    }
}

VX_KERNEL void vx_fansnr_maps_u8(const u8* ref, const u8* dis, i64 fstride, int w, int h, i64 pitch, float div,
                                 const float* fref, const float* fdis, float* maps, i64 mstride, i64 mpitch,
                                 i64 mplane)
{
    fa_maps<u8>(ref, dis, fstride, w, h, pitch, div, fref, fdis, maps, mstride, mpitch, mplane);
}

VX_KERNEL void vx_fansnr_maps_u16(const u16* ref, const u16* dis, i64 fstride, int w, int h, i64 pitch, float div,
                                  const float* fref, const float* fdis, float* maps, i64 mstride, i64 mpitch,
                                  i64 mplane)
{
    fa_maps<u16>(ref, dis, fstride, w, h, pitch, div, fref, fdis, maps, mstride, mpitch, mplane);
}

VX_KERNEL void vx_fansnr_rows(const float* maps, i64 fstride, i64 pitch, i64 plane, int w, int h, float* rows,
                              i64 rows_fstride)
{
    vx_float_map_rows<FA_COLS>(maps, fstride, pitch, plane, w, h, rows, rows_fstride);
}

VX_KERNEL void vx_fansnr_total(const float* rows, i64 rows_fstride, int h, float* out, int out_stride, int out_index)
{
    vx_float_map_totals(rows, rows_fstride, h, out, out_stride, out_index);
}
