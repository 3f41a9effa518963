//! The reconstruction volume of the vector geometries: a box of voxels
//! anywhere in space, anisotropic voxels allowed.

use super::error::VectorGeometryError;
use super::vec3::Vec3;
use crate::cone::ConeVolume;
use crate::iterative::VolumeBox;

/// A volume of `nx × ny × nz` voxels of `voxel = [sx, sy, sz]` world units,
/// centred at world point `center`, stored `[z][y][x]`:
///
/// - voxel `(ix, iy, iz)` is centred at
///   `x = cx + (ix − (nx − 1)/2)·sx`, `y = cy + ((ny − 1)/2 − iy)·sy`,
///   `z = cz + (iz − (nz − 1)/2)·sz`: row 0 at the **largest** y, as every
///   tomors volume (circular parallel beam and cone beam alike);
/// - ASTRA's volume geometry `create_vol_geom(ny, nx, nz, minx, maxx, miny,
///   maxy, minz, maxz)` is the same box with `s = (max − min)/n`,
///   `c = (min + max)/2` per axis ([`Self::from_astra`]); ASTRA's row 0 sits
///   at the **smallest** y, so for the same data the tomors volume equals
///   ASTRA's `[:, ::-1, :]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VolumeGeometry {
    /// Voxels along x (columns).
    pub nx: usize,
    /// Voxels along y (rows).
    pub ny: usize,
    /// Voxels along z (slices).
    pub nz: usize,
    /// Voxel size along x, y, z (world units).
    pub voxel: Vec3,
    /// World position of the centre of the box.
    pub center: Vec3,
}

impl VolumeGeometry {
    /// `nx × ny × nz` cubic voxels of side `voxel_size`, centred at the
    /// origin.
    ///
    /// Errors: an empty volume, a voxel size that is not positive and finite.
    pub fn new(
        nx: usize,
        ny: usize,
        nz: usize,
        voxel_size: f64,
    ) -> Result<Self, VectorGeometryError> {
        Self::with_voxels(nx, ny, nz, [voxel_size; 3], [0.0; 3])
    }

    /// `nx × ny × nz` voxels of size `voxel` (x, y, z) centred at `center`.
    ///
    /// Errors: an empty volume, a voxel size that is not positive and
    /// finite, a non-finite centre.
    pub fn with_voxels(
        nx: usize,
        ny: usize,
        nz: usize,
        voxel: Vec3,
        center: Vec3,
    ) -> Result<Self, VectorGeometryError> {
        if nx == 0 || ny == 0 || nz == 0 {
            return Err(VectorGeometryError::EmptyVolume { nx, ny, nz });
        }
        for (axis, value) in ['x', 'y', 'z'].into_iter().zip(voxel) {
            if !(value.is_finite() && value > 0.0) {
                return Err(VectorGeometryError::VoxelSize { axis, value });
            }
        }
        for (what, value) in ["centre x", "centre y", "centre z"].into_iter().zip(center) {
            if !value.is_finite() {
                return Err(VectorGeometryError::VolumePlacement { what, value });
            }
        }
        Ok(Self {
            nx,
            ny,
            nz,
            voxel,
            center,
        })
    }

    /// The same box moved to `center`.
    ///
    /// Errors: a non-finite centre.
    pub fn centered_at(self, center: Vec3) -> Result<Self, VectorGeometryError> {
        Self::with_voxels(self.nx, self.ny, self.nz, self.voxel, center)
    }

    /// The volume of ASTRA's `create_vol_geom(n_rows, n_cols, n_slices,
    /// minx, maxx, miny, maxy, minz, maxz)`: `n_cols` voxels along x,
    /// `n_rows` along y, `n_slices` along z, `window = [minx, maxx, miny,
    /// maxy, minz, maxz]`.
    ///
    /// Errors: an empty volume, a non-finite window or one whose maximum
    /// does not exceed its minimum.
    pub fn from_astra(
        n_cols: usize,
        n_rows: usize,
        n_slices: usize,
        window: [f64; 6],
    ) -> Result<Self, VectorGeometryError> {
        const NAMES: [&str; 6] = ["minx", "maxx", "miny", "maxy", "minz", "maxz"];
        for (what, value) in NAMES.into_iter().zip(window) {
            if !value.is_finite() {
                return Err(VectorGeometryError::VolumePlacement { what, value });
            }
        }
        let n = [n_cols, n_rows, n_slices];
        let mut voxel = [0.0; 3];
        let mut center = [0.0; 3];
        for k in 0..3 {
            let (lo, hi) = (window[2 * k], window[2 * k + 1]);
            if hi <= lo {
                return Err(VectorGeometryError::VolumePlacement {
                    what: NAMES[2 * k + 1],
                    value: hi,
                });
            }
            voxel[k] = (hi - lo) / n[k].max(1) as f64;
            center[k] = 0.5 * (lo + hi);
        }
        Self::with_voxels(n_cols, n_rows, n_slices, voxel, center)
    }

