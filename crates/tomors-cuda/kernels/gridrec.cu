// Direct Fourier reconstruction by gridding (tomors `--method fourier`).
// A port of tomors-core's `fourier` module (cpu.rs and gather.rs), with the
// same f32 arithmetic and loop bounds; see that module for the formulas.
//
// Layout: a slab of `slices` sinograms [slice][angle][bin] is packed as
// `pairs` complex sinograms [pair][angle][P] (slice 2q in the real parts,
// 2q + 1 in the imaginary parts), transformed, weighted, gathered onto
// `pairs` grids [pair][G][G] (FFT order), inverse transformed, cropped.

// Value k of the padded copy of a row of n bins in a buffer of P values
// (zeros, or the circular edge extension of the FBP filter).
__device__ __forceinline__ float gr_padded(const float* __restrict__ s, int k, int n, int P, int edge) {
    if (k < n) return s[k];
    if (!edge) return 0.0f;
    const int half = n + (P - n) / 2;
    return (k < half) ? s[n - 1] : s[0];
}

// grid (ceil(P / 256), NA, pairs), block 256.
extern "C" __global__ void gr_pad(const float* __restrict__ src, float2* __restrict__ dst, int n, int P, int NA,
                                  int slices, int edge) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y;
    const int q = blockIdx.z;
    if (k >= P) return;
    const long long plane = (long long)NA * n;
    const float* a = src + (long long)(2 * q) * plane + (long long)j * n;
    const float re = gr_padded(a, k, n, P, edge);
    const float im = (2 * q + 1 < slices) ? gr_padded(a + plane, k, n, P, edge) : 0.0f;
    dst[((long long)q * NA + j) * P + k] = make_float2(re, im);
}

// Spectra times response[|k|] · e^{2πi k shift_j / P} (phase in double).
// grid (ceil(P / 256), NA, pairs), block 256.
extern "C" __global__ void gr_weight(float2* __restrict__ spec, const double* __restrict__ shift,
                                     const float* __restrict__ resp, int P, int NA) {
    const int f = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y;
    const int q = blockIdx.z;
    if (f >= P) return;
    const int k = (f <= P / 2) ? f : f - P;
    const double r = (double)resp[k < 0 ? -k : k];
    double x = (double)k * shift[j] / (double)P;
    x -= rint(x);
    double s, c;
    sincospi(2.0 * x, &s, &c);
    const float cr = (float)(r * c), ci = (float)(r * s);
    const long long idx = ((long long)q * NA + j) * P + f;
    const float2 v = spec[idx];
    spec[idx] = make_float2(v.x * cr - v.y * ci, v.x * ci + v.y * cr);
}

// The ES kernel lowered by its edge value e^{-beta} (tomors-core
// fourier::kernel::es), with the SFU exponential (relative error ~1e-6 at
// these arguments, below the method's error).
__device__ __forceinline__ float gr_es(float beta, float edge, float z) {
    const float t = 1.0f - z * z;
    return (t <= 0.0f) ? 0.0f : __expf(beta * (sqrtf(t) - 1.0f)) - edge;
}

struct GrParams {
    int na, P, G, images;
    float alpha, rmax, half_w, beta, edge, theta0, dtheta;
};

// Adds the samples of projection j near point (px, py) (cells).
__device__ __forceinline__ void gr_sum_angle(const GrParams& q, const float2* __restrict__ spec, float cs, float sn,
                                             int j, float px, float py, float2& acc) {
    const float hw = q.half_w;
    float lo = -1e30f, hi = 1e30f;
    if (fabsf(cs) > 1e-6f) {
        const float a = (px - hw) / cs, b = (px + hw) / cs;
        lo = fmaxf(lo, fminf(a, b));
        hi = fminf(hi, fmaxf(a, b));
    } else if (fabsf(px) >= hw) {
        return;
    }
    if (fabsf(sn) > 1e-6f) {
        const float a = (py - hw) / sn, b = (py + hw) / sn;
        lo = fmaxf(lo, fminf(a, b));
        hi = fminf(hi, fmaxf(a, b));
    } else if (fabsf(py) >= hw) {
        return;
    }
    const float kmax = (float)(q.P / 2 - 1);
    const int k0 = (int)fmaxf(ceilf(lo / q.alpha), -kmax);
    const int k1 = (int)fminf(floorf(hi / q.alpha), kmax);
    const float inv = 1.0f / hw;
    const float2* row = spec + (long long)j * q.P;
    for (int k = k0; k <= k1; ++k) {
        const float r = q.alpha * (float)k;
        const float zx = (px - r * cs) * inv;
        const float zy = (py - r * sn) * inv;
        const float w = gr_es(q.beta, q.edge, zx) * gr_es(q.beta, q.edge, zy);
        if (w != 0.0f) {
            const float2 v = __ldg(row + (k < 0 ? k + q.P : k));
            acc.x += v.x * w;
            acc.y += v.y * w;
        }
    }
}

