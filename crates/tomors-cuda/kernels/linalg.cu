// Element-wise operations and reductions of device vectors (DeviceVec,
// src/iterative/device/): the Vector trait of tomors-core on the GPU.
//
// Layouts (see DeviceVec): a vector is n floats. An operand `w` is read at
// the same index (wper == 0) or broadcast from one plane of `wper` values
// over an interleaved stack ([quad][plane][4 slices]): w[(i / 4) % wper].
// Reductions see only the real elements: with ns >= 0 the vector is an
// interleaved stack of planes of `plane` values whose slices from ns on are
// padding, element i belongs to slice ((i / 4) / plane) * 4 + i % 4; with
// ns < 0 every element counts.
//
// Reductions write one partial value per block (launch RED blocks of 256
// threads; the host sums the partials in order, so results do not depend on
// scheduling) and accumulate in f64.

#define GRID_LOOP(i, n)                                                              \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * blockDim.x)

__device__ __forceinline__ long long widx(long long i, long long wper) {
    return wper ? (i >> 2) % wper : i;
}

__device__ __forceinline__ bool is_real(long long i, long long plane, int ns) {
    if (ns < 0) return true;
    const long long e = i >> 2;
    const long long slice = (e / plane) * 4 + (i & 3);
    return slice < ns;
}

// Deterministic block sum of a double (256 threads).
__device__ __forceinline__ double block_sum(double v) {
    __shared__ double red[256];
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    return red[0];
}

// Block maximum of a double (256 threads).
__device__ __forceinline__ double block_max(double v) {
    __shared__ double red[256];
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    return red[0];
}

__device__ __forceinline__ float clampf(float v, int has_lo, float lo, int has_hi, float hi) {
    if (has_lo && v < lo) v = lo;
    if (has_hi && v > hi) v = hi;
    return v;
}

// y = v.
extern "C" __global__ void dv_fill(float* __restrict__ y, float v, long long n) {
    GRID_LOOP(i, n) { y[i] = v; }
}

// y = x.
extern "C" __global__ void dv_copy(float* __restrict__ y, const float* __restrict__ x,
                                   long long n) {
    GRID_LOOP(i, n) { y[i] = x[i]; }
}

// y = c * y.
extern "C" __global__ void dv_scale(float* __restrict__ y, float c, long long n) {
    GRID_LOOP(i, n) { y[i] = c * y[i]; }
}

// y = y + a * x[idx].
extern "C" __global__ void dv_axpy(float* __restrict__ y, float a, const float* __restrict__ x,
                                   long long xper, long long n) {
    GRID_LOOP(i, n) { y[i] += a * __ldg(x + widx(i, xper)); }
}

// y = y * w[idx].
extern "C" __global__ void dv_mul(float* __restrict__ y, const float* __restrict__ w,
                                  long long wper, long long n) {
    GRID_LOOP(i, n) { y[i] *= __ldg(w + widx(i, wper)); }
}

// y = clip(y) (NaN stays NaN: the comparisons are false).
extern "C" __global__ void dv_clip(float* __restrict__ y, int has_lo, float lo, int has_hi,
                                   float hi, long long n) {
    GRID_LOOP(i, n) { y[i] = clampf(y[i], has_lo, lo, has_hi, hi); }
}

// y = 1/y (in f64, rounded once) where y > floor and y > 0, else 0.
extern "C" __global__ void dv_invert(float* __restrict__ y, double floor_, long long n) {
    GRID_LOOP(i, n) {
        const double d = (double)y[i];
        y[i] = (d > floor_ && d > 0.0) ? (float)(1.0 / d) : 0.0f;
    }
}

