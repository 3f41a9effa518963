//! Transfers and the forward and back projections of [`CudaConeJoseph`].

use super::*;

impl CudaConeJoseph {
    pub(super) fn alloc(&self, dim: (usize, usize, usize), what: &str) -> Result<ConeDeviceArray> {
        DeviceVec::uninit(&self.queue, Layout::Flat(dim), what)
    }

    /// A device volume `[z][y][x]` (contents undefined).
    pub fn alloc_volume(&self) -> Result<ConeDeviceArray> {
        self.alloc(self.volume_dim(), "a device volume")
    }

    /// Device projections `[angle][row][col]` (contents undefined).
    pub fn alloc_projections(&self) -> Result<ConeDeviceArray> {
        self.alloc(self.projections_dim(), "device projections")
    }

    /// Uploads a host volume `[z][y][x]` into a new device volume.
    ///
    /// Errors: a shape other than the projector's volume, driver errors.
    pub fn upload_volume(&self, host: ArrayView3<'_, f32>) -> Result<ConeDeviceArray> {
        check_dim("volume", host.dim(), self.volume_dim())?;
        DeviceVec::upload_flat(&self.queue, host, "a device volume")
    }

    /// Uploads host projections `[angle][row][col]` into new device
    /// projections.
    ///
    /// Errors: a shape other than the geometry's, driver errors.
    pub fn upload_projections(&self, host: ArrayView3<'_, f32>) -> Result<ConeDeviceArray> {
        check_dim("projections", host.dim(), self.projections_dim())?;
        DeviceVec::upload_flat(&self.queue, host, "device projections")
    }

    /// Downloads a device array (after the stream's work) into a host array
    /// of its shape.
    pub fn download(&self, dev: &ConeDeviceArray) -> Result<Array3<f32>> {
        dev.download_flat()
    }

    /// Checks that `v` is a flat array of shape `dim` on this projector's
    /// queue.
    pub(super) fn check_flat(
        &self,
        v: &ConeDeviceArray,
        dim: (usize, usize, usize),
        what: &str,
    ) -> Result<()> {
        match v.layout() {
            Layout::Flat(d) if Arc::ptr_eq(v.queue(), &self.queue) => check_dim(what, d, dim),
            other => Err(CudaError::Parameter(format!(
                "{what} is {other:?}, expected a flat array of {dim:?} of this projector"
            ))),
        }
    }

    /// Queues a projector kernel (one thread per ray, the projections of
    /// `block`) on `src` → `dst`, untimed (the caller times the whole
    /// projection).
    pub(super) fn project(
        &self,
        f: &Function,
        name: &str,
        (src, dst): (u64, u64),
        block: &ConeBlock,
    ) -> Result<()> {
        // The merged back projection has its own layout: 256 threads
        // covering 32 × 8 pixels.
        let (threads, tile) = if name == "cj_back_merged" {
            ((256, 1, 1), (32, 8))
        } else {
            (self.block, (self.block.0, self.block.1))
        };
        let args: [Arg; 9] = [
            src.into(),
            dst.into(),
            block.frames.ptr().into(),
            (self.volume.nx as i32).into(),
            (self.volume.ny as i32).into(),
            (self.volume.nz as i32).into(),
            (self.volume.voxel_size as f64).into(),
            (self.nr as i32).into(),
            (self.nc as i32).into(),
        ];
        let (gc, gr, ga) = (
            self.nc.div_ceil(tile.0 as usize) as u32,
            self.nr.div_ceil(tile.1 as usize) as u32,
            block.len as u32,
        );
        // The forward kernels take the projection from blockIdx.x when
        // compiled projection-major (`forward_index`).
        let forward = matches!(
            name,
            "cj_forward" | "cj_forward_sq" | "cj_forward_ones" | "cj_forward_tex"
        );
        let grid = if forward && self.f.angle_major {
            (ga, gc, gr)
        } else {
            (gc, gr, ga)
        };
        // SAFETY: the parameters of the projector kernels in
        // `kernels/cone_joseph.cu`; `src` and `dst` hold a volume and the
        // block's projections (checked by the callers), the frames one per
        // projection of the block; the grid order matches the module's `AM`.
        unsafe { self.queue.launch_raw(f, name, grid, threads, &args) }
    }

    /// Queues the forward projection of the volume at `vol` into the
    /// projections of `block` at `out` (squared weights: the row norms).
    pub(super) fn forward_block(
        &self,
        vol: u64,
        out: u64,
        block: &ConeBlock,
        squared: bool,
    ) -> Result<()> {
        self.queue.timed(KernelKind::Forward, || {
            if squared {
                return self.project(&self.f.forward_sq, "cj_forward_sq", (vol, out), block);
            }
            if let Some((t, arr)) = self.voxel.as_ref().and_then(|v| v.vol_tex.as_ref()) {
                self.queue.context().bind()?;
                arr.copy_from_device(vol, self.queue.stream())?;
                return self.project(&self.f.forward_tex, "cj_forward_tex", (t.raw, out), block);
            }
            self.project(&self.f.forward, "cj_forward", (vol, out), block)
        })
    }

    /// Queues the row sums `A·1` of the projections of `block` into `out`
    /// (Joseph's weights summed along each ray, no volume read; the
    /// voxel pair's forward projection is Joseph's too).
    pub(super) fn row_sums_block(&self, out: u64, block: &ConeBlock) -> Result<()> {
        self.queue.timed(KernelKind::Forward, || {
            self.project(&self.f.forward_ones, "cj_forward_ones", (0, out), block)
        })
    }

