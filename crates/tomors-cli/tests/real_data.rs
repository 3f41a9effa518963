//! `tomors recon`, `center` and `info` on real data: the APS tooth scan
//! (DXchange HDF5, crates/tomors-io/tests/data/tooth.h5).

use std::path::PathBuf;
use std::process::Command;

use ndarray::{s, Array3, Axis};

fn tomors() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tomors"))
}

fn tooth() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tomors-io/tests/data/tooth.h5")
}

/// The best centre by inspection (docs/io.md says how it was judged).
const BEST_CENTER: f32 = 295.5;

fn recon(out: &std::path::Path, extra: &[&str]) -> String {
    let o = tomors()
        .arg("-q")
        .arg("recon")
        .arg(tooth())
        .args(["--backend", "cpu", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "recon failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn read_npy(path: &std::path::Path) -> Array3<f32> {
    ndarray_npy::read_npy(path).unwrap()
}

/// Relative L2 difference.
fn rel(a: &Array3<f32>, b: &Array3<f32>) -> f32 {
    let d: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let n: f32 = b.iter().map(|y| y * y).sum();
    (d / n).sqrt()
}

#[test]
fn recon_tooth_with_automatic_centre() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tooth.npy");
    let stdout = recon(&out, &["--center", "auto"]);
    // "wrote … centre 295.00)"
    let c: f32 = stdout
        .rsplit("centre ")
        .next()
        .and_then(|t| t.trim().trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no centre in {stdout}"));
    assert!((c - BEST_CENTER).abs() <= 1.5, "centre {c}");
    let v = read_npy(&out);
    assert_eq!(v.dim(), (2, 640, 640));
    assert!(v.iter().all(|x| x.is_finite()));

    // The tooth is there: the dentine/enamel inside a disc of radius 120
    // around the middle is much denser than the air in the corners.
    let inner = v.slice(s![.., 260..380, 260..380]).mean().unwrap();
    let corner = v.slice(s![.., 0..80, 0..80]).mean().unwrap();
    assert!(
        inner > 5.0 * corner.abs() && inner > 0.0,
        "inner {inner}, corner {corner}"
    );

    // No doubling: the slice at the found centre is as close to the slice at
    // the best centre as a half-pixel change of centre allows, and much
    // closer than a slice 3 pixels off.
    let best = dir.path().join("best.npy");
    recon(&best, &["--center", &BEST_CENTER.to_string()]);
    let off = dir.path().join("off.npy");
    recon(&off, &["--center", &(BEST_CENTER + 3.0).to_string()]);
    let half = dir.path().join("half.npy");
    recon(&half, &["--center", &(BEST_CENTER + 0.5).to_string()]);
    let (vb, vo, vh) = (read_npy(&best), read_npy(&off), read_npy(&half));
    let (e_auto, e_off, e_half) = (rel(&v, &vb), rel(&vo, &vb), rel(&vh, &vb));
    assert!(
        e_auto <= 1.5 * e_half + 1e-6,
        "auto {e_auto} vs half-pixel {e_half}"
    );
    assert!(e_auto < 0.5 * e_off, "auto {e_auto} vs 3 px off {e_off}");
}

#[test]
fn recon_tooth_streams_to_hdf5_and_tiff() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = dir.path().join("tooth.h5");
    let npy = dir.path().join("tooth.npy");
    let tif = dir.path().join("slices");
    // One row per slab: 73 MiB is 64 MiB of fixed overhead plus room for
    // one row (7.4 MiB, the slabs in flight in the pipelined stream: 181 ×
    // 640 projections ×4 and the padded filtered copy, flats/darks, 640²
    // slice ×3).
    recon(&h5, &["--center", "295.5", "--memory", "73M"]);
    recon(&npy, &["--center", "295.5"]);
    recon(&tif, &["--center", "295.5", "--slices", "1:2"]);
    let f = tomors_io::hdf5::File::open(&h5).unwrap();
    let ds = f.dataset("volume").unwrap();
    let v: Array3<f32> = ds.read().unwrap();
    // The CPU back projector takes a different SIMD path for 1 slice than
    // for 2 (slices batched in lanes); each path is within 1e-5 relative L2
    // of the f64 reference (tomors-core's bound), so the two slab sizes agree
    // within 2e-5, not bit for bit.
    let e = rel(&v, &read_npy(&npy));
    assert!(
        e < 2e-5,
        "HDF5 (one row per slab) and .npy (one slab) differ by {e}"
    );
    assert_eq!(
        ds.attr("center").unwrap().read_scalar::<f64>().unwrap(),
        295.5
    );
    assert_eq!(
        ds.attr("n_angles").unwrap().read_scalar::<i64>().unwrap(),
        181
    );
    let t = tomors_io::tiffio::read_image(&tif.join("slice_00000.tif"), 0).unwrap();
    let t3 = t.insert_axis(Axis(0));
    let e = rel(&t3, &v.slice(s![1..2, .., ..]).to_owned());
    assert!(e < 2e-5, "TIFF slice differs by {e}");
}

#[test]
fn center_and_info_commands() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("strip.png");
    let o = tomors()
        .args(["-q", "center"])
        .arg(tooth())
        .arg("--png")
        .arg(&png)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("centre ") && text.contains("quality"),
        "{text}"
    );
    let img = image::open(&png).unwrap();
    assert_eq!(img.height(), 640);
    assert_eq!(img.width(), 7 * 640 + 6 * 4);

    let o = tomors().arg("info").arg(tooth()).output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("read by tomors as: DXchange HDF5") && text.contains("flats: 10, darks: 10"),
        "{text}"
    );
}

