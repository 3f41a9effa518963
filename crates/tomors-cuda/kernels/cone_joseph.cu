// Joseph's cone-beam projector (tomors-core's ConeJosephProjector) and its
// exact transpose, plus the weighting of the voxel back projection's input (the
// element-wise kernels of the iterative methods are in linalg.cu).
//
// Layouts: the volume is [z][y][x] (flat, x fastest), the projections
// [angle][row][col]. Coordinates are voxel indices (X = cx + x/h,
// Y = cy - y/h, Z = cz + z/h): voxel (ix, iy, iz) is centred at
// (ix, iy, iz). Per projection the host gives, in f64, the source, the
// position of detector pixel (0, 0) and the steps of one column and one row
// (ConeFrame, the RayFrame of tomors-core).
//
// Every ray (one thread) is set up in f64 exactly as the CPU operator sets
// it up (same operations, no fused multiply-add, so the same dominant axis
// even at ties); positions along it are then stepped in f32 from the
// volume's middle plane, so the interpolation weights are the CPU's to f32
// rounding. The back projection walks the same rays with the same f32
// arithmetic and scatters with atomicAdd: it visits exactly the (voxel,
// weight) pairs of the forward projection (a matched pair to f32 rounding;
// the order of the additions, and so the last bits, vary between runs).

struct ConeFrame {
    double src[3];
    double base[3];
    double eu[3];
    double ev[3];
};

// One ray, ready to step: dominant axis `ax` (strides sa, sb, sc of the
// dominant and the two other axes; extents na_, nb_, nc_ of the latter
// two), the steps first..end along it, the positions of the ray in the
// other two axes at plane `mid`, their change per step and the step length.
struct Ray {
    int ax;  // the dominant axis (0 = x, 1 = y, 2 = z)
    int sa, sb, sc;
    int nb_, nc_;
    int first, end, mid;
    float b_mid, c_mid, db, dc, len;
};

__device__ __forceinline__ void step_range(double c0, double dc, double below, double above,
                                           int first, int end, int& lo, int& hi) {
    if (dc == 0.0) {
        if (c0 > below && c0 < above) {
            lo = first;
            hi = end;
        } else {
            lo = first;
            hi = first;
        }
        return;
    }
    const double t1 = (below - c0) / dc;
    const double t2 = (above - c0) / dc;
    const double a = fmin(t1, t2), b = fmax(t1, t2);
    const double l = fmin(fmax(a - 2.0, (double)first), (double)end);
    const double h = fmin(fmax(b + 2.0, (double)first), (double)end);
    lo = (int)l;
    hi = max((int)h, lo);
}

template <typename T>
__device__ __forceinline__ T sel3(T a0, T a1, T a2, int k) {
    return k == 0 ? a0 : (k == 1 ? a1 : a2);
}

