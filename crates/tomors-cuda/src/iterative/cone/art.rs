//! ART and the block-parallel method on [`ConeOp`]: the rays of a
//! projection in batches whose voxel sets are disjoint
//! ([`RayBatches`](tomors_core::linalg::RayBatches)), projected and updated
//! on the device by `kernels/cone_art.cu` (one thread per ray, no atomics),
//! so tomors-core's [`solve`](tomors_core::iterative::solve) runs ART and
//! the block-parallel method resident on the device, with the Joseph pair
//! and with the voxel pair (whose rows are Joseph's, as on the CPU).
//!
//! Batch `(pr, pc)` of projection `a` holds the detector pixels
//! `(row, col)` with `row ≡ pr`, `col ≡ pc` (mod `s`). A voxel that a ray
//! touches lies within √2 voxels of the ray (bilinear taps), so two rays
//! that pass more than 2√2 voxels apart everywhere inside the volume touch
//! disjoint voxels. All rays leave the source `S`; two of a batch end on
//! detector points `P`, `Q` at least `s·σ` apart (`σ` the smallest
//! singular value of the detector's column and row steps), so the sine of
//! their angle is at least `d⊥·s·σ/R²` (`d⊥` the source's distance to the
//! detector plane, `R` its largest distance to a detector corner), and at
//! a distance `d` from `S` they are `d·sin` apart. The volume's voxels lie
//! at least `d_min = |S − C| − ρ − √2` from `S` (`C`, `ρ` the centre and
//! radius of the ball around the voxel centres, minus the reach of a tap);
//! `s` is the smallest stride with `d_min·d⊥·s·σ/R² ≥ 1.01·2√2` (the 1 %
//! covers the f32 stepping of the positions). Where no such stride exists
//! (the source within the margin of the volume) every ray is its own
//! batch.

use std::sync::OnceLock;

use tomors_core::iterative::RayFrame;
use tomors_core::linalg::RayBatches;
use tomors_core::Result as CoreResult;

use super::*;

/// Source of the cone-beam ART kernels (compiled after `cone_joseph.cu`).
pub const CONE_ART_CU: &str = include_str!("../../../kernels/cone_art.cu");

/// The cone ART kernels (compiled on first use).
pub(crate) struct ConeArtKernels {
    forward: Function,
    update: Function,
    _module: Module,
}

/// The lazily compiled cone ART kernels of a projector.
pub(crate) type ConeArtCell = OnceLock<ConeArtKernels>;

type V3 = [f64; 3];

fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// The stride of the ART batches of the projection with ray frame `f`
/// (voxel-index coordinates) on a volume of `n = (nx, ny, nz)` voxels and
/// a detector of `nr × nc` pixels (see the module text); `max(nr, nc)`
/// when no stride separates the rays.
pub fn cone_art_stride(f: &RayFrame, n: (usize, usize, usize), nr: usize, nc: usize) -> usize {
    let single = nr.max(nc).max(1);
    let (nx, ny, nz) = (n.0 as f64, n.1 as f64, n.2 as f64);
    let c = [(nx - 1.0) / 2.0, (ny - 1.0) / 2.0, (nz - 1.0) / 2.0];
    let rho = 0.5 * ((nx - 1.0).powi(2) + (ny - 1.0).powi(2) + (nz - 1.0).powi(2)).sqrt();
    let d_min = dot(sub(f.src, c), sub(f.src, c)).sqrt() - rho - std::f64::consts::SQRT_2;
    let normal = cross(f.eu, f.ev);
    let nn = dot(normal, normal).sqrt();
    let d_perp = dot(sub(f.base, f.src), normal).abs() / nn;
    let corner = |r: f64, cc: f64| {
        let p = [
            f.base[0] + cc * f.eu[0] + r * f.ev[0],
            f.base[1] + cc * f.eu[1] + r * f.ev[1],
            f.base[2] + cc * f.eu[2] + r * f.ev[2],
        ];
        dot(sub(p, f.src), sub(p, f.src))
    };
    let (lr, lc) = ((nr.max(1) - 1) as f64, (nc.max(1) - 1) as f64);
    let r2 = corner(0.0, 0.0)
        .max(corner(lr, 0.0))
        .max(corner(0.0, lc))
        .max(corner(lr, lc));
    let (g11, g22, g12) = (dot(f.eu, f.eu), dot(f.ev, f.ev), dot(f.eu, f.ev));
    let lmin = 0.5 * (g11 + g22) - ((0.5 * (g11 - g22)).powi(2) + g12 * g12).sqrt();
    let sigma = lmin.max(0.0).sqrt();
    let s = 1.01 * 2.0 * std::f64::consts::SQRT_2 * r2 / (d_min * d_perp * sigma);
    if d_min > 0.0 && s.is_finite() && s > 0.0 {
        (s.ceil().max(1.0) as usize).min(single)
    } else {
        single
    }
}

