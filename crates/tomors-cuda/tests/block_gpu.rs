//! GPU tests of the device operator abstraction (issue 12): the device
//! vectors (`DeviceVec`, tomors-core's `Vector`) against the host
//! implementation, the block views of the parallel Joseph device operator
//! against the CPU projector, and SART / BLOCK-IT through tomors-core's
//! shared `solve` on the device against the CPU after 5 sweeps on the
//! 60-angle Shepp–Logan. GPU tests skip with a printed reason when no GPU
//! is usable and fail under `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::cone::{centred_ball, cpu_forward};
use common::{
    assert_constraint, disc_and_zero_error, fixed_options, flat, gpu_or_skip, max_rel, rand3, rel,
    rel_l2, sart_and_block_it, shepp_256,
};
use ndarray::{Array2, Array3, Axis};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    reconstruct, solve, Algorithm, Constraint, IterativeOptions, JosephProjector, Projector,
    RayOrder, Weighting,
};
use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::metrics::nrmse;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{sirt_cuda, CudaJoseph, DeviceVec, GpuSirtOptions};

const PI: f32 = std::f32::consts::PI;

/// Every operation of the device vectors equals the host vectors' (f32
/// element-wise arithmetic: relative L2 ≤ 1e-6, fused multiply-adds on the
/// device against separate operations on the host; f64 reductions: 1e-10,
/// another summation order), on 5 slices (a padded last group, which the
/// reductions must skip) with broadcast plane weights.
#[test]
fn device_vectors_match_the_host() {
    let Some(be) = gpu_or_skip("device_vectors_match_the_host") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(24, PI), 40).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let gpu = CudaJoseph::new(&be, &geom, &grid, 8).unwrap();
    let ns = 5;
    let op = gpu.operator(ns).unwrap();
    let all: Vec<usize> = (0..24).collect();
    let dim = (ns, 24, 40);
    let (ha, hb) = (rand3(dim, 1), rand3(dim, 2));
    let up = |h: &Array3<f32>| gpu.upload_sinograms(h.view()).unwrap();
    let down = |d: &DeviceVec| gpu.download(d).unwrap();
    let check = |what: &str, d: &DeviceVec, h: &Array3<f32>| {
        let e = rel_l2(&flat(&down(d)), &flat(h));
        eprintln!("{what}: rel L2 {e:.2e}");
        assert!(e <= 1e-6, "{what}: rel L2 {e:.3e}");
    };
    // Weights: a plane broadcast over the slices (row sums of the operator,
    // made positive and varied).
    let w_dev = op.row_sums(&all).unwrap();
    let w_host = gpu.download(&w_dev).unwrap();
    assert_eq!(w_host.dim(), (1, 24, 40));
    assert_eq!(w_dev.len(), 24 * 40);

    let (mut da, db) = (up(&ha), up(&hb));
    let mut h = ha.clone();
    assert!(rel(da.dot(&db).unwrap(), h.dot(&hb).unwrap()) <= 1e-10);
    assert!(rel(da.norm_sq().unwrap(), h.norm_sq().unwrap()) <= 1e-10);
    assert!(da.all_finite().unwrap());
    da.scale(-1.5).unwrap();
    h.scale(-1.5).unwrap();
    check("scale", &da, &h);
    da.axpy(0.25, &db).unwrap();
    h.axpy(0.25, &hb).unwrap();
    check("axpy", &da, &h);
    da.mul_assign(&db).unwrap();
    h.mul_assign(&hb).unwrap();
    check("mul", &da, &h);
    da.mul_assign(&w_dev).unwrap();
    h.mul_assign(&w_host).unwrap();
    check("mul (broadcast plane)", &da, &h);
    da.clip(Some(-0.2), Some(0.3)).unwrap();
    h.clip(Some(-0.2), Some(0.3)).unwrap();
    check("clip", &da, &h);
    let mut dc = da.zeros_like().unwrap();
    dc.copy_from(&db).unwrap();
    check("copy", &dc, &hb);
    let (r2_d, r2_h) = (dc.residual_weighted_norm_sq(&da, Some(&w_dev)).unwrap(), {
        let mut t = hb.clone();
        let r = t.residual_weighted_norm_sq(&h, Some(&w_host)).unwrap();
        h.assign(&t);
        r
    });
    assert!(rel(r2_d, r2_h) <= 1e-10, "{r2_d} vs {r2_h}");
    check("residual (weighted, norm)", &dc, &h);
    let mut hinv = hb.mapv(f32::abs);
    let mut dinv = up(&hinv);
    dinv.invert_floored(1e-2).unwrap();
    hinv.invert_floored(1e-2).unwrap();
    check("invert_floored", &dinv, &hinv);
    dc.fill(2.5).unwrap();
    check("fill", &dc, &Array3::from_elem(dim, 2.5));
    let mut nan = ha.clone();
    nan[[4, 3, 7]] = f32::NAN;
    assert!(!up(&nan).all_finite().unwrap());

    // Updates of a volume: plain, and with the transposed copy that the
    // first forward projection makes (dv_update_t), which the next forward
    // projection must read up to date.
    let vdim = (ns, grid.ny, grid.nx);
    let (hx, hg) = (rand3(vdim, 3), rand3(vdim, 4));
    let mut dx = gpu.upload_domain(hx.view()).unwrap();
    let dg = gpu.upload_domain(hg.view()).unwrap();
    let t_dev = op.column_sums(&all).unwrap();
    let mut t_host = gpu.download(&t_dev).unwrap();
    let mut t_dev = t_dev;
    t_dev.invert_floored(1e-6).unwrap();
    t_host.invert_floored(1e-6).unwrap();
    let mut hx2 = hx.clone();
    dx.update_clipped(0.7, &dg, Some(&t_dev), Some(-0.5), None)
        .unwrap();
    hx2.update_clipped(0.7, &hg, Some(&t_host), Some(-0.5), None)
        .unwrap();
    check("update_clipped (plain)", &dx, &hx2);
    let mut y = op.range_zeros(&all).unwrap();
    op.forward(&dx, &all, &mut y).unwrap();
    dx.update_clipped(0.3, &dg, Some(&t_dev), None, Some(0.4))
        .unwrap();
    hx2.update_clipped(0.3, &hg, Some(&t_host), None, Some(0.4))
        .unwrap();
    check("update_clipped (with the transposed copy)", &dx, &hx2);
    op.forward(&dx, &all, &mut y).unwrap();
    let cpu = JosephProjector::new(&geom, &grid).unwrap();
    let mut want = Array3::<f32>::zeros((ns, 24, 40));
    cpu.forward(hx2.view(), &all, want.view_mut()).unwrap();
    let e = rel_l2(&flat(&down(&y)), &flat(&want));
    eprintln!("forward after the fused update: rel L2 {e:.2e}");
    assert!(e <= 1e-5, "forward after the fused update: {e:.3e}");
}

