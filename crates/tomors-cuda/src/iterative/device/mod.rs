//! Device vectors: [`DeviceVec`], tomors-core's
//! [`Vector`](tomors_core::linalg::Vector) on one GPU, and the [`Queue`]
//! (context, stream, element-wise kernels) that a device operator and its
//! vectors share, so that every kernel of an iteration runs in order on one
//! stream and only the reductions wait for the device.
//!
//! - Element-wise operations and reductions are the kernels of
//!   `kernels/linalg.cu` (NVRTC, cached like the other kernels). Reductions
//!   accumulate in f64: one partial sum per block of a fixed grid of
//!   `RED_BLOCKS` (1024) blocks, summed on the host in order, so they are
//!   reproducible from run to run.
//! - [`Layout`]: a vector is a flat array (cone-beam volumes and
//!   projections), an interleaved stack of the parallel-beam Joseph
//!   projector (`[quad][row][col][4 slices]`, padded with slices that the
//!   reductions skip), or one plane broadcast over such a stack (the
//!   compact SIRT weights, as tomors-core's host stacks broadcast one
//!   slice).
//! - A stack of images may carry a transposed copy (allocated by the
//!   first forward projection that needs it);
//!   [`Vector::update_clipped`](tomors_core::linalg::Vector::update_clipped)
//!   writes both in one kernel (`dv_update_t`), every other change marks
//!   the copy stale.
//! - [`Queue`] can time its kernels with events by kind (forward, back,
//!   element-wise) for [`SirtStats`](crate::iterative::SirtStats).

mod foreign;
mod profile;
mod vector;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ndarray::{Array3, ArrayView3};
use tomors_core::CoreError;

use crate::error::{CudaError, Result};
use crate::iterative::{download_staged, upload_staged};
use crate::runtime::compile::cubin_cached;
use crate::runtime::{launch, Arg, Context, DeviceBuffer, Function, Module, Stream};

pub(crate) use foreign::check_foreign;
pub use profile::KernelKind;
use profile::Profile;

/// Source of the element-wise and reduction kernels of [`DeviceVec`].
pub const LINALG_CU: &str = include_str!("../../../kernels/linalg.cu");

/// Blocks of the reduction kernels (fixed, so the partial sums and thus the
/// reductions are deterministic).
pub(crate) const RED_BLOCKS: usize = 1024;

/// Threads per block of the element-wise and reduction kernels.
const THREADS: u32 = 256;

struct Fns {
    fill: Function,
    copy: Function,
    scale: Function,
    axpy: Function,
    mul: Function,
    clip: Function,
    invert: Function,
    max: Function,
    dot: Function,
    sqsum: Function,
    nonfinite: Function,
    residual: Function,
    update: Function,
    update_t: Function,
    gather_rows: Function,
}

/// A device context with one stream, the vector kernels and their
/// reduction buffer: shared (`Arc`) by a device operator and all its
/// vectors.
pub struct Queue {
    ctx: Arc<Context>,
    stream: Stream,
    _module: Module,
    f: Fns,
    /// Partial sums of the reductions (one f64 per block).
    partial: Mutex<DeviceBuffer>,
    profile: Mutex<Option<Profile>>,
}

