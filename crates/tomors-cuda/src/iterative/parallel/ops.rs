//! Transfers, layout kernels and the forward and back projections of [`CudaJoseph`].

use super::*;

/// The stack geometry of a [`DeviceStack`]: `(slices, rows, cols, stored)`.
fn stack(v: &DeviceStack) -> Option<(usize, usize, usize, usize)> {
    match v.layout() {
        Layout::Stack {
            slices,
            rows,
            cols,
            stored,
        } => Some((slices, rows, cols, stored)),
        _ => None,
    }
}

impl CudaJoseph {
    /// The layout of a stack of `slices` planes of `rows × cols`.
    pub(super) fn stack_layout(&self, slices: usize, rows: usize, cols: usize) -> Layout {
        Layout::Stack {
            slices,
            rows,
            cols,
            stored: slices.div_ceil(self.pad) * self.pad,
        }
    }

    pub(super) fn check_slices(&self, slices: usize, what: &str) -> Result<()> {
        if slices == 0 {
            return Err(CudaError::Parameter(format!("{what}: no slices")));
        }
        if slices.div_ceil(self.pad) * self.pad > MAX_SLAB_SLICES {
            return Err(CudaError::Parameter(format!(
                "{what}: {slices} slices in one device stack (at most {MAX_SLAB_SLICES})"
            )));
        }
        Ok(())
    }

    /// A device stack of `slices` images of `rows × cols` (contents undefined).
    pub(super) fn alloc(
        &self,
        slices: usize,
        rows: usize,
        cols: usize,
        what: &str,
    ) -> Result<DeviceStack> {
        self.check_slices(slices, what)?;
        DeviceVec::uninit(&self.queue, self.stack_layout(slices, rows, cols), what)
    }

    /// A zeroed device stack of `slices` images of `rows × cols`.
    pub(super) fn alloc_zeros(
        &self,
        slices: usize,
        rows: usize,
        cols: usize,
        what: &str,
    ) -> Result<DeviceStack> {
        self.check_slices(slices, what)?;
        DeviceVec::zeros(&self.queue, self.stack_layout(slices, rows, cols), what)
    }

    /// A device volume of `slices` images (contents undefined).
    pub fn alloc_volume(&self, slices: usize) -> Result<DeviceStack> {
        self.alloc(slices, self.ny, self.nx, "a device volume")
    }

    /// A device stack of `slices` sinograms (contents undefined).
    pub fn alloc_sinograms(&self, slices: usize) -> Result<DeviceStack> {
        self.alloc(slices, self.na, self.nb, "device sinograms")
    }

    /// Queues kernel `f` of `kernels/joseph.cu` on the stream, timed as `kind`.
    pub(super) fn launch(
        &self,
        kind: KernelKind,
        f: &Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        // SAFETY: every caller passes parameters matching the kernel's
        // signature in `kernels/joseph.cu`, with device pointers into
        // buffers sized for the launch.
        unsafe { self.queue.launch(kind, f, name, grid, block, args) }
    }

    fn layout_grid(n: usize) -> (u32, u32, u32) {
        ((n.div_ceil(256)).clamp(1, 8192) as u32, 1, 1)
    }

