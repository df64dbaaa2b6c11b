// Float ADM (libvmaf's "float_adm"): per scale the DWT, the decoupling, and
// the nine float sums the host takes p-th roots of.
//
// Device twin of vmafxd.features.float_adm / _float_adm_core, op for op in
// float (contraction off).  Two kernels a scale, then the totals:
//   vx_fadm_bands_*   adm_dwt2_s and adm_decouple_s at once.  Scale 0 reads the
//                     staged samples (u8 or u16) and converts each as libvmaf's
//                     picture_copy does (sample / div - 128, the prelude's
//                     vx_float_sample: the float picture is never stored);
//                     scales 1..3 read the previous scale's a bands.  Block
//                     (x, i, f) runs the vertical pass of the input columns its
//                     FA_COLS outputs of band row i read (2 j - 1 .. 2 j + 2,
//                     mirrored -1 -> 1, n -> n - 1) into shared memory, then the
//                     horizontal pass from there: the Daubechies-2 bands a, v, h,
//                     d of both pictures.  With them in registers it decouples:
//                     restored (r) and additive (a) parts of the detail bands;
//                     divisions are libvmaf's DIVS, Intel's RCPSS estimate (a
//                     2048-entry table, vmafxd.features._rcp) and one Newton
//                     step; the gain limit in double.  It writes the two a bands
//                     (the next scale's input) and, in the scored region and its
//                     one-sample halo, the reference's v, h, d (the denominator's)
//                     and r, a: the distorted detail bands never reach memory.
//   vx_fadm_cm_rows   adm_cm_s and adm_csf_den_scale_s over the scored region
//                     and their row sums at once: block (g, 0, f) takes
//                     FA_CM_ROWS region rows, FA_CM_COLS columns at a time.  It
//                     stages each masking neighbour's |rf x| / 30 (a product in
//                     double: FLOAT_ONE_BY_30 is a double literal) once per
//                     value, with a one-sample halo, in shared memory; then per
//                     pixel the two thresholds (the 3x3 window in libvmaf's
//                     order, the centre's 1/15 product in double) and the nine
//                     cubes (DLM numerator h v d, the reference's CSF-weighted
//                     detail h v d, AIM numerator h v d) into shared memory; then
//                     one thread a (map, row) adds them to its row's running
//                     float, left to right: libvmaf's float per row.  The maps
//                     never reach memory.
//   vx_fadm_total     each map's rows top to bottom into one float (the prelude's
//                     vx_float_map_totals_staged).
// p-norm 3 only (other p-norms use powf, whose device and glibc results differ).

#define FA_COLS 256
// input columns of a block's FA_COLS outputs: 2 j0 - 1 .. 2 (j0 + FA_COLS - 1) + 2
#define FA_TILE (2 * FA_COLS + 2)

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

// An input value of the DWT: a staged sample converted as picture_copy does, or
// a float band value (scales 1..3) as it is.
VX_DEVICE float fa_input(const u8* p, i64 i, float div)
{
    return vx_float_sample(p[i], div);
}

VX_DEVICE float fa_input(const u16* p, i64 i, float div)
{
    return vx_float_sample(p[i], div);
}

