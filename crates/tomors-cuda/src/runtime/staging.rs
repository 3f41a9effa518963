//! Host staging of slab pipelines: copies between caller arrays and
//! contiguous (page-locked) staging memory, and whether an array is
//! page-locked already (then the pipelines copy it by DMA directly).

use ndarray::{ArrayView3, ArrayViewMut3};
use rayon::prelude::*;

const COPY_CHUNK: usize = 1 << 18;

/// Copies a slab into contiguous staging memory (parallel when contiguous).
pub(crate) fn copy_in(src: &ArrayView3<'_, f32>, dst: &mut [f32]) {
    match src.as_slice() {
        Some(s) => dst
            .par_chunks_mut(COPY_CHUNK)
            .zip(s.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s)),
        None => {
            // Plane by plane in parallel (a band of detector rows is
            // contiguous within each projection).
            let plane = (src.shape()[1] * src.shape()[2]).max(1);
            let planes: Vec<_> = src.outer_iter().collect();
            dst.par_chunks_mut(plane)
                .zip(planes.par_iter())
                .for_each(|(d, p)| match p.as_slice() {
                    Some(s) => d.copy_from_slice(s),
                    None => d.iter_mut().zip(p.iter()).for_each(|(d, v)| *d = *v),
                });
        }
    }
}

/// Copies contiguous staging memory into a slab (parallel when contiguous).
pub(crate) fn copy_out(src: &[f32], dst: &mut ArrayViewMut3<'_, f32>) {
    match dst.as_slice_mut() {
        Some(d) => d
            .par_chunks_mut(COPY_CHUNK)
            .zip(src.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s)),
        None => {
            for (d, v) in dst.iter_mut().zip(src.iter()) {
                *d = *v;
            }
        }
    }
}

/// Whether `p` lies in page-locked host memory known to the driver
/// (allocated by `cuMemHostAlloc` or registered).
pub(crate) fn is_pinned(p: *const f32) -> bool {
    use cudarc::driver::sys;
    let mut kind = 0u32;
    // SAFETY: the driver writes one CUmemorytype (a u32) or fails.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut kind as *mut u32 as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            p as sys::CUdeviceptr,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}
