// Tensor-core parallel-beam back projection, part 2 (appended to
// backproject_tensor_pack.cu, which has the formulation, the fragment
// layout, the baked parameters, the entry layout, the f16 splits and the
// packing kernels): the stage constants, the staging ring (per-thread
// cp.async, or the copy engine with TC_BULK), the weights, the MMAs and the
// kernel bp_tensor.

// The stage constants of projection q for the block whose pixel origin is
// (xc, yc): its first staged bin kb (relative to BLO: the lowest bin of the
// block's pixels less 1) and the float4 (origin coordinate - kb, cx, cy, the
// lowest corner offset of a 4x4 block).
// Projections past NPROJ take NPROJ - 1's geometry (their values are zero).
__device__ __forceinline__ void tc_angle_v(double c0, double cx, double cy, int xc, int yc, int& kb,
                                           float4& c) {
    const double u = c0 + (double)xc * cx + (double)yc * cy;
    const double umin = u + fmin(0.0, (TC_PXX - 1) * cx) + fmin(0.0, (TC_PXY - 1) * cy);
    const double kbd = floor(umin) - 1.0;
    kb = (int)kbd - BLO;
    c = make_float4((float)(u - kbd), (float)cx, (float)cy, (float)(fmin(0.0, 3.0 * cx) + fmin(0.0, 3.0 * cy)));
}

__device__ __forceinline__ void tc_angle(const double* __restrict__ dconst, int q, int xc, int yc, int& kb,
                                         float4& c) {
    const int qq = q < NPROJ ? q : NPROJ - 1;
    tc_angle_v(__ldg(dconst + qq), __ldg(dconst + NPROJ + qq), __ldg(dconst + 2 * NPROJ + qq), xc, yc, kb, c);
}

