//! Back-projection modules (compiled per configuration and geometry) and their launches.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct BpKey {
    kernel: KernelKind,
    map: u32,
    spt: usize,
    pub(super) nx: usize,
    pub(super) ny: usize,
    nproj: usize,
    /// `alu` only (baked in): linear interpolation and the cache width.
    linear: bool,
    pub(super) cache_width: usize,
    /// Compiled with the test-only block counters of the hybrid kernel.
    count_paths: bool,
    /// `sweep` only: the global bin of padded row 0 (`nbp` in `cache_width`).
    blo: i64,
    /// `sweep` only: dynamic shared memory per block (its staging ring).
    pub(super) shared: usize,
}

pub(super) struct BpModule {
    module: Module,
    pub(super) func: Function,
    cmem: bool,
    consts_hash: Option<u64>,
    /// `alu`, `sweep` and `tensor`: the f64 per-projection constants and their hash.
    pub(super) dconst: Option<(DeviceBuffer, u64)>,
    /// `sweep` and `tensor`: the kernel that re-lays a slab as its entries.
    pub(super) pack: Option<Function>,
    /// `tensor` only: the kernels that zero and find the per-slice maxima.
    pub(super) maxima: Option<(Function, Function)>,
}

/// Name and source of the module that holds `cfg`'s kernel.
pub(crate) fn module_source(cfg: BpConfig) -> (&'static str, &'static str) {
    match cfg.kernel {
        KernelKind::Sweep(_) => ("backproject_sweep", SWEEP_CU),
        KernelKind::Tensor(_) => ("backproject_tensor", TENSOR_CU),
        _ => ("backproject", BACKPROJECT_CU),
    }
}

/// The `#define`s of the back-projection module of `cfg` for this geometry
/// and interpolation, with whether the module bakes in linear
/// interpolation and its cache width (`alu` only; `false, 0` otherwise).
///
/// Errors: invalid `alu` parameters.
pub(crate) fn module_defines(
    cfg: BpConfig,
    grid: &SliceGrid,
    geom: &ParallelGeometry,
    interp: Interpolation,
    min_blocks: u32,
    standard_map: u32,
) -> Result<(Defines, bool, usize)> {
    if let KernelKind::Sweep(p) = cfg.kernel {
        p.validate()?;
        cfg.check(interp)?;
        // The padded bin count stands in the cache width (the key's blo
        // holds the first padded bin).
        let (_, nbp) = padded_bins_staged(p, geom, grid);
        return Ok((sweep_defines(p, geom, grid), true, nbp));
    }
    if let KernelKind::Tensor(p) = cfg.kernel {
        p.validate()?;
        cfg.check(interp)?;
        crate::fbp::tensor::check_geometry(geom, grid)?;
        let (_, nbp) = crate::fbp::tensor::padded_bins(p, geom, grid);
        return Ok((tensor_defines(p, geom, grid), true, nbp));
    }
    let mut defines = bp_defines_mapped(cfg, grid, geom.n_angles(), min_blocks, standard_map);
    match cfg.kernel {
        KernelKind::Alu(p) => {
            p.validate()?;
            let (linear, width) = (interp == Interpolation::Linear, p.cache_width(geom, grid));
            if p.wide {
                // 32-byte entries (16 nearest) per bin and projection, and
                // the per-projection constants, in 48 KiB of static shared memory.
                let entry = if linear { 32 } else { 16 };
                let bytes = p.step as usize * (width * entry + 16);
                if bytes > 48 * 1024 {
                    return Err(CudaError::Parameter(format!(
                        "alu wide (w1): a cache of {width} bins × {} projections needs {bytes} B \
                         of shared memory, over 48 KiB for this geometry; use the half4 kernel \
                         without w1",
                        p.step
                    )));
                }
            }
            defines.retain(|(k, _)| k != "MINB");
            defines.push(("MINB".into(), p.min_blocks.to_string()));
            // Parameters that change nothing in this mode leave the
            // defines as they are (one module, one compilation).
            let p = AluParams {
                half_math: if cfg.mode == SliceMode::Half4 {
                    p.half_math
                } else {
                    0
                },
                by_block: p.by_block && p.hybrid > 0,
                hybrid_exact: p.hybrid_exact && p.hybrid > 0,
                ..p
            };
            defines.extend(alu_defines(p, linear, width, geom.n_bins()));
            Ok((defines, linear, width))
        }
        _ => Ok((defines, false, 0)),
    }
}

