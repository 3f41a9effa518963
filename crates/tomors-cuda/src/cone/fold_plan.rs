//! What a folded FDK ([`super::fdk_fold`]) is asked to do ([`FdkFold`])
//! and how it is split ([`Plan`]): upload chunks, the early groups back
//! projected while later chunks upload, the last group's slabs.

use tomors_core::cone::{ConeVolume, FdkOptions};

use crate::cone::fdk_common::CHUNK_FLOATS;
use crate::cone::fold::{FoldShape, FoldVariant};

/// How [`CudaBackend::fdk_device`](crate::CudaBackend::fdk_device) uses the
/// folded kernel (set with
/// [`CudaBackend::set_fdk_fold`](crate::CudaBackend::set_fdk_fold)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdkFold {
    /// Use the folded pipeline where it applies (the default); false: the
    /// unfolded texture kernel after all uploads.
    pub enabled: bool,
    /// The kernel's launch shape.
    pub shape: FoldShape,
    /// Angles per back-projection launch before the last group (rounded up
    /// to whole upload chunks; 0: about 96).
    pub group: usize,
    /// Angles of the last group, back projected slab by slab (rounded up
    /// to whole chunks; 0: 45 % of the angles, so its back projection
    /// covers the downloads and host copies of the volume: 352 of 720 at
    /// 512³, 0.049 s against 0.052 s with a third on an H200).
    pub last: usize,
    /// Upper slices per slab of the last group (each with its mirror;
    /// rounded up to whole runs of the kernel's slices per thread; 0: half
    /// of `FdkOptions::slab`, or 32 when that is 0 too).
    pub slab: usize,
    /// Back project on a stream of its own, concurrently with the
    /// filtering of later chunks (without `priority`: each group in
    /// launches of `slab` upper slices). The default, with `priority`:
    /// 0.0442 s against 0.0464 s in order on the compute stream at
    /// 512³/720 on an H200 (`docs/perf-notes.md`).
    pub separate_stream: bool,
    /// Read the projections through CUDA arrays (block-linear texels,
    /// filled from the packed layout by a device copy per chunk) instead
    /// of pitched memory; needs the projections' texels twice in device
    /// memory (falls back to pitched memory when they do not fit). The
    /// same values; measured 3 % slower at 512³/720 on an H200 (the kernel
    /// is bound by the texture unit's throughput either way), so off.
    pub arrays: bool,
    /// Store the folded projections as `__half2` texels (4 bytes instead
    /// of 8; each projection scaled by a power of two that brings its
    /// largest |value| into [2^14, 2^15), so half's relative rounding,
    /// ≤ 2^-11, applies to every value): half the bytes per bilinear
    /// fetch; the texture filters in f32. The default: back projection
    /// 33.7 ms instead of 46.8 ms at 512³/720 on an H200, 9.4·10⁻⁵ from
    /// the `float2` texels on the tests' scans (`docs/perf-notes.md`).
    pub half: bool,
    /// With `separate_stream`: give the compute stream (weighting,
    /// filtering, packing) the device's greatest priority during the call,
    /// so its kernels are dispatched ahead of the back projection's
    /// pending blocks, and back project each group in one launch (the
    /// default; where the driver refuses the priority, the call runs
    /// without it).
    pub priority: bool,
    /// Blocks of 256 threads per multiprocessor the back-projection
    /// kernel is compiled to fit (a register cap; 0: none, 3 fit at 71
    /// registers; the default 4: 64 registers, no spills, back projection
    /// 32.2 ms instead of 33.7 ms with half texels on an H200).
    pub min_blocks: usize,
    /// Angles of the first early group (rounded up to whole chunks; 0:
    /// one chunk): a small first group starts the back projection after
    /// the first chunk is filtered instead of after a whole group (1.1 ms
    /// after the first upload instead of 3.2 ms at 512³/720 on an H200).
    pub first: usize,
    /// Split the last slab of the last group in two, so less is left to
    /// download and copy out after the last back projection.
    pub taper: bool,
    /// Device buffers of uploaded chunks (2 to 16; 0: enough for the
    /// largest group and the last group, so the uploads never wait for a
    /// back projection queued before a chunk's filtering).
    pub buffers: usize,
}

impl FdkFold {
    /// The kernel variant this configuration compiles.
    pub(crate) fn variant(&self) -> FoldVariant {
        FoldVariant {
            shape: self.shape,
            half: self.half,
            min_blocks: self.min_blocks,
        }
    }
}

