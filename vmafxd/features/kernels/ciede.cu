// CIEDE2000 (libvmaf's "ciede"): the device twin of
// vmafxd.features._ciede_color (lab_from_yuv, ciede2000) per pixel.
//
// One launch per batch: grid (1, h, frames), a block a row, its threads stepping
// along it (a block's fixed work once a row).  A thread reads its pixel's luma
// and libvmaf's upsampled chroma (ciede.c's scale_chroma_planes, quirks
// included: see _ciede_color.chroma_to_444_indices), converts both pixels to Lab
// and computes the float CIEDE2000 difference.
//
// The device's pow/atan2/sin/cos/exp are not glibc's (what libvmaf calls),
// and neither are numpy's (what the CPU twin calls); both differ in the last
// bits of a double.  Every float rounding of a value that went through one of
// them is checked as the CPU twin checks it (_ciede_color._round: within
// CIEDE_DOUBT float ulps of a rounding midpoint; a branch threshold), with a
// window sized to the device's own libm (see CIEDE_DOUBT); glibc's powf,
// which is not correctly rounded near midpoints, is handled by trying both
// neighbours.  A doubtful pixel is listed (with the samples it used) for the
// host, which redoes it with the C library (_ciede_color.ciede2000_libm).
// Every other pixel's float is glibc's, so the floats equal the CPU twin's.
//
// The sum: libvmaf adds the floats into a double in raster order.  Each block
// adds its pixels' floats exactly as integers in units of 2^-32 and notes the
// lowest set bit; the frame's exact total equals the sequential double sum
// whenever all partial sums are doubles, which the host checks (otherwise, or
// when a float has bits below 2^-32, it adds the floats kept in out[] itself).
// Atomics: one per block and two per doubtful pixel, never one per pixel.
//
// Contraction into FMA is off (kernels.py): the double and float arithmetic
// rounds as written, as in the C.

#if defined(VX_EMU)
#include <math.h>
#endif

#define CIEDE_PI 3.141592653589793
// CIEDE_DOUBT: how close (in float ulps) to a float rounding midpoint a double
// that went through the device's libm may lie before the pixel is listed.
// The float of a double d is glibc's whenever |d - midpoint| >= DOUBT ulps and
// |d - d_glibc| < DOUBT ulps (d_glibc: the same expression evaluated with
// glibc's functions), as both then lie on the same side of the midpoint.
// Bounds used: the CUDA Math API's double table (sin, cos, atan2 2 ulp; exp,
// log, cbrt 1 ulp) and glibc's manual table (pow, what libvmaf calls, 1 ulp on
// x86_64), taken as 2 ulp each (cbrt as 4: the emulator's glibc cbrt); +, -,
// *, /, sqrt are IEEE, so an operation on inputs that differ adds at most 1 ulp
// of its result to the difference.  A relative difference r of d is at most
// r * 2^24 float ulps.  The device replaces pow, its slowest call (about 150
// double operations each, 14 a pixel), where a cheaper form has a bound
// (log and exp, about 86 together, likewise), and the hue's atan2, the sines,
// T's sincos and the hue weight's exp by short forms over the ranges they take
// (ciede_atan2 6 ulp, ciede_sin 2.5, ciede_sincos 2^-52 absolute, ciede_exp
// 1.5; each bound at its definition, each held to it against glibc by
// tests/lanes/test_ciede_kernel.py; CUDA's general function outside the range):
//   pow(x, 7) (x a float): x2 = x x exact (48 bits), x3 = x2 x, x4 = x2 x2,
//     x7 = x4 x3: three roundings, 1.5 ulp from x^7 (glibc's: 2), so the two
//     differ by 3.5 < 4 ulp, the bound the sites below take for one call;
//   pow(x, 2.4) (sRGB gamma, x in (0.089, 2.3)): x^2 y, y = x^(2/5) the root
//     of y^5 = a, a = x^2 (0.5 ulp, a fifth of it in y), by two Newton steps
//     from a float guess (exp2f(0.4f log2f(x)): relative error e0 < 2^-20 for
//     the float functions' few ulps; measured 2^-22.8); a step takes e to
//     2 e^2 (f''/2f' = 2/y): 2^-39, then 2^-77.  The last step's rounding:
//     y^5 by three products (1.5 ulp of a), minus a exactly (Sterbenz: y^5 is
//     within 2^-37 of a), over 5 y^4 = 0.3 ulp of y, and the subtraction 0.5:
//     y within 0.9 ulp of x^(2/5), x^2 y within 1.9 ulp of x^2.4; the double
//     2.4 is 2.4 - 0.4 * 2^-52, so pow(x, 2.4) is within 0.4 * 2^-52 |ln x| <=
//     1 ulp more: device vs glibc <= 2.9 + 2 = 4.9 ulp (6 below; 4.0 the
//     largest seen against glibc over 3e7 random x);
//   pow(c, 1.0 / 3.0) (c > 216/24389): cbrt(c); the double 1/3 is 1/3 - d,
//     d = 2^-54 / 3, so c^(1/3 - d) / c^(1/3) is within d |ln c| <= 0.4 ulp of
//     1 (c in (0.0088, 8)): device vs glibc <= 4 (cbrt) + 0.4 + 2 (pow) ulp.
// Per checked site:
//   ap' = a + (a/2) g, g = 1 - sqrt(c7 / (c7 + 25^7)), c7 = pow(C, 7):
//     c7 4 ulp -> quotient <= 6 ulp -> sqrt <= 4 ulp (< 1, so 4 * 2^-52
//     absolute) -> g <= 4.5 * 2^-52 absolute; |ap'| >= |a| (g >= 0), so ap'
//     differs by <= (4.5 / 2 + 1 + 1) * 2^-52 relative: 4.3 * 2^-28 float ulps;
//   h' = atan2(b, a'): one call, inputs equal: 6 + 2 = 8 * 2^-28;
//   dH = 2 sqrt(.) sin(.), R_T = -2 sqrt(.) sin(.), e60 = 60 exp(.): one call
//     and one product of differing inputs: 2.5 + 2 + 1 = 5.5 * 2^-28 (exp 1.5
//     + 2 + 1; a subnormal float only widens the float ulp);
//   T = 1 - .17 cos(h - pi/6) + .24 cos(2h) + .32 cos(3h + pi/30) - .20
//     cos(4h - 7pi/20), h = h_bar in [0, 3 pi) (not wrapped): glibc's cos of
//     rounded arguments (the roundings of h - pi/6 < 9, 3h + pi/30 < 29 and
//     4h - 7pi/20 < 37, constants included: 9.8e-16, 3.6e-15, 3.8e-15,
//     weighted 9.4 * 2^-52), its 4 calls (.93 * 2^-52) and its 4 products and 4
//     sums (partials < 2: 4.5 * 2^-52) put it within 14.8 * 2^-52 of the exact
//     T(h).  The device (ciede_t): one sincos (ciede_sincos: 2^-52 each), then
//     cos 2h = c c - s s (8.7 eps, eps = 2^-53, propagated and rounded), sin 2h
//     6.7, 3h 18, 4h 25 and 23, each shift by literals 6, 23 and 35 eps:
//     weighted 17.5 eps = 8.8 * 2^-52, plus its own products and sums 4.5:
//     13.3 * 2^-52.  Together 28.1 * 2^-52 absolute (5.0 the largest seen
//     over 5e7 float hues); T >= 0.362 for every hue (its minimum on a 3e-7
//     grid is 0.36206 and |T'| <= 2.41), so its float ulp is >= 2^-25:
//     28.1 * 2^-27 = 2.1e-7 float ulps;
//   L*a*b*'s f(c) = cbrt(c) (c > 216/24389) or (k c + 16) / 116: c is a
//     sum of three gamma-expanded channels (6 ulp) of which the negative
//     (linear-segment) ones are >= -0.41 / 12.92 each, so sum(k_i |ch_i|) <=
//     c + 2 * 0.032 * sum(k_i) <= 8.3 c at c >= 216/24389 * 0.95: c differs by
//     <= 8.3 (6 + 1 + 2) + 1 = 76 ulps relative; the cube root takes a third
//     (25.3) and adds 6.4 (above): 32 * 2^-28 = 1.2e-7 float ulps (the linear
//     segment, value >= 16/116, stays below that too: 76 / 3 + 3); the branch
//     test on c (1e-12 relative) is 50 times c's 1.7e-14.
// The largest is 2.1e-7 float ulps (T); 1e-6 keeps a factor 4.8 over it.  (The CPU
// twin keeps 1e-5 for numpy's functions, whose bounds are not documented.)
// HIP's device libm has its own table (ROCm's "HIP math API" page), not checked
// against this bound here: on a HIP device, tests/lanes/test_ciede_kernel.py (every
// frame of the reference pairs) is the check.
// A -DCIEDE_DEVICE_DOUBT=... build (tests) widens it to list many pixels.
#ifdef CIEDE_DEVICE_DOUBT
#define CIEDE_DOUBT CIEDE_DEVICE_DOUBT
#else
#define CIEDE_DOUBT 1e-6
#endif
#define CIEDE_DOUBT_BRANCH 1e-12
#define CIEDE_POWF_DOUBT 0.01

