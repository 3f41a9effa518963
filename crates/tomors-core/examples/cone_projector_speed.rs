//! Speed of the CPU cone-beam projectors: forward and back projection of an
//! `n³` volume from `angles` projections on an `n × n` detector (cone angle
//! about 10°), in GU/s (voxels × projections / s).
//!
//! `cargo run --release -p tomors-core --example cone_projector_speed -- [n] [angles]`

use std::time::Instant;

use ndarray::Array2;
use tomors_core::cone::ConeGeometry;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{all_angles, cone_projector, ProjectorKind};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("sizes are numbers"))
        .collect();
    let n = args.first().copied().unwrap_or(128);
    let na = args.get(1).copied().unwrap_or(90);
    let det = n + n / 8;
    let g = ConeGeometry::new(
        uniform_angles(na, 2.0 * std::f32::consts::PI),
        8.0 * n as f64,
        4.0 * n as f64,
        det,
        det,
        1.5,
        1.5,
    )
    .unwrap();
    let v = g.fitting_volume(n, n, n).unwrap();
    let angles = all_angles(na);
    let x = Array2::from_elem((n * n, n), 1.0f32);
    let y = Array2::from_elem((na, det * det), 1.0f32);
    println!(
        "{n}³ volume, {na} projections of {det}², {} threads",
        rayon::current_num_threads()
    );
    for kind in [
        ProjectorKind::Joseph,
        ProjectorKind::Line,
        ProjectorKind::Voxel,
    ] {
        let p = cone_projector::<f32>(kind, &g, &v, None).unwrap();
        let mut ax = Array2::zeros((na, det * det));
        let mut aty = Array2::zeros((n * n, n));
        let t = Instant::now();
        p.forward_slice(x.view(), &angles, ax.view_mut()).unwrap();
        let tf = t.elapsed().as_secs_f64();
        let t = Instant::now();
        p.back_slice(y.view(), &angles, aty.view_mut()).unwrap();
        let tb = t.elapsed().as_secs_f64();
        let gu = (n * n * n * na) as f64 / 1e9;
        println!(
            "{kind:?}: forward {tf:.3} s ({:.3} GU/s), back {tb:.3} s ({:.3} GU/s)",
            gu / tf,
            gu / tb
        );
    }
}
