// SpEED (libvmaf's speed.c: speed_chroma, speed_temporal) for one CPU thread.
//
// The same float and double operations, in the same order, as the numpy twin
// (vmafxd/features/_speed_core.py, _speed_linalg.py), which follows libvmaf's
// C op for op; built with -ffp-contract=off so that no product and sum fuse
// behind our back.  The one fused multiply-add is explicit: the covariance
// sums, which libvmaf forms with compute_cov_kernel_avx512 (two 8-lane double
// accumulators updated with vfmadd, a fixed reduction tree, a scalar tail).
//
// What differs from libvmaf is only the work left out, never a value:
// * the anti-aliasing blur is formed only where the decimation by 16 reads
//   it (every 16th row of the vertical pass, every 16th column of the
//   horizontal one): each kept output is the same tap-ordered sum;
// * loops are ordered so that the compiler can vectorise them over
//   independent outputs (a matrix product's columns, a back substitution's
//   right-hand sides), every output still seeing its own sum in libvmaf's order.
//
// A context (speed_new) holds one extractor's geometry, tables and buffers;
// speed_chroma_pair scores one chroma plane pair, speed_temporal_push takes a
// frame's luma pair and scores it against the previous one.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace {

constexpr int BLOCK = 5;
constexpr int N = BLOCK * BLOCK;  // elements in a block: the covariance matrix is N x N
constexpr int PAIRS = N * (N + 1) / 2;  // the covariances libvmaf computes (x_index >= y_index)
constexpr int SCALES = 4;         // the decimation is by 2^SCALES
constexpr double EIGENVALUE_EPS = 1e-6;
constexpr int MAX_ITERS = 500;

struct Params {
    std::vector<float> entropy;
    std::vector<float> variance;
    bool singular = false;
};

struct Speed {
    int w, h;    // the source plane
    int sw, sh;  // after the prescale
    int ow, oh;  // after the decimation by 16
    int bh, bv, nb;
    int resize;  // 0: none, 1: nearest (tables of indices), 2: bilinear (indices and weights)
    std::vector<int> y1, y2, x1, x2;
    std::vector<float> dy, dx;
    std::vector<float> aa, lm;  // anti-aliasing taps, local-mean taps
    float sigma_nn, base_entropy;
    double log2_2pie;
    int mode;  // speed_weight_var_mode

    // buffers
    std::vector<float> ref, dis, prev_ref, prev_dis;  // float source pictures
    std::vector<float> scaled, row, small, mean_tmp, mean;
    std::vector<double> centred;
    std::vector<float> cov, work, term, sol;
    std::vector<float> qr;  // Q, R, Z, H, the product, and the back substitution's row
    Params pr, pd;
};

inline int mirror(int i, int n) {
    // vif_tools.c's reflection without repeating the edge; n > radius is checked by the caller
    return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
}

// --- the float picture ----------------------------------------------------------------------------

template <typename T>
void to_float(const T* src, std::ptrdiff_t stride, int w, int h, float scaler, float* dst) {
    // to_float_plane: sample / scaler - 128 (the division by 1 of 8-bit samples is exact)
    for (int i = 0; i < h; i++) {
        const T* s = src + i * stride;
        float* d = dst + static_cast<std::ptrdiff_t>(i) * w;
        for (int j = 0; j < w; j++) d[j] = static_cast<float>(s[j]) / scaler + -128.0f;
    }
}

void load(const void* src, int bytes, std::ptrdiff_t stride, int w, int h, float scaler, float* dst) {
    if (bytes == 1)
        to_float(static_cast<const std::uint8_t*>(src), stride, w, h, scaler, dst);
    else
        to_float(static_cast<const std::uint16_t*>(src), stride, w, h, scaler, dst);
}

