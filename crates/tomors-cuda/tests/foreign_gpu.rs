//! Device vectors from and to device memory owned by another library
//! (CuPy, Numba, PyTorch arrays, here a plain `DeviceBuffer` borrowed as a
//! `ForeignDevicePtr`): `CudaJoseph::stack_from_device`/`stack_to_device`
//! in both layouts and `DeviceVec::flat_from_device`/`into_flat_buffer`
//! give exactly the values of the host uploads and downloads, with no host
//! transfer. GPU tests skip with a printed reason when no GPU is usable
//! (and fail under `TOMORS_REQUIRE_GPU=1`).

mod common;

use common::{gpu_or_skip, random};
use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::linalg::LinearOperator;
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::{
    transfer_bytes, CudaJoseph, DeviceBuffer, DeviceOrder, DeviceVec, ForeignDevicePtr, OnQueue,
};

fn rand3(dim: (usize, usize, usize), seed: u64) -> Array3<f32> {
    Array3::from_shape_vec(dim, random(dim.0 * dim.1 * dim.2, seed)).unwrap()
}

/// `a` copied into new device memory on `p`'s device.
fn on_device(p: &CudaJoseph, a: &Array3<f32>) -> DeviceBuffer {
    let a = a.as_standard_layout();
    let buf = DeviceBuffer::new(p.context(), a.len() * 4, "test data").unwrap();
    buf.upload(a.as_slice().unwrap()).unwrap();
    buf
}

fn host(buf: &DeviceBuffer, dim: (usize, usize, usize)) -> Array3<f32> {
    let mut v = vec![0f32; dim.0 * dim.1 * dim.2];
    buf.download(&mut v).unwrap();
    Array3::from_shape_vec(dim, v).unwrap()
}

#[test]
fn stacks_and_flat_vectors_from_and_to_device_memory() {
    let Some(be) = gpu_or_skip("stacks_and_flat_vectors_from_and_to_device_memory") else {
        return;
    };
    let (ns, na, nb, ny, nx) = (6, 23, 40, 32, 36);
    let g = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), nb).unwrap();
    let grid = SliceGrid::new(nx, ny).unwrap();
    let p = CudaJoseph::new(&be, &g, &grid, 4).unwrap();
    let sino = rand3((ns, na, nb), 3);
    let proj = sino
        .view()
        .permuted_axes([1, 0, 2])
        .as_standard_layout()
        .to_owned();
    let vol = rand3((ns, ny, nx), 5);
    let (bs, bp, bv) = (
        on_device(&p, &sino),
        on_device(&p, &proj),
        on_device(&p, &vol),
    );
    // SAFETY: the buffers live until the end of the test, which waits for
    // every call.
    let (fs, fp, fv) = unsafe {
        (
            ForeignDevicePtr::new(bs.ptr(), sino.len() * 4).unwrap(),
            ForeignDevicePtr::new(bp.ptr(), proj.len() * 4).unwrap(),
            ForeignDevicePtr::new(bv.ptr(), vol.len() * 4).unwrap(),
        )
    };

    let before = transfer_bytes();
    let s1 = p
        .stack_from_device(&fs, (ns, na, nb), DeviceOrder::Sinograms)
        .unwrap();
    let s2 = p
        .stack_from_device(&fp, (ns, na, nb), DeviceOrder::Projections)
        .unwrap();
    let out_s = p.stack_to_device(&s1, DeviceOrder::Sinograms).unwrap();
    let out_p = p.stack_to_device(&s2, DeviceOrder::Projections).unwrap();
    let v = p
        .stack_from_device(&fv, (ns, ny, nx), DeviceOrder::Sinograms)
        .unwrap();
    let op = p.operator(ns).unwrap();
    let mut ax = op.range_zeros(&(0..na).collect::<Vec<_>>()).unwrap();
    op.forward(&v, &(0..na).collect::<Vec<_>>(), &mut ax)
        .unwrap();
    let flat = DeviceVec::flat_from_device(p.queue(), &fs, (ns, na, nb), "flat").unwrap();
    let flat_buf = flat.into_flat_buffer().unwrap();
    assert_eq!(
        transfer_bytes() - before,
        0,
        "device-to-device calls moved host bytes"
    );

    // The same values as the host paths, exactly.
    assert_eq!(p.download(&s1).unwrap(), sino);
    assert_eq!(p.download(&s2).unwrap(), sino);
    assert_eq!(host(&out_s, (ns, na, nb)), sino);
    assert_eq!(host(&out_p, (na, ns, nb)), proj);
    assert_eq!(p.download(&v).unwrap(), vol);
    let mut want = Array3::<f32>::zeros((ns, na, nb));
    p.forward(vol.view(), want.view_mut()).unwrap();
    assert_eq!(p.download(&ax).unwrap(), want);
    assert_eq!(host(&flat_buf, (ns, na, nb)), sino);

    // Bad input: a plane of neither side, a size other than the memory's.
    let e = p
        .stack_from_device(&fs, (ns * na, 1, nb), DeviceOrder::Sinograms)
        .err()
        .expect("an error")
        .to_string();
    assert!(e.contains("planes"), "{e}");
    let e = p
        .stack_from_device(&fs, (ns - 1, na, nb), DeviceOrder::Sinograms)
        .err()
        .expect("an error")
        .to_string();
    assert!(e.contains("bytes"), "{e}");
    let e = DeviceVec::flat_from_device(p.queue(), &fs, (1, 2, 3), "flat")
        .err()
        .expect("an error")
        .to_string();
    assert!(e.contains("bytes"), "{e}");
    // A stack is de-interleaved by its operator, not handed out flat.
    assert!(s1.into_flat_buffer().is_err());
}
