//! What the FDK pipelines share: their stage times ([`FdkStats`]), buffer
//! sizes, the weights and finiteness flag on the device ([`FdkWeights`])
//! and timing events.

use std::sync::Arc;

use tomors_core::cone::{ConeGeometry, FdkOptions};

use crate::cone::ConeModule;
use crate::error::Result;
use crate::fbp::engine::{Engine, FilterJob};
use crate::runtime::{Context, DeviceBuffer, Event, Stream};

/// Floats per upload chunk (about 32 MiB).
pub(crate) const CHUNK_FLOATS: usize = 8 << 20;
/// Floats per downloaded slab (about 64 MiB).
pub(crate) const SLAB_FLOATS: usize = 16 << 20;
/// Device memory left free beside the FDK buffers.
pub(crate) const SPARE_BYTES: usize = 256 << 20;

/// Stage times of one FDK, host to host.
#[derive(Clone, Debug, Default)]
pub struct FdkStats {
    /// Whether the device pipeline ran (false: the host-steps path).
    pub on_device: bool,
    /// Whether the folded kernel and the overlapped pipeline ran
    /// ([`FdkFold`](crate::FdkFold)); the back-projection time then overlaps the uploads
    /// and downloads.
    pub folded: bool,
    /// Angle chunks uploaded and filtered.
    pub chunks: usize,
    /// Slabs of z back projected and downloaded.
    pub slabs: usize,
    /// Whether the folded projections were `__half2` texels.
    pub half: bool,
    /// Whether the compute stream ran at a raised priority.
    pub priority: bool,
    /// Host copies into pinned staging (wall time, s).
    pub host_in_s: f64,
    /// Uploads (CUDA events, ms, summed over chunks).
    pub upload_ms: f64,
    /// Weighting, filtering and packing (events, ms).
    pub filter_ms: f64,
    /// Back projection (events, ms).
    pub backproject_ms: f64,
    /// Downloads (events, ms).
    pub download_ms: f64,
    /// Host copies out of pinned staging (wall time, s).
    pub host_out_s: f64,
    /// The whole call (wall time, s).
    pub total_s: f64,
    /// Folded pipeline: host wall time from the call's start to entering
    /// the pipeline (checks, host weights, buffers, ms).
    pub prep_ms: f64,
    /// Folded pipeline: host wall time from entering the pipeline to the
    /// first chunk's copy into pinned memory (set-up, ms).
    pub setup_ms: f64,
    /// Folded pipeline: from the first upload's start to the first back
    /// projection's start (events, ms).
    pub first_bp_ms: f64,
    /// Folded pipeline: from the first upload's start to the end of the
    /// last back projection (events, ms).
    pub span_ms: f64,
}

impl std::fmt::Display for FdkStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.on_device {
            return write!(f, "host steps, total {:.4} s", self.total_s);
        }
        write!(
            f,
            "{}total {:.4} s; {} chunks: host in {:.1} ms, upload {:.1} ms, filter {:.1} ms; \
             {} slabs: back projection {:.1} ms, download {:.1} ms, host out {:.1} ms",
            match (self.folded, self.half, self.priority) {
                (false, _, _) => "",
                (true, false, false) => "folded, overlapped: ",
                (true, true, false) => "folded (half texels), overlapped: ",
                (true, false, true) => "folded, overlapped, compute stream raised: ",
                (true, true, true) => "folded (half texels), overlapped, compute stream raised: ",
            },
            self.total_s,
            self.chunks,
            self.host_in_s * 1e3,
            self.upload_ms,
            self.filter_ms,
            self.slabs,
            self.backproject_ms,
            self.download_ms,
            self.host_out_s * 1e3
        )?;
        if self.folded {
            write!(
                f,
                "; before the pipeline {:.1} ms, set-up {:.1} ms, first upload → first back \
                 projection {:.1} ms, → last back projection's end {:.1} ms",
                self.prep_ms, self.setup_ms, self.first_bp_ms, self.span_ms
            )?;
        }
        Ok(())
    }
}

/// The FDK weights and the finiteness flag of one call on the device
/// (both pipelines): the cosine weights `[row][col]`, the angular weights
/// `[angle][col]` and the flat index of the first non-finite value.
pub(crate) struct FdkWeights {
    cos: DeviceBuffer,
    ang: DeviceBuffer,
    bad: DeviceBuffer,
    /// The host weights uploaded (angular, cosine).
    host: (Vec<f32>, Vec<f32>),
}

