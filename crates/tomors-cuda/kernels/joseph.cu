// Joseph's parallel-beam projector (forward) and its exact transpose (a
// gather, no atomics), plus the layout kernels of its interleaved stacks,
// for stacks of independent slices. See src/iterative/parallel/ for the
// host side and docs/iterative.md for the derivation; the element-wise
// kernels of the iterative methods are in linalg.cu.
//
// Defines baked in at compile time:
//   SG  slices per thread of the projectors (4 or 8). Device arrays
//       interleave 4 slices per pixel / bin, `[quad][row][col][4]`, so a
//       thread reads the SG values of a pixel with SG/4 16-byte loads (one per
//       quad plane, each fully coalesced across the warp) and shares its
//       geometry between the SG slices. Stacks are padded to a multiple of
//       SG slices.
//   AP  projections per forward-projection thread (1 to 4).
//   PAIR threads per forward-projection ray (1 or 2).
//   KM  extra bins on each side in the back projector's gather (0 when the
//       hat footprint 1/sigma of every projection is at most one bin).
//
// The operator: for projection a with m = max(|sin|, |cos|), ray (a, k) has
// the entries  A[a,k][p] = len_a * max(0, 1 - sigma_a * |k - u_a(p)|)  with
// len_a = h/m, sigma_a = bw/(h m) and u_a(p) the detector coordinate (bins)
// of the centre of pixel p. The forward kernel evaluates it ray by ray,
// stepping along the dominant axis (one step per row or column, two pixels
// per step, exactly tomors-core's JosephProjector); the back kernel evaluates
// the same entries pixel by pixel (the bins within 1/sigma of u).

#ifndef SG
#define SG 8
#endif
#ifndef KM
#define KM 0
#endif

#define NV (SG / 4)
// Slices per thread of the back projection (4, 8 or 16; default SG).
#ifndef SGB
#define SGB SG
#endif
// Rays (projections) per forward thread: neighbouring projections of one
// bin step through nearly the same pixels, so they share the L1 cache.
#ifndef AP
#define AP 4
#endif
// Threads per ray of the forward projection: 1, or 2 (each reads one of the
// two pixels of every step; the partial sums meet through a shuffle), which
// halves the span of the pixels a warp reads per load.
#ifndef PAIR
#define PAIR 1
#endif
// Projections per unrolled step of the back projection (1, 2 or 4).
#ifndef BPU
#define BPU 2
#endif

// Per-projection constants of the forward projector (computed in f64 on the
// host). Rays step over `steps` lines of the image read from `vol`
// (row stepping, |cos| > |sin|) or `volT` (the transposed copy, column
// stepping); on step t the ray of bin k is at position
// q0 + k*qk + t*qs (in pixels along the line).
struct FpAngle {
    double q0;
    double qk;
    double qs;
    long long dfix;  // qs in 32.32 fixed point
    float len;       // step length h/m
    int transposed;  // 1: column stepping (read volT)
};

// Per-projection constants of the back projector: u(ix, iy) = c0 + ix*cx + iy*cy.
struct BpAngle {
    double c0;
    double cx;
    double cy;
    float sigma;
    float len;
};

// The S values of one pixel / bin: S/4 float4s `stride` floats apart.
template <int S>
__device__ __forceinline__ void ld(float (&v)[S], const float* p, size_t stride) {
#pragma unroll
    for (int i = 0; i < S / 4; ++i) {
        float4 t = __ldg(reinterpret_cast<const float4*>(p + i * stride));
        v[4 * i] = t.x;
        v[4 * i + 1] = t.y;
        v[4 * i + 2] = t.z;
        v[4 * i + 3] = t.w;
    }
}

