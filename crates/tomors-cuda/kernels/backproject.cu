// Parallel-beam back projection through the texture unit.
//
// Baked parameters (#defines prepended by the host):
//   NX, NY     slice size in pixels (x = columns, y = rows, row 0 at the top)
//   NPROJ      number of projections
//   SPT        slices per texel: 1 (float), 2 (float2), 4 (four halfs in a uint2, nearest only)
//   CMEM       1: per-projection constants in __constant__ memory; 0: in a global buffer
//   MINB       minimum resident blocks per multiprocessor for bp_texopt (__launch_bounds__)
//
// Geometry: for projection p the texture coordinate of pixel (ix, iy) is
//   t = c0[p] + ix * cx[p] + iy * cy[p]   (computed as fmaf(iy, cy, fmaf(ix, cx, c0)))
// = u + 0.5 where u is the detector bin coordinate of the pixel centre (bin k
// centred at k); the texture row is p + 0.5. The textures use border
// addressing (zeros outside the detector) and hardware point or linear filtering.
#if SPT == 4
#include <cuda_fp16.h>
#endif

#if CMEM
__constant__ float c_c0[NPROJ];
__constant__ float c_cx[NPROJ];
__constant__ float c_cy[NPROJ];
#define C0(p) c_c0[p]
#define CX(p) c_cx[p]
#define CY(p) c_cy[p]
#define CONST_PARAM
#else
#define CONST_PARAM , const float* __restrict__ g_const
#define C0(p) __ldg(g_const + (p))
#define CX(p) __ldg(g_const + NPROJ + (p))
#define CY(p) __ldg(g_const + 2 * NPROJ + (p))
#endif

