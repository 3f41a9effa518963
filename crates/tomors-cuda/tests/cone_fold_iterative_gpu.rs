//! GPU tests of the folded cone-beam kernels of the iterative methods
//! (`CudaConeJoseph::set_fold`): on mirror-symmetric geometries (even and
//! odd detector rows and slices, a wide cone with z-dominant rays) the
//! folded texture forward projection, the folded voxel back projection
//! (FDK's `cone_bp_fold`) and the mirrored row sums equal the CPU
//! operators within the texture unit's 8-bit weights (row sums to f32
//! rounding) and the unfolded kernels; an off-centre detector is not
//! folded; a folded SIRT equals the CPU's. GPU tests skip with a printed
//! reason when no GPU is usable (and fail under `TOMORS_REQUIRE_GPU=1`).

mod common;

use std::f64::consts::PI;

use common::cone::{
    cpu_back, cpu_forward, gpu_back, gpu_forward, mirror_cases as cases, smooth_projections,
    two_balls,
};
use common::{fixed_options, flat, gpu_or_skip, no_progress, rand3, rel_l2, run_gap};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    reconstruct_cone, Algorithm, ConeJosephProjector, ConeVoxelProjector, Constraint,
    IterativeOptions, Weighting,
};
use tomors_cuda::{cone_sirt_cuda_with, ConeBackProjector, CudaConeJoseph};

/// A ball and a smaller off-centre ball, not symmetric in z (so a
/// mirrored row that read the wrong half would show).
fn phantom(v: &ConeVolume) -> Array3<f32> {
    two_balls(v, 0.2)
}

/// Folded and unfolded operators against the CPU and each other, on
/// poisoned outputs (every value written).
#[test]
fn folded_kernels_match_the_cpu_and_the_unfolded_ones() {
    let Some(be) = gpu_or_skip("folded_kernels_match_the_cpu_and_the_unfolded_ones") else {
        return;
    };
    let seed = common::test_seed();
    for (name, g, v, symmetric) in cases() {
        let mut gpu = CudaConeJoseph::with_back(&be, &g, &v, ConeBackProjector::Voxel).unwrap();
        assert!(
            gpu.set_fold(true).unwrap() == symmetric,
            "{name}: symmetric"
        );
        assert_eq!(gpu.folded(), (symmetric, symmetric), "{name}");
        let jcpu = ConeJosephProjector::new(&g, &v).unwrap();
        let vcpu = ConeVoxelProjector::new(&g, &v).unwrap();
        let xp = phantom(&v);
        let xr = rand3((v.nz, v.ny, v.nx), seed);
        let yp = cpu_forward::<f64>(&jcpu, &g, &xp);
        let ys = smooth_projections(&g);
        let ones = Array3::<f32>::ones((v.nz, v.ny, v.nx));
        let want_rs = cpu_forward::<f64>(&jcpu, &g, &ones);
        let mut runs = Vec::new();
        for fold in [true, false] {
            gpu.set_fold(fold).unwrap();
            let mut fw = Vec::new();
            for (what, x, bound) in [("phantom", &xp, 2e-3), ("random", &xr, 1e-2)] {
                // Poisoned device outputs: every value must be written.
                let got = gpu_forward(&gpu, x, yp.dim(), &name);
                let want = cpu_forward::<f32>(&jcpu, &g, x);
                let e = rel_l2(&flat(&got), &flat(&want));
                eprintln!("{name}, fold {fold}, {what}: forward vs CPU Joseph f32 rel L2 {e:.2e}");
                assert!(
                    e <= bound,
                    "{name}, fold {fold}, {what}: forward rel L2 {e:.3e}"
                );
                fw.push(got);
            }
            let mut bk = Vec::new();
            for (what, y) in [("smooth", &ys), ("phantom", &yp)] {
                let got = gpu_back(&gpu, &v, y, &name);
                let want = cpu_back::<f32>(&vcpu, &v, y);
                let e = rel_l2(&flat(&got), &flat(&want));
                eprintln!("{name}, fold {fold}, {what}: voxel back vs CPU f32 rel L2 {e:.2e}");
                assert!(
                    e <= 2e-3,
                    "{name}, fold {fold}, {what}: voxel back rel L2 {e:.3e}"
                );
                bk.push(got);
            }
            let rs = gpu.row_sums(false).unwrap();
            let e = rel_l2(&flat(&rs), &flat(&want_rs));
            eprintln!("{name}, fold {fold}: row sums vs CPU f64 rel L2 {e:.2e}");
            assert!(e <= 1e-5, "{name}, fold {fold}: row sums rel L2 {e:.3e}");
            runs.push((fw, bk, rs));
        }
        let (f1, b1, r1) = &runs[0];
        let (f0, b0, r0) = &runs[1];
        let ef = rel_l2(&flat(&f1[0]), &flat(&f0[0]));
        let efr = rel_l2(&flat(&f1[1]), &flat(&f0[1]));
        let eb = rel_l2(&flat(&b1[0]), &flat(&b0[0]));
        let ebp = rel_l2(&flat(&b1[1]), &flat(&b0[1]));
        let er = rel_l2(&flat(r1), &flat(r0));
        eprintln!(
            "{name}: folded vs unfolded: forward phantom {ef:.2e}, random {efr:.2e}; back smooth \
             {eb:.2e}, phantom {ebp:.2e}; row sums {er:.2e}"
        );
        if symmetric {
            assert!(
                ef <= 2e-3 && efr <= 1e-2,
                "{name}: forward {ef:.3e} {efr:.3e}"
            );
            assert!(eb <= 2e-3 && ebp <= 2e-3, "{name}: back {eb:.3e} {ebp:.3e}");
            assert!(er <= 1e-6, "{name}: row sums {er:.3e}");
        } else {
            // Not folded: the same kernels twice, the same bits.
            assert_eq!(flat(&f1[0]), flat(&f0[0]), "{name}");
            assert_eq!(flat(&b1[0]), flat(&b0[0]), "{name}");
        }
    }
}