// Issues the copies of stage j (projections TC_ANG j ...) into ring buffer
// j % TC_ST: TC_SB bin rows of each projection (TC_GROWB bytes, padded to
// TC_SROWB in shared memory), and warp 0 stores the constants.
__device__ __forceinline__ void tc_issue(const double* __restrict__ dconst, const char* __restrict__ gsrc,
                                         unsigned int sbase, unsigned char* sbuf, int j, int xc, int yc,
                                         int tid) {
    const int lane = tid & 31;
    int kbj = 0;
    float4 cj;
    if (lane < TC_ANG) {
        tc_angle(dconst, j * TC_ANG + lane, xc, yc, kbj, cj);
    }
    const unsigned int boff = (unsigned int)((j % TC_ST) * TC_STAGEB);
    if (tid < TC_ANG) {
        *reinterpret_cast<float4*>(sbuf + boff + TC_ANG * TC_ANGB + tid * 16) = cj;
    }
    const int ck = tid % TC_CR;
#pragma unroll
    for (int i = 0; i < TC_COPIES; ++i) {
        const int rs = i * TC_RPI + tid / TC_CR;
        const int rc = rs < TC_ROWS ? rs : TC_ROWS - 1;
        const int a = rc / TC_SB;
        const int r = rc - a * TC_SB;
        const int k = __shfl_sync(TC_FULL, kbj, a) + r;
        if (rs < TC_ROWS) {
            const char* g = gsrc + ((long long)(j * TC_ANG + a) * NBP + k) * TC_GPITCH + ck * 16;
            const unsigned int d = sbase + boff + (unsigned int)(a * TC_ANGB + r * TC_SROWB + ck * 16);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(g) : "memory");
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

#if TC_BULK
// TC_BULK: stage j with the copy engine. Thread a < TC_ANG (warp 0)
// computes projection TC_ANG j + a's constants for this block, stores them,
// announces its bytes on the stage's mbarrier (arrival count TC_ANG) and
// issues one bulk copy of the projection's TC_SB padded rows (contiguous in
// device memory, see TC_GPITCH): no per-thread copies, no shuffles, and the
// f64 constants once per block and projection instead of once per warp.
// With pre (TC_BULK 2, in the main loop) the f64 coefficients come from
// the prefetch slot j & 1 in shared memory (tc_prefetch, an iteration
// earlier) instead of device memory: warp 0 does not wait for them.
__device__ __forceinline__ void tc_issue_bulk(const double* __restrict__ dconst, const char* __restrict__ gsrc,
                                              unsigned int sbase, unsigned char* sbuf, unsigned int bars, int j,
                                              int xc, int yc, int tid, const double* cpre, bool pre) {
    if (tid < TC_ANG) {
        int kbj;
        float4 cj;
        if (pre) {
            asm volatile("cp.async.wait_all;" ::: "memory");
            const double* cp = cpre + (j & 1) * 3 * TC_ANG;
            tc_angle_v(cp[tid], cp[TC_ANG + tid], cp[2 * TC_ANG + tid], xc, yc, kbj, cj);
        } else {
            tc_angle(dconst, j * TC_ANG + tid, xc, yc, kbj, cj);
        }
        const unsigned int boff = (unsigned int)((j % TC_ST) * TC_STAGEB);
        *reinterpret_cast<float4*>(sbuf + boff + TC_ANG * TC_ANGB + tid * 16) = cj;
        const unsigned int bar = bars + (unsigned int)((j % TC_ST) * 8);
        const char* g = gsrc + ((long long)(j * TC_ANG + tid) * NBP + kbj) * TC_GPITCH;
        const unsigned int d = sbase + boff + (unsigned int)(tid * TC_ANGB);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"((unsigned int)TC_ANGB)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
                     "l"(g), "r"((unsigned int)TC_ANGB), "r"(bar)
                     : "memory");
    }
}

// TC_BULK 2: thread a < TC_ANG copies projection TC_ANG j + a's f64
// coefficients (c0, cx, cy) into prefetch slot j & 1 (shared address cpre_s)
// with cp.async, consumed by tc_issue_bulk of stage j an iteration later.
__device__ __forceinline__ void tc_prefetch(const double* __restrict__ dconst, unsigned int cpre_s, int j, int tid) {
    if (tid < TC_ANG) {
        const int q = j * TC_ANG + tid;
        const int qq = q < NPROJ ? q : NPROJ - 1;
        const unsigned int d = cpre_s + (unsigned int)(((j & 1) * 3 * TC_ANG + tid) * 8);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(dconst + qq) : "memory");
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d + TC_ANG * 8), "l"(dconst + NPROJ + qq)
                     : "memory");
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d + 2 * TC_ANG * 8),
                     "l"(dconst + 2 * NPROJ + qq)
                     : "memory");
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
}

// Waits until the mbarrier at bar completes the phase of the given parity.
__device__ __forceinline__ void tc_wait(unsigned int bar, unsigned int parity) {
    unsigned int ok = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!ok);
}
#endif

__device__ __forceinline__ void tc_mma(float (&d)[4], const unsigned int (&a)[4], unsigned int b0,
                                       unsigned int b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float tc_hat(float d) { return fmaxf(0.0f, 1.0f - fabsf(d)); }

// The A fragments (weights, hi and lo) of block b of the warp for the pair
// whose per-projection constants are given, and the lane's ldmatrix row
// address (shared window) for the pair: its matrix's projection (lane / 8
// odd: B) and row (lane % 8: bin b0 + lane % 8).
__device__ __forceinline__ void tc_weights(int b, const float (&sw)[2], const float (&cxv)[2], const float (&cyv)[2],
                                           const float (&off)[2], const float (&e1)[2], const float (&e2)[2],
                                           unsigned int abase, int mb, unsigned int (&ahi)[4],
                                           unsigned int (&alo)[4], unsigned int& addr) {
    const int bx = b % TC_BX, by = b / TC_BX;
    float rr[2];
#if TC_WGT
    // off[h] holds the pair's sw + offset: the block's coordinate and its
    // lowest corner's from the origin's, adding only non-zero offsets.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float sblk = sw[h], so = off[h];
        if (bx) {
            sblk = fmaf((float)(4 * bx), cxv[h], sblk);
            so = fmaf((float)(4 * bx), cxv[h], so);
        }
        if (by) {
            sblk = fmaf((float)(4 * by), cyv[h], sblk);
            so = fmaf((float)(4 * by), cyv[h], so);
        }
        const float r = __fadd_rd(so, TC_MAGIC);
        const float rel = sblk - (r - TC_MAGIC);
        const float d1 = rel + e1[h], d2 = rel + e2[h];
        tc_split_relu(1.0f - fabsf(d1), 1.0f - fabsf(d1 - 1.0f), ahi[2 * h], alo[2 * h]);
        tc_split_relu(1.0f - fabsf(d2), 1.0f - fabsf(d2 - 1.0f), ahi[2 * h + 1], alo[2 * h + 1]);
        rr[h] = r;
    }
#else
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float sblk = fmaf((float)(4 * by), cyv[h], fmaf((float)(4 * bx), cxv[h], sw[h]));
        // b0 = floor(lowest coordinate): r's bits hold it (+ MAGIC_BITS).
        const float r = __fadd_rd(sblk + off[h], TC_MAGIC);
        const float rel = sblk - (r - TC_MAGIC);
        const float d1 = rel + e1[h], d2 = rel + e2[h];
        tc_split_w(tc_hat(d1), tc_hat(d1 - 1.0f), ahi[2 * h], alo[2 * h]);
        tc_split_w(tc_hat(d2), tc_hat(d2 - 1.0f), ahi[2 * h + 1], alo[2 * h + 1]);
        rr[h] = r;
    }