VX_DEVICE float fa_input(const float* p, i64 i, float)
{
    return p[i];
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

// adm_decouple_s at one position: reference detail (ov, oh, od), distorted (tv, th, td)
// -> ra planes 0..5 at `o` (planes `plane` apart): r h v d, a h v d.
VX_DEVICE void fa_decouple(float ov, float oh, float od, float tv, float th, float td, double egl,
                           float cos_1deg_sq, const u32* table, float* o, i64 plane)
{
    const float eps = 1e-30f;
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
    o[0] = rh;
    o[plane] = rv;
    o[2 * plane] = rd;
    o[3 * plane] = th - rh;
    o[4 * plane] = tv - rv;
    o[5 * plane] = td - rd;
}

// One scale's bands of both pictures (frames `fstride` apart, w x h, row pitch `pitch`)
// -> `bands` (5 planes a frame: ref a v h d, dist a) and `ra` (6 planes: r h v d, a h v d;
// the same pitch and plane size).  The a bands are written everywhere (the next scale
// reads them all); the reference's detail and r, a only in the window [wy0, wy1) x
// [wx0, wx1): the scored region and the masking window's one-sample halo (clipped to
// the band; the halo's mirrored reads, -1 -> 1 and n -> n - 1, land inside it), all
// the masking kernel reads.  An empty window (a skipped scale 0) writes the a bands
// alone.  Block (x, i, f): band row i, columns from x * FA_COLS.
template <typename T>
VX_DEVICE void fa_bands(const T* ref, const T* dis, i64 fstride, int w, int h, i64 pitch, float div, int ow,
                        float* bands, i64 bfstride, i64 bpitch, i64 bplane, int wy0, int wy1, int wx0, int wx1,
                        double egl,
                        float cos_1deg_sq, const u32* table, float* ra, i64 rafstride)
{
    // vertical passes of the block's input columns: ref lo, ref hi, dist lo, dist hi
    __shared__ float vt[4][FA_TILE];
    const float lo[4] = {0.482962913144690f, 0.836516303737469f, 0.224143868041857f, -0.129409522550921f};
    const float hi[4] = {-0.129409522550921f, -0.224143868041857f, 0.836516303737469f, -0.482962913144690f};
    const int f = blockIdx.z, i = blockIdx.y, j0 = blockIdx.x * FA_COLS;
    const int j1 = j0 + FA_COLS < ow ? j0 + FA_COLS : ow;
    // input column 2 j0 - 1 + c for c < 2 (j1 - j0) + 2 <= FA_TILE
    const int ncols = 2 * (j1 - j0) + 2;
    const i64 y0 = fa_dwt_index(2 * i - 1, h) * pitch, y1 = fa_dwt_index(2 * i, h) * pitch;
    const i64 y2 = fa_dwt_index(2 * i + 1, h) * pitch, y3 = fa_dwt_index(2 * i + 2, h) * pitch;
    const T* r = ref + f * fstride;
    const T* d = dis + f * fstride;
    for (int c = threadIdx.x; c < ncols; c += blockDim.x) {
        const int x = fa_dwt_index(2 * j0 - 1 + c, w);
        float s0 = fa_input(r, y0 + x, div), s1 = fa_input(r, y1 + x, div);
        float s2 = fa_input(r, y2 + x, div), s3 = fa_input(r, y3 + x, div);
        vt[0][c] = fa_fir4(lo, s0, s1, s2, s3);
        vt[1][c] = fa_fir4(hi, s0, s1, s2, s3);
        s0 = fa_input(d, y0 + x, div);
        s1 = fa_input(d, y1 + x, div);
        s2 = fa_input(d, y2 + x, div);
        s3 = fa_input(d, y3 + x, div);
        vt[2][c] = fa_fir4(lo, s0, s1, s2, s3);
        vt[3][c] = fa_fir4(hi, s0, s1, s2, s3);
    }
    __syncthreads();
    float* b = bands + f * bfstride + i * bpitch;
    for (int t = threadIdx.x; t < j1 - j0; t += blockDim.x) {
        const int j = j0 + t, c = 2 * t;
        // output j reads input columns 2 j - 1 .. 2 j + 2: vt[.][c .. c + 3]
        const float* rl = vt[0] + c;
        const float* rh = vt[1] + c;
        const float* dl = vt[2] + c;
        const float* dh = vt[3] + c;
        b[j] = fa_fir4(lo, rl[0], rl[1], rl[2], rl[3]);
        b[4 * bplane + j] = fa_fir4(lo, dl[0], dl[1], dl[2], dl[3]);
        if (i < wy0 || i >= wy1 || j < wx0 || j >= wx1) continue;
        const float ov = fa_fir4(hi, rl[0], rl[1], rl[2], rl[3]);
        const float oh = fa_fir4(lo, rh[0], rh[1], rh[2], rh[3]);
        const float od = fa_fir4(hi, rh[0], rh[1], rh[2], rh[3]);
        const float tv = fa_fir4(hi, dl[0], dl[1], dl[2], dl[3]);
        const float th = fa_fir4(lo, dh[0], dh[1], dh[2], dh[3]);
        const float td = fa_fir4(hi, dh[0], dh[1], dh[2], dh[3]);
        b[bplane + j] = ov;
        b[2 * bplane + j] = oh;
        b[3 * bplane + j] = od;
        fa_decouple(ov, oh, od, tv, th, td, egl, cos_1deg_sq, table, ra + f * rafstride + i * bpitch + j, bplane);
    }
}

#define FA_BANDS_ARGS                                                                                      \
    i64 fstride, int w, int h, i64 pitch, float div, int ow, float *bands, i64 bfstride, i64 bpitch,        \
        i64 bplane, int wy0, int wy1, int wx0, int wx1, double egl, float cos_1deg_sq, const u32 *table,    \
        float *ra, i64 rafstride
#define FA_BANDS_PASS                                                                                      \
    fstride, w, h, pitch, div, ow, bands, bfstride, bpitch, bplane, wy0, wy1, wx0, wx1, egl, cos_1deg_sq,   \
        table, ra, rafstride

VX_KERNEL void vx_fadm_bands_u8(const u8* ref, const u8* dis, FA_BANDS_ARGS)
{
    fa_bands<u8>(ref, dis, FA_BANDS_PASS);
}

VX_KERNEL void vx_fadm_bands_u16(const u16* ref, const u16* dis, FA_BANDS_ARGS)
{
    fa_bands<u16>(ref, dis, FA_BANDS_PASS);
}

VX_KERNEL void vx_fadm_bands_f32(const float* ref, const float* dis, FA_BANDS_ARGS)
{
    fa_bands<float>(ref, dis, FA_BANDS_PASS);
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

VX_DEVICE float fa_cube(float x)
{
    return x * x * x;
}

// The masking and row-sum block: FA_CM_ROWS region rows, FA_CM_COLS columns at a time;
// with the neighbours' one-sample halo on every side the window is FA_CM_TH x FA_CM_TW,
// and FA_CM_TW = 64 splits a flat index k into row k >> 6 and column k & 63.
#define FA_CM_ROWS 8
#define FA_CM_TW 64
#define FA_CM_COLS (FA_CM_TW - 2)
#define FA_CM_TH (FA_CM_ROWS + 2)
#define FA_CM_THREADS 256

// The masking threshold of tile pixel (ty, tx) (the picture's `at`) from three angle
// planes `m` (r or a) and their staged |rf x| / 30 `flt` (tile row ty + 1 + dy,
// column tx + 1 + dx holds neighbour (dy, dx)): per angle the nine window values
// added into a float, row by row, left to right, the centre's 1/15 product in
// double (its value read from the plane); the angles' sums added h, v, d.
VX_DEVICE float fa_threshold(const float (*flt)[FA_CM_TH][FA_CM_TW], const float* m, i64 plane, i64 at, int ty,
                             int tx, const float* rf)
{
    float thr = 0.0f;
    for (int th = 0; th < 3; ++th) {
        float s = 0.0f;
        for (int dy = 0; dy < 3; ++dy) {
            for (int dx = 0; dx < 3; ++dx) {
                if (dy == 1 && dx == 1) {
                    const float c = rf[th] * m[th * plane + at];
                    s = (float)((double)s + 0.0666666701 * (double)(c < 0.0f ? -c : c));
                } else {
                    s = s + flt[th][ty + dy][tx + dx];
                }
            }
        }
        thr = thr + s;
    }
    return thr;
}

// The nine maps' row sums over the region [top, top + rh) x [left, left + rw) of a
// w x h band: rows[f][m][ry] for map m (DLM num h v d, den h v d, AIM num h v d),
// region row ry.  bands: 5 planes a frame (ref a v h d, dist a); ra: r h v d, a h v d
// (frames `fstride`, `rfstride` apart; both `pitch`, `plane`).  Block (g, 0, f) sums
// region rows g * FA_CM_ROWS ..; FA_CM_THREADS threads.
VX_KERNEL void VX_BOUNDS(FA_CM_THREADS, 4)
vx_fadm_cm_rows(const float* bands, const float* ra, i64 fstride, i64 rfstride, int w, int h, i64 pitch, i64 plane,
                float rf0, float rf1, float rf2, int top, int left, int rw, int rh, int bypass, float* rows,
                i64 rows_fstride)
{
    // |rf x| / 30 of the window's values: 0..2 a's h v d (DLM's threshold), 3..5 r's (AIM's)
    __shared__ float flt[6][FA_CM_TH][FA_CM_TW];
    // the nine values of the chunk's pixels; + 1: a row's adder reads its own bank
    __shared__ float stage[9][FA_CM_ROWS][FA_CM_COLS + 1];
    __shared__ float acc[9][FA_CM_ROWS];
    const int f = blockIdx.z, ry0 = blockIdx.x * FA_CM_ROWS, t = threadIdx.x, n = blockDim.x;
    const int nrows = rh - ry0 < FA_CM_ROWS ? rh - ry0 : FA_CM_ROWS;
    const float rf[3] = {rf0, rf1, rf2};
    const float* r = ra + f * rfstride;
    const float* a = r + 3 * plane;
    const float* ref = bands + f * fstride;
    const int ref_plane[3] = {2, 1, 3};  // the reference's detail bands in h, v, d order
    for (int k = t; k < 9 * FA_CM_ROWS; k += n)
        acc[k / FA_CM_ROWS][k % FA_CM_ROWS] = 0.0f;
    for (int x0 = 0; x0 < rw; x0 += FA_CM_COLS) {
        const int cols = rw - x0 < FA_CM_COLS ? rw - x0 : FA_CM_COLS;
        __syncthreads();  // the previous chunk added
        if (!bypass) {
            // tile (ty, tx) is the picture's (top + ry0 - 1 + ty, left + x0 - 1 + tx), mirrored:
            // the region lies inside the band, so ty, tx reach at most one sample outside it
            for (int k = t; k < (nrows + 2) * FA_CM_TW; k += n) {
                const int ty = k >> 6, tx = k & (FA_CM_TW - 1);
                if (tx >= cols + 2) continue;
                const int y = fa_cm_index(top + ry0 - 1 + ty, h), x = fa_cm_index(left + x0 - 1 + tx, w);
                const i64 at = (i64)y * pitch + x;
                for (int th = 0; th < 3; ++th) {
                    flt[th][ty][tx] = fa_flt(rf[th], a[th * plane + at]);
                    flt[3 + th][ty][tx] = fa_flt(rf[th], r[th * plane + at]);
                }
            }
            __syncthreads();
        }
        for (int k = t; k < nrows * FA_CM_TW; k += n) {
            const int ty = k >> 6, tx = k & (FA_CM_TW - 1);
            if (tx >= cols) continue;
            const i64 at = (i64)(top + ry0 + ty) * pitch + left + x0 + tx;
            const float thr_num = bypass ? 0.0f : fa_threshold(flt, a, plane, at, ty, tx, rf);
            const float thr_aim = bypass ? 0.0f : fa_threshold(flt + 3, r, plane, at, ty, tx, rf);
            for (int th = 0; th < 3; ++th) {
                float xn = r[th * plane + at] * rf[th];
                xn = (xn < 0.0f ? -xn : xn) - thr_num;
                xn = xn < 0.0f ? 0.0f : xn;
                float xa = a[th * plane + at] * rf[th];
                xa = (xa < 0.0f ? -xa : xa) - thr_aim;
                xa = xa < 0.0f ? 0.0f : xa;
                float xd = rf[th] * ref[ref_plane[th] * plane + at];
                xd = xd < 0.0f ? -xd : xd;
                stage[th][ty][tx] = fa_cube(xn);
                stage[3 + th][ty][tx] = fa_cube(xd);
                stage[6 + th][ty][tx] = fa_cube(xa);
            }
        }
        __syncthreads();
        // one thread a (map, row): the chunk's values added to the row's float in order
        for (int k = t; k < 9 * nrows; k += n) {
            const int m = k / nrows, row = k % nrows;
            float s = acc[m][row];
            for (int c = 0; c < cols; ++c)
                s = s + stage[m][row][c];
            acc[m][row] = s;
        }
    }
    __syncthreads();
    float* out = rows + f * rows_fstride + ry0;
    for (int k = t; k < 9 * nrows; k += n) {
        const int m = k / nrows, row = k % nrows;
        out[m * rh + row] = acc[m][row];
    }
}

// Each map's rows top to bottom into one float, at out[frame][index + m].
VX_KERNEL void vx_fadm_total(const float* rows, i64 rows_fstride, int rh, float* out, int out_stride, int out_index)
{
    vx_float_map_totals_staged(rows, rows_fstride, rh, out, out_stride, out_index);
}