    /// Uploads a host stack (`[slice][rows][cols]`) into `dst` (same shape),
    /// interleaving it on the device through `staging` (at least as large).
    pub(super) fn upload_into(
        &self,
        host: ArrayView3<'_, f32>,
        dst: &mut DeviceStack,
        staging: &DeviceStack,
    ) -> Result<()> {
        let Some((ns, rows, cols, stored)) = stack(dst) else {
            return Err(CudaError::Parameter("upload into a flat vector".into()));
        };
        if host.dim() != dst.dim() || staging.buffer().bytes() < dst.buffer().bytes() {
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
        self.queue.upload_f32(staging.buffer(), data)?;
        dst.touched();
        let quads = stored / 4;
        let args = [
            staging.buffer().ptr().into(),
            dst.buffer().ptr().into(),
            (ns as i32).into(),
            ((rows * cols) as i64).into(),
            (quads as i32).into(),
        ];
        self.launch(
            KernelKind::Elementwise,
            &self.f.interleave,
            "jp_interleave",
            Self::layout_grid(quads * rows * cols),
            (256, 1, 1),
            &args,
        )
    }

    /// Queues the de-interleaving of the first `ns` slices of the stack at
    /// `src` (`quads` quads of planes of `plane` floats) into `dst`
    /// (`[slice][plane]`).
    pub(super) fn deinterleave(
        &self,
        src: u64,
        dst: u64,
        ns: usize,
        plane: usize,
        quads: usize,
    ) -> Result<()> {
        let f = &self.f.deinterleave;
        self.relayout(f, "jp_deinterleave", src, dst, ns, plane, quads)
    }

    /// Queues the interleaving of `ns` flat slices at `src` (`[slice][plane]`)
    /// into the stack at `dst` (`quads` quads of planes of `plane` floats;
    /// slices from `ns` on are zero).
    pub(super) fn interleave_raw(
        &self,
        src: u64,
        dst: u64,
        ns: usize,
        plane: usize,
        quads: usize,
    ) -> Result<()> {
        let f = &self.f.interleave;
        self.relayout(f, "jp_interleave", src, dst, ns, plane, quads)
    }

    /// Queues one of the two re-layout kernels between the interleaved stack
    /// and flat slices (`jp_deinterleave`, `jp_interleave`: same arguments).
    #[allow(clippy::too_many_arguments)]
    fn relayout(
        &self,
        f: &Function,
        name: &str,
        src: u64,
        dst: u64,
        ns: usize,
        plane: usize,
        quads: usize,
    ) -> Result<()> {
        self.launch(
            KernelKind::Elementwise,
            f,
            name,
            Self::layout_grid(quads * plane),
            (256, 1, 1),
            &[
                src.into(),
                dst.into(),
                (ns as i32).into(),
                (plane as i64).into(),
                (quads as i32).into(),
            ],
        )
    }

    /// Queues a flat `[slice][row][col]` copy of the stack `src` into a new
    /// device stack of its slices (its download needs no more kernels).
    ///
    /// Errors: a flat `src`, driver and launch errors.
    pub(super) fn flat_copy(&self, src: &DeviceStack) -> Result<DeviceStack> {
        let Some((ns, rows, cols, stored)) = stack(src) else {
            return Err(CudaError::Parameter("flat copy of a flat vector".into()));
        };
        let staging = self.alloc_volume(ns)?;
        if staging.buffer().bytes() < src.buffer().bytes() {
            return Err(CudaError::Parameter(format!(
                "flat copy of a device stack of {:?} into {:?}",
                src.dim(),
                staging.dim()
            )));
        }
        self.deinterleave(
            src.buffer().ptr(),
            staging.buffer().ptr(),
            ns,
            rows * cols,
            stored / 4,
        )?;
        Ok(staging)
    }

    /// Downloads `src` into the host stack `out` (same shape), through
    /// `staging` (at least as large).
    pub(super) fn download_from(
        &self,
        src: &DeviceStack,
        staging: &DeviceStack,
        mut out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        let Some((ns, rows, cols, stored)) = stack(src) else {
            return Err(CudaError::Parameter("download of a flat vector".into()));
        };
        if out.dim() != src.dim() || staging.buffer().bytes() < src.buffer().bytes() {
            return Err(CudaError::Parameter(format!(
                "download of a device stack of {:?} into {:?}",
                src.dim(),
                out.dim()
            )));
        }
        self.deinterleave(
            src.buffer().ptr(),
            staging.buffer().ptr(),
            ns,
            rows * cols,
            stored / 4,
        )?;
        match out.as_slice_mut() {
            Some(dst) => self.queue.download_f32(staging.buffer(), dst),
            None => {
                let mut tmp = vec![0f32; ns * rows * cols];
                self.queue.download_f32(staging.buffer(), &mut tmp)?;
                out.iter_mut().zip(tmp).for_each(|(o, v)| *o = v);
                Ok(())
            }
        }
    }

    /// Checks that `v` is a stack of `rows × cols` planes in this
    /// projector's grouping; returns `(slices, stored)`.
    pub(super) fn check_stack(
        &self,
        v: &DeviceStack,
        rows: usize,
        cols: usize,
        what: &str,
    ) -> Result<(usize, usize)> {
        match stack(v) {
            Some((ns, r, c, stored))
                if (r, c) == (rows, cols)
                    && stored >= ns.div_ceil(self.pad) * self.pad
                    && Arc::ptr_eq(v.queue(), &self.queue) =>
            {
                Ok((ns, stored))
            }
            _ => Err(CudaError::Parameter(format!(
                "{what} is {:?}, expected a stack of {rows}×{cols} planes in groups of {} of \
                 this projector",
                v.layout(),
                self.pad
            ))),
        }
    }

    pub(super) fn check_volume(&self, v: &DeviceStack, what: &str) -> Result<(usize, usize)> {
        self.check_stack(v, self.ny, self.nx, what)
    }

    /// Queues the transposed copy (`[quad][x][y][4]`) of the volume at `src`
    /// (`quads` quads) into `dst`.
    pub(super) fn transpose_raw(&self, src: u64, dst: u64, quads: usize) -> Result<()> {
        self.launch(
            KernelKind::Elementwise,
            &self.f.transpose,
            "jp_transpose",
            (
                self.nx.div_ceil(32) as u32,
                self.ny.div_ceil(32) as u32,
                quads as u32,
            ),
            (32, 8, 1),
            &[
                src.into(),
                dst.into(),
                (self.nx as i32).into(),
                (self.ny as i32).into(),
            ],
        )
    }

    /// Writes the transposed copy (`[group][x][y][slice]`) of the volume `vol`
    /// into `vol_t`, which the forward projection reads for projections that
    /// step along columns.
    pub fn transpose_dev(&self, vol: &DeviceStack, vol_t: &mut DeviceStack) -> Result<()> {
        let (ns, stored) = self.check_volume(vol, "the volume")?;
        let (nt, _) = self.check_volume(vol_t, "the transposed volume")?;
        if ns != nt || vol.layout() != vol_t.layout() {
            return Err(CudaError::Parameter(
                "volume and copy differ in slices".into(),
            ));
        }
        vol_t.touched();
        self.transpose_raw(vol.buffer().ptr(), vol_t.buffer().ptr(), stored / 4)
    }

    /// Queues the forward projection of `slices` slices of the volume at `v`
    /// (transposed copy at `vt`) for the projections of `tables` into the
    /// sinograms at `out` (`tables.len` rows).
    pub(super) fn forward_raw(
        &self,
        (v, vt, out): (u64, u64, u64),
        slices: usize,
        tables: &BlockTables,
        squared: bool,
    ) -> Result<()> {
        if let Some(k) = &self.line {
            return self.line_forward_raw(k, (v, out), slices, tables, squared);
        }
        if let Some(sw) = self.sweep.as_ref().filter(|s| s.fwd && !squared) {
            return self.sweep_forward_raw(sw, (v, out), slices, tables);
        }
        let (f, name) = if squared {
            (&self.f.forward_sq, "jp_forward_sq")
        } else {
            (&self.f.forward, "jp_forward")
        };
        self.launch(
            KernelKind::Forward,
            f,
            name,
            (
                (self.nb * self.pair).div_ceil(128) as u32,
                tables.n_groups as u32,
                slices.div_ceil(self.sg) as u32,
            ),
            (128, 1, 1),
            &[
                v.into(),
                vt.into(),
                out.into(),
                tables.fp.ptr().into(),
                tables.groups.ptr().into(),
                (self.nx as i32).into(),
                (self.ny as i32).into(),
                (tables.len as i32).into(),
                (self.nb as i32).into(),
            ],
        )
    }

    /// Queues the back projection of `slices` sinograms at `sino` (the
    /// projections of `tables`) into the volume at `out`.
    pub(super) fn back_raw(
        &self,
        sino: u64,
        out: u64,
        slices: usize,
        tables: &BlockTables,
    ) -> Result<()> {
        if let Some(vb) = &self.voxel {
            return self.voxel_back_raw(vb, (sino, out), slices, tables);
        }
        if let Some(k) = &self.line {
            return self.line_back_raw(k, (sino, out), slices, tables);
        }
        if let Some(sw) = self.sweep.as_ref().filter(|s| s.bwd) {
            return self.sweep_back_raw(sw, (sino, out), slices, tables);
        }
        if let Some(q) = &self.f.back_quad {
            return self.launch(
                KernelKind::Back,
                q,
                "jp_back_quad",
                (
                    self.nx.div_ceil(32) as u32,
                    self.ny.div_ceil(32) as u32,
                    slices.div_ceil(self.bsg) as u32,
                ),
                (256, 1, 1),
                &[
                    sino.into(),
                    out.into(),
                    tables.bp.ptr().into(),
                    (self.nx as i32).into(),
                    (self.ny as i32).into(),
                    (tables.len as i32).into(),
                    (self.nb as i32).into(),
                ],
            );
        }
        self.launch(
            KernelKind::Back,
            &self.f.back,
            "jp_back",
            (
                self.nx.div_ceil(16) as u32,
                self.ny.div_ceil(16) as u32,
                slices.div_ceil(self.bsg) as u32,
            ),
            (256, 1, 1),
            &[
                sino.into(),
                out.into(),
                tables.bp.ptr().into(),
                (self.nx as i32).into(),
                (self.ny as i32).into(),
                (tables.len as i32).into(),
                (self.nb as i32).into(),
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
        let (ns, _) = self.check_volume(vol, "the volume")?;
        let (nt, _) = self.check_volume(vol_t, "the transposed volume")?;
        let (no, _) = self.check_stack(out, self.na, self.nb, "the output")?;
        if ns != no || nt != ns {
            return Err(CudaError::Parameter(format!(
                "{ns} slices projected into {no} sinograms"
            )));
        }
        out.touched();
        let ptrs = (vol.buffer().ptr(), vol_t.buffer().ptr(), out.buffer().ptr());
        self.forward_raw(ptrs, ns, self.blocks.full(), false)
    }

    /// Back projection `out = Aᵀ·sino` of device sinograms into a device
    /// volume (overwritten), queued on the stream.
    pub fn back_dev(&self, sino: &DeviceStack, out: &mut DeviceStack) -> Result<()> {
        let (ns, _) = self.check_stack(sino, self.na, self.nb, "the sinograms")?;
        let (no, _) = self.check_volume(out, "the output")?;
        if ns != no {
            return Err(CudaError::Parameter(format!(
                "{ns} sinograms back projected into {no} slices"
            )));
        }
        out.touched();
        self.back_raw(
            sino.buffer().ptr(),
            out.buffer().ptr(),
            ns,
            self.blocks.full(),
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
        let mut v = self.alloc_volume(ns)?;
        let mut vt = self.alloc_volume(ns)?;
        self.upload_into(host, &mut v, &vt)?;
        self.transpose_dev(&v, &mut vt)?;
        Ok((v, vt))
    }

    /// Uploads a host volume `[slice][y][x]` as one device vector (its
    /// transposed copy is made by the first forward projection).
    pub fn upload_domain(&self, host: ArrayView3<'_, f32>) -> Result<DeviceStack> {
        let (v, _) = self.upload_volume(host)?;
        Ok(v)
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
        let mut s = self.alloc_sinograms(ns)?;
        let staging = self.alloc_sinograms(ns)?;
        self.upload_into(host, &mut s, &staging)?;
        self.queue.stream().synchronize()?;
        Ok(s)
    }

    /// Downloads a device stack into a host array of its shape.
    pub fn download(&self, dev: &DeviceStack) -> Result<Array3<f32>> {
        let Some((ns, rows, cols, _)) = stack(dev) else {
            return dev.download_flat();
        };
        let staging = self.alloc(ns, rows, cols, "download staging")?;
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
