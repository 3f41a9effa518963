//! Cone-beam hooks of `tomors phantom` and `tomors recon`
//! (`--geometry cone`): exact cone-beam projections of the 3D Shepp–Logan
//! phantom, and FDK reconstruction on the CPU.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ndarray::{Array1, Array3, Ix3};
use tomors_core::cone::{
    fdk, project_cone, uniform_angles_inclusive, ConeGeometry, ConeVolume, FdkOptions, ScanMode,
    DEFAULT_SUBPIXELS,
};
use tomors_core::fbp::check_finite;
use tomors_core::geometry::uniform_angles;
use tomors_core::phantom::Phantom3d;
use tomors_core::Interpolation;

use super::phantom::PhantomArgs;
use super::recon::{read_npy_f32, AngleUnit, ReconArgs};
use crate::backend_select::make_cone_backend;
use crate::output::{check_target, write_npy_atomic, write_volume};

/// Beam geometry of `phantom` and `recon`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum GeometryKind {
    /// Parallel beam (FBP).
    #[default]
    Parallel,
    /// Circular cone beam with a flat detector (FDK).
    Cone,
}

/// Cone-beam options shared by `phantom` and `recon`.
#[derive(clap::Args, Clone, Debug)]
pub struct ConeArgs {
    /// Beam geometry: parallel, or cone (circular orbit, flat detector; needs
    /// --sod, --odd, --pixel-size).
    #[arg(long, value_enum, default_value_t = GeometryKind::Parallel)]
    pub geometry: GeometryKind,
    /// Cone beam: source to rotation-axis distance (world units, e.g. mm).
    #[arg(long)]
    pub sod: Option<f64>,
    /// Cone beam: rotation-axis to detector distance (world units).
    #[arg(long)]
    pub odd: Option<f64>,
    /// Cone beam: detector pixel size in world units, as one value or
    /// width,height.
    #[arg(long)]
    pub pixel_size: Option<String>,
    /// Cone beam: the principal point (where the central ray meets the
    /// detector) as col,row in pixels (default: the detector centre).
    #[arg(long, allow_hyphen_values = true)]
    pub principal_point: Option<String>,
    /// Cone beam: voxel size of the reconstruction (default: the largest
    /// whose volume the detector covers at every angle).
    #[arg(long)]
    pub voxel_size: Option<f32>,
    /// Cone beam: a short scan over π + the fan angle, weighted with Parker
    /// weights (phantom: angles over π + fan angle, both ends included).
    /// Without it, recon treats angles covering whole turns as a full scan
    /// and anything else as a short scan.
    #[arg(long)]
    pub short_scan: bool,
}

impl ConeArgs {
    /// Whether `--geometry cone` was given.
    pub fn is_cone(&self) -> bool {
        self.geometry == GeometryKind::Cone
    }

    /// The geometry for `angles` and a detector of `n_rows × n_cols`.
    pub(crate) fn geometry(
        &self,
        angles: Vec<f32>,
        n_rows: usize,
        n_cols: usize,
    ) -> Result<ConeGeometry> {
        let sod = self.sod.context("--geometry cone needs --sod")?;
        let odd = self.odd.context("--geometry cone needs --odd")?;
        let spec = self
            .pixel_size
            .as_deref()
            .context("--geometry cone needs --pixel-size")?;
        let (pu, pv) = parse_pair(spec, "--pixel-size", true)?;
        let mut g = ConeGeometry::new(angles, sod, odd, n_rows, n_cols, pu, pv)?;
        if let Some(pp) = &self.principal_point {
            let (c, r) = parse_pair(pp, "--principal-point", false)?;
            g = g.with_principal_point(c, r)?;
        }
        Ok(g)
    }

    /// The reconstruction volume: `nx = ny = n_cols`, `nz = n_rows` voxels of
    /// --voxel-size or the largest that fits.
    pub(crate) fn volume(&self, g: &ConeGeometry) -> Result<ConeVolume> {
        let (n, nz) = (g.n_cols(), g.n_rows());
        let v = match self.voxel_size {
            Some(s) => ConeVolume::new(n, n, nz, s)?,
            None => g.fitting_volume(n, n, nz)?,
        };
        g.check_volume(&v)?;
        Ok(v)
    }