/// The block views of the parallel Joseph device operator equal the CPU
/// projector's on the same block (any subset, any order): forward, back,
/// row sums, column sums and row norms (relative L2 ≤ 1e-5, the bound of
/// the full operator), and the selection of a block's rows (exact).
#[test]
fn block_views_match_the_cpu() {
    let Some(be) = gpu_or_skip("block_views_match_the_cpu") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(30, PI), 48).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let cpu = JosephProjector::new(&geom, &grid).unwrap();
    let gpu = CudaJoseph::new(&be, &geom, &grid, 4).unwrap();
    let ns = 3;
    let op = gpu.operator(ns).unwrap();
    let x = rand3((ns, grid.ny, grid.nx), 7);
    let full = rand3((ns, 30, 48), 8);
    let xd = gpu.upload_domain(x.view()).unwrap();
    let fd = gpu.upload_sinograms(full.view()).unwrap();
    let blocks: [Vec<usize>; 4] = [
        vec![5, 17, 3],
        (10..20).collect(),
        vec![29],
        (0..30).rev().collect(),
    ];
    for angles in &blocks {
        let n = angles.len();
        let mut want = Array3::<f32>::zeros((ns, n, 48));
        cpu.forward(x.view(), angles, want.view_mut()).unwrap();
        let mut y = op.range_zeros(angles).unwrap();
        op.forward(&xd, angles, &mut y).unwrap();
        let ef = rel_l2(&flat(&gpu.download(&y).unwrap()), &flat(&want));

        let sel = op.select(&fd, angles).unwrap();
        let want_sel = full.select(Axis(1), angles);
        assert_eq!(
            gpu.download(&sel).unwrap(),
            want_sel,
            "select of {angles:?}"
        );
        let mut want_b = Array3::<f32>::zeros((ns, grid.ny, grid.nx));
        cpu.back(want_sel.view(), angles, want_b.view_mut())
            .unwrap();
        let mut b = op.domain_zeros().unwrap();
        op.backward(&sel, angles, &mut b).unwrap();
        let eb = rel_l2(&flat(&gpu.download(&b).unwrap()), &flat(&want_b));

        let plane = |a: Array2<f32>| a.insert_axis(Axis(0));
        let rs = rel_l2(
            &flat(&gpu.download(&op.row_sums(angles).unwrap()).unwrap()),
            &flat(&plane(Projector::<f32>::row_sums(&cpu, angles).unwrap())),
        );
        let cs = rel_l2(
            &flat(&gpu.download(&op.column_sums(angles).unwrap()).unwrap()),
            &flat(&plane(Projector::<f32>::column_sums(&cpu, angles).unwrap())),
        );
        let rn = rel_l2(
            &flat(&gpu.download(&op.row_norms_sq(angles).unwrap()).unwrap()),
            &flat(&plane(
                Projector::<f32>::row_norms_sq(&cpu, angles).unwrap(),
            )),
        );
        // Weights of a block cut from the full weights.
        let w_all = op.row_sums(&(0..30).collect::<Vec<_>>()).unwrap();
        let cut = gpu.download(&op.select(&w_all, angles).unwrap()).unwrap();
        let direct = gpu.download(&op.row_sums(angles).unwrap()).unwrap();
        eprintln!(
            "block {angles:?}: forward {ef:.2e}, back {eb:.2e}, row sums {rs:.2e}, column sums \
             {cs:.2e}, row norms {rn:.2e}"
        );
        // Equal up to the rounding of the forward kernel's fixed-point start
        // (it depends on the other rays of a thread's group).
        let ew = rel_l2(&flat(&cut), &flat(&direct));
        assert!(ew <= 1e-6, "selected weights of {angles:?}: {ew:.3e}");
        for (what, e) in [
            ("forward", ef),
            ("back", eb),
            ("row sums", rs),
            ("column sums", cs),
            ("row norms", rn),
        ] {
            assert!(e <= 1e-5, "block {angles:?}: {what} rel L2 {e:.3e}");
        }
    }
    // A bad block is an error, not a crash.
    assert!(op.range_zeros(&[]).is_err());
    let mut y = op.range_zeros(&[30]).unwrap();
    assert!(op.forward(&xd, &[30], &mut y).is_err());
    let mut y = op.range_zeros(&[1, 2]).unwrap();
    assert!(op.forward(&xd, &[1, 2, 3], &mut y).is_err());
}