impl Default for FdkFold {
    fn default() -> Self {
        Self {
            enabled: true,
            shape: FoldShape::default(),
            group: 0,
            last: 0,
            slab: 0,
            separate_stream: true,
            arrays: false,
            half: true,
            priority: true,
            min_blocks: 4,
            first: 0,
            taper: false,
            buffers: 0,
        }
    }
}

/// The split of one folded FDK: upload chunks, early groups, the last
/// group's slabs.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    /// Angles per upload chunk, and chunks.
    pub(super) ca: usize,
    pub(super) nchunks: usize,
    /// Chunks per early back-projection launch; chunks of the first one;
    /// early chunks.
    pub(super) group_chunks: usize,
    pub(super) first_chunks: usize,
    pub(super) early: usize,
    /// First upper slice, upper slices, upper slices per slab.
    pub(super) kmid: usize,
    pub(super) nu: usize,
    pub(super) su: usize,
    /// The last group's slabs: upper slices `k0..k1` (with their mirrors).
    pub(super) slabs: Vec<(usize, usize)>,
    /// Back projection on its own stream.
    pub(super) separate: bool,
    /// Projections in CUDA arrays.
    pub(super) arrays: bool,
    /// The compute stream at the greatest priority (with `separate`).
    pub(super) priority: bool,
    /// Device chunk buffers.
    pub(super) nraw: usize,
}

impl Plan {
    /// Device chunk buffers.
    pub(super) fn nraw(&self) -> usize {
        self.nraw
    }

    /// Whether an early group ends with chunk `i`.
    pub(super) fn ends_group(&self, i: usize) -> bool {
        let n = i + 1;
        i < self.early
            && (n == self.early
                || n == self.first_chunks
                || (n > self.first_chunks
                    && (n - self.first_chunks).is_multiple_of(self.group_chunks)))
    }

    /// Early groups.
    pub(super) fn ngroups(&self) -> usize {
        (0..self.early).filter(|&i| self.ends_group(i)).count()
    }

    pub(super) fn new(
        cfg: &FdkFold,
        chunk: usize,
        (na, nr, nc): (usize, usize, usize),
        volume: &ConeVolume,
        options: &FdkOptions,
    ) -> Self {
        let plane = (nr * nc).max(1);
        let ca0 = match chunk {
            0 => CHUNK_FLOATS / plane,
            c => c,
        }
        .clamp(1, na.max(1));
        let ca = na.div_ceil(na.div_ceil(ca0)).max(1);
        let nchunks = na.div_ceil(ca);
        let group_chunks = match cfg.group {
            0 => 96usize.div_ceil(ca),
            g => g.div_ceil(ca),
        }
        .max(1);
        let first_chunks = match cfg.first {
            0 => 1,
            f => f.div_ceil(ca).max(1),
        };
        let last_chunks = match cfg.last {
            0 => (na * 9).div_ceil(20).div_ceil(ca),
            l => l.div_ceil(ca),
        }
        .clamp(1, nchunks.max(1));
        let kmid = volume.nz / 2;
        let nu = volume.nz - kmid;
        let zb = cfg.shape.zb;
        let su = match (cfg.slab, options.slab) {
            (0, 0) => 32usize,
            (0, s) => s.div_ceil(2),
            (s, _) => s,
        }
        .div_ceil(zb)
        .max(1)
            * zb;
        let su = su.min(nu).max(1);
        let mut slabs: Vec<(usize, usize)> = (kmid..volume.nz)
            .step_by(su)
            .map(|k0| (k0, (k0 + su).min(volume.nz)))
            .collect();
        if cfg.taper {
            // The last slab in two halves of whole runs of the kernel's
            // slices per thread (when it holds two runs at least).
            let (k0, k1) = slabs.pop().expect("nu ≥ 1");
            let runs = (k1 - k0).div_ceil(zb);
            if runs >= 2 {
                let mid = k0 + runs.div_ceil(2) * zb;
                slabs.extend([(k0, mid), (mid, k1)]);
            } else {
                slabs.push((k0, k1));
            }
        }
        Self {
            ca,
            nchunks,
            group_chunks,
            first_chunks,
            early: nchunks.saturating_sub(last_chunks),
            kmid,
            nu,
            su,
            slabs,
            separate: cfg.separate_stream,
            arrays: cfg.arrays,
            priority: cfg.separate_stream && cfg.priority,
            nraw: match cfg.buffers {
                0 => (group_chunks.max(first_chunks).max(last_chunks) + 1).clamp(2, 16),
                b => b.clamp(2, 16),
            },
        }
    }
}