// Whether d lies within `window` float ulps of the midpoint of the two floats around it,
// in general: the neighbours by nextafterf, some forty instructions (ciede_round's
// path for a subnormal, zero, huge or NaN d).
VX_DEVICE_COLD int ciede_near_midpoint(double d, double window)
{
    const float f = (float)d;
    const float below = (double)f <= d ? f : nextafterf(f, -3.4028235e38f);
    const float above = nextafterf(below, 3.4028235e38f);
    const double lo = (double)below, hi = (double)above;
    return fabs(d - (lo + hi) * 0.5) < window * (hi - lo) ? 1 : 0;
}

// (float)d, and whether d lies within `window` float ulps of the midpoint of the two
// floats around it (then *doubt = 1).  Where |d| is in the normal floats' range
// [2^-126, 2^127), the floats of d's binade [2^e, 2^(e+1)) are the multiples of
// 2^(e-23) and the doubles those of 2^(e-52): d's 29 low bits L count its distance
// above the float below it in units of 2^-29 float ulps, and |d - midpoint| < window
// ulps is |L - 2^28| < window 2^29, ciede_near_midpoint's comparison (whose d -
// midpoint and window (hi - lo) are exact) in integers: the range is d's high word
// without the sign in [0x38100000, 0x47e00000), and for an integer L, |L - 2^28| <
// window 2^29 is |L - 2^28| < ceil(window 2^29) (a constant where `window` is: every
// call but the tests' passes one).
VX_DEVICE float ciede_round(double d, double window, int* doubt)
{
    const float f = (float)d;
    if ((vx_double_high(d) & 0x7fffffffu) - 0x38100000u < 0x47e00000u - 0x38100000u) {
        const int low = (int)(vx_double_low(d) & 0x1fffffffu) - 0x10000000;
        if ((low < 0 ? -low : low) < (int)ceil(window * 536870912.0))
            *doubt = 1;
    } else if (ciede_near_midpoint(d, window)) {
        *doubt = 1;
    }
    return f;
}

// pow(x, 7) for a float x, 1.5 ulp (header)
VX_DEVICE double ciede_pow7(double x)
{
    const double x2 = x * x;
    return (x2 * x2) * (x2 * x);
}

// x^(2/5) for x in (0.089, 2.3), given x2 = x * x: two Newton steps on y^5 = x2
// from a float guess (header)
VX_DEVICE double ciede_pow_2_5(double x, double x2)
{
    double y = (double)exp2f(0.4f * log2f((float)x));
    for (int k = 0; k < 2; ++k) {
        const double y2 = y * y, y4 = y2 * y2;
        y = y - (y4 * y - x2) / (5.0 * y4);
    }
    return y;
}

VX_DEVICE double ciede_rgb_map(double c)
{
    if (c > 10.0 / 255.0) {
        // pow(x, 2.4) as x^2 x^(2/5), 2.9 ulp (header)
        const double x = (c + 0.055) * (1.0 / 1.055);
        const double x2 = x * x;
        return x2 * ciede_pow_2_5(x, x2);
    }
    return c * (1.0 / 12.92);
}

VX_DEVICE float ciede_lab_map(double c, int* doubt)
{
    const double eps = 216.0 / 24389.0;
    const double kappa = 24389.0 / 27.0;
    if (fabs(c - eps) < CIEDE_DOUBT_BRANCH * eps)
        *doubt = 1;
    const double d = c > eps ? cbrt(c) : (kappa * c + 16.0) * (1.0 / 116.0);  // pow(c, 1/3): header
    return ciede_round(d, CIEDE_DOUBT, doubt);
}

// The samples scaled as libvmaf scales them, and the two channels that depend
// on two samples only: red on Y and V, blue on Y and U.
VX_DEVICE double ciede_norm_y(double y, double scale) { return (y - 16.0 * scale) * (1.0 / (219.0 * scale)); }
VX_DEVICE double ciede_norm_c(double c, double scale) { return (c - 128.0 * scale) * (1.0 / (224.0 * scale)); }
VX_DEVICE double ciede_red(double y, double v) { return ciede_rgb_map(y + 1.28033 * v); }
VX_DEVICE double ciede_blue(double y, double u) { return ciede_rgb_map(y + 2.12798 * u); }

// Red and blue for every pair of samples of a bit depth (n = 2^bitdepth):
// gamma[Y n + V] the red, gamma[n n + Y n + U] the blue.  Built once a session
// for 8- and 10-bit pictures (1 and 16 MiB) by the functions above, so a read
// of it is the same double the pixel's own call would give: 4 of the 6 gamma
// expansions a pixel (a log and an exp each) become reads, no bound changes.
VX_KERNEL void vx_ciede_gamma(double* gamma, int bitdepth)
{
    const i64 n = (i64)1 << bitdepth;
    const double scale = (double)(1 << (bitdepth - 8));
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < n * n; k += (i64)gridDim.x * blockDim.x) {
        const double y = ciede_norm_y((double)(k >> bitdepth), scale);
        const double c = ciede_norm_c((double)(k & (n - 1)), scale);
        gamma[k] = ciede_red(y, c);
        gamma[n * n + k] = ciede_blue(y, c);
    }
}