const float* prescale(Speed& s, const float* pic) {
    // vif_scale_frame_nearest_s / vif_scale_frame_bilinear_*_s from the twin's tables
    if (s.resize == 0) return pic;
    float* out = s.scaled.data();
    for (int i = 0; i < s.sh; i++) {
        float* o = out + static_cast<std::ptrdiff_t>(i) * s.sw;
        const float* r1 = pic + static_cast<std::ptrdiff_t>(s.y1[i]) * s.w;
        if (s.resize == 1) {
            for (int j = 0; j < s.sw; j++) o[j] = r1[s.x1[j]];
            continue;
        }
        const float* r2 = pic + static_cast<std::ptrdiff_t>(s.y2[i]) * s.w;
        const float dy = s.dy[i], ody = 1.0f - dy;
        for (int j = 0; j < s.sw; j++) {
            const float dx = s.dx[j], odx = 1.0f - dx;
            float v = (ody * odx) * r1[s.x1[j]];
            v += (ody * dx) * r1[s.x2[j]];
            v += (dy * odx) * r2[s.x1[j]];
            v += (dy * dx) * r2[s.x2[j]];
            o[j] = v;
        }
    }
    return out;
}

// The vertical pass of a separable filter at one output row: acc = 0; acc += tap * sample, taps in order.
void vertical(const float* src, int w, int h, int y, const std::vector<float>& taps, float* out) {
    const int nt = static_cast<int>(taps.size()), r = nt / 2;
    for (int j = 0; j < w; j++) out[j] = 0.0f;
    for (int k = 0; k < nt; k++) {
        const float t = taps[k];
        const float* row = src + static_cast<std::ptrdiff_t>(mirror(y - r + k, h)) * w;
        for (int j = 0; j < w; j++) out[j] += t * row[j];
    }
}

// The horizontal pass at one output column of a row the vertical pass made.
inline float horizontal(const float* row, int w, int x, const std::vector<float>& taps) {
    const int nt = static_cast<int>(taps.size()), r = nt / 2;
    float acc = 0.0f;
    for (int k = 0; k < nt; k++) acc += taps[k] * row[mirror(x - r + k, w)];
    return acc;
}

// filter_and_downscale: the picture at the operating size, its local mean subtracted (into s.small).
void downscale(Speed& s, const float* pic) {
    const float* src = prescale(s, pic);
    float* row = s.row.data();
    float* small = s.small.data();
    for (int i = 0; i < s.oh; i++) {
        vertical(src, s.sw, s.sh, 16 * i, s.aa, row);
        for (int j = 0; j < s.ow; j++) small[i * s.ow + j] = horizontal(row, s.sw, 16 * j, s.aa);
    }
    float* tmp = s.mean_tmp.data();
    float* mean = s.mean.data();
    for (int i = 0; i < s.oh; i++) {
        vertical(small, s.ow, s.oh, i, s.lm, tmp);
        for (int j = 0; j < s.ow; j++) mean[i * s.ow + j] = horizontal(tmp, s.ow, j, s.lm);
    }
    for (int k = 0; k < s.oh * s.ow; k++) small[k] -= mean[k];
}

// --- the covariance matrix ------------------------------------------------------------------------

// compute_cov_kernel_avx512 over two centred arrays (rows x cols, contiguous): lanes 0-7 are its
// acc0, 8-15 its acc1; a block of 16 columns updates all 16 lanes, one block of 8 more acc0, the rest
// the scalar tail (product rounded, then added).  Then acc0 + acc1, _mm512_reduce_add_pd's tree
// (upper half + lower half, twice, then the two lanes), plus the tail.
__attribute__((always_inline)) inline double cov_sum(const double* x, const double* y, int rows, int cols) {
    double acc[16] = {0};
    double tail = 0.0;
    const int n16 = cols / 16;
    const bool has8 = cols - 16 * n16 >= 8;
    const int tail0 = 16 * n16 + (has8 ? 8 : 0);
    for (int i = 0; i < rows; i++) {
        const double* a = x + static_cast<std::ptrdiff_t>(i) * cols;
        const double* b = y + static_cast<std::ptrdiff_t>(i) * cols;
        for (int blk = 0; blk < n16; blk++)
            for (int l = 0; l < 16; l++) acc[l] = std::fma(a[16 * blk + l], b[16 * blk + l], acc[l]);
        if (has8)
            for (int l = 0; l < 8; l++) acc[l] = std::fma(a[16 * n16 + l], b[16 * n16 + l], acc[l]);
        for (int j = tail0; j < cols; j++) tail += a[j] * b[j];
    }
    double a8[8], a4[4], a2[2];
    for (int l = 0; l < 8; l++) a8[l] = acc[l] + acc[8 + l];
    for (int l = 0; l < 4; l++) a4[l] = a8[4 + l] + a8[l];
    for (int l = 0; l < 2; l++) a2[l] = a4[2 + l] + a4[l];
    return (a2[0] + a2[1]) + tail;
}