// Per-block max(0, y) over the real elements.
extern "C" __global__ void dv_max(const float* __restrict__ y, double* __restrict__ partial,
                                  long long n, long long plane, int ns) {
    double m = 0.0;
    GRID_LOOP(i, n) {
        if (is_real(i, plane, ns)) m = fmax(m, (double)y[i]);
    }
    const double s = block_max(m);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Per-block sums of x * y over the real elements.
extern "C" __global__ void dv_dot(const float* __restrict__ x, const float* __restrict__ y,
                                  double* __restrict__ partial, long long n, long long plane,
                                  int ns) {
    double sum = 0.0;
    GRID_LOOP(i, n) {
        if (is_real(i, plane, ns)) sum += (double)x[i] * (double)y[i];
    }
    const double s = block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Per-block sums of y^2 over the real elements.
extern "C" __global__ void dv_sqsum(const float* __restrict__ y, double* __restrict__ partial,
                                    long long n, long long plane, int ns) {
    double sum = 0.0;
    GRID_LOOP(i, n) {
        if (is_real(i, plane, ns)) {
            const double v = (double)y[i];
            sum += v * v;
        }
    }
    const double s = block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Per-block counts of non-finite real elements.
extern "C" __global__ void dv_nonfinite(const float* __restrict__ y,
                                        double* __restrict__ partial, long long n,
                                        long long plane, int ns) {
    double count = 0.0;
    GRID_LOOP(i, n) {
        if (is_real(i, plane, ns) && !isfinite(y[i])) count += 1.0;
    }
    const double s = block_sum(count);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// ax = w[idx] * (b - ax) (w may be null: identity) in place, and, when
// `partial` is not null, per-block partial sums of |b - ax|^2 over the
// real elements. Where the operands are 16-byte aligned, four elements (one
// quad of an interleaved stack, which shares a broadcast weight) per thread
// and step with 16-byte accesses (four times the bytes in flight: the scalar
// loop reached about half the memory bandwidth at 512^3), then the tail one
// by one; the values are those of the scalar loop.
extern "C" __global__ void dv_residual(const float* __restrict__ b, float* __restrict__ ax,
                                       const float* __restrict__ w, long long wper,
                                       double* __restrict__ partial, long long n,
                                       long long plane, int ns) {
    double sum = 0.0;
    const unsigned long long addr = (unsigned long long)b | (unsigned long long)ax |
                                    ((w && !wper) ? (unsigned long long)w : 0ull);
    const long long nv = (addr & 15ull) == 0 ? (n >> 2) : 0;
    GRID_LOOP(e, nv) {
        const float4 bv = __ldg(reinterpret_cast<const float4*>(b) + e);
        const float4 av = reinterpret_cast<const float4*>(ax)[e];
        float d[4] = {bv.x - av.x, bv.y - av.y, bv.z - av.z, bv.w - av.w};
        float4 wv = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
        if (w && wper) {
            const float s = __ldg(w + e % wper);
            wv = make_float4(s, s, s, s);
        } else if (w) {
            wv = __ldg(reinterpret_cast<const float4*>(w) + e);
        }
        const float ws[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (is_real(4 * e + j, plane, ns)) sum += (double)d[j] * (double)d[j];
            if (w) d[j] = d[j] * ws[j];
        }
        reinterpret_cast<float4*>(ax)[e] = make_float4(d[0], d[1], d[2], d[3]);
    }
    GRID_LOOP(t, n - 4 * nv) {
        const long long i = 4 * nv + t;
        const float d = b[i] - ax[i];
        if (is_real(i, plane, ns)) sum += (double)d * (double)d;
        ax[i] = w ? d * __ldg(w + widx(i, wper)) : d;
    }
    if (partial) {
        const double s = block_sum(sum);
        if (threadIdx.x == 0) partial[blockIdx.x] = s;
    }
}

// x = clip(x + (lambda * t[idx]) * g) (t may be null: T = I).
extern "C" __global__ void dv_update(float* __restrict__ x, const float* __restrict__ g,
                                     const float* __restrict__ t, long long tper, float lambda,
                                     int has_lo, float lo, int has_hi, float hi, long long n) {
    GRID_LOOP(i, n) {
        const float l = t ? lambda * __ldg(t + widx(i, tper)) : lambda;
        x[i] = clampf(x[i] + l * g[i], has_lo, lo, has_hi, hi);
    }
}

// dv_update on an interleaved stack of ny x nx images ([quad][y][x][4]),
// also writing its transposed copy xT ([quad][x][y][4], what the parallel
// Joseph forward projection reads for column-stepping projections), through
// a 32x32 shared-memory tile so both sides are coalesced. One block per
// tile and quad: grid (ceil(nx/32), ceil(ny/32), quads), block (32, 8).
// t: null (T = I), one plane broadcast (tper = nx*ny) or a full stack
// (tper = 0).
#define TT 32
extern "C" __global__ void dv_update_t(float* __restrict__ x, float* __restrict__ xT,
                                       const float* __restrict__ g, const float* __restrict__ t,
                                       long long tper, float lambda, int has_lo, float lo,
                                       int has_hi, float hi, int nx, int ny) {
    __shared__ float4 tile[TT][TT + 1];
    const size_t plane = (size_t)nx * ny * 4;
    const size_t base = (size_t)blockIdx.z * plane;
    float4* xs = reinterpret_cast<float4*>(x + base);
    float4* xd = reinterpret_cast<float4*>(xT + base);
    const float4* gs = reinterpret_cast<const float4*>(g + base);
    const float4* tq = reinterpret_cast<const float4*>(t + (t && !tper ? base : 0));
    const int x0 = blockIdx.x * TT, y0 = blockIdx.y * TT;
    for (int r = threadIdx.y; r < TT; r += blockDim.y) {
        const int iy = y0 + r, ix = x0 + threadIdx.x;
        if (ix < nx && iy < ny) {
            const size_t e = (size_t)iy * nx + ix;
            const float4 gv = __ldg(gs + e);
            float4 l = make_float4(lambda, lambda, lambda, lambda);
            if (t && tper) {
                const float s = lambda * __ldg(t + e);
                l = make_float4(s, s, s, s);
            } else if (t) {
                const float4 tv = __ldg(tq + e);
                l = make_float4(lambda * tv.x, lambda * tv.y, lambda * tv.z, lambda * tv.w);
            }
            float4 xv = xs[e];
            xv.x = clampf(xv.x + l.x * gv.x, has_lo, lo, has_hi, hi);
            xv.y = clampf(xv.y + l.y * gv.y, has_lo, lo, has_hi, hi);
            xv.z = clampf(xv.z + l.z * gv.z, has_lo, lo, has_hi, hi);
            xv.w = clampf(xv.w + l.w * gv.w, has_lo, lo, has_hi, hi);
            xs[e] = xv;
            tile[r][threadIdx.x] = xv;
        }
    }
    __syncthreads();
    for (int c = threadIdx.y; c < TT; c += blockDim.y) {
        const int ix = x0 + c, iy = y0 + threadIdx.x;
        if (ix < nx && iy < ny) xd[(size_t)ix * ny + iy] = tile[threadIdx.x][c];
    }
}

// dst[q][j][c] = src[q][idx[j]][c] for q < quads, j < nsel, c < row: the
// rows of a block of projections (rows of `row` floats; `src_rows` rows per
// quad in src, nsel in dst).
extern "C" __global__ void dv_gather_rows(const float* __restrict__ src, float* __restrict__ dst,
                                          const int* __restrict__ idx, int nsel, long long row,
                                          int src_rows, int quads) {
    const long long n = (long long)quads * nsel * row;
    GRID_LOOP(i, n) {
        const long long c = i % row;
        const long long qj = i / row;
        const int j = (int)(qj % nsel);
        const long long q = qj / nsel;
        dst[i] = src[(q * src_rows + idx[j]) * row + c];
    }
}
