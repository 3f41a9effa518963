//! GPU tests of the line-sweep back projector (`sweep`: lanes = slices,
//! accumulators in registers, an entry loaded only when the bin changes)
//! against the exact f64 reference (1e-5 relative L2, as the other ALU
//! kernels) and against the exact `alu-float2` kernel, over its parameter
//! variants and geometries the exact kernel handles: centre offsets, per
//! projection centres, pixels larger and smaller than bins, odd grids that
//! are no multiple of a block, angles over a full turn in random order,
//! slice counts that fill no warp; filtered (FBP) as well. Nearest
//! interpolation is refused with an error. Skips without a GPU, fails
//! instead under `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::{gpu_or_skip, random, reference_bp, rel_l2};
use ndarray::{s, Array3};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::kernels::{AluParams, SweepParams};
use tomors_cuda::{BpConfig, KernelChoice, KernelKind, SliceMode};

fn geometries(seed: u64) -> Vec<(&'static str, ParallelGeometry, SliceGrid)> {
    let na = 90;
    // Angles over a full turn in a shuffled order (any sign of cos and sin).
    let mut full = uniform_angles(na + 7, 2.0 * std::f32::consts::PI);
    let r = random(full.len(), seed ^ 0xA5);
    let mut idx: Vec<usize> = (0..full.len()).collect();
    idx.sort_by(|&a, &b| r[a].total_cmp(&r[b]));
    full = idx.iter().map(|&i| full[i]).collect();
    let centres: Vec<f32> = random(na, seed ^ 0x5A)
        .iter()
        .map(|v| 30.0 + 2.0 * v)
        .collect();
    vec![
        (
            "centre 31.7, 70x50",
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_center(31.7)
                .unwrap(),
            SliceGrid::new(70, 50).unwrap(),
        ),
        (
            "bin 0.8, pixel 1.3, 40x40",
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_bin_width(0.8)
                .unwrap(),
            SliceGrid::with_pixel_size(40, 40, 1.3).unwrap(),
        ),
        (
            "full turn shuffled, pixel 0.7, 53x37",
            ParallelGeometry::new(full, 61).unwrap(),
            SliceGrid::with_pixel_size(53, 37, 0.7).unwrap(),
        ),
        (
            "per-projection centres, 33x65",
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_centers(centres)
                .unwrap(),
            SliceGrid::new(33, 65).unwrap(),
        ),
    ]
}

fn variants() -> Vec<SweepParams> {
    let d = SweepParams::default();
    vec![
        d,
        SweepParams { spl: 1, ..d },
        SweepParams {
            spl: 2,
            tx: 32,
            wy: 4,
            ..d
        },
        SweepParams {
            tx: 8,
            ty: 4,
            wx: 2,
            wy: 4,
            axis: true,
            ..d
        },
        SweepParams {
            tx: 4,
            ty: 4,
            spl: 2,
            wx: 4,
            wy: 4,
            axis: true,
            min_blocks: 2,
            ..d
        },
        // Shared-memory staging: a ring of 3, of 2 (one projection ahead),
        // of 5 with one slice per lane and a 2-D tile.
        SweepParams { stages: 3, ..d },
        SweepParams {
            tx: 8,
            ty: 4,
            spl: 2,
            wx: 2,
            wy: 4,
            axis: true,
            stages: 2,
            ..d
        },
        SweepParams {
            spl: 1,
            tx: 4,
            ty: 4,
            axis: true,
            stages: 5,
            ..d
        },
        // The measured fastest shape (`--kernel sweep`).
        SweepParams::tuned(),
        // The fastest shape of batch 2, with the blocks walked in strips.
        SweepParams {
            tx: 8,
            ty: 4,
            spl: 2,
            wx: 2,
            wy: 4,
            axis: true,
            min_blocks: 2,
            stages: 3,
            swizzle: 2,
        },
    ]
}