impl Engine {
    pub(super) fn bp_module(
        &mut self,
        cfg: BpConfig,
        grid: &SliceGrid,
        geom: &ParallelGeometry,
        interp: Interpolation,
    ) -> Result<BpKey> {
        if let KernelKind::Tensor(p) = cfg.kernel {
            crate::fbp::tensor::check_device(self.ctx.cc)?;
            crate::fbp::tensor::check_bulk(p, self.ctx.cc)?;
        }
        let (mut defines, linear, cache_width) =
            module_defines(cfg, grid, geom, interp, self.min_blocks, self.standard_map)?;
        let count_paths =
            self.count_paths && matches!(cfg.kernel, KernelKind::Alu(p) if p.hybrid > 0);
        if count_paths {
            defines.push(("COUNT_PATHS".into(), "1".into()));
        }
        let key = BpKey {
            kernel: cfg.kernel,
            map: self.standard_map,
            spt: cfg.mode.slices(),
            nx: grid.nx,
            ny: grid.ny,
            nproj: geom.n_angles(),
            linear,
            cache_width,
            count_paths,
            blo: match cfg.kernel {
                KernelKind::Sweep(p) => padded_bins(p, geom, grid).0,
                KernelKind::Tensor(p) => crate::fbp::tensor::padded_bins(p, geom, grid).0,
                _ => 0,
            },
            shared: match cfg.kernel {
                KernelKind::Sweep(p) => shared_bytes(p, geom, grid),
                KernelKind::Tensor(p) => crate::fbp::tensor::shared_bytes(p, geom, grid),
                _ => 0,
            },
        };
        if !self.bp.contains_key(&key) {
            let (name, src) = module_source(cfg);
            let (cubin, _) = cubin_cached(
                name,
                src,
                &defines,
                &self.ctx.name,
                self.ctx.cc,
                self.ctx.driver,
            )?;
            let module = Module::load(&self.ctx, &cubin)?;
            let func = module.function(cfg.kernel.symbol())?;
            if key.shared > 48 * 1024 {
                func.set_max_dynamic_shared(key.shared).map_err(|e| {
                    CudaError::Parameter(format!(
                        "{cfg}: {} B of shared memory per block for this geometry ({e}); \
                         use fewer stages (p) or a smaller block",
                        key.shared
                    ))
                })?;
            }
            let pack = match cfg.kernel {
                KernelKind::Sweep(_) => Some(module.function("pack_sweep")?),
                KernelKind::Tensor(_) => Some(module.function("pack_tensor")?),
                _ => None,
            };
            let maxima = match cfg.kernel {
                KernelKind::Tensor(_) => {
                    Some((module.function("tc_zero")?, module.function("tc_absmax")?))
                }
                _ => None,
            };
            self.bp.insert(
                key,
                BpModule {
                    module,
                    func,
                    cmem: geom.n_angles() <= MAX_CMEM_PROJECTIONS,
                    consts_hash: None,
                    dconst: None,
                    pack,
                    maxima,
                },
            );
        }
        if let KernelKind::Sweep(_) = cfg.kernel {
            self.sweep_key = Some(key);
        }
        if let KernelKind::Tensor(_) = cfg.kernel {
            self.tensor_key = Some(key);
        }
        if let KernelKind::Alu(_) | KernelKind::Sweep(_) | KernelKind::Tensor(_) = cfg.kernel {
            // The alu kernel reads its constants in f64 from a global buffer.
            let coef = projection_coefficients_f64(geom, grid);
            let bytes: Vec<u8> = coef.iter().flat_map(|v| v.to_le_bytes()).collect();
            let h = fnv1a64(&bytes);
            if !matches!(&self.bp[&key].dconst, Some((_, old)) if *old == h) {
                let buf = DeviceBuffer::new(&self.ctx, bytes.len(), "alu projection constants")?;
                self.comp.synchronize()?;
                buf.upload(&coef)?;
                self.bp.get_mut(&key).expect("present").dconst = Some((buf, h));
            }
            return Ok(key);
        }
        // Upload the per-projection constants when they changed.
        let coef = projection_coefficients(geom, grid);
        let bytes: Vec<u8> = coef.iter().flat_map(|v| v.to_le_bytes()).collect();
        let h = fnv1a64(&bytes);
        let cmem = self.bp[&key].cmem;
        let stale = self.bp[&key].consts_hash != Some(h);
        if cmem && stale {
            let n = geom.n_angles();
            let m = &self.bp[&key].module;
            m.set_global("c_c0", &coef[..n], &self.comp)?;
            m.set_global("c_cx", &coef[n..2 * n], &self.comp)?;
            m.set_global("c_cy", &coef[2 * n..], &self.comp)?;
            self.bp.get_mut(&key).expect("present").consts_hash = Some(h);
        } else if !cmem {
            ensure(
                &mut self.gconst,
                &self.ctx,
                bytes.len(),
                "projection constants",
            )?;
            self.comp.synchronize()?;
            self.gconst.as_ref().expect("allocated").upload(&coef)?;
        }
        Ok(key)
    }