// L*a*b* of samples (sy, su, sv); `gamma`: vx_ciede_gamma's table for `bitdepth`, or null
VX_DEVICE void ciede_lab(double sy, double su, double sv, double scale, const double* gamma, int bitdepth,
                         float* lab, int* doubt)
{
    const double y = ciede_norm_y(sy, scale), u = ciede_norm_c(su, scale), v = ciede_norm_c(sv, scale);
    const i64 n = (i64)1 << bitdepth;
    // samples above the bit depth (stray high bits in a 16-bit word) are computed
    const bool table = gamma != 0 && sy < (double)n && su < (double)n && sv < (double)n;
    const double r = table ? gamma[(i64)sy * n + (i64)sv] : ciede_red(y, v);
    const double g = ciede_rgb_map(y - 0.21482 * u - 0.38059 * v);
    const double b = table ? gamma[n * n + (i64)sy * n + (i64)su] : ciede_blue(y, u);
    const double x = r * 0.4124564390896921 + g * 0.357576077643909 + b * 0.18043748326639894;
    const double yy = r * 0.21267285140562248 + g * 0.715152155287818 + b * 0.07217499330655958;
    const double z = r * 0.019333895582329317 + g * 0.119192025881303 + b * 0.9503040785363677;
    const double fx = ciede_lab_map(x * (1.0 / 0.95047), doubt);
    const double fy = ciede_lab_map(yy, doubt);
    const double fz = ciede_lab_map(z * (1.0 / 1.08883), doubt);
    lab[0] = (float)(116.0 * fy - 16.0);
    lab[1] = (float)(500.0 * (fx - fy));
    lab[2] = (float)(200.0 * (fy - fz));
}

// L*a*b* of every 8-bit sample triple, built once a device (ciede.py, KernelSet.device_table):
// lab8[(Y << 16) | (U << 8) | V] = {L, a, b, doubt}, 2^24 entries of 16 bytes (256 MiB).
// An 8-bit pixel's conversion depends on its three samples alone, and the table is
// written by ciede_lab itself (with the red/blue table `gamma` for 8 bits), so a read
// is the float triple and the doubt the pixel's own call gives: the per-pixel
// kernel's two conversions (about half of its instructions: docs/performance.md)
// become two 16-byte reads, and no bound above changes.
#if defined(VX_EMU)
struct ciede_lab4 { float l, a, b, doubt; };
#else
struct __align__(16) ciede_lab4 { float l, a, b, doubt; };
#endif

VX_KERNEL void vx_ciede_lab8(ciede_lab4* lab8, const double* gamma)
{
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < ((i64)1 << 24); k += (i64)gridDim.x * blockDim.x) {
        int doubt = 0;
        float lab[3];
        ciede_lab((double)(k >> 16), (double)((k >> 8) & 255), (double)(k & 255), 1.0, gamma, 8, lab, &doubt);
        ciede_lab4 e;
        e.l = lab[0];
        e.a = lab[1];
        e.b = lab[2];
        e.doubt = doubt ? 1.0f : 0.0f;
        lab8[k] = e;
    }
}

// p = c[0] x^(N-1) + ... + c[N-1] by Horner's rule, one fma a coefficient
template <int N>
VX_DEVICE double ciede_horner(const double (&c)[N], double x)
{
    double p = c[0];
    for (int i = 1; i < N; ++i)
        p = fma(p, x, c[i]);
    return p;
}

// atan(k / 64), k = 0..64, the doubles nearest (Python's math.atan, glibc's, within an ulp)
#define CIEDE_ATAN_STEPS 64
__constant__ double ciede_atan_table[CIEDE_ATAN_STEPS + 1] = {
    0.0, 0.015623728620476831, 0.031239833430268277, 0.046840712915969654,
    0.06241880999595735, 0.0779666338315423, 0.09347678115858947, 0.10894195698986579,
    0.12435499454676144, 0.13970887428916365, 0.15499674192394097, 0.1702119252854744,
    0.18534794999569476, 0.2003985538258785, 0.21535769969773805, 0.23021958727684372,
    0.24497866312686414, 0.2596296294082575, 0.2741674511196588, 0.2885873618940774,
    0.3028848683749714, 0.31705575320914703, 0.3310960767041321, 0.34500217720710513,
    0.35877067027057225, 0.3723984466767542, 0.38588266939807375, 0.39922076957525254,
    0.4124104415973873, 0.42544963737004227, 0.43833655985795783, 0.4510696559885235,
    0.4636476090008061, 0.4760693303227612, 0.48833395105640554, 0.5004408131472942,
    0.5123894603107377, 0.5241796287829132, 0.5358112379604637, 0.5472843809874369,
    0.5585993153435624, 0.5697564534829784, 0.5807563535676704, 0.5915997103351114,
    0.6022873461349642, 0.6128202021652414, 0.6231993299340659, 0.6334258829691446,
    0.6435011087932844, 0.6534263411807619, 0.6632029927060933, 0.6728325475937632,
    0.6823165548747481, 0.6916566218531999, 0.7008544078844502, 0.7099116184635249,
    0.7188299996216245, 0.7276113326265107, 0.7362574289814281, 0.7447701257160751,
    0.7531512809621944, 0.7614027698055784, 0.7695264804056583, 0.7775243103733478,
    0.7853981633974483};

// atan2(y, x) for floats y, x, not both zero, within 6 ulps (glibc's within 1; header):
// q = n / d = min(|y|, |x|) / max(|y|, |x|) in [0, 1] lies within 1/128 + 2^-19 of t =
// k / 64 (k from the floats' approximate quotient, 2^-20), so atan(q) = atan(t) + atan(r),
// r = (q - t) / (1 + q t) = (n - d t) / (d + n t), |r| < 2^-6.9.  d t and n t are exact
// (24 + 7 bits); num and den round once (2^-53 relative); their quotient from a
// reciprocal good to 2^-20, one Newton step on it (2^-40) and one on the quotient: r
// within 3 2^-53 relative of r*.  atan(r) = r - r^3/3 + r^5/5 - r^7/7 leaves r^9/9 <
// 2^-55 |r|; the sum with the table (1 ulp of atan(t)) rounds once: |atan(q) - h0| < 4
// ulp of h0.  h0 <= pi/4 + 2^-19; pi/2 - h0 and pi - h (each constant 2^-53.9 and 2^-53
// off, each difference rounded) add 1.5 ulp of their result apiece.  Measured against
// glibc over 2e7 float pairs (the division in place of the approximation): 1 ulp.
// max(|y|, |x|) must be a normal float for that bound (the approximate reciprocal flushes
// subnormals; k stays in the table whatever the input); both zero is ciede_h_prime's case.
// `table`: ciede_atan_table, or a block's shared copy of it.
VX_DEVICE double ciede_atan2(float y, float x, const double* table)
{
    const float ayf = fabsf(y), axf = fabsf(x);
    const bool swap = ayf > axf;
    const float nf = swap ? axf : ayf, df = swap ? ayf : axf;
    // (kf <= 64.5 for every normal df; a subnormal or NaN one still reads the table)
    const float kf = nf * vx_rcp_approxf(df) * (float)CIEDE_ATAN_STEPS + 0.5f;
    const int k = kf < (float)CIEDE_ATAN_STEPS ? (int)kf : CIEDE_ATAN_STEPS;
    const double n = (double)nf, d = (double)df;
    const double t = (double)k * (1.0 / CIEDE_ATAN_STEPS);
    const double num = n - d * t, den = d + n * t;
    const double z0 = vx_rcp_approx(den);
    const double z1 = fma(z0, fma(-den, z0, 1.0), z0);
    const double r0 = num * z1;
    const double r = fma(z1, fma(-den, r0, num), r0);
    const double r2 = r * r;
    const double c[3] = {-1.0 / 7.0, 1.0 / 5.0, -1.0 / 3.0};
    const double s = r2 * ciede_horner(c, r2);
    double h = table[k] + fma(r, s, r);
    if (swap)
        h = 1.5707963267948966 - h;
    if (x < 0.0f)
        h = 3.141592653589793 - h;
    return copysign(h, (double)y);
}

