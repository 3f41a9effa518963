// Reordering of device-resident projections for the FBP of arrays that
// already live on the device (fbp/engine/device.rs).

// dst[s][a][c] = src[a][r0 + s][c] for s < k: the sinograms of rows
// r0 .. r0 + k of projections src[na][nr][n].
extern "C" __global__ void proj_to_sino(const float* __restrict__ src,
                                        float* __restrict__ dst,
                                        long long na, long long nr, long long n,
                                        long long r0, long long k) {
    long long total = k * na * n;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        long long c = i % n;
        long long t = i / n;
        long long a = t % na;
        long long s = t / na;
        dst[i] = src[(a * nr + r0 + s) * n + c];
    }
}
