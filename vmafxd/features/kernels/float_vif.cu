// Float VIF (libvmaf's "float_vif"): per scale the float sums of the
// per-pixel numerator and denominator, and the decimation to the next scale.
//
// Device twin of vmafxd.features.float_vif / _float_vif_core, op for op in
// float (contraction off): the planes as floats (sample / div - 128), a
// separable Gaussian (vertical pass first; each output `acc = 0; acc +=
// taps[k] * x[k]`, k ascending, edges mirrored without repeating the edge),
// the moments x*x, y*y, x*y filtered the same way (the product before the
// tap), libvmaf's vif_statistic_s per pixel (with its double steps and its
// polynomial log2), and the sums in libvmaf's order: a float per row, left to
// right, then the rows top to bottom into one float (the prelude's
// vx_staged_row_sums: staged in shared memory, one thread a row adding in
// order; then a block a map).  Scales: the filtered pictures at even rows and
// columns.  The host computes the scores (the CPU twin's metrics_from_stats).
//
// Plane layouts: float planes with a pitch, frame f at f * fstride; the five
// vertical-pass planes (mu1, mu2, xx, yy, xy) `plane` elements apart.

#define FV_COLS 256

// Vertical pass of row y: planes mu1, mu2 (and with all5 xx, yy, xy).
VX_KERNEL void vx_fvif_vert(const float* ref, const float* dis, i64 fstride, int w, int h, i64 pitch,
                            const float* taps, int fw, int all5, float* out, i64 ofstride, i64 opitch, i64 oplane)
{
    const int f = blockIdx.z, y = blockIdx.y, r = fw / 2;
    const float* a = ref + f * fstride;
    const float* b = dis + f * fstride;
    float* o = out + f * ofstride + y * opitch;
    for (int i = threadIdx.x; i < FV_COLS; i += blockDim.x) {
        const int x = blockIdx.x * FV_COLS + i;
        if (x >= w) break;
        float m1 = 0.0f, m2 = 0.0f, xx = 0.0f, yy = 0.0f, xy = 0.0f;
        for (int k = 0; k < fw; ++k) {
            const i64 at = (i64)vx_mirror(y - r + k, h) * pitch + x;
            const float t = taps[k], va = a[at], vb = b[at];
            m1 = m1 + t * va;
            m2 = m2 + t * vb;
            if (all5) {
                xx = xx + t * (va * va);
                yy = yy + t * (vb * vb);
                xy = xy + t * (va * vb);
            }
        }
        o[x] = m1;
        o[oplane + x] = m2;
        if (all5) {
            o[2 * oplane + x] = xx;
            o[3 * oplane + x] = yy;
            o[4 * oplane + x] = xy;
        }
    }
}

VX_DEVICE float fv_horiz(const float* row, int x, int w, const float* taps, int fw)
{
    const int r = fw / 2;
    float acc = 0.0f;
    for (int k = 0; k < fw; ++k)
        acc = acc + taps[k] * row[vx_mirror(x - r + k, w)];
    return acc;
}

union fv_bits {
    float f;
    u32 u;
};

// libvmaf's log2f_approx (VIF_OPT_FAST_LOG2): exponent plus a degree-8
// polynomial of the mantissa in [1, 2) minus one, Horner in float.
VX_DEVICE float fv_log2(float x)
{
    const float poly[9] = {-0.012671635276421f, 0.064841182402670f, -0.157048836463065f, 0.257167726303123f,
                           -0.353800560300520f, 0.480131410397451f, -0.721314327952201f, 1.442694803896991f, 0.0f};
    fv_bits c;
    c.f = x;
    const int exponent = (int)((c.u & 0x7F800000u) >> 23) - 127;
    fv_bits m;
    m.u = (c.u & 0x007FFFFFu) | 0x3F800000u;
    const float t = m.f - 1.0f;
    float v = 0.0f;
    for (int i = 0; i < 9; ++i)
        v = v * t + poly[i];
    return (float)exponent + v;
}

