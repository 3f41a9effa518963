//! `tomors demo`: phantom → exact projections → FBP → PNG previews,
//! quality figures and speed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::{s, Array2, ArrayView2, Axis};
use plotters::style::RGBColor;
use tomors_core::fbp::{fbp_sinograms_with_progress, projections_to_sinograms};
use tomors_core::metrics::{disc_mask, line_profile, nrmse, psnr, ssim};
use tomors_core::SliceGrid;

use super::args::FilterArgs;
use super::phantom::{default_angles, make_phantom};
use crate::backend_select::{make_backend, BackendArgs};
use crate::plot::{save_profile, Series};
use crate::progress;

/// Arguments of `tomors demo`.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Phantom size n: n³ voxels from n × n detector pixels.
    #[arg(long, default_value_t = 256)]
    pub size: usize,
    /// Number of projections over [0, π) (default: ⌈π/2 · n⌉).
    #[arg(long)]
    pub angles: Option<usize>,
    /// Directory for the PNG previews.
    #[arg(long, default_value = "demo-out")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Display window of the previews: the soft-tissue range of the phantom.
const WINDOW: (f32, f32) = (0.0, 0.5);

/// Runs `tomors demo`.
pub fn run(args: DemoArgs) -> Result<()> {
    let n = args.size;
    if n < 8 {
        bail!("--size must be at least 8");
    }
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("{}: cannot create directory", args.out_dir.display()))?;
    let n_angles = args.angles.unwrap_or_else(|| default_angles(n));
    let backend = make_backend(&args.backend)?;

    let t = Instant::now();
    let spinner = progress::spinner("projecting the phantom");
    let data = make_phantom(n, n_angles, std::f32::consts::PI, n)?;
    spinner.finish_and_clear();
    let t_phantom = t.elapsed().as_secs_f64();
    let geometry = &data.geometry;
    let grid = SliceGrid::for_geometry(geometry);
    let sinograms = projections_to_sinograms(data.projections.view(), 0..n)?;

    let options = args.filter.spec(None).options()?;
    let bar = progress::bar(n as u64, "reconstructing", "slices");
    let t = Instant::now();
    let volume = fbp_sinograms_with_progress(
        backend.as_ref(),
        sinograms.view(),
        geometry,
        &grid,
        &options,
        &mut |done, _| {
            bar.set_position(done as u64);
            true
        },
    )?;
    bar.finish_and_clear();
    let t_recon = t.elapsed().as_secs_f64();
    let gus = (n * n * n * n_angles) as f64 / t_recon / 1e9;

    // Orthogonal centre slices of the reconstruction and the phantom.
    let c = n / 2;
    let views = |v: &ndarray::Array3<f32>| -> [Array2<f32>; 3] {
        [
            v.index_axis(Axis(0), c).to_owned(),
            v.index_axis(Axis(1), c).slice(s![..;-1, ..]).to_owned(),
            v.index_axis(Axis(2), c).slice(s![..;-1, ..]).to_owned(),
        ]
    };
    let recon_views = views(&volume);
    let phantom_views = views(&data.volume);
    let names = ["xy", "xz", "yz"];
    let mut files = Vec::new();
    for ((name, r), p) in names.iter().zip(&recon_views).zip(&phantom_views) {
        let path = args.out_dir.join(format!("slice_{name}.png"));
        tomors_io::preview::write_gray_row(&path, &[p.view(), r.view()], WINDOW)?;
        files.push(path);
    }

    // Quality of the central slice inside the reconstructed disc.
    let mask = disc_mask(n, n, 0.45);
    let (rec, ph) = (recon_views[0].view(), phantom_views[0].view());
    let e = nrmse(rec, ph, Some(&mask))?;
    let p = psnr(rec, ph, Some(&mask))?;
    let q = ssim(rec, ph)?;

    // Profiles: vertically through the centre of the xy slice, and along z.
    let profile = |img: ArrayView2<'_, f32>| {
        line_profile(img, (c as f64, 0.0), (c as f64, (n - 1) as f64), n)
    };
    let path = args.out_dir.join("profile.png");
    let (pr, pp) = (profile(rec)?, profile(ph)?);
    let (zr, zp) = (
        profile(recon_views[1].view())?,
        profile(phantom_views[1].view())?,
    );
    save_profile(
        &path,
        &format!("x = {c}: xy slice (top to bottom) and xz slice (z from top)"),
        "pixel along the line",
        &[
            Series {
                label: "phantom, xy",
                values: &pp,
                color: RGBColor(0, 0, 0),
            },
            Series {
                label: "FBP, xy",
                values: &pr,
                color: RGBColor(220, 50, 32),
            },
            Series {
                label: "phantom, xz",
                values: &zp,
                color: RGBColor(120, 120, 120),
            },
            Series {
                label: "FBP, xz",
                values: &zr,
                color: RGBColor(0, 90, 181),
            },
        ],
    )?;
    files.push(path);

    println!("tomors demo: 3D Shepp-Logan {n}³ from {n_angles} exact projections of {n}×{n}");
    println!("  backend            {}", backend.name());
    println!(
        "  filter             {} (cutoff {}), {} interpolation",
        options.filter.kind, options.filter.cutoff, options.interpolation
    );
    println!("  projections        {t_phantom:.2} s (analytic, incl. phantom rasterisation)");
    println!("  reconstruction     {t_recon:.2} s = {gus:.2} GU/s (voxels × projections / s)");
    println!("  central slice      NRMSE {e:.4}  PSNR {p:.1} dB  SSIM {q:.3} (disc r = 0.45 n)");
    for f in &files {
        println!("  preview            {}", f.display());
    }
    Ok(())
}
