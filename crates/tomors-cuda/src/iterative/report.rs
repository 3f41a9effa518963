//! Progress and timing reports of the GPU SIRT runs.

/// Progress of [`sirt_cuda`](crate::sirt_cuda): called after every iteration of every slab.
#[derive(Clone, Copy, Debug)]
pub struct GpuIteration {
    /// The slab (0-based) and the number of slabs.
    pub slab: (usize, usize),
    /// Iterations done on this slab (1 after the first).
    pub iteration: usize,
    /// Relative residual `‖b − A·x‖/‖b‖` of this slab.
    pub residual: f64,
}

/// Times of a [`sirt_cuda`](crate::sirt_cuda) run, summed over slabs and devices.
#[derive(Clone, Debug, Default)]
pub struct SirtStats {
    /// Slabs.
    pub slabs: usize,
    /// Iterations done (summed over slabs).
    pub iterations: usize,
    /// Forward-projection kernel time (s, CUDA events), the initial one included.
    pub forward_s: f64,
    /// Back-projection kernel time (s, CUDA events).
    pub back_s: f64,
    /// Update and residual kernels (s, CUDA events).
    pub elementwise_s: f64,
    /// Iteration loop wall time (s), summed over slabs.
    pub loop_s: f64,
    /// Setup: module, weights, uploads (wall, s), summed over slabs.
    pub setup_s: f64,
    /// Downloads of the volume (wall, s), summed over slabs.
    pub download_s: f64,
    /// Freeing device and pinned memory (wall, s).
    pub free_s: f64,
    /// The whole call (wall, s).
    pub total_s: f64,
    /// Forward projections timed.
    pub forward_count: usize,
}

impl SirtStats {
    pub(crate) fn add(&mut self, o: &SirtStats) {
        self.slabs += o.slabs;
        self.iterations += o.iterations;
        self.forward_s += o.forward_s;
        self.back_s += o.back_s;
        self.elementwise_s += o.elementwise_s;
        self.loop_s += o.loop_s;
        self.setup_s += o.setup_s;
        self.download_s += o.download_s;
        self.forward_count += o.forward_count;
        self.free_s += o.free_s;
    }
}
