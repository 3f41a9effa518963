//! Transfers and the forward and back projections of [`CudaConeJoseph`].

use super::*;

impl CudaConeJoseph {
    /// Copies `data` to the start of `buf` on the stream and waits.
    pub(super) fn put<T: Copy>(&self, buf: &DeviceBuffer, data: &[T]) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.upload_async(
                0,
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
                &self.stream,
            )?;
        }
        self.stream.synchronize()
    }

    pub(super) fn alloc(&self, dim: (usize, usize, usize), what: &str) -> Result<ConeDeviceArray> {
        Ok(ConeDeviceArray {
            buf: DeviceBuffer::new(&self.ctx, dim.0 * dim.1 * dim.2 * 4, what)?,
            dim,
        })
    }

    /// A device volume `[z][y][x]` (contents undefined).
    pub fn alloc_volume(&self) -> Result<ConeDeviceArray> {
        self.alloc(self.volume_dim(), "a device volume")
    }

    /// Device projections `[angle][row][col]` (contents undefined).
    pub fn alloc_projections(&self) -> Result<ConeDeviceArray> {
        self.alloc(self.projections_dim(), "device projections")
    }

    pub(super) fn upload(&self, host: ArrayView3<'_, f32>, dst: &ConeDeviceArray) -> Result<()> {
        let owned;
        let data: &[f32] = match host.as_slice() {
            Some(s) => s,
            None => {
                owned = host.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        upload_staged(&self.ctx, &self.stream, &self.pins, &dst.buf, data)
    }

    /// Uploads a host volume `[z][y][x]` into a new device volume.
    ///
    /// Errors: a shape other than the projector's volume, driver errors.
    pub fn upload_volume(&self, host: ArrayView3<'_, f32>) -> Result<ConeDeviceArray> {
        check_dim("volume", host.dim(), self.volume_dim())?;
        let v = self.alloc_volume()?;
        self.upload(host, &v)?;
        Ok(v)
    }

    /// Uploads host projections `[angle][row][col]` into new device
    /// projections.
    ///
    /// Errors: a shape other than the geometry's, driver errors.
    pub fn upload_projections(&self, host: ArrayView3<'_, f32>) -> Result<ConeDeviceArray> {
        check_dim("projections", host.dim(), self.projections_dim())?;
        let p = self.alloc_projections()?;
        self.upload(host, &p)?;
        Ok(p)
    }

    /// Downloads a device array (after the stream's work) into a host array
    /// of its shape.
    pub fn download(&self, dev: &ConeDeviceArray) -> Result<Array3<f32>> {
        let mut out = Array3::<f32>::zeros(dev.dim);
        download_staged(
            &self.ctx,
            &self.stream,
            &self.pins,
            &dev.buf,
            out.as_slice_mut().expect("standard layout"),
        )?;
        Ok(out)
    }

    pub(super) fn launch(
        &self,
        f: &Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: every caller passes parameters matching the kernel's
        // signature in `kernels/cone_joseph.cu`, with device pointers into
        // buffers sized for the launch.
        unsafe { launch(f, name, grid, block, 0, &self.stream, args) }
    }

    pub(super) fn elementwise_grid(n: usize) -> (u32, u32, u32) {
        ((n.div_ceil(256)).clamp(1, 8192) as u32, 1, 1)
    }

    pub(super) fn check_volume(&self, v: &ConeDeviceArray, what: &str) -> Result<()> {
        check_dim(what, v.dim, self.volume_dim())
    }

    pub(super) fn check_projections(&self, p: &ConeDeviceArray, what: &str) -> Result<()> {
        check_dim(what, p.dim, self.projections_dim())
    }

    /// Launches a projector kernel (one thread per ray) on `src` → `dst`.
    pub(super) fn project(&self, f: &Function, name: &str, src: u64, dst: u64) -> Result<()> {
        // The merged back projection has its own layout: 256 threads
        // covering 32 × 8 pixels.
        let (block, tile) = if name == "cj_back_merged" {
            ((256, 1, 1), (32, 8))
        } else {
            (self.block, (self.block.0, self.block.1))
        };
        let (s, d) = (src, dst);
        let fp = self.frames.ptr();
        let (nx, ny, nz) = (
            self.volume.nx as i32,
            self.volume.ny as i32,
            self.volume.nz as i32,
        );
        let h = self.volume.voxel_size as f64;
        let (nr, nc) = (self.nr as i32, self.nc as i32);
        self.launch(
            f,
            name,
            (
                self.nc.div_ceil(tile.0 as usize) as u32,
                self.nr.div_ceil(tile.1 as usize) as u32,
                self.na as u32,
            ),
            block,
            &[
                s.into(),
                d.into(),
                fp.into(),
                nx.into(),
                ny.into(),
                nz.into(),
                h.into(),
                nr.into(),
                nc.into(),
            ],
        )
    }

    /// Forward projection `out = A·vol` of a device volume into device
    /// projections (overwritten), queued on the stream.
    ///
    /// Errors: arrays of other shapes, launch errors.
    pub fn forward_dev(&self, vol: &ConeDeviceArray, out: &mut ConeDeviceArray) -> Result<()> {
        self.check_volume(vol, "the volume")?;
        self.check_projections(out, "the output projections")?;
        if let Some((t, arr)) = self.voxel.as_ref().and_then(|v| v.vol_tex.as_ref()) {
            self.ctx.bind()?;
            arr.copy_from_device(vol.buf.ptr(), &self.stream)?;
            return self.project(&self.f.forward_tex, "cj_forward_tex", t.raw, out.buf.ptr());
        }
        self.project(&self.f.forward, "cj_forward", vol.buf.ptr(), out.buf.ptr())
    }

    /// Back projection `out = Aᵀ·proj` (the exact transpose; with
    /// [`ConeBackProjector::Voxel`] the voxel-driven `B ≈ Aᵀ`) of device
    /// projections into a device volume (overwritten), queued on the
    /// stream.
    ///
    /// Errors: arrays of other shapes, launch errors.
    pub fn back_dev(&self, proj: &ConeDeviceArray, out: &mut ConeDeviceArray) -> Result<()> {
        self.back_impl(proj, out)
    }

    pub(super) fn back_impl(&self, proj: &ConeDeviceArray, out: &ConeDeviceArray) -> Result<()> {
        self.check_projections(proj, "the projections")?;
        self.check_volume(out, "the output volume")?;
        self.ctx.bind()?;
        if let Some(vb) = &self.voxel {
            return self.voxel_back(vb, proj, out);
        }
        out.buf.fill_bytes(0, &self.stream)?;
        let (f, name) = if self.merged {
            (&self.f.back_merged, "cj_back_merged")
        } else {
            (&self.f.back, "cj_back")
        };
        self.project(f, name, proj.buf.ptr(), out.buf.ptr())
    }

    /// The voxel-driven back projection: weight and pack, then one launch
    /// of `cone_bp_tex` over every angle and the whole volume.
    pub(super) fn voxel_back(
        &self,
        vb: &VoxelBack,
        proj: &ConeDeviceArray,
        out: &ConeDeviceArray,
    ) -> Result<()> {
        let (src, w, dst) = (proj.buf.ptr(), vb.weights.ptr(), vb.tex.ptr());
        let (nr, nc) = (self.nr as i32, self.nc as i32);
        let pitch = (vb.layout.pitch_bytes / 4) as i32;
        let tpg = vb.layout.tpg as i32;
        let gf = (vb.layout.gbytes / 4) as i64;
        let n = proj.len() as i64;
        self.launch(
            &self.f.weight_pack,
            "cj_weight_pack",
            Self::elementwise_grid(proj.len()),
            (256, 1, 1),
            &[
                src.into(),
                w.into(),
                dst.into(),
                nr.into(),
                nc.into(),
                pitch.into(),
                tpg.into(),
                gf.into(),
                n.into(),
            ],
        )?;
        debug_assert_eq!(vb.textures.len(), self.na.div_ceil(vb.layout.tpg));
        vb.module.backproject(
            &self.stream,
            BpSource::Textures(vb.layout.tpg),
            out.buf.ptr(),
            &vb.geometry,
            &self.volume,
            0,
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
