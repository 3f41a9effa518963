// Voxel-driven cone-beam back projection (FDK): cone_bp reads the projections
// with plain loads and manual bilinear interpolation in f32 (exact f32
// arithmetic); cone_bp_tex (below) through textures with hardware bilinear
// interpolation; cone_pack lays projections out for cone_bp_tex.
//
// Baked parameters (#defines prepended by the host):
//   MAXP   capacity of the per-projection constant arrays (angles per launch)
//   ZB     slices accumulated in registers per thread
//
// Each thread owns one voxel column (ix, iy) and a run of ZB slices. For every
// projection it computes the per-(x, y) terms once, in double: the depth
// U = SOD + t, the FDK weight (SOD/U)^2, the detector column and its two
// bilinear column weights, the padded row coordinate of the run's first slice
// and the row step per slice. Along z only the row changes:
// r = r0 + dr * k in f32, two row taps of each of the two columns, zero
// outside the detector. The same expressions as the CPU back projector
// (tomors-core cone/backproject.rs), so both match the f64 reference.
//
// projections: [angle][row][col] of this launch's angles (NR x NC floats each)
// vol:         [slice][y][x] of the slab, NX x NY x nzs floats, overwritten
//              (acc == 0) or accumulated into (acc == 1).

__constant__ double c_cos[MAXP];
__constant__ double c_sin[MAXP];

// Where the ray of projection p through column (x, y) meets the detector:
// depth U = SOD + t, magnification m = SDD / U and the detector column. False
// when the column lies behind the source or its ray misses the detector's
// columns (then it adds nothing).
__device__ __forceinline__ bool cone_column(int p, double x, double y, double sod, double sdd,
                                            double pu, double ccol, int nc,
                                            double& depth, double& m, double& col)
{
    const double cs = c_cos[p], sn = c_sin[p];
    depth = sod + (-x * sn + y * cs);
    if (!(depth > 0.0)) return false;
    m = sdd / depth;
    col = ccol + (x * cs + y * sn) * m / pu;
    return col >= -1.0 && col < (double)nc;
}