// The fused multiply-adds as instructions where the CPU has them (std::fma is a library call
// without -mfma; cov_sum is inlined into this clone): the same correctly rounded operation, so the
// same values either way.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void cov_pairs_fma(const double* c, int rows, int cols, double* sums) {
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(rows) * cols;
    int p = 0;
    for (int xi = 0; xi < N; xi++)
        for (int yi = 0; yi <= xi; yi++) sums[p++] = cov_sum(c + xi * plane, c + yi * plane, rows, cols);
}
#endif

void cov_pairs(const double* c, int rows, int cols, double* sums) {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool has_fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
    if (has_fma) {
        cov_pairs_fma(c, rows, cols, sums);
        return;
    }
#endif
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(rows) * cols;
    int p = 0;
    for (int xi = 0; xi < N; xi++)
        for (int yi = 0; yi <= xi; yi++) sums[p++] = cov_sum(c + xi * plane, c + yi * plane, rows, cols);
}

// The covariance sums of s.small (double, before the division), in libvmaf's pair order.
void covariance_sums(Speed& s, double* sums) {
    const int th = s.bv * BLOCK, tw = s.bh * BLOCK;
    const int rows = th - BLOCK + 1, cols = tw - BLOCK + 1;
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(rows) * cols;
    const float count = static_cast<float>(rows * cols);
    const float* d = s.small.data();
    double* c = s.centred.data();
    for (int o = 0; o < N; o++) {
        const int r0 = o / BLOCK, c0 = o % BLOCK;
        // compute_mean: one float accumulator, row by row, then / (float)count
        float sum = 0.0f;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) sum += d[(r0 + i) * s.ow + c0 + j];
        const double mean = static_cast<double>(sum / count);
        double* out = c + o * plane;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                out[i * cols + j] = static_cast<double>(d[(r0 + i) * s.ow + c0 + j]) - mean;
    }
    cov_pairs(c, rows, cols, sums);
}

// compute_covariance_matrix of s.small into s.cov (N x N floats).
void covariance(Speed& s) {
    double sums[PAIRS];
    covariance_sums(s, sums);
    const double n = static_cast<double>(s.bv * BLOCK - BLOCK + 1) * (s.bh * BLOCK - BLOCK + 1);
    int p = 0;
    for (int xi = 0; xi < N; xi++)
        for (int yi = 0; yi <= xi; yi++) {
            const float v = static_cast<float>(sums[p++] / n);
            s.cov[xi * N + yi] = v;
            s.cov[yi * N + xi] = v;
        }
}

// --- eigenvalues (a Householder tridiagonalisation, then implicit symmetric QR steps) -------------

inline float c_sqrt(float x) { return static_cast<float>(std::sqrt(static_cast<double>(x))); }
inline float pythagoras(float x, float y) { return c_sqrt(x * x + y * y); }
inline float sign_of(float x) { return x >= 0 ? 1.0f : -1.0f; }

float householder(float* a, int col, int start) {
    if (N - start == 1) return 0.0f;
    float xnorm = 0.0f;
    for (int i = start + 1; i < N; i++) xnorm += a[i * N + col] * a[i * N + col];
    xnorm = c_sqrt(xnorm);
    if (xnorm == 0.0f) return 0.0f;
    const float alpha = a[start * N + col];
    const float beta = -sign_of(alpha) * pythagoras(alpha, xnorm);
    const float tau = (beta - alpha) / beta;
    const float sd = alpha - beta;
    if (sd != 0.0f) {
        for (int i = start; i < N; i++) a[i * N + col] /= sd;
        a[start * N + col] = beta;
    }
    return tau;
}