    /// Launches the back projection of `slices` packed slices into `out` on the compute stream.
    pub(super) fn launch_bp(
        &mut self,
        key: BpKey,
        texs: u64,
        out: u64,
        slices: usize,
        scale: f32,
        cfg: BpConfig,
    ) -> Result<()> {
        if let KernelKind::Sweep(p) = cfg.kernel {
            return self.launch_sweep(key, p, texs, out, slices, scale);
        }
        if let KernelKind::Tensor(p) = cfg.kernel {
            return self.launch_tensor(key, p, texs, out, slices, scale);
        }
        let m = &self.bp[&key];
        let groups = match cfg.kernel {
            // Two texture groups per block.
            KernelKind::Alu(p) if p.wide => slices.div_ceil(cfg.mode.slices()).div_ceil(2),
            _ => slices.div_ceil(cfg.mode.slices()),
        };
        let tile = match cfg.kernel {
            KernelKind::Alu(p) => p.tile as usize,
            KernelKind::Sweep(_) | KernelKind::Tensor(_) => {
                unreachable!("launched by launch_sweep / launch_tensor")
            }
            _ => 16,
        };
        let grid = (
            key.nx.div_ceil(tile) as u32,
            key.ny.div_ceil(tile) as u32,
            groups as u32,
        );
        let block = (256, 1, 1);
        let (t, o, ns, sc) = (texs, out, slices as i32, scale);
        let g = self.gconst.as_ref().map_or(0, |b| b.ptr());
        let d = m.dconst.as_ref().map_or(0, |b| b.0.ptr());
        let (texels, plane, pitch) = self.packed;
        let (plane, pitch) = (plane as i64, pitch as i32);
        let mut p: Vec<Arg> = vec![t.into(), o.into(), ns.into(), sc.into()];
        if let KernelKind::Alu(_) = cfg.kernel {
            p.push(d.into());
            p.push(texels.into());
            p.push(plane.into());
            p.push(pitch.into());
        } else if !m.cmem {
            p.push(g.into());
        }
        // SAFETY: parameter types match bp_standard / bp_texopt / bp_alu.
        unsafe { launch(&m.func, cfg.kernel.symbol(), grid, block, 0, &self.comp, &p) }.map_err(
            |e| match e {
                CudaError::Launch {
                    kernel,
                    dims,
                    message,
                } => CudaError::Launch {
                    kernel: format!("{kernel} ({cfg})"),
                    dims: format!(
                        "{dims}; {} slices of {}×{} from {} angles",
                        slices, key.nx, key.ny, key.nproj
                    ),
                    message,
                },
                e => e,
            },
        )
    }

