// Joseph's parallel-beam forward and back projections as line sweeps
// (lanes = slices): the same operator as joseph.cu's jp_forward / jp_back
// (see there). See src/iterative/parallel/sweep.rs.
//
// Forward: the lanes of a warp are NSUB = 32 / FQ sub-groups of FQ lanes;
// the FQ lanes of a sub-group hold FQ quads (4 FQ slices) of the SAME ray,
// so a pixel load of a sub-group is one coalesced 16 FQ-byte read; each lane
// walks R rays (bins k0 + sub + NSUB j) of one projection step by step.
// FQ = 8 keeps a group of the volume (32 slices, 32 MiB at 512^2) within
// L2 while every projection of a launch sweeps it; FQ = 32 (one sub-group,
// 128 slices) makes every branch warp-uniform but its groups spill L2.
//
// Baked parameters (#defines prepended by the host):
//   R     rays per lane
//   WPB   warps per block (consecutive bin tiles of one projection)
//   FQ    quads per forward group (8 or 32)
//   REUSE 1: keep the pixel pair between a lane's consecutive rays (fewer
//         loads, more moves and branches); 0: load both pixels of every
//         ray and step (straight-line code)
//
// Layouts (jp_to_sweep): group g of qg quads of an interleaved stack as
// [g][row][col][lane][4] (and, transposed, [g][col][row][lane][4]); lane l
// holds the 4 slices of quad qg g + l (zeros past the stack).

#ifndef R
#define R 8
#endif
#ifndef WPB
#define WPB 4
#endif
#ifndef FQ
#define FQ 8
#endif
#ifndef REUSE
#define REUSE 0
#endif
#define NSUB (32 / FQ)

// Per-projection constants (as joseph.cu's FpAngle, same layout).
struct FpAngle {
    double q0;
    double qk;
    double qs;
    long long dfix;  // qs in 32.32 fixed point
    float len;       // step length h/m
    int transposed;  // 1: column stepping (read svT)
};

// src: the interleaved stack [quad][row][col][4] of `quads` quads; writes
// its groups of qg quads (ceil(quads / qg) of them) as [g][row][col][qg][4]
// into sv and, unless svT == nullptr, as [g][col][row][qg][4] into svT.
// One thread per float4 (group, pixel, lane): n = groups * rows * cols * qg.
extern "C" __global__ void jp_to_sweep(const float* __restrict__ src, float* __restrict__ sv,
                                       float* __restrict__ svT, int nx, int ny, int quads,
                                       int qg, long long n) {
    const long long plane = (long long)nx * ny;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long gp = i / qg;
        const int lane = (int)(i - gp * qg);
        const long long g = gp / plane;
        const long long p = gp - g * plane;
        const long long row = p / nx, col = p - row * nx;
        const long long q = g * qg + lane;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (q < quads) v = __ldg(reinterpret_cast<const float4*>(src + (q * plane + p) * 4));
        // sv: ((g ny + row) nx + col) qg + lane = i.
        reinterpret_cast<float4*>(sv)[i] = v;
        if (svT) reinterpret_cast<float4*>(svT)[((g * nx + col) * ny + row) * qg + lane] = v;
    }
}

// The float4 of the lane at pixel i of a line of FQ-quad pixels (zero
// outside [0, width)).
__device__ __forceinline__ float4 ldpix(const float* line, int i, int width) {
    if (i < 0 || i >= width) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    return __ldg(reinterpret_cast<const float4*>(line + (long long)i * (FQ * 4)));
}

