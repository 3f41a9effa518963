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

// ---------------------------------------------------------------------------
// alu: shared-memory cache + interpolation in the ALUs (the seeds' Algorithm
// 2). A block of 256 threads reconstructs an NS x NS tile (NS = 32 or 64).
// Per step of SD projections the block first caches, for each projection,
// the CW bins the tile needs (from hm = floor(min over the tile) - 1 on),
// fetched through the texture at texel centres (point sampling, so the
// cached values are the texels bit for bit); then every thread adds the
// contributions of the SD cached projections to its NQ = NS*NS/256 pixels,
// interpolating in f32 (no 8-bit weights).
//
// Baked parameters (besides NX, NY, NPROJ, SPT, MINB above):
//   NS      tile side (32 or 64)
//   SD      projections cached per step (8 or 16)
//   CW      cached bins per projection (>= the tile's bin span + 4)
//   LIN     1 linear, 0 nearest interpolation
//   ADV     advanced caching (linear only): each entry holds the value and
//           the difference to the next bin, one shared load per update
//   FROUND  1: rounding with the 1.5 * 2^23 float trick (FADDs and an
//           integer subtraction instead of conversion instructions)
//   HYB     hybrid: HYB of every 8 blocks per multiprocessor take the
//           texture path (0: none)
//   LOADS   1: cache through plain loads from the packed texels (texels,
//           plane and pitch in texels, NB bins a row) instead of texture
//           fetches
//   OVS     samples cached per bin: 1, or 4 (oversampling: offsets 0, 1/4,
//           1/2, 3/4 fetched through a linearly filtered texture, nearest
//           lookup in sub-bin units; LIN 0)
//   HYBG    hybrid split by tile (blocks whose tile index x + gridDim.x y
//           is below HYB modulo 8 take the texture path) instead of by
//           per-SM rank
//   HYBX    hybrid texture path, linear: exact interpolation (two texels
//           fetched at their centres, f32 weights) instead of the texture
//           unit's 8-bit weights
//   HMATH   half4 linear advanced caching: 1: the interpolation a + f d in
//           half2 arithmetic (two slices per instruction), accumulation in
//           f32; 2: as 1, and two projections' values summed in half2
//           before the f32 accumulation
//
// Thread mapping for the reconstruction: 4x4 Z-order squares of 16 threads,
// NS/4 squares per row; a pass covers RSTEP = 256/NS pixel rows and a thread
// steps NQ times down by RSTEP (each row's cache coordinate is one FMA from
// the thread's column term, so no rounding accumulates over the tile). Caching mapping: 256/SD threads per cached
// projection row.
//
// The per-projection constants are read in f64 from dconst = [c0 | cx | cy]
// (the detector bin coordinate of pixel (ix, iy) is c0 + ix cx + iy cy, bin k
// centred at k); the tile origin's cache coordinate is formed in f64, so the
// f32 arithmetic only spans the tile.
#ifdef NS
#define NQ (NS * NS / 256)
#define RSTEP (256 / NS)
#define TPR (256 / SD)
#define MAGIC 12582912.0f
#define MAGIC_BITS 0x4B400000
#ifndef OVS
#define OVS 1
#endif
#ifndef LOADS
#define LOADS 0
#endif

#if SPT == 1
typedef float val_t;
__device__ __forceinline__ val_t tfetch(cudaTextureObject_t t, float u, float v) { return tex2D<float>(t, u, v); }
__device__ __forceinline__ acc_t to_acc(const val_t v) { return v; }
__device__ __forceinline__ val_t from_acc(const acc_t v) { return v; }
__device__ __forceinline__ acc_t axpy(const acc_t a, float f, const acc_t d) { return fmaf(f, d, a); }
__device__ __forceinline__ acc_t sub(const acc_t a, const acc_t b) { return a - b; }
#elif SPT == 2
typedef float2 val_t;
__device__ __forceinline__ val_t tfetch(cudaTextureObject_t t, float u, float v) { return tex2D<float2>(t, u, v); }
__device__ __forceinline__ acc_t to_acc(const val_t v) { return v; }
__device__ __forceinline__ val_t from_acc(const acc_t v) { return v; }
__device__ __forceinline__ acc_t axpy(const acc_t a, float f, const acc_t d) {
    return make_float2(fmaf(f, d.x, a.x), fmaf(f, d.y, a.y));
}
__device__ __forceinline__ acc_t sub(const acc_t a, const acc_t b) { return make_float2(a.x - b.x, a.y - b.y); }
#else
typedef uint2 val_t;
__device__ __forceinline__ val_t tfetch(cudaTextureObject_t t, float u, float v) { return tex2D<uint2>(t, u, v); }
__device__ __forceinline__ acc_t to_acc(const val_t q) {
    __half2 lo, hi;
    *reinterpret_cast<unsigned int*>(&lo) = q.x;
    *reinterpret_cast<unsigned int*>(&hi) = q.y;
    const float2 a = __half22float2(lo);
    const float2 b = __half22float2(hi);
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ val_t from_acc(const acc_t v) {
    const __half2 lo = __floats2half2_rn(v.x, v.y);
    const __half2 hi = __floats2half2_rn(v.z, v.w);
    uint2 q;
    q.x = *reinterpret_cast<const unsigned int*>(&lo);
    q.y = *reinterpret_cast<const unsigned int*>(&hi);
    return q;
}
__device__ __forceinline__ acc_t axpy(const acc_t a, float f, const acc_t d) {
    return make_float4(fmaf(f, d.x, a.x), fmaf(f, d.y, a.y), fmaf(f, d.z, a.z), fmaf(f, d.w, a.w));
}
__device__ __forceinline__ acc_t sub(const acc_t a, const acc_t b) {
    return make_float4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w);
}
#endif