VX_DEVICE float ciede_h_prime(float x, float y, const double* atan_table, int* doubt)
{
    if (x == 0.0f && y == 0.0f)
        return 0.0f;
    float hue = ciede_round(ciede_atan2(x, y, atan_table), CIEDE_DOUBT, doubt);
    if (hue < 0.0f)
        hue = (float)((double)hue + 2.0 * CIEDE_PI);
    return hue;
}

// sin x for |x| <= 1.6 by the Taylor series to x^21 in Horner form (coefficients
// 1/n!, n! exact in a double, the quotients rounded once), leaving x^23/23! < 2^-58;
// the roundings of p (< 2^-52 of p) and of x^3 p (which is at most 0.75 of the result)
// and the last add: within 2.5 ulps (2 measured against glibc over 3e7 floats).
VX_DEVICE double ciede_sin_series(double x, double x2)
{
    const double c[10] = {-1.0 / 51090942171709440000.0, 1.0 / 121645100408832000.0, -1.0 / 355687428096000.0,
                          1.0 / 1307674368000.0, -1.0 / 6227020800.0, 1.0 / 39916800.0, -1.0 / 362880.0,
                          1.0 / 5040.0, -1.0 / 120.0, 1.0 / 6.0};
    return fma(-x * x2, ciede_horner(c, x2), x);
}

// sin x for the hue difference's half (|dh'/2| <= pi/2) and R_T's angle (<= pi/3) by
// the series; CUDA's general sin, which reduces its argument first and checks for huge
// ones, past |x| = 1.6
VX_DEVICE double ciede_sin(double x)
{
    if (!(fabs(x) <= 1.6) || x == 0.0)  // (and sin(-0) = -0, which x - x^3 p is not)
        return x == 0.0 ? x : sin(x);
    return ciede_sin_series(x, x * x);
}

// sin h and cos h for 0 <= h < 10 (T's hue, h < 3 pi), CUDA's sincos elsewhere, each
// within 2^-52 of the truth (the header's bound for T): k = rint(2h / pi) <= 6 and r =
// h - k pi/2 by two parts of pi/2 (the first's 32 bits times k and its difference
// from h exact, the second's product rounded once: r within 2^-54 + 2^-86, |r| <=
// pi/4 + 2^-50); sin r by the series above and cos r to r^18 (truncation < 2^-62),
// Horner's roundings within an ulp (2^-53); the quadrant by k mod 4.  2^-53 measured
// against glibc over 3e7 float hues.
VX_DEVICE void ciede_sincos(double h, double* s, double* c)
{
    if (!(h >= 0.0 && h < 10.0)) {
        sincos(h, s, c);
        return;
    }
    const double k = rint(h * 0.6366197723675814);
    const double r = fma(-k, 6.077100506506192e-11, fma(-k, 1.5707963267341256, h));
    const double r2 = r * r;
    const double sr = ciede_sin_series(r, r2);
    const double cos_c[9] = {-1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0,
                             1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5};
    const double cr = fma(r2, ciede_horner(cos_c, r2), 1.0);
    const int quadrant = (int)k & 3;
    const double a = (quadrant & 1) ? cr : sr, b = (quadrant & 1) ? sr : cr;
    *s = (quadrant & 2) ? -a : a;
    *c = ((quadrant + 1) & 2) ? -b : b;
}

// exp x for -128 <= x <= 0 (the hue weight's exp(-deg2), deg2 <= 122), CUDA's general
// exp elsewhere, within 1.5 ulps: k = rint(x / ln 2) >= -185 and r = x - k ln 2 by two
// parts of ln 2 (the first's 32 bits times k and its difference from x exact, the
// second's product rounded once: r within 2^-54 absolute, |r| <= ln 2 / 2 + 2^-40), exp r
// to r^13 (truncation < 2^-57), Horner's roundings within an ulp, times 2^k exactly.
VX_DEVICE double ciede_exp(double x)
{
    if (!(x >= -128.0 && x <= 0.0))
        return exp(x);
    const double k = rint(x * 1.4426950408889634);
    const double r = fma(-k, 1.9082149292705877e-10, fma(-k, 0.6931471803691238, x));
    const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                          1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0,
                          1.0 / 6.0, 0.5, 1.0, 1.0};
    return ciede_horner(c, r) * vx_double_from_high((u32)(1023 + (int)k) << 20);
}

// T = 1 - .17 cos(h - 30deg) + .24 cos(2h) + .32 cos(3h + 6deg) - .20 cos(4h - 63deg)
// from one sincos(h): the multiple angles by products, the shifts by the
// shifts' cosines and sines (correctly rounded literals; header for the bound)
VX_DEVICE double ciede_t(double h)
{
    double s, c;
    ciede_sincos(h, &s, &c);
    const double c2 = c * c - s * s, s2 = 2.0 * (s * c);
    const double c3 = c2 * c - s2 * s, s3 = s2 * c + c2 * s;
    const double c4 = c2 * c2 - s2 * s2, s4 = 2.0 * (s2 * c2);
    const double t1 = c * 0.8660254037844386 + s * 0.5;                      // cos(h - pi/6)
    const double t3 = c3 * 0.9945218953682733 - s3 * 0.10452846326765347;    // cos(3h + pi/30)
    const double t4 = c4 * 0.4539904997395468 + s4 * 0.8910065241883679;     // cos(4h - 7pi/20)
    return 1.0 - 0.17 * t1 + 0.24 * c2 + 0.32 * t3 - 0.20 * t4;
}

// ratio, R_T and the final difference for one choice of powf(c_bar_prime, 7);
// sin_rad = sin(rad), which does not depend on the choice
VX_DEVICE float ciede_tail(float p7, double sin_rad, float light, float chroma, float hue, int* doubt)
{
    const float ratio = p7 / (p7 + 6103515648.0f);
    const float r_t = ciede_round(-2.0 * sqrt((double)ratio) * sin_rad, CIEDE_DOUBT, doubt);
    const double ld = light, cd = chroma, hd = hue;
    return (float)sqrt(ld * ld + cd * cd + hd * hd + (double)(r_t * chroma * hue));
}