// Sets up the ray of detector pixel (row, col) of frame `f` on a volume of
// nx × ny × nz voxels of side h. Returns false for a ray with no step.
// (Scalars and selects rather than small arrays indexed by the axis, so
// nothing goes to local memory.)
__device__ __forceinline__ bool setup_ray(const ConeFrame* __restrict__ f, int row, int col,
                                          int nx, int ny, int nz, double h, Ray& r) {
    const double c = (double)col, rr = (double)row;
    // (base + c·eu) + r·ev − src, rounded as the CPU rounds it.
#define DIR(k)                                                                              \
    __dsub_rn(__dadd_rn(__dadd_rn(__ldg(&f->base[k]), __dmul_rn(c, __ldg(&f->eu[k]))),   \
                        __dmul_rn(rr, __ldg(&f->ev[k]))),                                 \
              __ldg(&f->src[k]))
    const double d0 = DIR(0), d1 = DIR(1), d2 = DIR(2);
#undef DIR
    const double o0 = __ldg(&f->src[0]), o1 = __ldg(&f->src[1]), o2 = __ldg(&f->src[2]);
    const double a0 = fabs(d0), a1 = fabs(d1), a2 = fabs(d2);
    int ax;
    if (a0 >= a1) ax = a0 >= a2 ? 0 : 2;
    else ax = a1 >= a2 ? 1 : 2;
    const int bx = ax == 0 ? 1 : 0;
    const int cx = ax == 2 ? 1 : 2;
    const double da = sel3(d0, d1, d2, ax);
    if (da == 0.0) return false;
    const double oa = sel3(o0, o1, o2, ax);
    const double db = sel3(d0, d1, d2, bx) / da;
    const double dc = sel3(d0, d1, d2, cx) / da;
    const double b_at0 = __dsub_rn(sel3(o0, o1, o2, bx), __dmul_rn(oa, db));
    const double c_at0 = __dsub_rn(sel3(o0, o1, o2, cx), __dmul_rn(oa, dc));
    const int n_a = sel3(nx, ny, nz, ax);
    r.nb_ = sel3(nx, ny, nz, bx);
    r.nc_ = sel3(nx, ny, nz, cx);
    int l1, h1, l2, h2;
    step_range(b_at0, db, -1.0, (double)r.nb_, 0, n_a, l1, h1);
    step_range(c_at0, dc, -1.0, (double)r.nc_, 0, n_a, l2, h2);
    r.first = max(l1, l2);
    r.end = min(h1, h2);
    r.mid = n_a / 2;
    r.b_mid = (float)(b_at0 + (double)r.mid * db);
    r.c_mid = (float)(c_at0 + (double)r.mid * dc);
    r.db = (float)db;
    r.dc = (float)dc;
    r.len = (float)(h * sqrt(1.0 + db * db + dc * dc));
    r.ax = ax;
    r.sa = sel3(1, nx, nx * ny, ax);
    r.sb = sel3(1, nx, nx * ny, bx);
    r.sc = sel3(1, nx, nx * ny, cx);
    return r.first < r.end;
}

// The four bilinear taps of step i of a ray: flat index of the (b0, c0)
// voxel, the taps' weights, and which taps lie inside the volume (the step
// length is applied by the caller).
struct Taps {
    int e;
    float w00, w01, w10, w11;  // (b, c) offsets (0,0), (0,1), (1,0), (1,1)
    bool in00, in01, in10, in11;
};

__device__ __forceinline__ Taps step_taps(const Ray& r, int i) {
    const float s = (float)(i - r.mid);
    const float pb = fmaf(s, r.db, r.b_mid);
    const float pc = fmaf(s, r.dc, r.c_mid);
    const float fb = floorf(pb), fc = floorf(pc);
    const int b0 = (int)fb, c0 = (int)fc;
    const float wb = pb - fb, wc = pc - fc;
    const bool b0in = (unsigned)b0 < (unsigned)r.nb_;
    const bool b1in = (unsigned)(b0 + 1) < (unsigned)r.nb_ && wb > 0.0f;
    const bool c0in = (unsigned)c0 < (unsigned)r.nc_;
    const bool c1in = (unsigned)(c0 + 1) < (unsigned)r.nc_ && wc > 0.0f;
    const float ub = 1.0f - wb, uc = 1.0f - wc;
    Taps t;
    t.e = i * r.sa + b0 * r.sb + c0 * r.sc;
    t.w00 = ub * uc; t.w01 = ub * wc; t.w10 = wb * uc; t.w11 = wb * wc;
    t.in00 = b0in && c0in; t.in01 = b0in && c1in;
    t.in10 = b1in && c0in; t.in11 = b1in && c1in;
    return t;
}

// Visits the (flat voxel index, bilinear weight) pairs of step i of a ray
// (the step length is applied by the caller).
template <typename V>
__device__ __forceinline__ void visit_step(const Ray& r, int i, V&& visit) {
    const Taps t = step_taps(r, i);
    if (t.in00) visit(t.e, t.w00);
    if (t.in01) visit(t.e + r.sc, t.w01);
    if (t.in10) visit(t.e + r.sb, t.w10);
    if (t.in11) visit(t.e + r.sb + r.sc, t.w11);
}