// Gather: one thread per grid point, grid (ceil(G / 16), ceil(G / 16), pairs), block (16, 16).
extern "C" __global__ void gr_gather(const float2* __restrict__ spec, float2* __restrict__ grid,
                                     const float* __restrict__ cosv, const float* __restrict__ sinv, int na, int P,
                                     int G, int images, float alpha, float rmax, float half_w, float beta,
                                     float edge, float theta0, float dtheta) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    const int iy = blockIdx.y * blockDim.y + threadIdx.y;
    const int pq = blockIdx.z;
    if (ix >= G || iy >= G) return;
    GrParams q;
    q.na = na; q.P = P; q.G = G; q.images = images; q.alpha = alpha; q.rmax = rmax;
    q.half_w = half_w; q.beta = beta; q.edge = edge; q.theta0 = theta0; q.dtheta = dtheta;
    const float2* sp = spec + (long long)pq * na * P;
    const int gx = (ix < G / 2) ? ix : ix - G;
    const int gy = (iy < G / 2) ? iy : iy - G;
    const float PI_F = 3.14159265358979323846f;
    const float wdiag = half_w * 1.41421356237309515f;
    const float last = theta0 + (float)(na - 1) * dtheta;
    float2 acc = make_float2(0.0f, 0.0f);
    for (int oy = -images; oy <= images; ++oy) {
        for (int ox = -images; ox <= images; ++ox) {
            const float px = (float)(gx + ox * G);
            const float py = (float)(gy + oy * G);
            const float rho = sqrtf(px * px + py * py);
            if (rho - wdiag > rmax) continue;
            if (rho <= wdiag) {
                for (int j = 0; j < na; ++j) gr_sum_angle(q, sp, cosv[j], sinv[j], j, px, py, acc);
                continue;
            }
            const float a = asinf(wdiag / rho);
            const float phi = atan2f(py, px);
            const int m0 = (int)floorf((theta0 - a - phi) / PI_F);
            const int m1 = (int)ceilf((last + a - phi) / PI_F);
            for (int m = m0; m <= m1; ++m) {
                const float c = phi + (float)m * PI_F;
                const int j0 = (int)fmaxf(ceilf((c - a - theta0) / dtheta), 0.0f);
                const int j1 = (int)fminf(floorf((c + a - theta0) / dtheta), (float)(na - 1));
                for (int j = j0; j <= j1; ++j) gr_sum_angle(q, sp, __ldg(cosv + j), __ldg(sinv + j), j, px, py, acc);
            }
        }
    }
    grid[((long long)pq * G + iy) * G + ix] = acc;
}

// Crop with deapodization and split the pair: output (iy, ix) is grid image
// (m_y mod G, m_x mod G), m_x = ix − nx/2, m_y = ny/2 − iy.
// grid (ceil(nx / 256), ny, pairs), block 256.
extern "C" __global__ void gr_crop(const float2* __restrict__ img, float* __restrict__ out,
                                   const float* __restrict__ dx, const float* __restrict__ dy, int G, int nx, int ny,
                                   int slices) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    const int iy = blockIdx.y;
    const int q = blockIdx.z;
    if (ix >= nx) return;
    int mx = (ix - nx / 2) % G;
    if (mx < 0) mx += G;
    int my = (ny / 2 - iy) % G;
    if (my < 0) my += G;
    const float2 v = img[((long long)q * G + my) * G + mx];
    const float d = dx[ix] * dy[iy];
    const long long plane = (long long)nx * ny;
    const long long o = (long long)(2 * q) * plane + (long long)iy * nx + ix;
    out[o] = v.x * d;
    if (2 * q + 1 < slices) out[o + plane] = v.y * d;
}