#[test]
fn sweep_matches_the_exact_reference() {
    let Some(mut be) = gpu_or_skip("sweep_matches_the_exact_reference") else {
        return;
    };
    let seed = common::test_seed();
    let mut failures = Vec::new();
    for (name, geom, grid) in geometries(seed) {
        let (na, nb) = (geom.n_angles(), geom.n_bins());
        let (ny, nx) = (grid.ny, grid.nx);
        let jobs: Vec<_> = variants()
            .into_iter()
            .map(|p| {
                (
                    BpConfig {
                        kernel: KernelKind::Sweep(p),
                        mode: SliceMode::F32,
                    },
                    Interpolation::Linear,
                )
            })
            .collect();
        be.precompile(&jobs, &geom, &grid).unwrap();
        for (vi, p) in variants().into_iter().enumerate() {
            // Fewer slices than a warp holds, and more than one warp's worth.
            for k in [5usize, 70] {
                let sino = Array3::from_shape_vec(
                    (k, na, nb),
                    random(k * na * nb, seed + k as u64 + vi as u64),
                )
                .unwrap();
                let cfg = BpConfig {
                    kernel: KernelKind::Sweep(p),
                    mode: SliceMode::F32,
                };
                be.set_kernel(KernelChoice::Fixed(cfg));
                let mut out = Array3::from_elem((k, ny, nx), f32::NAN);
                be.backproject(
                    sino.view(),
                    &geom,
                    &grid,
                    Interpolation::Linear,
                    0.5,
                    out.view_mut(),
                )
                .unwrap();
                let mut e_ref = 0f64;
                for z in 0..k {
                    let g: Vec<f32> = out.slice(s![z, .., ..]).iter().map(|v| v * 2.0).collect();
                    assert!(g.iter().all(|v| v.is_finite()), "{cfg} {name}: unwritten");
                    let r = reference_bp(
                        sino.slice(s![z, .., ..]),
                        &geom,
                        &grid,
                        Interpolation::Linear,
                    );
                    e_ref = e_ref.max(rel_l2(&g, r.as_slice().unwrap()));
                }
                eprintln!(
                    "{name:<38} {cfg:<36} {k:>3} slices: rel L2 vs f64 reference {e_ref:.2e}"
                );
                if e_ref.is_nan() || e_ref > 1e-5 {
                    failures.push(format!("{name} {cfg} {k} slices: {e_ref:.2e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "over 1e-5: {failures:?}");
}

#[test]
fn sweep_fbp_agrees_with_the_exact_alu_kernel() {
    let Some(mut be) = gpu_or_skip("sweep_fbp_agrees_with_the_exact_alu_kernel") else {
        return;
    };
    let seed = common::test_seed();
    let (na, nb, k) = (120, 96, 9);
    let geom = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), nb)
        .unwrap()
        .with_center(47.3)
        .unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino = Array3::from_shape_vec((k, na, nb), random(k * na * nb, seed ^ 3)).unwrap();
    let exact = BpConfig {
        kernel: KernelKind::Alu(AluParams::untuned()),
        mode: SliceMode::Float2,
    };
    let mut run = |cfg: BpConfig| {
        be.set_kernel(KernelChoice::Fixed(cfg));
        let mut out = Array3::from_elem((k, grid.ny, grid.nx), f32::NAN);
        be.fbp(
            sino.view(),
            &geom,
            &grid,
            &FilterSpec::default(),
            Interpolation::Linear,
            out.view_mut(),
        )
        .unwrap();
        assert!(out.iter().all(|v| v.is_finite()), "{cfg}: unwritten");
        out.into_raw_vec_and_offset().0
    };
    let a = run(exact);
    for p in variants() {
        let cfg = BpConfig {
            kernel: KernelKind::Sweep(p),
            mode: SliceMode::F32,
        };
        let b = run(cfg);
        let e = rel_l2(&b, &a);
        eprintln!("FBP {cfg} vs {exact}: rel L2 {e:.2e}");
        // Both within 1e-5 of the f64 reference: within 2e-5 of each other.
        assert!(e <= 2e-5, "{cfg}: {e:.2e} from the exact alu kernel");
    }
}

#[test]
fn sweep_refuses_nearest_interpolation() {
    let Some(mut be) = gpu_or_skip("sweep_refuses_nearest_interpolation") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(16, std::f32::consts::PI), 16).unwrap();
    let grid = SliceGrid::new(16, 16).unwrap();
    let sino = Array3::<f32>::ones((2, 16, 16));
    be.set_kernel("sweep".parse().unwrap());
    let mut out = Array3::<f32>::zeros((2, 16, 16));
    let e = be
        .backproject(
            sino.view(),
            &geom,
            &grid,
            Interpolation::Nearest,
            1.0,
            out.view_mut(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("sweep"), "{e}");
}
