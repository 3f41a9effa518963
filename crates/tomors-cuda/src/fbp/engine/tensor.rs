//! Packing and launching the tensor-core back projector
//! ([`crate::fbp::tensor`]).

use super::*;
use crate::fbp::tensor::{
    bp_launch, entries_bytes, maxima_bytes, pack_launches, padded_angles, slots,
};

impl Engine {
    /// Re-lays `slices` filtered slices (rows at `src`, see
    /// [`Engine::filter_rows`]) as the split f16 entries of the tensor-core
    /// module last prepared by [`Engine::bp_module`], each slice scaled by
    /// the power of two that brings its largest magnitude into [2¹³, 2¹⁴),
    /// on the compute stream; returns the buffer's address (the per-slot
    /// maxima, then the entries). Calls alternate between two buffers, so a
    /// slab's entries stay intact while the next slab is packed.
    pub(super) fn pack_tensor(
        &mut self,
        src: (u64, i64, i32),
        slices: usize,
        na: usize,
        p: TensorParams,
    ) -> Result<u64> {
        let key = self.tensor_key.ok_or_else(|| {
            CudaError::Parameter("tensor: entries packed before the module was prepared".into())
        })?;
        let nbp = key.cache_width;
        let npp = padded_angles(p, na);
        let nslots = slots(p, slices);
        let mb = maxima_bytes(p, slices);
        let bytes = mb + entries_bytes(p, nslots, npp, nbp);
        let slot = self.tensor_next;
        self.tensor_next ^= 1;
        let buf = ensure(
            &mut self.tensor_buf[slot],
            &self.ctx,
            bytes,
            "tensor entries",
        )?;
        let m = &self.bp[&key];
        let (zero, absmax) = m
            .maxima
            .as_ref()
            .expect("tensor module has its maxima kernels");
        let pack = m.pack.as_ref().expect("tensor module has pack_tensor");
        for (f, l) in [zero, absmax, pack]
            .into_iter()
            .zip(pack_launches(p, na, nbp, slices, src, buf))
        {
            // SAFETY: `pack_launches` gives the parameters of tc_zero,
            // tc_absmax and pack_tensor; `buf` holds `bytes`.
            unsafe { launch(f, l.name, l.grid, l.block, l.shared, &self.comp, &l.args)? };
        }
        Ok(buf)
    }

    /// Launches the tensor-core back projection of the entries at `buf`
    /// ([`Engine::pack_tensor`]) into `out`.
    pub(super) fn launch_tensor(
        &mut self,
        key: BpKey,
        p: TensorParams,
        buf: u64,
        out: u64,
        slices: usize,
        scale: f32,
    ) -> Result<()> {
        let m = &self.bp[&key];
        let d = m.dconst.as_ref().map_or(0, |b| b.0.ptr());
        let l = bp_launch(
            p,
            (key.nx, key.ny),
            slices,
            buf,
            out,
            scale,
            key.shared as u32,
            d,
        );
        // SAFETY: `bp_launch` gives the parameters of bp_tensor; `buf` holds
        // the entries of `slices` slices.
        unsafe {
            launch(
                &m.func, l.name, l.grid, l.block, l.shared, &self.comp, &l.args,
            )
        }
    }
}
