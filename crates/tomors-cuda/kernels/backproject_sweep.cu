// Line-sweep (register-window) parallel-beam back projection: exact f32
// linear interpolation without a shared-memory read per update.
//
// The 32 lanes of a warp are 32 slice slots (SW_S slices each) of the SAME
// pixels, so the detector coordinate, its bin and its weight are the same
// on every lane and every branch is warp-uniform. A warp keeps the
// accumulators of its SW_TX x SW_TY pixel tile in registers over all
// projections. Per projection it walks the tile line by line (along x, or
// with SW_AXIS along the axis whose per-pixel coordinate step is smaller):
// the coordinate of each pixel is one FMA from the line's start (never
// accumulated), its bin the rounded coordinate, and the lane loads the
// (value, difference) entry of a bin only when the bin changes from the
// previous pixel of the line: on average |step| + 1/line loads per update
// instead of one.
//
// Baked parameters (#defines prepended by the host):
//   NX, NY     slice size in pixels
//   NPROJ      number of projections
//   NB         detector bins
//   SW_S       slices per lane: 1, 2 or 4
//   SW_TX, SW_TY  pixel tile of a warp
//   SW_WX, SW_WY  warps of a block along x and y
//   SW_AXIS    1: sweep along y when |cy| < |cx|; 0: always along x
//   SW_MINB    minimum resident blocks per multiprocessor
//   SW_SMEM    0: entries read through L1; n >= 2: staged in shared memory
//              (a ring of n buffers of SW_CWB rows, see below)
//   SW_SWZ     0, or the width in blocks of the strips the grid is walked in
//   BLO, NBP   global bin of padded row 0 and the number of padded rows:
//              every bin a pixel of the (block-rounded) grid touches lies
//              inside, so no bounds test is needed
//
// Entry layout (written by pack_sweep): ent[g][p][k][lane] for padded row k
// (global bin BLO + k) and slot = slice / SW_S = 32 g + lane, each entry
// 2 * SW_S floats:
// the SW_S values a = v + d / 2 and the SW_S differences d = v[b + 1] - v[b]
// (v = 0 outside the detector). With the coordinate shifted by -1/2 the
// float rounding trick (r = h + 1.5 * 2^23) gives the bin i and a weight f in
// [-1/2, 1/2], and a + f d is the linear interpolation, as in bp_alu with
// FROUND and advanced caching. The accumulation is acc = (acc + a) + f d
// (one FADD, one FFMA straight into the accumulator, so no temporaries
// wait for a late add; the same exact f32 arithmetic, rounded differently
// from bp_alu's acc + (a + f d)).

#define SW_MAGIC 12582912.0f
#define SW_MAGIC_BITS 0x4B400000
#define SW_FULL 0xffffffffu
#ifndef SW_SYNC
#define SW_SYNC 1
#endif
#ifndef SW_SWZ
#define SW_SWZ 0
#endif

// Loads the SW_S values and differences of one entry.
__device__ __forceinline__ void sw_load(const float* __restrict__ p, float (&a)[SW_S], float (&d)[SW_S]) {
#if SW_S == 1
    const float2 q = __ldg(reinterpret_cast<const float2*>(p));
    a[0] = q.x;
    d[0] = q.y;
#elif SW_S == 2
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    a[0] = q.x;
    a[1] = q.y;
    d[0] = q.z;
    d[1] = q.w;
#elif SW_S == 4
    const float4 q0 = __ldg(reinterpret_cast<const float4*>(p));
    const float4 q1 = __ldg(reinterpret_cast<const float4*>(p) + 1);
    a[0] = q0.x;
    a[1] = q0.y;
    a[2] = q0.z;
    a[3] = q0.w;
    d[0] = q1.x;
    d[1] = q1.y;
    d[2] = q1.z;
    d[3] = q1.w;
#else
#error "SW_S must be 1, 2 or 4"
#endif
}

// Bytes per padded bin row of a group: 32 lanes' entries.
#define SW_ROWB (32 * 8 * SW_S)

// The entry of rounded coordinate r (bits MAGIC_BITS + i: bin hm + i) from
// bp (the lane's entry of row hm - BLO, less MAGIC_BITS rows): one IMAD.WIDE.
__device__ __forceinline__ const float* entry(const char* bp, float r) {
    return reinterpret_cast<const float*>(bp + (long long)__float_as_int(r) * SW_ROWB);
}