void tridiagonalise(float* a, float* d, float* sd) {
    float v[N], x[N];
    for (int i = 0; i < N - 2; i++) {
        const int lo = i + 1;
        const float tau = householder(a, i, lo);
        for (int j = lo; j < N; j++) v[j] = a[j * N + i];
        if (tau == 0.0f) continue;
        a[lo * N + i] = v[lo];
        v[lo] = 1.0f;
        for (int r = lo; r < N; r++) {
            float acc = 0.0f;
            for (int j = lo; j < N; j++) acc += tau * a[r * N + j] * v[j];
            x[r] = acc;
        }
        float xv = 0.0f;
        for (int r = lo; r < N; r++) xv += x[r] * v[r];
        const float alpha = static_cast<float>(-0.5 * tau * xv);  // a double expression
        for (int r = lo; r < N; r++) x[r] += alpha * v[r];
        for (int r = lo; r < N; r++)
            for (int j = lo; j < N; j++) a[r * N + j] -= x[r] * v[j] + v[r] * x[j];
    }
    for (int i = 0; i < N; i++) d[i] = a[i * N + i];
    for (int i = 0; i < N - 1; i++) sd[i] = a[(i + 1) * N + i];
}

void chop_small(float* d, float* sd, int n) {
    for (int i = 0; i < n - 1; i++)
        if (std::fabs(sd[i]) < EIGENVALUE_EPS * (std::fabs(d[i]) + std::fabs(d[i + 1]))) sd[i] = 0.0f;
}

float trailing_eigenvalue(const float* d, const float* sd, int n) {
    const float ta = d[n - 2], tb = d[n - 1], tab = sd[n - 2];
    const float dt = static_cast<float>((ta - tb) / 2.0);
    if (dt > 0) return tb - tab * (tab / (dt + pythagoras(dt, tab)));
    if (dt == 0) return tb - std::fabs(tab);
    return tb + tab * (tab / (-dt + pythagoras(dt, tab)));
}

void givens(float a, float b, float& c, float& s) {
    if (b == 0) {
        c = 1.0f;
        s = 0.0f;
    } else if (std::fabs(b) > std::fabs(a)) {
        const float t = -a / b;
        const float s1 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(1.0f + t * t)));
        s = s1;
        c = s1 * t;
    } else {
        const float t = -b / a;
        const float c1 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(1.0f + t * t)));
        c = c1;
        s = c1 * t;
    }
}

void qr_step(float* d, float* sd, int n) {
    float mu = trailing_eigenvalue(d, sd, n);
    if (EIGENVALUE_EPS * std::fabs(mu) > std::fabs(d[0]) + std::fabs(sd[0])) mu = 0.0f;
    float x = d[0] - mu, z = sd[0];
    float bk = 0.0f, zk = 0.0f;
    float ap = d[0], bp = sd[0], aq = d[1];
    float c, s;
    if (n == 2) {
        givens(x, z, c, s);
        const float ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp);
        const float bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq);
        const float aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq);
        d[0] = ap1;
        sd[0] = bp1;
        d[1] = aq1;
        return;
    }
    float bq = sd[1];
    for (int k = 0; k < n - 1; k++) {
        givens(x, z, c, s);
        const float bk1 = c * bk - s * zk;
        const float ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp);
        const float bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq);
        const float zp1 = -s * bq;
        const float aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq);
        const float bq1 = c * bq;
        bk = bp1;
        zk = zp1;
        ap = aq1;
        bp = bq1;
        if (k < n - 2) aq = d[k + 2];
        if (k < n - 3) bq = sd[k + 2];
        d[k] = ap1;
        if (k > 0) sd[k - 1] = bk1;
        if (k < n - 2) sd[k + 1] = bp;
        x = bk;
        z = zk;
    }
    d[n - 1] = ap;
    sd[n - 2] = bk;
}

// compute_eigenvalues of the N x N matrix m (unsorted; after 500 QR steps whatever the state).
void eigenvalues(const float* m, float* a, float* eig) {
    std::memcpy(a, m, sizeof(float) * N * N);
    float sd[N];
    tridiagonalise(a, eig, sd);
    chop_small(eig, sd, N);
    int b = N - 1, iter = 0;
    while (b > 0 && iter < MAX_ITERS) {
        if (sd[b - 1] == 0.0f) {
            b--;
            continue;
        }
        int lo = b - 1;
        while (lo > 0 && sd[lo - 1] != 0.0f) lo--;
        const int n = b - lo + 1;
        qr_step(eig + lo, sd + lo, n);
        chop_small(eig + lo, sd + lo, n);
        iter++;
    }
}

// --- the linear system (a Householder QR decomposition on full matrices, back substitution) -------