#if SPT == 1
typedef float acc_t;
__device__ __forceinline__ acc_t fetch(cudaTextureObject_t t, float u, float v) { return tex2D<float>(t, u, v); }
__device__ __forceinline__ acc_t zero() { return 0.0f; }
__device__ __forceinline__ void add(acc_t& a, const acc_t b) { a += b; }
__device__ __forceinline__ acc_t shfl_x(const acc_t a, int m) { return __shfl_xor_sync(0xffffffffu, a, m); }
#elif SPT == 2
typedef float2 acc_t;
__device__ __forceinline__ acc_t fetch(cudaTextureObject_t t, float u, float v) { return tex2D<float2>(t, u, v); }
__device__ __forceinline__ acc_t zero() { return make_float2(0.0f, 0.0f); }
__device__ __forceinline__ void add(acc_t& a, const acc_t b) { a.x += b.x; a.y += b.y; }
__device__ __forceinline__ acc_t shfl_x(const acc_t a, int m) {
    return make_float2(__shfl_xor_sync(0xffffffffu, a.x, m), __shfl_xor_sync(0xffffffffu, a.y, m));
}
#elif SPT == 4
typedef float4 acc_t;
// The texture holds four halfs per texel as a uint2, read with point
// filtering (returned bit for bit) and converted to float right after the fetch.
__device__ __forceinline__ acc_t fetch(cudaTextureObject_t t, float u, float v) {
    const uint2 q = tex2D<uint2>(t, u, v);
    __half2 lo, hi;
    *reinterpret_cast<unsigned int*>(&lo) = q.x;
    *reinterpret_cast<unsigned int*>(&hi) = q.y;
    const float2 a = __half22float2(lo);
    const float2 b = __half22float2(hi);
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ acc_t zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
__device__ __forceinline__ void add(acc_t& a, const acc_t b) { a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w; }
__device__ __forceinline__ acc_t shfl_x(const acc_t a, int m) {
    return make_float4(__shfl_xor_sync(0xffffffffu, a.x, m), __shfl_xor_sync(0xffffffffu, a.y, m),
                       __shfl_xor_sync(0xffffffffu, a.z, m), __shfl_xor_sync(0xffffffffu, a.w, m));
}
#else
#error "SPT must be 1, 2 or 4"
#endif

// Writes the SPT slices of texture group g at pixel offset idx (slices >= nslices are padding).
__device__ __forceinline__ void store(float* __restrict__ out, int g, int nslices, long long idx, const acc_t v, float scale) {
    const long long plane = (long long)NX * NY;
#if SPT == 1
    out[g * plane + idx] = v * scale;
#elif SPT == 2
    const int s = 2 * g;
    out[s * plane + idx] = v.x * scale;
    if (s + 1 < nslices) out[(s + 1) * plane + idx] = v.y * scale;
#else
    const int s = 4 * g;
    out[s * plane + idx] = v.x * scale;
    if (s + 1 < nslices) out[(s + 1) * plane + idx] = v.y * scale;
    if (s + 2 < nslices) out[(s + 2) * plane + idx] = v.z * scale;
    if (s + 3 < nslices) out[(s + 3) * plane + idx] = v.w * scale;
#endif
}

// standard: one thread per pixel, 16x16 blocks of 256 threads, each thread
// loops over all projections. SMAP orders the threads inside the block:
//   0: row-major (threads 0-15 = first pixel row; a warp covers 16x2 pixels),
//   1: 2x2 quads (bit 0 = x, bit 1 = y, bits 2-4 = quad column, 5-7 = quad row;
//      a warp still covers 16x2 pixels, but 4 consecutive threads form a quad),
//   2: 4x4 squares along a Z-order curve (bits 0-3), squares in rows of four
//      (bits 4-5), rows of squares (bits 6-7): a warp covers 8x4 pixels,
//      the mapping of tex-opt without its projection split.
// Grid (ceil(NX/16), ceil(NY/16), groups), block 256.
#ifndef SMAP
#define SMAP 2
#endif
#ifndef STD_ILP
#define STD_ILP 16
#endif
extern "C" __global__ void __launch_bounds__(256) bp_standard(const cudaTextureObject_t* __restrict__ texs,
                                                              float* __restrict__ out, int nslices,
                                                              float scale CONST_PARAM) {
    const int t = threadIdx.x;
#if SMAP == 0
    const int lx = t & 15, ly = t >> 4;
#elif SMAP == 1
    const int lx = (((t >> 2) & 7) << 1) + (t & 1);
    const int ly = ((t >> 5) << 1) + ((t >> 1) & 1);
#else
    const int z = t & 15;
    const int lx = 4 * ((t >> 4) & 3) + ((z & 1) | ((z >> 1) & 2));
    const int ly = 4 * (t >> 6) + (((z >> 1) & 1) | ((z >> 2) & 2));
#endif
    const int ix = blockIdx.x * 16 + lx;
    const int iy = blockIdx.y * 16 + ly;
    if (ix >= NX || iy >= NY) return;
    const cudaTextureObject_t tex = texs[blockIdx.z];
    const float fx = (float)ix, fy = (float)iy;
#if STD_ILP > 1
    // STD_ILP independent partial sums: STD_ILP fetches of consecutive
    // projections are issued before any of them is used (the profiler showed
    // the one-accumulator loop leaving the texture pipe 65% idle).
    acc_t s[STD_ILP];
#pragma unroll
    for (int j = 0; j < STD_ILP; ++j) s[j] = zero();
    int p = 0;
#pragma unroll 2
    for (; p + STD_ILP <= NPROJ; p += STD_ILP) {
        acc_t f[STD_ILP];
#pragma unroll
        for (int j = 0; j < STD_ILP; ++j) {
            const int q = p + j;
            f[j] = fetch(tex, fmaf(fy, CY(q), fmaf(fx, CX(q), C0(q))), (float)q + 0.5f);
        }
#pragma unroll
        for (int j = 0; j < STD_ILP; ++j) add(s[j], f[j]);
    }
    for (; p < NPROJ; ++p) add(s[0], fetch(tex, fmaf(fy, CY(p), fmaf(fx, CX(p), C0(p))), (float)p + 0.5f));
#pragma unroll
    for (int j = 1; j < STD_ILP; ++j) add(s[0], s[j]);
    store(out, blockIdx.z, nslices, (long long)iy * NX + ix, s[0], scale);
#else
    acc_t s = zero();
#pragma unroll 8
    for (int p = 0; p < NPROJ; ++p) {
        const float t = fmaf(fy, CY(p), fmaf(fx, CX(p), C0(p)));
        add(s, fetch(tex, t, (float)p + 0.5f));
    }
    store(out, blockIdx.z, nslices, (long long)iy * NX + ix, s, scale);
#endif
}

// tex-opt: a block of 256 threads reconstructs a 16x16 tile. Thread bits:
// 0-3 = pixel inside a 4x4 square along a Z-order curve, 4-5 = square in a
// row of four squares (a 16x4 strip), 6-7 = projection offset mp: the four
// groups of 64 threads process projections mp, mp+4, ... in parallel. Each
// thread accumulates 4 pixels (the four 16x4 strips of the tile); the four
// partial sums of a pixel are reduced through shared memory and a shuffle
// over groups of 4 lanes, and the tile is written with coalesced stores.
// Grid (ceil(NX/16), ceil(NY/16), groups), block 256.
extern "C" __global__ void __launch_bounds__(256, MINB) bp_texopt(const cudaTextureObject_t* __restrict__ texs,
                                                                  float* __restrict__ out, int nslices,
                                                                  float scale CONST_PARAM) {
    __shared__ acc_t part[256];
    __shared__ acc_t tile[16][17];
    const int t = threadIdx.x;
    const int z = t & 15, sq = (t >> 4) & 3, mp = t >> 6;
    const int xin = (z & 1) | ((z >> 1) & 2);
    const int yin = ((z >> 1) & 1) | ((z >> 2) & 2);
    const int x0 = blockIdx.x * 16, y0 = blockIdx.y * 16;
    const float fx = (float)(x0 + 4 * sq + xin);
    float fy[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) fy[q] = (float)(y0 + 4 * q + yin);
    const cudaTextureObject_t tex = texs[blockIdx.z];
    acc_t s[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) s[q] = zero();
#pragma unroll 2
    for (int p = mp; p < NPROJ; p += 4) {
        const float b = fmaf(fx, CX(p), C0(p));
        const float cy = CY(p);
        const float v = (float)p + 0.5f;
#pragma unroll
        for (int q = 0; q < 4; ++q) add(s[q], fetch(tex, fmaf(fy[q], cy, b), v));
    }
    const int pix = t & 63;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        part[pix * 4 + mp] = s[q];
        __syncthreads();
        acc_t r = part[t];
        add(r, shfl_x(r, 1));
        add(r, shfl_x(r, 2));
        if ((t & 3) == 0) {
            const int pp = t >> 2;
            const int zz = pp & 15, ss = pp >> 4;
            const int xx = 4 * ss + ((zz & 1) | ((zz >> 1) & 2));
            const int yy = 4 * q + (((zz >> 1) & 1) | ((zz >> 2) & 2));
            tile[yy][xx] = r;
        }
        __syncthreads();
    }
    const int ox = t & 15, oy = t >> 4;
    const int gx = x0 + ox, gy = y0 + oy;
    if (gx < NX && gy < NY) store(out, blockIdx.z, nslices, (long long)gy * NX + gx, tile[oy][ox], scale);
}