/// A folded voxel-pair SIRT (the default on symmetric geometries) equals
/// the CPU's f32 `reconstruct_cone` with the `ConeVoxelProjector` after 8
/// iterations within the texture interpolation (2e-3, as the unfolded).
#[test]
fn folded_sirt_matches_the_cpu() {
    let Some(be) = gpu_or_skip("folded_sirt_matches_the_cpu") else {
        return;
    };
    for (name, g, v, symmetric) in cases().into_iter().filter(|c| c.3) {
        let b = {
            let jcpu = ConeJosephProjector::new(&g, &v).unwrap();
            cpu_forward::<f64>(&jcpu, &g, &phantom(&v))
        };
        let cpu = ConeVoxelProjector::new(&g, &v).unwrap();
        let options = fixed_options(
            Algorithm::Sirt(Weighting::RowColumnSums),
            8,
            None,
            Constraint::non_negative(),
        );
        let want =
            reconstruct_cone::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true).unwrap();
        let (got, _) = cone_sirt_cuda_with(
            &be,
            &g,
            &v,
            b.view(),
            None,
            &options,
            ConeBackProjector::Voxel,
            &no_progress(),
        )
        .unwrap();
        let (ex, _, er) = run_gap(&got, &want);
        eprintln!("{name} (symmetric {symmetric}): folded SIRT vs CPU rel L2 {ex:.2e}, residuals {er:.2e}");
        assert_eq!(got.iterations, 8);
        assert!(ex <= 2e-3, "{name}: volume rel L2 {ex:.3e}");
        assert!(er <= 2e-3, "{name}: residuals differ by {er:.3e}");
        // Without the residual history the forward projections of the
        // zero start and after the last update are skipped; the iterate is
        // the same bits (the voxel pair's kernels are gathers).
        let untracked = IterativeOptions {
            track_residual: false,
            ..options
        };
        let (got2, st2) = cone_sirt_cuda_with(
            &be,
            &g,
            &v,
            b.view(),
            None,
            &untracked,
            ConeBackProjector::Voxel,
            &no_progress(),
        )
        .unwrap();
        eprintln!(
            "{name}: untracked: {} forward projections",
            st2.forward_count
        );
        assert_eq!(st2.forward_count, 7, "{name}");
        assert!(got2.residuals.is_empty());
        assert_eq!(flat(&got2.x), flat(&got.x), "{name}: untracked iterate");
    }
}

