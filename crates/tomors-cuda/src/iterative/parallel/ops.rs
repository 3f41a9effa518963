//! Transfers, layout kernels and the forward and back projections of [`CudaJoseph`].

use super::*;

impl CudaJoseph {
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

    /// Copies the start of `buf` into `data` after the stream's work, and waits.
    pub(super) fn get<T: Copy>(&self, buf: &DeviceBuffer, data: &mut [T]) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.download_async(
                0,
                data.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(data),
                &self.stream,
            )?;
        }
        self.stream.synchronize()
    }

    /// Uploads `data` to the start of `buf` through pinned chunks, and waits.
    pub(super) fn put_f32(&self, buf: &DeviceBuffer, data: &[f32]) -> Result<()> {
        upload_staged(&self.ctx, &self.stream, &self.pins, buf, data)
    }

    /// Downloads the start of `buf` into `out` through pinned chunks (after
    /// the stream's work), and waits.
    pub(super) fn get_f32(&self, buf: &DeviceBuffer, out: &mut [f32]) -> Result<()> {
        download_staged(&self.ctx, &self.stream, &self.pins, buf, out)
    }

    /// A device stack of `slices` images of `rows × cols` (contents undefined).
    pub(super) fn alloc(
        &self,
        slices: usize,
        rows: usize,
        cols: usize,
        what: &str,
    ) -> Result<DeviceStack> {
        if slices == 0 {
            return Err(CudaError::Parameter(format!("{what}: no slices")));
        }
        let groups = slices.div_ceil(self.pad);
        if groups * self.pad > MAX_SLAB_SLICES {
            return Err(CudaError::Parameter(format!(
                "{what}: {slices} slices in one device stack (at most {MAX_SLAB_SLICES})"
            )));
        }
        let bytes = groups * self.pad * rows * cols * 4;
        Ok(DeviceStack {
            buf: DeviceBuffer::new(&self.ctx, bytes, what)?,
            slices,
            rows,
            cols,
            sg: self.pad,
        })
    }

    /// A device volume of `slices` images (contents undefined).
    pub fn alloc_volume(&self, slices: usize) -> Result<DeviceStack> {
        self.alloc(slices, self.ny, self.nx, "a device volume")
    }

    /// A device stack of `slices` sinograms (contents undefined).
    pub fn alloc_sinograms(&self, slices: usize) -> Result<DeviceStack> {
        self.alloc(slices, self.na, self.nb, "device sinograms")
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
        // signature in `kernels/joseph.cu`, with device pointers into
        // buffers sized for the launch.
        unsafe { launch(f, name, grid, block, 0, &self.stream, args) }
    }

    pub(super) fn elementwise_grid(n: usize) -> (u32, u32, u32) {
        ((n.div_ceil(256)).clamp(1, 8192) as u32, 1, 1)
    }

    /// Uploads a host stack (`[slice][rows][cols]`) into `dst` (same shape),
    /// interleaving it on the device through `staging` (at least as large).
    pub(super) fn upload_into(
        &self,
        host: ArrayView3<'_, f32>,
        dst: &DeviceStack,
        staging: &DeviceStack,
    ) -> Result<()> {
        if host.dim() != dst.dim() || staging.len() < dst.len() {
            return Err(CudaError::Parameter(format!(
                "upload of {:?} into a device stack of {:?}",
                host.dim(),
                dst.dim()
            )));
        }
        let owned;
        let data: &[f32] = match host.as_slice() {
            Some(s) => s,
            None => {
                owned = host.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        self.put_f32(&staging.buf, data)?;
        let src = staging.buf.ptr();
        let d = dst.buf.ptr();
        let ns = dst.slices as i32;
        let plane = (dst.rows * dst.cols) as i64;
        let groups = dst.quads() as i32;
        self.launch(
            &self.f.interleave,
            "jp_interleave",
            Self::elementwise_grid(dst.quads() * dst.rows * dst.cols),
            (256, 1, 1),
            &[src.into(), d.into(), ns.into(), plane.into(), groups.into()],
        )
    }

    /// Downloads `src` into the host stack `out` (same shape), through
    /// `staging` (at least as large).
    pub(super) fn download_from(
        &self,
        src: &DeviceStack,
        staging: &DeviceStack,
        mut out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        if out.dim() != src.dim() || staging.len() < src.len() {
            return Err(CudaError::Parameter(format!(
                "download of a device stack of {:?} into {:?}",
                src.dim(),
                out.dim()
            )));
        }
        let s = src.buf.ptr();
        let d = staging.buf.ptr();
        let ns = src.slices as i32;
        let plane = (src.rows * src.cols) as i64;
        let groups = src.quads() as i32;
        self.launch(
            &self.f.deinterleave,
            "jp_deinterleave",
            Self::elementwise_grid(src.quads() * src.rows * src.cols),
            (256, 1, 1),
            &[s.into(), d.into(), ns.into(), plane.into(), groups.into()],
        )?;
        match out.as_slice_mut() {
            Some(dst) => self.get_f32(&staging.buf, dst),
            None => {
                let mut tmp = vec![0f32; src.slices * src.rows * src.cols];
                self.get_f32(&staging.buf, &mut tmp)?;
                out.iter_mut().zip(tmp).for_each(|(o, v)| *o = v);
                Ok(())
            }
        }
    }

    pub(super) fn check_volume(&self, v: &DeviceStack, what: &str) -> Result<()> {
        if v.quads() * 4 < v.slices.div_ceil(self.pad) * self.pad
            || v.rows != self.ny
            || v.cols != self.nx
        {
            return Err(CudaError::Parameter(format!(
                "{what} is a stack of {}×{} images (groups of {}), the projector's grid is {}×{} \
                 (groups of {})",
                v.rows, v.cols, v.sg, self.ny, self.nx, self.pad
            )));
        }
        Ok(())
    }

    pub(super) fn check_sinograms(&self, s: &DeviceStack, what: &str) -> Result<()> {
        if s.quads() * 4 < s.slices.div_ceil(self.pad) * self.pad
            || s.rows != self.na
            || s.cols != self.nb
        {
            return Err(CudaError::Parameter(format!(
                "{what} are {}×{} sinograms (groups of {}), the projector's geometry has {} \
                 angles × {} bins (groups of {})",
                s.rows, s.cols, s.sg, self.na, self.nb, self.pad
            )));
        }
        Ok(())
    }

    /// Writes the transposed copy (`[group][x][y][slice]`) of the volume `vol`
    /// into `vol_t`, which the forward projection reads for projections that
    /// step along columns.
    pub fn transpose_dev(&self, vol: &DeviceStack, vol_t: &mut DeviceStack) -> Result<()> {
        self.transpose_impl(vol, vol_t)
    }

    pub(super) fn transpose_impl(&self, vol: &DeviceStack, vol_t: &DeviceStack) -> Result<()> {
        self.check_volume(vol, "the volume")?;
        self.check_volume(vol_t, "the transposed volume")?;
        if vol.slices != vol_t.slices {
            return Err(CudaError::Parameter(
                "volume and copy differ in slices".into(),
            ));
        }
        let s = vol.buf.ptr();
        let d = vol_t.buf.ptr();
        let (nx, ny) = (self.nx as i32, self.ny as i32);
        self.launch(
            &self.f.transpose,
            "jp_transpose",
            (
                self.nx.div_ceil(32) as u32,
                self.ny.div_ceil(32) as u32,
                vol.quads() as u32,
            ),
            (32, 8, 1),
            &[s.into(), d.into(), nx.into(), ny.into()],
        )
    }

    pub(super) fn forward_impl(
        &self,
        vol: &DeviceStack,
        vol_t: &DeviceStack,
        out: &DeviceStack,
        squared: bool,
    ) -> Result<()> {
        self.check_volume(vol, "the volume")?;
        self.check_volume(vol_t, "the transposed volume")?;
        self.check_sinograms(out, "the output")?;
        if vol.slices != out.slices || vol_t.slices != vol.slices {
            return Err(CudaError::Parameter(format!(
                "{} slices projected into {} sinograms",
                vol.slices, out.slices
            )));
        }
        let v = vol.buf.ptr();
        let vt = vol_t.buf.ptr();
        let o = out.buf.ptr();
        let ap = self.fp_angles.ptr();
        let gp = self.fp_groups.ptr();
        let (nx, ny, na, nb) = (
            self.nx as i32,
            self.ny as i32,
            self.na as i32,
            self.nb as i32,
        );
        let (f, name) = if squared {
            (&self.f.forward_sq, "jp_forward_sq")
        } else {
            (&self.f.forward, "jp_forward")
        };
        self.launch(
            f,
            name,
            (
                (self.nb * self.pair).div_ceil(128) as u32,
                self.n_fp_groups as u32,
                vol.slices.div_ceil(self.sg) as u32,
            ),
            (128, 1, 1),
            &[
                v.into(),
                vt.into(),
                o.into(),
                ap.into(),
                gp.into(),
                nx.into(),
                ny.into(),
                na.into(),
                nb.into(),
            ],
        )
    }

    /// Forward projection `out = A·vol` of a device volume, given with its
    /// transposed copy `vol_t` (see [`CudaJoseph::transpose_dev`]), into
    /// device sinograms (overwritten), queued on the stream.
    pub fn forward_dev(
        &self,
        vol: &DeviceStack,
        vol_t: &DeviceStack,
        out: &mut DeviceStack,
    ) -> Result<()> {
        self.forward_impl(vol, vol_t, out, false)
    }

    /// Back projection `out = Aᵀ·sino` of device sinograms into a device
    /// volume (overwritten), queued on the stream.
    pub fn back_dev(&self, sino: &DeviceStack, out: &mut DeviceStack) -> Result<()> {
        self.back_impl(sino, out)
    }

    pub(super) fn back_impl(&self, sino: &DeviceStack, out: &DeviceStack) -> Result<()> {
        self.check_sinograms(sino, "the sinograms")?;
        self.check_volume(out, "the output")?;
        if sino.slices != out.slices {
            return Err(CudaError::Parameter(format!(
                "{} sinograms back projected into {} slices",
                sino.slices, out.slices
            )));
        }
        let s = sino.buf.ptr();
        let o = out.buf.ptr();
        let ap = self.bp_angles.ptr();
        let (nx, ny, na, nb) = (
            self.nx as i32,
            self.ny as i32,
            self.na as i32,
            self.nb as i32,
        );
        self.launch(
            &self.f.back,
            "jp_back",
            (
                self.nx.div_ceil(16) as u32,
                self.ny.div_ceil(16) as u32,
                sino.slices.div_ceil(self.bsg) as u32,
            ),
            (256, 1, 1),
            &[
                s.into(),
                o.into(),
                ap.into(),
                nx.into(),
                ny.into(),
                na.into(),
                nb.into(),
            ],
        )
    }

    /// Uploads a host volume `[slice][y][x]` (a new device volume and its
    /// transposed copy).
    pub fn upload_volume(&self, host: ArrayView3<'_, f32>) -> Result<(DeviceStack, DeviceStack)> {
        let (ns, ny, nx) = host.dim();
        if (ny, nx) != (self.ny, self.nx) {
            return Err(CoreError::Shape(format!(
                "volume is {:?}, expected [slices][{}][{}]",
                host.dim(),
                self.ny,
                self.nx
            ))
            .into());
        }
        let v = self.alloc_volume(ns)?;
        let mut vt = self.alloc_volume(ns)?;
        self.upload_into(host, &v, &vt)?;
        self.transpose_dev(&v, &mut vt)?;
        Ok((v, vt))
    }

    /// Uploads host sinograms `[slice][angle][bin]`.
    pub fn upload_sinograms(&self, host: ArrayView3<'_, f32>) -> Result<DeviceStack> {
        let (ns, na, nb) = host.dim();
        if (na, nb) != (self.na, self.nb) {
            return Err(CoreError::Shape(format!(
                "sinograms are {:?}, expected [slices][{}][{}]",
                host.dim(),
                self.na,
                self.nb
            ))
            .into());
        }
        let s = self.alloc_sinograms(ns)?;
        let staging = self.alloc_sinograms(ns)?;
        self.upload_into(host, &s, &staging)?;
        self.stream.synchronize()?;
        Ok(s)
    }

    /// Downloads a device stack into a host array of its shape.
    pub fn download(&self, dev: &DeviceStack) -> Result<Array3<f32>> {
        let staging = self.alloc(dev.slices, dev.rows, dev.cols, "download staging")?;
        let mut out = Array3::<f32>::zeros(dev.dim());
        self.download_from(dev, &staging, out.view_mut())?;
        Ok(out)
    }

    /// Forward projection of a host volume `[slice][y][x]` into host
    /// sinograms `[slice][angle][bin]` (overwritten).
    ///
    /// Errors: shapes that do not fit, driver and launch errors.
    pub fn forward(&self, volume: ArrayView3<'_, f32>, out: ArrayViewMut3<'_, f32>) -> Result<()> {
        let ns = volume.len_of(Axis(0));
        if out.dim() != (ns, self.na, self.nb) {
            return Err(CoreError::Shape(format!(
                "sinograms are {:?}, expected {:?}",
                out.dim(),
                (ns, self.na, self.nb)
            ))
            .into());
        }
        let (v, vt) = self.upload_volume(volume)?;
        let mut s = self.alloc_sinograms(ns)?;
        self.forward_dev(&v, &vt, &mut s)?;
        let staging = self.alloc_sinograms(ns)?;
        self.download_from(&s, &staging, out)
    }

    /// Back projection (exact transpose) of host sinograms
    /// `[slice][angle][bin]` into a host volume `[slice][y][x]` (overwritten).
    ///
    /// Errors: shapes that do not fit, driver and launch errors.
    pub fn back(&self, sinograms: ArrayView3<'_, f32>, out: ArrayViewMut3<'_, f32>) -> Result<()> {
        let ns = sinograms.len_of(Axis(0));
        if out.dim() != (ns, self.ny, self.nx) {
            return Err(CoreError::Shape(format!(
                "volume is {:?}, expected {:?}",
                out.dim(),
                (ns, self.ny, self.nx)
            ))
            .into());
        }
        let s = self.upload_sinograms(sinograms)?;
        let mut v = self.alloc_volume(ns)?;
        self.back_dev(&s, &mut v)?;
        let staging = self.alloc_volume(ns)?;
        self.download_from(&v, &staging, out)
    }
}
