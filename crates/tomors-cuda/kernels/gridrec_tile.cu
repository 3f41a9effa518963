// The tiled gather of the gridding method (tomors `--method fourier`), the
// default: see gridrec.cu for the layout and tomors-core's fourier module
// (and its test fourier_tile_model.rs, a line-by-line model of this kernel).

#ifndef KW
#define KW 6  // kernel width in cells
#endif
#ifndef TILE
#define TILE 64  // side of a tile in cells
#endif
// Row stride of the shared tile: one more than TILE, so that the lanes of a
// warp on a steep line (cells one row apart) fall in different banks.
#define TSTRIDE (TILE + 1)

// The ES kernel lowered by its edge value e^{-beta} (tomors-core
// fourier::kernel::es), with the SFU exponential (relative error ~1e-6 at
// these arguments, below the method's error).
__device__ __forceinline__ float gt_es(float beta, float edge, float z) {
    const float t = 1.0f - z * z;
    return (t <= 0.0f) ? 0.0f : __expf(beta * (sqrtf(t) - 1.0f)) - edge;
}

// Tiled gather: one block per TILE x TILE cells of one grid. The block
// enumerates every polar sample whose KW x KW footprint touches its cells (the
// angles within the tile's angular window, the radial samples within its
// dilated rectangle), spreads each into its own cells only (separable
// weights, shared-memory atomics), and writes each cell once: no global
// atomics, the same products as gr_gather (different summation order).
// Grid (ceil(G / TILE), ceil(G / TILE), pairs), block 256.
extern "C" __global__ void __launch_bounds__(256) gr_tile(const float2* __restrict__ spec, float2* __restrict__ grid,
                                                          const float* __restrict__ cosv,
                                                          const float* __restrict__ sinv, int na, int P, int G,
                                                          int images, float alpha, float rmax, float half_w,
                                                          float beta, float edge, float theta0, float dtheta) {
    __shared__ float tre[TILE * TSTRIDE];
    __shared__ float tim[TILE * TSTRIDE];
    const int pq = blockIdx.z;
    const float2* sp = spec + (long long)pq * na * P;
    const int x0 = -G / 2 + (int)blockIdx.x * TILE;
    const int y0 = -G / 2 + (int)blockIdx.y * TILE;
    const int x1 = min(x0 + TILE, G / 2);  // exclusive
    const int y1 = min(y0 + TILE, G / 2);
    for (int i = threadIdx.x; i < TILE * TSTRIDE; i += blockDim.x) {
        tre[i] = 0.0f;
        tim[i] = 0.0f;
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    const float hw = half_w, inv = 1.0f / hw;
    const float PI_F = 3.14159265358979323846f;
    const float kmax = (float)(P / 2 - 1);
    const float last = theta0 + (float)(na - 1) * dtheta;
    for (int oy = -images; oy <= images; ++oy) {
        for (int ox = -images; ox <= images; ++ox) {
            const float sx = (float)(ox * G), sy = (float)(oy * G);
            // Samples (X, Y) with |px - X| < hw for a cell px = gx + ox G of the tile.
            const float ax = (float)x0 + sx - hw, bx = (float)(x1 - 1) + sx + hw;
            const float ay = (float)y0 + sy - hw, by = (float)(y1 - 1) + sy + hw;
            const float nx = fmaxf(fmaxf(ax, -bx), 0.0f), ny = fmaxf(fmaxf(ay, -by), 0.0f);
            if (sqrtf(nx * nx + ny * ny) > rmax) continue;
            const bool all = (ax <= 0.0f && bx >= 0.0f && ay <= 0.0f && by >= 0.0f);
            float lo_a = 0.0f, hi_a = 0.0f;
            int m0 = 0, m1 = 0;
            if (!all) {
                const float pc = atan2f(0.5f * (ay + by), 0.5f * (ax + bx));
                float dmin = 0.0f, dmax = 0.0f;
                const float cxs[4] = {ax, bx, ax, bx}, cys[4] = {ay, ay, by, by};
                for (int c = 0; c < 4; ++c) {
                    float d = atan2f(cys[c], cxs[c]) - pc;
                    if (d > PI_F) d -= 2.0f * PI_F;
                    if (d < -PI_F) d += 2.0f * PI_F;
                    dmin = fminf(dmin, d);
                    dmax = fmaxf(dmax, d);
                }
                lo_a = pc + dmin - 1e-5f;
                hi_a = pc + dmax + 1e-5f;
                m0 = (int)floorf((theta0 - hi_a) / PI_F);
                m1 = (int)ceilf((last - lo_a) / PI_F);
            }
            for (int m = m0; m <= m1; ++m) {
                int j0 = 0, j1 = na - 1;
                if (!all) {
                    j0 = (int)fmaxf(ceilf((lo_a + (float)m * PI_F - theta0) / dtheta), 0.0f);
                    j1 = (int)fminf(floorf((hi_a + (float)m * PI_F - theta0) / dtheta), (float)(na - 1));
                }
                for (int j = j0 + warp; j <= j1; j += nwarps) {
                    const float cs = __ldg(cosv + j), sn = __ldg(sinv + j);
                    float lo = -1e30f, hi = 1e30f;
                    if (fabsf(cs) > 1e-6f) {
                        const float a = ax / cs, b = bx / cs;
                        lo = fmaxf(lo, fminf(a, b));
                        hi = fminf(hi, fmaxf(a, b));
                    } else if (ax > 0.0f || bx < 0.0f) {
                        continue;
                    }
                    if (fabsf(sn) > 1e-6f) {
                        const float a = ay / sn, b = by / sn;
                        lo = fmaxf(lo, fminf(a, b));
                        hi = fminf(hi, fmaxf(a, b));
                    } else if (ay > 0.0f || by < 0.0f) {
                        continue;
                    }
                    const int k0 = (int)fmaxf(ceilf(lo / alpha), -kmax);
                    const int k1 = (int)fminf(floorf(hi / alpha), kmax);
                    const float2* row = sp + (long long)j * P;
                    for (int k = k0 + lane; k <= k1; k += 32) {
                        const float r = alpha * (float)k;
                        const float X = r * cs, Y = r * sn;
                        const float2 v = __ldg(row + (k < 0 ? k + P : k));
                        const int gxs = (int)floorf(X - sx - hw) + 1;
                        const int gys = (int)floorf(Y - sy - hw) + 1;
                        float wx[KW], wy[KW];
#pragma unroll
                        for (int t = 0; t < KW; ++t) {
                            const int gx = gxs + t, gy = gys + t;
                            wx[t] = (gx >= x0 && gx < x1) ? gt_es(beta, edge, ((float)gx + sx - X) * inv) : 0.0f;
                            wy[t] = (gy >= y0 && gy < y1) ? gt_es(beta, edge, ((float)gy + sy - Y) * inv) : 0.0f;
                        }
#pragma unroll
                        for (int ty = 0; ty < KW; ++ty) {
                            if (wy[ty] == 0.0f) continue;
                            const int base = (gys + ty - y0) * TSTRIDE + (gxs - x0);
#pragma unroll
                            for (int tx = 0; tx < KW; ++tx) {
                                const float w = wx[tx] * wy[ty];
                                if (w != 0.0f) {
                                    atomicAdd(&tre[base + tx], v.x * w);
                                    atomicAdd(&tim[base + tx], v.y * w);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) {
        const int lx = i % TILE, ly = i / TILE;
        const int gx = x0 + lx, gy = y0 + ly;
        if (gx >= x1 || gy >= y1) continue;
        const int ix = gx < 0 ? gx + G : gx, iy = gy < 0 ? gy + G : gy;
        grid[((long long)pq * G + iy) * G + ix] = make_float2(tre[ly * TSTRIDE + lx], tim[ly * TSTRIDE + lx]);
    }
}