// `atan_table`: ciede_atan_table or a block's shared copy of it
VX_DEVICE float ciede_de00(const float* c1, const float* c2, const double* atan_table, int* doubt)
{
    const float l1 = c1[0], a1 = c1[1], b1 = c1[2];
    const float l2 = c2[0], a2 = c2[1], b2 = c2[2];
    const float dl = l2 - l1;
    const float l_bar = (l1 + l2) / 2.0f;
    const double a1d = a1, b1d = b1, a2d = a2, b2d = b2;
    const float cc1 = (float)sqrt(a1d * a1d + b1d * b1d);
    const float cc2 = (float)sqrt(a2d * a2d + b2d * b2d);
    const float c_bar = (cc1 + cc2) / 2.0f;
    const double cb7 = ciede_pow7((double)c_bar);
    const double g = 1.0 - sqrt(cb7 / (cb7 + 6103515625.0));
    const float ap1 = ciede_round(a1d + (double)(a1 / 2.0f) * g, CIEDE_DOUBT, doubt);
    const float ap2 = ciede_round(a2d + (double)(a2 / 2.0f) * g, CIEDE_DOUBT, doubt);
    const float cp1 = (float)sqrt((double)ap1 * (double)ap1 + b1d * b1d);
    const float cp2 = (float)sqrt((double)ap2 * (double)ap2 + b2d * b2d);
    const float cbp = (cp1 + cp2) / 2.0f;
    const float dcp = cp2 - cp1;
    const double lb = (double)(l_bar - 50.0f);
    const float s_l = (float)(1.0 + (0.015 * (lb * lb)) / sqrt(20.0 + lb * lb));
    const float s_c = (float)(1.0 + 0.045 * (double)cbp);
    const float h1 = ciede_h_prime(b1, ap1, atan_table, doubt);
    const float h2 = ciede_h_prime(b2, ap2, atan_table, doubt);
    float dhp;
    if (cc1 == 0.0f || cc2 == 0.0f)
        dhp = 0.0f;
    else if ((double)fabsf(h1 - h2) <= CIEDE_PI)
        dhp = h2 - h1;
    else if (h2 <= h1)
        dhp = (float)((double)(h2 - h1) + 2.0 * CIEDE_PI);
    else
        dhp = (float)((double)(h2 - h1) - 2.0 * CIEDE_PI);
    const float d_big_h = ciede_round(2.0 * sqrt((double)(cp1 * cp2)) * ciede_sin((double)dhp / 2.0), CIEDE_DOUBT, doubt);
    const double hsum = (double)(h1 + h2);
    const float h_bar = (float)((double)fabsf(h1 - h2) > CIEDE_PI ? (hsum + 2.0 * CIEDE_PI) / 2.0 : hsum / 2.0);
    const double hb = h_bar;
    const float t = ciede_round(ciede_t(hb), CIEDE_DOUBT, doubt);
    const float s_h = (float)(1.0 + 0.015 * (double)cbp * (double)t);
    float deg = (float)(hb * (180.0 / CIEDE_PI));
    deg = (float)(((double)deg - 275.0) * (1.0 / 25.0));
    const float deg2 = (float)((double)deg * (double)deg);
    const float e60 = ciede_round(60.0 * ciede_exp((double)(-deg2)), CIEDE_DOUBT, doubt);
    const float rad = (float)((double)e60 * (CIEDE_PI / 180.0));
    const float light = dl / (0.65f * s_l);
    const float chroma = dcp / (1.0f * s_c);
    const float hue = d_big_h / (4.0f * s_h);
    // powf(c_bar_prime, 7): glibc's powf is the float nearest the double power
    // except within 0.01 ulps of a midpoint (about 2 % of pixels); there both
    // neighbours are tried, and only a pixel whose result depends on the
    // choice is left to the host (glibc's powf is one of the two)
    const double pw = ciede_pow7((double)cbp);
    int near_mid = 0;
    const float p7 = ciede_round(pw, CIEDE_POWF_DOUBT, &near_mid);
    const double sin_rad = ciede_sin((double)rad);
    const float de = ciede_tail(p7, sin_rad, light, chroma, hue, doubt);
    if (near_mid) {
        const float other = (double)p7 <= pw ? nextafterf(p7, 3.4028235e38f) : nextafterf(p7, -3.4028235e38f);
        if (ciede_tail(other, sin_rad, light, chroma, hue, doubt) != de)
            *doubt = 1;
    }
    return de;
}

// The replacements of libvmaf's calls above, element by element, for the tests
// that hold them to the header's bounds against glibc on each device: which 0
// the sRGB gamma (pow(x, 2.4)), 1 the cube root, 2 T, 3 pow(x, 7); and the doubt
// test at a rounding (window 1e-6), 4 ciede_round's, 5 the general form's; 6 atan2(x, 1.0)
// and 7 atan2(1.0, x) (the hue's atan2 at the floats x, one side 1: every quotient);
// 8 ciede_sin; 9 and 10 ciede_sincos's sine and cosine; 11 ciede_exp.
VX_KERNEL void vx_ciede_functions(const double* in, double* out, int n, int which)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const double x = in[k];
        int doubt = 0;
        if (which == 4)
            ciede_round(x, 1e-6, &doubt);
        double sine = 0.0, cosine = 0.0;
        if (which == 9 || which == 10)
            ciede_sincos(x, &sine, &cosine);
        out[k] = which == 0   ? ciede_rgb_map(x)
                 : which == 1 ? cbrt(x)
                 : which == 2 ? ciede_t(x)
                 : which == 3 ? ciede_pow7(x)
                 : which == 4 ? (double)doubt
                 : which == 5 ? (double)ciede_near_midpoint(x, 1e-6)
                 : which == 6 ? ciede_atan2((float)x, 1.0f, ciede_atan_table)
                 : which == 7 ? ciede_atan2(1.0f, (float)x, ciede_atan_table)
                 : which == 8 ? ciede_sin(x)
                 : which == 9  ? sine
                 : which == 10 ? cosine
                               : ciede_exp(x);
    }
}