#if LIN && ADV
// Value (shifted by half a difference with FROUND, see below) and difference.
struct ent_t { val_t a; val_t d; };
#else
typedef val_t ent_t;
#endif

#if SPT == 4
__device__ __forceinline__ __half2 as_h2(unsigned int u) {
    __half2 r;
    *reinterpret_cast<unsigned int*>(&r) = u;
    return r;
}
#endif

// Cell index i and weight f of cache coordinate h (+ SHIFT), as the
// interpolation loop below computes them for linear interpolation.
__device__ __forceinline__ void locate(float h, int& i, float& f) {
#if FROUND
    const float r = h + MAGIC;
    i = __float_as_int(r) - MAGIC_BITS;
    f = h - (r - MAGIC);
#else
    const float fl = floorf(h);
    i = (int)fl;
    f = h - fl;
#endif
}

// Cache coordinate h of a pixel = bin - hm. The running coordinate the loop
// keeps is h + SHIFT: linear with FROUND rounds h - 0.5 to the nearest
// integer (= floor h, or floor h - 1 with weight 1 at exact integers);
// nearest without FROUND takes floor(h + 0.5).
#if LIN
#define SHIFT (FROUND ? -0.5 : 0.0)
#else
#define SHIFT (FROUND ? 0.0 : 0.5)
#endif

#ifndef HYB
#define HYB 0
#endif
#ifndef HYBG
#define HYBG 0
#endif
#ifndef HYBX
#define HYBX 0
#endif
#ifndef HMATH
#define HMATH 0
#endif
#if HYB > 0
// hybrid: per multiprocessor, HYB of every 8 blocks run through the texture
// unit (hardware interpolation of the same texture) instead of the cache.
// The counters only grow; a block's rank on its SM is taken modulo 8.
__device__ unsigned int hyb_blocks[1024];
#ifdef COUNT_PATHS
// Tests only (`COUNT_PATHS` is defined by `CudaBackend::set_count_paths`):
// the blocks that took the texture path and the cache path.
__device__ unsigned long long tex_path_blocks;
__device__ unsigned long long cache_path_blocks;
#endif
__device__ __forceinline__ unsigned int sm_id() {
    unsigned int r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}
#endif

