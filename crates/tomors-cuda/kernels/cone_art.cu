// ART (Kaczmarz) on the cone-beam Joseph projector, compiled appended to
// cone_joseph.cu (it uses its ConeFrame, Ray, setup_ray and visit_step):
// the rays of one projection in batches whose voxel sets are disjoint
// (detector pixels (row, col) with row = pr, col = pc modulo the stride s;
// the host picks s so that two rays of a batch pass at least 2*sqrt(2)
// voxels apart inside the volume, and a voxel a ray touches lies within
// sqrt(2) of it), projected (cj_art_forward) and updated (cj_art_update)
// one thread per ray, without atomics (deterministic). See
// src/iterative/cone/art.rs.

__device__ __forceinline__ float cart_clamp(float v, float lo, float hi) {
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return v;
}

// out[row][col] = A·vol on the rays of the batch (pr, pc) of projection a
// (out: one projection [row][col]; other pixels untouched).
extern "C" __global__ void __launch_bounds__(256)
    cj_art_forward(const float* __restrict__ vol, float* __restrict__ out,
                   const ConeFrame* __restrict__ frames, int a, int nx, int ny, int nz, double h,
                   int nr, int nc, int s, int pr, int pc) {
    const int col = pc + (int)(blockIdx.x * blockDim.x + threadIdx.x) * s;
    const int row = pr + (int)(blockIdx.y * blockDim.y + threadIdx.y) * s;
    if (col >= nc || row >= nr) return;
    Ray r;
    float acc = 0.0f;
    if (setup_ray(frames + a, row, col, nx, ny, nz, h, r)) {
        for (int i = r.first; i < r.end; ++i)
            visit_step(r, i, [&](int e, float w) { acc += w * __ldg(vol + e); });
        acc *= r.len;
    }
    out[(size_t)row * nc + col] = acc;
}

// vol <- clamp(vol + lambda * res[row][col] * w) along the rays of the batch
// (pr, pc) of projection a (w the ray's weights, step length included).
extern "C" __global__ void __launch_bounds__(256)
    cj_art_update(const float* __restrict__ res, float* __restrict__ vol,
                  const ConeFrame* __restrict__ frames, int a, int nx, int ny, int nz, double h,
                  int nr, int nc, int s, int pr, int pc, float lambda, float lo_v, float hi_v) {
    const int col = pc + (int)(blockIdx.x * blockDim.x + threadIdx.x) * s;
    const int row = pr + (int)(blockIdx.y * blockDim.y + threadIdx.y) * s;
    if (col >= nc || row >= nr) return;
    const float c0 = res[(size_t)row * nc + col];
    if (c0 == 0.0f) return;
    Ray r;
    if (!setup_ray(frames + a, row, col, nx, ny, nz, h, r)) return;
    const float c = c0 * lambda * r.len;
    for (int i = r.first; i < r.end; ++i)
        visit_step(r, i, [&](int e, float w) { vol[e] = cart_clamp(fmaf(c, w, vol[e]), lo_v, hi_v); });
}