// Grid order of the forward projections (projection-major): the projection
// is blockIdx.x, so the blocks running together are neighbouring projections
// of one detector tile, whose rays cross nearly the same voxels (shared in
// the L2 cache). The tile-major order (projection in blockIdx.z: every
// projection sweeps the whole volume before the next) measured slower
// (docs/perf-notes.md) and is gone.
__device__ __forceinline__ void forward_index(int& col, int& row, int& a) {
    a = blockIdx.x;
    col = blockIdx.y * blockDim.x + threadIdx.x;
    row = blockIdx.z * blockDim.y + threadIdx.y;
}

// Forward projection: out[a][row][col] = sum of w · vol over the ray; with
// MODE 1 the squared row norm sum of w², with MODE 2 the row sum sum of w
// (the forward projection of ones without reading it); vol unused in both.
//
// With FOLD (row sums only, MODE 2, on a mirror-symmetric geometry: see
// cj_forward_fold) the launch covers rows 0 .. (nr + 1) / 2 - 1 and each
// thread also writes its sum to the mirrored row nr - 1 - row, whose ray is
// the mirror image of this one (the same weights, to f64 rounding of the
// set-up).
template <int MODE, bool FOLD = false>
__device__ __forceinline__ void forward_impl(const float* __restrict__ vol, float* __restrict__ out,
                                             const ConeFrame* __restrict__ frames, int nx, int ny,
                                             int nz, double h, int nr, int nc) {
    int col, row, a;
    forward_index(col, row, a);
    if (col >= nc || row >= (FOLD ? (nr + 1) / 2 : nr)) return;
    Ray r;
    float acc = 0.0f;
    if (setup_ray(frames + a, row, col, nx, ny, nz, h, r)) {
        for (int i = r.first; i < r.end; ++i) {
            if (MODE == 1)
                visit_step(r, i, [&](int, float w) { acc += w * w; });
            else if (MODE == 2)
                visit_step(r, i, [&](int, float w) { acc += w; });
            else
                visit_step(r, i, [&](int e, float w) { acc += w * __ldg(vol + e); });
        }
        acc *= MODE == 1 ? r.len * r.len : r.len;
    }
    out[((size_t)a * nr + row) * nc + col] = acc;
    if (FOLD && nr - 1 - row != row) out[((size_t)a * nr + (nr - 1 - row)) * nc + col] = acc;
}

extern "C" __global__ void __launch_bounds__(256)
    cj_forward(const float* __restrict__ vol, float* __restrict__ out,
               const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
               int nc) {
    forward_impl<0>(vol, out, frames, nx, ny, nz, h, nr, nc);
}

extern "C" __global__ void __launch_bounds__(256)
    cj_forward_sq(const float* __restrict__ vol, float* __restrict__ out,
                  const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
                  int nc) {
    forward_impl<1>(vol, out, frames, nx, ny, nz, h, nr, nc);
}

// Row sums A·1 (vol unused): the forward projection of ones, by arithmetic.
extern "C" __global__ void __launch_bounds__(256)
    cj_forward_ones(const float* __restrict__ vol, float* __restrict__ out,
                    const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h,
                    int nr, int nc) {
    forward_impl<2>(vol, out, frames, nx, ny, nz, h, nr, nc);
}

// Row sums as cj_forward_ones, each thread writing its ray's and the
// mirrored ray's (launch over the first (nr + 1) / 2 rows).
extern "C" __global__ void __launch_bounds__(256)
    cj_forward_ones_fold(const float* __restrict__ vol, float* __restrict__ out,
                         const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h,
                         int nr, int nc) {
    forward_impl<2, true>(vol, out, frames, nx, ny, nz, h, nr, nc);
}

// Forward projection through a 3D texture of the volume (width nx, height
// ny, depth nz; hardware trilinear interpolation with 8-bit weights, border
// zero): the same rays and steps as cj_forward, one fetch per step at the
// step's exact position (an integer in the dominant axis, so the fetch is
// Joseph's bilinear interpolation in the other two, to the 8-bit weights).
template <int AX>
__device__ __forceinline__ float tex_ray(cudaTextureObject_t t, const Ray& r) {
    float acc = 0.0f;
    for (int i = r.first; i < r.end; ++i) {
        const float s = (float)(i - r.mid);
        const float pb = fmaf(s, r.db, r.b_mid) + 0.5f;
        const float pc = fmaf(s, r.dc, r.c_mid) + 0.5f;
        const float pa = (float)i + 0.5f;
        if (AX == 0) acc += tex3D<float>(t, pa, pb, pc);
        else if (AX == 1) acc += tex3D<float>(t, pb, pa, pc);
        else acc += tex3D<float>(t, pb, pc, pa);
    }
    return acc;
}

