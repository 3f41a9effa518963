//! GPU tests of the parallel-beam voxel pair (`CudaJoseph::set_voxel_back`,
//! `GpuSirtOptions::voxel`): Joseph's forward projection with FBP's
//! voxel-driven back projection (the line-sweep and tensor-core kernels)
//! against tomors-core's `VoxelDrivenProjector` (f64 back projection, the
//! same scale `pixel²/bin_width`), SIRT against the CPU's `reconstruct`
//! with the voxel pair, and the refusals (block methods, the line model,
//! geometries the tensor kernel does not cover). GPU tests skip with a
//! printed reason when no GPU is usable (and fail under
//! `TOMORS_REQUIRE_GPU=1`).

mod common;

use common::joseph::{cases, shepp};
use common::{
    assert_constraint, fixed_options, flat, gpu_or_skip, no_progress, rand3, rel_l2, run_gap,
};
use ndarray::{Array3, Axis};
use tomors_core::iterative::{
    all_angles, reconstruct, Algorithm, Constraint, IterativeOptions, Projector,
    VoxelDrivenProjector, Weighting,
};
use tomors_cuda::{sirt_cuda, CudaJoseph, GpuSirtOptions, VoxelKernel};

/// Whether the tensor kernel covers the geometry of `cases`: not where the
/// bins are 0.6 of the pixel (a 4×4 block spans more than its 8 bins).
fn tensor_covers(name: &str) -> bool {
    !name.starts_with("bins 0.6")
}

/// The CPU voxel pair in f64 on a stack: (forward, back).
fn cpu_pair(p: &VoxelDrivenProjector, x: &Array3<f32>, y: &Array3<f32>) -> [Array3<f32>; 2] {
    let na = Projector::<f64>::n_angles(p);
    let nb = Projector::<f64>::n_bins(p);
    let (ny, nx) = Projector::<f64>::image_dim(p);
    let ns = x.len_of(Axis(0));
    let mut f = Array3::<f64>::zeros((ns, na, nb));
    p.forward(x.mapv(|v| v as f64).view(), &all_angles(na), f.view_mut())
        .unwrap();
    let mut b = Array3::<f64>::zeros((ns, ny, nx));
    p.back(y.mapv(|v| v as f64).view(), &all_angles(na), b.view_mut())
        .unwrap();
    [f.mapv(|v| v as f32), b.mapv(|v| v as f32)]
}