template <int S>
__device__ __forceinline__ void st(float* p, size_t stride, const float (&v)[S]) {
#pragma unroll
    for (int i = 0; i < S / 4; ++i) {
        *reinterpret_cast<float4*>(p + i * stride) =
            make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
}

// A group of up to AP projections of the same stepping direction (host-built,
// neighbouring angles).
struct FpGroup {
    int idx[4];
    int count;
    int transposed;
};

// Forward projection: one thread per (bin k, group of AP projections, group
// of SG slices). SQ: squared weights (row norms ||a_i||^2 of an all-ones
// volume).
template <bool SQ>
__device__ __forceinline__ void forward_body(const float* __restrict__ vol,
                                             const float* __restrict__ volT,
                                             float* __restrict__ out,
                                             const FpAngle* __restrict__ angs,
                                             const FpGroup* __restrict__ groups, int nx,
                                             int ny, int na, int nb) {
    const int tk = blockIdx.x * blockDim.x + threadIdx.x;
    const int half = tk % PAIR;
    const bool valid = tk / PAIR < nb;
    const int k = min(tk / PAIR, nb - 1);
    const FpGroup grp = groups[blockIdx.y];
    const int g = blockIdx.z;
    if (PAIR == 1 && !valid) return;
    const size_t plane = (size_t)nx * ny * 4;
    const float* img;
    int steps, width;
    if (grp.transposed) {
        img = volT + (size_t)g * NV * plane;
        steps = nx;
        width = ny;
    } else {
        img = vol + (size_t)g * NV * plane;
        steps = ny;
        width = nx;
    }
    // Per ray: steps whose position lies in (-1, width), loose by one on each
    // side (the index tests below are exact); the thread steps over the union.
    long long pos[AP], dfix[AP];
    double qa[AP];
    int lo = steps, hi = 0;
#pragma unroll
    for (int r = 0; r < AP; ++r) {
        const FpAngle p = angs[r < grp.count ? grp.idx[r] : grp.idx[0]];
        const double q = p.q0 + (double)k * p.qk;
        int l = 0, h = steps;
        if (p.qs == 0.0) {
            if (!(q > -1.0 && q < (double)width)) h = 0;
        } else {
            double t1 = (-1.0 - q) / p.qs, t2 = ((double)width - q) / p.qs;
            double tmin = fmin(t1, t2), tmax = fmax(t1, t2);
            l = (int)fmax(0.0, fmin((double)steps, floor(tmin) - 1.0));
            h = (int)fmax((double)l, fmin((double)steps, ceil(tmax) + 1.0));
        }
        if (h > l) {
            lo = min(lo, l);
            hi = max(hi, h);
        }
        qa[r] = q;
        dfix[r] = p.dfix;
    }
#pragma unroll
    for (int r = 0; r < AP; ++r) {
        const FpAngle p = angs[r < grp.count ? grp.idx[r] : grp.idx[0]];
        pos[r] = __double2ll_rn((qa[r] + (double)lo * p.qs) * 4294967296.0);
    }
    float acc[AP][SG];
#pragma unroll
    for (int r = 0; r < AP; ++r)
#pragma unroll
        for (int j = 0; j < SG; ++j) acc[r][j] = 0.0f;
    const float* line = img + (size_t)lo * width * 4;
    const size_t stride = (size_t)width * 4;
    for (int t = lo; t < hi; ++t, line += stride) {
#pragma unroll
        for (int r = 0; r < AP; ++r) {
            const int i0 = (int)(pos[r] >> 32);
            // Fraction: the low 32 bits, top 23 of them as a float mantissa (exact).
            float w1 = __uint_as_float(0x3f800000u | ((unsigned)pos[r] >> 9)) - 1.0f;
            float w0 = 1.0f - w1;
            pos[r] += dfix[r];
            if (SQ) {
                w0 *= w0;
                w1 *= w1;
            }
            if (PAIR == 2) {
                const int i = i0 + half;
                float w = half ? w1 : w0;
                if (i < 0 || i >= width) w = 0.0f;
                const int c = min(max(i, 0), width - 1);
                float v[SG];
                ld(v, line + (size_t)c * 4, plane);
#pragma unroll
                for (int j = 0; j < SG; ++j) acc[r][j] = fmaf(w, v[j], acc[r][j]);
            } else {
                const int i1 = i0 + 1;
                if (i0 < 0 || i0 >= width) w0 = 0.0f;
                if (i1 < 0 || i1 >= width) w1 = 0.0f;
                const int c0 = min(max(i0, 0), width - 1);
                const int c1 = min(max(i1, 0), width - 1);
                float v0[SG], v1[SG];
                ld(v0, line + (size_t)c0 * 4, plane);
                ld(v1, line + (size_t)c1 * 4, plane);
#pragma unroll
                for (int j = 0; j < SG; ++j)
                    acc[r][j] = fmaf(w0, v0[j], fmaf(w1, v1[j], acc[r][j]));
            }
        }
    }
    if (PAIR == 2) {
#pragma unroll
        for (int r = 0; r < AP; ++r)
#pragma unroll
            for (int j = 0; j < SG; ++j) acc[r][j] += __shfl_xor_sync(0xffffffffu, acc[r][j], 1);
        if (half != 0 || !valid) return;
    }
    const size_t splane = (size_t)na * nb * 4;
#pragma unroll
    for (int r = 0; r < AP; ++r) {
        if (r < grp.count) {
            const int a = grp.idx[r];
            const float len = SQ ? angs[a].len * angs[a].len : angs[a].len;
#pragma unroll
            for (int j = 0; j < SG; ++j) acc[r][j] *= len;
            st(out + (size_t)g * NV * splane + ((size_t)a * nb + k) * 4, splane, acc[r]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) jp_forward(const float* __restrict__ vol,
                                                             const float* __restrict__ volT,
                                                             float* __restrict__ out,
                                                             const FpAngle* __restrict__ angs,
                                                             const FpGroup* __restrict__ groups,
                                                             int nx, int ny, int na, int nb) {
    forward_body<false>(vol, volT, out, angs, groups, nx, ny, na, nb);
}

extern "C" __global__ void __launch_bounds__(128) jp_forward_sq(const float* __restrict__ vol,
                                                                const float* __restrict__ volT,
                                                                float* __restrict__ out,
                                                                const FpAngle* __restrict__ angs,
                                                                const FpGroup* __restrict__ groups,
                                                                int nx, int ny, int na, int nb) {
    forward_body<true>(vol, volT, out, angs, groups, nx, ny, na, nb);
}

// Back projection (exact transpose of jp_forward) as a gather: one thread
// per pixel of a 16x16 tile and slice group, looping over the projections;
// each warp covers an 8x4 part of the tile (a compact footprint on the
// detector). Detector positions are computed relative to the tile's corner:
// the corner's u in f64 (once per block and projection, in shared memory),
// the offset within the tile in f32 (small, so f32 keeps ~1e-6 bins).
// Projections whose bins for the whole tile lie inside the detector skip the
// bounds tests.
#define BP_TILE 16
#define BP_CHUNK 256

struct BpShared {
    int kb;        // integer part of u at the tile corner
    float fb;      // fraction of u at the tile corner
    float cx;
    float cy;
    float sl;      // sigma * len
    float len;
    int interior;  // every bin the tile reads lies in [0, nb)
    int pad;
};

// One projection of the back projection with bounds tests.
__device__ __forceinline__ void bp_one(float (&acc)[SGB], const BpShared s, const float* row,
                                       float dx, float dy, int nb, size_t splane) {
    const float u = fmaf(dy, s.cy, fmaf(dx, s.cx, s.fb));
    const float fl = floorf(u);
    const float fr = u - fl;
    const int k = s.kb + (int)fl;
#pragma unroll
    for (int m = -KM; m <= KM + 1; ++m) {
        const int kk = k + m;
        float w = fmaxf(0.0f, fmaf(-s.sl, fabsf(fr - (float)m), s.len));
        if (kk < 0 || kk >= nb) w = 0.0f;
        const int kc = min(max(kk, 0), nb - 1);
        float v[SGB];
        ld(v, row + (size_t)kc * 4, splane);
#pragma unroll
        for (int j = 0; j < SGB; ++j) acc[j] = fmaf(w, v[j], acc[j]);
    }
}

extern "C" __global__ void __launch_bounds__(256) jp_back(const float* __restrict__ sino,
                                                          float* __restrict__ out,
                                                          const BpAngle* __restrict__ angs,
                                                          int nx, int ny, int na, int nb) {
    __shared__ BpShared sh[BP_CHUNK];
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int tx = (warp & 1) * 8 + (lane & 7);
    const int ty = (warp >> 1) * 4 + (lane >> 3);
    const int bx = blockIdx.x * BP_TILE, by = blockIdx.y * BP_TILE;
    const int ix = bx + tx, iy = by + ty;
    const int g = blockIdx.z;
    const float dx = (float)tx, dy = (float)ty;
    const size_t splane = (size_t)na * nb * 4;
    const float* sg = sino + (size_t)g * (SGB / 4) * splane;
    float acc[SGB];
#pragma unroll
    for (int j = 0; j < SGB; ++j) acc[j] = 0.0f;
    for (int a0 = 0; a0 < na; a0 += BP_CHUNK) {
        const int n = min(BP_CHUNK, na - a0);
        __syncthreads();
        for (int i = tid; i < n; i += BP_TILE * BP_TILE) {
            const BpAngle p = angs[a0 + i];
            const double u = p.c0 + (double)bx * p.cx + (double)by * p.cy;
            const double f = floor(u);
            BpShared s;
            s.kb = (int)f;
            s.fb = (float)(u - f);
            s.cx = (float)p.cx;
            s.cy = (float)p.cy;
            s.sl = p.sigma * p.len;
            s.len = p.len;
            const double span = (BP_TILE - 1) * (fabs(p.cx) + fabs(p.cy));
            const double kmin = floor(u - span) - KM - 2, kmax = floor(u + span) + KM + 3;
            s.interior = (kmin >= 0.0 && kmax <= (double)(nb - 1)) ? 1 : 0;
            s.pad = 0;
            sh[i] = s;
        }
        __syncthreads();
        const float* rows = sg + (size_t)a0 * nb * 4;
        int i = 0;
        // BPU projections at a time when all of them are interior: their
        // loads are independent and in flight together.
        for (; i + BPU <= n; i += BPU) {
            bool all = true;
#pragma unroll
            for (int r = 0; r < BPU; ++r) all = all && sh[i + r].interior;
            if (!all) {
#pragma unroll 1
                for (int r = 0; r < BPU; ++r)
                    bp_one(acc, sh[i + r], rows + (size_t)(i + r) * nb * 4, dx, dy, nb, splane);
                continue;
            }
            float w[BPU][2 * KM + 2];
            const float* base[BPU];
#pragma unroll
            for (int r = 0; r < BPU; ++r) {
                const BpShared s = sh[i + r];
                const float u = fmaf(dy, s.cy, fmaf(dx, s.cx, s.fb));
                const float fl = floorf(u);
                const float fr = u - fl;
                base[r] = rows + ((size_t)(i + r) * nb + (s.kb + (int)fl)) * 4;
#pragma unroll
                for (int m = -KM; m <= KM + 1; ++m)
                    w[r][m + KM] = fmaxf(0.0f, fmaf(-s.sl, fabsf(fr - (float)m), s.len));
            }
#pragma unroll
            for (int r = 0; r < BPU; ++r) {
#pragma unroll
                for (int m = -KM; m <= KM + 1; ++m) {
                    float v[SGB];
                    ld(v, base[r] + m * 4, splane);
#pragma unroll
                    for (int j = 0; j < SGB; ++j) acc[j] = fmaf(w[r][m + KM], v[j], acc[j]);
                }
            }
        }
        for (; i < n; ++i) bp_one(acc, sh[i], rows + (size_t)i * nb * 4, dx, dy, nb, splane);
    }
    const size_t vplane = (size_t)nx * ny * 4;
    if (ix < nx && iy < ny)
        st(out + (size_t)g * (SGB / 4) * vplane + ((size_t)iy * nx + ix) * 4, vplane, acc);
}

#ifdef BPQ
// Back projection with 2x2 pixels per thread (BPQ defined; only for KM == 0,
// i.e. every hat spans at most one bin). The u of the four pixels lie within
// |cx| + |cy| <= 2 bins of each other, so their taps fall in the four bins
// kmin .. kmin + 3 (kmin the smallest of their floors): the thread loads those
// once and each pixel weighs all four with jp_back's hat weights (zero
// outside its own two taps), halving the loads per voxel update. A block is
// a 32x32 tile; each warp covers 16x8 pixels (8x4 threads).
#if KM != 0
#error "jp_back_quad needs KM == 0"
#endif
#ifndef BQZ
#define BQZ 1
#endif
#define BQ_TILE 32

extern "C" __global__ void __launch_bounds__(256) jp_back_quad(const float* __restrict__ sino,
                                                               float* __restrict__ out,
                                                               const BpAngle* __restrict__ angs,
                                                               int nx, int ny, int na, int nb) {
    __shared__ BpShared sh[BP_CHUNK];
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
#if BQZ
    // Each quarter warp (8 lanes, one 128-byte load phase) a compact 4x2
    // threads = 8x4 pixels, the four quarters 2x2.
    const int tx = ((warp & 1) * 8 + ((lane >> 3) & 1) * 4 + (lane & 3)) * 2;
    const int ty = ((warp >> 1) * 4 + (lane >> 4) * 2 + ((lane >> 2) & 1)) * 2;
#else
    // Each quarter warp a row of 8 threads = 16x2 pixels.
    const int tx = ((warp & 1) * 8 + (lane & 7)) * 2;
    const int ty = ((warp >> 1) * 4 + (lane >> 3)) * 2;
#endif
    const int bx = blockIdx.x * BQ_TILE, by = blockIdx.y * BQ_TILE;
    const int g = blockIdx.z;
    const float dx0 = (float)tx, dx1 = (float)(tx + 1);
    const float dy0 = (float)ty, dy1 = (float)(ty + 1);
    const size_t splane = (size_t)na * nb * 4;
    const float* sg = sino + (size_t)g * (SGB / 4) * splane;
    float acc[4][SGB];
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int j = 0; j < SGB; ++j) acc[p][j] = 0.0f;
    for (int a0 = 0; a0 < na; a0 += BP_CHUNK) {
        const int n = min(BP_CHUNK, na - a0);
        __syncthreads();
        for (int i = tid; i < n; i += 256) {
            const BpAngle p = angs[a0 + i];
            const double u = p.c0 + (double)bx * p.cx + (double)by * p.cy;
            const double f = floor(u);
            BpShared s;
            s.kb = (int)f;
            s.fb = (float)(u - f);
            s.cx = (float)p.cx;
            s.cy = (float)p.cy;
            s.sl = p.sigma * p.len;
            s.len = p.len;
            const double span = (BQ_TILE - 1) * (fabs(p.cx) + fabs(p.cy));
            const double kmin = floor(u - span) - 2, kmax = floor(u + span) + 4;
            s.interior = (kmin >= 0.0 && kmax <= (double)(nb - 1)) ? 1 : 0;
            s.pad = 0;
            sh[i] = s;
        }
        __syncthreads();
        const float* rows = sg + (size_t)a0 * nb * 4;
        for (int i = 0; i < n; ++i) {
            const BpShared s = sh[i];
            float fr[4], jj[4];
            {
                const float u0 = fmaf(dy0, s.cy, fmaf(dx0, s.cx, s.fb));
                const float u1 = fmaf(dy0, s.cy, fmaf(dx1, s.cx, s.fb));
                const float u2 = fmaf(dy1, s.cy, fmaf(dx0, s.cx, s.fb));
                const float u3 = fmaf(dy1, s.cy, fmaf(dx1, s.cx, s.fb));
                const float f0 = floorf(u0), f1 = floorf(u1), f2 = floorf(u2), f3 = floorf(u3);
                const float fm = fminf(fminf(f0, f1), fminf(f2, f3));
                fr[0] = u0 - f0;
                fr[1] = u1 - f1;
                fr[2] = u2 - f2;
                fr[3] = u3 - f3;
                jj[0] = f0 - fm;
                jj[1] = f1 - fm;
                jj[2] = f2 - fm;
                jj[3] = f3 - fm;
                const int k = s.kb + (int)fm;
                const float* base = rows + ((size_t)i * nb + k) * 4;
                float v[4][SGB];
                if (s.interior) {
#pragma unroll
                    for (int m = 0; m < 4; ++m) ld(v[m], base + m * 4, splane);
                } else {
#pragma unroll
                    for (int m = 0; m < 4; ++m) {
                        const int kk = k + m;
                        if (kk >= 0 && kk < nb) {
                            ld(v[m], base + m * 4, splane);
                        } else {
#pragma unroll
                            for (int j = 0; j < SGB; ++j) v[m][j] = 0.0f;
                        }
                    }
                }
#pragma unroll
                for (int p = 0; p < 4; ++p) {
#pragma unroll
                    for (int m = 0; m < 4; ++m) {
                        // jp_back's weight of tap m - jj (bit for bit); 0 off its two taps.
                        const float w =
                            fmaxf(0.0f, fmaf(-s.sl, fabsf(fr[p] - ((float)m - jj[p])), s.len));
#pragma unroll
                        for (int j = 0; j < SGB; ++j) acc[p][j] = fmaf(w, v[m][j], acc[p][j]);
                    }
                }
            }
        }
    }
    const size_t vplane = (size_t)nx * ny * 4;
    float* o = out + (size_t)g * (SGB / 4) * vplane;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        const int ix = bx + tx + (p & 1), iy = by + ty + (p >> 1);
        if (ix < nx && iy < ny) st(o + ((size_t)iy * nx + ix) * 4, vplane, acc[p]);
    }
}
#endif

// [slice][plane] (host order) -> [group][plane][4]; slices past ns are zero.
extern "C" __global__ void jp_interleave(const float* __restrict__ src, float* __restrict__ dst,
                                         int ns, long long plane, int groups) {
    const long long total = plane * groups;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int g = (int)(i / plane);
        const long long p = i - (long long)g * plane;
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int s = g * 4 + j;
            v[j] = s < ns ? src[(size_t)s * plane + p] : 0.0f;
        }
        *reinterpret_cast<float4*>(dst + (size_t)i * 4) = make_float4(v[0], v[1], v[2], v[3]);
    }
}

