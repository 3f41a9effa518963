//! GPU tests of the tensor-core back projector (`tensor`: hat-function
//! weights × values as `mma.m16n8k16`, both operands split in two f16
//! parts) against the exact f64 reference (1e-5 relative L2 per slice, as
//! the other ALU kernels) and against the exact `alu-float2` kernel, over
//! its parameter variants and the geometries it accepts: centre offsets,
//! per-projection centres, pixels smaller and somewhat larger than bins,
//! odd grids that are no multiple of a block, angles over a full turn in
//! random order, slice counts that fill no block, slices whose magnitudes
//! span 10^±16 (the per-slice power-of-two scaling) and all-positive data
//! (where a biased accumulation would show); filtered (FBP) as well.
//! Nearest interpolation and pixels too large for its 8 bins per block are
//! refused with an error. Skips without a GPU, fails instead under
//! `TOMORS_REQUIRE_GPU=1`.

mod common;

use common::{gpu_or_skip, random, reference_bp, rel_l2};
use ndarray::{s, Array3};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::kernels::{AluParams, TensorParams};
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
            "bin 0.9, pixel 1.0, 40x40",
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_bin_width(0.9)
                .unwrap(),
            SliceGrid::with_pixel_size(40, 40, 1.0).unwrap(),
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

fn variants() -> Vec<TensorParams> {
    let d = TensorParams::default();
    vec![
        TensorParams::tuned(),
        d,
        TensorParams {
            nt: 4,
            flush: 8,
            nt_outer: true,
            ..d
        },
        TensorParams {
            bx: 1,
            flush: 3,
            mask: true,
            ..d
        },
        TensorParams {
            by: 2,
            nt: 4,
            swizzle: 2,
            ..d
        },
        TensorParams {
            bx: 1,
            nt: 2,
            wx: 2,
            wy: 2,
            ap: 1,
            stages: 2,
            min_blocks: 2,
            mask: true,
            ..d
        },
        TensorParams {
            bx: 1,
            by: 1,
            nt: 1,
            wx: 1,
            wy: 3,
            ap: 3,
            stages: 4,
            ..d
        },
        // Interleaved chains (two tiles; four tiles with independent
        // products), the split products (k2, k3), four tiles of the flushed
        // accumulation (tiles outermost).
        TensorParams { interleave: 2, ..d },
        TensorParams {
            interleave: 4,
            independent: 1,
            ..d
        },
        TensorParams {
            independent: 2,
            ..d
        },
        TensorParams {
            nt: 4,
            independent: 3,
            ..d
        },
        TensorParams {
            nt: 4,
            flush: 8,
            nt_outer: true,
            interleave: 4,
            ..d
        },
        // Bulk staging (one copy-engine copy per projection and stage on an
        // mbarrier): the shipped shape, 4 pairs in 2 stages, and a small
        // block with 3 pairs in 4 stages.
        TensorParams {
            bulk: true,
            ..TensorParams::tuned()
        },
        TensorParams {
            bulk: true,
            ap: 4,
            stages: 2,
            ..TensorParams::tuned()
        },
        TensorParams {
            bx: 1,
            by: 1,
            nt: 1,
            wx: 1,
            wy: 3,
            ap: 3,
            stages: 4,
            bulk: true,
            ..d
        },
    ]
}

/// Slice z's data: random in [-1, 1) for even z, in [0.5, 2.5) for odd z,
/// times 10^(8 (z mod 5) - 16).
fn sinograms(k: usize, na: usize, nb: usize, seed: u64) -> Array3<f32> {
    let mut a = Array3::from_shape_vec((k, na, nb), random(k * na * nb, seed)).unwrap();
    for (z, mut plane) in a.outer_iter_mut().enumerate() {
        let f = 10f32.powi(8 * (z % 5) as i32 - 16);
        let off = if z % 2 == 1 { 1.5 } else { 0.0 };
        plane.mapv_inplace(|v| (v + off) * f);
    }
    a
}