/// The GPU voxel pair equals tomors-core's `VoxelDrivenProjector` in f64:
/// forward (Joseph's kernels) and back (FBP's sweep and tensor kernels,
/// scaled by pixel²/bin width) to relative L2 ≤ 1e-5 (the bound of FBP's
/// exact kernels against the f64 reference) on fresh random zero-mean data,
/// 11 slices (a padded last group), the column sums `B·1` (f64 sums,
/// ≤ 1e-6), every output element written (NaN
/// poison), `Auto` taking the tensor kernel where it covers the geometry,
/// the sweep's packing straight from the interleaved sinograms
/// bit-equal to FBP's own packing; the tensor kernel refuses the geometry whose 4×4 blocks span
/// more bins than it covers, with an error naming it.
#[test]
fn voxel_pair_matches_the_cpu() {
    let Some(be) = gpu_or_skip("voxel_pair_matches_the_cpu") else {
        return;
    };
    let seed = common::test_seed();
    for (name, geom, grid) in cases(seed) {
        let tensor_ok = tensor_covers(&name);
        let cpu = VoxelDrivenProjector::new(&geom, &grid).unwrap();
        let ns = 11;
        let (na, nb) = (geom.n_angles(), geom.n_bins());
        let x = rand3((ns, grid.ny, grid.nx), seed);
        let y = rand3((ns, na, nb), seed ^ 3);
        let [want_f, want_b] = cpu_pair(&cpu, &x, &y);
        for kernel in [VoxelKernel::Sweep, VoxelKernel::Tensor, VoxelKernel::Auto] {
            let mut gpu = CudaJoseph::new(&be, &geom, &grid, 8).unwrap();
            let set = gpu.set_voxel_back(Some(kernel));
            if kernel == VoxelKernel::Tensor && !tensor_ok {
                let e = set.expect_err("the tensor kernel refuses this geometry");
                eprintln!("{name}, {kernel:?}: refused: {e}");
                assert!(e.to_string().contains("tensor"), "{e}");
                continue;
            }
            set.unwrap();
            assert_eq!(gpu.voxel_back(), Some(kernel));
            if kernel == VoxelKernel::Auto {
                // The tensor kernel where it covers the geometry, else the sweep.
                let want = if tensor_ok {
                    VoxelKernel::Tensor
                } else {
                    VoxelKernel::Sweep
                };
                assert_eq!(gpu.voxel_back_resolved(), Some(want), "{name}");
            }
            let mut got_f = Array3::<f32>::from_elem((ns, na, nb), f32::NAN);
            gpu.forward(x.view(), got_f.view_mut()).unwrap();
            let mut got_b = Array3::<f32>::from_elem((ns, grid.ny, grid.nx), f32::NAN);
            gpu.back(y.view(), got_b.view_mut()).unwrap();
            assert!(got_b.iter().all(|v| v.is_finite()), "{name}: unwritten");
            if kernel == VoxelKernel::Sweep {
                // The packing from the interleaved sinograms (the default)
                // writes FBP's entries bit for bit.
                assert!(!gpu.set_voxel_fused_pack(false));
                let mut plain = Array3::<f32>::from_elem((ns, grid.ny, grid.nx), f32::NAN);
                gpu.back(y.view(), plain.view_mut()).unwrap();
                assert!(gpu.set_voxel_fused_pack(true));
                let same = plain
                    .iter()
                    .zip(&got_b)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                eprintln!("{name}: fused packing bit-equal to FBP's: {same}");
                assert!(same, "{name}: the fused packing differs from FBP's");
            }
            let ef = rel_l2(&flat(&got_f), &flat(&want_f));
            let eb = rel_l2(&flat(&got_b), &flat(&want_b));
            // The column sums B·1 (jp_voxel_ones, f64 sums) against the f64 CPU.
            let cs = gpu.column_sums().unwrap();
            let want_cs = Projector::<f64>::column_sums(&cpu, &all_angles(na)).unwrap();
            let ec = rel_l2(
                cs.as_slice().unwrap(),
                &want_cs.iter().map(|&v| v as f32).collect::<Vec<_>>(),
            );
            eprintln!(
                "{name}, {kernel:?}: forward rel L2 {ef:.2e}, back {eb:.2e}, column sums {ec:.2e}"
            );
            assert!(ec <= 1e-6, "{name} {kernel:?}: column sums rel L2 {ec:.3e}");
            assert!(ef <= 1e-5, "{name} {kernel:?}: forward rel L2 {ef:.3e}");
            assert!(eb <= 1e-5, "{name} {kernel:?}: back rel L2 {eb:.3e}");
        }
    }
}

