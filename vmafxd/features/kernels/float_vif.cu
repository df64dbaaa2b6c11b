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
// Plane layouts: float planes with a pitch, frame f at f * fstride; the
// vertical-pass planes (mu1, mu2) `plane` elements apart (the decimation's;
// the statistics' five planes stay in shared memory: vx_fvif_stat).

#define FV_COLS 256

// The vertical pass at (x, y): mu1, mu2 (and with all5 xx, yy, xy) into v[0..4].
VX_DEVICE void fv_vert_at(const float* a, const float* b, int x, int y, int h, i64 pitch, const float* taps, int fw,
                          int all5, float* v)
{
    const int r = fw / 2;
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
    v[0] = m1;
    v[1] = m2;
    v[2] = xx;
    v[3] = yy;
    v[4] = xy;
}

// Vertical pass of row y: planes mu1, mu2 (and with all5 xx, yy, xy).
VX_KERNEL void vx_fvif_vert(const float* ref, const float* dis, i64 fstride, int w, int h, i64 pitch,
                            const float* taps, int fw, int all5, float* out, i64 ofstride, i64 opitch, i64 oplane)
{
    const int f = blockIdx.z, y = blockIdx.y;
    const float* a = ref + f * fstride;
    const float* b = dis + f * fstride;
    float* o = out + f * ofstride + y * opitch;
    for (int i = threadIdx.x; i < FV_COLS; i += blockDim.x) {
        const int x = blockIdx.x * FV_COLS + i;
        if (x >= w) break;
        float v[5];
        fv_vert_at(a, b, x, y, h, pitch, taps, fw, all5, v);
        o[x] = v[0];
        o[oplane + x] = v[1];
        if (all5) {
            o[2 * oplane + x] = v[2];
            o[3 * oplane + x] = v[3];
            o[4 * oplane + x] = v[4];
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

// vif_statistic_s of one pixel's filtered values: its numerator and denominator terms.
VX_DEVICE void fv_stat(float mu1, float mu2, float xx, float yy, float xy, float gain_limit, double sigma_nsq,
                       float sigma_max_inv, float* num, float* den)
{
    const float eps = 1.0e-10f;
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
    *num = n;
    *den = d;
}

// The widest filter's radius (65 taps: vif_kernelscale 4 at scale 0)
#define FV_HALO 32

// The vertical pass of all five planes, the horizontal pass and vif_statistic_s
// in one kernel: block (x, y, f) computes the vertical pass of the columns its
// FV_COLS pixels' horizontal pass reads (x0 - r .. x0 + FV_COLS - 1 + r, each
// mirrored as fv_horiz mirrors it) into shared memory, then the horizontal pass
// from there: the five planes never go through global memory.  Every value is
// the same operations on the same inputs as a vertical then a horizontal kernel.
VX_KERNEL void vx_fvif_stat(const float* ref, const float* dis, i64 fstride, int w, int h, i64 pitch,
                            const float* taps, int fw, float gain_limit, double sigma_nsq, float sigma_max_inv,
                            float* num, float* den, i64 mfstride, i64 mpitch)
{
    __shared__ float tile[5][FV_COLS + 2 * FV_HALO];
    const int f = blockIdx.z, y = blockIdx.y, r = fw / 2;
    const int x0 = blockIdx.x * FV_COLS;
    const int end = x0 + FV_COLS < w ? x0 + FV_COLS : w;
    const float* a = ref + f * fstride;
    const float* b = dis + f * fstride;
    for (int i = threadIdx.x; i < end - x0 + 2 * r; i += blockDim.x) {
        float v[5];
        fv_vert_at(a, b, vx_mirror(x0 - r + i, w), y, h, pitch, taps, fw, 1, v);
        for (int p = 0; p < 5; ++p)
            tile[p][i] = v[p];
    }
    __syncthreads();
    float* on = num + f * mfstride + y * mpitch;
    float* od = den + f * mfstride + y * mpitch;
    for (int i = threadIdx.x; i < end - x0; i += blockDim.x) {
        float m[5];
        for (int p = 0; p < 5; ++p) {  // fv_horiz's sum, reading the tile
            float acc = 0.0f;
            for (int k = 0; k < fw; ++k)
                acc = acc + taps[k] * tile[p][i + k];
            m[p] = acc;
        }
        fv_stat(m[0], m[1], m[2], m[3], m[4], gain_limit, sigma_nsq, sigma_max_inv, on + x0 + i, od + x0 + i);
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
