//! The deterministic mode of the atomic back projection (issue 16): the
//! cone-beam Joseph transpose (`cj_back`/`cj_back_merged`, the only
//! kernels that add floats with atomics) in fixed-point integer
//! accumulation gives the same bits on every run, equals the CPU back
//! projection (and the float-atomic one) to f32 rounding, and makes a whole
//! SIRT run reproducible bit for bit. GPU tests skip with a printed reason
//! when no GPU is usable and fail under `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::{fixed_options, flat, gpu_or_skip, random, rel_l2};
use ndarray::{Array2, Array3};
use tomors_core::cone::ConeGeometry;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    reconstruct_cone, Algorithm, ConeJosephProjector, Constraint, Projector, Weighting,
};
use tomors_cuda::{cone_sirt_cuda_opts, ConeGpuOptions, CudaConeJoseph};

const PI: f32 = std::f32::consts::PI;

fn same_bits(a: &Array3<f32>, b: &Array3<f32>) -> bool {
    a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The deterministic back projection: two runs give identical bits (also
/// for a block of projections and for signed data), and it equals the CPU
/// projector's back projection (relative L2 ≤ 1e-5, the bound of the float
/// scatter) and the float scatter (≤ 1e-5); turning it off restores the
/// float scatter.
#[test]
fn deterministic_cone_back_projection_is_reproducible() {
    let Some(be) = gpu_or_skip("deterministic_cone_back_projection_is_reproducible") else {
        return;
    };
    let g = ConeGeometry::new(uniform_angles(40, 2.0 * PI), 60.0, 60.0, 40, 48, 1.0, 1.0).unwrap();
    let v = g.fitting_volume(40, 40, 32).unwrap();
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let cpu = ConeJosephProjector::new(&g, &v).unwrap();
    let mut gpu = CudaConeJoseph::new(&be, &g, &v).unwrap();
    let y = Array3::from_shape_vec((na, nr, nc), random(na * nr * nc, 9)).unwrap();
    let yd = gpu.upload_projections(y.view()).unwrap();
    let mut want = Array2::<f32>::zeros((v.nz * v.ny, v.nx));
    let y2 = y.view().into_shape_with_order((na, nr * nc)).unwrap();
    Projector::<f32>::back_slice(&cpu, y2, &(0..na).collect::<Vec<_>>(), want.view_mut()).unwrap();
    let want = want.into_shape_with_order((v.nz, v.ny, v.nx)).unwrap();
    let back = |gpu: &CudaConeJoseph| {
        let mut out = gpu.alloc_volume().unwrap();
        gpu.back_dev(&yd, &mut out).unwrap();
        gpu.download(&out).unwrap()
    };
    let float = back(&gpu);
    assert!(!gpu.deterministic());
    gpu.set_deterministic(true).unwrap();
    assert!(gpu.deterministic());
    let runs: Vec<Array3<f32>> = (0..3).map(|_| back(&gpu)).collect();
    let e_cpu = rel_l2(&flat(&runs[0]), &flat(&want));
    let e_float = rel_l2(&flat(&runs[0]), &flat(&float));
    let e_float_cpu = rel_l2(&flat(&float), &flat(&want));
    eprintln!(
        "deterministic back: vs CPU {e_cpu:.2e} (float scatter vs CPU {e_float_cpu:.2e}), vs the \
         float scatter {e_float:.2e}"
    );
    assert!(same_bits(&runs[0], &runs[1]) && same_bits(&runs[0], &runs[2]));
    assert!(e_cpu <= 1e-5, "vs CPU: {e_cpu:.3e}");
    assert!(e_float <= 1e-5, "vs float scatter: {e_float:.3e}");
    // A block of projections, through the operator.
    use tomors_core::linalg::LinearOperator;
    let op = gpu.operator();
    let angles = [7usize, 3, 30, 31];
    let sel = op.select(&yd, &angles).unwrap();
    let block = |op: &tomors_cuda::ConeOp<'_>| {
        let mut x = op.domain_zeros().unwrap();
        op.backward(&sel, &angles, &mut x).unwrap();
        gpu.download(&x).unwrap()
    };
    let (b1, b2) = (block(&op), block(&op));
    assert!(same_bits(&b1, &b2), "a block");
    let sel_h = gpu.download(&sel).unwrap();
    let mut want_b = Array2::<f32>::zeros((v.nz * v.ny, v.nx));
    Projector::<f32>::back_slice(
        &cpu,
        sel_h.view().into_shape_with_order((4, nr * nc)).unwrap(),
        &angles,
        want_b.view_mut(),
    )
    .unwrap();
    let eb = rel_l2(&flat(&b1), &want_b.iter().copied().collect::<Vec<_>>());
    eprintln!("deterministic block back: vs CPU {eb:.2e}");
    assert!(eb <= 1e-5, "block vs CPU: {eb:.3e}");
    // Off again: the float scatter.
    gpu.set_deterministic(false).unwrap();
    let again = back(&gpu);
    assert!(rel_l2(&flat(&again), &flat(&float)) <= 1e-6);
}

/// A whole cone SIRT run (row/column sums, 5 iterations, x ≥ 0) in the
/// deterministic mode gives the same bits twice, and equals the CPU's SIRT
/// (relative L2 ≤ 1e-5: the command-line test's bound for the float
/// scatter, 3.96e-7 measured there).
#[test]
fn deterministic_cone_sirt_is_reproducible() {
    let Some(be) = gpu_or_skip("deterministic_cone_sirt_is_reproducible") else {
        return;
    };
    let g = ConeGeometry::new(uniform_angles(32, 2.0 * PI), 60.0, 60.0, 32, 40, 1.0, 1.0).unwrap();
    let v = g.fitting_volume(32, 32, 24).unwrap();
    let cpu = ConeJosephProjector::new(&g, &v).unwrap();
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let b = Array3::from_shape_vec(
        (na, nr, nc),
        random(na * nr * nc, 4)
            .into_iter()
            .map(|x| 10.0 + x)
            .collect(),
    )
    .unwrap();
    let options = fixed_options(
        Algorithm::Sirt(Weighting::RowColumnSums),
        5,
        None,
        Constraint::non_negative(),
    );
    let gpu = ConeGpuOptions {
        deterministic: true,
        ..ConeGpuOptions::default()
    };
    let run = || {
        cone_sirt_cuda_opts(&be, &g, &v, b.view(), None, &options, &gpu, &|_| true)
            .unwrap()
            .0
    };
    let (r1, r2) = (run(), run());
    let want = reconstruct_cone::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true).unwrap();
    let e = rel_l2(&flat(&r1.x), &flat(&want.x));
    eprintln!("deterministic cone SIRT vs CPU: rel L2 {e:.2e}");
    assert!(same_bits(&r1.x, &r2.x), "two deterministic runs differ");
    assert_eq!(r1.residuals, r2.residuals);
    assert!(e <= 1e-5, "vs CPU: {e:.3e}");
}