#endif
    addr = abase + (unsigned int)__float_as_int(mb ? rr[1] : rr[0]) * (unsigned int)TC_SROWB;
}

// TC_IL slice tiles n0 ... of one block for one pair: the (hi, lo) B
// fragments of both projections with one ldmatrix per tile, then the three
// products interleaved across the tiles (all tiles' lo.hi, then all hi.lo,
// then all hi.hi: TC_IL independent chains in flight instead of one), into
// d per TC_FLUSH.
__device__ __forceinline__ void tc_tiles(float (&d)[TC_NT][4], const unsigned int (&ahi)[4],
                                         const unsigned int (&alo)[4], unsigned int addr, int n0) {
    unsigned int q[TC_IL][4];
#pragma unroll
    for (int i = 0; i < TC_IL; ++i)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(q[i][0]), "=r"(q[i][1]), "=r"(q[i][2]), "=r"(q[i][3])
                     : "r"(addr + (n0 + i) * 32));
#if TC_FLUSH == 1
    float e[TC_IL][4];
#pragma unroll
    for (int i = 0; i < TC_IL; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) e[i][r] = 0.0f;
#pragma unroll
    for (int i = 0; i < TC_IL; ++i) tc_mma(e[i], alo, q[i][0], q[i][1]);
#pragma unroll
    for (int i = 0; i < TC_IL; ++i) tc_mma(e[i], ahi, q[i][2], q[i][3]);
#pragma unroll
    for (int i = 0; i < TC_IL; ++i) tc_mma(e[i], ahi, q[i][0], q[i][1]);
#pragma unroll
    for (int i = 0; i < TC_IL; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) d[n0 + i][r] += e[i][r];
#else
#pragma unroll
    for (int i = 0; i < TC_IL; ++i) tc_mma(d[n0 + i], alo, q[i][0], q[i][1]);
#pragma unroll
    for (int i = 0; i < TC_IL; ++i) tc_mma(d[n0 + i], ahi, q[i][2], q[i][3]);
#pragma unroll
    for (int i = 0; i < TC_IL; ++i) tc_mma(d[n0 + i], ahi, q[i][0], q[i][1]);
#endif
}

#if TC_PG > 1
// Slice tile n of one block for TC_PG pairs (TC_FLUSH 1): one ldmatrix per
// pair, then one chain from zero over the pairs' three products each
// (every product exact; the chain truncates at most 3 TC_PG times, as f1's
// 3), then one FADD per accumulator into the f32 sums: TC_PG times fewer
// FADDs than f1.
__device__ __forceinline__ void tc_tiles_grouped(float (&d)[TC_NT][4], const unsigned int (&ahi)[TC_PG][4],
                                                 const unsigned int (&alo)[TC_PG][4],
                                                 const unsigned int (&addr)[TC_PG], int n) {
    unsigned int q[TC_PG][4];
#pragma unroll
    for (int g = 0; g < TC_PG; ++g)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(q[g][0]), "=r"(q[g][1]), "=r"(q[g][2]), "=r"(q[g][3])
                     : "r"(addr[g] + n * 32));
    float e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int g = 0; g < TC_PG; ++g) {
        tc_mma(e, alo[g], q[g][0], q[g][1]);
        tc_mma(e, ahi[g], q[g][2], q[g][3]);
        tc_mma(e, ahi[g], q[g][0], q[g][1]);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) d[n][r] += e[r];
}
#endif