#[test]
fn bad_real_data_fails_in_one_line_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(tooth()).unwrap();
    let cut = dir.path().join("cut.h5");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.path().join("out.npy");
    for args in [
        vec![cut.to_string_lossy().into_owned()],
        vec![
            tooth().to_string_lossy().into_owned(),
            "--data-path".into(),
            "/nope".into(),
        ],
        vec![
            tooth().to_string_lossy().into_owned(),
            "--center".into(),
            "700".into(),
        ],
        vec![
            tooth().to_string_lossy().into_owned(),
            "--memory".into(),
            "1M".into(),
        ],
    ] {
        let o = tomors()
            .args(["-q", "recon", "--backend", "cpu", "--out"])
            .arg(&out)
            .args(&args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(!out.exists());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    }
    // An unwritable output directory.
    let o = tomors()
        .args([
            "-q",
            "recon",
            "--backend",
            "cpu",
            "--out",
            "/nonexistent-dir/x.h5",
        ])
        .arg(tooth())
        .output()
        .unwrap();
    assert!(!o.status.success());
}

#[test]
fn recon_tiff_stack_with_flats_darks_and_auto_centre() {
    use tomors_core::geometry::uniform_angles;
    use tomors_core::phantom::Phantom2d;
    use tomors_core::{ParallelGeometry, SliceGrid};
    // A phantom scanned with 1000 photons per bin over a dark level of 100,
    // counts stored as 16-bit TIFFs, with flat and dark stacks.
    let (bins, n, rows, k) = (128usize, 180usize, 3usize, 0.02f32);
    let scale = bins as f64 * 0.45;
    let g = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), bins).unwrap();
    let sino = Phantom2d::shepp_logan().project(&g, scale);
    let dir = tempfile::tempdir().unwrap();
    let (proj, flats, darks) = (
        dir.path().join("proj"),
        dir.path().join("flats"),
        dir.path().join("darks"),
    );
    for d in [&proj, &flats, &darks] {
        std::fs::create_dir(d).unwrap();
    }
    for a in 0..n {
        let img = ndarray::Array2::from_shape_fn((rows, bins), |(_, b)| {
            (100.0 + 1000.0 * (-k * sino[[a, b]]).exp()).round() as u16
        });
        tomors_io::tiffio::write_image_u16(&proj.join(format!("p_{a}.tif")), img.view()).unwrap();
    }
    for i in 0..4 {
        let f = ndarray::Array2::from_elem((rows, bins), 1100u16);
        let d = ndarray::Array2::from_elem((rows, bins), 100u16);
        tomors_io::tiffio::write_image_u16(&flats.join(format!("f{i}.tif")), f.view()).unwrap();
        tomors_io::tiffio::write_image_u16(&darks.join(format!("d{i}.tif")), d.view()).unwrap();
    }
    let out = dir.path().join("vol.npy");
    let o = tomors()
        .args([
            "-q",
            "recon",
            "--backend",
            "cpu",
            "--center",
            "auto",
            "--flats",
        ])
        .arg(&flats)
        .arg("--darks")
        .arg(&darks)
        .arg("--out")
        .arg(&out)
        .arg(proj.join("p_*.tif"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let c: f32 = text
        .rsplit("centre ")
        .next()
        .unwrap()
        .trim()
        .trim_end_matches(')')
        .parse()
        .unwrap();
    assert!((c - 63.5).abs() <= 0.5, "centre {c}");
    let v = read_npy(&out);
    assert_eq!(v.dim(), (rows, bins, bins));
    let truth = Phantom2d::shepp_logan().rasterize(&SliceGrid::for_geometry(&g), scale, 4);
    let rec = v.index_axis(Axis(0), 1).mapv(|x| x / k);
    let e = tomors_core::metrics::nrmse(rec.view(), truth.view(), None).unwrap();
    // The exact sinogram gives ≈0.03 on this grid (tests/scan360.rs of
    // tomors-io: 0.0305 with 200 angles); 16-bit counts and the centre found
    // add little (0.0296 measured).
    eprintln!("TIFF + flats/darks + auto centre {c}: NRMSE {e:.4}");
    assert!(e < 0.04, "NRMSE {e}");
}