impl FdkWeights {
    /// Uploads `(angular, cosine)` and arms the flag (on `stream`).
    pub(crate) fn upload(
        ctx: &Arc<Context>,
        (angular, cosine): (&[f32], &[f32]),
        stream: &Stream,
    ) -> Result<Self> {
        let cos = DeviceBuffer::new(ctx, cosine.len() * 4, "FDK cosine weights")?;
        let ang = DeviceBuffer::new(ctx, angular.len() * 4, "FDK angular weights")?;
        cos.upload(cosine)?;
        ang.upload(angular)?;
        let bad = DeviceBuffer::new(ctx, 8, "FDK finiteness flag")?;
        bad.fill_bytes(0xFF, stream)?;
        Ok(Self {
            cos,
            ang,
            bad,
            host: (angular.to_vec(), cosine.to_vec()),
        })
    }

    /// The weights in `slot` for `(angular, cosine)`, with the flag armed:
    /// reused when the same weights were uploaded last time, else uploaded.
    pub(crate) fn refresh<'a>(
        slot: &'a mut Option<Self>,
        ctx: &Arc<Context>,
        (angular, cosine): (&[f32], &[f32]),
        stream: &Stream,
    ) -> Result<&'a Self> {
        match slot {
            Some(w) if w.host.0 == angular && w.host.1 == cosine => {
                w.bad.fill_bytes(0xFF, stream)?;
            }
            _ => {
                *slot = None;
                *slot = Some(Self::upload(ctx, (angular, cosine), stream)?);
            }
        }
        Ok(slot.as_ref().expect("set above"))
    }

    /// Weights the `k` projections at `raw` (global angles `a0..`, `nr` ×
    /// `nc`) in place and filters their rows on the engine's compute
    /// stream: the filtered rows, their stride (floats) and whether two
    /// rows share a complex row.
    pub(crate) fn weight_and_filter(
        &self,
        e: &mut Engine,
        module: &ConeModule,
        raw: u64,
        (a0, k): (usize, usize),
        (nr, nc): (usize, usize),
        job: &FilterJob,
    ) -> Result<(u64, usize, bool)> {
        module.weight(
            &e.comp,
            raw,
            self.cos.ptr(),
            self.ang.ptr(),
            a0,
            k,
            nr,
            nc,
            self.bad.ptr(),
        )?;
        let variant = e.fft_variant;
        let (rows, stride, pair) = e.filter_rows(raw, k * nr, nc, job, variant)?;
        Ok((rows, stride as usize, pair == 1))
    }

    /// Whether every weighted value was finite (after the work that set the
    /// flag has completed).
    pub(crate) fn all_finite(&self) -> Result<bool> {
        let mut flag = [0u64; 1];
        self.bad.download(&mut flag)?;
        Ok(flag[0] == u64::MAX)
    }
}

/// `n` timing events.
pub(crate) fn events(ctx: &Arc<Context>, n: usize) -> Result<Vec<Event>> {
    (0..n).map(|_| Event::new(ctx)).collect()
}

/// The events around each chunk's upload (`up0`, `up1`) and its
/// weighting, filtering and packing (`c0`, `c1`).
pub(crate) struct ChunkEvents {
    pub up0: Vec<Event>,
    pub up1: Vec<Event>,
    pub c0: Vec<Event>,
    pub c1: Vec<Event>,
}

impl ChunkEvents {
    /// The events of `n` chunks.
    pub(crate) fn new(ctx: &Arc<Context>, n: usize) -> Result<Self> {
        Ok(Self {
            up0: events(ctx, n)?,
            up1: events(ctx, n)?,
            c0: events(ctx, n)?,
            c1: events(ctx, n)?,
        })
    }

    /// Adds the summed upload and filter times to `stats`.
    pub(crate) fn add_to(&self, stats: &mut FdkStats) -> Result<()> {
        stats.upload_ms += summed_ms(&self.up0, &self.up1)?;
        stats.filter_ms += summed_ms(&self.c0, &self.c1)?;
        Ok(())
    }
}

/// The FDK filter of `options` for `geometry`'s detector.
pub(crate) fn filter_job(geometry: &ConeGeometry, options: &FdkOptions) -> FilterJob {
    FilterJob {
        spec: options.filter,
        bin_width: geometry.pixel_u_at_axis() as f32,
    }
}

/// Milliseconds between each pair of `start[i]` and `end[i]`, summed.
pub(crate) fn summed_ms<E: std::borrow::Borrow<Event>>(start: &[E], end: &[E]) -> Result<f64> {
    start
        .iter()
        .zip(end)
        .map(|(a, b)| a.borrow().elapsed_ms(b.borrow()).map(f64::from))
        .sum()
}