// matrix_mul: dst[i][j] = sum_k x[i][k] * y[k][j], k ascending from 0 (vectorised over j)
void matmul(float* __restrict dst, const float* __restrict x, const float* __restrict y, int rows, int inner,
            int cols) {
    for (int i = 0; i < rows; i++) {
        float* o = dst + static_cast<std::ptrdiff_t>(i) * cols;
        for (int j = 0; j < cols; j++) o[j] = 0.0f;
        for (int k = 0; k < inner; k++) {
            const float t = x[i * inner + k];
            const float* yr = y + static_cast<std::ptrdiff_t>(k) * cols;
            for (int j = 0; j < cols; j++) o[j] += t * yr[j];
        }
    }
}

// solve_linear_system: X with A X = B (B: N x cols); false where R has a diagonal entry below the eps.
bool solve(Speed& s, const float* a, const float* b, int cols, float* xout) {
    float* q = s.qr.data();
    float* r = q + N * N;
    float* z = r + N * N;
    float* h = z + N * N;
    float* prod = h + N * N;
    float* rhs = s.work.data() + N * N;  // N x cols
    float vec[N];
    std::memcpy(z, a, sizeof(float) * N * N);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) q[i * N + j] = i == j ? 1.0f : 0.0f;
    for (int k = 0; k < N - 1; k++) {
        // matrix_minor: the first k rows and columns become the identity's
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++)
                if (i < k || j < k) z[i * N + j] = i == j ? 1.0f : 0.0f;
        for (int i = 0; i < N; i++) vec[i] = z[i * N + k];
        float norm = 0.0f;
        for (int i = 0; i < N; i++) norm += vec[i] * vec[i];
        vec[k] += sign_of(a[k * N + k]) * c_sqrt(norm);
        float norm2 = 0.0f;
        for (int i = 0; i < N; i++) norm2 += vec[i] * vec[i];
        const float div = c_sqrt(norm2);
        for (int i = 0; i < N; i++) vec[i] = vec[i] / div;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) h[i * N + j] = -2.0f * vec[i] * vec[j];
        for (int i = 0; i < N; i++) h[i * N + i] += 1.0f;
        matmul(prod, h, z, N, N, N);
        std::memcpy(z, prod, sizeof(float) * N * N);
        matmul(prod, h, q, N, N, N);
        std::memcpy(q, prod, sizeof(float) * N * N);
    }
    matmul(r, q, a, N, N, N);
    // libvmaf transposes Q twice (at the end of the decomposition, and to form Q^T B): Q B it is
    matmul(rhs, q, b, N, N, cols);
    float* t = prod + N * N;  // one row of right-hand sides
    for (int i = N - 1; i >= 0; i--) {
        const float den = r[i * N + i];
        if (std::fabs(den) < EIGENVALUE_EPS) return false;
        std::memcpy(t, rhs + static_cast<std::ptrdiff_t>(i) * cols, sizeof(float) * cols);
        for (int k = i + 1; k < N; k++) {
            const float rik = r[i * N + k];
            const float* xk = xout + static_cast<std::ptrdiff_t>(k) * cols;
            for (int j = 0; j < cols; j++) t[j] -= xk[j] * rik;
        }
        float* xi = xout + static_cast<std::ptrdiff_t>(i) * cols;
        for (int j = 0; j < cols; j++) xi[j] = t[j] / den;
    }
    return true;
}

// --- est_params and the score ----------------------------------------------------------------------

void est_params(Speed& s, Params& out) {
    covariance(s);
    float eig[N];
    eigenvalues(s.cov.data(), s.work.data(), eig);
    const int nb = s.nb;
    const float* d = s.small.data();
    float* y = s.term.data();
    // compute_independent_term: row (si * 5 + sj), column (block row * blocks across + block column)
    for (int si = 0; si < BLOCK; si++)
        for (int sj = 0; sj < BLOCK; sj++)
            for (int bi = 0; bi < s.bv; bi++)
                for (int bj = 0; bj < s.bh; bj++)
                    y[(si * BLOCK + sj) * nb + bi * s.bh + bj] = d[(bi * BLOCK + si) * s.ow + bj * BLOCK + sj];
    // is_matrix_regular: no eigenvalue below the eps (a NaN is not below it)
    bool regular = true;
    for (int k = 0; k < N; k++)
        if (eig[k] < EIGENVALUE_EPS) regular = false;
    float* x = s.sol.data();
    const bool solved = regular && solve(s, s.cov.data(), y, nb, x);
    out.singular = !solved;
    if (!solved) std::memset(x, 0, sizeof(float) * N * nb);
    const float blocks = static_cast<float>(N);
    for (int k = 0; k < N * nb; k++) x[k] = (x[k] * y[k]) / blocks;
    for (int i = 1; i < N; i++)
        for (int j = 0; j < nb; j++) x[j] += x[i * nb + j];
    float* ent = out.entropy.data();
    for (int j = 0; j < nb; j++) ent[j] = 0.0f;
    for (int k = 0; k < N; k++) {
        const float l = eig[k] < 0 ? 0.0f : eig[k];
        for (int j = 0; j < nb; j++)
            ent[j] = static_cast<float>(ent[j] + (std::log2(static_cast<double>(l * x[j] + s.sigma_nn)) + s.log2_2pie));
    }
    std::memcpy(out.variance.data(), x, sizeof(float) * nb);
}

