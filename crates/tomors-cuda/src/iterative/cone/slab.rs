//! [`CudaConeJoseph`] restricted to a z-slab of the volume (the domain
//! decomposition of cone-beam iterative methods over several devices or
//! ranks): the projector of slices `z` of a volume projects only those
//! slices and back projects into them only.
//!
//! How: the slab is a volume of `z.len()` slices whose ray frames are the
//! whole volume's shifted by `−z.start` along the slice axis (voxel-index
//! coordinates), so the unchanged kernels step every ray of the whole
//! volume and visit, of its (voxel, weight) pairs, those inside the slab:
//! a tap on a slice outside the slab reads as zero and receives nothing,
//! as in tomors-core's [`VolumeBox`](tomors_core::iterative::VolumeBox)
//! restriction. Rays that miss the slab end after their set-up (no step),
//! so the work of the slabs of a partition adds up to the work of the
//! whole. The voxel-driven back projection fills slices `z` of the whole
//! volume (the FDK kernel's slab offset).
//!
//! Equality with the whole volume: the sum over the slabs of a partition of
//! the slab forward projections is the whole volume's forward projection,
//! and the slab back projections are the slabs of the whole back
//! projection, up to the order of the additions and the f32 rounding of the
//! positions along each ray (stepped from the slab's coordinates instead of
//! the whole volume's: the position across the slice axis is rounded at a
//! smaller magnitude), a few 1e-7 relative (`tests/cone_slab_gpu.rs`
//! measures it).

use std::ops::Range;

use super::*;

/// The ray frames of the whole `volume` shifted by `-z0` slices: the frames
/// of the slab that starts at slice `z0` in its own index coordinates.
pub(super) fn slab_frames(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z0: usize,
) -> Vec<RayFrame> {
    let dz = z0 as f64;
    ray_frames(geometry, volume)
        .into_iter()
        .map(|mut f| {
            f.src[2] -= dz;
            f.base[2] -= dz;
            f
        })
        .collect()
}

impl CudaConeJoseph {
    /// The projector of slices `z` of `volume` (a z-slab) for `geometry`,
    /// with the back projection `back`, on `backend`'s device: its domain is
    /// the slab `[z.len()][ny][nx]`, its range the whole projections (the
    /// slab's part of them).
    ///
    /// Errors: an empty slab or one outside the volume; as
    /// [`CudaConeJoseph::with_back`].
    pub fn slab(
        backend: &CudaBackend,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z: Range<usize>,
        back: ConeBackProjector,
    ) -> Result<Self> {
        let ctx = backend.lock()?.ctx.clone();
        Self::build(ctx, geometry, volume, z, back)
    }

    /// [`CudaConeJoseph::slab`] on an existing device context.
    ///
    /// Errors: as [`CudaConeJoseph::slab`].
    pub fn slab_on_context(
        ctx: Arc<Context>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z: Range<usize>,
        back: ConeBackProjector,
    ) -> Result<Self> {
        Self::build(ctx, geometry, volume, z, back)
    }

    /// The slices of the whole volume this projector acts on (`0..nz` for
    /// the whole volume).
    pub fn z_range(&self) -> Range<usize> {
        self.z0..self.z0 + self.volume.nz
    }

    /// The whole volume (the slab's volume is its slices
    /// [`CudaConeJoseph::z_range`]).
    pub fn full_volume(&self) -> &ConeVolume {
        &self.full
    }

    /// The projector of slices `z` of `volume` (all of them: the whole
    /// volume) on `ctx`.
    pub(super) fn build(
        ctx: Arc<Context>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z: Range<usize>,
        back: ConeBackProjector,
    ) -> Result<Self> {
        if z.is_empty() || z.end > volume.nz {
            return Err(CudaError::Parameter(format!(
                "slab of slices {z:?} is empty or outside the {} slices of the volume",
                volume.nz
            )));
        }
        // The CPU operator's checks (source outside the volume), with its
        // error text.
        ConeJosephProjector::new(geometry, volume)?;
        let slab = ConeVolume {
            nz: z.len(),
            ..*volume
        };
        check_sizes(geometry, volume)?;
        ctx.bind()?;
        let (cubin, _) = cubin_cached(
            "cone_joseph",
            CONE_JOSEPH_CU,
            &[],
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(&ctx, &cubin)?;
        let f = Fns {
            forward: module.function("cj_forward")?,
            forward_sq: module.function("cj_forward_sq")?,
            forward_ones: module.function("cj_forward_ones")?,
            back: module.function("cj_back")?,
            back_merged: module.function("cj_back_merged")?,
            weight_pack: module.function("cj_weight_pack")?,
            forward_tex: module.function("cj_forward_tex")?,
            forward_fold: module.function("cj_forward_fold")?,
            forward_ones_fold: module.function("cj_forward_ones_fold")?,
            fold_volume: module.function("cj_fold_volume")?,
            weight_pack_fold: module.function("cj_weight_pack_fold")?,
            rot4_sum: module.function("cj_rot4_sum")?,
        };
        let queue = Queue::new(ctx)?;
        let frames_host = slab_frames(geometry, volume, z.start);
        let symmetric = z.start == 0
            && z.end == volume.nz
            && mirror_symmetric(&frames_host, volume.nz, geometry.n_rows());
        let fold = symmetric;
        let voxel_pair = back == ConeBackProjector::Voxel;
        let quarter = if z.start == 0 && z.end == volume.nz {
            quarter_turn(&frames_host, volume)
        } else {
            None
        };
        let voxel = match back {
            ConeBackProjector::Joseph => None,
            ConeBackProjector::Voxel => Some(VoxelBack::new(
                queue.context(),
                geometry,
                (volume, z.start),
                &slab,
                fold,
                queue.stream(),
            )?),
        };
        let all: Vec<usize> = (0..geometry.n_angles()).collect();
        let full = ConeBlock::new(&queue, &all, &frames_host)?;
        Ok(Self {
            queue,
            _module: module,
            f,
            volume: slab,
            na: geometry.n_angles(),
            nr: geometry.n_rows(),
            nc: geometry.n_cols(),
            frames_host,
            blocks: BlockCache::new(geometry.n_angles(), full),
            merged: true,
            voxel,
            full: *volume,
            z0: z.start,
            art: super::art::ConeArtCell::new(),
            det: None,
            symmetric,
            fold,
            quarter,
            rotate: quarter.is_some() && voxel_pair,
            deferred: std::sync::Mutex::new(Vec::new()),
        })
    }
}
