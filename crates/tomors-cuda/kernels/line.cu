// The line-length projector (tomors-core's LineProjector, Siddon) for
// parallel beam on the interleaved stacks of joseph.cu, as a matched pair
// of gathers (no atomics). See src/iterative/parallel/line.rs.
//
// The entry of ray (a, k) for pixel p is the length of the ray inside the
// pixel: with m = max(|sin|, |cos|), n = min(|sin|, |cos|) and d the distance
// of the ray from the pixel centre, a trapezoid
//   L(d) = (h/m) * clamp((h(m+n)/2 - d) / (h n), 0, 1)
// (h/m up to h(m-n)/2, zero beyond h(m+n)/2; a step at n = 0). The forward
// projection walks the ray along the dominant axis as jp_forward does (on
// line t the ray is at position q; the pixels i = floor(q) and floor(q) + 1
// are the only ones within reach, d = |i - q| h m); the back projection
// visits, per pixel and projection, the bins k within h(m+n)/2 of the
// pixel's detector coordinate u (d = |k - u| bw). Both evaluate L by the
// same f64 operations from the same per-projection constants (lp_w), so the
// pair is an exact transpose (bit-identical weights; f32 accumulation), and
// the weights are the CPU's Siddon lengths to f64 rounding, also for rays
// a hair off the axes (a steep ramp, which f32 could not resolve) and rays
// on pixel edges at exactly axis-aligned angles (Siddon's midpoint rule).

struct FpAngle {
    double q0;
    double qk;
    double qs;
    long long dfix;
    float len;
    int transposed;
};

struct BpAngle {
    double c0;
    double cx;
    double cy;
    float sigma;
    float len;
};

// The weight of ray (bin k) for a pixel whose centre has detector coordinate
// u (bins), evaluated in f64 by the same operations in both kernels (so the
// forward and back projections use bit-identical weights and are an exact
// transpose of each other): with e = |k - u|, reach b2 = h(m+n)/(2 bw) and
// ramp width h n / bw (bins), len * clamp((b2 - e) / ramp, 0, 1). At n = 0
// (exactly axis-aligned rays) the trapezoid is a step; a ray on the edge
// between two pixels counts for the one with the larger index along the
// detector axis (Siddon's midpoint rule: -b2 <= (k - u) sgn < b2).
struct LpConst {
    double c0, cx, cy, b2, inv, sgn;
    float len;
    int step;
};

__device__ __forceinline__ LpConst lp_const(const BpAngle& p) {
    LpConst c;
    c.c0 = p.c0;
    c.cx = p.cx;
    c.cy = p.cy;
    const double acx = fabs(p.cx), acy = fabs(p.cy);
    c.b2 = 0.5 * (acx + acy);
    const double ramp = fmin(acx, acy);
    c.step = ramp == 0.0 ? 1 : 0;
    c.inv = ramp == 0.0 ? 0.0 : 1.0 / ramp;
    c.sgn = (p.cx + p.cy) > 0.0 ? 1.0 : -1.0;
    c.len = p.len;
    return c;
}

__device__ __forceinline__ double lp_u(const LpConst& c, int ix, int iy) {
    return fma((double)iy, c.cy, fma((double)ix, c.cx, c.c0));
}

__device__ __forceinline__ float lp_w(const LpConst& c, int k, double u) {
    const double d = (double)k - u;
    if (c.step) {
        const double s = d * c.sgn;
        return (s >= -c.b2 && s < c.b2) ? c.len : 0.0f;
    }
    return (float)((double)c.len * fmin(1.0, fmax(0.0, (c.b2 - fabs(d)) * c.inv)));
}

