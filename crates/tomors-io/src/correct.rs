//! Geometry corrections of projections: rotation of every projection about
//! the detector centre (a tilted detector), and sub-pixel shifts of detector
//! rows (a rotation centre that drifts linearly with the row).

use ndarray::{Array2, ArrayView2, ArrayViewMut1};

/// Bilinear sample of `img` at (row `y`, column `x`), edges extended.
fn bilinear(img: &ArrayView2<'_, f32>, y: f64, x: f64) -> f32 {
    let (nr, nc) = img.dim();
    let y = y.clamp(0.0, (nr - 1) as f64);
    let x = x.clamp(0.0, (nc - 1) as f64);
    let (y0, x0) = (y.floor() as usize, x.floor() as usize);
    let (y1, x1) = ((y0 + 1).min(nr - 1), (x0 + 1).min(nc - 1));
    let (fy, fx) = ((y - y0 as f64) as f32, (x - x0 as f64) as f32);
    let top = img[[y0, x0]] * (1.0 - fx) + img[[y0, x1]] * fx;
    let bottom = img[[y1, x0]] * (1.0 - fx) + img[[y1, x1]] * fx;
    top * (1.0 - fy) + bottom * fy
}

/// Rotates a slab of a projection by `degrees` about the detector centre,
/// bilinearly, edges extended. `img` holds detector rows
/// `first_row..first_row + img.nrows()` of a detector of `n_rows` rows;
/// the result holds the same rows. Positive angles turn the image
/// counter-clockwise as displayed with row 0 at the top: the output pixel at
/// (row `r`, column `c`) takes the input at
/// `c' = cx + (c − cx) cos θ − (r − cy) sin θ`,
/// `r' = cy + (c − cx) sin θ + (r − cy) cos θ`, with the centre
/// `(cy, cx) = ((n_rows − 1)/2, (n_cols − 1)/2)`. Rows outside the slab are
/// taken at its nearest row (callers read a margin of [`rotation_margin`]
/// rows).
pub fn rotate_projection(
    img: ArrayView2<'_, f32>,
    degrees: f64,
    first_row: usize,
    n_rows: usize,
) -> Array2<f32> {
    let (nr, nc) = img.dim();
    let t = degrees.to_radians();
    let (s, c) = t.sin_cos();
    let cy = (n_rows as f64 - 1.0) / 2.0;
    let cx = (nc as f64 - 1.0) / 2.0;
    Array2::from_shape_fn((nr, nc), |(r, col)| {
        let (dy, dx) = ((r + first_row) as f64 - cy, col as f64 - cx);
        let x = cx + dx * c - dy * s;
        let y = cy + dx * s + dy * c - first_row as f64;
        bilinear(&img, y, x)
    })
}

/// Rows a slab needs above and below for [`rotate_projection`] by
/// `degrees` on a detector of `n_rows × n_cols`.
pub fn rotation_margin(degrees: f64, n_rows: usize, n_cols: usize) -> usize {
    let t = degrees.to_radians();
    let m = 0.5 * n_cols as f64 * t.sin().abs() + 0.5 * n_rows as f64 * (1.0 - t.cos());
    m.ceil() as usize + 2
}

/// Shifts a detector row by `shift` pixels (towards higher columns when
/// positive) with linear interpolation, edges extended: `out[c] = in[c − shift]`.
pub fn shift_row(mut row: ArrayViewMut1<'_, f32>, shift: f64) {
    let n = row.len();
    if n == 0 || shift == 0.0 {
        return;
    }
    let src = row.to_owned();
    for (c, v) in row.iter_mut().enumerate() {
        let x = (c as f64 - shift).clamp(0.0, (n - 1) as f64);
        let x0 = x.floor() as usize;
        let x1 = (x0 + 1).min(n - 1);
        let f = (x - x0 as f64) as f32;
        *v = src[x0] * (1.0 - f) + src[x1] * f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array1;

    #[test]
    fn rotation_by_zero_is_identity_and_by_90_turns() {
        let img = Array2::from_shape_fn((5, 5), |(r, c)| (r * 5 + c) as f32);
        assert_eq!(rotate_projection(img.view(), 0.0, 0, 5), img);
        let r = rotate_projection(img.view(), 90.0, 0, 5);
        // out(r, c) = in(r' = c, c' = 4 − r).
        for ((i, j), v) in r.indexed_iter() {
            assert!((v - img[[j, 4 - i]]).abs() < 1e-4, "{i},{j}");
        }
    }

    #[test]
    fn slab_rotation_equals_whole_rotation() {
        let img = Array2::from_shape_fn((40, 30), |(r, c)| ((r as f32) * 0.3).sin() + c as f32);
        let whole = rotate_projection(img.view(), 3.0, 0, 40);
        let m = rotation_margin(3.0, 40, 30);
        let (a, b) = (15usize, 22usize);
        let (lo, hi) = (a - m, (b + m).min(40));
        let slab = rotate_projection(img.slice(ndarray::s![lo..hi, ..]), 3.0, lo, 40);
        for r in a..b {
            for c in 0..30 {
                assert!((slab[[r - lo, c]] - whole[[r, c]]).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn shift_moves_a_peak() {
        let mut row = Array1::from_vec(vec![0.0f32, 0.0, 1.0, 0.0, 0.0, 0.0]);
        shift_row(row.view_mut(), 1.5);
        assert!((row[3] - 0.5).abs() < 1e-6 && (row[4] - 0.5).abs() < 1e-6);
    }
}
