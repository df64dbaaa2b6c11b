// Float ADM (libvmaf's "float_adm"): per scale the DWT, the decoupling, and
// the nine float sums the host takes p-th roots of.
//
// Device twin of vmafxd.features.float_adm / _float_adm_core, op for op in
// float (contraction off):
//   vx_fadm_dwt       adm_dwt2_s: Daubechies-2 bands (a, v, h, d) of ref and
//                     dist; taps at 2i-1 .. 2i+2 mirrored (-1 -> 1, n -> n-1).
//   vx_fadm_decouple  adm_decouple_s: restored (r) and additive (a) parts of
//                     the detail bands; divisions are libvmaf's DIVS, Intel's
//                     RCPSS estimate (a 2048-entry table, vmafxd.features._rcp)
//                     and one Newton step; the gain limit in double.
//   vx_fadm_cm        per pixel of the scored region: the masked, CSF-weighted
//                     DLM numerator and AIM numerator cubed (adm_cm_s, the
//                     3x3 thresholds in libvmaf's order, the 1/30 and 1/15
//                     products in double), and the reference's CSF-weighted
//                     detail cubed (adm_csf_den_scale_s): nine maps.
//   vx_fadm_rows/total the sums in libvmaf's order: a float per row, left to
//                     right, then the rows top to bottom (the prelude's
//                     vx_staged_row_sums: staged in shared memory, one thread
//                     a row adding in order; then a block a map).
// p-norm 3 only (other p-norms use powf, whose device and glibc results differ).

#define FA_COLS 256

VX_DEVICE int fa_dwt_index(int i, int n)
{
    if (i < 0) return -i;
    if (i >= n) return 2 * n - i - 1;
    return i;
}

VX_DEVICE float fa_fir4(const float* t, float s0, float s1, float s2, float s3)
{
    float acc = 0.0f + t[0] * s0;
    acc = acc + t[1] * s1;
    acc = acc + t[2] * s2;
    acc = acc + t[3] * s3;
    return acc;
}

// Bands of one picture: plane 0 a, 1 v, 2 h, 3 d of `out` (planes `oplane` apart).
VX_DEVICE void fa_dwt_one(const float* src, int w, int h, i64 pitch, int i, int j, float* out, i64 opitch,
                          i64 oplane)
{
    const float lo[4] = {0.482962913144690f, 0.836516303737469f, 0.224143868041857f, -0.129409522550921f};
    const float hi[4] = {-0.129409522550921f, -0.224143868041857f, 0.836516303737469f, -0.482962913144690f};
    int ys[4], xs[4];
    for (int k = 0; k < 4; ++k) {
        ys[k] = fa_dwt_index(2 * i - 1 + k, h);
        xs[k] = fa_dwt_index(2 * j - 1 + k, w);
    }
    float tl[4], th[4];
    for (int c = 0; c < 4; ++c) {
        const float s0 = src[ys[0] * pitch + xs[c]], s1 = src[ys[1] * pitch + xs[c]];
        const float s2 = src[ys[2] * pitch + xs[c]], s3 = src[ys[3] * pitch + xs[c]];
        tl[c] = fa_fir4(lo, s0, s1, s2, s3);
        th[c] = fa_fir4(hi, s0, s1, s2, s3);
    }
    const i64 o = i * opitch + j;
    out[o] = fa_fir4(lo, tl[0], tl[1], tl[2], tl[3]);
    out[oplane + o] = fa_fir4(hi, tl[0], tl[1], tl[2], tl[3]);
    out[2 * oplane + o] = fa_fir4(lo, th[0], th[1], th[2], th[3]);
    out[3 * oplane + o] = fa_fir4(hi, th[0], th[1], th[2], th[3]);
}

// ref and dist pictures (frame stride fstride) -> 8 band planes: ref a v h d, dist a v h d.
VX_KERNEL void vx_fadm_dwt(const float* ref, const float* dis, i64 fstride, int w, int h, i64 pitch, float* out,
                           i64 ofstride, i64 opitch, i64 oplane, int ow)
{
    const int f = blockIdx.z, i = blockIdx.y;
    for (int t = threadIdx.x; t < FA_COLS; t += blockDim.x) {
        const int j = blockIdx.x * FA_COLS + t;
        if (j >= ow) break;
        fa_dwt_one(ref + f * fstride, w, h, pitch, i, j, out + f * ofstride, opitch, oplane);
        fa_dwt_one(dis + f * fstride, w, h, pitch, i, j, out + f * ofstride + 4 * oplane, opitch, oplane);
    }
}