// [group][plane][4] -> [slice][plane] for the first ns slices.
extern "C" __global__ void jp_deinterleave(const float* __restrict__ src, float* __restrict__ dst,
                                           int ns, long long plane, int groups) {
    const long long total = plane * groups;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int g = (int)(i / plane);
        const long long p = i - (long long)g * plane;
        float v[4];
        const float4 t4 = __ldg(reinterpret_cast<const float4*>(src + (size_t)i * 4));
        v[0] = t4.x;
        v[1] = t4.y;
        v[2] = t4.z;
        v[3] = t4.w;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int s = g * 4 + j;
            if (s < ns) dst[(size_t)s * plane + p] = v[j];
        }
    }
}

// Transposed copy of an interleaved volume: dst[g][ix][iy] = src[g][iy][ix],
// through a 32x32 shared-memory tile (both sides coalesced).
#define TT 32
extern "C" __global__ void jp_transpose(const float* __restrict__ src, float* __restrict__ dst,
                                        int nx, int ny) {
    __shared__ float4 tile[TT][TT + 1];
    const int g = blockIdx.z;
    const size_t plane = (size_t)nx * ny * 4;
    const float* s = src + g * plane;
    float* d = dst + g * plane;
    const int x0 = blockIdx.x * TT, y0 = blockIdx.y * TT;
    {
        const int v = 0;
        __syncthreads();
        for (int r = threadIdx.y; r < TT; r += blockDim.y) {
            const int iy = y0 + r, ix = x0 + threadIdx.x;
            if (ix < nx && iy < ny)
                tile[r][threadIdx.x] =
                    __ldg(reinterpret_cast<const float4*>(s + ((size_t)iy * nx + ix) * 4) + v);
        }
        __syncthreads();
        for (int c = threadIdx.y; c < TT; c += blockDim.y) {
            const int ix = x0 + c, iy = y0 + threadIdx.x;
            if (ix < nx && iy < ny)
                reinterpret_cast<float4*>(d + ((size_t)ix * ny + iy) * 4)[v] =
                    tile[threadIdx.x][c];
        }
    }
}

