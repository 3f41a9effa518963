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

    /// [`CudaConeJoseph::upload_projections`] on a helper thread and a
    /// stream of its own while `meanwhile` runs on this thread (queuing the
    /// weights, say); returns both. The projector's stream is not ordered
    /// with the upload: nothing queued on it may use the projections before
    /// this returns.
    ///
    /// Errors: projections of another shape, driver errors.
    pub(crate) fn upload_projections_during<R>(
        &self,
        host: ArrayView3<'_, f32>,
        meanwhile: impl FnOnce() -> R,
    ) -> Result<(ConeDeviceArray, R)> {
        check_dim("projections", host.dim(), self.projections_dim())?;
        let v = DeviceVec::uninit(&self.queue, Layout::Flat(host.dim()), "device projections")?;
        let owned;
        let data: &[f32] = match host.as_slice() {
            Some(s) => s,
            None => {
                owned = host.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        let ctx = self.queue.context().clone();
        let buf = v.buffer();
        let (up, r) = std::thread::scope(|sc| {
            let h = sc.spawn(move || -> Result<()> {
                let mut ph = crate::iterative::Phases::start("cone upload thread");
                let side = Stream::new(&ctx)?;
                crate::iterative::staging::upload_staged(&ctx, &side, buf, data)?;
                ph.mark("upload");
                Ok(())
            });
            let r = meanwhile();
            (h.join(), r)
        });
        up.map_err(|_| CudaError::Parameter("the upload thread panicked".into()))??;
        Ok((v, r))
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
            (BLOCK, (BLOCK.0, BLOCK.1))
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
        // The folded kernels cover the first half of the rows (each thread
        // also writes the mirrored row).
        let folded = matches!(name, "cj_forward_fold" | "cj_forward_ones_fold");
        let rows = if folded { self.nr.div_ceil(2) } else { self.nr };
        let (gc, gr, ga) = (
            self.nc.div_ceil(tile.0 as usize) as u32,
            rows.div_ceil(tile.1 as usize) as u32,
            block.len as u32,
        );
        // The forward kernels take the projection from blockIdx.x
        // (`forward_index`: projection-major).
        let forward = folded
            || matches!(
                name,
                "cj_forward" | "cj_forward_sq" | "cj_forward_ones" | "cj_forward_tex"
            );
        let grid = if forward { (ga, gc, gr) } else { (gc, gr, ga) };
        // SAFETY: the parameters of the projector kernels in
        // `kernels/cone_joseph.cu`; `src` and `dst` hold a volume and the
        // block's projections (checked by the callers), the frames one per
        // projection of the block; the grid order is `forward_index`'s.
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
            match self.voxel.as_ref().and_then(|v| v.vol_tex.as_ref()) {
                Some(VolTex::Plain(t, arr)) => {
                    self.queue.context().bind()?;
                    arr.copy_from_device(vol, self.queue.stream())?;
                    self.project(&self.f.forward_tex, "cj_forward_tex", (t.raw, out), block)
                }
                Some(VolTex::Folded(t, arr, buf)) => {
                    self.fold_volume(vol, buf)?;
                    arr.copy_from_device(buf.ptr(), self.queue.stream())?;
                    self.project(&self.f.forward_fold, "cj_forward_fold", (t.raw, out), block)
                }
                None => self.project(&self.f.forward, "cj_forward", (vol, out), block),
            }
        })
    }

    /// Queues the folding of the volume at `vol` about its middle plane
    /// into `buf` (`cj_fold_volume`: `float2` texels of slice `lo + j` and
    /// its mirror `hi − j`).
    fn fold_volume(&self, vol: u64, buf: &DeviceBuffer) -> Result<()> {
        let v = &self.volume;
        let plane = v.nx * v.ny;
        let n = (v.nz / 2 + 1) * plane;
        let args: [Arg; 5] = [
            vol.into(),
            buf.ptr().into(),
            (v.nz as i32).into(),
            (plane as i64).into(),
            (n as i64).into(),
        ];
        self.queue.context().bind()?;
        // SAFETY: the parameters of `cj_fold_volume`; `vol` holds the
        // volume, `buf` its folded copy (`VolTex::new`).
        unsafe {
            self.queue.launch_raw(
                &self.f.fold_volume,
                "cj_fold_volume",
                Queue::grid(n),
                (256, 1, 1),
                &args,
            )
        }
    }

    /// Queues the row sums `A·1` of the projections of `block` into `out`
    /// (Joseph's weights summed along each ray, no volume read; the
    /// voxel pair's forward projection is Joseph's too).
    pub(super) fn row_sums_block(&self, out: u64, block: &ConeBlock) -> Result<()> {
        self.queue.timed(KernelKind::Forward, || {
            if self.fold {
                return self.project(
                    &self.f.forward_ones_fold,
                    "cj_forward_ones_fold",
                    (0, out),
                    block,
                );
            }
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
        if let Some(fb) = &vb.fold {
            return self.voxel_back_fold(vb, fb, proj.buffer().ptr(), self.na, out.buffer().ptr());
        }
        let st = vb.stack.as_ref().ok_or_else(|| {
            CudaError::Parameter("the voxel back projection has no texture layout".into())
        })?;
        let n = proj.len();
        let args: [Arg; 9] = [
            proj.buffer().ptr().into(),
            vb.weights.ptr().into(),
            st.tex.ptr().into(),
            (self.nr as i32).into(),
            (self.nc as i32).into(),
            ((st.layout.pitch_bytes / 4) as i32).into(),
            (st.layout.tpg as i32).into(),
            ((st.layout.gbytes / 4) as i64).into(),
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
        debug_assert_eq!(st.textures.len(), self.na.div_ceil(st.layout.tpg));
        st.module.backproject(
            self.queue.stream(),
            BpSource::Textures(st.layout.tpg),
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

    /// The folded voxel-driven back projection (whole volume) of the first
    /// `nang` projections at `src` (`0`: projections of ones) into the
    /// volume at `out` (overwritten): weight and fold-pack
    /// (`cj_weight_pack_fold`), then one launch of `cone_bp_fold` over
    /// those angles and the upper half of the slices with their mirrors.
    fn voxel_back_fold(
        &self,
        vb: &VoxelBack,
        fb: &FoldBack,
        src: u64,
        nang: usize,
        out: u64,
    ) -> Result<()> {
        let l = &fb.layout;
        debug_assert_eq!(fb.textures.len(), l.groups(self.na));
        if let Some(hp) = &fb.half {
            self.pack_half(hp, vb.weights.ptr(), l, fb.tex.ptr(), src, nang)?;
            let nz = vb.full.nz;
            return fb.module.backproject(
                self.queue.stream(),
                out,
                &vb.geometry,
                &vb.full,
                l,
                &hp.scale(),
                (0, nang),
                (nz / 2, nz - nz / 2),
                false,
            );
        }
        let n = nang * l.h * self.nc;
        let args: [Arg; 12] = [
            src.into(),
            vb.weights.ptr().into(),
            fb.tex.ptr().into(),
            (self.nr as i32).into(),
            (self.nc as i32).into(),
            ((l.pitch_bytes / 8) as i32).into(),
            (l.tpg as i32).into(),
            ((l.gbytes / 8) as i64).into(),
            (l.h as i32).into(),
            (l.a_row as i32).into(),
            (l.s_sum as i32).into(),
            (n as i64).into(),
        ];
        // SAFETY: the parameters of `cj_weight_pack_fold`; `src` holds the
        // first `nang` projections (or is null: ones), `fb.tex` the folded
        // layout of all.
        unsafe {
            self.queue.launch_raw(
                &self.f.weight_pack_fold,
                "cj_weight_pack_fold",
                Queue::grid(n),
                (256, 1, 1),
                &args,
            )?;
        }
        let nz = vb.full.nz;
        fb.module.backproject(
            self.queue.stream(),
            out,
            &vb.geometry,
            &vb.full,
            l,
            &FoldScale::default(),
            (0, nang),
            (nz / 2, nz - nz / 2),
            false,
        )
    }

    /// The voxel pair's column sums `B·1` through the quarter-turn symmetry
    /// ([`CudaConeJoseph::set_rotation`]): the folded back projection of
    /// ones over the first `quarter` projections, then the sum of its four
    /// quarter turns (`cj_rot4_sum`). `None` without the folded back
    /// projection.
    pub(super) fn column_sums_quarter(&self, quarter: usize) -> Result<Option<ConeDeviceArray>> {
        let Some(vb) = self.voxel.as_ref() else {
            return Ok(None);
        };
        let Some(fb) = vb.fold.as_ref() else {
            return Ok(None);
        };
        let q = self.alloc(self.volume_dim(), "the column sums of a quarter")?;
        let out = self.alloc(self.volume_dim(), "column sums")?;
        let v = &self.volume;
        let total = v.len();
        let args: [Arg; 4] = [
            q.buffer().ptr().into(),
            out.buffer().ptr().into(),
            (v.nx as i32).into(),
            (total as i64).into(),
        ];
        self.queue.timed(KernelKind::Back, || {
            self.voxel_back_fold(vb, fb, 0, quarter, q.buffer().ptr())?;
            // SAFETY: the parameters of `cj_rot4_sum`; `q` and `out` hold a
            // volume of nx = ny (`quarter_turn`).
            unsafe {
                self.queue.launch_raw(
                    &self.f.rot4_sum,
                    "cj_rot4_sum",
                    Queue::grid(total),
                    (256, 1, 1),
                    &args,
                )
            }
        })?;
        // Freed after the setup: here `cuMemFree` would wait for the upload
        // beside the weights. One at most is kept (an earlier call's is
        // freed now).
        let mut d = self
            .deferred
            .lock()
            .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
        d.clear();
        d.push(q);
        Ok(Some(out))
    }

    /// Frees the temporaries of the weights kept by the setup (waits for the
    /// device).
    ///
    /// Errors: a poisoned lock.
    pub(crate) fn release_deferred(&self) -> Result<()> {
        self.deferred
            .lock()
            .map_err(|_| CudaError::Parameter("poisoned lock".into()))?
            .clear();
        Ok(())
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