// Horizontal pass of the five planes and vif_statistic_s: num and den maps.
VX_KERNEL void vx_fvif_stat(const float* v5, i64 fstride, int w, i64 pitch, i64 plane, const float* taps, int fw,
                            float gain_limit, double sigma_nsq, float sigma_max_inv, float* num, float* den,
                            i64 mfstride, i64 mpitch)
{
    const int f = blockIdx.z, y = blockIdx.y;
    const float* row = v5 + f * fstride + y * pitch;
    float* on = num + f * mfstride + y * mpitch;
    float* od = den + f * mfstride + y * mpitch;
    const float eps = 1.0e-10f;
    for (int i = threadIdx.x; i < FV_COLS; i += blockDim.x) {
        const int x = blockIdx.x * FV_COLS + i;
        if (x >= w) break;
        const float mu1 = fv_horiz(row, x, w, taps, fw);
        const float mu2 = fv_horiz(row + plane, x, w, taps, fw);
        const float xx = fv_horiz(row + 2 * plane, x, w, taps, fw);
        const float yy = fv_horiz(row + 3 * plane, x, w, taps, fw);
        const float xy = fv_horiz(row + 4 * plane, x, w, taps, fw);
        float s1 = xx - mu1 * mu1;
        float s2 = yy - mu2 * mu2;
        const float s12 = xy - mu1 * mu2;
        s1 = s1 > 0.0f ? s1 : 0.0f;
        s2 = s2 > 0.0f ? s2 : 0.0f;
        float g = s12 / (s1 + eps);
        float sv = s2 - g * s12;
        if (s1 < eps) {
            g = 0.0f;
            sv = s2;
            s1 = 0.0f;
        }
        if (s2 < eps) {
            g = 0.0f;
            sv = 0.0f;
        }
        if (g < 0.0f) {
            sv = s2;
            g = 0.0f;
        }
        sv = sv > eps ? sv : eps;
        g = g < gain_limit ? g : gain_limit;
        const float gg = g * g * s1;
        float n = fv_log2((float)(1.0 + (double)gg / ((double)sv + sigma_nsq)));
        float d = fv_log2((float)(1.0 + (double)s1 / sigma_nsq));
        if (s12 < 0.0f) n = 0.0f;
        if ((double)s1 < sigma_nsq) {
            n = 1.0f - s2 * sigma_max_inv;
            d = 1.0f;
        }
        on[x] = n;
        od[x] = d;
    }
}

// The next scale: the horizontal pass of mu1/mu2 at even rows and columns.
VX_KERNEL void vx_fvif_dec(const float* v2, i64 fstride, int w, i64 pitch, i64 plane, const float* taps, int fw,
                           float* out_r, float* out_d, i64 ofstride, i64 opitch, int w2)
{
    const int f = blockIdx.z, y = blockIdx.y;
    const float* row = v2 + f * fstride + (2 * y) * pitch;
    for (int i = threadIdx.x; i < FV_COLS; i += blockDim.x) {
        const int x = blockIdx.x * FV_COLS + i;
        if (x >= w2) break;
        out_r[f * ofstride + y * opitch + x] = fv_horiz(row, 2 * x, w, taps, fw);
        out_d[f * ofstride + y * opitch + x] = fv_horiz(row + plane, 2 * x, w, taps, fw);
    }
}

// Row sums of `count` maps (maps `plane` elements apart), VX_SUM_ROWS rows a block (vx_staged_row_sums).
VX_KERNEL void vx_fvif_rows(const float* maps, i64 fstride, i64 pitch, i64 plane, int w, int h, float* rows,
                            i64 rows_fstride)
{
    vx_float_map_rows_staged(maps, fstride, pitch, plane, w, h, rows, rows_fstride);
}

// Each map's rows added top to bottom into one float, at out[frame][index + m].
VX_KERNEL void vx_fvif_total(const float* rows, i64 rows_fstride, int h, float* out, int out_stride, int out_index)
{
    vx_float_map_totals_staged(rows, rows_fstride, h, out, out_stride, out_index);
}