#ifndef SW_SMEM
#define SW_SMEM 0
#endif
#if SW_SMEM
// Shared-memory staging (SW_SMEM = stages): per projection the block copies
// the SW_CWB padded rows its pixels touch (from its region's lowest bin - 1
// on; SW_CWB = the largest span of a region over the projections + 5, from
// the host) into one of SW_SMEM buffers (dynamic shared memory) with
// cp.async, SW_SMEM - 1 projections ahead of the interpolation.
#define SW_NT (32 * SW_WX * SW_WY)
#define SW_STAGE (SW_CWB * SW_ROWB)
// Copies the first `rows` rows of a stage (rows <= SW_CWB).
// A fixed number of predicated copies per thread (a run-time loop cost ≈ 60
// instructions per projection in SASS, 10 % of the kernel's issue).
#define SW_COPIES ((SW_STAGE + SW_NT * 16 - 1) / (SW_NT * 16))
__device__ __forceinline__ void sw_stage(unsigned int sdst, const char* gsrc, int rows, int t) {
    // Both addresses formed once; the copies add immediate offsets.
    const int lim = rows * SW_ROWB - t * 16;
    const unsigned int sd = sdst + t * 16;
    const char* g = gsrc + t * 16;
#define SW_CP(c)                                                                                               \
    if (SW_COPIES > (c) && (c) * SW_NT * 16 < lim)                                                             \
        asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%2], 16;" ::"r"(sd), "l"(g), "n"((c) * SW_NT * 16) \
                     : "memory");
    SW_CP(0)
    SW_CP(1)
    SW_CP(2)
    SW_CP(3)
    SW_CP(4)
    SW_CP(5)
    SW_CP(6)
    SW_CP(7)
#undef SW_CP
#if SW_COPIES > 8
    for (int o = 8 * SW_NT * 16; o < lim; o += SW_NT * 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + o), "l"(g + o) : "memory");
#endif
    asm volatile("cp.async.commit_group;" ::: "memory");
}
// The stage of a block region whose origin has coordinate ub: its first
// padded row k (the region's lowest bin - 1) and the rows it needs (up to
// the highest bin + 2, one more for f32 rounding; at most SW_CWB).
__device__ __forceinline__ void sw_region(double ub, double cx, double cy, int& k, int& rows) {
    const double ex = (SW_WX * SW_TX - 1) * cx, ey = (SW_WY * SW_TY - 1) * cy;
    const double lo = floor(ub + fmin(0.0, ex) + fmin(0.0, ey)) - 1.0;
    const double hi = floor(ub + fmax(0.0, ex) + fmax(0.0, ey));
    k = (int)lo - BLO;
    rows = min((int)(hi - lo) + 4, SW_CWB);
}

// The entry of rounded coordinate r at byte sb + bits(r) * SW_ROWB of the
// staging buffers (32-bit arithmetic that wraps: sb holds the lane's entry of
// the warp's row hm less MAGIC_BITS rows).
__device__ __forceinline__ void sw_load_s(const char* sbuf, unsigned int sb, float r, float (&a)[SW_S],
                                          float (&d)[SW_S]) {
    const float* p = reinterpret_cast<const float*>(sbuf + (sb + (unsigned int)__float_as_int(r) * (unsigned int)SW_ROWB));
#if SW_S == 1
    const float2 q = *reinterpret_cast<const float2*>(p);
    a[0] = q.x;
    d[0] = q.y;
#elif SW_S == 2
    const float4 q = *reinterpret_cast<const float4*>(p);
    a[0] = q.x;
    a[1] = q.y;
    d[0] = q.z;
    d[1] = q.w;
#else
    const float4 q0 = reinterpret_cast<const float4*>(p)[0];
    const float4 q1 = reinterpret_cast<const float4*>(p)[1];
    a[0] = q0.x;
    a[1] = q0.y;
    a[2] = q0.z;
    a[3] = q0.w;
    d[0] = q1.x;
    d[1] = q1.y;
    d[2] = q1.z;
    d[3] = q1.w;
#endif
}
#define SW_FETCH(r) sw_load_s(sw_sbuf, sb, r, a, d)
#else
#define SW_FETCH(r) sw_load(entry(bp, r), a, d)
#endif