    /// Queues the back projection of the projections of `block` at `proj`
    /// into the volume at `out` (overwritten).
    ///
    /// Errors: the voxel back projection of a block other than all
    /// projections in order (not supported yet), launch errors.
    pub(super) fn back_block(
        &self,
        proj: &ConeDeviceArray,
        out: &ConeDeviceArray,
        block: &ConeBlock,
    ) -> Result<()> {
        if let Some(vb) = &self.voxel {
            if !std::ptr::eq(block, &**self.blocks.full()) {
                return Err(CoreError::Unsupported {
                    backend: "cuda".into(),
                    operation: "the voxel-driven cone back projection of a block of \
                                projections (use the Joseph pair for block methods)"
                        .into(),
                }
                .into());
            }
            return self
                .queue
                .timed(KernelKind::Back, || self.voxel_back(vb, proj, out));
        }
        if let Some(d) = &self.det {
            return self
                .queue
                .timed(KernelKind::Back, || self.back_fixed(d, proj, out, block));
        }
        self.queue.timed(KernelKind::Back, || {
            self.queue.context().bind()?;
            out.buffer().fill_bytes(0, self.queue.stream())?;
            let (f, name) = if self.merged {
                (&self.f.back_merged, "cj_back_merged")
            } else {
                (&self.f.back, "cj_back")
            };
            self.project(f, name, (proj.buffer().ptr(), out.buffer().ptr()), block)
        })
    }

    /// Forward projection `out = A·vol` of a device volume into device
    /// projections (overwritten), queued on the stream.
    ///
    /// Errors: arrays of other shapes, launch errors.
    pub fn forward_dev(&self, vol: &ConeDeviceArray, out: &mut ConeDeviceArray) -> Result<()> {
        self.check_flat(vol, self.volume_dim(), "the volume")?;
        self.check_flat(out, self.projections_dim(), "the output projections")?;
        out.touched();
        self.forward_block(
            vol.buffer().ptr(),
            out.buffer().ptr(),
            self.blocks.full(),
            false,
        )
    }

    /// Back projection `out = Aᵀ·proj` (the exact transpose; with
    /// [`ConeBackProjector::Voxel`] the voxel-driven `B ≈ Aᵀ`) of device
    /// projections into a device volume (overwritten), queued on the
    /// stream.
    ///
    /// Errors: arrays of other shapes, launch errors.
    pub fn back_dev(&self, proj: &ConeDeviceArray, out: &mut ConeDeviceArray) -> Result<()> {
        self.check_flat(proj, self.projections_dim(), "the projections")?;
        self.check_flat(out, self.volume_dim(), "the output volume")?;
        out.touched();
        self.back_block(proj, out, self.blocks.full())
    }

    /// The voxel-driven back projection: weight and pack, then one launch
    /// of `cone_bp_tex` over every angle and the whole volume (untimed: the
    /// caller times it).
    pub(super) fn voxel_back(
        &self,
        vb: &VoxelBack,
        proj: &ConeDeviceArray,
        out: &ConeDeviceArray,
    ) -> Result<()> {
        let n = proj.len();
        let args: [Arg; 9] = [
            proj.buffer().ptr().into(),
            vb.weights.ptr().into(),
            vb.tex.ptr().into(),
            (self.nr as i32).into(),
            (self.nc as i32).into(),
            ((vb.layout.pitch_bytes / 4) as i32).into(),
            (vb.layout.tpg as i32).into(),
            ((vb.layout.gbytes / 4) as i64).into(),
            (n as i64).into(),
        ];
        // SAFETY: the parameters of `cj_weight_pack`; `proj` holds all
        // projections, the texture buffer their stacked layout.
        unsafe {
            self.queue.launch_raw(
                &self.f.weight_pack,
                "cj_weight_pack",
                Queue::grid(n),
                (256, 1, 1),
                &args,
            )?;
        }
        debug_assert_eq!(vb.textures.len(), self.na.div_ceil(vb.layout.tpg));
        vb.module.backproject(
            self.queue.stream(),
            BpSource::Textures(vb.layout.tpg),
            &(0..self.nr),
            out.buffer().ptr(),
            &vb.geometry,
            &vb.full,
            vb.z0,
            self.volume.nz,
            self.na,
            false,
        )
    }

    /// Forward projection of a host volume `[z][y][x]` into host projections
    /// `[angle][row][col]`.
    ///
    /// Errors: a volume of another shape, driver and launch errors.
    pub fn forward(&self, volume: ArrayView3<'_, f32>) -> Result<Array3<f32>> {
        let v = self.upload_volume(volume)?;
        let mut p = self.alloc_projections()?;
        self.forward_dev(&v, &mut p)?;
        self.download(&p)
    }

    /// Back projection (exact transpose, or the voxel-driven one: see
    /// [`CudaConeJoseph::back_dev`]) of host projections
    /// `[angle][row][col]` into a host volume `[z][y][x]`.
    ///
    /// Errors: projections of another shape, driver and launch errors.
    pub fn back(&self, projections: ArrayView3<'_, f32>) -> Result<Array3<f32>> {
        let p = self.upload_projections(projections)?;
        let mut v = self.alloc_volume()?;
        self.back_dev(&p, &mut v)?;
        self.download(&v)
    }
}