/// GPU SART and BLOCK-IT (tomors-core's block-sequential method through
/// `solve` on the device operator) after 5 sweeps on the exact 60-angle
/// Shepp–Logan at 256² (the CPU reference takes about a second per case): the
/// GPU's NRMSE (inside the reconstruction disc) is within 2 % of the
/// CPU's, the relaxation and the residual history equal the CPU's to 1e-3,
/// and the GPU iterate equals the CPU iterate to relative L2 ≤ 1e-3 (the
/// projections agree to ≤ 1e-5 per application, see the block test; 300
/// block updates in f32 accumulate that, with a 10× margin over the 1e-4
/// of 10 SIRT iterations; the measured value is printed).
#[test]
fn gpu_sart_and_block_it_match_the_cpu() {
    let Some(be) = gpu_or_skip("gpu_sart_and_block_it_match_the_cpu") else {
        return;
    };
    let (geom, grid, sino, truth) = shepp_256();
    let cpu = JosephProjector::new(&geom, &grid).unwrap();
    let (mask, e_zero) = disc_and_zero_error(&truth);
    let more = [(
        "SART-type, blocks of 7, λ 1.2, box",
        Algorithm::BlockSequential {
            weighting: Weighting::RowColumnSums,
            projections_per_block: 7,
        },
        Some(1.2),
        Constraint::bounded(0.0, 1.0),
    )];
    for (name, algorithm, relaxation, constraint) in sart_and_block_it().into_iter().chain(more) {
        let options = fixed_options(algorithm, 5, relaxation, constraint);
        let want = reconstruct::<f32, _>(&cpu, sino.view(), None, &options, &mut |_| true).unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let progress = |i: &GpuIteration| {
            seen.lock().unwrap().push(i.iteration);
            true
        };
        let (got, stats) = sirt_cuda(
            &be,
            &geom,
            &grid,
            sino.view(),
            None,
            &options,
            &GpuSirtOptions::default(),
            &progress,
        )
        .unwrap();
        let e_cpu = nrmse(want.x.index_axis(Axis(0), 0), truth.view(), Some(&mask)).unwrap();
        let e_gpu = nrmse(got.x.index_axis(Axis(0), 0), truth.view(), Some(&mask)).unwrap();
        let ex = rel_l2(&flat(&got.x), &flat(&want.x));
        let er = max_rel(&got.residuals, &want.residuals);
        eprintln!(
            "{name}: NRMSE GPU {e_gpu:.5} CPU {e_cpu:.5} ({:+.3} %), iterate rel L2 {ex:.2e}, \
             residuals {er:.2e}, λ {:.5} (cpu {:.5}); {stats:?}",
            100.0 * (e_gpu - e_cpu) / e_cpu,
            got.relaxation,
            want.relaxation
        );
        assert_eq!(got.iterations, 5, "{name}");
        assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 4, 5], "{name}");
        assert_eq!(got.residuals.len(), 5, "{name}");
        assert!(rel(got.relaxation, want.relaxation) <= 1e-3, "{name}: λ");
        assert!(
            (e_gpu - e_cpu).abs() <= 0.02 * e_cpu,
            "{name}: NRMSE GPU {e_gpu} vs CPU {e_cpu}"
        );
        assert!(ex <= 1e-3, "{name}: iterate rel L2 {ex:.3e}");
        assert!(er <= 1e-3, "{name}: residual history differs by {er:.3e}");
        // The method works: 5 sweeps bring the error below half of the
        // zero image's (measured on the CPU: 0.025 SART, 0.104 BLOCK-IT,
        // 0.070 blocks of 7, against 0.297 for zero).
        assert!(
            e_gpu < 0.5 * e_zero,
            "{name}: NRMSE {e_gpu} (zero image {e_zero})"
        );
        assert_constraint(&got.x, constraint, name);
    }
}

