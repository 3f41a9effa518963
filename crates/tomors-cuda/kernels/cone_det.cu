// Deterministic back projection of the cone-beam Joseph projector, compiled
// appended to cone_joseph.cu (it uses its ConeFrame, Ray, setup_ray and
// visit_step). cj_back scatters with float atomicAdd, whose order (and so
// the last bits of the sums) varies between runs; here every contribution
// y*len*w (the same f32 product as cj_back's) is converted to a 64-bit
// fixed-point integer and added with an integer atomicAdd. Integer addition
// is exact and associative, so the sums do not depend on the order: the
// result is the same bits on every run. See src/iterative/cone/det.rs.
//
// The scale: 2^(62 - e) with 2^e >= max|y| * wbound, where wbound (host)
// bounds the sum of the weights of all rays through one voxel (the rays of
// one projection touching a voxel are at most the number of its ART
// batches, each weight at most h*sqrt(3)); so no sum overflows 2^62. The
// largest |y| is found on the device first (cj_absmax), so nothing is read
// back. A non-finite input makes the whole output NaN (the solver's
// divergence test sees it).

// max |y| as float bits (non-negative floats order as integers; NaN and
// infinity above every finite value) into *out (zeroed first).
extern "C" __global__ void __launch_bounds__(256)
    cj_absmax(const float* __restrict__ y, long long n, unsigned* __restrict__ out) {
    unsigned m = 0u;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        m = max(m, __float_as_uint(y[i]) & 0x7fffffffu);
    m = __reduce_max_sync(0xffffffffu, m);
    if ((threadIdx.x & 31) == 0) atomicMax(out, m);
}

// The fixed-point scale; ok = false for a non-finite maximum.
__device__ __forceinline__ double det_scale(const unsigned* __restrict__ maxbits, double wbound,
                                            bool& ok) {
    const float m = __uint_as_float(*maxbits);
    ok = m <= 3.402823466e38f;  // false for inf and NaN
    if (!(m > 0.0f)) return 1.0;
    int e;
    frexp((double)m * wbound, &e);
    return ldexp(1.0, 62 - e);
}

// acc += fixed-point A^T proj (one thread per ray, as cj_back); acc zeroed
// first.
extern "C" __global__ void __launch_bounds__(256)
    cj_back_fixed(const float* __restrict__ proj, unsigned long long* __restrict__ acc,
                  const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
                  int nc, const unsigned* __restrict__ maxbits, double wbound) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int a = blockIdx.z;
    if (col >= nc || row >= nr) return;
    const float y = __ldg(proj + ((size_t)a * nr + row) * nc + col);
    if (y == 0.0f) return;
    bool ok;
    const double scale = det_scale(maxbits, wbound, ok);
    if (!ok) return;
    Ray r;
    if (!setup_ray(frames + a, row, col, nx, ny, nz, h, r)) return;
    const float yl = y * r.len;
    for (int i = r.first; i < r.end; ++i)
        visit_step(r, i, [&](int e, float w) {
            atomicAdd(acc + e, (unsigned long long)__double2ll_rn((double)(yl * w) * scale));
        });
}

// out = acc / scale (NaN everywhere for a non-finite input).
extern "C" __global__ void __launch_bounds__(256)
    cj_fixed_to_float(const unsigned long long* __restrict__ acc, float* __restrict__ out,
                      long long n, const unsigned* __restrict__ maxbits, double wbound) {
    bool ok;
    const double scale = det_scale(maxbits, wbound, ok);
    const double inv = 1.0 / scale;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = ok ? (float)((double)(long long)acc[i] * inv) : __int_as_float(0x7fc00000);
}
