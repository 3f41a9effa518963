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
// pixel's detector coordinate u (d = |k - u| bw). Both evaluate the same
// L, so the pair is matched to f32 rounding, and the weights are the CPU's
// Siddon lengths to rounding (they differ only for rays running exactly
// along pixel edges at exactly axis-aligned angles, where Siddon gives the
// segment to one of the two pixels and L gives each 0).

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

// Weight of a pixel at distance dl (pixels along the line) from the ray:
// len * clamp((a2 - dl) * inv, 0, 1), a2 = (1 + t)/2, inv = 1/t, t = n/m.
__device__ __forceinline__ float lp_weight(float dl, float a2, float inv, float len) {
    return len * fminf(1.0f, fmaxf(0.0f, (a2 - dl) * inv));
}

// Forward projection: one thread per (bin k, projection of the block, quad
// of 4 slices). SQ: squared weights (row norms).
template <bool SQ>
__device__ __forceinline__ void lp_forward_body(const float* __restrict__ vol,
                                                float* __restrict__ out,
                                                const FpAngle* __restrict__ angs, int nx,
                                                int ny, int na, int nb) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nb) return;
    const int a = blockIdx.y;
    const int quad = blockIdx.z;
    const FpAngle p = angs[a];
    const int steps = p.transposed ? nx : ny;
    const int width = p.transposed ? ny : nx;
    const size_t sl = p.transposed ? 1 : (size_t)nx;
    const size_t si = p.transposed ? (size_t)nx : 1;
    const float* img = vol + (size_t)quad * nx * ny * 4;
    const float t = (float)fabs(p.qs);
    const float a2 = 0.5f + 0.5f * t;
    const float inv = t > 1e-30f ? 1.0f / t : 1e30f;
    // Steps whose position lies in (-2, width + 1), loose by one on each side.
    const double q = p.q0 + (double)k * p.qk;
    int lo = 0, hi = steps;
    if (p.qs == 0.0) {
        if (!(q > -2.0 && q < (double)width + 1.0)) hi = 0;
    } else {
        const double t1 = (-2.0 - q) / p.qs, t2 = ((double)width + 1.0 - q) / p.qs;
        const double tmin = fmin(t1, t2), tmax = fmax(t1, t2);
        lo = (int)fmax(0.0, fmin((double)steps, floor(tmin) - 1.0));
        hi = (int)fmax((double)lo, fmin((double)steps, ceil(tmax) + 1.0));
    }
    long long pos = __double2ll_rn((q + (double)lo * p.qs) * 4294967296.0);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = lo; s < hi; ++s) {
        const int i0 = (int)(pos >> 32);
        const float fr = __uint_as_float(0x3f800000u | ((unsigned)pos >> 9)) - 1.0f;
        pos += p.dfix;
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            const int i = i0 + m;
            if (i < 0 || i >= width) continue;
            float w = lp_weight(m == 0 ? fr : 1.0f - fr, a2, inv, 1.0f);
            if (SQ) w *= w;
            const float4 v =
                *reinterpret_cast<const float4*>(img + ((size_t)s * sl + (size_t)i * si) * 4);
            acc[0] = fmaf(w, v.x, acc[0]);
            acc[1] = fmaf(w, v.y, acc[1]);
            acc[2] = fmaf(w, v.z, acc[2]);
            acc[3] = fmaf(w, v.w, acc[3]);
        }
    }
    const float len = SQ ? p.len * p.len : p.len;
    *reinterpret_cast<float4*>(out + (((size_t)quad * na + a) * nb + k) * 4) =
        make_float4(acc[0] * len, acc[1] * len, acc[2] * len, acc[3] * len);
}

extern "C" __global__ void __launch_bounds__(128)
    lp_forward(const float* __restrict__ vol, float* __restrict__ out,
               const FpAngle* __restrict__ angs, int nx, int ny, int na, int nb) {
    lp_forward_body<false>(vol, out, angs, nx, ny, na, nb);
}

extern "C" __global__ void __launch_bounds__(128)
    lp_forward_sq(const float* __restrict__ vol, float* __restrict__ out,
                  const FpAngle* __restrict__ angs, int nx, int ny, int na, int nb) {
    lp_forward_body<true>(vol, out, angs, nx, ny, na, nb);
}

// Back projection (the transpose as a gather): one thread per pixel of a
// 16x16 tile and quad of 4 slices, looping over the projections of the
// block; u in f64 per pixel and projection, the bins within h(m+n)/2.
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
        const BpAngle p = angs[a];
        const double u = p.c0 + (double)ix * p.cx + (double)iy * p.cy;
        const double acx = fabs(p.cx), acy = fabs(p.cy);
        // In bins: reach b2 = h(m+n)/(2 bw), ramp width h n / bw.
        const double b2 = 0.5 * (acx + acy);
        const double ramp = fmin(acx, acy);
        const float inv = ramp > 1e-30 ? (float)(1.0 / ramp) : 1e30f;
        const int k0 = max(0, (int)ceil(u - b2));
        const int k1 = min(nb - 1, (int)floor(u + b2));
        for (int k = k0; k <= k1; ++k) {
            const float e = (float)fabs((double)k - u);
            const float w = p.len * fminf(1.0f, fmaxf(0.0f, ((float)b2 - e) * inv));
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