// Forward projection of the projections `angs` (na of them, block order)
// into the interleaved sinogram stack out [quad][a][bin][4] of `quads`
// quads; only the projections whose `transposed` equals `want` (-1: all),
// so that a launch reads one of the two copies. Grid (na, ceil(nb / (R
// NSUB WPB)), groups of FQ quads), block 32 WPB.
extern "C" __global__ void __launch_bounds__(32 * WPB)
    jp_forward_sweep(const float* __restrict__ sv, const float* __restrict__ svT,
                     float* __restrict__ out, const FpAngle* __restrict__ angs, int nx, int ny,
                     int na, int nb, int quads, int want) {
    const int lane = threadIdx.x & 31;
    const int q = lane % FQ, sub = lane / FQ;
    const int k0 = (blockIdx.y * WPB + (threadIdx.x >> 5)) * (R * NSUB);
    if (k0 >= nb) return;
    const int a = blockIdx.x;
    const FpAngle p = angs[a];
    if (want >= 0 && p.transposed != want) return;
    const long long g = blockIdx.z;
    const long long gsz = (long long)nx * ny * (FQ * 4);
    const float* img;
    int steps, width;
    if (p.transposed) {
        img = svT + g * gsz;
        steps = nx;
        width = ny;
    } else {
        img = sv + g * gsz;
        steps = ny;
        width = nx;
    }
    // Per ray: steps whose position lies in (-1, width), loose by one on
    // each side (the pixel bounds below are exact); the warp steps over the
    // union of its rays (as jp_forward).
    double qa[R];
    int lo = steps, hi = 0;
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int k = min(k0 + sub + NSUB * j, nb - 1);
        const double qq = p.q0 + (double)k * p.qk;
        int l = 0, h = steps;
        if (p.qs == 0.0) {
            if (!(qq > -1.0 && qq < (double)width)) h = 0;
        } else {
            const double t1 = (-1.0 - qq) / p.qs, t2 = ((double)width - qq) / p.qs;
            const double tmin = fmin(t1, t2), tmax = fmax(t1, t2);
            l = (int)fmax(0.0, fmin((double)steps, floor(tmin) - 1.0));
            h = (int)fmax((double)l, fmin((double)steps, ceil(tmax) + 1.0));
        }
        if (h > l) {
            lo = min(lo, l);
            hi = max(hi, h);
        }
        qa[j] = qq;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    long long pos[R];
#pragma unroll
    for (int j = 0; j < R; ++j) pos[j] = __double2ll_rn((qa[j] + (double)lo * p.qs) * 4294967296.0);
    float acc[R][4];
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
        for (int s = 0; s < 4; ++s) acc[j][s] = 0.0f;
    const long long lstride = (long long)width * (FQ * 4);
    const float* line = img + (long long)lo * lstride + q * 4;
    const long long dfix = p.dfix;
    for (int t = lo; t < hi; ++t, line += lstride) {
#if REUSE
        // The pair (c, c + 1) held in (va, vb); none yet on this line.
        int c = -0x40000000;
#endif
        float4 va = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vb = va;
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const int i0 = (int)(pos[j] >> 32);
            // Fraction: the low 32 bits, top 23 of them as a float mantissa
            // (exact), as jp_forward.
            const float w1 = __uint_as_float(0x3f800000u | ((unsigned)pos[j] >> 9)) - 1.0f;
            const float w0 = 1.0f - w1;
            pos[j] += dfix;
#if REUSE
            if (i0 == c + 1) {
                va = vb;
                vb = ldpix(line, i0 + 1, width);
            } else if (i0 == c - 1) {
                vb = va;
                va = ldpix(line, i0, width);
            } else if (i0 != c) {
                va = ldpix(line, i0, width);
                vb = ldpix(line, i0 + 1, width);
            }
            c = i0;
#else
            va = ldpix(line, i0, width);
            vb = ldpix(line, i0 + 1, width);
#endif
            acc[j][0] = fmaf(w0, va.x, fmaf(w1, vb.x, acc[j][0]));
            acc[j][1] = fmaf(w0, va.y, fmaf(w1, vb.y, acc[j][1]));
            acc[j][2] = fmaf(w0, va.z, fmaf(w1, vb.z, acc[j][2]));
            acc[j][3] = fmaf(w0, va.w, fmaf(w1, vb.w, acc[j][3]));
        }
    }
    const long long qd = g * FQ + q;
    if (qd >= quads) return;
    const float len = p.len;
    float* o = out + (qd * na + a) * (long long)nb * 4;
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int k = k0 + sub + NSUB * j;
        if (k < nb)
            *reinterpret_cast<float4*>(o + (long long)k * 4) =
                make_float4(acc[j][0] * len, acc[j][1] * len, acc[j][2] * len, acc[j][3] * len);
    }
}

// ---------------------------------------------------------------------------
// The back projection (exact transpose of jp_forward, as joseph.cu's
// jp_back with KM == 0: every hat spans at most one bin) as a line sweep:
// lanes = 32 quads of the same pixels, each warp a tile of TX x TY pixels
// (accumulators in registers over all projections), the sinograms re-laid
// as [g][angle][bin][lane][4] (jp_to_sweep, qg 32). Per projection a warp walks
// each line of its tile along x; with REUSE a bin pair is loaded only when
// the pixel's left bin moves. Weights bit for bit as jp_back's.
//
//   TX, TY  pixel tile of a warp; BWX, BWY  warps of a block along x and y
//   (the warps of a block read overlapping bins: fewer bytes from L2)

#ifndef TX
#define TX 8
#endif
#ifndef TY
#define TY 2
#endif
#ifndef BWX
#define BWX 4
#endif
#ifndef BWY
#define BWY 1
#endif
// The back projection's bin-pair reuse (default on).
#ifndef BREUSE
#define BREUSE 1
#endif