    pub(crate) fn scan(&self) -> ScanMode {
        if self.short_scan {
            ScanMode::Short
        } else {
            ScanMode::Auto
        }
    }
}

/// Parses "a" (when `single` is allowed: a,a) or "a,b" into two finite numbers.
fn parse_pair(spec: &str, flag: &str, single: bool) -> Result<(f64, f64)> {
    let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
    let num = |s: &str| -> Result<f64> {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .with_context(|| format!("{flag} '{spec}': '{s}' is not a number"))
    };
    match parts[..] {
        [a] if single => {
            let a = num(a)?;
            Ok((a, a))
        }
        [a, b] => Ok((num(a)?, num(b)?)),
        _ if single => bail!("{flag} '{spec}': expected one value or two as a,b"),
        _ => bail!("{flag} '{spec}': expected two values as a,b"),
    }
}

/// `tomors phantom --geometry cone`: exact cone-beam projections of the 3D
/// modified Shepp–Logan phantom on a `size × size` detector (or `rows ×
/// size` with --rows > 1), 360° (or, with --short-scan, π + fan angle with
/// both ends), the phantom filling the default volume of `size³` voxels.
pub fn run_phantom(args: &PhantomArgs) -> Result<()> {
    let cone = &args.cone;
    if args.size < 2 {
        bail!("--size must be at least 2");
    }
    if args.photons.is_some() {
        bail!("--photons is not available with --geometry cone");
    }
    if args.angle_range != 180.0 {
        bail!(
            "--angle-range is for parallel geometry; cone-beam phantoms cover 360° \
             or, with --short-scan, π + the fan angle"
        );
    }
    let n_rows = if args.rows > 1 { args.rows } else { args.size };
    let n_angles = args
        .angles
        .unwrap_or_else(|| super::phantom::default_angles(args.size));
    // The range first needs the fan angle, which does not depend on angles.
    let probe = cone.geometry(vec![0.0, 1.0], n_rows, args.size)?;
    let angles = if cone.short_scan {
        uniform_angles_inclusive(n_angles, probe.short_scan_range())
    } else {
        uniform_angles(n_angles, 2.0 * std::f32::consts::PI)
    };
    let g = cone.geometry(angles, n_rows, args.size)?;
    let vol = cone.volume(&g)?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("{}: cannot create directory", args.out_dir.display()))?;
    let files = ["projections.npy", "angles.npy", "phantom.npy"].map(|f| args.out_dir.join(f));
    for f in &files {
        check_target(f, args.overwrite)?;
    }
    let phantom = Phantom3d::shepp_logan();
    let scale = vol.nx.min(vol.nz) as f64 * vol.voxel_size as f64 / 2.0;
    let t = Instant::now();
    let projections = project_cone(&phantom, &g, scale, DEFAULT_SUBPIXELS)?;
    tracing::info!(
        "cone-beam projections {:?} in {:.2} s (cone angle {:.2}°, fan angle {:.2}°)",
        projections.dim(),
        t.elapsed().as_secs_f64(),
        g.cone_angle().to_degrees(),
        2.0 * g.half_fan_angle().to_degrees()
    );
    let volume = phantom.rasterize(&vol.slice_grid(), vol.nz, scale, 2);
    write_npy_atomic(&files[0], &projections)?;
    write_npy_atomic(&files[1], &Array1::from(g.angles().to_vec()))?;
    write_npy_atomic(&files[2], &volume)?;
    println!(
        "wrote {} ([angle][row][col] = {:?}), {} (radians), {} ([z][y][x], voxel size {})",
        files[0].display(),
        projections.dim(),
        files[1].display(),
        files[2].display(),
        vol.voxel_size
    );
    Ok(())
}