// The slow path's sum (ciede.py, _sequential_totals): libvmaf's double sum of a frame's
// floats in raster order, s = fl(s + x_i) from s = 0, for frames whose exact sum may
// differ from it.  The doubtful pixels' redone floats are put in place of their markers
// first (vx_ciede_scatter).  No contraction (kernels.py): each add rounds as the C's.
//
// A block a frame adds the floats a chunk at a time (CIEDE_SUM_E consecutive floats a
// thread), exactly as the one chain of adds would.  Let s > 0 lie in the binade
// [2^e, 2^(e+1)), where the doubles are the multiples of g = 2^(e-52): s = N g, N an
// integer in [2^52, 2^53).  For x >= 0 with q = x / g (exact: a float scaled by a power
// of two), as long as the sum stays in the binade, fl(s + x) = (N + r) g with r = q
// rounded to the nearest integer -- the same r whatever N is -- except at a tie (q's
// fraction exactly 1/2), where r is the one of n = floor(q), n + 1 that makes N + r even.
// So each float's r is known up front, the ties' from the parity of N + (the r's before
// it), which is a scan of maps on one bit (a non-tie flips it by r's parity, a tie sets it
// even: CiedeParity); then the r's are added by a second scan (CiedeRun, saturating at
// 2^62, far above any N + r that stays in the binade).  Every float before the first one
// whose running N + r reaches 2^53 (the sum leaves the binade: g doubles) is then right;
// that one, and any float that is not a finite number >= 0 or is as large as 2^53 g, is
// added by one thread as the C adds it (fl(s + x) in double), and the next chunk starts
// after it.  A sum at 0 stays 0 over zeros; its first other float is such a one.  A sum
// that is negative or not finite (a marker left in place, a NaN) takes the rest one float
// at a time.  A frame's sum leaves a binade some 30 times (the sum doubles each time), so
// chunks restart that often; the rest of a frame goes CIEDE_SUM_E * blockDim floats a
// chunk.  The emulator's block is one thread: chunks of CIEDE_SUM_E, the same arithmetic.
#ifndef CIEDE_SUM_E
#define CIEDE_SUM_E 8
#endif
#define CIEDE_SUM_THREADS 1024
#define CIEDE_SUM_CAP ((u64)1 << 62)
#define CIEDE_SUM_NONE 0xffffffffu
#define CIEDE_TWO53 9007199254740992.0

// The doubtful pixels' redone floats into the frames' floats: diffs[targets[k]] = values[k].
VX_KERNEL void vx_ciede_scatter(float* diffs, const i64* targets, const float* values, i64 count)
{
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += (i64)gridDim.x * blockDim.x)
        diffs[targets[k]] = values[k];
}

// Maps on the parity bit p of N + (the r's so far): bit 1 set, p becomes bit 0; else p ^= bit 0.
struct CiedeParity {
    typedef u32 T;
    VX_DEVICE T identity() { return 0u; }
    VX_DEVICE T then(T a, T c) { return (c & 2u) ? c : ((a & 2u) | ((a ^ c) & 1u)); }  // a, then c
    VX_DEVICE T shfl(T v, int d) { return vx_shfl_up_u32(v, d); }
};
VX_DEVICE u32 ciede_parity_apply(u32 f, u32 p) { return (f & 2u) ? (f & 1u) : (p ^ (f & 1u)); }

// Sums of r's, saturating at CIEDE_SUM_CAP (the terms are at most 2^53: no wrap)
struct CiedeRun {
    typedef u64 T;
    VX_DEVICE T identity() { return 0u; }
    VX_DEVICE T then(T a, T c)
    {
        const u64 s = a + c;
        return s < CIEDE_SUM_CAP ? s : CIEDE_SUM_CAP;
    }
    VX_DEVICE T shfl(T v, int d) { return vx_shfl_up_u64(v, d); }
};

// The first index: a minimum
struct CiedeFirst {
    typedef u32 T;
    VX_DEVICE T identity() { return CIEDE_SUM_NONE; }
    VX_DEVICE T then(T a, T c) { return a < c ? a : c; }
    VX_DEVICE T shfl(T v, int d) { return vx_shfl_up_u32(v, d); }
};

// Exclusive scan of one value a thread in thread order, and the block's total (in
// *total): in each warp by shuffles, then over the warps' totals by warp 0.  `wsum`
// holds 32 values; between two calls on the same `wsum` lies another barrier.
template <typename M>
VX_DEVICE typename M::T ciede_block_scan(typename M::T v, typename M::T* wsum, typename M::T* total)
{
    typedef typename M::T T;
    const int t = threadIdx.x, lane = t % VX_WARP, warp = t / VX_WARP;
    const int nwarps = (blockDim.x + VX_WARP - 1) / VX_WARP;
    T inc = v;
    for (int off = 1; off < VX_WARP; off <<= 1) {
        const T p = M::shfl(inc, off);
        if (lane >= off)
            inc = M::then(p, inc);
    }
    T exc = M::shfl(inc, 1);
    if (lane == 0)
        exc = M::identity();
    if (lane == VX_WARP - 1 || t == (int)blockDim.x - 1)
        wsum[warp] = inc;
    __syncthreads();
    if (warp == 0) {  // nwarps <= VX_WARP: the warps' totals, scanned in place (exclusive)
        T w = lane < nwarps ? wsum[lane] : M::identity();
        for (int off = 1; off < VX_WARP; off <<= 1) {
            const T p = M::shfl(w, off);
            if (lane >= off)
                w = M::then(p, w);
        }
        T y = M::shfl(w, 1);
        if (lane == 0)
            y = M::identity();
        if (lane < nwarps)
            wsum[lane] = y;
        if (lane == nwarps - 1)
            *total = w;
    }
    __syncthreads();
    return M::then(wsum[warp], exc);
}

VX_DEVICE void ciede_prefetch(const float* p)
{
#if defined(VX_CUDA)
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}