// Writes (acc == 0) or adds (acc == 1) the ZB sums of column (ix, iy) from
// slice kb on, skipping slices past nzs.
__device__ __forceinline__ void store_column(float* __restrict__ vol, const float* sum, int ix,
                                             int iy, int kb, int nx, int ny, int nzs, int acc)
{
    const size_t sl = (size_t)nx * ny;
    float* o = vol + (size_t)iy * nx + ix;
#pragma unroll
    for (int k = 0; k < ZB; ++k) {
        const int kk = kb + k;
        if (kk < nzs) {
            float* d = o + (size_t)kk * sl;
            *d = acc ? *d + sum[k] : sum[k];
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
cone_bp(const float* __restrict__ proj, float* __restrict__ vol, int nang, int nzs, int acc,
        int nx, int ny, int nc, int nr,
        double sod, double sdd, double pu, double pv, double ccol, double crow,
        double vox, double z_first)
{
    const int ix = blockIdx.x * 16 + (threadIdx.x & 15);
    const int iy = blockIdx.y * 16 + (threadIdx.x >> 4);
    const int kb = blockIdx.z * ZB;
    if (ix >= nx || iy >= ny) return;
    const double x = ((double)ix - (nx - 1) * 0.5) * vox;
    const double y = ((ny - 1) * 0.5 - (double)iy) * vox;
    const double zb = z_first + (double)kb * vox;
    const float top = (float)(nr + 1);
    float sum[ZB];
#pragma unroll
    for (int k = 0; k < ZB; ++k) sum[k] = 0.0f;

    const size_t plane = (size_t)nr * nc;
    for (int p = 0; p < nang; ++p) {
        double depth, m, col;
        if (!cone_column(p, x, y, sod, sdd, pu, ccol, nc, depth, m, col)) continue;
        const double cf = floor(col);
        const double fc = col - cf;
        const double w = (sod / depth) * (sod / depth);
        const int c0 = (int)cf;
        const float wa = c0 >= 0 ? (float)(w * (1.0 - fc)) : 0.0f;
        const float wb = c0 + 1 < nc ? (float)(w * fc) : 0.0f;
        const int ca = max(c0, 0), cb = min(c0 + 1, nc - 1);
        // Padded row (row + 1) of slice kb, and its step: as the CPU.
        const float r0 = (float)(crow + 1.0 + zb * m / pv);
        const float dr = (float)(vox * m / pv);
        const float* __restrict__ q = proj + (size_t)p * plane;
#pragma unroll
        for (int k = 0; k < ZB; ++k) {
            const float r = r0 + dr * (float)k;
            if (r >= 0.0f && r < top) {
                const int ri = min((int)r, nr);  // padded index of the lower tap
                const float fr = r - (float)ri;
                // Detector rows ri - 1 and ri (zero outside).
                const float* q0 = q + (size_t)(ri - 1) * nc;
                const float* q1 = q + (size_t)ri * nc;
                float a0 = 0.0f, b0 = 0.0f, a1 = 0.0f, b1 = 0.0f;
                if (ri >= 1) { a0 = __ldg(q0 + ca); b0 = __ldg(q0 + cb); }
                if (ri < nr) { a1 = __ldg(q1 + ca); b1 = __ldg(q1 + cb); }
                sum[k] += wa * (a0 + fr * (a1 - a0)) + wb * (b0 + fr * (b1 - b0));
            }
        }
    }
    store_column(vol, sum, ix, iy, kb, nx, ny, nzs, acc);
}

// ---------------------------------------------------------------------------
// Texture variant: the projections of a launch live in pitched 2D textures
// (hardware bilinear interpolation, border = zero), TPG projections stacked
// vertically per texture with one zero row above each projection and one
// after the last, so rows -1 and NR read zeros; each texture is at most
// ~8192 rows high, so the f32 row coordinate keeps 10 fractional bits. The
// texture objects of the launch are in c_tex (projection p in texture
// p / TPG, band p % TPG). Same per-(x, y) terms; one fetch per voxel.
//
// Row bands (several devices, MPI ranks): the textures may hold only the
// detector rows row0 .. row0 + nrb (nrb = NR: the whole detector, row0 = 0),
// still TPG projections per texture. The row coordinate r is computed for the
// whole detector, exactly as without a band, and the texture coordinate is
// the whole detector's (band * (NR + 1) + 0.5 + r, rounded to f32) minus the
// integer shift band * (NR - nrb) + row0: the difference is exact (a multiple
// of the larger coordinate's ulp, not larger than it), so the fraction and
// with it the hardware's 8-bit interpolation weights are those of the whole
// detector, and a band gives the same values as the whole detector wherever
// its rows cover the voxels' taps (rows outside [row0, row0 + nrb] add
// nothing; the caller's band covers every voxel of its slab).

__constant__ unsigned long long c_tex[MAXP];

extern "C" __global__ void __launch_bounds__(256)
cone_bp_tex(float* __restrict__ vol, int nang, int nzs, int acc, int tpg,
            int row0, int nrb, int nx, int ny, int nc, int nr,
            double sod, double sdd, double pu, double pv, double ccol, double crow,
            double vox, double z_first)
{
    const int ix = blockIdx.x * 16 + (threadIdx.x & 15);
    const int iy = blockIdx.y * 16 + (threadIdx.x >> 4);
    const int kb = blockIdx.z * ZB;
    if (ix >= nx || iy >= ny) return;
    const double x = ((double)ix - (nx - 1) * 0.5) * vox;
    const double y = ((ny - 1) * 0.5 - (double)iy) * vox;
    const double zb = z_first + (double)kb * vox;
    // Padded rows of the band: [row0, row0 + nrb + 1) (the whole detector:
    // [0, NR + 1), the zero rows above and below included).
    const float lo = (float)row0;
    const float hi = (float)(row0 + nrb + 1);
    float sum[ZB];
#pragma unroll
    for (int k = 0; k < ZB; ++k) sum[k] = 0.0f;

    for (int p = 0; p < nang; ++p) {
        double depth, m, col;
        if (!cone_column(p, x, y, sod, sdd, pu, ccol, nc, depth, m, col)) continue;
        const float w = (float)((sod / depth) * (sod / depth));
        const float tx = (float)(col + 0.5);
        const int band = p % tpg;
        const cudaTextureObject_t t = (cudaTextureObject_t)c_tex[p / tpg];
        // Padded row (row + 1) of slice kb and its step, as the other kernel;
        // the texture row of padded row r in band b is b (NR + 1) + r + 0.5.
        const double rp = crow + 1.0 + zb * m / pv;
        const float r0 = (float)rp;
        const float dr = (float)(vox * m / pv);
        const float base = (float)((double)band * (nr + 1) + 0.5);
        const float shift = (float)((double)band * (nr - nrb) + row0);
#pragma unroll
        for (int k = 0; k < ZB; ++k) {
            const float r = r0 + dr * (float)k;
            if (r >= lo && r < hi) {
                const float y = base + r;  // the whole detector's coordinate
                sum[k] += w * tex2D<float>(t, tx, y - shift);
            }
        }
    }
    store_column(vol, sum, ix, iy, kb, nx, ny, nzs, acc);
}

// Copies nang projections of filtered detector rows into the stacked texture
// layout. Row r of the chunk (r = a * NR + row, a = 0..nang) is plain
// (pair = 0: row_stride floats apart) or packed two per complex row (pair = 1:
// the real part for even r, the imaginary part for odd r, complex rows
// row_stride floats apart). Projection a goes to global angle g = a_first + a:
// texture g / tpg (gfloats floats apart), rows from 1 + (g % tpg)(NR + 1),
// pitch floats apart. The zero rows are never written (the buffer is cleared
// once).
extern "C" __global__ void cone_pack(const float* __restrict__ src, long long row_stride, int pair,
                                     float* __restrict__ dst, int a_first, int nang, int nr,
                                     int nc, int pitch, int tpg, long long gfloats)
{
    const long long total = (long long)nang * nr * nc;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % nc);
        const long long ar = i / nc;
        const int r = (int)(ar % nr);
        const int g = a_first + (int)(ar / nr);
        const float v = pair ? src[(ar >> 1) * row_stride + 2 * c + (ar & 1)]
                             : src[ar * row_stride + c];
        const long long row = 1 + (long long)(g % tpg) * (nr + 1) + r;
        dst[(g / tpg) * gfloats + row * pitch + c] = v;
    }
}

// FDK pre-weighting in place: value (a, r, c) of a chunk of nang projections
// [angle][row][col] times cosw[r][c] * angw[a_first + a][c] (the cosine and
// angular weights, as tomors-core's fdk_filter: v * (cos * ang) in f32). The
// flat index of the first non-finite input value seen is kept in *bad
// (atomicMin; the host clears it to all ones).
extern "C" __global__ void fdk_weight(float* __restrict__ q, const float* __restrict__ cosw,
                                      const float* __restrict__ angw, int a_first, int nang,
                                      int nr, int nc, unsigned long long* __restrict__ bad)
{
    const long long total = (long long)nang * nr * nc;
    const long long plane = (long long)nr * nc;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % nc);
        const long long a = i / plane;
        const long long rc = i - a * plane;
        const float v = q[i];
        if (!isfinite(v)) {
            atomicMin(bad, (unsigned long long)((long long)a_first * plane + i));
        }
        q[i] = v * (cosw[rc] * angw[(a_first + a) * nc + c]);
    }
}
