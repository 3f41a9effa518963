//! Cone-beam back projection and FDK on the GPU, host to host:
//! `cargo run --release -p tomors-cuda --example cone_bench` (needs a GPU;
//! ASTRA's counterpart is `../shared/bench/astra/run.sh fdk --n 512 --angles 720`).

use std::f64::consts::PI;
use std::time::Instant;

use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume, FdkOptions};
use tomors_cuda::{ConeKernel, CudaBackend, FdkFold, FoldShape};

mod common;

use common::{random_signed, rel_l2};

fn main() {
    let mut be = match tomors_cuda::device_count().and_then(|_| CudaBackend::new(0)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cone_bench: {e}");
            std::process::exit(1);
        }
    };
    let (n, na) = (512usize, 720usize);
    let g = ConeGeometry::new(
        (0..na)
            .map(|i| (2.0 * PI * i as f64 / na as f64) as f32)
            .collect(),
        1000.0,
        500.0,
        n,
        n,
        1.0,
        1.0,
    )
    .unwrap();
    let vol = ConeVolume::new(n, n, n, 1.0).unwrap();
    let proj = Array3::from_shape_vec((na, n, n), random_signed(na * n * n, 7)).unwrap();
    let mut out = Array3::<f32>::zeros((n, n, n));
    let gu = (n * n * n * na) as f64 * 1e-9;
    // `--shapes ZBxBX,...`: the default folded FDK, then each launch shape
    // (5 timed calls each, medians).
    let args_all: Vec<String> = std::env::args().collect();
    if let Some(i) = args_all.iter().position(|a| a == "--shapes") {
        let list = args_all.get(i + 1).cloned().unwrap_or_default();
        let mut shapes = vec![FoldShape::default()];
        for s in list.split(',').filter(|s| !s.is_empty()) {
            let (zb, bx) = s.split_once('x').expect("ZBxBX");
            shapes.push(FoldShape {
                zb: zb.parse().expect("ZB"),
                bx: bx.parse().expect("BX"),
            });
        }
        shapes.push(FoldShape::default());
        for shape in shapes {
            be.set_fdk_fold(FdkFold {
                shape,
                ..FdkFold::default()
            });
            let mut t = Vec::new();
            let mut last = String::new();
            for rep in 0..6 {
                let t0 = Instant::now();
                let st = be
                    .fdk_device(
                        proj.view(),
                        &g,
                        &vol,
                        &FdkOptions::default(),
                        out.view_mut(),
                    )
                    .unwrap();
                if rep > 0 {
                    t.push(t0.elapsed().as_secs_f64());
                }
                last = st.to_string();
            }
            t.sort_by(f64::total_cmp);
            println!(
                "shape zb {} bx {}: median {:.4} s host to host (min {:.4}); last call: {last}",
                shape.zb,
                shape.bx,
                t[t.len() / 2],
                t[0]
            );
        }
        return;
    }
    // `--profile pitched|arrays`: two folded FDK calls only (for a profiler).
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let arrays = args.get(i + 1).is_some_and(|m| m == "arrays");
        be.set_fdk_fold(FdkFold {
            arrays,
            ..FdkFold::default()
        });
        for rep in 0..2 {
            let t = Instant::now();
            let st = be
                .fdk_device(
                    proj.view(),
                    &g,
                    &vol,
                    &FdkOptions::default(),
                    out.view_mut(),
                )
                .unwrap();
            let tt = t.elapsed().as_secs_f64();
            println!("profile fdk_device arrays {arrays} rep {rep}: {tt:.4} s; {st}");
        }
        return;
    }
    for (kernel, rep) in [
        (ConeKernel::Loads, 0),
        (ConeKernel::Texture, 0),
        (ConeKernel::Texture, 1),
    ] {
        be.set_cone_kernel(kernel);
        let st = be
            .cone_backproject_chunked(proj.view(), &g, &vol, 0..n, out.view_mut(), 0)
            .unwrap();
        println!(
            "bench cone_bp {kernel:?} 512^3 x 720 rep {rep}: total {:.4} s (upload {:.4}, kernel {:.4}, \
             download {:.4}, {} chunk(s)); kernel {:.1} GU/s, host to host {:.1} GU/s",
            st.total_s,
            st.upload_s,
            st.kernel_s,
            st.download_s,
            st.chunks,
            gu / st.kernel_s,
            gu / st.total_s
        );
    }
    // FDK on the device, host to host: 1 warm-up call (compiles or loads
    // the kernels, plans the FFTs, allocates), then timed calls: the
    // unfolded pipeline (the texture kernel after all uploads), then the
    // folded, overlapped one (the default) and its variants.
    be.set_cone_kernel(ConeKernel::Texture);
    let opts = FdkOptions::default();
    let fdk_run = |be: &CudaBackend, label: &str, reps: usize, out: &mut Array3<f32>| {
        let mut times = Vec::new();
        for rep in 0..=reps {
            let t = Instant::now();
            let st = be
                .fdk_device(proj.view(), &g, &vol, &opts, out.view_mut())
                .unwrap();
            let tt = t.elapsed().as_secs_f64();
            let kind = if rep == 0 { "warm-up" } else { "timed" };
            println!(
                "bench fdk_device {label} 512^3 x 720 rep {rep} ({kind}): {tt:.4} s host to host, {:.1} GU/s; {st}",
                gu / tt
            );
            if rep > 0 {
                times.push(tt);
            }
        }
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        println!(
            "bench fdk_device {label} median {med:.4} s ({:.1} GU/s)",
            gu / med
        );
        med
    };
    be.set_fdk_fold(FdkFold {
        enabled: false,
        ..FdkFold::default()
    });
    let mut unfolded = Array3::<f32>::zeros((n, n, n));
    fdk_run(&be, "unfolded", 5, &mut unfolded);
    // The float2 texels without a register cap, in order on the compute
    // stream (the default before the half texels); the half texels with 4
    // blocks per SM in order (`half`, the default of batch 3 of
    // docs/perf-notes.md, which labels it "(default)") and the default
    // (`FdkFold::default()`: also a separate back-projection stream and
    // the compute stream raised).
    let full = FdkFold {
        half: false,
        min_blocks: 0,
        separate_stream: false,
        priority: false,
        ..FdkFold::default()
    };
    let half = FdkFold {
        separate_stream: false,
        priority: false,
        ..FdkFold::default()
    };
    be.set_fdk_fold(full);
    fdk_run(&be, "folded, float2 texels", 7, &mut out);
    let pitched = out.clone();
    let diff = rel_l2(&out, &unfolded);
    println!("bench fdk folded vs unfolded: rel L2 {diff:.3e}");
    be.set_fdk_fold(half);
    let mut halved = Array3::<f32>::zeros((n, n, n));
    fdk_run(&be, "folded, half texels (default)", 7, &mut halved);
    println!(
        "bench fdk folded half vs float2 texels: rel L2 {:.3e}",
        rel_l2(&halved, &pitched)
    );
    // Both against the exact f32 FDK (plain loads, host steps) on these
    // random projections (iid texels: the 8-bit weights' worst case).
    // The exact f32 FDK of `p` (plain loads, host steps), then back to the
    // texture kernel.
    let exact_fdk = |be: &mut CudaBackend, p: &Array3<f32>| {
        be.set_cone_kernel(ConeKernel::Loads);
        let mut exact = Array3::<f32>::zeros((n, n, n));
        be.fdk_device(p.view(), &g, &vol, &opts, exact.view_mut())
            .unwrap();
        be.set_cone_kernel(ConeKernel::Texture);
        exact
    };
    let mut exact = exact_fdk(&mut be, &proj);
    println!(
        "bench fdk vs the exact f32 FDK (Loads): folded rel L2 {:.3e}, folded half {:.3e}, unfolded {:.3e}",
        rel_l2(&pitched, &exact),
        rel_l2(&halved, &exact),
        rel_l2(&unfolded, &exact)
    );
    // A smooth scan (a centred ball's exact projections: chord lengths),
    // where the 8-bit weights err ≈ 10⁻³ rather than on white noise.
    let ball = ball_projections(&g, 150.0);
    for (label, cfg) in [("float2", full), ("half", half)] {
        be.set_fdk_fold(cfg);
        be.fdk_device(ball.view(), &g, &vol, &opts, out.view_mut())
            .unwrap();
        if label == "float2" {
            exact.assign(&out);
        } else {
            println!(
                "bench fdk ball (smooth data): half vs float2 texels rel L2 {:.3e}",
                rel_l2(&out, &exact)
            );
        }
    }
    let ball_exact = exact_fdk(&mut be, &ball);
    println!(
        "bench fdk ball (smooth data) vs the exact f32 FDK (Loads): folded float2 {:.3e}, half {:.3e}",
        rel_l2(&exact, &ball_exact),
        rel_l2(&out, &ball_exact)
    );
    drop(ball_exact);
    for (label, cfg, reps) in [
        (
            "folded, half texels, first group 96 angles (3 chunks)",
            FdkFold { first: 96, ..half },
            5,
        ),
        (
            "folded, half texels, last group 240",
            FdkFold { last: 240, ..half },
            5,
        ),
        (
            "folded, half texels, last group 288",
            FdkFold { last: 288, ..half },
            5,
        ),
        (
            "folded, half texels, last group 416",
            FdkFold { last: 416, ..half },
            5,
        ),
        (
            "folded, half texels, last slab split",
            FdkFold {
                taper: true,
                ..half
            },
            5,
        ),
        (
            "folded, half texels, 4 chunk buffers",
            FdkFold { buffers: 4, ..half },
            5,
        ),
        (
            "folded, half texels, separate stream, compute stream raised (the default)",
            FdkFold::default(),
            5,
        ),
        (
            "folded, float2 texels, register cap 4 blocks/SM",
            FdkFold {
                min_blocks: 4,
                ..full
            },
            5,
        ),
    ] {
        be.set_fdk_fold(cfg);
        fdk_run(&be, label, reps, &mut out);
    }
    if std::env::args().any(|a| a == "--sweep") {
        for (group, last) in [(64, 240), (128, 240), (96, 180), (96, 360)] {
            be.set_fdk_fold(FdkFold {
                group,
                last,
                ..half
            });
            fdk_run(
                &be,
                &format!("folded half group {group} last {last}"),
                3,
                &mut out,
            );
        }
    }
    be.set_fdk_fold(full);
    let med = fdk_run(&be, "folded, float2 texels (again)", 5, &mut out);
    be.set_fdk_fold(half);
    let medh = fdk_run(&be, "folded, half texels (default, again)", 5, &mut out);
    println!(
        "bench fdk_device summary: folded float2 median {med:.4} s, half texels (default) {medh:.4} s host to host"
    );

    // The CLI benchmark's geometry (`tomors phantom --geometry cone --size
    // 512 --angles 720 --sod 1000 --odd 500 --pixel-size 3`: pixels of 3,
    // the fitting volume), for the CLI's reconstruction time beside the
    // library's on the same problem.
    let gc = ConeGeometry::new(g.angles().to_vec(), 1000.0, 500.0, n, n, 3.0, 3.0).unwrap();
    let vc = gc.fitting_volume(n, n, n).unwrap();
    let fdk_cli_geom = |be: &CudaBackend, label: &str, reps: usize, out: &mut Array3<f32>| {
        let mut times = Vec::new();
        for rep in 0..=reps {
            let t = Instant::now();
            let st = be
                .fdk_device(proj.view(), &gc, &vc, &opts, out.view_mut())
                .unwrap();
            let tt = t.elapsed().as_secs_f64();
            println!("bench fdk_device {label} rep {rep}: {tt:.4} s host to host; {st}");
            if rep > 0 {
                times.push(tt);
            }
        }
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        println!("bench fdk_device {label} median {med:.4} s");
    };
    for cfg in [full, half] {
        be.set_fdk_fold(cfg);
        fdk_cli_geom(
            &be,
            &format!(
                "CLI geometry (pixel 3, voxel {}) folded, half texels {}",
                vc.voxel_size, cfg.half
            ),
            5,
            &mut out,
        );
    }
}

/// Exact cone-beam projections of a ball of radius `r` at the centre (the
/// chord length through it of each detector pixel's ray; attenuation 1).
fn ball_projections(g: &ConeGeometry, r: f64) -> Array3<f32> {
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let (sod, sdd) = (g.sod(), g.sdd());
    let mut p = Array3::<f32>::zeros((na, nr, nc));
    for ((_, i, j), v) in p.indexed_iter_mut() {
        // The ray from the source through detector pixel (i, j); the ball
        // is centred, so the angle does not matter.
        let u = (j as f64 - g.center_col()) * g.pixel_u();
        let w = (i as f64 - g.center_row()) * g.pixel_v();
        let len = (sdd * sdd + u * u + w * w).sqrt();
        // Distance from the centre to the ray: sod · sin(angle to the axis).
        let d = sod * (u * u + w * w).sqrt() / len;
        if d < r {
            *v = (2.0 * (r * r - d * d).sqrt()) as f32;
        }
    }
    p
}