/// `tomors recon --geometry cone`: FDK of `.npy` projections
/// `[angle][row][col]` on one GPU (the whole FDK on the device) or the CPU.
pub fn run_recon(args: &ReconArgs) -> Result<()> {
    let input = &args.input;
    let is_npy = input
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if !is_npy || args.raw_shape.is_some() {
        bail!(
            "{}: --geometry cone reads .npy projections [angle][row][col]",
            input.display()
        );
    }
    if args.slices.is_some() || args.center.is_some() {
        bail!("--slices and --center are for parallel geometry (cone beam: --principal-point)");
    }
    if args.filter.interp != Interpolation::Linear {
        bail!("--geometry cone interpolates the detector bilinearly (--interp linear)");
    }
    check_target(&args.out, args.overwrite)?;
    let (projections, g, vol) = load_projections(args)?;
    let (n_angles, n_rows, n_cols) = projections.dim();
    let filter = args.filter.fbp_options(args.slab).filter;
    let options = FdkOptions {
        filter,
        scan: args.cone.scan(),
        slab: 0,
    };
    tracing::info!(
        "FDK of {} ({n_angles} × {n_rows} × {n_cols}, cone angle {:.2}°) onto {}×{}×{} voxels of {}",
        input.display(),
        g.cone_angle().to_degrees(),
        vol.nx,
        vol.ny,
        vol.nz,
        vol.voxel_size
    );
    let backend = make_cone_backend(&args.backend)?;
    tracing::info!("backend: {}", backend.name());
    let t = Instant::now();
    let volume = fdk(backend.as_ref(), projections.view(), &g, &vol, &options)
        .with_context(|| input.display().to_string())?;
    let seconds = t.elapsed().as_secs_f64();
    tracing::info!(
        "reconstructed in {seconds:.2} s ({:.3} GU/s including filtering)",
        (vol.len() * n_angles) as f64 / seconds / 1e9
    );
    write_volume(&args.out, volume.view(), args.overwrite)?;
    println!(
        "wrote {} ([z][y][x] = {:?}, voxel size {})",
        args.out.display(),
        volume.dim(),
        vol.voxel_size
    );
    Ok(())
}

/// Reads the `.npy` projections `[angle][row][col]` of `recon --geometry
/// cone` (finite values only) and builds their geometry and the volume.
pub(crate) fn load_projections(
    args: &ReconArgs,
) -> Result<(Array3<f32>, ConeGeometry, ConeVolume)> {
    let input = &args.input;
    let projections = read_npy_f32(input)?
        .into_dimensionality::<Ix3>()
        .with_context(|| {
            format!(
                "{}: projections must be 3-D [angle][row][col]",
                input.display()
            )
        })?;
    check_finite(projections.view(), "the projections")
        .with_context(|| input.display().to_string())?;
    let (n_angles, n_rows, n_cols) = projections.dim();
    let angles = cone_angles(args, n_angles, n_rows, n_cols)?;
    let g = args
        .cone
        .geometry(angles, n_rows, n_cols)
        .with_context(|| input.display().to_string())?;
    let vol = args.cone.volume(&g)?;
    Ok((projections, g, vol))
}

/// Angles of a cone-beam reconstruction: --angles (with --angles-unit),
/// else evenly over --angle-range degrees (end excluded), else 360° (end
/// excluded) or, with --short-scan, π + fan angle with both ends.
pub(crate) fn cone_angles(
    args: &ReconArgs,
    n: usize,
    n_rows: usize,
    n_cols: usize,
) -> Result<Vec<f32>> {
    if let Some(path) = &args.angles {
        return read_angles(path, n, args.angles_unit.unwrap_or(AngleUnit::Rad));
    }
    if let Some(range) = args.angle_range {
        if !(range.is_finite() && range > 0.0) {
            bail!("--angle-range {range} must be positive");
        }
        return Ok(uniform_angles(n, range.to_radians()));
    }
    if args.cone.short_scan {
        let probe = args.cone.geometry(vec![0.0, 1.0], n_rows, n_cols)?;
        return Ok(uniform_angles_inclusive(n, probe.short_scan_range()));
    }
    Ok(uniform_angles(n, 2.0 * std::f32::consts::PI))
}

fn read_angles(path: &Path, n: usize, unit: AngleUnit) -> Result<Vec<f32>> {
    super::recon::read_angles_file(path, n, unit)
}