union fa_bits {
    float f;
    u32 u;
};

// Intel's _mm_rcp_ss: 12-bit mantissa from the top 11 input mantissa bits, exponent 253 - e.
VX_DEVICE float fa_rcp(float x, const u32* table)
{
    fa_bits c;
    c.f = x;
    const u32 sign = c.u & 0x80000000u;
    const int e = (int)((c.u >> 23) & 0xFFu);
    const u32 frac = c.u & 0x7FFFFFu;
    fa_bits r;
    if (e == 0) {
        r.u = sign | 0x7F800000u;                   // zero, subnormal: infinity
    } else if (e == 255) {
        r.u = frac ? (c.u | 0x00400000u) : sign;    // NaN stays NaN; infinity: zero
    } else {
        const int re = 253 - e;
        r.u = re <= 0 ? sign : (sign | ((u32)re << 23) | (table[(c.u >> 12) & 0x7FFu] << 11));
    }
    return r.f;
}

VX_DEVICE float fa_divs(float n, float d, const u32* table)
{
    const float xi = fa_rcp(d, table);
    return n * (xi + xi * (1.0f - d * xi));
}

VX_DEVICE float fa_clamp01(float k)
{
    return k < 0.0f ? 0.0f : (k > 1.0f ? 1.0f : k);
}

VX_DEVICE float fa_gain(float rst, float t, bool flag, double egl)
{
    if (flag && rst > 0.0f) {
        const double s = (double)rst * egl;
        rst = (float)(s < (double)t ? s : (double)t);
    }
    if (flag && rst < 0.0f) {
        const double s = (double)rst * egl;
        rst = (float)(s > (double)t ? s : (double)t);
    }
    return rst;
}

// bands (8 planes per frame) -> 6 planes per frame: r h v d, a h v d.
VX_KERNEL void vx_fadm_decouple(const float* bands, i64 fstride, int w, i64 pitch, i64 plane, double egl,
                                float cos_1deg_sq, const u32* table, float* ra, i64 rfstride)
{
    const int f = blockIdx.z, y = blockIdx.y;
    const float* b = bands + f * fstride + y * pitch;
    float* o = ra + f * rfstride + y * pitch;
    const float eps = 1e-30f;
    for (int t = threadIdx.x; t < FA_COLS; t += blockDim.x) {
        const int x = blockIdx.x * FA_COLS + t;
        if (x >= w) break;
        const float ov = b[plane + x], oh = b[2 * plane + x], od = b[3 * plane + x];
        const float tv = b[5 * plane + x], th = b[6 * plane + x], td = b[7 * plane + x];
        const float kh = fa_clamp01(fa_divs(th, oh + eps, table));
        const float kv = fa_clamp01(fa_divs(tv, ov + eps, table));
        const float kd = fa_clamp01(fa_divs(td, od + eps, table));
        float rh = kh * oh, rv = kv * ov, rd = kd * od;
        const float ot_dp = oh * th + ov * tv;
        const float o_mag = oh * oh + ov * ov;
        const float t_mag = th * th + tv * tv;
        const bool flag = (ot_dp >= 0.0f) && (ot_dp * ot_dp >= cos_1deg_sq * o_mag * t_mag);
        rh = fa_gain(rh, th, flag, egl);
        rv = fa_gain(rv, tv, flag, egl);
        rd = fa_gain(rd, td, flag, egl);
        o[x] = rh;
        o[plane + x] = rv;
        o[2 * plane + x] = rd;
        o[3 * plane + x] = th - rh;
        o[4 * plane + x] = tv - rv;
        o[5 * plane + x] = td - rd;
    }
}

// The masking window's neighbour index: -1 reads 1, n reads n - 1.
VX_DEVICE int fa_cm_index(int i, int n)
{
    if (i < 0) return 1;
    if (i >= n) return n - 1;
    return i;
}