/// ART and the block-parallel method run on the device operator through
/// its ray batches (no host ray access): `solve` on it succeeds and the
/// iterate moves (their comparison with the CPU is in `art_gpu.rs`).
#[test]
fn ray_methods_run_on_the_device_operator() {
    let Some(be) = gpu_or_skip("ray_methods_run_on_the_device_operator") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(12, PI), 16).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let gpu = CudaJoseph::new(&be, &geom, &grid, 4).unwrap();
    let op = gpu.operator(1).unwrap();
    assert!(op.rays().is_none() && op.ray_batches().is_some());
    let b = gpu
        .upload_sinograms(Array3::<f32>::ones((1, 12, 16)).view())
        .unwrap();
    for algorithm in [
        Algorithm::Art {
            order: RayOrder::Sequential,
        },
        Algorithm::BlockParallel {
            projections_per_block: 3,
        },
    ] {
        let mut x = op.domain_zeros().unwrap();
        let options = IterativeOptions {
            algorithm,
            iterations: 2,
            ..IterativeOptions::default()
        };
        let r = solve(&op, &b, &mut x, &options, &mut |_| true).unwrap();
        assert_eq!(r.iterations, 2, "{algorithm:?}");
        assert!(
            x.norm_sq().unwrap() > 0.0,
            "{algorithm:?}: the iterate did not move"
        );
    }
}