#[test]
fn tensor_matches_the_exact_reference() {
    let Some(mut be) = gpu_or_skip("tensor_matches_the_exact_reference") else {
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
                        kernel: KernelKind::Tensor(p),
                        mode: SliceMode::F32,
                    },
                    Interpolation::Linear,
                )
            })
            .collect();
        be.precompile(&jobs, &geom, &grid).unwrap();
        for (vi, p) in variants().into_iter().enumerate() {
            // Fewer slices than a block holds, and more than one block's worth.
            for k in [5usize, 70] {
                let sino = sinograms(k, na, nb, seed + k as u64 + vi as u64);
                let cfg = BpConfig {
                    kernel: KernelKind::Tensor(p),
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
                let (mut e_ref, mut e_pos) = (0f64, 0f64);
                for z in 0..k {
                    let g: Vec<f32> = out.slice(s![z, .., ..]).iter().map(|v| v * 2.0).collect();
                    assert!(g.iter().all(|v| v.is_finite()), "{cfg} {name}: unwritten");
                    let r = reference_bp(
                        sino.slice(s![z, .., ..]),
                        &geom,
                        &grid,
                        Interpolation::Linear,
                    );
                    let e = rel_l2(&g, r.as_slice().unwrap());
                    e_ref = e_ref.max(e);
                    if z % 2 == 1 {
                        e_pos = e_pos.max(e);
                    }
                }
                eprintln!(
                    "{name:<38} {cfg:<44} {k:>3} slices: rel L2 vs f64 reference {e_ref:.2e} \
                     (positive slices {e_pos:.2e})"
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
fn tensor_fbp_agrees_with_the_exact_alu_kernel() {
    let Some(mut be) = gpu_or_skip("tensor_fbp_agrees_with_the_exact_alu_kernel") else {
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
            kernel: KernelKind::Tensor(p),
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
fn tensor_refuses_nearest_and_large_pixels() {
    let Some(mut be) = gpu_or_skip("tensor_refuses_nearest_and_large_pixels") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(16, std::f32::consts::PI), 16).unwrap();
    let sino = Array3::<f32>::ones((2, 16, 16));
    be.set_kernel("tensor".parse().unwrap());
    for (interp, pixel, what) in [
        (Interpolation::Nearest, 1.0, "tensor"),
        (Interpolation::Linear, 1.3, "4x4 pixel block"),
    ] {
        let grid = SliceGrid::with_pixel_size(16, 16, pixel).unwrap();
        let mut out = Array3::<f32>::zeros((2, 16, 16));
        let e = be
            .backproject(sino.view(), &geom, &grid, interp, 1.0, out.view_mut())
            .unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }
}

/// `Auto` without a tuned choice: the tensor-core kernel for a linear job
/// of 64 slices or more where it can run, the exact cache kernel below that;
/// with or without one, not the tensor kernel for nearest interpolation or
/// for pixels too large for it; and an `Auto` FBP of such a job equals the
/// fixed tensor kernel's bit for bit. (A tuning file with entries for this
/// device decides instead: then only the refusals are checked, with a note.)
#[test]
fn auto_takes_the_tensor_kernel_where_it_can() {
    let Some(mut be) = gpu_or_skip("auto_takes_the_tensor_kernel_where_it_can") else {
        return;
    };
    let geom = ParallelGeometry::new(uniform_angles(48, std::f32::consts::PI), 40).unwrap();
    let grid = SliceGrid::new(36, 36).unwrap();
    let big = SliceGrid::with_pixel_size(36, 36, 1.3).unwrap();
    let is_tensor = |c: BpConfig| matches!(c.kernel, KernelKind::Tensor(_));
    let lin = Interpolation::Linear;
    assert!(!is_tensor(be.kernel_for_job(200, lin, &geom, &big)));
    assert!(!is_tensor(be.kernel_for_job(
        200,
        Interpolation::Nearest,
        &geom,
        &grid
    )));
    let tuned = [63, 64, 200]
        .iter()
        .any(|&k| be.kernel_for(k, lin) != KernelChoice::Auto.resolve(k));
    if tuned {
        eprintln!(
            "auto_takes_the_tensor_kernel_where_it_can: a tuning file has entries for this \
             device, so Auto's default choice is not checked"
        );
        return;
    }
    assert!(is_tensor(be.kernel_for_job(64, lin, &geom, &grid)));
    assert!(is_tensor(be.kernel_for_job(200, lin, &geom, &grid)));
    assert!(!is_tensor(be.kernel_for_job(63, lin, &geom, &grid)));
    let k = 66;
    let sino = Array3::from_shape_vec((k, 48, 40), random(k * 48 * 40, 17)).unwrap();
    let mut run = |choice: KernelChoice| {
        be.set_kernel(choice);
        let mut out = Array3::from_elem((k, 36, 36), f32::NAN);
        be.fbp(
            sino.view(),
            &geom,
            &grid,
            &FilterSpec::default(),
            lin,
            out.view_mut(),
        )
        .unwrap();
        out
    };
    let auto = run(KernelChoice::Auto);
    let fixed = run("tensor".parse().unwrap());
    assert!(auto.iter().all(|v| v.is_finite()));
    assert_eq!(auto, fixed, "Auto's FBP differs from the tensor kernel's");
}