float speed_score(const Speed& s, const Params& r, const Params& d) {
    float score = 0.0f;
    const float base = s.base_entropy;
    for (int i = 0; i < s.nb; i++) {
        const float re = r.entropy[i], de = d.entropy[i];
        if (re < base && de < base) continue;  // score += 0
        const float rv = r.variance[i], dv = d.variance[i];
        const double fr = std::log2(static_cast<double>(1.0f + rv));
        double wr = fr, wd;
        switch (s.mode) {
            case 0: wd = std::log2(static_cast<double>(1.0f + dv)); break;
            case 1: wd = fr; break;
            case 2: wr = wd = std::log2(static_cast<double>(1.0f + dv)); break;
            case 3: wr = wd = std::log2(1 + static_cast<double>(rv + dv) / 2.0); break;
            case 4: wd = std::log2(1 + static_cast<double>(rv + dv) / 2.0); break;
            case 5: wd = std::log2(1 + (0.75 * rv + 0.25 * static_cast<double>(dv))); break;
            default: wd = std::log2(1 + (0.25 * rv + 0.75 * static_cast<double>(dv))); break;
        }
        const float spatial_ref = static_cast<float>(re * wr);
        const float spatial_dis = static_cast<float>(de * wd);
        score += std::fabs(spatial_ref - spatial_dis);
    }
    return score / static_cast<float>(s.nb);
}

// speed_extract_score of two float pictures (each w x h): the score, and whether either was singular.
int pair_score(Speed& s, const float* ref, const float* dis, float* score) {
    downscale(s, ref);
    est_params(s, s.pr);
    downscale(s, dis);
    est_params(s, s.pd);
    if (s.pr.singular != s.pd.singular) {
        *score = 0.0f;  // one side numerically unstable: libvmaf scores 0 rather than an inflated value
        return 1;
    }
    *score = speed_score(s, s.pr, s.pd);
    return s.pr.singular || s.pd.singular;
}

}  // namespace

