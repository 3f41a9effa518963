//! Loaded modules, their kernels, and kernel launches.

use super::*;

/// A loaded module (cubin) with its functions.
pub struct Module {
    raw: sys::CUmodule,
    ctx: Arc<Context>,
}

// SAFETY: module handles may be used from any thread with the context current.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

/// A kernel of a loaded module.
#[derive(Clone, Copy)]
pub struct Function {
    raw: sys::CUfunction,
}

// SAFETY: function handles are immutable driver objects.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Module {
    /// Loads a cubin image.
    pub fn load(ctx: &Arc<Context>, image: &[u8]) -> Result<Self> {
        ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the image is a complete cubin (ELF) in memory.
        check(
            unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr() as *const c_void) },
            "cuModuleLoadData",
        )?;
        Ok(Self {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Looks a kernel up by its `extern "C"` name.
    pub fn function(&self, name: &str) -> Result<Function> {
        let c = CString::new(name).map_err(|_| CudaError::Parameter(name.into()))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid module, NUL-terminated name.
        check(
            unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, c.as_ptr()) },
            &format!("cuModuleGetFunction({name})"),
        )?;
        Ok(Function { raw })
    }

    /// Copies `data` into the `__constant__`/`__device__` symbol `name`.
    pub fn set_global<T: Copy>(&self, name: &str, data: &[T], stream: &Stream) -> Result<()> {
        let c = CString::new(name).map_err(|_| CudaError::Parameter(name.into()))?;
        let (mut ptr, mut size) = (0, 0usize);
        // SAFETY: valid module, out-parameters.
        check(
            unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut size, self.raw, c.as_ptr()) },
            &format!("cuModuleGetGlobal({name})"),
        )?;
        let bytes = std::mem::size_of_val(data);
        if bytes > size {
            return Err(CudaError::Parameter(format!(
                "{bytes} bytes for symbol {name} of {size} bytes"
            )));
        }
        // Synchronous copy from pageable memory, ordered after earlier work on `stream`.
        stream.synchronize()?;
        // SAFETY: `data` is valid for `bytes`; the symbol is at least that large.
        check(
            unsafe { sys::cuMemcpyHtoD_v2(ptr, data.as_ptr() as *const c_void, bytes) },
            &format!("cuMemcpyHtoD({name})"),
        )
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded by cuModuleLoadData.
            unsafe {
                let _ = sys::cuModuleUnload(self.raw);
            }
        }
    }
}

/// Launches `f` and checks the launch status.
///
/// # Safety
/// `params` must point to values whose types and order match the kernel's
/// parameters, and every device pointer among them must be valid.
pub unsafe fn launch(
    f: Function,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    stream: &Stream,
    params: &mut [*mut c_void],
) -> Result<()> {
    let r = sys::cuLaunchKernel(
        f.raw,
        grid.0,
        grid.1,
        grid.2,
        block.0,
        block.1,
        block.2,
        shared,
        stream.raw,
        params.as_mut_ptr(),
        std::ptr::null_mut(),
    );
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(CudaError::Launch {
            kernel: name.to_string(),
            dims: format!("grid {grid:?}, block {block:?}, shared {shared} B"),
            message: error_text(r),
        });
    }
    Ok(())
}