extern "C" __global__ void __launch_bounds__(256)
    cj_forward_tex(unsigned long long tex, float* __restrict__ out,
                   const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
                   int nc) {
    int col, row, a;
    forward_index(col, row, a);
    if (col >= nc || row >= nr) return;
    Ray r;
    float acc = 0.0f;
    if (setup_ray(frames + a, row, col, nx, ny, nz, h, r)) {
        const cudaTextureObject_t t = (cudaTextureObject_t)tex;
        if (r.ax == 0) acc = tex_ray<0>(t, r);
        else if (r.ax == 1) acc = tex_ray<1>(t, r);
        else acc = tex_ray<2>(t, r);
        acc *= r.len;
    }
    out[((size_t)a * nr + row) * nc + col] = acc;
}

// Folded texture forward projection. On a mirror-symmetric geometry (the
// source on the volume's middle plane z = zc = (nz - 1) / 2 in index
// coordinates, the detector's rows level and centred on it: row nr - 1 - r
// is row r mirrored), the ray of pixel (row, col) and that of
// (nr - 1 - row, col) are mirror images under z -> 2 zc - z: at every step
// they have the same position in the other axis and mirrored positions in
// z. The volume is folded about zc into float2 texels
// F[j][y][x] = (V[lo + j][y][x], V[hi - j][y][x]), lo = (nz - 1) / 2,
// hi = nz / 2, j = 0 .. nz / 2 (cj_fold_volume), so that the folded
// coordinate j = |z - zc| + (hi - lo) / 2 of a position z reads the upper
// voxel column in .x and its mirror in .y: one trilinear float2 fetch at
// (x, y, j) gives both rays' bilinear samples, with the same 8-bit weights
// in the other axis and mirrored ones in z (the unfolded kernel's values to
// the texture's rounding). z-dominant rays step on slices i, whose folded
// index |i - zc| + (hi - lo) / 2 is a whole texel. Beyond the last folded
// texel (outside the volume) the border reads zero for both.
template <int AX>
__device__ __forceinline__ void fold_ray(cudaTextureObject_t t, const Ray& r, float zc, float off,
                                         float& own, float& mir) {
    float o = 0.0f, m = 0.0f;
    for (int i = r.first; i < r.end; ++i) {
        const float s = (float)(i - r.mid);
        const float pb = fmaf(s, r.db, r.b_mid) + 0.5f;
        const float pc = fmaf(s, r.dc, r.c_mid);
        float2 v;
        bool up;
        if (AX == 2) {
            const float d = (float)i - zc;
            up = d >= 0.0f;
            v = tex3D<float2>(t, pb, pc + 0.5f, fabsf(d) + off + 0.5f);
        } else {
            const float d = pc - zc;
            up = d >= 0.0f;
            const float pj = fabsf(d) + off + 0.5f;
            const float pa = (float)i + 0.5f;
            if (AX == 0) v = tex3D<float2>(t, pa, pb, pj);
            else v = tex3D<float2>(t, pb, pa, pj);
        }
        o += up ? v.x : v.y;
        m += up ? v.y : v.x;
    }
    own = o;
    mir = m;
}