impl CudaConeJoseph {
    fn art_kernels(&self) -> Result<&ConeArtKernels> {
        if let Some(k) = self.art.get() {
            return Ok(k);
        }
        let ctx = self.queue.context();
        ctx.bind()?;
        let source = format!("{CONE_JOSEPH_CU}\n{CONE_ART_CU}");
        let (cubin, _) = cubin_cached("cone_art", &source, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(ctx, &cubin)?;
        let k = ConeArtKernels {
            forward: module.function("cj_art_forward")?,
            update: module.function("cj_art_update")?,
            _module: module,
        };
        let _ = self.art.set(k);
        self.art
            .get()
            .ok_or_else(|| CudaError::Parameter("the cone ART kernels did not load".into()))
    }

    /// The stride of the ART batches of projection `a` (see the module
    /// text of `art.rs`).
    pub fn art_stride(&self, a: usize) -> usize {
        let v = &self.volume;
        match self.frames_host.get(a) {
            Some(f) => cone_art_stride(f, (v.nx, v.ny, v.nz), self.nr, self.nc),
            None => 1,
        }
    }

    /// `(strides, batches in rows, batches in columns)` of projection `a`.
    fn art_grid(&self, a: usize) -> (usize, usize, usize) {
        let s = self.art_stride(a);
        (s, s.min(self.nr), s.min(self.nc))
    }
}

impl ConeOp<'_> {
    /// Checks the indices; returns `(s, pr, pc)`.
    fn check_batch(&self, a: usize, batch: usize) -> Result<(usize, usize, usize)> {
        let p = self.proj;
        if a >= p.na {
            return Err(CoreError::Parameter(format!(
                "projection index {a} out of range (the geometry has {})",
                p.na
            ))
            .into());
        }
        let (s, br, bc) = p.art_grid(a);
        if batch >= br * bc {
            return Err(CudaError::Parameter(format!(
                "ray batch {batch} of projection {a} out of range (it has {})",
                br * bc
            )));
        }
        Ok((s, batch / bc, batch % bc))
    }

    fn launch_batch(
        &self,
        update: bool,
        (a, s, pr, pc): (usize, usize, usize, usize),
        (src, dst): (u64, u64),
        extra: &[Arg],
    ) -> Result<()> {
        let p = self.proj;
        let k = p.art_kernels()?;
        let v = &p.volume;
        let mut args: Vec<Arg> = vec![
            src.into(),
            dst.into(),
            p.blocks.full().frames.ptr().into(),
            (a as i32).into(),
            (v.nx as i32).into(),
            (v.ny as i32).into(),
            (v.nz as i32).into(),
            (v.voxel_size as f64).into(),
            (p.nr as i32).into(),
            (p.nc as i32).into(),
            (s as i32).into(),
            (pr as i32).into(),
            (pc as i32).into(),
        ];
        args.extend_from_slice(extra);
        let (kind, f, name) = if update {
            (KernelKind::Back, &k.update, "cj_art_update")
        } else {
            (KernelKind::Forward, &k.forward, "cj_art_forward")
        };
        let cols = (p.nc - pc).div_ceil(s);
        let rows = (p.nr - pr).div_ceil(s);
        // SAFETY: the parameters of `cj_art_forward` / `cj_art_update` in
        // `kernels/cone_art.cu`; `src` and `dst` hold a volume and one
        // projection (checked by the callers), the frames all projections.
        unsafe {
            p.queue.launch(
                kind,
                f,
                name,
                (cols.div_ceil(32) as u32, rows.div_ceil(8) as u32, 1),
                (32, 8, 1),
                &args,
            )
        }
    }
}

impl RayBatches<DeviceVec, DeviceVec> for ConeOp<'_> {
    fn batches(&self, angle: usize) -> usize {
        let (_, br, bc) = self.proj.art_grid(angle);
        br * bc
    }

    fn forward_batch(
        &self,
        x: &DeviceVec,
        angle: usize,
        batch: usize,
        y: &mut DeviceVec,
    ) -> CoreResult<()> {
        let p = self.proj;
        let (s, pr, pc) = self.check_batch(angle, batch)?;
        p.check_flat(x, p.volume_dim(), "the volume")?;
        p.check_flat(y, (1, p.nr, p.nc), "the projection")?;
        y.touched();
        let ptrs = (x.buffer().ptr(), y.buffer().ptr());
        Ok(self.launch_batch(false, (angle, s, pr, pc), ptrs, &[])?)
    }

    fn update_batch(
        &self,
        r: &DeviceVec,
        angle: usize,
        batch: usize,
        lambda: f64,
        min: Option<f64>,
        max: Option<f64>,
        x: &mut DeviceVec,
    ) -> CoreResult<()> {
        let p = self.proj;
        let (s, pr, pc) = self.check_batch(angle, batch)?;
        p.check_flat(r, (1, p.nr, p.nc), "the residual")?;
        p.check_flat(x, p.volume_dim(), "the volume")?;
        x.touched();
        let lo = min.map_or(f32::NEG_INFINITY, |v| v as f32);
        let hi = max.map_or(f32::INFINITY, |v| v as f32);
        let extra = [(lambda as f32).into(), lo.into(), hi.into()];
        let ptrs = (r.buffer().ptr(), x.buffer().ptr());
        Ok(self.launch_batch(true, (angle, s, pr, pc), ptrs, &extra)?)
    }
}