impl Queue {
    /// A new stream on `ctx` with the vector kernels loaded.
    ///
    /// Errors: compilation and driver errors.
    pub fn new(ctx: Arc<Context>) -> Result<Arc<Self>> {
        ctx.bind()?;
        let (cubin, _) = cubin_cached("linalg", LINALG_CU, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(&ctx, &cubin)?;
        let f = Fns {
            fill: module.function("dv_fill")?,
            copy: module.function("dv_copy")?,
            scale: module.function("dv_scale")?,
            axpy: module.function("dv_axpy")?,
            mul: module.function("dv_mul")?,
            clip: module.function("dv_clip")?,
            invert: module.function("dv_invert")?,
            max: module.function("dv_max")?,
            dot: module.function("dv_dot")?,
            sqsum: module.function("dv_sqsum")?,
            nonfinite: module.function("dv_nonfinite")?,
            residual: module.function("dv_residual")?,
            update: module.function("dv_update")?,
            update_t: module.function("dv_update_t")?,
            gather_rows: module.function("dv_gather_rows")?,
        };
        let stream = Stream::new(&ctx)?;
        let partial = DeviceBuffer::new(&ctx, RED_BLOCKS * 8, "partial sums")?;
        Ok(Arc::new(Self {
            ctx,
            stream,
            _module: module,
            f,
            partial: Mutex::new(partial),
            profile: Mutex::new(None),
        }))
    }

    /// The device context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The stream every kernel of the operator and its vectors runs on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Launches `f` on the stream, timed as `kind` while profiling.
    ///
    /// # Safety
    /// As [`launch`]: `args` match the kernel's parameters, and every
    /// device pointer among them is valid for what the kernel accesses.
    pub(crate) unsafe fn launch(
        &self,
        kind: KernelKind,
        f: &Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        self.ctx.bind()?;
        self.timed(kind, || launch(f, name, grid, block, 0, &self.stream, args))
    }

    /// Launches `f` on the stream without timing it (for kernels inside
    /// work timed as a whole with [`Queue::timed`]).
    ///
    /// # Safety
    /// As [`launch`].
    pub(crate) unsafe fn launch_raw(
        &self,
        f: &Function,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        self.ctx.bind()?;
        launch(f, name, grid, block, 0, &self.stream, args)
    }

    /// Runs `queue_work` (which queues work on the stream), timed as
    /// `kind` while profiling. `queue_work` must not call [`Queue::timed`]
    /// or [`Queue::launch`] (use [`Queue::launch_raw`]).
    pub(crate) fn timed(
        &self,
        kind: KernelKind,
        queue_work: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut guard = self.lock_profile()?;
        match guard.as_mut() {
            Some(p) => p.timed(&self.ctx, &self.stream, kind, queue_work),
            None => {
                drop(guard);
                queue_work()
            }
        }
    }

    fn lock_profile(&self) -> Result<std::sync::MutexGuard<'_, Option<Profile>>> {
        self.profile
            .lock()
            .map_err(|_| CudaError::Parameter("poisoned lock".into()))
    }

    /// Starts timing kernels by kind (clears earlier times).
    pub(crate) fn start_profile(&self) -> Result<()> {
        *self.lock_profile()? = Some(Profile::default());
        Ok(())
    }

    /// Kernel seconds and counts by kind so far (waits for the timed
    /// kernels); the profile goes on.
    pub(crate) fn profile_times(&self) -> Result<profile::Times> {
        match self.lock_profile()?.as_mut() {
            Some(p) => p.collect(),
            None => Ok(profile::Times::default()),
        }
    }

    /// Stops timing.
    pub(crate) fn stop_profile(&self) -> Result<()> {
        *self.lock_profile()? = None;
        Ok(())
    }

    /// Grid of the grid-stride element-wise kernels for `n` elements.
    pub(crate) fn grid(n: usize) -> (u32, u32, u32) {
        (n.div_ceil(THREADS as usize).clamp(1, 8192) as u32, 1, 1)
    }

    /// Copies `data` (small: tables, indices) into a new device buffer and
    /// waits.
    pub(crate) fn upload_small<T: Copy>(&self, data: &[T], what: &str) -> Result<DeviceBuffer> {
        let bytes = std::mem::size_of_val(data);
        let buf = DeviceBuffer::new(&self.ctx, bytes, what)?;
        self.ctx.bind()?;
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe { buf.upload_async(0, data.as_ptr() as *const u8, bytes, &self.stream)? };
        self.stream.synchronize()?;
        Ok(buf)
    }

    /// Uploads `data` to the start of `buf` through pinned chunks and waits.
    pub(crate) fn upload_f32(&self, buf: &DeviceBuffer, data: &[f32]) -> Result<()> {
        upload_staged(&self.ctx, &self.stream, buf, data)
    }