// sums[t] = libvmaf's sum of frame frames[t]'s `pixels` floats (diffs + frames[t] * pixels)
VX_KERNEL void VX_BOUNDS(CIEDE_SUM_THREADS, 1)
vx_ciede_seqsum(const float* diffs, i64 pixels, const i64* frames, double* sums, int count)
{
    const int E = CIEDE_SUM_E;
    __shared__ double s_sum;
    __shared__ i64 s_pos;
    __shared__ u32 w_par[32], w_first[32], par_total, first_total;
    __shared__ u64 w_run[32], run_total;
    const int t = threadIdx.x;
    for (int f = blockIdx.x; f < count; f += gridDim.x) {
        const float* d = diffs + frames[f] * pixels;
        if (t == 0)
            s_sum = 0.0, s_pos = 0;
        __syncthreads();
        for (;;) {
            const double s = s_sum;
            const i64 pos = s_pos;
            if (pos >= pixels)
                break;
            if (!(s >= 0.0) || !(s <= 1.7976931348623157e308)) {  // negative, NaN or infinite: one add at a time
                __syncthreads();
                if (t == 0) {
                    double r = s;
                    for (i64 k = pos; k < pixels; ++k)
                        r = r + (double)d[k];
                    s_sum = r, s_pos = pixels;
                }
                __syncthreads();
                continue;
            }
            const i64 chunk = (i64)E * blockDim.x;
            const i64 first = pos + (i64)t * E;
            if ((t & 3) == 0 && first + chunk < pixels)
                ciede_prefetch(d + first + chunk);
            // the grid: s = N g, g = 2^(e-52); q = x / g.  At s = 0 every float but a zero stops.
            const bool zero = s == 0.0;
            int e = 0;
            if (!zero) {
                frexp(s, &e);
                e -= 1;
            }
            const double inv = zero ? 0.0 : ldexp(1.0, 52 - e);
            const u64 big_n = (u64)(s * inv);
            float x[CIEDE_SUM_E];
            u64 r[CIEDE_SUM_E];
            u32 stop = CIEDE_SUM_NONE, ties = 0, map = 0;
            for (int j = 0; j < E; ++j) {
                x[j] = first + j < pixels ? d[first + j] : 0.0f;
                r[j] = 0;
                if (stop != CIEDE_SUM_NONE)
                    continue;
                if (zero) {
                    if (!(x[j] == 0.0f))
                        stop = j;
                    continue;
                }
                const double q = (double)x[j] * inv;
                if (!(x[j] >= 0.0f) || !(q < CIEDE_TWO53)) {
                    stop = j;
                    continue;
                }
                const double n = floor(q), frac = q - n;
                const bool tie = frac == 0.5;
                r[j] = (u64)n + (frac > 0.5 ? 1u : 0u);
                ties |= (tie ? 1u : 0u) << j;
                map = CiedeParity::then(map, tie ? 2u : (u32)(r[j] & 1u));
            }
            // the ties' r from the parity before them
            u32 p = ciede_parity_apply(ciede_block_scan<CiedeParity>(map, w_par, &par_total), (u32)(big_n & 1u));
            u64 mine = 0;
            for (int j = 0; j < E; ++j) {
                if ((u32)j >= stop)
                    break;
                if (ties & (1u << j)) {
                    r[j] += (p ^ (u32)(r[j] & 1u)) & 1u;  // r = n, or n + 1 where N + n is odd
                    p = 0;
                } else {
                    p ^= (u32)(r[j] & 1u);
                }
                mine = CiedeRun::then(mine, r[j]);
            }
            const u64 before = ciede_block_scan<CiedeRun>(mine, w_run, &run_total);
            // the first float that stops the chunk: one that is not for the grid, or whose
            // running N + r reaches 2^53
            u64 run = before;
            u32 at = CIEDE_SUM_NONE;
            for (int j = 0; j < E && at == CIEDE_SUM_NONE; ++j) {
                if ((u32)j >= stop) {
                    at = j;
                    break;
                }
                const u64 next = CiedeRun::then(run, r[j]);
                if (!zero && big_n + next >= ((u64)1 << 53)) {
                    at = j;
                    break;
                }
                run = next;
            }
            const u32 mine_at = at == CIEDE_SUM_NONE ? CIEDE_SUM_NONE : (u32)(t * E) + at;
            ciede_block_scan<CiedeFirst>(mine_at, w_first, &first_total);
            const u32 c = first_total;
            if (c == CIEDE_SUM_NONE) {
                if (t == 0) {
                    const i64 left = pixels - pos;
                    s_pos = pos + (chunk < left ? chunk : left);
                    if (!zero)
                        s_sum = ldexp((double)(big_n + run_total), e - 52);
                }
            } else if ((u32)t == c / E) {  // the stopping float's thread: s before it, plus it
                const double before_c = zero ? s : ldexp((double)(big_n + run), e - 52);
                s_sum = before_c + (double)x[c % E];
                s_pos = pos + c + 1;
            }
            __syncthreads();
        }
        if (t == 0)
            sums[f] = s_sum;
        __syncthreads();
    }
}

// Where libvmaf's upsampled chroma samples for output (i, j) come from: the flat index of
// U's sample into its picture (U rows, then V rows, `stride` samples apart, zeros after)
// mapped back onto our planes, V's being the same index one plane further.  Returns 0: U
// from u and V from v at offset *at; 1: U from v at *at (U's index fell into V's rows)
// and V zero; 2: both zero (past the picture, or a column past the plane's width).
VX_DEVICE int ciede_chroma_source(i64 pitch, int cw, int ch, int mode, int i, int j, i64* at)
{
    if (mode == 0) {  // 4:4:4: no upsampling
        *at = (i64)i * pitch + j;
        return 0;
    }
    const i64 stride = (cw + 31) & ~31;
    const i64 plane = stride * ch;
    int which = 0;
    i64 r, c;
    const int jj = mode == 1 ? j / 2 : j;
    if (jj < stride) {
        // the column within the row (4:2:0 always): the row is i / 2, past the U
        // plane's ch rows into V's, past both into the zeros; no division
        int q = i / 2;
        if (q >= ch) {
            q -= ch;
            which = 1;
            if (q >= ch)
                return 2;
        }
        r = q;
        c = jj;
    } else if (plane < ((i64)1 << 30)) {
        // every index below 2^31 (2 planes + a row): the division in 32 bits,
        // a fraction of the 64-bit one's instructions
        u32 idx = (u32)(i / 2) * (u32)stride + (u32)jj;
        if (idx >= (u32)plane) {
            idx -= (u32)plane;
            which = 1;
            if (idx >= (u32)plane)
                return 2;
        }
        const u32 q = idx / (u32)stride;
        r = q;
        c = idx - q * (u32)stride;
    } else {
        i64 idx = (i64)(i / 2) * stride + jj;
        if (idx >= plane) {
            idx -= plane;
            which = 1;
            if (idx >= plane)
                return 2;
        }
        r = idx / stride;
        c = idx % stride;
    }
    if (c >= cw)
        return 2;
    *at = r * pitch + c;
    return which;
}

// 256 threads (ciede.py's _THREADS) and four blocks an SM: 64 registers and 136
// bytes of spills a thread for sm_90 (ptxas -v).  The kernel is bound by issuing
// instructions with too few warps to hide their latency (ncu on the H200: IPC 2.6,
// occupancy limited by registers), so occupancy wins over the spills: µs per 1080p
// frame on the H200, the same call, (256, 2) 445 (96 registers, no spills),
// (256, 3) 348 (80, 36 bytes), (256, 4) 311 (docs/gpu-runs.md, eighth session).
#define CIEDE_BOUNDS VX_BOUNDS(256, 4)
// The table kernel (vx_ciede_u8_lab) has no conversions to hold: 64 registers without
// spills at four blocks an SM, 48 and 96 bytes of spills at five.  µs a 1080p frame on
// the H200, two rounds of one call: (256, 3) 231 / 236, (256, 4) 197 / 201, (256, 5)
// 195 / 194 (docs/gpu-runs.md, thirteenth session).  Four, without spills, stays the
// default: five is within 3 % at 1080p, and a later call's 576x324 figure with five
// (40 µs against 23 with four) is not explained.
#ifndef CIEDE_LAB_BOUNDS
#define CIEDE_LAB_BOUNDS VX_BOUNDS(256, 4)
#endif

#if defined(VX_EMU)
static inline int ciede_ffsll(long long x) { return __builtin_ffsll(x); }
#else
#define ciede_ffsll __ffsll
#endif

// Per-frame record (i64 words), summed over blocks with one atomic add each:
#define CIEDE_REC_SUM 0    // the differences in units of 2^-32 (exact)
#define CIEDE_REC_FINE 1   // differences with bits below 2^-32 (or >= 256): no exact sum
#define CIEDE_REC_DOUBT 2  // doubtful pixels (listed while there is room)
#define CIEDE_REC_LOW 3    // 13 counters: blocks whose lowest set bit is 2^(k - 32), k = 0..12 (12: higher)
#define CIEDE_REC_WORDS 16
// The batch's doubtful pixels: one list for all its frames, in no particular
// order, filled through one counter (listed[0]) while there is room, so the
// host copies back only its head (the count and the head: a few KiB a frame).
#define CIEDE_LIST_WORDS 8 // a listed pixel: index, ref y, u, v and dist y, u, v as used, its frame

