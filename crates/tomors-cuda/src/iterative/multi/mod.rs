//! Cone-beam iterative methods on several GPUs by the domain decomposition
//! of the volume into z-slabs (one slab per device).
//!
//! - The operator, [`CudaConeSlabs`]: one slab projector per device
//!   ([`CudaConeJoseph::slab`]: Joseph or voxel pair restricted to the
//!   slab's slices), as a tomors-core
//!   [`LinearOperator`](tomors_core::linalg::LinearOperator) whose domain
//!   is the volume split into slabs ([`SlabsVec`]) and whose range is the
//!   projections replicated on every device ([`ReplicaVec`]). A forward
//!   projection projects every slab on its device and sums the partial
//!   projections across the devices ([`Exchange`]: host-staged through
//!   pinned memory, or peer-to-peer); a back projection is local (each
//!   device back projects its copy of the projections into its slab).
//!   Reductions over the domain sum (or max) over the slabs; over the range
//!   they read the first copy, since the copies are equal.
//! - The run, [`cone_sirt_cuda_multi`]: tomors-core's
//!   [`solve`](tomors_core::iterative::solve) on that operator (SIRT,
//!   Landweber, Cimmino with either pair, SART and BLOCK-IT with the Joseph
//!   pair: one exchange per block), upload once, download once.
//!
//! Equality with one device: the slabs' partial projections are those of
//! the whole volume up to rounding (see [`CudaConeJoseph::slab`]) and are
//! added once more per ray; with two devices both copies of the sum are
//! equal bit for bit.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use ndarray::{s, Array3, ArrayView3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::CoreError;

use crate::error::{CudaError, Result};
use crate::fbp::CudaBackend;
use crate::iterative::cone::{ConeBackProjector, CudaConeJoseph};
use crate::runtime::Context;

mod exchange;
mod operator;
mod sirt;
mod vectors;

pub use sirt::{cone_sirt_cuda_multi, cone_sirt_multi_bytes};
pub use vectors::{Copies, PartsVec, ReplicaVec, Slabs, SlabsVec, Spread};

/// How the partial projections of the slabs are summed across devices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exchange {
    /// Each device's partial to pinned host memory, the others' up to each
    /// device and added there (PCIe both ways; works on any devices).
    #[default]
    HostStaged,
    /// Each device copies the others' partials from their memory
    /// (`cuMemcpyPeerAsync`: NVLink or PCIe peer-to-peer where the devices
    /// allow it, else staged by the driver) and adds them.
    Peer,
}

/// The slices of slab `s` of `nz` slices split into `p` balanced slabs.
pub fn slab_range(nz: usize, p: usize, s: usize) -> Range<usize> {
    s * nz / p..(s + 1) * nz / p
}

/// A cone-beam projector pair over several devices, the volume split into
/// z-slabs, one per device (see the module documentation).
pub struct CudaConeSlabs {
    slabs: Vec<CudaConeJoseph>,
    exchange: Exchange,
    buffers: Mutex<exchange::Buffers>,
    /// Exchanges done and the wall seconds spent in them.
    stats: Mutex<(u64, f64)>,
    peer: bool,
}

impl CudaConeSlabs {
    /// The projector of `volume` split into `devices.len()` balanced z-slabs,
    /// slab `s` on `devices[s]`, with the back projection `back` and the sum
    /// `exchange`.
    ///
    /// Errors: no device, fewer slices than devices, those of
    /// [`CudaConeJoseph::slab`].
    pub fn new(
        devices: &[&CudaBackend],
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        back: ConeBackProjector,
        exchange: Exchange,
    ) -> Result<Self> {
        let ctxs = devices
            .iter()
            .map(|d| Ok(d.lock()?.ctx.clone()))
            .collect::<Result<Vec<_>>>()?;
        Self::on_contexts(ctxs, geometry, volume, back, exchange)
    }

    /// [`CudaConeSlabs::new`] on existing device contexts (slab `s` on
    /// `ctxs[s]`).
    ///
    /// Errors: as [`CudaConeSlabs::new`].
    pub fn on_contexts(
        ctxs: Vec<Arc<Context>>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        back: ConeBackProjector,
        exchange: Exchange,
    ) -> Result<Self> {
        let p = ctxs.len();
        if p == 0 {
            return Err(CudaError::Parameter("no CUDA device selected".into()));
        }
        if volume.nz < p {
            return Err(CudaError::Parameter(format!(
                "{} slices over {p} devices: at least one slice per device",
                volume.nz
            )));
        }
        // One slab projector per device, built in parallel (module loads,
        // tables, textures).
        let built: Vec<Result<CudaConeJoseph>> = std::thread::scope(|sc| {
            let hs: Vec<_> = ctxs
                .iter()
                .enumerate()
                .map(|(s, ctx)| {
                    let ctx = ctx.clone();
                    sc.spawn(move || {
                        CudaConeJoseph::slab_on_context(
                            ctx,
                            geometry,
                            volume,
                            slab_range(volume.nz, p, s),
                            back,
                        )
                    })
                })
                .collect();
            hs.into_iter().map(join).collect()
        });
        let slabs = built.into_iter().collect::<Result<Vec<_>>>()?;
        let peer = if exchange == Exchange::Peer && p > 1 {
            let refs: Vec<&Arc<Context>> = ctxs.iter().collect();
            exchange::enable_peer_access(&refs)?
        } else {
            false
        };
        Ok(Self {
            slabs,
            exchange,
            buffers: Mutex::default(),
            stats: Mutex::new((0, 0.0)),
            peer,
        })
    }

