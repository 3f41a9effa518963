//! Packing filtered rows into texture storage (pitched memory or CUDA arrays).

use super::*;

/// Where the texels live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TexStorage {
    /// Pitch-linear device memory (row-major), written directly by the packing kernel.
    Pitch,
    /// CUDA arrays (block-linear: 2D tiles share cache lines), filled by a
    /// device-to-array copy after packing.
    #[default]
    Array,
}

#[derive(Clone, Copy, PartialEq)]
pub(super) struct TexKey {
    storage: TexStorage,
    ptr: u64,
    width: usize,
    height: usize,
    pitch: usize,
    plane: usize,
    mode: SliceMode,
    filter: TexFilter,
}

/// Geometry of the texture buffer of one slab.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TexLayout {
    pub groups: usize,
    pub pitch: usize,
    pub plane: usize,
    pub bytes: usize,
}

impl Engine {
    // ------------------------------------------------------------------ packing

    pub(crate) fn tex_layout(
        &self,
        mode: SliceMode,
        slices: usize,
        na: usize,
        n: usize,
    ) -> TexLayout {
        let tb = mode.texel_bytes();
        let pitch_bytes = round_up(n * tb, self.ctx.pitch_align.max(32));
        let plane_bytes = round_up(na * pitch_bytes, 512);
        let groups = slices.div_ceil(mode.slices());
        TexLayout {
            groups,
            pitch: pitch_bytes / tb,
            plane: plane_bytes / tb,
            bytes: groups * plane_bytes,
        }
    }

    /// Packs `slices` slices (rows at `src`, see [`Engine::filter_rows`]) into
    /// the texture buffer and makes sure texture objects exist for it.
    pub(super) fn pack(
        &mut self,
        src: (u64, i64, i32),
        slices: usize,
        na: usize,
        n: usize,
        cfg: BpConfig,
        interp: Interpolation,
    ) -> Result<u64> {
        if let KernelKind::Sweep(p) = cfg.kernel {
            return self.pack_sweep(src, slices, na, p);
        }
        if let KernelKind::Tensor(p) = cfg.kernel {
            return self.pack_tensor(src, slices, na, p);
        }
        let mode = cfg.mode;
        if na > 65535 || na > self.ctx.max_tex_height || n > self.ctx.max_tex_width {
            return Err(CudaError::Parameter(format!(
                "{na} angles × {n} bins exceed the device's texture limits ({} × {})",
                self.ctx.max_tex_height.min(65535),
                self.ctx.max_tex_width
            )));
        }
        let lay = self.tex_layout(mode, slices, na, n);
        let tex = ensure(&mut self.tex, &self.ctx, lay.bytes, "texture buffer")?;
        self.packed = (tex, lay.plane, lay.pitch);
        let (f, name) = match mode {
            SliceMode::F32 => (&self.filters.pack1, "pack1"),
            SliceMode::Float2 => (&self.filters.pack2, "pack2"),
            SliceMode::Half4 => (&self.filters.pack4, "pack4h"),
        };
        let (s, rs, pair) = src;
        let dst = tex;
        let plane = lay.plane as i64;
        let pitch = lay.pitch as i32;
        let (n_i, na_i, ns_i) = (n as i32, na as i32, slices as i32);
        // SAFETY: parameter types match pack1/pack2/pack4h.
        unsafe {
            let p = [
                s.into(),
                rs.into(),
                pair.into(),
                dst.into(),
                plane.into(),
                pitch.into(),
                n_i.into(),
                na_i.into(),
                ns_i.into(),
            ];
            launch(
                f,
                name,
                (n.div_ceil(256) as u32, na as u32, lay.groups as u32),
                (256, 1, 1),
                0,
                &self.comp,
                &p,
            )?;
        }
        // The alu kernel caches texels (point sampling) and interpolates
        // itself, except when it oversamples (linear sub-bin samples).
        let filter = match (interp, mode, cfg.kernel) {
            (_, SliceMode::F32 | SliceMode::Float2, KernelKind::Alu(p))
                if p.oversample || (p.hybrid > 0 && interp == Interpolation::Linear) =>
            {
                TexFilter::Linear
            }
            (_, SliceMode::Half4, _)
            | (Interpolation::Nearest, _, _)
            | (_, _, KernelKind::Alu(_)) => TexFilter::Point,
            (Interpolation::Linear, _, _) => TexFilter::Linear,
        };
        let key = TexKey {
            storage: self.tex_storage,
            ptr: tex,
            width: n,
            height: na,
            pitch: lay.pitch,
            plane: lay.plane,
            mode,
            filter,
        };
        let fmt = match mode {
            SliceMode::F32 => TexFormat::Float1,
            SliceMode::Float2 => TexFormat::Float2,
            SliceMode::Half4 => TexFormat::Uint2,
        };
        let tb = mode.texel_bytes();
        if self.tex_key != Some(key) || self.textures.len() < lay.groups {
            // Kernels queued earlier may still read the old textures.
            self.comp.synchronize()?;
            self.textures.clear();
            self.arrays.clear();
            for g in 0..lay.groups {
                let t = match self.tex_storage {
                    TexStorage::Pitch => Texture::pitch2d(
                        &self.ctx,
                        tex + (g * lay.plane * tb) as u64,
                        n,
                        na,
                        lay.pitch * tb,
                        fmt,
                        filter,
                    )?,
                    TexStorage::Array => {
                        let a = Array2d::new(&self.ctx, n, na, fmt)?;
                        let t = Texture::array(&self.ctx, &a, filter)?;
                        self.arrays.push(a);
                        t
                    }
                };
                self.textures.push(t);
            }
            let handles: Vec<u64> = self.textures.iter().map(|t| t.raw).collect();
            ensure(
                &mut self.texs_dev,
                &self.ctx,
                handles.len() * 8,
                "texture handles",
            )?;
            self.texs_dev
                .as_ref()
                .expect("allocated")
                .upload(&handles)?;
            self.tex_key = Some(key);
        }
        if self.tex_storage == TexStorage::Array {
            for (g, a) in self.arrays.iter().take(lay.groups).enumerate() {
                a.copy_from_device(
                    tex + (g * lay.plane * tb) as u64,
                    lay.pitch * tb,
                    &self.comp,
                )?;
            }
        }
        Ok(self.texs_dev.as_ref().expect("allocated").ptr())
    }

    // --------------------------------------------------------- back projection
}
