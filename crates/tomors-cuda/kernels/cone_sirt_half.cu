// Half-precision texels for the cone voxel pair's folded back projection
// (SIRT): the input of cone_fold.cu's cone_bp_fold compiled with HALF = 1,
// i.e. FDK's __half2 layout (see cone_fold.cu), from projections
// [angle][row][col] times the per-pixel weights w[row][col].
//
// Each projection is scaled by the power of two that puts its largest
// |weighted value| in [2^14, 2^15) (cone_fold.cu's fold_scale; half's
// largest finite value is 65504), rounded to half (11 significant bits,
// relative rounding <= 2^-11 for every value down to 2^-29 of the largest),
// and the back projection multiplies by the exact inverse (unscale[g]).
//
// Plain CUDA C without headers: the f32 -> f16x2 conversion is the PTX cvt
// (sm_80 and later), the result read as __half2 (.x in the low 16 bits).

#define GRID_LOOP(i, n)                                                              \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * blockDim.x)

// Two floats rounded to nearest half, packed as a __half2 (lo in .x).
__device__ __forceinline__ unsigned int half2_bits(float lo, float hi) {
    unsigned int r;
    // cvt.rn.f16x2.f32 d, a, b: a converted into the upper half, b the lower.
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// The power of two that brings t (float bits, t >= 0) into [2^14, 2^15);
// 1 for t zero or not finite (as cone_fold.cu's fold_scale).
__device__ __forceinline__ float half_scale(unsigned int bits) {
    const float t = __uint_as_float(bits);
    if (!(t > 0.0f) || !(t <= 3.0e38f)) return 1.0f;
    int e;
    frexpf(t, &e);  // t = f 2^e, f in [0.5, 1)
    return ldexpf(1.0f, max(-120, min(120, 15 - e)));
}

// The largest |src * w| of each of the first gridDim.y projections
// (src == nullptr: ones), as float bits (non-negative floats order as
// unsigned integers), max-ed into mx[g] (zeroed before the launch).
// Grid (blocks per projection, projections), 256 threads.
extern "C" __global__ void cj_half_max(const float* __restrict__ src,
                                       const float* __restrict__ w, int nr, int nc,
                                       unsigned int* __restrict__ mx) {
    const long long g = blockIdx.y;
    const int n = nr * nc;
    float m = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = (src ? __ldg(src + g * n + i) : 1.0f) * __ldg(w + i);
        m = fmaxf(m, fabsf(v));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0 && m > 0.0f) atomicMax(mx + g, __float_as_uint(m));
}

// cone_joseph.cu's cj_weight_pack_fold with __half2 texels: folded row i
// of angle g holds rows a_row + i and s_sum - a_row - i (zero outside the
// detector; src == nullptr reads ones), scaled by half_scale(mx[g]);
// unscale[g] receives the inverse. Angle g in texture g / tpg (gf2 texels
// apart), rows from (g % tpg)(h + 1), pitch2 texels apart. n = angles * h
// * nc. The zero rows between bands are never written (the buffer is
// cleared once).
extern "C" __global__ void cj_weight_pack_fold_half(
    const float* __restrict__ src, const float* __restrict__ w, unsigned int* __restrict__ dst,
    int nr, int nc, int pitch2, int tpg, long long gf2, int h, int a_row, int s_sum,
    const unsigned int* __restrict__ mx, float* __restrict__ unscale, long long n) {
    GRID_LOOP(i, n) {
        const int c = (int)(i % nc);
        const long long ai = i / nc;
        const int fi = (int)(ai % h);
        const long long g = ai / h;
        const int r0 = a_row + fi;
        const int r1 = s_sum - a_row - fi;
        float v0 = 0.0f, v1 = 0.0f;
        if (r0 >= 0 && r0 < nr)
            v0 = (src ? src[(g * nr + r0) * nc + c] : 1.0f) * __ldg(w + (long long)r0 * nc + c);
        if (r1 >= 0 && r1 < nr)
            v1 = (src ? src[(g * nr + r1) * nc + c] : 1.0f) * __ldg(w + (long long)r1 * nc + c);
        const float sc = half_scale(__ldg(mx + g));
        const long long row = (g % tpg) * (h + 1) + fi;
        dst[(g / tpg) * gf2 + row * pitch2 + c] = half2_bits(v0 * sc, v1 * sc);
        if (c == 0 && fi == 0) unscale[g] = 1.0f / sc;  // exact: a power of two
    }
}
