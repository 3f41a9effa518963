// Filtering and texture-packing kernels of the tomors CUDA backend.
//
// Rows are detector rows of a slab of sinograms, numbered r = slice * NA + angle.
// Launch shape for row kernels: grid (ceil(len / 256), gy, gz) with block 256;
// row r = blockIdx.z * gridDim.y + blockIdx.y (so more than 65535 rows fit).
#include <cuda_fp16.h>

__device__ __forceinline__ long long row_index() {
    return (long long)blockIdx.z * gridDim.y + blockIdx.y;
}

// Value k of the padded copy of row s (n bins) in a buffer of L values:
// the row, then zeros, or (edge) the last value up to the middle of the
// padding and the first value after it (circular edge extension).
__device__ __forceinline__ float padded_value(const float* __restrict__ s, int k, int n, int L, int edge) {
    if (k < n) return s[k];
    if (!edge) return 0.0f;
    const int half = n + (L - n) / 2;
    return (k < half) ? s[n - 1] : s[0];
}

// Real rows of n values (row stride src_stride floats) -> padded real rows of L values.
extern "C" __global__ void pad_real(const float* __restrict__ src, long long src_stride,
                                    float* __restrict__ dst, int n, int L, long long rows, int edge) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const long long r = row_index();
    if (k >= L || r >= rows) return;
    dst[r * L + k] = padded_value(src + r * src_stride, k, n, L, edge);
}

// Pairs of real rows (2j, 2j + 1) -> one complex row j of L values
// (first row in the real parts, second in the imaginary parts, zeros if missing).
extern "C" __global__ void pad_pair(const float* __restrict__ src, long long src_stride,
                                    float2* __restrict__ dst, int n, int L, long long rows, int edge) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const long long j = row_index();
    const long long pairs = (rows + 1) / 2;
    if (k >= L || j >= pairs) return;
    const float a = padded_value(src + (2 * j) * src_stride, k, n, L, edge);
    const float b = (2 * j + 1 < rows) ? padded_value(src + (2 * j + 1) * src_stride, k, n, L, edge) : 0.0f;
    dst[j * L + k] = make_float2(a, b);
}

// Half spectra of R2C transforms (F = L/2 + 1 bins a row) times the real response h[F].
extern "C" __global__ void mul_half_spectrum(float2* __restrict__ spec, const float* __restrict__ h,
                                             int F, long long rows) {
    const int f = blockIdx.x * blockDim.x + threadIdx.x;
    const long long r = row_index();
    if (f >= F || r >= rows) return;
    const float w = h[f];
    float2 v = spec[r * F + f];
    v.x *= w;
    v.y *= w;
    spec[r * F + f] = v;
}

// Full spectra of C2C transforms (L bins a row) times the real, even response
// h[f] (given for f = 0..L/2; bin f > L/2 uses h[L - f]).
extern "C" __global__ void mul_full_spectrum(float2* __restrict__ spec, const float* __restrict__ h,
                                             int L, long long rows) {
    const int f = blockIdx.x * blockDim.x + threadIdx.x;
    const long long r = row_index();
    if (f >= L || r >= rows) return;
    const float w = h[f <= L / 2 ? f : L - f];
    float2 v = spec[r * L + f];
    v.x *= w;
    v.y *= w;
    spec[r * L + f] = v;
}

// Value k of slab row r in a source buffer: plain rows (pair = 0, rows
// row_stride floats apart) or rows packed two per complex row (pair = 1:
// row r is the real (r even) or imaginary (r odd) part of complex row r / 2,
// complex rows row_stride floats apart).
__device__ __forceinline__ float source_value(const float* __restrict__ src, long long row_stride, int pair,
                                              long long r, int k) {
    if (pair) return src[(r >> 1) * row_stride + 2 * k + (r & 1)];
    return src[r * row_stride + k];
}

// Packing into texture layout. Grid (ceil(n / 256), na, groups), block 256.
// Texture group g holds slices g*S .. g*S+S-1 (S = 1, 2, 4) as one texel per
// (angle, bin): plane g starts plane_stride texels after plane g - 1, rows
// are pitch texels apart. Slices >= nslices are filled with zeros.

extern "C" __global__ void pack1(const float* __restrict__ src, long long row_stride, int pair,
                                 float* __restrict__ dst, long long plane_stride, int pitch,
                                 int n, int na, int nslices) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int a = blockIdx.y;
    const int g = blockIdx.z;
    if (k >= n) return;
    const long long r = (long long)g * na + a;
    dst[g * plane_stride + (long long)a * pitch + k] = source_value(src, row_stride, pair, r, k);
}

extern "C" __global__ void pack2(const float* __restrict__ src, long long row_stride, int pair,
                                 float2* __restrict__ dst, long long plane_stride, int pitch,
                                 int n, int na, int nslices) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int a = blockIdx.y;
    const int g = blockIdx.z;
    if (k >= n) return;
    const int s0 = 2 * g;
    const float v0 = source_value(src, row_stride, pair, (long long)s0 * na + a, k);
    const float v1 = (s0 + 1 < nslices) ? source_value(src, row_stride, pair, (long long)(s0 + 1) * na + a, k) : 0.0f;
    dst[g * plane_stride + (long long)a * pitch + k] = make_float2(v0, v1);
}

extern "C" __global__ void pack4h(const float* __restrict__ src, long long row_stride, int pair,
                                  uint2* __restrict__ dst, long long plane_stride, int pitch,
                                  int n, int na, int nslices) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int a = blockIdx.y;
    const int g = blockIdx.z;
    if (k >= n) return;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int s = 4 * g + i;
        v[i] = (s < nslices) ? source_value(src, row_stride, pair, (long long)s * na + a, k) : 0.0f;
    }
    const __half2 lo = __floats2half2_rn(v[0], v[1]);
    const __half2 hi = __floats2half2_rn(v[2], v[3]);
    uint2 q;
    q.x = *reinterpret_cast<const unsigned int*>(&lo);
    q.y = *reinterpret_cast<const unsigned int*>(&hi);
    dst[g * plane_stride + (long long)a * pitch + k] = q;
}
