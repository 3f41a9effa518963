// ART (Kaczmarz) on Joseph's parallel-beam projector: the rays of one
// projection in batches whose pixel sets are disjoint (bins k = phase,
// phase + stride, ...; the host picks the stride so that two rays of a
// batch are at least two pixels apart on every line), projected
// (jp_art_forward) and updated (jp_art_update) one thread per ray and quad
// of 4 slices. No two threads of a batch touch the same pixel, so the
// update needs no atomics and the result is deterministic. See
// src/iterative/parallel/art.rs.
//
// Layouts (those of joseph.cu): volumes [quad][y][x][4], the residual of one
// projection [quad][1][bin][4]. The ray of bin k steps over the lines (rows
// for row stepping, columns when `transposed`) of the volume itself (no
// transposed copy: the volume changes after every batch); on line t it is
// at position q0 + k*qk + t*qs, stepped in 32.32 fixed point as jp_forward
// steps it, so the weights are jp_forward's to f32 rounding.

// Per-projection constants of joseph.cu's forward projector (same layout).
struct FpAngle {
    double q0;
    double qk;
    double qs;
    long long dfix;
    float len;
    int transposed;
};

// Steps [lo, hi) of the ray of bin k and its fixed-point position at lo;
// false when it misses the image.
__device__ __forceinline__ bool art_ray(const FpAngle& p, int k, int steps, int width, int& lo,
                                        int& hi, long long& pos) {
    const double q = p.q0 + (double)k * p.qk;
    int l = 0, h = steps;
    if (p.qs == 0.0) {
        if (!(q > -1.0 && q < (double)width)) h = 0;
    } else {
        const double t1 = (-1.0 - q) / p.qs, t2 = ((double)width - q) / p.qs;
        const double tmin = fmin(t1, t2), tmax = fmax(t1, t2);
        l = (int)fmax(0.0, fmin((double)steps, floor(tmin) - 1.0));
        h = (int)fmax((double)l, fmin((double)steps, ceil(tmax) + 1.0));
    }
    lo = l;
    hi = h;
    pos = __double2ll_rn((q + (double)l * p.qs) * 4294967296.0);
    return h > l;
}

__device__ __forceinline__ float art_clamp(float v, float lo, float hi) {
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return v;
}

// out[quad][k] = sum over the ray of bin k of w * vol (times the step length),
// for the bins k = phase + j*stride of projection a.
extern "C" __global__ void __launch_bounds__(128)
    jp_art_forward(const float* __restrict__ vol, float* __restrict__ out,
                   const FpAngle* __restrict__ angs, int a, int nx, int ny, int nb, int phase,
                   int stride) {
    const int k = phase + (int)(blockIdx.x * blockDim.x + threadIdx.x) * stride;
    if (k >= nb) return;
    const int q = blockIdx.y;
    const FpAngle p = angs[a];
    const int steps = p.transposed ? nx : ny;
    const int width = p.transposed ? ny : nx;
    // Pixel offsets of one step along the ray and one position along a line.
    const size_t sl = p.transposed ? 1 : (size_t)nx;
    const size_t si = p.transposed ? (size_t)nx : 1;
    const float* img = vol + (size_t)q * nx * ny * 4;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int lo, hi;
    long long pos;
    if (art_ray(p, k, steps, width, lo, hi, pos)) {
        for (int t = lo; t < hi; ++t) {
            const int i0 = (int)(pos >> 32);
            const float w1 = __uint_as_float(0x3f800000u | ((unsigned)pos >> 9)) - 1.0f;
            const float w0 = 1.0f - w1;
            pos += p.dfix;
            if (i0 >= 0 && i0 < width) {
                const float4 v = *reinterpret_cast<const float4*>(img + ((size_t)t * sl + (size_t)i0 * si) * 4);
                acc[0] = fmaf(w0, v.x, acc[0]);
                acc[1] = fmaf(w0, v.y, acc[1]);
                acc[2] = fmaf(w0, v.z, acc[2]);
                acc[3] = fmaf(w0, v.w, acc[3]);
            }
            if (i0 + 1 >= 0 && i0 + 1 < width) {
                const float4 v = *reinterpret_cast<const float4*>(img + ((size_t)t * sl + (size_t)(i0 + 1) * si) * 4);
                acc[0] = fmaf(w1, v.x, acc[0]);
                acc[1] = fmaf(w1, v.y, acc[1]);
                acc[2] = fmaf(w1, v.z, acc[2]);
                acc[3] = fmaf(w1, v.w, acc[3]);
            }
        }
    }
    *reinterpret_cast<float4*>(out + ((size_t)q * nb + k) * 4) =
        make_float4(acc[0] * p.len, acc[1] * p.len, acc[2] * p.len, acc[3] * p.len);
}

// vol <- clamp(vol + lambda * r[quad][k] * w) along the rays of the bins
// k = phase + j*stride of projection a (w the ray's weights, step length
// included); rays whose residuals are all zero change nothing.
extern "C" __global__ void __launch_bounds__(128)
    jp_art_update(const float* __restrict__ res, float* __restrict__ vol,
                  const FpAngle* __restrict__ angs, int a, int nx, int ny, int nb, int phase,
                  int stride, float lambda, float lo_v, float hi_v) {
    const int k = phase + (int)(blockIdx.x * blockDim.x + threadIdx.x) * stride;
    if (k >= nb) return;
    const int q = blockIdx.y;
    const FpAngle p = angs[a];
    const float4 r4 = *reinterpret_cast<const float4*>(res + ((size_t)q * nb + k) * 4);
    if (r4.x == 0.0f && r4.y == 0.0f && r4.z == 0.0f && r4.w == 0.0f) return;
    const float s = lambda * p.len;
    const float c[4] = {r4.x * s, r4.y * s, r4.z * s, r4.w * s};
    const int steps = p.transposed ? nx : ny;
    const int width = p.transposed ? ny : nx;
    const size_t sl = p.transposed ? 1 : (size_t)nx;
    const size_t si = p.transposed ? (size_t)nx : 1;
    float* img = vol + (size_t)q * nx * ny * 4;
    int lo, hi;
    long long pos;
    if (!art_ray(p, k, steps, width, lo, hi, pos)) return;
    for (int t = lo; t < hi; ++t) {
        const int i0 = (int)(pos >> 32);
        const float w1 = __uint_as_float(0x3f800000u | ((unsigned)pos >> 9)) - 1.0f;
        const float w0 = 1.0f - w1;
        pos += p.dfix;
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            const int i = i0 + m;
            const float w = m == 0 ? w0 : w1;
            if (i < 0 || i >= width) continue;
            float4* px = reinterpret_cast<float4*>(img + ((size_t)t * sl + (size_t)i * si) * 4);
            float4 v = *px;
            v.x = art_clamp(fmaf(c[0], w, v.x), lo_v, hi_v);
            v.y = art_clamp(fmaf(c[1], w, v.y), lo_v, hi_v);
            v.z = art_clamp(fmaf(c[2], w, v.z), lo_v, hi_v);
            v.w = art_clamp(fmaf(c[3], w, v.w), lo_v, hi_v);
            *px = v;
        }
    }
}
