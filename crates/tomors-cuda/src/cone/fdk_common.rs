//! What the FDK pipelines share: their stage times ([`FdkStats`]) and
//! buffer sizes.

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
                "; set-up {:.1} ms, first upload → first back projection {:.1} ms, \
                 → last back projection's end {:.1} ms",
                self.setup_ms, self.first_bp_ms, self.span_ms
            )?;
        }
        Ok(())
    }
}
