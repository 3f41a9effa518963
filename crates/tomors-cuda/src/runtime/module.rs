//! Loaded modules, their kernels, and kernel launches, over cudarc's
//! `CudaModule`, `CudaFunction` and launch builder.

use std::sync::Arc;

use cudarc::driver::{result, CudaFunction, CudaModule, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use super::{driver_error, error_text, Context, Stream};
use crate::error::{CudaError, Result};

/// A loaded module (cubin) with its functions.
pub struct Module {
    inner: Arc<CudaModule>,
    ctx: Arc<Context>,
}

/// A kernel of a loaded module (keeps its module loaded).
#[derive(Clone)]
pub struct Function {
    inner: CudaFunction,
}

impl Function {
    /// Lets launches of this kernel use up to `bytes` of dynamic shared
    /// memory per block (needed above 48 KiB).
    ///
    /// Errors: the device allows less.
    pub fn set_max_dynamic_shared(&self, bytes: usize) -> Result<()> {
        self.inner
            .set_attribute(
                cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes.min(i32::MAX as usize) as i32,
            )
            .map_err(driver_error("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))
    }
}

impl Module {
    /// Loads a cubin image.
    pub fn load(ctx: &Arc<Context>, image: &[u8]) -> Result<Self> {
        let inner = ctx
            .cuda()
            .load_module(Ptx::from_binary(image.to_vec()))
            .map_err(driver_error("cuModuleLoadData"))?;
        Ok(Self {
            inner,
            ctx: ctx.clone(),
        })
    }

    /// Looks a kernel up by its `extern "C"` name.
    pub fn function(&self, name: &str) -> Result<Function> {
        if name.contains('\0') {
            return Err(CudaError::Parameter(format!("kernel name {name:?}")));
        }
        let inner = self
            .inner
            .load_function(name)
            .map_err(driver_error(&format!("cuModuleGetFunction({name})")))?;
        Ok(Function { inner })
    }

    /// The address and size of the `__constant__`/`__device__` symbol `name`.
    fn symbol(&self, name: &str, stream: &Stream) -> Result<(u64, usize)> {
        if name.contains('\0') {
            return Err(CudaError::Parameter(format!("symbol name {name:?}")));
        }
        self.ctx.bind()?;
        // cudarc hands the symbol out as a `CudaSlice`, whose drop would free
        // the module's memory: take its address and size and leak the handle.
        let symbol = self
            .inner
            .get_global(name, stream.cuda())
            .map_err(driver_error(&format!("cuModuleGetGlobal({name})")))?;
        let size = symbol.len();
        Ok((symbol.leak(), size))
    }

    /// Copies `data` into the `__constant__`/`__device__` symbol `name`
    /// (synchronously, after the work queued on `stream`).
    pub fn set_global<T: Copy>(&self, name: &str, data: &[T], stream: &Stream) -> Result<()> {
        let (ptr, size) = self.symbol(name, stream)?;
        let bytes = std::mem::size_of_val(data);
        if bytes > size {
            return Err(CudaError::Parameter(format!(
                "{bytes} bytes for symbol {name} of {size} bytes"
            )));
        }
        // Synchronous copy from pageable memory, ordered after earlier work on `stream`.
        stream.synchronize()?;
        // SAFETY: `data` is valid for `bytes`; the symbol is at least that large.
        unsafe { result::memcpy_htod_sync(ptr, data) }
            .map_err(driver_error(&format!("cuMemcpyHtoD({name})")))
    }

    /// Copies the start of the `__device__` symbol `name` into `data`
    /// (synchronously, after the work queued on `stream`).
    pub fn read_global<T: Copy>(&self, name: &str, data: &mut [T], stream: &Stream) -> Result<()> {
        let (ptr, size) = self.symbol(name, stream)?;
        let bytes = std::mem::size_of_val(data);
        if bytes > size {
            return Err(CudaError::Parameter(format!(
                "{bytes} bytes from symbol {name} of {size} bytes"
            )));
        }
        stream.synchronize()?;
        // SAFETY: `data` is valid for `bytes`; the symbol is at least that large.
        unsafe { result::memcpy_dtoh_sync(data, ptr) }
            .map_err(driver_error(&format!("cuMemcpyDtoH({name})")))
    }
}

/// One kernel argument, passed by value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A 64-bit unsigned integer: device pointers, texture objects.
    U64(u64),
    /// A 64-bit signed integer.
    I64(i64),
    /// A 32-bit signed integer.
    I32(i32),
    /// A 32-bit unsigned integer.
    U32(u32),
    /// A single-precision float.
    F32(f32),
    /// A double-precision float.
    F64(f64),
}

macro_rules! arg_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Arg {
            fn from(v: $t) -> Self {
                Arg::$v(v)
            }
        }
    )*};
}
arg_from!(u64 => U64, i64 => I64, i32 => I32, u32 => U32, f32 => F32, f64 => F64);

/// One launch of a module's kernel: its name, grid, block, dynamic shared
/// bytes and arguments. The module's Rust side builds it in one place, so
/// every caller that launches the kernel (FBP's engine, the SIRT voxel
/// pair) passes the same grid and arguments.
pub struct LaunchSpec {
    /// The kernel's name in the module.
    pub name: &'static str,
    /// Grid dimensions.
    pub grid: (u32, u32, u32),
    /// Block dimensions.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory in bytes.
    pub shared: u32,
    /// The kernel's arguments, in order.
    pub args: Vec<Arg>,
}

/// Launches `f` on `stream` with `args` and checks the launch status.
///
/// # Safety
/// `args` must match the kernel's parameters in type and order, and every
/// device pointer among them must be valid for what the kernel accesses.
pub unsafe fn launch(
    f: &Function,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    stream: &Stream,
    args: &[Arg],
) -> Result<()> {
    let mut b = stream.cuda().launch_builder(&f.inner);
    for a in args {
        match a {
            Arg::U64(v) => b.arg(v),
            Arg::I64(v) => b.arg(v),
            Arg::I32(v) => b.arg(v),
            Arg::U32(v) => b.arg(v),
            Arg::F32(v) => b.arg(v),
            Arg::F64(v) => b.arg(v),
        };
    }
    let cfg = LaunchConfig {
        grid_dim: grid,
        block_dim: block,
        shared_mem_bytes: shared,
    };
    b.launch(cfg).map(|_| ()).map_err(|e| CudaError::Launch {
        kernel: name.to_string(),
        dims: format!("grid {grid:?}, block {block:?}, shared {shared} B"),
        message: error_text(e.0),
    })
}