extern "C" {

// A context for one extractor.  Tables: resize 1 takes y1/x1 (source index of each output row and
// column), resize 2 also y2/x2 and the weights dy/dx; taps as the twin makes them.
void* speed_new(int w, int h, int sw, int sh, int resize, const std::int32_t* y1, const std::int32_t* y2,
                const float* dy, const std::int32_t* x1, const std::int32_t* x2, const float* dx, const float* aa,
                int naa, const float* lm, int nlm, float sigma_nn, float base_entropy, double log2_2pie,
                int mode) {
    // the mirrored filters read inside the picture only where it is wider and taller than their
    // half widths (the twin's geometry guarantees it: 80 samples, 5 at 1/16); no block, no score
    if (std::min(sw, sh) <= naa / 2 || std::min(sw >> SCALES, sh >> SCALES) <= nlm / 2 ||
        (sw >> SCALES) < BLOCK || (sh >> SCALES) < BLOCK)
        return nullptr;
    Speed* s = new (std::nothrow) Speed();
    if (!s) return nullptr;
    try {
        s->w = w;
        s->h = h;
        s->sw = sw;
        s->sh = sh;
        s->ow = sw >> SCALES;
        s->oh = sh >> SCALES;
        s->bh = s->ow / BLOCK;
        s->bv = s->oh / BLOCK;
        s->nb = s->bh * s->bv;
        s->resize = resize;
        if (resize) {
            s->y1.assign(y1, y1 + sh);
            s->x1.assign(x1, x1 + sw);
            s->y2.assign(y2, y2 + sh);
            s->x2.assign(x2, x2 + sw);
            s->dy.assign(dy, dy + sh);
            s->dx.assign(dx, dx + sw);
            s->scaled.resize(static_cast<std::size_t>(sw) * sh);
        }
        s->aa.assign(aa, aa + naa);
        s->lm.assign(lm, lm + nlm);
        s->sigma_nn = sigma_nn;
        s->base_entropy = base_entropy;
        s->log2_2pie = log2_2pie;
        s->mode = mode;
        const std::size_t plane = static_cast<std::size_t>(w) * h;
        s->ref.resize(plane);
        s->dis.resize(plane);
        s->row.resize(sw);
        s->small.resize(static_cast<std::size_t>(s->ow) * s->oh);
        s->mean_tmp.resize(s->ow);
        s->mean.resize(s->small.size());
        const int rows = s->bv * BLOCK - BLOCK + 1, cols = s->bh * BLOCK - BLOCK + 1;
        s->centred.resize(static_cast<std::size_t>(N) * rows * cols);
        s->cov.resize(N * N);
        s->work.resize(N * N + static_cast<std::size_t>(N) * s->nb);
        s->term.resize(static_cast<std::size_t>(N) * s->nb);
        s->sol.resize(static_cast<std::size_t>(N) * s->nb);
        s->qr.resize(5 * N * N + static_cast<std::size_t>(s->nb));
        for (Params* p : {&s->pr, &s->pd}) {
            p->entropy.resize(s->nb);
            p->variance.resize(s->nb);
        }
    } catch (...) {
        delete s;
        return nullptr;
    }
    return s;
}

void speed_free(void* ctx) { delete static_cast<Speed*>(ctx); }

// For the tests: the covariance sums (PAIRS doubles) of one float picture of the context's source
// size, after the prescale and the decimation (the twin's _speed_core.picture_sums of it).
void speed_picture_sums(void* ctx, const float* picture, double* sums) {
    Speed& s = *static_cast<Speed*>(ctx);
    downscale(s, picture);
    covariance_sums(s, sums);
}

// speed_chroma's score of one plane pair (samples of `bytes` bytes, strides in samples); returns 1
// where either picture's matrix was singular.
int speed_chroma_pair(void* ctx, const void* ref, std::ptrdiff_t ref_stride, const void* dis,
                      std::ptrdiff_t dis_stride, int bytes, float scaler, float* score) {
    Speed& s = *static_cast<Speed*>(ctx);
    load(ref, bytes, ref_stride, s.w, s.h, scaler, s.ref.data());
    load(dis, bytes, dis_stride, s.w, s.h, scaler, s.dis.data());
    return pair_score(s, s.ref.data(), s.dis.data(), score);
}

// speed_temporal: takes a frame's luma pair; with have_previous, scores (previous ref - ref) against
// (previous dis - dis), or (previous dis - ref) with use_ref_diff, into *score.  The frame is kept.
void speed_temporal_push(void* ctx, const void* ref, std::ptrdiff_t ref_stride, const void* dis,
                         std::ptrdiff_t dis_stride, int bytes, float scaler, int have_previous, int use_ref_diff,
                         float* score) {
    Speed& s = *static_cast<Speed*>(ctx);
    if (s.prev_ref.empty()) {
        s.prev_ref.resize(s.ref.size());
        s.prev_dis.resize(s.ref.size());
    }
    load(ref, bytes, ref_stride, s.w, s.h, scaler, s.ref.data());
    load(dis, bytes, dis_stride, s.w, s.h, scaler, s.dis.data());
    if (have_previous) {
        // the differences go into the previous pictures' buffers, which are replaced below
        const std::size_t n = s.ref.size();
        const float* r = s.ref.data();
        const float* dd = use_ref_diff ? s.ref.data() : s.dis.data();
        float* pr = s.prev_ref.data();
        float* pd = s.prev_dis.data();
        for (std::size_t k = 0; k < n; k++) pr[k] = pr[k] - r[k];
        for (std::size_t k = 0; k < n; k++) pd[k] = pd[k] - dd[k];
        pair_score(s, pr, pd, score);
    }
    s.ref.swap(s.prev_ref);
    s.dis.swap(s.prev_dis);
}

}  // extern "C"
