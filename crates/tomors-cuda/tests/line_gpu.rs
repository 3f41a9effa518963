//! The line-length projector on the GPU (issue 16): `CudaJoseph` switched
//! to the line model equals tomors-core's `LineProjector` (Siddon, f64
//! lengths) within an ALU bound, forward and back, is a matched pair
//! (adjointness to 1e-4 relative), and SART with it through the shared
//! solver equals the CPU's. GPU tests skip with a printed reason when no
//! GPU is usable and fail under `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::{dot, flat, gpu_or_skip, rand3, rel_l2};
use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    reconstruct, Algorithm, Constraint, IterativeOptions, LineProjector, Projector, Weighting,
};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::{sirt_cuda, CudaJoseph, GpuSirtOptions};

const PI: f32 = std::f32::consts::PI;

/// Forward and back projections of the GPU line model equal the CPU line
/// projector's (relative L2 ≤ 1e-5: exact f32 arithmetic on the GPU
/// against f64 Siddon lengths; the measured values are printed), on
/// geometries with bins as wide as, narrower and wider than the pixels, an
/// off-centre axis, angles over a full turn (including 0°, 45°, 90°), and
/// rays along pixel edges (at 0°: exactly; at 90°: a hair off the axis, a
/// steep trapezoid), on 5 slices (a padded quad); and `⟨Ax, y⟩ = ⟨x, Aᵀy⟩`
/// to 1e-4 relative on the GPU.
#[test]
fn gpu_line_projector_matches_the_cpu_and_is_matched() {
    let Some(be) = gpu_or_skip("gpu_line_projector_matches_the_cpu_and_is_matched") else {
        return;
    };
    let ns = 5;
    for (na, nb, bw, centre, n, full) in [
        (36usize, 64usize, 1.0f32, None, 64usize, false),
        (40, 80, 0.75, Some(41.3f32), 56, true),
        (24, 40, 1.6, None, 60, false),
        // 40 bins on a 41-pixel grid: at 0° every ray runs along a pixel
        // edge (Siddon's midpoint rule gives it to the right-hand pixel).
        (30, 40, 1.0, None, 41, false),
    ] {
        let angles = if full {
            uniform_angles(na, 2.0 * PI)
        } else {
            uniform_angles(na, PI)
        };
        let mut geom = ParallelGeometry::new(angles, nb)
            .unwrap()
            .with_bin_width(bw)
            .unwrap();
        if let Some(c) = centre {
            geom = geom.with_center(c).unwrap();
        }
        let grid = SliceGrid::new(n, n).unwrap();
        let cpu = LineProjector::new(&geom, &grid).unwrap();
        let mut gpu = CudaJoseph::new(&be, &geom, &grid, 4).unwrap();
        gpu.set_line_model(true).unwrap();
        assert!(gpu.is_line_model());
        let all: Vec<usize> = (0..na).collect();
        let x = rand3((ns, n, n), 11);
        let y = rand3((ns, na, nb), 12);
        let mut want_f = Array3::<f32>::zeros((ns, na, nb));
        Projector::<f32>::forward(&cpu, x.view(), &all, want_f.view_mut()).unwrap();
        let mut got_f = Array3::<f32>::zeros((ns, na, nb));
        gpu.forward(x.view(), got_f.view_mut()).unwrap();
        let mut want_b = Array3::<f32>::zeros((ns, n, n));
        Projector::<f32>::back(&cpu, y.view(), &all, want_b.view_mut()).unwrap();
        let mut got_b = Array3::<f32>::zeros((ns, n, n));
        gpu.back(y.view(), got_b.view_mut()).unwrap();
        let ef = rel_l2(&flat(&got_f), &flat(&want_f));
        let eb = rel_l2(&flat(&got_b), &flat(&want_b));
        let (l, r) = (dot(&got_f, &y), dot(&x, &got_b));
        let adj = (l - r).abs() / l.abs().max(r.abs());
        eprintln!(
            "line, {na} angles, bin width {bw}, centre {centre:?}: forward {ef:.2e}, back \
             {eb:.2e}, adjointness {adj:.2e}"
        );
        assert!(ef <= 1e-5, "forward: rel L2 {ef:.3e}");
        assert!(eb <= 1e-5, "back: rel L2 {eb:.3e}");
        assert!(adj <= 1e-4, "adjointness {adj:.3e}");
        // The weights: row sums and column sums equal the CPU's.
        let rs = rel_l2(
            &gpu.row_sums(false)
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            &Projector::<f32>::row_sums(&cpu, &all)
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
        );
        let cs = rel_l2(
            &gpu.column_sums()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            &Projector::<f32>::column_sums(&cpu, &all)
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
        );
        eprintln!("  row sums {rs:.2e}, column sums {cs:.2e}");
        assert!(rs <= 1e-5 && cs <= 1e-5, "weights: {rs:.3e} {cs:.3e}");
    }
}

/// SART with the line projector on the GPU (`GpuSirtOptions::line`)
/// equals the CPU's SART with `LineProjector` (iterate relative L2 ≤ 1e-3,
/// the bound of the Joseph block methods); ART with the line projector is
/// refused with one clear error.
#[test]
fn gpu_sart_with_the_line_projector_matches_the_cpu() {
    let Some(be) = gpu_or_skip("gpu_sart_with_the_line_projector_matches_the_cpu") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(30, PI), 64).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let cpu = LineProjector::new(&geom, &grid).unwrap();
    let truth = rand3((2, 64, 64), 3).mapv(|v| 0.5 + 0.5 * v);
    let all: Vec<usize> = (0..30).collect();
    let mut b = Array3::<f32>::zeros((2, 30, 64));
    Projector::<f32>::forward(&cpu, truth.view(), &all, b.view_mut()).unwrap();
    let mut options = IterativeOptions {
        algorithm: Algorithm::BlockSequential {
            weighting: Weighting::RowColumnSums,
            projections_per_block: 5,
        },
        iterations: 4,
        relaxation: None,
        constraint: Constraint::non_negative(),
        tolerance: None,
        track_residual: true,
    };
    let gpu_opts = GpuSirtOptions {
        line: true,
        ..GpuSirtOptions::default()
    };
    let want = reconstruct::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true).unwrap();
    let (got, _) = sirt_cuda(
        &be,
        &geom,
        &grid,
        b.view(),
        None,
        &options,
        &gpu_opts,
        &|_| true,
    )
    .unwrap();
    let e = rel_l2(&flat(&got.x), &flat(&want.x));
    let moved = rel_l2(&flat(&want.x), &vec![0.0; want.x.len()]);
    eprintln!("SART (line): GPU vs CPU iterate rel L2 {e:.2e}");
    assert!(moved > 0.1);
    assert!(e <= 1e-3, "SART (line): {e:.3e}");
    options.algorithm = Algorithm::Art {
        order: Default::default(),
    };
    let err = sirt_cuda(
        &be,
        &geom,
        &grid,
        b.view(),
        None,
        &options,
        &gpu_opts,
        &|_| true,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("line-length"), "{err}");
}