// Value k of slab row r (see filter.cu's source_value).
__device__ __forceinline__ float sw_source(const float* __restrict__ src, long long row_stride, int pair,
                                           long long r, int k) {
    if (pair) return src[(r >> 1) * row_stride + 2 * k + (r & 1)];
    return src[r * row_stride + k];
}

// Re-lays the filtered slab (rows r = slice * na + angle, NB values each) as
// the entries above. Grid (ceil(NBP / 8), na, row / 32), block (32, 8): the 32
// lanes of a warp write the 32 consecutive entries of one padded row (one
// coalesced store), 8 rows per block; row = slots of the slab (32 per group).
// Slices >= nslices are zeros.
extern "C" __global__ void pack_sweep(const float* __restrict__ src, long long row_stride, int pair,
                                      float* __restrict__ ent, int row, int na, int nslices) {
    const int k = blockIdx.x * 8 + threadIdx.y;
    const int p = blockIdx.y;
    const int slot = blockIdx.z * 32 + threadIdx.x;
    if (k >= NBP) return;
    const int b = k + BLO;
    float a[SW_S], d[SW_S];
#pragma unroll
    for (int s = 0; s < SW_S; ++s) {
        const int sl = slot * SW_S + s;
        float v0 = 0.0f, v1 = 0.0f;
        if (sl < nslices) {
            const long long r = (long long)sl * na + p;
            if (b >= 0 && b < NB) v0 = sw_source(src, row_stride, pair, r, b);
            if (b + 1 >= 0 && b + 1 < NB) v1 = sw_source(src, row_stride, pair, r, b + 1);
        }
        d[s] = v1 - v0;
        a[s] = fmaf(0.5f, d[s], v0);
    }
    float* __restrict__ dst = ent + ((((long long)(slot >> 5) * na + p) * NBP + k) * 32 + (slot & 31)) * (2 * SW_S);
#if SW_S == 1
    *reinterpret_cast<float2*>(dst) = make_float2(a[0], d[0]);
#elif SW_S == 2
    *reinterpret_cast<float4*>(dst) = make_float4(a[0], a[1], d[0], d[1]);
#else
    reinterpret_cast<float4*>(dst)[0] = make_float4(a[0], a[1], a[2], a[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(d[0], d[1], d[2], d[3]);
#endif
}

// Grid (ceil(NX / (SW_TX SW_WX)), ceil(NY / (SW_TY SW_WY)), groups), block
// 32 SW_WX SW_WY. dconst = [c0 | cx | cy] in f64: the bin coordinate (bin k
// centred at k) of pixel (ix, iy) is c0 + ix cx + iy cy.
extern "C" __global__ void __launch_bounds__(32 * SW_WX * SW_WY, SW_MINB)
    bp_sweep(const float* __restrict__ ent, float* __restrict__ out, int nslices, float scale,
             const double* __restrict__ dconst) {
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
#if SW_SWZ
    // Blocks run in order of their linear index; re-map it so that the
    // blocks resident together cover strips SW_SWZ regions wide (a compact
    // patch of the slice: fewer rows per projection in L2 at once).
    const int id = blockIdx.x + gridDim.x * blockIdx.y;
    const int per = SW_SWZ * gridDim.y;
    const int strip = id / per, rr = id - strip * per;
    const int gs = min(SW_SWZ, (int)gridDim.x - strip * SW_SWZ);
    const int bxi = strip * SW_SWZ + rr % gs, byi = rr / gs;
#else
    const int bxi = blockIdx.x, byi = blockIdx.y;
#endif
    const int x0 = (bxi * SW_WX + (w % SW_WX)) * SW_TX;
    const int y0 = (byi * SW_WY + (w / SW_WX)) * SW_TY;
    const int slot = blockIdx.z * 32 + lane;
    // The lane's entry of padded row 0 of projection 0 in its group.
    const char* __restrict__ lanep = reinterpret_cast<const char*>(ent) +
                                     (long long)blockIdx.z * NPROJ * NBP * SW_ROWB + lane * (8 * SW_S);
    float acc[SW_TY][SW_TX][SW_S];
#pragma unroll
    for (int ty = 0; ty < SW_TY; ++ty)
#pragma unroll
        for (int tx = 0; tx < SW_TX; ++tx)
#pragma unroll
            for (int s = 0; s < SW_S; ++s) acc[ty][tx][s] = 0.0f;
#if SW_SMEM
    extern __shared__ __align__(16) char sw_sbuf[];
    // The block's region and the first padded row of its stage for
    // projection q (its lowest bin - 1).
    const int xb = bxi * (SW_WX * SW_TX), yb = byi * (SW_WY * SW_TY);
    const char* __restrict__ grp = reinterpret_cast<const char*>(ent) + (long long)blockIdx.z * NPROJ * NBP * SW_ROWB;
    const unsigned int sbase = (unsigned int)__cvta_generic_to_shared(sw_sbuf);
    // Prologue: projections 0 .. SW_SMEM - 2 (an empty group past the end,
    // so that every iteration waits for the same count).
    for (int q = 0; q < SW_SMEM - 1; ++q) {
        if (q < NPROJ) {
            const double c0 = __ldg(dconst + q), cx = __ldg(dconst + NPROJ + q), cy = __ldg(dconst + 2 * NPROJ + q);
            const double ub = c0 + (double)xb * cx + (double)yb * cy;
            int k, rows;
            sw_region(ub, cx, cy, k, rows);
            sw_stage(sbase + q * SW_STAGE, grp + ((long long)q * NBP + k) * SW_ROWB, rows, threadIdx.x);
        } else {
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
    }
#endif

    for (int pb = 0; pb < NPROJ; pb += 32) {
        // Lane j prepares projection pb + j in f64: the tile origin's
        // coordinate relative to hm = floor(min over the tile) - 1, shifted by
        // -1/2, and the offset of padded row hm - BLO.
        const int pj = pb + lane;
        float hj = 1.0f, cxj = 0.0f, cyj = 0.0f;
        int kj = 0;
        if (pj < NPROJ) {
            const double c0 = __ldg(dconst + pj), cx = __ldg(dconst + NPROJ + pj),
                         cy = __ldg(dconst + 2 * NPROJ + pj);
            const double u = c0 + (double)x0 * cx + (double)y0 * cy;
            const double umin = u + fmin(0.0, (SW_TX - 1) * cx) + fmin(0.0, (SW_TY - 1) * cy);
            const double hm = floor(umin) - 1.0;
            hj = (float)(u - hm - 0.5);
            cxj = (float)cx;
            cyj = (float)cy;
            // Row hm - BLO less MAGIC_BITS rows: the entry of a rounded
            // coordinate r is then bits(r) rows from there (one wide
            // multiply-add per entry).
            kj = (int)hm - BLO - SW_MAGIC_BITS;
        }
#if SW_SMEM
        // The warp's row hm relative to the block's stage of projection pj,
        // and the block's first stage row for projection pj + SW_SMEM - 1.
        int kwj = 0, knj = 0, nrj = 0;
        if (pj < NPROJ) {
            const double c0 = __ldg(dconst + pj), cx = __ldg(dconst + NPROJ + pj),
                         cy = __ldg(dconst + 2 * NPROJ + pj);
            const double ub = c0 + (double)xb * cx + (double)yb * cy;
            const int kb = (int)floor(ub + fmin(0.0, (SW_WX * SW_TX - 1) * cx) + fmin(0.0, (SW_WY * SW_TY - 1) * cy)) - 1 - BLO;
            kwj = kj + SW_MAGIC_BITS - kb;
        }
        if (pj + SW_SMEM - 1 < NPROJ) {
            const int q = pj + SW_SMEM - 1;
            const double c0 = __ldg(dconst + q), cx = __ldg(dconst + NPROJ + q), cy = __ldg(dconst + 2 * NPROJ + q);
            const double ub = c0 + (double)xb * cx + (double)yb * cy;
            sw_region(ub, cx, cy, knj, nrj);
        }
#endif
        const int np = min(32, NPROJ - pb);
        for (int j = 0; j < np; ++j) {
            const float h0 = __shfl_sync(SW_FULL, hj, j);
            const float cx = __shfl_sync(SW_FULL, cxj, j);
            const float cy = __shfl_sync(SW_FULL, cyj, j);
#if SW_SMEM
            const int kw = __shfl_sync(SW_FULL, kwj, j);
            const int kn = __shfl_sync(SW_FULL, knj, j);
            const int nr = __shfl_sync(SW_FULL, nrj, j);
            const int p = pb + j;
            // Stage p is complete (this thread's copies, then everyone's), and
            // every warp is done with p - 1, whose buffer takes p + SW_SMEM - 1.
            asm volatile("cp.async.wait_group %0;" ::"n"(SW_SMEM - 2) : "memory");
            __syncthreads();
            const int pn = p + SW_SMEM - 1;
            if (pn < NPROJ)
                sw_stage(sbase + (pn % SW_SMEM) * SW_STAGE, grp + ((long long)pn * NBP + kn) * SW_ROWB, nr,
                         threadIdx.x);
            else
                asm volatile("cp.async.commit_group;" ::: "memory");
            unsigned int sb =
                (unsigned int)((p % SW_SMEM) * SW_STAGE + lane * (8 * SW_S)) + (unsigned int)(kw - SW_MAGIC_BITS) * SW_ROWB;
            // Opaque, so each entry address is one IMAD from it.
            asm("mov.b32 %0, %0;" : "+r"(sb));
#else
            const int k0 = __shfl_sync(SW_FULL, kj, j);
            const char* bp = lanep + ((long long)(pb + j) * NBP + k0) * SW_ROWB;
            // Opaque to the compiler, so the per-entry address stays one
            // IMAD.WIDE on this register pair (instead of being re-associated
            // with the kernel parameter's base into three instructions).
            asm("mov.b64 %0, %0;" : "+l"(bp));
#endif
#if SW_AXIS
            if (fabsf(cy) < fabsf(cx)) {
                // Columns: the coordinate steps by cy from pixel to pixel.
#pragma unroll
                for (int tx = 0; tx < SW_TX; ++tx) {
                    const float hl = fmaf((float)tx, cx, h0);
                    float rp = 0.0f;
                    float a[SW_S], d[SW_S];
#pragma unroll
                    for (int ty = 0; ty < SW_TY; ++ty) {
                        const float h = fmaf((float)ty, cy, hl);
                        const float r = h + SW_MAGIC;
                        const float f = h - (r - SW_MAGIC);
                        if (ty == 0 || r != rp) SW_FETCH(r);
                        rp = r;
#pragma unroll
                        for (int s = 0; s < SW_S; ++s) acc[ty][tx][s] = fmaf(f, d[s], acc[ty][tx][s] + a[s]);
                    }
                }
            } else
#endif
            {
                // Rows: the coordinate steps by cx from pixel to pixel.
#pragma unroll
                for (int ty = 0; ty < SW_TY; ++ty) {
                    const float hl = fmaf((float)ty, cy, h0);
                    float rp = 0.0f;
                    float a[SW_S], d[SW_S];
#pragma unroll
                    for (int tx = 0; tx < SW_TX; ++tx) {
                        const float h = fmaf((float)tx, cx, hl);
                        const float r = h + SW_MAGIC;
                        const float f = h - (r - SW_MAGIC);
                        if (tx == 0 || r != rp) SW_FETCH(r);
                        rp = r;
#pragma unroll
                        for (int s = 0; s < SW_S; ++s) acc[ty][tx][s] = fmaf(f, d[s], acc[ty][tx][s] + a[s]);
                    }
                }
            }
        }
#if SW_SYNC && !SW_SMEM
        // Keeps the block's warps within 32 projections of each other, so
        // the entries one warp brought into L1 serve the others.
        __syncthreads();
#endif
    }
    const long long plane = (long long)NX * NY;
#pragma unroll
    for (int s = 0; s < SW_S; ++s) {
        const int sl = slot * SW_S + s;
        if (sl < nslices) {
            float* __restrict__ o = out + (long long)sl * plane;
#pragma unroll
            for (int ty = 0; ty < SW_TY; ++ty) {
                const int y = y0 + ty;
#pragma unroll
                for (int tx = 0; tx < SW_TX; ++tx) {
                    const int x = x0 + tx;
                    if (x < NX && y < NY) o[(long long)y * NX + x] = acc[ty][tx][s] * scale;
                }
            }
        }
    }
}