// The voxel pair's packing straight from the interleaved sinograms
// (`[quad][angle][bin][4]`) into the entries of FBP's line-sweep kernel with
// 2 slices per lane (backproject_sweep.cu, SW_S = 2): entry (group g, angle
// p, padded row k, lane) = (a0, a1, d0, d1) for the slices 2 slot and
// 2 slot + 1 (slot = 32 g + lane) at bin b = k + blo, with d = v[b + 1] - v[b]
// and a = v[b] + d / 2 (v = 0 outside the detector and for slices >=
// nslices), exactly pack_sweep's arithmetic. The two slices of a slot are
// the halves (slot & 1) of one quad's 16-byte value. Grid (ceil(nbp / 8),
// na, slots / 32), block (32, 8).
extern "C" __global__ void jp_pack_sweep2(const float* __restrict__ sino, float* __restrict__ ent,
                                          int na, int nb, int nbp, int blo, int nslices) {
    const int k = blockIdx.x * 8 + threadIdx.y;
    const int p = blockIdx.y;
    const int slot = blockIdx.z * 32 + threadIdx.x;
    if (k >= nbp) return;
    const int b = k + blo;
    float v0[2] = {0.0f, 0.0f}, v1[2] = {0.0f, 0.0f};
    if (2 * slot < nslices) {
        const float* q = sino + (((size_t)(slot >> 1) * na + p) * nb) * 4 + (slot & 1) * 2;
        if (b >= 0 && b < nb) {
            const float2 t = __ldg(reinterpret_cast<const float2*>(q + (size_t)b * 4));
            v0[0] = t.x;
            v0[1] = t.y;
        }
        if (b + 1 >= 0 && b + 1 < nb) {
            const float2 t = __ldg(reinterpret_cast<const float2*>(q + (size_t)(b + 1) * 4));
            v1[0] = t.x;
            v1[1] = t.y;
        }
        // Slices past the stack's end are zero (the second of an odd count).
        if (2 * slot + 1 >= nslices) {
            v0[1] = 0.0f;
            v1[1] = 0.0f;
        }
    }
    float a[2], d[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
        d[s] = v1[s] - v0[s];
        a[s] = fmaf(0.5f, d[s], v0[s]);
    }
    float* dst = ent + ((((size_t)(slot >> 5) * na + p) * nbp + k) * 32 + (slot & 31)) * 4;
    *reinterpret_cast<float4*>(dst) = make_float4(a[0], a[1], d[0], d[1]);
}

// Column sums B 1 of the voxel pair's back projection (tomors-core's
// VoxelDrivenProjector on a detector row of ones): scale * sum over the na
// projections of the linear interpolation of ones at u_p(ix, iy) = c0[p] +
// ix cx[p] + iy cy[p] (bin k centred at k, zero outside the detector),
// accumulated in f64. One thread per pixel: grid (ceil(nx / 128), ny),
// block 128.
extern "C" __global__ void jp_voxel_ones(float* __restrict__ out, const double* __restrict__ dconst,
                                         int na, int nb, int nx, int ny, double scale) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    const int iy = blockIdx.y;
    if (ix >= nx || iy >= ny) return;
    double acc = 0.0;
    for (int p = 0; p < na; ++p) {
        const double u = __ldg(dconst + p) + (double)ix * __ldg(dconst + na + p) +
                         (double)iy * __ldg(dconst + 2 * na + p);
        const double fl = floor(u);
        const double f = u - fl;
        const double i = fl;
        if (i >= 0.0 && i < (double)nb) acc += 1.0 - f;
        if (i + 1.0 >= 0.0 && i + 1.0 < (double)nb) acc += f;
    }
    out[(size_t)iy * nx + ix] = (float)(acc * scale);
}