// The launch covers detector rows 0 .. (nr + 1) / 2 - 1; each thread
// writes its ray and the mirrored one (the middle row of an odd detector
// once). `tex`: the folded volume (width nx, height ny, depth nz / 2 + 1,
// float2, linear filtering, border zero).
extern "C" __global__ void __launch_bounds__(256)
    cj_forward_fold(unsigned long long tex, float* __restrict__ out,
                    const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
                    int nc) {
    int col, row, a;
    forward_index(col, row, a);
    if (col >= nc || row >= (nr + 1) / 2) return;
    Ray r;
    float own = 0.0f, mir = 0.0f;
    if (setup_ray(frames + a, row, col, nx, ny, nz, h, r)) {
        const cudaTextureObject_t t = (cudaTextureObject_t)tex;
        const float zc = 0.5f * (float)(nz - 1);
        const float off = (nz & 1) ? 0.0f : 0.5f;
        if (r.ax == 0) fold_ray<0>(t, r, zc, off, own, mir);
        else if (r.ax == 1) fold_ray<1>(t, r, zc, off, own, mir);
        else fold_ray<2>(t, r, zc, off, own, mir);
        own *= r.len;
        mir *= r.len;
    }
    out[((size_t)a * nr + row) * nc + col] = own;
    const int mrow = nr - 1 - row;
    if (mrow != row) out[((size_t)a * nr + mrow) * nc + col] = mir;
}

// Back projection (exact transpose): vol += Aᵀ·proj; `vol` must be zeroed
// first. One thread per ray, scattering with atomicAdd.
extern "C" __global__ void __launch_bounds__(256)
    cj_back(const float* __restrict__ proj, float* __restrict__ vol,
            const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
            int nc) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int a = blockIdx.z;
    if (col >= nc || row >= nr) return;
    const float y = __ldg(proj + ((size_t)a * nr + row) * nc + col);
    if (y == 0.0f) return;
    Ray r;
    if (!setup_ray(frames + a, row, col, nx, ny, nz, h, r)) return;
    const float yl = y * r.len;
    for (int i = r.first; i < r.end; ++i)
        visit_step(r, i, [&](int e, float w) { atomicAdd(vol + e, yl * w); });
}

// Warp tile of cj_back_merged: WC detector columns × (32 / WC) rows
// (WC = 4, 8, 16 or 32 compile; the projector uses the default 8); the
// block of 256 threads covers 32 × 8 pixels.
#ifndef WC
#define WC 8
#endif
#define WR (32 / WC)

// Merges the two taps of one interpolation row (A = b0, B = b0 + 1; key
// -1 = no tap) with the neighbouring lanes of the same warp row before
// scattering: the B tap of one ray and the A tap of the next are often the
// same voxel (neighbouring rays about one voxel apart), so the next lane
// adds both values in one atomic.
__device__ __forceinline__ void scatter_row(float* __restrict__ vol, unsigned mask, bool has_prev,
                                            bool has_next, int kA, float vA, int kB, float vB) {
    const int pk = __shfl_up_sync(mask, kB, 1);
    const float pv = __shfl_up_sync(mask, vB, 1);
    const int nk = __shfl_down_sync(mask, kA, 1);
    if (has_prev && pk >= 0 && pk == kA) vA += pv;
    const bool dropB = has_next && kB >= 0 && nk == kB;
    if (kA >= 0) atomicAdd(vol + kA, vA);
    if (kB >= 0 && !dropB) atomicAdd(vol + kB, vB);
}

