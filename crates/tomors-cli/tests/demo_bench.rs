//! `tomors demo` (the README's first command) and `tomors bench` at tiny
//! sizes: they run, write and print what they say.

use std::process::Command;

fn tomors() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tomors"))
}

/// The demo on a 32³ phantom: four PNG previews of the right size, and an
/// NRMSE of the central slice below a bound measured on this size.
#[test]
fn demo_runs_writes_previews_and_reports_quality() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let o = tomors()
        .args([
            "--quiet",
            "demo",
            "--size",
            "32",
            "--backend",
            "cpu",
            "--out-dir",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    for name in ["slice_xy.png", "slice_xz.png", "slice_yz.png"] {
        let img = image::open(out.join(name)).unwrap();
        // Phantom and reconstruction side by side, 4 columns apart.
        assert_eq!((img.width(), img.height()), (2 * 32 + 4, 32), "{name}");
        assert!(text.contains(name), "{name} not reported: {text}");
    }
    let plot = image::open(out.join("profile.png")).unwrap();
    assert_eq!((plot.width(), plot.height()), (900, 450));
    let nrmse: f64 = text
        .split("NRMSE ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no NRMSE in {text}"));
    // Measured 0.0724 at 32³ from 51 angles (ram-lak, linear, CPU); the
    // bound is 1.25× that.
    println!("demo 32³: NRMSE {nrmse}");
    assert!(nrmse > 0.0 && nrmse < 0.09, "NRMSE {nrmse}");
    assert!(text.contains("GU/s"), "{text}");
}

/// The CPU benchmark at small sizes prints one GU/s line per size and
/// interpolation, each with a positive finite rate (sizes large enough
/// that two decimals of GU/s cannot round to zero on a loaded machine).
#[test]
fn bench_cpu_prints_rates() {
    let o = tomors()
        .args([
            "--quiet",
            "bench",
            "--backend",
            "cpu",
            "--sizes",
            "48,64",
            "--slices",
            "2",
            "--reps",
            "1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 6 && f[0].parse::<usize>().is_ok())
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    for (row, (size, interp)) in rows.iter().zip([
        ("48", "linear"),
        ("48", "nearest"),
        ("64", "linear"),
        ("64", "nearest"),
    ]) {
        assert_eq!(
            (row[0], row[1], row[2], row[3]),
            (size, size, "2", interp),
            "{text}"
        );
        let gus: f64 = row[5].parse().unwrap();
        assert!(gus.is_finite() && gus > 0.0, "{text}");
    }
    assert!(text.lines().any(|l| l.contains("GU/s")), "{text}");
}