extern "C" __global__ void __launch_bounds__(256, MINB) bp_alu(const cudaTextureObject_t* __restrict__ texs,
                                                               float* __restrict__ out, int nslices, float scale,
                                                               const double* __restrict__ dconst,
                                                               const val_t* __restrict__ texels, long long plane,
                                                               int pitch) {
    __shared__ ent_t cache[SD][CW * OVS];
    __shared__ float4 pc[SD];
    const int t = threadIdx.x;
    const int x0 = blockIdx.x * NS, y0 = blockIdx.y * NS;
    const cudaTextureObject_t tex = texs[blockIdx.z];
    const int z = t & 15, sq = t >> 4;
    const int lx = 4 * (sq % (NS / 4)) + ((z & 1) | ((z >> 1) & 2));
    const int ly = 4 * (sq / (NS / 4)) + (((z >> 1) & 1) | ((z >> 2) & 2));
    const float fx = (float)lx, fy = (float)ly;
    const int cj = t / TPR, ck = t % TPR;
    acc_t s[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) s[q] = zero();
#if HYB > 0
    __shared__ unsigned int rank;
#if HYBG
    // Split by tile: blocks whose tile index (x + tiles per row * y) is below
    // HYB modulo 8 take the texture path. Blocks are dispatched in index
    // order, so the two kinds are interleaved on every multiprocessor, and a
    // tile takes the same path in every slice group and texel mode (nearest
    // ties round alike in all of them).
    if (t == 0) rank = blockIdx.x + gridDim.x * blockIdx.y;
#else
    if (t == 0) rank = atomicAdd(&hyb_blocks[sm_id() & 1023u], 1u);
#endif
    __syncthreads();
#ifdef COUNT_PATHS
    if (t == 0) atomicAdd((rank & 7u) < HYB ? &tex_path_blocks : &cache_path_blocks, 1ull);
#endif
    if ((rank & 7u) < HYB) {
        // Texture path: the same pixels, one fetch per pixel and projection.
        for (int pb = 0; pb < NPROJ; pb += SD) {
            if (t < SD) {
                const int p = pb + t;
                if (p < NPROJ) {
                    const double c0 = __ldg(dconst + p), cx = __ldg(dconst + NPROJ + p),
                                 cy = __ldg(dconst + 2 * NPROJ + p);
#if HYBX && LIN
                    // Exact path: the tile origin's bin coordinate relative to
                    // the integer base w (f32 only spans the tile).
                    const double u0 = c0 + (double)x0 * cx + (double)y0 * cy;
                    const double w = floor(u0);
                    pc[t] = make_float4((float)(u0 - w), (float)cx, (float)cy, (float)w);
#else
                    pc[t] = make_float4((float)(c0 + (double)x0 * cx + (double)y0 * cy + 0.5), (float)cx,
                                        (float)cy, 0.0f);
#endif
                } else {
                    pc[t] = make_float4(-1.0e6f, 0.0f, 0.0f, 0.0f);
                }
            }
            __syncthreads();
#pragma unroll 2
            for (int j = 0; j < SD; ++j) {
                const float4 c = pc[j];
                const float hx = fmaf(fx, c.y, c.x);
                const float v = (float)(pb + j) + 0.5f;
#pragma unroll
                for (int q = 0; q < NQ; ++q) {
#if HYBX && LIN
                    // Exact linear interpolation: the two texels fetched at
                    // their centres (returned bit for bit), weights in f32.
                    const float u = fmaf(fy + (float)(q * RSTEP), c.z, hx);
                    const float fl = floorf(u);
                    const float f = u - fl;
                    const float tu = c.w + fl + 0.5f;
                    const acc_t a = fetch(tex, tu, v);
                    const acc_t b = fetch(tex, tu + 1.0f, v);
                    add(s[q], axpy(a, f, sub(b, a)));
#else
                    add(s[q], fetch(tex, fmaf(fy + (float)(q * RSTEP), c.z, hx), v));
#endif
                }
            }
            __syncthreads();
        }
        const int gx = x0 + lx;
#pragma unroll
        for (int q = 0; q < NQ; ++q) {
            const int gy = y0 + ly + q * RSTEP;
            if (gx < NX && gy < NY) store(out, blockIdx.z, nslices, (long long)gy * NX + gx, s[q], scale);
        }
        return;
    }
#endif

    for (int pb = 0; pb < NPROJ; pb += SD) {
        // Stage 1: cache the bins of projection pb + cj.
        const int p = pb + cj;
        if (p < NPROJ) {
            const double c0 = __ldg(dconst + p), cx = __ldg(dconst + NPROJ + p), cy = __ldg(dconst + 2 * NPROJ + p);
            const double u0 = c0 + (double)x0 * cx + (double)y0 * cy;
            const double umin = u0 + fmin(0.0, (NS - 1) * cx) + fmin(0.0, (NS - 1) * cy);
            const double hm = floor(umin) - 1.0;
            const float v = (float)p + 0.5f;
#if LOADS
            // Plain loads from the packed texels (zero outside the detector).
            const val_t* __restrict__ src = texels + (long long)blockIdx.z * plane + (long long)p * pitch;
            const int hb = (int)hm;
#define LOAD_BIN(b) (((b) >= 0 && (b) < NB) ? src[(b)] : from_acc(zero()))
#endif
            for (int k = ck; k < CW * OVS; k += TPR) {
                const float u = (float)hm + (float)k * (1.0f / OVS) + 0.5f;
#if LIN && ADV
#if LOADS
                const acc_t a = to_acc(LOAD_BIN(hb + k));
                const acc_t d = sub(to_acc(LOAD_BIN(hb + k + 1)), a);
#else
                const acc_t a = to_acc(tfetch(tex, u, v));
                const acc_t d = sub(to_acc(tfetch(tex, u + 1.0f, v)), a);
#endif
                ent_t e;
                e.a = from_acc(FROUND ? axpy(a, 0.5f, d) : a);
                e.d = from_acc(d);
                cache[cj][k] = e;
#elif LOADS
                cache[cj][k] = LOAD_BIN(hb + k);
#else
                cache[cj][k] = tfetch(tex, u, v);
#endif
            }
            if (ck == 0)
                pc[cj] = make_float4((float)((u0 - hm) * OVS + SHIFT), (float)(cx * OVS), (float)(cy * OVS), 0.0f);
        } else {
            for (int k = ck; k < CW * OVS; k += TPR) {
#if LIN && ADV
                ent_t e;
                e.a = from_acc(zero());
                e.d = e.a;
                cache[cj][k] = e;
#else
                cache[cj][k] = from_acc(zero());
#endif
            }
            if (ck == 0) pc[cj] = make_float4(2.0f, 0.0f, 0.0f, 0.0f);
        }
        __syncthreads();
        // Stage 2: interpolate from the cache.
#if LIN && ADV && HMATH == 2 && SPT == 4
        // Two projections at a time: each interpolated in half2, the pair
        // summed in half2, the sum accumulated in f32 (half the conversions).
#pragma unroll 2
        for (int j = 0; j < SD; j += 2) {
            const float4 c0 = pc[j], c1 = pc[j + 1];
            const float hx0 = fmaf(fx, c0.y, c0.x), hx1 = fmaf(fx, c1.y, c1.x);
            const ent_t* __restrict__ row0 = cache[j];
            const ent_t* __restrict__ row1 = cache[j + 1];
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const float fq = fy + (float)(q * RSTEP);
                int i0, i1;
                float f0, f1;
                locate(fmaf(fq, c0.z, hx0), i0, f0);
                locate(fmaf(fq, c1.z, hx1), i1, f1);
                const ent_t e0 = row0[i0];
                const ent_t e1 = row1[i1];
                const __half2 g0 = __float2half2_rn(f0), g1 = __float2half2_rn(f1);
                const __half2 lo =
                    __hfma2(g1, as_h2(e1.d.x), __hadd2(as_h2(e1.a.x), __hfma2(g0, as_h2(e0.d.x), as_h2(e0.a.x))));
                const __half2 hi =
                    __hfma2(g1, as_h2(e1.d.y), __hadd2(as_h2(e1.a.y), __hfma2(g0, as_h2(e0.d.y), as_h2(e0.a.y))));
                const float2 l = __half22float2(lo), u = __half22float2(hi);
                s[q].x += l.x;
                s[q].y += l.y;
                s[q].z += u.x;
                s[q].w += u.y;
            }
        }
#else
#pragma unroll 2
        for (int j = 0; j < SD; ++j) {
            const float4 c = pc[j];
            const float hx = fmaf(fx, c.y, c.x);
            const ent_t* __restrict__ row = cache[j];
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                // One FMA from the row's coordinate (no accumulated rounding).
                const float h = fmaf(fy + (float)(q * RSTEP), c.z, hx);
#if FROUND
                const float r = h + MAGIC;
                const int i = __float_as_int(r) - MAGIC_BITS;
#if LIN
                const float f = h - (r - MAGIC);
#endif
#else
#if LIN
                const float fl = floorf(h);
                const int i = (int)fl;
                const float f = h - fl;
#else
                const int i = __float2int_rd(h);
#endif
#endif
#if LIN && ADV && HMATH == 1 && SPT == 4
                // Half arithmetic for the interpolation (two slices per
                // instruction), f32 accumulation.
                const ent_t e = row[i];
                const __half2 f2 = __float2half2_rn(f);
                __half2 a0, a1, d0, d1;
                *reinterpret_cast<unsigned int*>(&a0) = e.a.x;
                *reinterpret_cast<unsigned int*>(&a1) = e.a.y;
                *reinterpret_cast<unsigned int*>(&d0) = e.d.x;
                *reinterpret_cast<unsigned int*>(&d1) = e.d.y;
                const float2 r0 = __half22float2(__hfma2(f2, d0, a0));
                const float2 r1 = __half22float2(__hfma2(f2, d1, a1));
                s[q].x += r0.x;
                s[q].y += r0.y;
                s[q].z += r1.x;
                s[q].w += r1.y;
#elif LIN && ADV
                const ent_t e = row[i];
                add(s[q], axpy(to_acc(e.a), f, to_acc(e.d)));
#elif LIN
                const acc_t a = to_acc(row[i]);
                const acc_t b = to_acc(row[i + 1]);
#if FROUND
                add(s[q], axpy(a, f + 0.5f, sub(b, a)));
#else
                add(s[q], axpy(a, f, sub(b, a)));
#endif
#else
                add(s[q], to_acc(row[i]));
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
        if (gx < NX && gy < NY) store(out, blockIdx.z, nslices, (long long)gy * NX + gx, s[q], scale);
    }
}
#endif