    /// Re-lays `slices` filtered slices (rows at `src`, see
    /// [`Engine::filter_rows`]) as the entries of the line-sweep module last
    /// prepared by [`Engine::bp_module`]; returns the entries' address.
    pub(super) fn pack_sweep(
        &mut self,
        src: (u64, i64, i32),
        slices: usize,
        na: usize,
        p: SweepParams,
    ) -> Result<u64> {
        let key = self.sweep_key.ok_or_else(|| {
            CudaError::Parameter("sweep: entries packed before the module was prepared".into())
        })?;
        let nbp = key.cache_width;
        let row = row_slots(p, slices);
        let bytes = na * nbp * row * 2 * p.spl as usize * 4;
        let dst = ensure(&mut self.sweep_buf, &self.ctx, bytes, "sweep entries")?;
        let m = &self.bp[&key];
        let f = m.pack.as_ref().expect("sweep module has pack_sweep");
        let l = sweep_pack_launch(p, na, nbp, slices, src, dst);
        // SAFETY: `pack_launch` gives pack_sweep's parameters; `dst` holds
        // `bytes`.
        unsafe { launch(f, l.name, l.grid, l.block, l.shared, &self.comp, &l.args)? };
        Ok(dst)
    }

    fn launch_sweep(
        &mut self,
        key: BpKey,
        p: SweepParams,
        ent: u64,
        out: u64,
        slices: usize,
        scale: f32,
    ) -> Result<()> {
        let m = &self.bp[&key];
        let d = m.dconst.as_ref().map_or(0, |b| b.0.ptr());
        let shared = key.shared as u32;
        let l = sweep_bp_launch(p, (key.nx, key.ny), slices, ent, out, scale, shared, d);
        // SAFETY: `bp_launch` gives bp_sweep's parameters; `ent` holds the
        // entries of `slices` slices.
        unsafe {
            launch(
                &m.func, l.name, l.grid, l.block, l.shared, &self.comp, &l.args,
            )
        }
    }

    /// Filters (optionally), packs and back projects one slab already in
    /// device memory at `raw` (`slices × na × n` floats) into `out`.
    pub(super) fn process_slab(
        &mut self,
        raw: u64,
        out: u64,
        slices: usize,
        filter: Option<&FilterJob>,
        job: &BpJob<'_>,
        marks: Option<(&Event, &Event)>,
    ) -> Result<()> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let rows = slices * na;
        if let Some((start, _)) = marks {
            start.record(&self.comp)?;
        }
        let src = match filter {
            Some(f) if self.gpu_fft => self.filter_rows(raw, rows, n, f, self.fft_variant)?,
            _ => (raw, n as i64, 0),
        };
        if let Some((_, mid)) = marks {
            mid.record(&self.comp)?;
        }
        let key = self.bp_module(job.cfg, job.grid, job.geom, job.interp)?;
        let texs = self.pack(src, slices, na, n, job.cfg, job.interp)?;
        self.launch_bp(key, texs, out, slices, job.scale, job.cfg)
    }

    /// The blocks of the hybrid `alu` kernels compiled with block counters
    /// ([`Engine::count_paths`]) that took the texture path and the cache
    /// path since the last call (the counters are reset).
    pub fn path_counts(&mut self) -> Result<(u64, u64)> {
        self.comp.synchronize()?;
        let (mut tex, mut cache) = (0u64, 0u64);
        for (key, m) in &self.bp {
            if !key.count_paths {
                continue;
            }
            for (name, total) in [
                ("tex_path_blocks", &mut tex),
                ("cache_path_blocks", &mut cache),
            ] {
                let mut v = [0u64];
                m.module.read_global(name, &mut v, &self.comp)?;
                *total += v[0];
                m.module.set_global(name, &[0u64], &self.comp)?;
            }
        }
        Ok((tex, cache))
    }
}