    /// ASTRA's window `[minx, maxx, miny, maxy, minz, maxz]` of the box.
    pub fn astra_window(&self) -> [f64; 6] {
        let n = [self.nx, self.ny, self.nz];
        let mut w = [0.0; 6];
        for k in 0..3 {
            let half = 0.5 * n[k] as f64 * self.voxel[k];
            w[2 * k] = self.center[k] - half;
            w[2 * k + 1] = self.center[k] + half;
        }
        w
    }

    /// The box of a circular cone-beam volume (cubic voxels, centred on the
    /// rotation axis).
    pub fn from_cone_volume(volume: &ConeVolume) -> Self {
        Self {
            nx: volume.nx,
            ny: volume.ny,
            nz: volume.nz,
            voxel: [volume.voxel_size as f64; 3],
            center: [0.0; 3],
        }
    }

    /// `(nz, ny, nx)`: the shape of the `[z][y][x]` array.
    pub fn dim(&self) -> (usize, usize, usize) {
        (self.nz, self.ny, self.nx)
    }

    /// Number of voxels.
    pub fn len(&self) -> usize {
        self.nx * self.ny * self.nz
    }

    /// Whether the volume has no voxel (never for a constructed one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Volume of one voxel.
    pub fn voxel_volume(&self) -> f64 {
        self.voxel[0] * self.voxel[1] * self.voxel[2]
    }

    /// The whole volume as a [`VolumeBox`] of voxel indices.
    pub fn full_box(&self) -> VolumeBox {
        VolumeBox {
            z: 0..self.nz,
            y: 0..self.ny,
            x: 0..self.nx,
        }
    }

    /// World x of the centre of column `ix`.
    pub fn x(&self, ix: usize) -> f64 {
        self.center[0] + (ix as f64 - (self.nx as f64 - 1.0) * 0.5) * self.voxel[0]
    }

    /// World y of the centre of row `iy` (row 0 at the top, largest y).
    pub fn y(&self, iy: usize) -> f64 {
        self.center[1] + ((self.ny as f64 - 1.0) * 0.5 - iy as f64) * self.voxel[1]
    }

    /// World z of the centre of slice `iz`.
    pub fn z(&self, iz: usize) -> f64 {
        self.center[2] + (iz as f64 - (self.nz as f64 - 1.0) * 0.5) * self.voxel[2]
    }

    /// Voxel-index coordinates `[X, Y, Z]` of world point `p` (voxel
    /// `(ix, iy, iz)` centred at `(ix, iy, iz)`; `Y` grows downwards).
    pub fn to_index(&self, p: Vec3) -> Vec3 {
        [
            (p[0] - self.center[0]) / self.voxel[0] + (self.nx as f64 - 1.0) * 0.5,
            (self.ny as f64 - 1.0) * 0.5 - (p[1] - self.center[1]) / self.voxel[1],
            (p[2] - self.center[2]) / self.voxel[2] + (self.nz as f64 - 1.0) * 0.5,
        ]
    }

    /// A world direction (or displacement) in voxel-index units.
    pub fn to_index_step(&self, d: Vec3) -> Vec3 {
        [
            d[0] / self.voxel[0],
            -d[1] / self.voxel[1],
            d[2] / self.voxel[2],
        ]
    }

    /// World point of voxel-index coordinates `[X, Y, Z]`.
    pub fn to_world(&self, q: Vec3) -> Vec3 {
        [
            self.center[0] + (q[0] - (self.nx as f64 - 1.0) * 0.5) * self.voxel[0],
            self.center[1] + ((self.ny as f64 - 1.0) * 0.5 - q[1]) * self.voxel[1],
            self.center[2] + (q[2] - (self.nz as f64 - 1.0) * 0.5) * self.voxel[2],
        ]
    }

    /// Checks that `b` is a non-empty box of voxel indices inside the volume.
    ///
    /// Errors: [`VectorGeometryError::Parameter`] naming the box.
    pub fn check_box(&self, b: &VolumeBox) -> Result<(), VectorGeometryError> {
        if b.z.is_empty()
            || b.y.is_empty()
            || b.x.is_empty()
            || b.z.end > self.nz
            || b.y.end > self.ny
            || b.x.end > self.nx
        {
            return Err(VectorGeometryError::Parameter(format!(
                "volume box z {:?} × y {:?} × x {:?} is empty or outside the {}×{}×{} volume",
                b.z, b.y, b.x, self.nz, self.ny, self.nx
            )));
        }
        Ok(())
    }
}
