// Float moments (libvmaf's "float_moment"): the sums of each luma's samples
// and of their squares, per frame, for the reference (role 0) and the
// distorted picture (role 1).
//
// Device twin of vmafxd.features.float_moment.moment_sums.  Up to 12 bits a
// sample k / scaler and its float square are exact and libvmaf's double sums
// never round, so any order gives its numbers: vx_fmoment_sums_* add the
// integer samples and their squares in int64 (the host scales them,
// float_moment.sums_from_integers).  At 16 bits the float square rounds and
// the double sum can round too, so vx_fmoment_seq_u16 adds the terms one
// after another in row order, one thread per frame and role, as moment.c does.
//
// Records: out[f * out_stride + role] += sum, out[f * out_stride + 2 + role] += sum of squares
// (the order of float_moment.NAMES: ref1st, dis1st, ref2nd, dis2nd).

template <typename T>
VX_DEVICE void fmoment_sums(const T* ref, const T* dis, int w, int h, i64 pitch, i64 fstride, i64* out,
                            int out_stride)
{
    __shared__ i64 scratch[256];
    const int f = blockIdx.z, role = blockIdx.y;
    const T* src = (role ? dis : ref) + f * fstride;
    i64 s1 = 0, s2 = 0;
    for (int y = blockIdx.x; y < h; y += gridDim.x) {
        const T* row = src + (i64)y * pitch;
        for (int x = threadIdx.x; x < w; x += blockDim.x) {
            const i64 v = row[x];
            s1 += v;
            s2 += v * v;
        }
    }
    const i64 t1 = vx_block_sum_i64(s1, scratch);
    __syncthreads();
    const i64 t2 = vx_block_sum_i64(s2, scratch);
    if (threadIdx.x == 0) {
        if (t1 != 0) vx_atomic_add_i64(out + f * out_stride + role, t1);
        if (t2 != 0) vx_atomic_add_i64(out + f * out_stride + 2 + role, t2);
    }
}

VX_KERNEL void vx_fmoment_sums_u8(const u8* ref, const u8* dis, int w, int h, i64 pitch, i64 fstride, i64* out,
                                  int out_stride)
{
    fmoment_sums<u8>(ref, dis, w, h, pitch, fstride, out, out_stride);
}

VX_KERNEL void vx_fmoment_sums_u16(const u16* ref, const u16* dis, int w, int h, i64 pitch, i64 fstride, i64* out,
                                   int out_stride)
{
    fmoment_sums<u16>(ref, dis, w, h, pitch, fstride, out, out_stride);
}

VX_KERNEL void vx_fmoment_seq_u16(const u16* ref, const u16* dis, int w, int h, i64 pitch, i64 fstride, float div,
                                  double* out, int out_stride)
{
    if (threadIdx.x != 0) return;
    const int f = blockIdx.z, role = blockIdx.y;
    const u16* src = (role ? dis : ref) + f * fstride;
    double s1 = 0.0, s2 = 0.0;
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            // picture_copy with offset 0: sample / scaler (adding 0 changes no non-negative float)
            const float v = (float)src[(i64)y * pitch + x] / div;
            const float sq = v * v;
            s1 += v;
            s2 += sq;
        }
    }
    out[f * out_stride + role] = s1;
    out[f * out_stride + 2 + role] = s2;
}
