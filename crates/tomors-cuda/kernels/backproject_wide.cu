
// ---------------------------------------------------------------------------
// alu wide (appended to backproject.cu; half4 texels only): one block
// reconstructs 8 slices, the texture groups 2z and 2z + 1, so the position,
// weight and cache address of a pixel and projection serve 8 slices instead
// of 4. A cache entry holds the two groups' half4 values (and differences,
// linear with advanced caching): 16 B (32 B), the same shared bytes per
// update as `bp_alu` with half4 texels, half the index instructions.
// Parameters as `bp_alu` (NS, SD, CW, LIN, ADV = 1 for linear, FROUND, MINB,
// HMATH); no hybrid, oversampling or plain-load caching. The last block of
// an odd number of groups leaves the second group empty.
// Compiled only when WIDE is 1 (its cache of 32-byte entries would not fit
// the other configurations' wider caches).
// Grid (ceil(NX/NS), ceil(NY/NS), ceil(groups/2)), block 256.
#if defined(NS) && SPT == 4 && WIDE
#if LIN
struct ent2_t {
    uint4 a;  // groups 2z (x, y) and 2z + 1 (z, w): value (+ half a difference with FROUND)
    uint4 d;  // differences to the next bin
};
#else
typedef uint4 ent2_t;
#endif

__device__ __forceinline__ uint2 lo2(const uint4 v) { return make_uint2(v.x, v.y); }
__device__ __forceinline__ uint2 hi2(const uint4 v) { return make_uint2(v.z, v.w); }

// Adds a half4 (two half2 words) to the f32 accumulator.
__device__ __forceinline__ void add_h4(acc_t& s, const uint2 q) { add(s, to_acc(q)); }

#if LIN
// s += a + f d for the four halfs of one group (a, d: half4 as uint2).
__device__ __forceinline__ void lerp_h4(acc_t& s, const uint2 a, const uint2 d, float f) {
#if HMATH
    const __half2 g = __float2half2_rn(f);
    const float2 r0 = __half22float2(__hfma2(g, as_h2(d.x), as_h2(a.x)));
    const float2 r1 = __half22float2(__hfma2(g, as_h2(d.y), as_h2(a.y)));
    s.x += r0.x;
    s.y += r0.y;
    s.z += r1.x;
    s.w += r1.y;
#else
    add(s, axpy(to_acc(a), f, to_acc(d)));
#endif
}

// HMATH 2: s += (a0 + f0 d0) + (a1 + f1 d1) for two projections, summed in half2.
__device__ __forceinline__ void lerp2_h4(acc_t& s, const uint2 a0, const uint2 d0, float f0, const uint2 a1,
                                         const uint2 d1, float f1) {
    const __half2 g0 = __float2half2_rn(f0), g1 = __float2half2_rn(f1);
    const __half2 lo = __hfma2(g1, as_h2(d1.x), __hadd2(as_h2(a1.x), __hfma2(g0, as_h2(d0.x), as_h2(a0.x))));
    const __half2 hi = __hfma2(g1, as_h2(d1.y), __hadd2(as_h2(a1.y), __hfma2(g0, as_h2(d0.y), as_h2(a0.y))));
    const float2 l = __half22float2(lo), u = __half22float2(hi);
    s.x += l.x;
    s.y += l.y;
    s.z += u.x;
    s.w += u.y;
}
#endif

// Cache index of coordinate h (+ SHIFT) for nearest interpolation.
__device__ __forceinline__ int nearest_index(float h) {
#if FROUND
    return __float_as_int(h + MAGIC) - MAGIC_BITS;
#else
    return __float2int_rd(h);
#endif
}

