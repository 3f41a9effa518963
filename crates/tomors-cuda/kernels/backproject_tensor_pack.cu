// Tensor-core parallel-beam back projection: exact (f32-class) linear
// interpolation as a matrix product on the tensor cores.
//
// For one projection, linear interpolation is a hat function: the update of
// pixel p in slice s is sum_b h(u_p - b) P[b][s], h(t) = max(0, 1 - |t|),
// u_p the pixel's bin coordinate. The slices share the weights, so for a
// 4x4 pixel block (16 pixels, whose coordinates span at most
// 3 (|cx| + |cy|) <= 4.95 bins, checked by the host) and the 8 bins from
// b0 (the block's lowest coordinate rounded down) on, the
// updates of 8 slices from two projections are one
// mma.m16n8k16: A = the weights (16 pixels x [8 bins of projection A |
// 8 bins of projection B]), B = the values (16 x 8 slices), f32 accumulators.
//
// Exactness with f16 operands: both operands are split in two f16 parts,
// w = w_hi + w_lo and p = p_hi + p_lo (the slab scaled per slice by a power
// of two so that max |p| lies in [2^13, 2^14); undone exactly at the end),
// and three products are summed (lo.hi + hi.lo + hi.hi; lo.lo ~ 2^-22 is
// dropped): 22-bit operands, products exact in the f32 accumulation.
// The tensor core's accumulation truncates, so a long chain of MMAs into
// one accumulator drifts toward zero (measured: 7e-5 relative at 2048
// projections). With TC_FLUSH = 1 the three products of a projection pair
// start from zero and are added to f32 sums with one FADD each; with
// TC_FLUSH = G >= 2 the MMA accumulators collect G pairs and are then added
// to the f32 sums and zeroed; with 0 they accumulate over all projections.
//
// Fragment layout (PTX ISA, mma.m16n8k16, groupID g = lane / 4, t = lane % 4):
//   A: reg0 = (row g, k 2t..2t+1), reg1 = (row g+8, k 2t..), reg2 = (row g,
//      k 2t+8..), reg3 = (row g+8, k 2t+8..); row m = pixel (m % 4, m / 4)
//      of the block: the lane's pixels are p1 = (g % 4, g / 4) and p2 = p1 +
//      (0, 2); k < 8: projection A, bin b0_A + k; k >= 8: projection B.
//   B: reg0 = (k 2t..2t+1, n g), reg1 = (k 2t+8.., n g): the f16 pair of
//      bins (b0 + 2t, b0 + 2t + 1) of slice g, loaded with one
//      ldmatrix.x4.trans per block, slice tile and pair: matrices 0..3 = the
//      8 rows (bins b0 ...) of (hi, projection A), (hi, B), (lo, A), (lo, B),
//      each row the 8 slices of the tile (16 bytes), so that the four
//      registers are B_hi = {r0, r1} and B_lo = {r2, r3} as the MMA takes
//      them (no register moves).
//   C: c0, c1 = (row g, slices 2t, 2t+1), c2, c3 = (row g+8, same slices).
//
// Baked parameters (#defines prepended by the host):
//   NX, NY        slice size in pixels
//   NPROJ, NPP    projections, and padded to whole stages (2 TC_AP)
//   NB            detector bins
//   BLO, NBP      global bin of padded bin 0 and the number of padded
//                 bins: every stage row lies inside
//   TC_BX, TC_BY  4x4 pixel blocks of a warp along x and y
//   TC_NT         8-slice tiles of a warp (slices of a block: 8 TC_NT)
//   TC_WX, TC_WY  warps of a block along x and y
//   TC_AP         projection pairs per stage
//   TC_ST         stages in the shared-memory ring (>= 2)
//   TC_SB         bins staged per projection
//   TC_FLUSH      1: per-pair chains added to f32 accumulators; 0: the MMA
//                 accumulates over all projections; G >= 2: the MMA
//                 accumulators are added to f32 sums every G pairs
//   TC_NTO        1: slice tiles outermost (all blocks' weights first)
//   TC_IL         slice tiles whose MMA chains are interleaved (divides TC_NT)
//   TC_MINB       minimum resident blocks per multiprocessor
//   TC_MASK       1: the weights' f16 hi part by masking (see tc_split_w)
//   TC_WGT        1: lean weights (tc_split_relu: masked split with
//                 clamping conversions instead of clamped hats and a
//                 conversion back; the block offsets from the pair's
//                 origin, no multiplications by zero)
//   TC_BULK       1: stages by the copy engine (tc_issue_bulk); 2: and the
//                 f64 coefficients prefetched an iteration ahead (tc_prefetch)
//   TC_PG         (with TC_FLUSH 1) pairs whose products form one chain
//                 from zero before the FADDs into the f32 sums (divides
//                 TC_AP): the FADDs per pair divided by TC_PG
//   TC_SWZ        0, or the width in blocks of the strips the grid is walked
//                 in (the blocks resident together cover a compact patch:
//                 fewer bins of each projection in L2 at once)
//
// Entry layout (written by pack_tensor): per group of 8 TC_NT slices,
// projection q and padded bin k (global bin BLO + k) a row of TC_NT x
// (8 hi f16, 8 lo f16) = 32 TC_NT bytes: the tile's 8 slices' values scaled
// by their slice's power of two and split; zeros outside the detector, for
// slices past the slab and projections past NPROJ. In shared memory the rows
// are padded by 16 bytes (the 8 rows of an ldmatrix matrix then hit
// distinct banks).

