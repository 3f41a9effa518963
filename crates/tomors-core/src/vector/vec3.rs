//! Three-vectors of f64 (`[x, y, z]`) and the few operations the vector
//! geometries need.

/// A point or direction in world (or voxel-index) coordinates.
pub type Vec3 = [f64; 3];

/// `a + b`.
#[inline(always)]
pub fn add(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// `a − b`.
#[inline(always)]
pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// `k·a`.
#[inline(always)]
pub fn scale(a: Vec3, k: f64) -> Vec3 {
    [a[0] * k, a[1] * k, a[2] * k]
}

/// `a + k·b`.
#[inline(always)]
pub fn axpy(a: Vec3, k: f64, b: Vec3) -> Vec3 {
    [a[0] + k * b[0], a[1] + k * b[1], a[2] + k * b[2]]
}

/// `a · b`.
#[inline(always)]
pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// `a × b`.
#[inline(always)]
pub fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// `|a|`.
#[inline(always)]
pub fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

/// `a / |a|` (`a` itself when it is zero).
#[inline]
pub fn unit(a: Vec3) -> Vec3 {
    let n = norm(a);
    if n > 0.0 {
        scale(a, 1.0 / n)
    } else {
        a
    }
}

/// A rotation matrix (rows), applied as `R·p`.
pub type Mat3 = [[f64; 3]; 3];

/// `R·p`.
#[inline]
pub fn apply(r: &Mat3, p: Vec3) -> Vec3 {
    [dot(r[0], p), dot(r[1], p), dot(r[2], p)]
}

/// The rotation by `angle` (radians, right-handed: counter-clockwise seen
/// from the tip of `axis`) about the direction `axis` (Rodrigues' formula;
/// `axis` need not be a unit vector; a zero axis gives the identity).
pub fn rotation(axis: Vec3, angle: f64) -> Mat3 {
    let n = norm(axis);
    if n == 0.0 {
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    }
    let [x, y, z] = scale(axis, 1.0 / n);
    let (s, c) = angle.sin_cos();
    let t = 1.0 - c;
    [
        [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
        [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
        [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
    ]
}

/// The rotation by `angle` about the world z axis: `(x, y)` turns towards
/// `y` (the orbit of the circular geometries; exact `cos`/`sin` entries, so
/// a circular scan's vectors equal those of [`crate::cone::ConeGeometry`]).
pub fn rotation_z(angle: f64) -> Mat3 {
    let (s, c) = angle.sin_cos();
    [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rodrigues_agrees_with_the_z_rotation_and_keeps_lengths() {
        let a = 0.7;
        let r = rotation([0.0, 0.0, 2.0], a);
        let z = rotation_z(a);
        for i in 0..3 {
            for j in 0..3 {
                assert!((r[i][j] - z[i][j]).abs() < 1e-15);
            }
        }
        let p = [0.3, -1.2, 2.5];
        let q = apply(&rotation([1.0, 2.0, -0.5], 1.1), p);
        assert!((norm(p) - norm(q)).abs() < 1e-14);
        // A quarter turn about z takes x to y.
        let y = apply(&rotation_z(std::f64::consts::FRAC_PI_2), [1.0, 0.0, 0.0]);
        assert!((y[0]).abs() < 1e-15 && (y[1] - 1.0).abs() < 1e-15);
    }
}