extern "C" __global__ void __launch_bounds__(256, MINB) bp_alu_w2(const cudaTextureObject_t* __restrict__ texs,
                                                                  float* __restrict__ out, int nslices, float scale,
                                                                  const double* __restrict__ dconst,
                                                                  const val_t* __restrict__ texels, long long plane,
                                                                  int pitch) {
    __shared__ ent2_t cache[SD][CW];
    __shared__ float4 pc[SD];
    const int t = threadIdx.x;
    const int x0 = blockIdx.x * NS, y0 = blockIdx.y * NS;
    const int g0 = 2 * blockIdx.z;
    const bool two = g0 + 1 < (nslices + 3) / 4;
    const cudaTextureObject_t tex0 = texs[g0];
    const cudaTextureObject_t tex1 = two ? texs[g0 + 1] : tex0;
    const int z = t & 15, sq = t >> 4;
    const int lx = 4 * (sq % (NS / 4)) + ((z & 1) | ((z >> 1) & 2));
    const int ly = 4 * (sq / (NS / 4)) + (((z >> 1) & 1) | ((z >> 2) & 2));
    const float fx = (float)lx, fy = (float)ly;
    const int cj = t / TPR, ck = t % TPR;
    acc_t s0[NQ], s1[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
        s0[q] = zero();
        s1[q] = zero();
    }
    for (int pb = 0; pb < NPROJ; pb += SD) {
        // Stage 1: cache the bins of projection pb + cj for both groups.
        const int p = pb + cj;
        if (p < NPROJ) {
            const double c0 = __ldg(dconst + p), cx = __ldg(dconst + NPROJ + p), cy = __ldg(dconst + 2 * NPROJ + p);
            const double u0 = c0 + (double)x0 * cx + (double)y0 * cy;
            const double umin = u0 + fmin(0.0, (NS - 1) * cx) + fmin(0.0, (NS - 1) * cy);
            const double hm = floor(umin) - 1.0;
            const float v = (float)p + 0.5f;
            for (int k = ck; k < CW; k += TPR) {
                const float u = (float)hm + (float)k + 0.5f;
#if LIN
                const acc_t a0 = to_acc(tfetch(tex0, u, v));
                const acc_t d0 = sub(to_acc(tfetch(tex0, u + 1.0f, v)), a0);
                acc_t a1 = zero(), d1 = zero();
                if (two) {
                    a1 = to_acc(tfetch(tex1, u, v));
                    d1 = sub(to_acc(tfetch(tex1, u + 1.0f, v)), a1);
                }
                const uint2 ea0 = from_acc(FROUND ? axpy(a0, 0.5f, d0) : a0);
                const uint2 ea1 = from_acc(FROUND ? axpy(a1, 0.5f, d1) : a1);
                const uint2 ed0 = from_acc(d0), ed1 = from_acc(d1);
                ent2_t e;
                e.a = make_uint4(ea0.x, ea0.y, ea1.x, ea1.y);
                e.d = make_uint4(ed0.x, ed0.y, ed1.x, ed1.y);
                cache[cj][k] = e;
#else
                const uint2 q0 = tfetch(tex0, u, v);
                const uint2 q1 = two ? tfetch(tex1, u, v) : make_uint2(0u, 0u);
                cache[cj][k] = make_uint4(q0.x, q0.y, q1.x, q1.y);
#endif
            }
            if (ck == 0) pc[cj] = make_float4((float)(u0 - hm + SHIFT), (float)cx, (float)cy, 0.0f);
        } else {
            for (int k = ck; k < CW; k += TPR) {
#if LIN
                ent2_t e;
                e.a = make_uint4(0u, 0u, 0u, 0u);
                e.d = e.a;
                cache[cj][k] = e;
#else
                cache[cj][k] = make_uint4(0u, 0u, 0u, 0u);
#endif
            }
            if (ck == 0) pc[cj] = make_float4(2.0f, 0.0f, 0.0f, 0.0f);
        }
        __syncthreads();
        // Stage 2: interpolate from the cache.
#if LIN && HMATH == 2
#pragma unroll 2
        for (int j = 0; j < SD; j += 2) {
            const float4 c0 = pc[j], c1 = pc[j + 1];
            const float hx0 = fmaf(fx, c0.y, c0.x), hx1 = fmaf(fx, c1.y, c1.x);
            const ent2_t* __restrict__ row0 = cache[j];
            const ent2_t* __restrict__ row1 = cache[j + 1];
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const float fq = fy + (float)(q * RSTEP);
                int i0, i1;
                float f0, f1;
                locate(fmaf(fq, c0.z, hx0), i0, f0);
                locate(fmaf(fq, c1.z, hx1), i1, f1);
                const ent2_t e0 = row0[i0];
                const ent2_t e1 = row1[i1];
                lerp2_h4(s0[q], lo2(e0.a), lo2(e0.d), f0, lo2(e1.a), lo2(e1.d), f1);
                lerp2_h4(s1[q], hi2(e0.a), hi2(e0.d), f0, hi2(e1.a), hi2(e1.d), f1);
            }
        }
#else
#pragma unroll 2
        for (int j = 0; j < SD; ++j) {
            const float4 c = pc[j];
            const float hx = fmaf(fx, c.y, c.x);
            const ent2_t* __restrict__ row = cache[j];
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const float h = fmaf(fy + (float)(q * RSTEP), c.z, hx);
#if LIN
                int i;
                float f;
                locate(h, i, f);
                const ent2_t e = row[i];
                lerp_h4(s0[q], lo2(e.a), lo2(e.d), f);
                lerp_h4(s1[q], hi2(e.a), hi2(e.d), f);
#else
                const ent2_t e = row[nearest_index(h)];
                add_h4(s0[q], lo2(e));
                add_h4(s1[q], hi2(e));
#endif
            }
        }
#endif
        __syncthreads();
    }
    const int gx = x0 + lx;
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
        const int gy = y0 + ly + q * RSTEP;
        if (gx < NX && gy < NY) {
            const long long idx = (long long)gy * NX + gx;
            store(out, g0, nslices, idx, s0[q], scale);
            if (two) store(out, g0 + 1, nslices, idx, s1[q], scale);
        }
    }
}
#endif