/// The quarter-turn symmetry of the weights (`CudaConeJoseph::set_rotation`):
/// on square volumes with projections uniform over a full turn (a multiple
/// of 4), the row sums (first quarter copied) equal the CPU's to f32
/// rounding and the directly computed ones; the voxel pair's column sums
/// (the sum of the four quarter turns of the first quarter's back
/// projection) equal the CPU's voxel back projection of ones within the
/// texture weights and the direct GPU column sums to the rounding of the
/// texture coordinates. Few angles (8 and 20) make a wrong turn show: a
/// quarter's back projection is far from symmetric. Other geometries are
/// not turned.
#[test]
fn quarter_turn_weights_match_the_direct_ones() {
    let Some(be) = gpu_or_skip("quarter_turn_weights_match_the_direct_ones") else {
        return;
    };
    let q20 = ConeGeometry::new(
        uniform_angles(20, 2.0 * PI as f32),
        60.0,
        40.0,
        19,
        22,
        1.1,
        1.0,
    )
    .unwrap();
    let mut all = vec![(
        "quarter turn, odd rows and volume".to_string(),
        q20.clone(),
        q20.fitting_volume(17, 17, 13).unwrap(),
        true,
    )];
    all.extend(cases().into_iter().map(|(n, g, v, _)| {
        let turn = g.n_angles() % 4 == 0 && v.nx == v.ny;
        (n, g, v, turn)
    }));
    for (name, g, v, turn) in all {
        let mut gpu = CudaConeJoseph::with_back(&be, &g, &v, ConeBackProjector::Voxel).unwrap();
        assert_eq!(gpu.set_rotation(true), turn, "{name}");
        // The matched pair keeps every projection's own weights.
        let mut jos = CudaConeJoseph::new(&be, &g, &v).unwrap();
        assert!(
            !jos.set_rotation(true),
            "{name}: the Joseph pair is not turned"
        );
        let jcpu = ConeJosephProjector::new(&g, &v).unwrap();
        let vcpu = ConeVoxelProjector::new(&g, &v).unwrap();
        let ones = Array3::<f32>::ones((v.nz, v.ny, v.nx));
        let want_rs = cpu_forward::<f64>(&jcpu, &g, &ones);
        let want_cs = cpu_back::<f32>(
            &vcpu,
            &v,
            &Array3::<f32>::ones((g.n_angles(), g.n_rows(), g.n_cols())),
        );
        let rs = gpu.row_sums(false).unwrap();
        let cs = gpu.column_sums().unwrap();
        gpu.set_rotation(false);
        let rs0 = gpu.row_sums(false).unwrap();
        let cs0 = gpu.column_sums().unwrap();
        let (er, ec) = (
            rel_l2(&flat(&rs), &flat(&want_rs)),
            rel_l2(&flat(&cs), &flat(&want_cs)),
        );
        let (dr, dc) = (
            rel_l2(&flat(&rs), &flat(&rs0)),
            rel_l2(&flat(&cs), &flat(&cs0)),
        );
        eprintln!(
            "{name} (turned {turn}): row sums vs CPU {er:.2e}, vs direct {dr:.2e}; column sums \
             vs CPU {ec:.2e}, vs direct {dc:.2e}"
        );
        assert!(er <= 1e-5, "{name}: row sums vs CPU {er:.3e}");
        assert!(dr <= 1e-5, "{name}: row sums vs direct {dr:.3e}");
        assert!(ec <= 2e-3, "{name}: column sums vs CPU {ec:.3e}");
        assert!(dc <= 5e-4, "{name}: column sums vs direct {dc:.3e}");
        if !turn {
            assert_eq!(flat(&rs), flat(&rs0), "{name}");
            assert_eq!(flat(&cs), flat(&cs0), "{name}");
        }
    }
}