// Per-projection constants of the back projector (as joseph.cu's BpAngle):
// u(ix, iy) = c0 + ix cx + iy cy (bins).
struct BpAngle {
    double c0;
    double cx;
    double cy;
    float sigma;
    float len;
};

// The float4 of the lane at bin k of a projection row (zero outside the
// detector).
__device__ __forceinline__ float4 ldbin(const float* row, int k, int nb) {
    if (k < 0 || k >= nb) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    return __ldg(reinterpret_cast<const float4*>(row + (long long)k * 128));
}

// ss: the re-laid sinograms of the na projections `angs` (block order);
// out: the interleaved volume stack [quad][y][x][4] of `quads` quads
// (overwritten). Grid (ceil(nx / (TX BWX)), ceil(ny / (TY BWY)), groups),
// block 32 BWX BWY.
extern "C" __global__ void __launch_bounds__(32 * BWX * BWY)
    jp_back_sweep(const float* __restrict__ ss, float* __restrict__ out,
                  const BpAngle* __restrict__ angs, int nx, int ny, int na, int nb, int quads) {
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int x0 = (blockIdx.x * BWX + w % BWX) * TX;
    const int y0 = (blockIdx.y * BWY + w / BWX) * TY;
    if (x0 >= nx || y0 >= ny) return;
    const long long g = blockIdx.z;
    const float* gbase = ss + g * (long long)na * nb * 128 + lane * 4;
    float acc[TY][TX][4];
#pragma unroll
    for (int ty = 0; ty < TY; ++ty)
#pragma unroll
        for (int tx = 0; tx < TX; ++tx)
#pragma unroll
            for (int s = 0; s < 4; ++s) acc[ty][tx][s] = 0.0f;
    for (int a = 0; a < na; ++a) {
        const BpAngle p = angs[a];
        // The tile corner's coordinate in f64, offsets in f32 (as jp_back).
        const double u = p.c0 + (double)x0 * p.cx + (double)y0 * p.cy;
        const double f = floor(u);
        const int kb = (int)f;
        const float fb = (float)(u - f);
        const float cx = (float)p.cx, cy = (float)p.cy;
        const float sl = p.sigma * p.len, len = p.len;
        const float* row = gbase + (long long)a * nb * 128;
#pragma unroll
        for (int ty = 0; ty < TY; ++ty) {
            int c = -0x40000000;
            float4 va = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vb = va;
#pragma unroll
            for (int tx = 0; tx < TX; ++tx) {
                const float uu = fmaf((float)ty, cy, fmaf((float)tx, cx, fb));
                const float fl = floorf(uu);
                const float fr = uu - fl;
                const int k = kb + (int)fl;
                const float w0 = fmaxf(0.0f, fmaf(-sl, fabsf(fr), len));
                const float w1 = fmaxf(0.0f, fmaf(-sl, fabsf(fr - 1.0f), len));
#if BREUSE
                if (k == c + 1) {
                    va = vb;
                    vb = ldbin(row, k + 1, nb);
                } else if (k == c - 1) {
                    vb = va;
                    va = ldbin(row, k, nb);
                } else if (k != c) {
                    va = ldbin(row, k, nb);
                    vb = ldbin(row, k + 1, nb);
                }
                c = k;
#else
                va = ldbin(row, k, nb);
                vb = ldbin(row, k + 1, nb);
#endif
                acc[ty][tx][0] = fmaf(w0, va.x, acc[ty][tx][0]);
                acc[ty][tx][1] = fmaf(w0, va.y, acc[ty][tx][1]);
                acc[ty][tx][2] = fmaf(w0, va.z, acc[ty][tx][2]);
                acc[ty][tx][3] = fmaf(w0, va.w, acc[ty][tx][3]);
                acc[ty][tx][0] = fmaf(w1, vb.x, acc[ty][tx][0]);
                acc[ty][tx][1] = fmaf(w1, vb.y, acc[ty][tx][1]);
                acc[ty][tx][2] = fmaf(w1, vb.z, acc[ty][tx][2]);
                acc[ty][tx][3] = fmaf(w1, vb.w, acc[ty][tx][3]);
            }
        }
    }
    const long long qd = g * 32 + lane;
    if (qd >= quads) return;
    float* o = out + qd * (long long)nx * ny * 4;
#pragma unroll
    for (int ty = 0; ty < TY; ++ty) {
        const int y = y0 + ty;
#pragma unroll
        for (int tx = 0; tx < TX; ++tx) {
            const int x = x0 + tx;
            if (x < nx && y < ny)
                *reinterpret_cast<float4*>(o + ((long long)y * nx + x) * 4) =
                    make_float4(acc[ty][tx][0], acc[ty][tx][1], acc[ty][tx][2], acc[ty][tx][3]);
        }
    }
}
