// The voxel pair's forward projection through 2D layered textures (appended
// to cone_joseph.cu, whose rays and steps it uses; see
// src/iterative/cone/layered.rs).
//
// Joseph's steps lie on the planes of the ray's dominant axis, so each step's
// fetch is a bilinear interpolation within one plane. cj_forward_tex reads
// it from a 3D texture (a trilinear fetch whose weight along the dominant axis
// is 0); here the volume is also laid out as 2D layered textures whose layers
// are the planes of x ([x][z][y]: texels (y, z)) and of y ([y][z][x]: texels
// (x, z)), so x- and y-dominant rays make bilinear fetches (the texture
// units filter half the texels of a trilinear fetch); z-dominant rays still
// read the 3D texture. The same sample points and 8-bit weights as
// cj_forward_tex.

// dst[x][z][y] = src[z][y][x]: per z a 32x32 tile transpose of (y, x).
// Block (32, 8), grid (ceil(nx/32), ceil(ny/32), nz).
extern "C" __global__ void cj_vol_xzy(const float* __restrict__ src, float* __restrict__ dst,
                                      int nx, int ny, int nz) {
    __shared__ float tile[32][33];
    const int z = blockIdx.z;
    const int x0 = blockIdx.x * 32, y0 = blockIdx.y * 32;
    for (int r = threadIdx.y; r < 32; r += 8) {
        const int y = y0 + r, x = x0 + threadIdx.x;
        if (x < nx && y < ny) tile[r][threadIdx.x] = __ldg(src + ((size_t)z * ny + y) * nx + x);
    }
    __syncthreads();
    for (int c = threadIdx.y; c < 32; c += 8) {
        const int x = x0 + c, y = y0 + threadIdx.x;
        if (x < nx && y < ny) dst[((size_t)x * nz + z) * ny + y] = tile[threadIdx.x][c];
    }
}

// dst[y][z][x] = src[z][y][x] (rows of x copied). Block (256, 1), grid
// (ceil(nx/256), ny, nz).
extern "C" __global__ void cj_vol_yzx(const float* __restrict__ src, float* __restrict__ dst,
                                      int nx, int ny, int nz) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y, z = blockIdx.z;
    if (x < nx) dst[((size_t)y * nz + z) * nx + x] = __ldg(src + ((size_t)z * ny + y) * nx + x);
}

// texs: the texture objects of the x-layered, y-layered and 3D copies.
extern "C" __global__ void __launch_bounds__(256)
    cj_forward_lay(const unsigned long long* __restrict__ texs, float* __restrict__ out,
                   const ConeFrame* __restrict__ frames, int nx, int ny, int nz, double h, int nr,
                   int nc) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int a = blockIdx.z;
    if (col >= nc || row >= nr) return;
    Ray r;
    float acc = 0.0f;
    if (setup_ray(frames + a, row, col, nx, ny, nz, h, r)) {
        if (r.ax == 2) {
            acc = tex_ray<2>((cudaTextureObject_t)__ldg(texs + 2), r);
        } else {
            const cudaTextureObject_t t = (cudaTextureObject_t)__ldg(texs + r.ax);
            for (int i = r.first; i < r.end; ++i) {
                const float s = (float)(i - r.mid);
                const float pb = fmaf(s, r.db, r.b_mid) + 0.5f;
                const float pc = fmaf(s, r.dc, r.c_mid) + 0.5f;
                acc += tex2DLayered<float>(t, pb, pc, i);
            }
        }
        acc *= r.len;
    }
    out[((size_t)a * nr + row) * nc + col] = acc;
}
