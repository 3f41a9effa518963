//! The voxel pair's forward projection through 2D layered textures
//! (`kernels/cone_layered.cu`): the volume laid out with the planes of x
//! and of y as texture layers, so the steps of x- and y-dominant rays are
//! bilinear fetches within one layer instead of trilinear fetches of the
//! 3D texture (same sample points and 8-bit weights; z-dominant rays still
//! read the 3D texture).

use super::*;

/// Source of the layered forward projection (compiled after
/// [`CONE_JOSEPH_CU`], whose rays it uses).
pub const CONE_LAYERED_CU: &str = include_str!("../../../kernels/cone_layered.cu");

/// Most layers (voxels along x or y) of the layered textures.
const MAX_LAYERS: usize = 2048;

/// The layered copies of the volume and their kernels. Fields drop in
/// order: the textures before their arrays.
pub(super) struct Layered {
    _tx: Texture,
    _ty: Texture,
    /// The texture objects (x-layered, y-layered, 3D) on the device.
    pub(super) handles: DeviceBuffer,
    ax: Array3d,
    ay: Array3d,
    scratch: DeviceBuffer,
    xzy: Function,
    yzx: Function,
    /// `cj_forward_lay`.
    pub(super) forward: Function,
    _module: Module,
}

/// Whether the voxel pair's forward projection uses the layered textures
/// by default (`TOMORS_CONE_FORWARD=layered`).
pub(super) fn layered_default() -> bool {
    std::env::var("TOMORS_CONE_FORWARD").is_ok_and(|v| v == "layered")
}

impl Layered {
    /// The layered state for an `nx × ny × nz` volume whose 3D texture is
    /// `tex3d`, or `None` where the layers exceed the hardware's limit.
    pub(super) fn new(
        ctx: &Arc<Context>,
        (nx, ny, nz): (usize, usize, usize),
        tex3d: &Texture,
    ) -> Result<Option<Self>> {
        if nx > MAX_LAYERS || ny > MAX_LAYERS {
            return Ok(None);
        }
        ctx.bind()?;
        let code = format!("{CONE_JOSEPH_CU}\n{CONE_LAYERED_CU}");
        let (cubin, _) = cubin_cached(
            "cone_layered",
            &code,
            &[],
            &ctx.name,
            ctx.cc,
            ctx.driver,
        )?;
        let module = Module::load(ctx, &cubin)?;
        let ax = Array3d::layered(ctx, ny, nz, nx)?;
        let ay = Array3d::layered(ctx, nx, nz, ny)?;
        let tx = Texture::array3d(ctx, &ax, TexFilter::Linear)?;
        let ty = Texture::array3d(ctx, &ay, TexFilter::Linear)?;
        let handles = DeviceBuffer::new(ctx, 3 * 8, "layered texture handles")?;
        handles.upload(&[tx.raw, ty.raw, tex3d.raw])?;
        let scratch = DeviceBuffer::new(ctx, nx * ny * nz * 4, "layered volume copy")?;
        Ok(Some(Self {
            xzy: module.function("cj_vol_xzy")?,
            yzx: module.function("cj_vol_yzx")?,
            forward: module.function("cj_forward_lay")?,
            _module: module,
            _tx: tx,
            _ty: ty,
            handles,
            ax,
            ay,
            scratch,
        }))
    }

    /// Queues the copies of the volume at `vol` into the layered arrays.
    pub(super) fn load(&self, queue: &Queue, vol: u64) -> Result<()> {
        let (ny, nz, nx) = (self.ax.width, self.ax.height, self.ax.depth);
        let dims: [Arg; 5] = [
            vol.into(),
            self.scratch.ptr().into(),
            (nx as i32).into(),
            (ny as i32).into(),
            (nz as i32).into(),
        ];
        // SAFETY: `vol` holds an nx × ny × nz volume (checked by the
        // callers), the scratch buffer as many floats; the grids cover
        // the kernels' index ranges.
        unsafe {
            queue.launch_raw(
                &self.xzy,
                "cj_vol_xzy",
                (nx.div_ceil(32) as u32, ny.div_ceil(32) as u32, nz as u32),
                (32, 8, 1),
                &dims,
            )?;
        }
        self.ax.copy_from_device(self.scratch.ptr(), queue.stream())?;
        // SAFETY: as above.
        unsafe {
            queue.launch_raw(
                &self.yzx,
                "cj_vol_yzx",
                (nx.div_ceil(256) as u32, ny as u32, nz as u32),
                (256, 1, 1),
                &dims,
            )?;
        }
        self.ay.copy_from_device(self.scratch.ptr(), queue.stream())
    }
}