// The per-projection values of pair pp of a stage (constants cst) for the
// lane: the warp origin's coordinate sw, cx, cy, the offset off (with
// TC_WGT: sw + the lowest corner's offset) and the lane's pixel offsets e1,
// e2 (less 2t: relative to its bin pair).
__device__ __forceinline__ void tc_pair(const float4* __restrict__ cst, int pp, float xw, float yw, float dxf,
                                        float dyf, float tt, float (&sw)[2], float (&cxv)[2], float (&cyv)[2],
                                        float (&off)[2], float (&e1)[2], float (&e2)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float4 c = cst[2 * pp + h];
        cxv[h] = c.y;
        cyv[h] = c.z;
        sw[h] = fmaf(yw, c.z, fmaf(xw, c.y, c.x));
#if TC_WGT
        off[h] = sw[h] + c.w;
#else
        off[h] = c.w;
#endif
        e1[h] = fmaf(dxf, c.y, fmaf(dyf, c.z, -tt));
        e2[h] = fmaf(2.0f, c.z, e1[h]);
    }
}

// Grid (ceil(NX / TC_PXX), ceil(NY / TC_PXY), groups), block TC_NTH, dynamic
// shared memory TC_ST * TC_STAGEB. dconst = [c0 | cx | cy] in f64: the bin
// coordinate of pixel (ix, iy) is c0 + ix cx + iy cy. smax: per-slot
// largest magnitudes (tc_absmax), out: slices of NX x NY.
extern "C" __global__ void __launch_bounds__(TC_NTH, TC_MINB)
    bp_tensor(const unsigned short* __restrict__ ent, const unsigned int* __restrict__ smax, float* __restrict__ out,
              int nslices, float scale, const double* __restrict__ dconst) {
    extern __shared__ __align__(16) unsigned char tc_sbuf[];
    const int tid = threadIdx.x;
    const int lane = tid & 31, w = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
#if TC_SWZ
    const int id = blockIdx.x + gridDim.x * blockIdx.y;
    const int per = TC_SWZ * gridDim.y;
    const int strip = id / per, rr = id - strip * per;
    const int gs = min(TC_SWZ, (int)gridDim.x - strip * TC_SWZ);
    const int bxi = strip * TC_SWZ + rr % gs, byi = rr / gs;
#else
    const int bxi = blockIdx.x, byi = blockIdx.y;
#endif
    const int xc = bxi * TC_PXX, yc = byi * TC_PXY;
    const int wxo = (w % TC_WX) * (4 * TC_BX), wyo = (w / TC_WX) * (4 * TC_BY);
    const float xw = (float)wxo, yw = (float)wyo;
    const float dxf = (float)(g & 3), dyf = (float)(g >> 2);
    const float tt = (float)(2 * t);
    const char* __restrict__ gsrc =
        reinterpret_cast<const char*>(ent) + (long long)blockIdx.z * NPP * NBP * TC_GPITCH;
    const unsigned int sbase = (unsigned int)__cvta_generic_to_shared(tc_sbuf);
    // The lane's ldmatrix row: matrix mm = lane / 8 (projection mm & 1 of
    // the pair, hi for mm < 2, lo above), row lane % 8 of it.
    const int mm = lane >> 3;
    const int mb = mm & 1;
    const unsigned int laneoff = (unsigned int)((lane & 7) * TC_SROWB + (mm >> 1) * 16);

    // acc: the MMA accumulators (TC_FLUSH != 1) or the f32 sums (1);
    // accf: the f32 sums the MMA accumulators are flushed into (TC_FLUSH >= 2).
    float acc[TC_NB][TC_NT][4];
#pragma unroll
    for (int b = 0; b < TC_NB; ++b)
#pragma unroll
        for (int n = 0; n < TC_NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[b][n][i] = 0.0f;
#if TC_FLUSH >= 2
    float accf[TC_NB][TC_NT][4];
#pragma unroll
    for (int b = 0; b < TC_NB; ++b)
#pragma unroll
        for (int n = 0; n < TC_NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) accf[b][n][i] = 0.0f;
#endif

#if TC_BULK
    // One mbarrier per ring stage (TC_ANG arrivals + the copies' bytes).
    __shared__ __align__(8) unsigned long long tc_bar[TC_ST];
    const unsigned int bars = (unsigned int)__cvta_generic_to_shared(tc_bar);
    // Prefetch slots of the f64 coefficients (TC_BULK 2).
    __shared__ __align__(16) double tc_cpre[2 * 3 * TC_ANG];
    const unsigned int cpre_s = (unsigned int)__cvta_generic_to_shared(tc_cpre);
    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < TC_ST; ++i)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bars + 8 * i), "r"(TC_ANG) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    for (int j = 0; j < TC_ST - 1; ++j)
        if (j < TC_NSTG) tc_issue_bulk(dconst, gsrc, sbase, tc_sbuf, bars, j, xc, yc, tid, tc_cpre, false);
