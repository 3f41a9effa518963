//! Device stacks of [`CudaJoseph`] to and from device memory owned by
//! someone else (a [`ForeignDevicePtr`]: CuPy, Numba or PyTorch arrays),
//! reordered and (de-)interleaved on the device with no trip through host
//! memory.

use super::*;
use crate::fbp::device::DeviceOrder;
use crate::iterative::device::check_foreign;
use crate::runtime::{launch, DeviceBuffer, ForeignDevicePtr};

/// Source of the reordering kernel (`proj_to_sino`, shared with the FBP of
/// device-resident projections).
const LAYOUT_CU: &str = include_str!("../../../kernels/layout.cu");

impl CudaJoseph {
    /// Checks that `rows × cols` is the plane of this projector's images or
    /// sinograms.
    fn check_plane(&self, rows: usize, cols: usize, what: &str) -> Result<()> {
        if (rows, cols) != (self.ny, self.nx) && (rows, cols) != (self.na, self.nb) {
            return Err(CoreError::Shape(format!(
                "{what} has planes of {rows} × {cols}, the projector images of {} × {} \
                 and sinograms of {} × {}",
                self.ny, self.nx, self.na, self.nb
            ))
            .into());
        }
        Ok(())
    }

    /// `dst[j][i][c] = src[i][j][c]` for `src` of `(n0, n1, cols)` floats
    /// (both on this projector's device); waits for the stream.
    fn swap_leading(
        &self,
        src: u64,
        dst: u64,
        (n0, n1, cols): (usize, usize, usize),
    ) -> Result<()> {
        let ctx = self.queue.context();
        let (cubin, _) = cubin_cached("layout", LAYOUT_CU, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(ctx, &cubin)?;
        let f = module.function("proj_to_sino")?;
        let total = n0 * n1 * cols;
        let blocks = total.div_ceil(256).clamp(1, 1 << 20) as u32;
        // proj_to_sino(src, dst, na, nr, n, r0, k): dst[s][a][c] =
        // src[(a·nr + r0 + s)·n + c] for s < k, a < na.
        let args: [Arg; 7] = [
            src.into(),
            dst.into(),
            (n0 as i64).into(),
            (n1 as i64).into(),
            (cols as i64).into(),
            0i64.into(),
            (n1 as i64).into(),
        ];
        ctx.bind()?;
        // SAFETY: the parameters of `proj_to_sino` (`kernels/layout.cu`);
        // `src` and `dst` hold n0 × n1 × cols floats (the callers'
        // allocations and checked foreign ranges).
        unsafe {
            launch(
                &f,
                "proj_to_sino",
                (blocks, 1, 1),
                (256, 1, 1),
                0,
                self.queue.stream(),
                &args,
            )?;
        }
        // The module is unloaded when it goes out of scope: wait first.
        self.queue.stream().synchronize()
    }

    /// A new device stack of `dim = (slices, rows, cols)` (images
    /// `[slice][y][x]` or sinograms `[slice][angle][bin]` of this
    /// projector) holding a copy of the C-contiguous float32 array at
    /// `src`, laid out as `[slice][rows][cols]` ([`DeviceOrder::Sinograms`])
    /// or `[rows][slice][cols]` ([`DeviceOrder::Projections`]: projections
    /// `[angle][row][bin]` of sinograms), reordered and interleaved on the
    /// device. Waits, so `src` is no longer read on return.
    ///
    /// Errors: a plane that is neither the images' nor the sinograms', `src`
    /// on another device or of another size, driver errors.
    pub fn stack_from_device(
        &self,
        src: &ForeignDevicePtr,
        dim: (usize, usize, usize),
        order: DeviceOrder,
    ) -> Result<DeviceStack> {
        let (ns, rows, cols) = dim;
        self.check_plane(rows, cols, "the GPU array")?;
        check_foreign(&self.queue, src, ns * rows * cols, "the GPU array")?;
        let mut dst = self.alloc(ns, rows, cols, "a device stack")?;
        let Layout::Stack { stored, .. } = dst.layout() else {
            unreachable!("alloc makes stacks")
        };
        let tmp;
        let from = match order {
            DeviceOrder::Sinograms => src.ptr(),
            DeviceOrder::Projections => {
                tmp = DeviceBuffer::new(
                    self.queue.context(),
                    ns * rows * cols * 4,
                    "reordered input",
                )?;
                self.swap_leading(src.ptr(), tmp.ptr(), (rows, ns, cols))?;
                tmp.ptr()
            }
        };
        dst.touched();
        let quads = stored / 4;
        let plane = rows * cols;
        self.launch(
            KernelKind::Elementwise,
            &self.f.interleave,
            "jp_interleave",
            ((quads * plane).div_ceil(256).clamp(1, 8192) as u32, 1, 1),
            (256, 1, 1),
            &[
                from.into(),
                dst.buffer().ptr().into(),
                (ns as i32).into(),
                (plane as i64).into(),
                (quads as i32).into(),
            ],
        )?;
        self.queue.stream().synchronize()?;
        Ok(dst)
    }

    /// The device stack `v` de-interleaved into new device memory, laid out
    /// as `order` (see [`CudaJoseph::stack_from_device`]), after the
    /// queue's work on `v`; waits.
    ///
    /// Errors: `v` not a stack of this projector, driver errors.
    pub fn stack_to_device(&self, v: &DeviceStack, order: DeviceOrder) -> Result<DeviceBuffer> {
        let Layout::Stack {
            slices: ns,
            rows,
            cols,
            stored,
        } = v.layout()
        else {
            return Err(CudaError::Parameter(
                "stack_to_device of a vector that is not a stack".into(),
            ));
        };
        self.check_stack(v, rows, cols, "the device stack")?;
        let bytes = ns * rows * cols * 4;
        let out = DeviceBuffer::new(self.queue.context(), bytes, "the result")?;
        match order {
            DeviceOrder::Sinograms => {
                self.deinterleave(v.buffer().ptr(), out.ptr(), ns, rows * cols, stored / 4)?
            }
            DeviceOrder::Projections => {
                let tmp = DeviceBuffer::new(self.queue.context(), bytes, "de-interleaved result")?;
                self.deinterleave(v.buffer().ptr(), tmp.ptr(), ns, rows * cols, stored / 4)?;
                self.swap_leading(tmp.ptr(), out.ptr(), (ns, rows, cols))?;
            }
        }
        self.queue.stream().synchronize()?;
        Ok(out)
    }
}