// |rf * v| / 30, the product in double (FLOAT_ONE_BY_30 is a double literal).
VX_DEVICE float fa_flt(float rf, float v)
{
    const float c = rf * v;
    return (float)(0.0333333351 * (double)(c < 0.0f ? -c : c));
}

// The masking threshold at (y, x) from the three angle planes `m` (r or a).
VX_DEVICE float fa_threshold(const float* m, i64 pitch, i64 plane, int w, int h, int y, int x, const float* rf)
{
    float thr = 0.0f;
    for (int th = 0; th < 3; ++th) {
        const float* p = m + th * plane;
        float s = 0.0f;
        for (int dy = -1; dy <= 1; ++dy) {
            const int yy = fa_cm_index(y + dy, h);
            for (int dx = -1; dx <= 1; ++dx) {
                if (dy == 0 && dx == 0) {
                    const float c = rf[th] * p[y * pitch + x];
                    s = (float)((double)s + 0.0666666701 * (double)(c < 0.0f ? -c : c));
                } else {
                    s = s + fa_flt(rf[th], p[yy * pitch + fa_cm_index(x + dx, w)]);
                }
            }
        }
        thr = thr + s;
    }
    return thr;
}

VX_DEVICE float fa_cube(float x)
{
    return x * x * x;
}

// Nine maps over the region [top, top + rh) x [left, left + rw): DLM num h v d,
// den h v d, AIM num h v d.  bands: 8 planes (ref a v h d ...); ra: r h v d, a h v d.
VX_KERNEL void vx_fadm_cm(const float* bands, const float* ra, i64 fstride, i64 rfstride, int w, int h, i64 pitch,
                          i64 plane, float rf0, float rf1, float rf2, int top, int left, int rw, int bypass,
                          float* maps, i64 mfstride, i64 mpitch, i64 mplane)
{
    const int f = blockIdx.z, ry = blockIdx.y, y = top + ry;
    const float rf[3] = {rf0, rf1, rf2};
    const float* r = ra + f * rfstride;
    const float* a = r + 3 * plane;
    const float* ref = bands + f * fstride;
    float* o = maps + f * mfstride + ry * mpitch;
    for (int t = threadIdx.x; t < FA_COLS; t += blockDim.x) {
        const int rx = blockIdx.x * FA_COLS + t;
        if (rx >= rw) break;
        const int x = left + rx;
        const i64 at = y * pitch + x;
        const float thr_num = bypass ? 0.0f : fa_threshold(a, pitch, plane, w, h, y, x, rf);
        const float thr_aim = bypass ? 0.0f : fa_threshold(r, pitch, plane, w, h, y, x, rf);
        // reference detail bands in h, v, d order: planes 2, 1, 3
        const int ref_plane[3] = {2, 1, 3};
        for (int th = 0; th < 3; ++th) {
            float xn = r[th * plane + at] * rf[th];
            xn = (xn < 0.0f ? -xn : xn) - thr_num;
            xn = xn < 0.0f ? 0.0f : xn;
            float xa = a[th * plane + at] * rf[th];
            xa = (xa < 0.0f ? -xa : xa) - thr_aim;
            xa = xa < 0.0f ? 0.0f : xa;
            float xd = rf[th] * ref[ref_plane[th] * plane + at];
            xd = xd < 0.0f ? -xd : xd;
            o[th * mplane + rx] = fa_cube(xn);
            o[(3 + th) * mplane + rx] = fa_cube(xd);
            o[(6 + th) * mplane + rx] = fa_cube(xa);
        }
    }
}

// Row sums of the nine maps, VX_SUM_ROWS rows a block (vx_staged_row_sums).
VX_KERNEL void vx_fadm_rows(const float* maps, i64 mfstride, i64 mpitch, i64 mplane, int rw, int rh, float* rows,
                            i64 rows_fstride)
{
    vx_float_map_rows_staged(maps, mfstride, mpitch, mplane, rw, rh, rows, rows_fstride);
}

// Each map's rows top to bottom into one float, at out[frame][index + m].
VX_KERNEL void vx_fadm_total(const float* rows, i64 rows_fstride, int rh, float* out, int out_stride, int out_index)
{
    vx_float_map_totals_staged(rows, rows_fstride, rh, out, out_stride, out_index);
}
