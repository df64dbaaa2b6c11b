// The C library's math over arrays, for the host arithmetic that must call it
// element by element: libsvm's RBF decision values (vmafxd/model/svm.py) and
// glibc's powf (vmafxd/features/_adm_csf.py's powf_array).  Python loops over
// math.exp and numpy's float32 power do the same calls one interpreter step
// each; here they are one C loop.  Built with the emulator's flags
// (-ffp-contract=off, no fast-math): every product and sum is its own rounded
// operation, and exp / powf are the C library's own functions (without
// -ffast-math GCC neither inlines nor vectorises them: libmvec's versions
// round differently).

#include <cmath>
#include <cstddef>

extern "C" {

// out[i] = powf(x[i], y): numpy's float32 scalar power and C's powf are the
// same libm function.
void vx_powf_array(const float* x, std::ptrdiff_t n, float y, float* out)
{
    for (std::ptrdiff_t i = 0; i < n; ++i)
        out[i] = powf(x[i], y);
}

// libsvm's nu-SVR decision value with an RBF kernel for `frames` feature rows
// (row f at x + f * x_stride, its first nf values read), in svm.py's order:
// per support vector the squared differences summed feature by feature from
// the first (the first square is the start: 0.0 + a is a), exp(-gamma * d2),
// coef * k; the terms added support vector by support vector from the first
// (numpy's cumsum), minus rho.  No support vectors: 0.0 - rho.
void vx_svm_rbf(const double* x, std::ptrdiff_t frames, std::ptrdiff_t x_stride, const double* sv,
                std::ptrdiff_t n_sv, std::ptrdiff_t nf, const double* coef, double gamma, double rho,
                double* out)
{
    const double neg_gamma = -gamma;
    for (std::ptrdiff_t f = 0; f < frames; ++f) {
        const double* xf = x + f * x_stride;
        double total = 0.0;
        for (std::ptrdiff_t i = 0; i < n_sv; ++i) {
            const double* s = sv + i * nf;
            double d2 = 0.0;
            if (nf > 0) {
                double t = xf[0] - s[0];
                d2 = t * t;
                for (std::ptrdiff_t k = 1; k < nf; ++k) {
                    t = xf[k] - s[k];
                    d2 = d2 + t * t;
                }
            }
            const double term = coef[i] * std::exp(neg_gamma * d2);
            total = i == 0 ? term : total + term;
        }
        out[f] = total - rho;
    }
}

}  // extern "C"