#if TC_BULK == 2
    if (TC_ST - 1 < TC_NSTG) tc_prefetch(dconst, cpre_s, TC_ST - 1, tid);
#endif
#else
    for (int j = 0; j < TC_ST - 1; ++j) {
        if (j < TC_NSTG)
            tc_issue(dconst, gsrc, sbase, tc_sbuf, j, xc, yc, tid);
        else
            asm volatile("cp.async.commit_group;" ::: "memory");
    }
#endif

    for (int j = 0; j < TC_NSTG; ++j) {
#if TC_BULK
        // Stage j's bytes have landed; the barrier then also says every
        // warp is done with stage j - 1's buffer (refilled next) and makes
        // the constants stored with stage j visible.
        tc_wait(bars + (unsigned int)((j % TC_ST) * 8), (unsigned int)((j / TC_ST) & 1));
        __syncthreads();
        if (j + TC_ST - 1 < TC_NSTG) {
            tc_issue_bulk(dconst, gsrc, sbase, tc_sbuf, bars, j + TC_ST - 1, xc, yc, tid, tc_cpre, TC_BULK == 2);
#if TC_BULK == 2
            if (j + TC_ST < TC_NSTG) tc_prefetch(dconst, cpre_s, j + TC_ST, tid);
#endif
        }
#else
        asm volatile("cp.async.wait_group %0;" ::"n"(TC_ST - 2) : "memory");
        __syncthreads();
        if (j + TC_ST - 1 < TC_NSTG)
            tc_issue(dconst, gsrc, sbase, tc_sbuf, j + TC_ST - 1, xc, yc, tid);
        else
            asm volatile("cp.async.commit_group;" ::: "memory");
#endif
        // Shared-window addresses (32-bit arithmetic that wraps back).
        const unsigned int sb = sbase + (unsigned int)((j % TC_ST) * TC_STAGEB);
        const float4* __restrict__ cst =
            reinterpret_cast<const float4*>(tc_sbuf + (j % TC_ST) * TC_STAGEB + TC_ANG * TC_ANGB);
#if TC_PG > 1
#pragma unroll 1
        for (int pp = 0; pp < TC_AP; pp += TC_PG) {
            float sw[TC_PG][2], cxv[TC_PG][2], cyv[TC_PG][2], off[TC_PG][2], e1[TC_PG][2], e2[TC_PG][2];
            unsigned int abase[TC_PG];
#pragma unroll
            for (int g = 0; g < TC_PG; ++g) {
                tc_pair(cst, pp + g, xw, yw, dxf, dyf, tt, sw[g], cxv[g], cyv[g], off[g], e1[g], e2[g]);
                abase[g] = sb + (unsigned int)((2 * (pp + g) + mb) * TC_ANGB) + laneoff -
                           (unsigned int)TC_MAGIC_BITS * (unsigned int)TC_SROWB;
            }
#pragma unroll
            for (int b = 0; b < TC_NB; ++b) {
                unsigned int ahi[TC_PG][4], alo[TC_PG][4], addr[TC_PG];
#pragma unroll
                for (int g = 0; g < TC_PG; ++g)
                    tc_weights(b, sw[g], cxv[g], cyv[g], off[g], e1[g], e2[g], abase[g], mb, ahi[g], alo[g], addr[g]);
#pragma unroll
                for (int n = 0; n < TC_NT; ++n) tc_tiles_grouped(acc[b], ahi, alo, addr, n);
            }
        }
#else
#pragma unroll 1
        for (int pp = 0; pp < TC_AP; ++pp) {
            float sw[2], cxv[2], cyv[2], off[2], e1[2], e2[2];
            tc_pair(cst, pp, xw, yw, dxf, dyf, tt, sw, cxv, cyv, off, e1, e2);
            const unsigned int abase = sb + (unsigned int)((2 * pp + mb) * TC_ANGB) + laneoff -
                                       (unsigned int)TC_MAGIC_BITS * (unsigned int)TC_SROWB;
#if TC_NTO
            // All blocks' weights first, then the slice tiles outermost:
            // the blocks' MMA chains of one tile are independent.
            unsigned int ahi[TC_NB][4], alo[TC_NB][4], addr[TC_NB];
#pragma unroll
            for (int b = 0; b < TC_NB; ++b)
                tc_weights(b, sw, cxv, cyv, off, e1, e2, abase, mb, ahi[b], alo[b], addr[b]);
#pragma unroll
            for (int n = 0; n < TC_NT; n += TC_IL)
#pragma unroll
                for (int b = 0; b < TC_NB; ++b) tc_tiles(acc[b], ahi[b], alo[b], addr[b], n);
#else
#pragma unroll
            for (int b = 0; b < TC_NB; ++b) {
                unsigned int ahi[4], alo[4], addr;
                tc_weights(b, sw, cxv, cyv, off, e1, e2, abase, mb, ahi, alo, addr);
#pragma unroll
                for (int n = 0; n < TC_NT; n += TC_IL) tc_tiles(acc[b], ahi, alo, addr, n);
            }
#endif
#if TC_FLUSH >= 2
            // Every TC_FLUSH pairs: the MMA accumulators into the f32 sums
            // (short truncating chains, rounded sums).
            if ((j * TC_AP + pp) % TC_FLUSH == TC_FLUSH - 1) {
#pragma unroll
                for (int b = 0; b < TC_NB; ++b)
#pragma unroll
                    for (int n = 0; n < TC_NT; ++n)
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            accf[b][n][i] += acc[b][n][i];
                            acc[b][n][i] = 0.0f;
                        }
            }
#endif
        }
#endif
    }
#if !TC_BULK
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
#if TC_FLUSH >= 2
#pragma unroll
    for (int b = 0; b < TC_NB; ++b)
#pragma unroll
        for (int n = 0; n < TC_NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[b][n][i] += accf[b][n][i];
#endif

    const long long plane = (long long)NX * NY;
#pragma unroll
    for (int n = 0; n < TC_NT; ++n) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int slot = blockIdx.z * TC_S + n * 8 + 2 * t + i;
            if (slot >= nslices) continue;
            const float un = scale / tc_mult(__ldg(smax + slot));
            float* __restrict__ o = out + (long long)slot * plane;
#pragma unroll
            for (int by = 0; by < TC_BY; ++by)
#pragma unroll
                for (int bx = 0; bx < TC_BX; ++bx) {
                    const int x = xc + wxo + 4 * bx + (g & 3);
                    const int y = yc + wyo + 4 * by + (g >> 2);
                    if (x < NX && y < NY) o[(long long)y * NX + x] = acc[by * TC_BX + bx][n][i] * un;
                    if (x < NX && y + 2 < NY) o[(long long)(y + 2) * NX + x] = acc[by * TC_BX + bx][n][2 + i] * un;
                }
        }
    }
}