// Back projection as cj_back, with each warp stepping the rays of a tile of
// WC × WR detector pixels together (steps of the union of their ranges) so
// that equal voxels of neighbouring rays are merged before the atomicAdd:
// first the c0 + 1 taps of a ray into the c0 taps of the ray one detector
// row below (the next row of the tile), then the b0 + 1 tap into the b0
// tap of the ray one column to the right. Fewer atomics; the same sums up
// to the order of the additions. Launch with 256 threads per block, the
// grid covering 32 × 8 pixels per block.
extern "C" __global__ void __launch_bounds__(256)
    cj_back_merged(const float* __restrict__ proj, float* __restrict__ vol,
                   const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
                   int nc) {
    const unsigned mask = __activemask();
    const int t = threadIdx.x;
    const int lane = t & 31, warp = t >> 5;
    const int lc = lane % WC, lr = lane / WC;
    const int col = blockIdx.x * 32 + (warp % (32 / WC)) * WC + lc;
    const int row = blockIdx.y * 8 + (warp / (32 / WC)) * WR + lr;
    const int a = blockIdx.z;
    const bool has_prev = lc > 0 && ((mask >> (lane - 1)) & 1u);
    const bool has_next = lc < WC - 1 && ((mask >> (lane + 1)) & 1u);
    const bool has_up = lr > 0 && ((mask >> (lane - WC)) & 1u);
    const bool has_down = lr < WR - 1 && ((mask >> (lane + WC)) & 1u);
    const bool inside = col < nc && row < nr;
    const float y = inside ? __ldg(proj + ((size_t)a * nr + row) * nc + col) : 0.0f;
    Ray r;
    const bool ok = inside && y != 0.0f && setup_ray(frames + a, row, col, nx, ny, nz, h, r);
    int lo = ok ? r.first : 0x7fffffff;
    int hi = ok ? r.end : -0x7fffffff;
#if __CUDA_ARCH__ >= 800
    lo = __reduce_min_sync(mask, lo);
    hi = __reduce_max_sync(mask, hi);
#else
    for (int d = 1; d < 32; d <<= 1) {
        const int ol = __shfl_xor_sync(mask, lo, d), oh = __shfl_xor_sync(mask, hi, d);
        if ((mask >> (lane ^ d)) & 1u) {
            lo = min(lo, ol);
            hi = max(hi, oh);
        }
    }
#endif
    const float yl = ok ? y * r.len : 0.0f;
    for (int i = lo; i < hi; ++i) {
        int k00 = -1, k10 = -1, k01 = -1, k11 = -1;
        float v00 = 0.0f, v10 = 0.0f, v01 = 0.0f, v11 = 0.0f;
        if (ok && i >= r.first && i < r.end) {
            const Taps t = step_taps(r, i);
            if (t.in00) { k00 = t.e; v00 = yl * t.w00; }
            if (t.in10) { k10 = t.e + r.sb; v10 = yl * t.w10; }
            if (t.in01) { k01 = t.e + r.sc; v01 = yl * t.w01; }
            if (t.in11) { k11 = t.e + r.sb + r.sc; v11 = yl * t.w11; }
        }
#if WR > 1
        {
            // The lane one row up hands its c0 + 1 taps to this lane's c0
            // taps where the voxels agree.
            const int u01 = __shfl_up_sync(mask, k01, WC), u11 = __shfl_up_sync(mask, k11, WC);
            const float w01 = __shfl_up_sync(mask, v01, WC), w11 = __shfl_up_sync(mask, v11, WC);
            const int d00 = __shfl_down_sync(mask, k00, WC), d10 = __shfl_down_sync(mask, k10, WC);
            if (has_up) {
                if (u01 >= 0 && u01 == k00) v00 += w01;
                else if (u01 >= 0 && u01 == k10) v10 += w01;
                if (u11 >= 0 && u11 == k00) v00 += w11;
                else if (u11 >= 0 && u11 == k10) v10 += w11;
            }
            if (has_down) {
                if (k01 >= 0 && (k01 == d00 || k01 == d10)) k01 = -1;
                if (k11 >= 0 && (k11 == d00 || k11 == d10)) k11 = -1;
            }
        }
#endif
        scatter_row(vol, mask, has_prev, has_next, k00, v00, k10, v10);
        scatter_row(vol, mask, has_prev, has_next, k01, v01, k11, v11);
    }
}

#define GRID_LOOP(i, n)                                                              \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * blockDim.x)

// The voxel-driven back projection's input: projections [angle][row][col]
// (n = angles * NR * NC values) times the per-pixel weights w[row][col]
// (sqrt(SDD^2 + u^2 + v^2) times the operator's scale), written into the
// stacked texture layout of cone_backproject.cu's cone_pack: angle g in
// texture g / tpg (gfloats floats apart), rows from 1 + (g % tpg)(NR + 1),
// pitch floats apart (the zero rows are never written).
extern "C" __global__ void cj_weight_pack(const float* __restrict__ src,
                                          const float* __restrict__ w, float* __restrict__ dst,
                                          int nr, int nc, int pitch, int tpg, long long gfloats,
                                          long long n) {
    GRID_LOOP(i, n) {
        const int c = (int)(i % nc);
        const long long ar = i / nc;
        const int r = (int)(ar % nr);
        const int g = (int)(ar / nr);
        const long long row = 1 + (long long)(g % tpg) * (nr + 1) + r;
        dst[(g / tpg) * gfloats + row * pitch + c] = src[i] * __ldg(w + (long long)r * nc + c);
    }
}