template <typename T, bool TABLE>
VX_DEVICE void ciede_impl(const T* ry, const T* ru, const T* rv, const T* dy, const T* du, const T* dv, int w,
                          int h, int cw, int ch, i64 pitch0, i64 pitchc, i64 frame_stride, int mode, int bitdepth,
                          const double* gamma, const ciede_lab4* lab8, float* out, i64* rec, u64* listed,
                          int* list, int capacity)
{
    __shared__ i64 scratch[256];
    __shared__ double atan_table[CIEDE_ATAN_STEPS + 1];
    for (int k = threadIdx.x; k <= CIEDE_ATAN_STEPS; k += blockDim.x)
        atan_table[k] = ciede_atan_table[k];
    __syncthreads();
    const int i = blockIdx.y;
    const i64 f = (i64)blockIdx.z * frame_stride;
    const double scale = (double)(1 << (bitdepth - 8));
    i64* frec = rec + (i64)blockIdx.z * CIEDE_REC_WORDS;
    i64 sum = 0, fine = 0;
    int low = 64;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < w; j += gridDim.x * blockDim.x) {
        int doubt = 0;
        float lab1[3], lab2[3];
        i64 at = 0;
        const int from = ciede_chroma_source(pitchc, cw, ch, mode, i, j, &at);
        const i64 cu = f + at;
        const u32 s[6] = {(u32)ry[f + (i64)i * pitch0 + j],
                          from == 0 ? (u32)ru[cu] : from == 1 ? (u32)rv[cu] : 0u,
                          from == 0 ? (u32)rv[cu] : 0u,
                          (u32)dy[f + (i64)i * pitch0 + j],
                          from == 0 ? (u32)du[cu] : from == 1 ? (u32)dv[cu] : 0u,
                          from == 0 ? (u32)dv[cu] : 0u};
        // equal samples give equal L*a*b* and a difference of exactly 0 in libvmaf
        // (every term is 0 times a finite factor, S_L, S_C, S_H >= 1), whatever
        // the rounding of the intermediate values: no arithmetic, never doubtful
        float de = 0.0f;
        if (s[0] != s[3] || s[1] != s[4] || s[2] != s[5]) {
            if (TABLE) {  // 8-bit samples: both conversions read from vx_ciede_lab8's table
                const ciede_lab4 e1 = lab8[(s[0] << 16) | (s[1] << 8) | s[2]];
                const ciede_lab4 e2 = lab8[(s[3] << 16) | (s[4] << 8) | s[5]];
                lab1[0] = e1.l, lab1[1] = e1.a, lab1[2] = e1.b;
                lab2[0] = e2.l, lab2[1] = e2.a, lab2[2] = e2.b;
                if (e1.doubt != 0.0f || e2.doubt != 0.0f)
                    doubt = 1;
            } else {
                ciede_lab((double)s[0], (double)s[1], (double)s[2], scale, gamma, bitdepth, lab1, &doubt);
                ciede_lab((double)s[3], (double)s[4], (double)s[5], scale, gamma, bitdepth, lab2, &doubt);
            }
            de = ciede_de00(lab1, lab2, atan_table, &doubt);
        }
        out[(i64)blockIdx.z * w * h + (i64)i * w + j] = doubt ? -1.0f : de;
        if (doubt) {
            atomicAdd((u64*)(frec + CIEDE_REC_DOUBT), 1ull);
            const u64 k = atomicAdd(listed, 1ull);
            if (k < (u64)capacity) {
                int* e = list + (i64)k * CIEDE_LIST_WORDS;
                e[0] = i * w + j;
                for (int q = 0; q < 6; q++)
                    e[1 + q] = (int)s[q];
                e[7] = blockIdx.z;
            }
        } else if (de != 0.0f) {
            const double m = (double)de * 4294967296.0;  // exact: a power-of-two scaling
            if (m != floor(m) || m >= 1099511627776.0) {
                fine += 1;
            } else {
                const i64 v = (i64)m;
                sum += v;
                const int b = ciede_ffsll(v) - 1;
                if (b < low)
                    low = b;
            }
        }
    }
    const i64 block_sum = vx_block_sum_i64(sum, scratch);
    __syncthreads();
    const i64 block_fine = vx_block_sum_i64(fine, scratch);
    __syncthreads();
    // the block's lowest set bit: a minimum by the same tree
    const int n = blockDim.x;
    const int t = threadIdx.x;
    scratch[t] = low;
    __syncthreads();
    for (int st = n >> 1; st > 0; st >>= 1) {
        if (t < st && scratch[t + st] < scratch[t])
            scratch[t] = scratch[t + st];
        __syncthreads();
    }
    if (t == 0) {
        if (block_sum)
            atomicAdd((u64*)(frec + CIEDE_REC_SUM), (u64)block_sum);
        if (block_fine)
            atomicAdd((u64*)(frec + CIEDE_REC_FINE), (u64)block_fine);
        const int lowest = (int)scratch[0];
        if (lowest < 64)
            atomicAdd((u64*)(frec + CIEDE_REC_LOW + (lowest < 12 ? lowest : 12)), 1ull);
    }
}

VX_KERNEL void CIEDE_BOUNDS vx_ciede_u8(const u8* ry, const u8* ru, const u8* rv, const u8* dy, const u8* du, const u8* dv,
                           int w, int h, int cw, int ch, i64 pitch0, i64 pitchc, i64 frame_stride, int mode,
                           int bitdepth, const double* gamma, const ciede_lab4* lab8, float* out, i64* rec,
                           u64* listed, int* list, int capacity)
{
    ciede_impl<u8, false>(ry, ru, rv, dy, du, dv, w, h, cw, ch, pitch0, pitchc, frame_stride, mode, bitdepth, gamma,
                          lab8, out, rec, listed, list, capacity);
}

// the same with both pixels' L*a*b* read from vx_ciede_lab8's table (`lab8`, never null)
VX_KERNEL void CIEDE_LAB_BOUNDS vx_ciede_u8_lab(const u8* ry, const u8* ru, const u8* rv, const u8* dy, const u8* du,
                                                const u8* dv, int w, int h, int cw, int ch, i64 pitch0, i64 pitchc,
                                                i64 frame_stride, int mode, int bitdepth, const double* gamma,
                                                const ciede_lab4* lab8, float* out, i64* rec, u64* listed, int* list,
                                                int capacity)
{
    ciede_impl<u8, true>(ry, ru, rv, dy, du, dv, w, h, cw, ch, pitch0, pitchc, frame_stride, mode, bitdepth, gamma,
                         lab8, out, rec, listed, list, capacity);
}

VX_KERNEL void CIEDE_BOUNDS vx_ciede_u16(const u16* ry, const u16* ru, const u16* rv, const u16* dy, const u16* du,
                            const u16* dv, int w, int h, int cw, int ch, i64 pitch0, i64 pitchc, i64 frame_stride,
                            int mode, int bitdepth, const double* gamma, const ciede_lab4* lab8, float* out,
                            i64* rec, u64* listed, int* list, int capacity)
{
    ciede_impl<u16, false>(ry, ru, rv, dy, du, dv, w, h, cw, ch, pitch0, pitchc, frame_stride, mode, bitdepth, gamma, lab8,
                    out, rec, listed, list, capacity);
}
