// Folded cone-beam back projection (FDK): one texture fetch serves two
// voxels, slice k and its mirror nz - 1 - k.
//
// Baked parameters (#defines prepended by the host):
//   MAXP   capacity of the per-projection constant array (angles)
//   MAXT   capacity of the texture-object array
//   ZB     upper slices per thread (each with its mirror: 2 ZB voxels)
//   BX     threads of a block along x (256 / BX along y)
//   MINB   blocks per multiprocessor the compiler must fit (register cap;
//          default 1: no cap)
//   HALF   1: the folded texels are __half2 (4 bytes) holding each
//          projection scaled by a power of two (see cone_fold_max), the
//          texture filters in f32 and the back projection unscales; 0
//          (default): float2 texels
//
// The volume is centred on z = 0, so slice k at height z and its mirror at
// -z lie on the same voxel column (x, y): for every projection they share
// the depth, the FDK weight, the detector column and its interpolation
// weights, and their detector rows are rho and S - rho, where S = 2 crow
// (the principal point's row, doubled). When S is an integer the detector
// can be folded about crow: texel row i of a projection holds the float2
// (P[a + i], P[S - a - i]) (zero outside the detector), a = floor(S/2) - 1.
// A bilinear fetch at the folded coordinate s = rho - a then returns the
// bilinear interpolation at rho in .x and at S - rho in .y, with the same
// column weights and mirrored row weights: exactly the two values of the
// unfolded texture kernel (cone_bp_tex), with the same 8-bit weights, at
// half the fetches. The float2 texel is fetched at the full texture rate.
//
// Layout: TPG folded projections per pitched 2D float2 texture, H rows
// each followed by one zero row; projection g in texture g / TPG, band
// g % TPG. Upper slices have z >= 0, so rho >= crow and s >= 1.
//
// The per-(x, y) terms are f32 from per-projection constants (c_geo, 6 per
// projection, computed in f64 on the host): depth = d0 + ix dx + iy dy,
// column = ccol + (u0 + ix ux + iy uy) / depth (u scaled by SDD / pixel_u),
// m / pixel_v = (SDD / pixel_v) / depth. Their rounding (< 2e-4 pixel at
// 512^2) is far below the texture's 1/256 weight step.

#ifndef BX
#define BX 16
#endif
#ifndef HALF
#define HALF 0
#endif
#ifndef MINB
#define MINB 1
#endif
#define BY (256 / BX)

#if HALF
#include <cuda_fp16.h>
typedef __half2 texel_t;
#else
typedef float2 texel_t;
#endif

__constant__ float c_geo[6 * MAXP];
__constant__ unsigned long long c_ftex[MAXT];

// vol: [z][y][x], nz slices of nx x ny; the launch covers upper slices
// k_first .. k_first + nk (k_first >= nz / 2) and their mirrors, for
// projections p_first .. p_first + nang; overwritten (acc == 0) or added
// to (acc == 1).
extern "C" __global__ void __launch_bounds__(256, MINB)
cone_bp_fold(float* __restrict__ vol, int p_first, int nang, int k_first, int nk, int acc,
             int tpg, int h, int nx, int ny, int nz, float ncf, float sv, float sod,
             float ccol, float rbase, float vox, const float* __restrict__ unscale)
{
    const int ix = blockIdx.x * BX + (int)(threadIdx.x % BX);
    const int iy = blockIdx.y * BY + (int)(threadIdx.x / BX);
    const int kb = k_first + (int)blockIdx.z * ZB;
    if (ix >= nx || iy >= ny) return;
    const float fx = (float)ix, fy = (float)iy;
    // z of slice kb (k - (nz - 1) / 2 is exact in f32).
    const float zb = ((float)kb - 0.5f * (float)(nz - 1)) * vox;
    const float hf = (float)h;
    float up[ZB], dn[ZB];
#pragma unroll
    for (int k = 0; k < ZB; ++k) {
        up[k] = 0.0f;
        dn[k] = 0.0f;
    }
    int tg = p_first / tpg;
    int band = p_first - tg * tpg;
    const int p_end = p_first + nang;
    for (int p = p_first; p < p_end; ++p) {
        const int cb = band, ct = tg;
        if (++band == tpg) {
            band = 0;
            ++tg;
        }
        const float depth = fmaf(fy, c_geo[6 * p + 2], fmaf(fx, c_geo[6 * p + 1], c_geo[6 * p]));
        if (!(depth > 0.0f)) continue;
        const float inv = __frcp_rn(depth);
        const float un = fmaf(fy, c_geo[6 * p + 5], fmaf(fx, c_geo[6 * p + 4], c_geo[6 * p + 3]));
        const float col = fmaf(un, inv, ccol);
        if (!(col >= -1.0f && col < ncf)) continue;
        const float sw = sod * inv;
#if HALF
        const float w = sw * sw * __ldg(unscale + p);  // undoes the power-of-two scale
#else
        const float w = sw * sw;
#endif
        const float mv = sv * inv;
        const float s0 = fmaf(zb, mv, rbase);  // folded row of slice kb
        const float ds = vox * mv;
        const float tx = col + 0.5f;
        const float ty = (float)(cb * (h + 1)) + 0.5f;
        const cudaTextureObject_t t = (cudaTextureObject_t)c_ftex[ct];
#pragma unroll
        for (int k = 0; k < ZB; ++k) {
            const float s = fmaf(ds, (float)k, s0);
            if (s < hf) {
                const float2 v = tex2D<float2>(t, tx, ty + s);
                up[k] = fmaf(w, v.x, up[k]);
                dn[k] = fmaf(w, v.y, dn[k]);
            }
        }
    }
    const size_t sl = (size_t)nx * ny;
    float* o = vol + (size_t)iy * nx + ix;
    const int k_end = k_first + nk;
#pragma unroll
    for (int k = 0; k < ZB; ++k) {
        const int kk = kb + k;
        if (kk < k_end) {
            float* d = o + (size_t)kk * sl;
            *d = acc ? *d + up[k] : up[k];
            const int mk = nz - 1 - kk;
            if (mk != kk) {
                float* e = o + (size_t)mk * sl;
                *e = acc ? *e + dn[k] : dn[k];
            }
        }
    }
}