/// GPU SIRT with the voxel pair equals the CPU's `reconstruct` with the f32
/// `VoxelDrivenProjector` after 10 iterations (volume and residual history
/// to relative 1e-4, the bound of the matched pair's test), row/column sums
/// with a box and Landweber with its default relaxation (power iteration of
/// the unmatched `BA` on both sides, 1e-3), with both kernels; slabs of 8
/// slices equal one slab and the run without the residual history the
/// tracked one (1e-6); SART is
/// refused with one error naming the voxel back projection.
#[test]
fn voxel_sirt_matches_the_cpu() {
    let Some(be) = gpu_or_skip("voxel_sirt_matches_the_cpu") else {
        return;
    };
    let (geom, grid, sino) = shepp(64, 45);
    let cpu = VoxelDrivenProjector::new(&geom, &grid).unwrap();
    for (w, relax, constraint) in [
        (
            Weighting::RowColumnSums,
            None,
            Constraint::bounded(0.0, 0.8),
        ),
        (Weighting::Landweber, None, Constraint::non_negative()),
    ] {
        let options = fixed_options(Algorithm::Sirt(w), 10, relax, constraint);
        let want = reconstruct::<f32, _>(&cpu, sino.view(), None, &options, &mut |_| true).unwrap();
        for kernel in [VoxelKernel::Sweep, VoxelKernel::Tensor] {
            let gpu = GpuSirtOptions {
                voxel: Some(kernel),
                ..GpuSirtOptions::default()
            };
            let (got, stats) = sirt_cuda(
                &be,
                &geom,
                &grid,
                sino.view(),
                None,
                &options,
                &gpu,
                &no_progress(),
            )
            .unwrap();
            let (ex, lam, er) = run_gap(&got, &want);
            eprintln!(
                "{w:?} {kernel:?} λ {:.5} (cpu {:.5}): volume rel L2 {ex:.2e}, residuals \
                 {er:.2e}; {stats:?}",
                got.relaxation, want.relaxation
            );
            assert_eq!(got.iterations, 10);
            assert!(
                lam <= 1e-3,
                "{w:?} {kernel:?}: λ {} vs {}",
                got.relaxation,
                want.relaxation
            );
            assert!(ex <= 1e-4, "{w:?} {kernel:?}: volume rel L2 {ex:.3e}");
            assert!(er <= 1e-4, "{w:?} {kernel:?}: residuals differ by {er:.3e}");
            assert_constraint(&got.x, constraint, &format!("{w:?} {kernel:?}"));
        }
    }
    // Slabs: 19 slices in slabs of 8 (the scratch sized by the first slab,
    // reused by the last of 3 slices) equal one slab (slices are
    // independent).
    let ns = 19;
    let mut many = Array3::<f32>::zeros((ns, geom.n_angles(), geom.n_bins()));
    for (i, mut s) in many.outer_iter_mut().enumerate() {
        s.assign(
            &sino
                .index_axis(Axis(0), i % 3)
                .mapv(|v| v * (1.0 + 0.05 * i as f32)),
        );
    }
    let options = fixed_options(
        Algorithm::Sirt(Weighting::RowColumnSums),
        4,
        None,
        Constraint::non_negative(),
    );
    for kernel in [VoxelKernel::Sweep, VoxelKernel::Tensor] {
        let run = |slab: usize| {
            let gpu = GpuSirtOptions {
                voxel: Some(kernel),
                slab,
                ..GpuSirtOptions::default()
            };
            sirt_cuda(
                &be,
                &geom,
                &grid,
                many.view(),
                None,
                &options,
                &gpu,
                &no_progress(),
            )
            .unwrap()
        };
        let (whole, _) = run(0);
        let (slabs, st) = run(8);
        assert_eq!(st.slabs, 3);
        let e = rel_l2(&flat(&slabs.x), &flat(&whole.x));
        eprintln!("{kernel:?}: slabs of 8 vs one slab {e:.2e}");
        assert!(e <= 1e-6, "{kernel:?}: slabs vs whole {e:.3e}");
        // Without the residual history (no forward projection after the
        // last update, the iterate downloaded after the loop): the same
        // iterate.
        let untracked = IterativeOptions {
            track_residual: false,
            ..options
        };
        let gpu = GpuSirtOptions {
            voxel: Some(kernel),
            ..GpuSirtOptions::default()
        };
        let (u, st) = sirt_cuda(
            &be,
            &geom,
            &grid,
            many.view(),
            None,
            &untracked,
            &gpu,
            &no_progress(),
        )
        .unwrap();
        let e = rel_l2(&flat(&u.x), &flat(&whole.x));
        eprintln!(
            "{kernel:?}: untracked vs tracked {e:.2e} ({} forward projections)",
            st.forward_count
        );
        assert!(e <= 1e-6, "{kernel:?}: untracked vs tracked {e:.3e}");
    }
    let sart = fixed_options(
        Algorithm::BlockSequential {
            weighting: Weighting::RowColumnSums,
            projections_per_block: 1,
        },
        2,
        None,
        Constraint::none(),
    );
    let e = sirt_cuda(
        &be,
        &geom,
        &grid,
        sino.view(),
        None,
        &sart,
        &GpuSirtOptions {
            voxel: Some(VoxelKernel::Sweep),
            ..GpuSirtOptions::default()
        },
        &no_progress(),
    )
    .expect_err("SART with the voxel pair is refused");
    eprintln!("SART: {e}");
    assert!(e.to_string().contains("voxel"), "{e}");
    // The line-length model pairs with its own transpose only.
    let mut j = CudaJoseph::new(&be, &geom, &grid, 8).unwrap();
    j.set_line_model(true).unwrap();
    let e = j
        .set_voxel_back(Some(VoxelKernel::Sweep))
        .expect_err("line model and voxel back projection");
    assert!(e.to_string().contains("voxel"), "{e}");
}