#define TC_MAGIC 12582912.0f
#define TC_MAGIC_BITS 0x4B400000
#define TC_FULL 0xffffffffu
#define TC_S (8 * TC_NT)
#define TC_GROWB (32 * TC_NT)
#define TC_SROWB (32 * TC_NT + 16)
#define TC_NTH (32 * TC_WX * TC_WY)
#define TC_PXX (4 * TC_BX * TC_WX)
#define TC_PXY (4 * TC_BY * TC_WY)
#define TC_ANG (2 * TC_AP)
#define TC_ANGB (TC_SB * TC_SROWB)
#define TC_STAGEB (TC_ANG * TC_ANGB + TC_ANG * 16)
#define TC_CR (2 * TC_NT)
#define TC_ROWS (TC_ANG * TC_SB)
#define TC_RPI (TC_NTH / TC_CR)
#define TC_COPIES ((TC_ROWS + TC_RPI - 1) / TC_RPI)
#define TC_NSTG (NPP / TC_ANG)
#define TC_EXP 14
#ifndef TC_SWZ
#define TC_SWZ 0
#endif
#ifndef TC_MASK
#define TC_MASK 0
#endif
#ifndef TC_WGT
#define TC_WGT 0
#endif
#ifndef TC_PG
#define TC_PG 1
#endif
#ifndef TC_NTO
#define TC_NTO 0
#endif
#ifndef TC_IL
#define TC_IL 1
#endif
#define TC_NB (TC_BX * TC_BY)
#ifndef TC_BULK
#define TC_BULK 0
#endif
// Bytes between bin rows of the entries in device memory: with TC_BULK the
// rows carry shared memory's 16-byte padding, so that a projection's staged
// rows are one contiguous run copied by one bulk copy.
#if TC_BULK
#define TC_GPITCH TC_SROWB
#else
#define TC_GPITCH TC_GROWB
#endif

// The multiplier that brings a slice's largest magnitude (as float bits)
// into [2^13, 2^14): a power of two (1 for zero, Inf or NaN maxima).
// m = f 2^e with f in [1/2, 1) for the biased exponent e + 126 of a normal
// m (subnormal maxima take e = -126 and the clamp).
__device__ __forceinline__ float tc_mult(unsigned int bits) {
    const float m = __uint_as_float(bits);
    if (!(m > 0.0f) || !(m <= 3.4028235e38f)) return 1.0f;
    const int e = (int)((bits >> 23) & 0xffu) - 126;
    const int k = max(-100, min(100, TC_EXP - e));
    return __int_as_float((k + 127) << 23);
}

// Value k of slab row r (see filter.cu's source_value).
__device__ __forceinline__ float tc_source(const float* __restrict__ src, long long row_stride, int pair,
                                           long long r, int k) {
    if (pair) return src[(r >> 1) * row_stride + 2 * k + (r & 1)];
    return src[r * row_stride + k];
}

// Zeroes the per-slot maxima (n words).
extern "C" __global__ void tc_zero(unsigned int* __restrict__ smax, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) smax[i] = 0u;
}

// Per-slice largest magnitude of the slab (as float bits, atomicMax: the
// order of non-negative floats is that of their bits). Grid (slices,
// ceil(na / 8)), block 256: 8 projections of one slice per block.
extern "C" __global__ void tc_absmax(const float* __restrict__ src, long long row_stride, int pair,
                                     unsigned int* __restrict__ smax, int na) {
    const int sl = blockIdx.x;
    float m = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const int p = blockIdx.y * 8 + j;
        if (p >= na) break;
        const long long r = (long long)sl * na + p;
        for (int k = threadIdx.x; k < NB; k += blockDim.x) m = fmaxf(m, fabsf(tc_source(src, row_stride, pair, r, k)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(TC_FULL, m, o));
    __shared__ float red[8];
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float v = red[0];
        for (int i = 1; i < (int)(blockDim.x >> 5); ++i) v = fmaxf(v, red[i]);
        atomicMax(smax + sl, __float_as_uint(v));
    }
}