// The folded volume of cj_forward_fold: dst[j][y][x] = (vol[lo + j][y][x],
// vol[hi - j][y][x]), lo = (nz - 1) / 2, hi = nz / 2, for j = 0 .. nz / 2
// (n = (nz / 2 + 1) * plane values, plane = nx * ny).
extern "C" __global__ void cj_fold_volume(const float* __restrict__ vol, float2* __restrict__ dst,
                                          int nz, long long plane, long long n) {
    const long long lo = (nz - 1) / 2, hi = nz / 2;
    GRID_LOOP(i, n) {
        const long long j = i / plane;
        const long long p = i - j * plane;
        dst[i] = make_float2(__ldg(vol + (lo + j) * plane + p), __ldg(vol + (hi - j) * plane + p));
    }
}

// The voxel-driven back projection's input in the folded layout of
// cone_fold.cu (cone_pack_fold's, plain rows): projections [angle][row][col]
// times the per-pixel weights w[row][col]; angle g in texture g / tpg
// (gf2 float2 apart), rows from (g % tpg)(h + 1), pitch2 float2 apart;
// folded row i holds rows a_row + i and s_sum - a_row - i (zero outside
// the detector; src == nullptr reads ones). n = angles * h * nc. The zero
// rows between bands are never written (the buffer is cleared once).
extern "C" __global__ void cj_weight_pack_fold(const float* __restrict__ src,
                                               const float* __restrict__ w,
                                               float2* __restrict__ dst, int nr, int nc,
                                               int pitch2, int tpg, long long gf2, int h,
                                               int a_row, int s_sum, long long n) {
    GRID_LOOP(i, n) {
        const int c = (int)(i % nc);
        const long long ai = i / nc;
        const int fi = (int)(ai % h);
        const long long g = ai / h;
        const int r0 = a_row + fi;
        const int r1 = s_sum - a_row - fi;
        float v0 = 0.0f, v1 = 0.0f;
        // src == nullptr: projections of ones (the column sums B·1).
        if (r0 >= 0 && r0 < nr)
            v0 = (src ? src[(g * nr + r0) * nc + c] : 1.0f) * __ldg(w + (long long)r0 * nc + c);
        if (r1 >= 0 && r1 < nr)
            v1 = (src ? src[(g * nr + r1) * nc + c] : 1.0f) * __ldg(w + (long long)r1 * nc + c);
        const long long row = (g % tpg) * (h + 1) + fi;
        dst[(g / tpg) * gf2 + row * pitch2 + c] = make_float2(v0, v1);
    }
}

// The sum of the four quarter turns of a volume about its z axis:
// out[z][y][x] = q at (x, y), (n-1-y, x), (n-1-x, n-1-y) and (y, n-1-x) of
// slice z (n = nx = ny; total = n * n * nz values). With a set of
// projections that a quarter turn maps onto itself, the back projection of
// every projection is this sum of the back projection of a quarter of them
// (either sense of the turn gives the same four terms).
extern "C" __global__ void cj_rot4_sum(const float* __restrict__ q, float* __restrict__ out,
                                       int n, long long total) {
    const long long plane = (long long)n * n;
    GRID_LOOP(i, total) {
        const long long z = i / plane;
        const int p = (int)(i - z * plane);
        const int y = p / n, x = p - y * n;
        const float* s = q + z * plane;
        const int m = n - 1;
        out[i] = (__ldg(s + (long long)y * n + x) + __ldg(s + (long long)x * n + (m - y))) +
                 (__ldg(s + (long long)(m - y) * n + (m - x)) + __ldg(s + (long long)(m - x) * n + y));
    }
}
