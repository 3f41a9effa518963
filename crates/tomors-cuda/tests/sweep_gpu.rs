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

use common::{exact, gpu_or_skip, random};
use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::kernels::SweepParams;
use tomors_cuda::{BpConfig, KernelKind, SliceMode};

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

fn configs() -> Vec<BpConfig> {
    variants()
        .into_iter()
        .map(|p| BpConfig {
            kernel: KernelKind::Sweep(p),
            mode: SliceMode::F32,
        })
        .collect()
}

#[test]
fn sweep_matches_the_exact_reference() {
    let Some(mut be) = gpu_or_skip("sweep_matches_the_exact_reference") else {
        return;
    };
    let seed = common::test_seed();
    exact::check_against_reference(
        &mut be,
        exact::geometries(seed, 0.8, 1.3),
        &configs(),
        seed,
        false,
        |k, na, nb, seed| Array3::from_shape_vec((k, na, nb), random(k * na * nb, seed)).unwrap(),
    );
}

#[test]
fn sweep_fbp_agrees_with_the_exact_alu_kernel() {
    let Some(mut be) = gpu_or_skip("sweep_fbp_agrees_with_the_exact_alu_kernel") else {
        return;
    };
    exact::check_fbp_against_exact_alu(&mut be, &configs(), common::test_seed());
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
