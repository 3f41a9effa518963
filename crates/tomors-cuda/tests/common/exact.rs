//! Fixtures of the exact (f32-class, 1e-5) back-projector tests
//! (`sweep_gpu`, `tensor_gpu`): the geometries that exercise the
//! conventions, a kernel's largest relative L2 error per slice against the
//! f64 reference over them, and its FBP against the exact cache kernel.

use ndarray::{s, Array3};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::kernels::AluParams;
use tomors_cuda::{BpConfig, CudaBackend, KernelChoice, KernelKind, SliceMode};

use super::{random, reference_bp, rel_l2};

/// Geometries of 90 projections: a centre offset (70×50); bins of
/// `bin_width` under pixels of `pixel` (40×40); angles over a full turn in a
/// shuffled order (any sign of cos and sin) with pixels of 0.7 (53×37); and
/// per-projection centres (33×65).
pub fn geometries(
    seed: u64,
    bin_width: f32,
    pixel: f32,
) -> Vec<(String, ParallelGeometry, SliceGrid)> {
    let na = 90;
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
            "centre 31.7, 70x50".into(),
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_center(31.7)
                .unwrap(),
            SliceGrid::new(70, 50).unwrap(),
        ),
        (
            format!("bin {bin_width}, pixel {pixel:.1}, 40x40"),
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_bin_width(bin_width)
                .unwrap(),
            SliceGrid::with_pixel_size(40, 40, pixel).unwrap(),
        ),
        (
            "full turn shuffled, pixel 0.7, 53x37".into(),
            ParallelGeometry::new(full, 61).unwrap(),
            SliceGrid::with_pixel_size(53, 37, 0.7).unwrap(),
        ),
        (
            "per-projection centres, 33x65".into(),
            ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), 64)
                .unwrap()
                .with_centers(centres)
                .unwrap(),
            SliceGrid::new(33, 65).unwrap(),
        ),
    ]
}

/// Every kernel of `cfgs` on every geometry, with 5 and 70 slices (fewer
/// than a block holds and more than one block's worth) made by
/// `sinos(k, angles, bins, seed)` (one data set per geometry and slice
/// count, shared by the kernels, so that its f64 reference is computed
/// once): the largest relative L2 error of a slice against the f64
/// reference must be at most 1e-5 (NaN fails; every output value must be
/// written). Prints each case's error and, with `positive_odd`, the largest
/// over the odd slices (positive data there). Collects the failures and
/// asserts at the end.
pub fn check_against_reference(
    be: &mut CudaBackend,
    geometries: Vec<(String, ParallelGeometry, SliceGrid)>,
    cfgs: &[BpConfig],
    seed: u64,
    positive_odd: bool,
    sinos: impl Fn(usize, usize, usize, u64) -> Array3<f32>,
) {
    let mut failures = Vec::new();
    for (name, geom, grid) in geometries {
        let (na, nb) = (geom.n_angles(), geom.n_bins());
        let (ny, nx) = (grid.ny, grid.nx);
        let jobs: Vec<_> = cfgs.iter().map(|&c| (c, Interpolation::Linear)).collect();
        be.precompile(&jobs, &geom, &grid).unwrap();
        for k in [5usize, 70] {
            let sino = sinos(k, na, nb, seed + k as u64);
            let refs: Vec<_> = (0..k)
                .map(|z| {
                    reference_bp(
                        sino.slice(s![z, .., ..]),
                        &geom,
                        &grid,
                        Interpolation::Linear,
                    )
                })
                .collect();
            for &cfg in cfgs {
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
                for (z, r) in refs.iter().enumerate() {
                    let g: Vec<f32> = out.slice(s![z, .., ..]).iter().map(|v| v * 2.0).collect();
                    assert!(g.iter().all(|v| v.is_finite()), "{cfg} {name}: unwritten");
                    let e = rel_l2(&g, r.as_slice().unwrap());
                    e_ref = e_ref.max(e);
                    if z % 2 == 1 {
                        e_pos = e_pos.max(e);
                    }
                }
                let pos = if positive_odd {
                    format!(" (positive slices {e_pos:.2e})")
                } else {
                    String::new()
                };
                eprintln!(
                    "{name:<38} {cfg:<44} {k:>3} slices: rel L2 vs f64 reference {e_ref:.2e}{pos}"
                );
                if e_ref.is_nan() || e_ref > 1e-5 {
                    failures.push(format!("{name} {cfg} {k} slices: {e_ref:.2e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "over 1e-5: {failures:?}");
}

/// The FBP (default filter) of 9 random slices of 120 projections × 96 bins
/// (centre 47.3) by every kernel of `cfgs` against the exact cache kernel
/// (`alu-float2`): both are within 1e-5 of the f64 reference, so within 2e-5
/// of each other; every output value must be written.
pub fn check_fbp_against_exact_alu(be: &mut CudaBackend, cfgs: &[BpConfig], seed: u64) {
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
    for &cfg in cfgs {
        let b = run(cfg);
        let e = rel_l2(&b, &a);
        eprintln!("FBP {cfg} vs {exact}: rel L2 {e:.2e}");
        assert!(e <= 2e-5, "{cfg}: {e:.2e} from the exact alu kernel");
    }
}
