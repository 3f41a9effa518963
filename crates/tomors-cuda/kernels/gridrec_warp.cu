// The tiled gather of the gridding method (tomors `--method fourier`, the
// default): see gridrec.cu for the layout, and tomors-core's fourier module
// for the reference (`gather_point`) and the CPU model of this kernel's
// enumeration of a tile's samples (`gather_tile`: the same loops). An earlier
// version added into one shared tile with float atomicAdd, which sm_90
// compiles to a compare-and-swap loop (ATOMS.CAST.SPIN): 2x slower.
//
// One block per TILE x TILE cells; each of its WARPS warps owns a private
// copy of the tile in shared memory (one float2 (re, im) per cell) and takes
// every WARPS-th angle of the tile's window. A warp walks the radial samples
// of its line in rounds: the lanes are SLOTS = 32 / KW groups of KW lanes,
// group s taking sample base + s*d + i in step i, lane c of a group the
// footprint column c of its sample. d is so large that the footprints of
// samples d apart are disjoint (max(|dX|, |dY|) >= KW + 1.5 cells), so within
// one step no two lanes touch the same cell, and each cell is updated by
// plain shared-memory adds in a fixed order (a __syncwarp between steps
// orders them): no atomics, and the result is bitwise reproducible. At the
// end the block sums the WARPS copies in a fixed order and writes each cell
// once. Measured on an H200 (docs/perf-notes.md): one cell per lane instead
// of one column was 1.4x slower, separate re and im arrays 1.16x slower,
// tiles of 20, 24 or 28 cells (more warps per SM) 1.15-1.4x slower.

#ifndef KW
#define KW 4  // kernel width in cells
#endif
#ifndef TILE
#define TILE 32  // side of a tile in cells
#endif
#ifndef WARPS
#define WARPS 4  // warps per block (private tile copies)
#endif
// Row stride of a private tile in cells: TILE + 4 (float2 rows 8 banks apart).
#define WSTRIDE (TILE + 4)
// Samples in flight per warp step.
#define SLOTS (32 / KW)

// The ES kernel lowered by its edge value e^{-beta} (tomors-core
// fourier::kernel::es) in a branch-free form: sqrt(t) as t * rsqrt(t) and the
// exponential as 2^(beta2 (sqrt(t) - 1)) with beta2 = beta log2(e), both on
// the SFU (relative error ~1e-6 at these arguments, below the method's
// error; the CPU evaluates the same function with IEEE sqrt and exp).
__device__ __forceinline__ float gw_rsqrt(float x) {
    float y;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float gw_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float gw_es(float beta2, float edge, float z) {
    const float t = 1.0f - z * z;
    const float s = t * gw_rsqrt(fmaxf(t, 1e-30f));
    const float e = gw_ex2(beta2 * (s - 1.0f)) - edge;
    return (t > 0.0f) ? e : 0.0f;
}

// Grid (ceil(G / TILE), ceil(G / TILE), pairs), block WARPS * 32.
extern "C" __global__ void __launch_bounds__(WARPS * 32)
    gr_warp(const float2* __restrict__ spec, float2* __restrict__ grid, const float* __restrict__ cosv,
            const float* __restrict__ sinv, int na, int P, int G, int images, float alpha, float rmax,
            float half_w, float beta, float edge, float theta0, float dtheta) {
    __shared__ float2 sacc[WARPS][TILE * WSTRIDE];
    const int pq = blockIdx.z;
    const float2* sp = spec + (long long)pq * na * P;
    const int x0 = -G / 2 + (int)blockIdx.x * TILE;
    const int y0 = -G / 2 + (int)blockIdx.y * TILE;
    const int x1 = min(x0 + TILE, G / 2);  // exclusive
    const int y1 = min(y0 + TILE, G / 2);
    for (int i = threadIdx.x; i < WARPS * TILE * WSTRIDE; i += blockDim.x) {
        (&sacc[0][0])[i] = make_float2(0.0f, 0.0f);
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // This lane's slot (sample) and footprint column.
    const int slot = lane / KW;
    const int col0 = lane % KW;
    const bool lane_ok = slot < SLOTS;
    const float beta2 = beta * 1.44269504088896341f;
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
#pragma unroll
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
                // Warp-uniform from here on: every lane of a warp takes the same lines and steps.
                for (int j = j0 + warp; j <= j1; j += WARPS) {
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
                    if (k0 > k1) continue;
                    // Samples d apart have disjoint footprints.
                    const float step = alpha * fmaxf(fabsf(cs), fabsf(sn));
                    const int d = max((int)ceilf(((float)KW + 1.5f) / step), 1);
                    const float2* row = sp + (long long)j * P;
                    for (int base = k0; base <= k1; base += SLOTS * d) {
                        for (int i = 0; i < d; ++i) {
                            const int k = base + slot * d + i;
                            // Lane (slot, c) evaluates column weight c and row weight c of its
                            // slot's sample; the row weights go round the slot by shuffles.
                            const bool act = lane_ok && k <= k1;
                            float wx = 0.0f, wys = 0.0f;
                            float2 v = make_float2(0.0f, 0.0f);
                            int gx = 0, gys = 0;
                            if (act) {
                                const float r = alpha * (float)k;
                                const float X = r * cs, Y = r * sn;
                                v = __ldg(row + (k < 0 ? k + P : k));
                                gx = (int)floorf(X - sx - hw) + 1 + col0;
                                gys = (int)floorf(Y - sy - hw) + 1;
                                wx = (gx >= x0 && gx < x1) ? gw_es(beta2, edge, ((float)gx + sx - X) * inv) : 0.0f;
                                wys = gw_es(beta2, edge, ((float)(gys + col0) + sy - Y) * inv);
                            }
                            const int col = (gx - x0) - y0 * WSTRIDE;
#pragma unroll
                            for (int ty = 0; ty < KW; ++ty) {
                                const float wy = __shfl_sync(0xffffffffu, wys, slot * KW + ty);
                                const int gy = gys + ty;
                                if (wx != 0.0f && gy >= y0 && gy < y1) {
                                    const float w = wx * wy;
                                    const int idx = gy * WSTRIDE + col;
                                    float2 a = sacc[warp][idx];
                                    a.x += v.x * w;
                                    a.y += v.y * w;
                                    sacc[warp][idx] = a;
                                }
                            }
                            __syncwarp();
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
        float re = 0.0f, im = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            const float2 a = sacc[w][ly * WSTRIDE + lx];
            re += a.x;
            im += a.y;
        }
        const int ix = gx < 0 ? gx + G : gx, iy = gy < 0 ? gy + G : gy;
        grid[((long long)pq * G + iy) * G + ix] = make_float2(re, im);
    }
}
