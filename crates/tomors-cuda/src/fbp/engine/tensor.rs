//! Packing and launching the tensor-core back projector
//! ([`crate::fbp::tensor`]).

use super::*;
use crate::fbp::tensor::{entries_bytes, maxima_bytes, padded_angles, slots};

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
        let (s, rs, pair) = src;
        let ent = buf + mb as u64;
        let (na_i, ns_i, nslots_i) = (na as i32, slices as i32, nslots as i32);
        // SAFETY: parameter types match tc_zero, tc_absmax and pack_tensor.
        unsafe {
            launch(
                zero,
                "tc_zero",
                (nslots.div_ceil(256) as u32, 1, 1),
                (256, 1, 1),
                0,
                &self.comp,
                &[buf.into(), nslots_i.into()],
            )?;
            launch(
                absmax,
                "tc_absmax",
                (slices as u32, na.div_ceil(8) as u32, 1),
                (256, 1, 1),
                0,
                &self.comp,
                &[s.into(), rs.into(), pair.into(), buf.into(), na_i.into()],
            )?;
            launch(
                pack,
                "pack_tensor",
                (nbp.div_ceil(32) as u32, npp as u32, (nslots / 32) as u32),
                (32, 8, 1),
                0,
                &self.comp,
                &[
                    s.into(),
                    rs.into(),
                    pair.into(),
                    buf.into(),
                    ent.into(),
                    na_i.into(),
                    ns_i.into(),
                ],
            )?;
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
        let (bx, by) = p.block_pixels();
        let grid = (
            key.nx.div_ceil(bx) as u32,
            key.ny.div_ceil(by) as u32,
            slices.div_ceil(p.slices_per_block()) as u32,
        );
        let block = (p.threads() as u32, 1, 1);
        let d = m.dconst.as_ref().map_or(0, |b| b.0.ptr());
        let ent = buf + maxima_bytes(p, slices) as u64;
        let ns = slices as i32;
        let a: Vec<Arg> = vec![
            ent.into(),
            buf.into(),
            out.into(),
            ns.into(),
            scale.into(),
            d.into(),
        ];
        // SAFETY: parameter types match bp_tensor.
        unsafe {
            launch(
                &m.func,
                "bp_tensor",
                grid,
                block,
                key.shared as u32,
                &self.comp,
                &a,
            )
        }
    }
}