// Splits two floats into f16 (hi, lo) pairs: x = hi + lo to ~22 bits
// (x0 in the low half: the smaller k or bin; cvt.rn.f16x2.f32 puts its
// first source in the upper half).
__device__ __forceinline__ void tc_split(float x0, float x1, unsigned int& hi, unsigned int& lo) {
    float f0, f1;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(x1), "f"(x0));
    asm("{\n\t.reg .f16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
        : "=f"(f0), "=f"(f1)
        : "r"(hi));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(x1 - f1), "f"(x0 - f0));
}

// The weights' split (0 <= w <= 1): as tc_split, or with TC_MASK hi = w
// with its 13 low mantissa bits cleared (exact in f16 for w >= 2^-14; below,
// an error under 2^-24 absolute) and lo = w - hi exact in f32, rounded to
// f16 (~21 bits in all): no conversion back from f16.
__device__ __forceinline__ void tc_split_w(float x0, float x1, unsigned int& hi, unsigned int& lo) {
#if TC_MASK
    const float h0 = __int_as_float(__float_as_int(x0) & 0xffffe000);
    const float h1 = __int_as_float(__float_as_int(x1) & 0xffffe000);
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(h1), "f"(h0));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(x1 - h1), "f"(x0 - h0));
#else
    tc_split(x0, x1, hi, lo);
#endif
}

// TC_WGT: the split of two unclamped hat values w = 1 - |d| (negative
// outside the hat): h = w with its 13 low mantissa bits cleared (toward
// zero, so h and w - h have w's sign; exact in f16 for |w| >= 2^-14, below
// an error under 2^-24 absolute), w - h exact in f32, and both converted
// with cvt.rn.relu, which maps the negative values (outside the hat) to
// zero: the clamp max(0, w) costs nothing and no value is converted back
// from f16 (~21 bits, as TC_MASK).
__device__ __forceinline__ void tc_split_relu(float x0, float x1, unsigned int& hi, unsigned int& lo) {
    const float h0 = __int_as_float(__float_as_int(x0) & 0xffffe000);
    const float h1 = __int_as_float(__float_as_int(x1) & 0xffffe000);
    asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(h1), "f"(h0));
    asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(x1 - h1), "f"(x0 - h0));
}

// f16 of x (round to nearest) and the f16 of the rest, as 16-bit words.
__device__ __forceinline__ void tc_split1(float x, unsigned short& hi, unsigned short& lo) {
    float f;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(hi) : "f"(x));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(hi));
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(lo) : "f"(x - f));
}

// Re-lays the filtered slab (rows r = slice * na + angle, NB values each) as
// the entries above. Grid (ceil(NBP / 32), NPP, slots / 32), block (32, 8):
// a 32-bin x 32-slot tile through shared memory (reads along the bins,
// writes along the slots). slots = groups * 8 TC_NT, a multiple of 32 (the
// host rounds up).
extern "C" __global__ void pack_tensor(const float* __restrict__ src, long long row_stride, int pair,
                                       const unsigned int* __restrict__ smax, unsigned short* __restrict__ ent,
                                       int na, int nslices) {
    __shared__ unsigned int tile[32][33];
    const int q = blockIdx.y;
    const int k0 = blockIdx.x * 32;
    const int s0 = blockIdx.z * 32;
    {
        const int k = k0 + threadIdx.x;
        const int b = BLO + k;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int sl = s0 + threadIdx.y + 8 * j;
            float v = 0.0f;
            if (sl < nslices && q < na && k < NBP && b >= 0 && b < NB)
                v = tc_source(src, row_stride, pair, (long long)sl * na + q, b) * tc_mult(__ldg(smax + sl));
            unsigned short hi, lo;
            tc_split1(v, hi, lo);
            tile[threadIdx.y + 8 * j][threadIdx.x] = (unsigned int)hi | ((unsigned int)lo << 16);
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int k = k0 + threadIdx.y + 8 * j;
        const int slot = s0 + threadIdx.x;
        if (k < NBP) {
            const int grp = slot / TC_S, s = slot - grp * TC_S;
            const unsigned int v = tile[threadIdx.x][threadIdx.y + 8 * j];
            unsigned short* __restrict__ row = ent + (((long long)grp * NPP + q) * NBP + k) * (TC_GPITCH / 2);
            row[(s >> 3) * 16 + (s & 7)] = (unsigned short)(v & 0xffffu);
            row[(s >> 3) * 16 + 8 + (s & 7)] = (unsigned short)(v >> 16);
        }
    }
}