    /// Downloads the start of `buf` into `out` (after the stream's work)
    /// through pinned chunks and waits.
    pub(crate) fn download_f32(&self, buf: &DeviceBuffer, out: &mut [f32]) -> Result<()> {
        download_staged(&self.ctx, &self.stream, buf, out)
    }

    /// A new device buffer of `len` floats, zeroed on the stream.
    pub(crate) fn zeros(&self, len: usize, what: &str) -> Result<DeviceBuffer> {
        let buf = DeviceBuffer::new(&self.ctx, len * 4, what)?;
        self.ctx.bind()?;
        buf.fill_bytes(0, &self.stream)?;
        Ok(buf)
    }

    /// Runs a reduction kernel of `RED_BLOCKS` (1024) blocks (`make_args` gets
    /// the address of the partial-sum buffer) and returns the partial sums
    /// read back (waits for the stream).
    fn reduce(
        &self,
        f: &Function,
        name: &str,
        make_args: impl FnOnce(u64) -> Vec<Arg>,
    ) -> Result<Vec<f64>> {
        let partial = self
            .partial
            .lock()
            .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
        let args = make_args(partial.ptr());
        // SAFETY: the callers pass the kernel's parameters; the partial
        // buffer holds RED_BLOCKS doubles.
        unsafe {
            self.launch(
                KernelKind::Elementwise,
                f,
                name,
                (RED_BLOCKS as u32, 1, 1),
                (THREADS, 1, 1),
                &args,
            )?;
        }
        let mut p = vec![0f64; RED_BLOCKS];
        // SAFETY: `p` stays borrowed until the stream has been synchronised.
        unsafe {
            partial.download_async(0, p.as_mut_ptr() as *mut u8, RED_BLOCKS * 8, &self.stream)?;
        }
        self.stream.synchronize()?;
        Ok(p)
    }
}

/// A device operator: its kernels and those of its vectors run in order on
/// one [`Queue`].
pub trait OnQueue {
    /// The queue (context, stream, vector kernels).
    fn queue(&self) -> &Arc<Queue>;

    /// The device context.
    fn context(&self) -> &Arc<Context> {
        self.queue().context()
    }

    /// The stream every kernel of the operator and its vectors runs on.
    fn stream(&self) -> &Stream {
        self.queue().stream()
    }
}

/// How the floats of a [`DeviceVec`] are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A plain C-order array of this shape (cone-beam volumes
    /// `[z][y][x]` and projections `[angle][row][col]`).
    Flat((usize, usize, usize)),
    /// `slices` planes of `rows × cols` interleaved by 4,
    /// `[quad][row][col][slice in quad]`, with `stored` slices (a multiple
    /// of 4; the slices from `slices` on are padding).
    Stack {
        /// Real slices.
        slices: usize,
        /// Rows of a plane (image rows, or projections of a sinogram).
        rows: usize,
        /// Columns of a plane (image columns, or detector bins).
        cols: usize,
        /// Slices stored (padding included).
        stored: usize,
    },
    /// One plane of `rows × cols` broadcast over every slice of a
    /// [`Layout::Stack`] of the same plane shape (a compact weight).
    Plane {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
    },
}

impl Layout {
    /// Floats stored.
    pub fn stored_len(&self) -> usize {
        match *self {
            Layout::Flat((a, b, c)) => a * b * c,
            Layout::Stack {
                rows, cols, stored, ..
            } => stored * rows * cols,
            Layout::Plane { rows, cols } => rows * cols,
        }
    }