// Forward projection: one thread per (bin k, projection of the block, quad
// of 4 slices). The ray is stepped along the dominant axis in 32.32 fixed
// point as jp_forward does, only to find the candidate pixels of each line
// (floor(q) - 1 .. floor(q) + 2, a margin over the stepping error); their
// weights are lp_w's. SQ: squared weights (row norms).
template <bool SQ>
__device__ __forceinline__ void lp_forward_body(const float* __restrict__ vol,
                                                float* __restrict__ out,
                                                const FpAngle* __restrict__ angs,
                                                const BpAngle* __restrict__ bangs, int nx,
                                                int ny, int na, int nb) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nb) return;
    const int a = blockIdx.y;
    const int quad = blockIdx.z;
    const FpAngle p = angs[a];
    const LpConst c = lp_const(bangs[a]);
    const int steps = p.transposed ? nx : ny;
    const int width = p.transposed ? ny : nx;
    const float* img = vol + (size_t)quad * nx * ny * 4;
    // Steps whose position lies in (-3, width + 2), loose by one on each side.
    const double q = p.q0 + (double)k * p.qk;
    int lo = 0, hi = steps;
    if (p.qs == 0.0) {
        if (!(q > -3.0 && q < (double)width + 2.0)) hi = 0;
    } else {
        const double t1 = (-3.0 - q) / p.qs, t2 = ((double)width + 2.0 - q) / p.qs;
        const double tmin = fmin(t1, t2), tmax = fmax(t1, t2);
        lo = (int)fmax(0.0, fmin((double)steps, floor(tmin) - 1.0));
        hi = (int)fmax((double)lo, fmin((double)steps, ceil(tmax) + 1.0));
    }
    long long pos = __double2ll_rn((q + (double)lo * p.qs) * 4294967296.0);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = lo; s < hi; ++s) {
        const int i0 = (int)(pos >> 32);
        pos += p.dfix;
#pragma unroll
        for (int m = -1; m <= 2; ++m) {
            const int i = i0 + m;
            if (i < 0 || i >= width) continue;
            const int ix = p.transposed ? s : i;
            const int iy = p.transposed ? i : s;
            float w = lp_w(c, k, lp_u(c, ix, iy));
            if (w == 0.0f) continue;
            if (SQ) w *= w;
            const float4 v =
                *reinterpret_cast<const float4*>(img + ((size_t)iy * nx + ix) * 4);
            acc[0] = fmaf(w, v.x, acc[0]);
            acc[1] = fmaf(w, v.y, acc[1]);
            acc[2] = fmaf(w, v.z, acc[2]);
            acc[3] = fmaf(w, v.w, acc[3]);
        }
    }
    *reinterpret_cast<float4*>(out + (((size_t)quad * na + a) * nb + k) * 4) =
        make_float4(acc[0], acc[1], acc[2], acc[3]);
}

extern "C" __global__ void __launch_bounds__(128)
    lp_forward(const float* __restrict__ vol, float* __restrict__ out,
               const FpAngle* __restrict__ angs, const BpAngle* __restrict__ bangs, int nx,
               int ny, int na, int nb) {
    lp_forward_body<false>(vol, out, angs, bangs, nx, ny, na, nb);
}

extern "C" __global__ void __launch_bounds__(128)
    lp_forward_sq(const float* __restrict__ vol, float* __restrict__ out,
                  const FpAngle* __restrict__ angs, const BpAngle* __restrict__ bangs, int nx,
                  int ny, int na, int nb) {
    lp_forward_body<true>(vol, out, angs, bangs, nx, ny, na, nb);
}

// Back projection (the transpose as a gather): one thread per pixel of a
// 16x16 tile and quad of 4 slices, looping over the projections of the
// block; the bins within b2 of u, weighted by lp_w.
extern "C" __global__ void __launch_bounds__(256)
    lp_back(const float* __restrict__ sino, float* __restrict__ out,
            const BpAngle* __restrict__ angs, int nx, int ny, int na, int nb) {
    const int ix = blockIdx.x * 16 + (threadIdx.x & 15);
    const int iy = blockIdx.y * 16 + (threadIdx.x >> 4);
    const int quad = blockIdx.z;
    if (ix >= nx || iy >= ny) return;
    const float* sq = sino + (size_t)quad * na * nb * 4;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int a = 0; a < na; ++a) {
        const LpConst c = lp_const(angs[a]);
        const double u = lp_u(c, ix, iy);
        const int k0 = max(0, (int)ceil(u - c.b2));
        const int k1 = min(nb - 1, (int)floor(u + c.b2));
        for (int k = k0; k <= k1; ++k) {
            const float w = lp_w(c, k, u);
            const float4 v = *reinterpret_cast<const float4*>(sq + ((size_t)a * nb + k) * 4);
            acc[0] = fmaf(w, v.x, acc[0]);
            acc[1] = fmaf(w, v.y, acc[1]);
            acc[2] = fmaf(w, v.z, acc[2]);
            acc[3] = fmaf(w, v.w, acc[3]);
        }
    }
    *reinterpret_cast<float4*>(out + (((size_t)quad * ny + iy) * nx + ix) * 4) =
        make_float4(acc[0], acc[1], acc[2], acc[3]);
}