    /// The slab projectors, in z order (slab `s` on device `s`).
    pub fn slabs(&self) -> &[CudaConeJoseph] {
        &self.slabs
    }

    /// The sum across devices.
    pub fn exchange(&self) -> Exchange {
        self.exchange
    }

    /// Whether every pair of devices has peer access ([`Exchange::Peer`]
    /// only; `false` means the driver stages the peer copies).
    pub fn peer_access(&self) -> bool {
        self.peer
    }

    /// Exchanges so far: `(sums, wall seconds in them)` (from the wait for
    /// the partial projections to the queued additions).
    pub fn exchange_stats(&self) -> (u64, f64) {
        self.stats.lock().map(|g| *g).unwrap_or((0, 0.0))
    }

    fn check_parts(&self, a: usize, b: usize) -> tomors_core::Result<()> {
        let p = self.slabs.len();
        if a != p || b != p {
            return Err(CoreError::Shape(format!(
                "vectors over {a} and {b} devices for an operator over {p}"
            )));
        }
        Ok(())
    }

    /// Uploads host projections `[angle][row][col]` to every device (the
    /// devices in parallel).
    ///
    /// Errors: a shape other than the geometry's, driver errors.
    pub fn upload_projections(&self, host: ArrayView3<'_, f32>) -> Result<ReplicaVec> {
        let parts = per_device(&self.slabs, |p| p.upload_projections(host))?;
        Ok(ReplicaVec::from_parts(parts))
    }

    /// Uploads a host volume `[z][y][x]` (the whole volume) as slabs (the
    /// devices in parallel).
    ///
    /// Errors: a shape other than the volume's, driver errors.
    pub fn upload_volume(&self, host: ArrayView3<'_, f32>) -> Result<SlabsVec> {
        let full = self.slabs[0].full_volume();
        crate::iterative::check_dim("volume", host.dim(), (full.nz, full.ny, full.nx))?;
        let parts = per_device(&self.slabs, |p| {
            p.upload_volume(host.slice(s![p.z_range(), .., ..]))
        })?;
        Ok(SlabsVec::from_parts(parts))
    }

    /// Downloads slab vectors into the whole host volume `[z][y][x]`: each
    /// slab straight into its slices of the result (the devices in
    /// parallel).
    ///
    /// Errors: a vector of another operator, driver errors.
    pub fn download_volume(&self, x: &SlabsVec) -> Result<Array3<f32>> {
        self.check_parts(x.parts.len(), x.parts.len())?;
        let full = self.slabs[0].full_volume();
        let plane = full.ny * full.nx;
        let mut out = Array3::<f32>::zeros((full.nz, full.ny, full.nx));
        let mut rest = out.as_slice_mut().expect("standard layout");
        let mut chunks = Vec::with_capacity(self.slabs.len());
        for p in &self.slabs {
            let (a, b) = rest.split_at_mut(p.z_range().len() * plane);
            chunks.push(a);
            rest = b;
        }
        let done: Vec<Result<()>> = std::thread::scope(|sc| {
            let hs: Vec<_> = x
                .parts
                .iter()
                .zip(chunks)
                .map(|(v, chunk)| sc.spawn(move || v.download_into(chunk)))
                .collect();
            hs.into_iter().map(join).collect()
        });
        done.into_iter().collect::<Result<Vec<()>>>()?;
        Ok(out)
    }

    /// Downloads the first copy of replicated projections.
    ///
    /// Errors: driver errors.
    pub fn download_projections(&self, y: &ReplicaVec) -> Result<Array3<f32>> {
        self.slabs[0].download(&y.parts[0])
    }
}

/// The result of a device thread (a panic is an error).
fn join<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    h.join()
        .unwrap_or_else(|_| Err(CudaError::Parameter("a device thread panicked".into())))
}

/// `f` on every slab projector, one thread per device; the results in
/// order.
fn per_device<T: Send>(
    slabs: &[CudaConeJoseph],
    f: impl Fn(&CudaConeJoseph) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let f = &f;
    let out: Vec<Result<T>> = std::thread::scope(|sc| {
        let hs: Vec<_> = slabs.iter().map(|p| sc.spawn(move || f(p))).collect();
        hs.into_iter().map(join).collect()
    });
    out.into_iter().collect()
}