/// The cone-beam Joseph device operator's block views equal the CPU
/// projector's on the block (forward, back: relative L2 ≤ 1e-5, the bound
/// of the full operator), cone SART (blocks of 4, 3 sweeps) through the
/// shared `solve` equals the CPU's `reconstruct_cone` (iterate and residual
/// history to 1e-3, as the parallel block methods), and the voxel pair,
/// whose back projection covers all projections only, refuses block
/// methods with one clear error.
#[test]
fn cone_blocks_and_sart_match_the_cpu() {
    use tomors_core::cone::ConeGeometry;
    use tomors_core::iterative::{reconstruct_cone, ConeJosephProjector};
    use tomors_cuda::{cone_sirt_cuda, cone_sirt_cuda_with, ConeBackProjector, CudaConeJoseph};

    let Some(be) = gpu_or_skip("cone_blocks_and_sart_match_the_cpu") else {
        return;
    };
    let g = ConeGeometry::new(uniform_angles(16, 2.0 * PI), 80.0, 40.0, 20, 32, 1.0, 1.0).unwrap();
    let v = g.fitting_volume(24, 24, 16).unwrap();
    let (na, nr, nc) = (g.n_angles(), g.n_rows(), g.n_cols());
    let cpu = ConeJosephProjector::new(&g, &v).unwrap();
    let gpu = CudaConeJoseph::new(&be, &g, &v).unwrap();
    let op = gpu.operator();
    let x = rand3((v.nz, v.ny, v.nx), 21);
    let full = rand3((na, nr, nc), 22);
    let xd = gpu.upload_volume(x.view()).unwrap();
    let fd = gpu.upload_projections(full.view()).unwrap();
    let img = x.view().into_shape_with_order((v.nz * v.ny, v.nx)).unwrap();
    for angles in [vec![3usize, 11, 0], (4..12).collect::<Vec<_>>()] {
        let n = angles.len();
        let mut want = Array2::<f32>::zeros((n, nr * nc));
        Projector::<f32>::forward_slice(&cpu, img, &angles, want.view_mut()).unwrap();
        let mut y = op.range_zeros(&angles).unwrap();
        op.forward(&xd, &angles, &mut y).unwrap();
        let got = gpu.download(&y).unwrap();
        let ef = rel_l2(&flat(&got), &want.iter().copied().collect::<Vec<_>>());
        let sel = op.select(&fd, &angles).unwrap();
        let want_sel = full.select(Axis(0), &angles);
        assert_eq!(gpu.download(&sel).unwrap(), want_sel, "select {angles:?}");
        let s2 = want_sel.view().into_shape_with_order((n, nr * nc)).unwrap();
        let mut want_b = Array2::<f32>::zeros((v.nz * v.ny, v.nx));
        Projector::<f32>::back_slice(&cpu, s2, &angles, want_b.view_mut()).unwrap();
        let mut bd = op.domain_zeros().unwrap();
        op.backward(&sel, &angles, &mut bd).unwrap();
        let eb = rel_l2(
            &flat(&gpu.download(&bd).unwrap()),
            &want_b.iter().copied().collect::<Vec<_>>(),
        );
        eprintln!("cone block {angles:?}: forward {ef:.2e}, back {eb:.2e}");
        assert!(ef <= 1e-5, "cone block {angles:?}: forward {ef:.3e}");
        assert!(eb <= 1e-5, "cone block {angles:?}: back {eb:.3e}");
    }
    // Cone SART on a ball.
    let ball = centred_ball(&v);
    let b = cpu_forward::<f32>(&cpu, &g, &ball);
    let options = IterativeOptions {
        algorithm: Algorithm::BlockSequential {
            weighting: Weighting::RowColumnSums,
            projections_per_block: 4,
        },
        iterations: 3,
        relaxation: None,
        constraint: Constraint::non_negative(),
        tolerance: None,
        track_residual: true,
    };
    let want = reconstruct_cone::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true).unwrap();
    let (got, _) = cone_sirt_cuda(&be, &g, &v, b.view(), None, &options, &|_| true).unwrap();
    let ex = rel_l2(&flat(&got.x), &flat(&want.x));
    let er = max_rel(&got.residuals, &want.residuals);
    eprintln!("cone SART: iterate rel L2 {ex:.2e}, residuals {er:.2e}");
    assert_eq!(got.iterations, 3);
    assert!(ex <= 1e-3, "cone SART: iterate rel L2 {ex:.3e}");
    assert!(er <= 1e-3, "cone SART: residuals differ by {er:.3e}");
    let e = cone_sirt_cuda_with(
        &be,
        &g,
        &v,
        b.view(),
        None,
        &options,
        ConeBackProjector::Voxel,
        &|_| true,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("voxel-driven cone back projection of a block"),
        "{e}"
    );
}