    /// Real elements.
    pub fn len(&self) -> usize {
        match *self {
            Layout::Stack {
                slices, rows, cols, ..
            } => slices * rows * cols,
            other => other.stored_len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The logical shape: `(slices, rows, cols)` of a stack, `(1, rows,
    /// cols)` of a plane, the shape of a flat array.
    pub fn dim(&self) -> (usize, usize, usize) {
        match *self {
            Layout::Flat(d) => d,
            Layout::Stack {
                slices, rows, cols, ..
            } => (slices, rows, cols),
            Layout::Plane { rows, cols } => (1, rows, cols),
        }
    }

    /// The reduction mask parameters `(plane, ns)` of the kernels.
    fn mask(&self) -> (i64, i32) {
        match *self {
            Layout::Stack {
                slices, rows, cols, ..
            } => ((rows * cols).max(1) as i64, slices as i32),
            _ => (1, -1),
        }
    }
}

/// The transposed copy of a stack of images and whether it is current.
#[derive(Default)]
struct Shadow {
    buf: OnceLock<DeviceBuffer>,
    fresh: AtomicBool,
}

/// A vector on one device: a buffer of `f32`s with its [`Layout`] and the
/// [`Queue`] its kernels run on. Implements tomors-core's
/// [`Vector`](tomors_core::linalg::Vector); made by the device operators
/// ([`CudaJoseph`](crate::CudaJoseph),
/// [`CudaConeJoseph`](crate::CudaConeJoseph)) and their upload methods.
pub struct DeviceVec {
    queue: Arc<Queue>,
    buf: DeviceBuffer,
    layout: Layout,
    shadow: Shadow,
}

impl DeviceVec {
    /// A new vector of `layout` on `queue` (contents undefined).
    pub(crate) fn uninit(queue: &Arc<Queue>, layout: Layout, what: &str) -> Result<Self> {
        let buf = DeviceBuffer::new(&queue.ctx, layout.stored_len() * 4, what)?;
        Ok(Self::from_buffer(queue, buf, layout))
    }

    /// A new vector of `layout` on `queue`, zeroed (on the stream).
    pub(crate) fn zeros(queue: &Arc<Queue>, layout: Layout, what: &str) -> Result<Self> {
        let buf = queue.zeros(layout.stored_len(), what)?;
        Ok(Self::from_buffer(queue, buf, layout))
    }

    pub(crate) fn from_buffer(queue: &Arc<Queue>, buf: DeviceBuffer, layout: Layout) -> Self {
        Self {
            queue: queue.clone(),
            buf,
            layout,
            shadow: Shadow::default(),
        }
    }

    /// A flat vector holding `host` (uploaded through pinned chunks; waits).
    pub(crate) fn upload_flat(
        queue: &Arc<Queue>,
        host: ArrayView3<'_, f32>,
        what: &str,
    ) -> Result<Self> {
        let v = Self::uninit(queue, Layout::Flat(host.dim()), what)?;
        let owned;
        let data: &[f32] = match host.as_slice() {
            Some(s) => s,
            None => {
                owned = host.as_standard_layout().into_owned();
                owned.as_slice().expect("standard layout")
            }
        };
        queue.upload_f32(&v.buf, data)?;
        Ok(v)
    }

    /// Downloads a flat vector or a plane (waits).
    ///
    /// Errors: an interleaved stack (its operator de-interleaves it), driver
    /// errors.
    pub(crate) fn download_flat(&self) -> Result<Array3<f32>> {
        if matches!(self.layout, Layout::Stack { .. }) {
            return Err(CudaError::Parameter(
                "an interleaved stack is downloaded by its operator".into(),
            ));
        }
        let mut out = Array3::<f32>::zeros(self.layout.dim());
        self.queue
            .download_f32(&self.buf, out.as_slice_mut().expect("standard layout"))?;
        Ok(out)
    }

    /// Downloads a flat vector (after the stream's work) into `out`, of
    /// its shape.
    ///
    /// Errors: an interleaved stack, another shape, driver errors.
    pub(crate) fn download_flat_into(&self, out: &mut Array3<f32>) -> Result<()> {
        if matches!(self.layout, Layout::Stack { .. }) || out.dim() != self.layout.dim() {
            return Err(CudaError::Parameter(format!(
                "download of a {:?} device vector into a host array of {:?}",
                self.layout,
                out.dim()
            )));
        }
        match out.as_slice_mut() {
            Some(dst) => self.queue.download_f32(&self.buf, dst),
            None => Err(CudaError::Parameter(
                "download into a host array not in standard layout".into(),
            )),
        }
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The logical shape (see [`Layout::dim`]).
    pub fn dim(&self) -> (usize, usize, usize) {
        self.layout.dim()
    }

    /// Real slices of a stack (1 for a flat array or a plane).
    pub fn slices(&self) -> usize {
        match self.layout {
            Layout::Stack { slices, .. } => slices,
            _ => 1,
        }
    }

    /// Number of real elements.
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// Whether the vector has no element.
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// The device buffer.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }

    /// The queue its kernels run on.
    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// The transposed copy of a stack of images, brought up to date by
    /// `transpose(src, dst)` (which queues the transpose kernel) when it is
    /// stale; allocated on first use.
    pub(crate) fn transposed(&self, transpose: impl FnOnce(u64, u64) -> Result<()>) -> Result<u64> {
        let buf = match self.shadow.buf.get() {
            Some(b) => b,
            None => {
                let b = DeviceBuffer::new(
                    &self.queue.ctx,
                    self.layout.stored_len() * 4,
                    "a transposed volume",
                )?;
                let _ = self.shadow.buf.set(b);
                self.shadow.buf.get().expect("just set")
            }
        };
        if !self.shadow.fresh.load(Ordering::Acquire) {
            transpose(self.buf.ptr(), buf.ptr())?;
            self.shadow.fresh.store(true, Ordering::Release);
        }
        Ok(buf.ptr())
    }

    /// Marks the transposed copy stale (after any change of the vector).
    pub(crate) fn touched(&mut self) {
        *self.shadow.fresh.get_mut() = false;
    }

    /// Uploads `data` (the stored floats, in order) into this vector,
    /// through pinned staging, and waits for the copy.
    ///
    /// Errors: a length other than the stored length, driver errors.
    pub fn upload_from(&mut self, data: &[f32]) -> Result<()> {
        if data.len() != self.layout.stored_len() {
            return Err(CudaError::Parameter(format!(
                "uploading {} floats into a device vector of {}",
                data.len(),
                self.layout.stored_len()
            )));
        }
        self.touched();
        self.queue.upload_f32(&self.buf, data)
    }

    /// Downloads the stored floats (after the stream's work) into `out`.
    ///
    /// Errors: a length other than the stored length, driver errors.
    pub fn download_into(&self, out: &mut [f32]) -> Result<()> {
        if out.len() != self.layout.stored_len() {
            return Err(CudaError::Parameter(format!(
                "downloading a device vector of {} floats into {}",
                self.layout.stored_len(),
                out.len()
            )));
        }
        self.queue.download_f32(&self.buf, out)
    }

    /// Checks that `self` and `o` are the same kind of vector.
    fn check_same(&self, o: &Self, what: &str) -> Result<()> {
        if self.layout != o.layout {
            return Err(CoreError::Shape(format!(
                "{what}: vector is {:?}, operand {:?}",
                self.layout, o.layout
            ))
            .into());
        }
        if !Arc::ptr_eq(&self.queue, &o.queue) {
            return Err(CudaError::Parameter(format!(
                "{what}: the vectors belong to different device operators"
            )));
        }
        Ok(())
    }

    /// The `wper` of operand `o` against `self`: 0 for the same layout,
    /// the plane size for a plane broadcast over a stack.
    fn operand(&self, o: &Self, what: &str) -> Result<i64> {
        if let (Layout::Stack { rows, cols, .. }, Layout::Plane { rows: pr, cols: pc }) =
            (self.layout, o.layout)
        {
            if (rows, cols) == (pr, pc) && Arc::ptr_eq(&self.queue, &o.queue) {
                return Ok((rows * cols).max(1) as i64);
            }
        }
        self.check_same(o, what)?;
        Ok(0)
    }
}