// The power of two that brings a projection's largest |value| t into
// [2^14, 2^15) (half's largest finite value is 65504; relative rounding
// 2^-12 for every value down to t 2^-29); 1 for t zero or not finite.
__device__ __forceinline__ float fold_scale(unsigned int bits)
{
    const float t = __uint_as_float(bits);
    if (!(t > 0.0f) || !(t <= 3.0e38f)) return 1.0f;
    int e;
    frexpf(t, &e);  // t = f 2^e, f in [0.5, 1)
    return ldexpf(1.0f, max(-120, min(120, 15 - e)));
}

// Copies nang projections of filtered detector rows into the folded
// layout. Row r of the chunk (r = a * NR + row) is plain (pair = 0:
// row_stride floats apart) or packed two per complex row (pair = 1: the
// real part for even r, the imaginary part for odd r). Projection a goes to
// global angle g = a_first + a: texture g / tpg (gf2 float2 apart), rows
// from (g % tpg)(h + 1), pitch2 float2 apart; folded row i < h holds rows
// a_row + i and s_sum - a_row - i of the projection (zero outside the
// detector), row h (between bands) zeros: every texel a fetch of the
// projection can touch is written. pitch2 and gf2 count texels (float2 or
// __half2). With HALF, projection g is multiplied by fold_scale(mx[g])
// before rounding to half and unscale[g] receives its inverse.
extern "C" __global__ void cone_pack_fold(const float* __restrict__ src, long long row_stride,
                                          int pair, texel_t* __restrict__ dst, int a_first,
                                          int nang, int nr, int nc, int pitch2, int tpg,
                                          long long gf2, int h, int a_row, int s_sum,
                                          const unsigned int* __restrict__ mx,
                                          float* __restrict__ unscale)
{
    const long long total = (long long)nang * (h + 1) * nc;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % nc);
        const long long ai = i / nc;
        const int fi = (int)(ai % (h + 1));
        const long long a = ai / (h + 1);
        const int r0 = a_row + fi;
        const int r1 = s_sum - a_row - fi;
        float v0 = 0.0f, v1 = 0.0f;
        if (fi < h && r0 >= 0 && r0 < nr) {
            const long long ar = a * nr + r0;
            v0 = pair ? src[(ar >> 1) * row_stride + 2 * c + (ar & 1)] : src[ar * row_stride + c];
        }
        if (fi < h && r1 >= 0 && r1 < nr) {
            const long long ar = a * nr + r1;
            v1 = pair ? src[(ar >> 1) * row_stride + 2 * c + (ar & 1)] : src[ar * row_stride + c];
        }
        const int g = a_first + (int)a;
        const long long row = (long long)(g % tpg) * (h + 1) + fi;
#if HALF
        const float sc = fold_scale(mx[g]);
        dst[(g / tpg) * gf2 + row * pitch2 + c] = __floats2half2_rn(v0 * sc, v1 * sc);
        if (c == 0 && fi == 0) unscale[g] = __frcp_rn(sc);  // exact: a power of two
#else
        dst[(g / tpg) * gf2 + row * pitch2 + c] = make_float2(v0, v1);
#endif
    }
}

// The largest |value| of each of nang projections of filtered rows (laid
// out as for cone_pack_fold), as float bits (non-negative floats order as
// unsigned integers), max-ed into mx[a_first + a] (zeroed by the host).
// Grid: (blocks per projection, nang); NaNs are ignored (the finiteness
// flag of the weighting rejects such projections).
extern "C" __global__ void cone_fold_max(const float* __restrict__ src, long long row_stride,
                                         int pair, int a_first, int nr, int nc,
                                         unsigned int* __restrict__ mx)
{
    const long long a = blockIdx.y;
    const int step = gridDim.x * blockDim.x;
    float m = 0.0f;
    if (pair) {
        // Whole complex rows (both rows of each, as one float2 load) from
        // the one holding the projection's first row to the one holding
        // its last; a half that belongs to a neighbour is skipped.
        const long long r0 = a * nr, r1 = r0 + nr - 1;
        const long long j0 = r0 >> 1;
        const long long n = ((r1 >> 1) - j0 + 1) * nc;
        const float2* s2 = (const float2*)src;
        const long long stride2 = row_stride >> 1;
        for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
            const long long j = j0 + i / nc;
            const float2 v = s2[j * stride2 + i % nc];
            if (2 * j >= r0) m = fmaxf(m, fabsf(v.x));
            if (2 * j + 1 <= r1) m = fmaxf(m, fabsf(v.y));
        }
    } else {
        const int n = nr * nc;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
            const int r = i / nc;
            m = fmaxf(m, fabsf(src[(a * nr + r) * row_stride + (i - r * nc)]));
        }
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0 && m > 0.0f) atomicMax(mx + a_first + a, __float_as_uint(m));
}
