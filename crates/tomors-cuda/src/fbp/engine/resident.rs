//! Hooks for the benchmark and tuner: GPU-resident back projection and filter timing.

use super::*;

impl Engine {
    /// Uploads `data` (`slices × na × n`, already filtered or raw) and packs it
    /// into textures for `cfg`; returns the texture-handle array pointer.
    pub(crate) fn stage_resident(
        &mut self,
        data: &[f32],
        slices: usize,
        job: &BpJob<'_>,
    ) -> Result<(BpKey2, u64)> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let raw = ensure(
            &mut self.raw[0],
            &self.ctx,
            slices * na * n * 4,
            "resident sinograms",
        )?;
        let out = ensure(
            &mut self.out[0],
            &self.ctx,
            slices * job.grid.nx * job.grid.ny * 4,
            "resident slices",
        )?;
        self.comp.synchronize()?;
        self.raw[0].as_ref().expect("allocated").upload(data)?;
        let key = self.bp_module(job.cfg, job.grid, job.geom, job.interp)?;
        let texs = self.pack((raw, n as i64, 0), slices, na, n, job.cfg, job.interp)?;
        self.comp.synchronize()?;
        let _ = out;
        Ok((BpKey2(key), texs))
    }

    /// Launches the resident back projection once (for timing).
    pub(crate) fn launch_resident(
        &mut self,
        key: BpKey2,
        texs: u64,
        slices: usize,
        scale: f32,
        cfg: BpConfig,
    ) -> Result<()> {
        let out = self.out[0].as_ref().expect("staged").ptr();
        self.launch_bp(key.0, texs, out, slices, scale, cfg)
    }

    /// Times one filtering of `slices × na` rows of `n` bins resident on the
    /// device with `variant` (ms, median of `reps` after a warm-up).
    pub(crate) fn time_filter(
        &mut self,
        rows: usize,
        n: usize,
        variant: FftVariant,
        reps: usize,
    ) -> Result<f64> {
        let data: Vec<f32> = (0..rows * n)
            .map(|i| ((i * 2_654_435_761usize) % 1000) as f32 * 1e-3)
            .collect();
        let raw = ensure(
            &mut self.raw[0],
            &self.ctx,
            rows * n * 4,
            "filter bench rows",
        )?;
        self.comp.synchronize()?;
        self.raw[0].as_ref().expect("allocated").upload(&data)?;
        let job = FilterJob {
            spec: FilterSpec::default(),
            bin_width: 1.0,
        };
        let (e0, e1) = (Event::new(&self.ctx)?, Event::new(&self.ctx)?);
        let mut times = Vec::new();
        for r in 0..=reps {
            e0.record(&self.comp)?;
            self.filter_rows(raw, rows, n, &job, variant)?;
            e1.record(&self.comp)?;
            e1.synchronize()?;
            if r > 0 {
                times.push(e0.elapsed_ms(&e1)? as f64);
            }
        }
        Ok(median(&mut times))
    }

    /// Records an event on the compute stream (for timing from outside).
    pub(crate) fn event(&self) -> Result<Event> {
        Event::new(&self.ctx)
    }
}

/// Opaque module key handed to the benchmark.
#[derive(Clone, Copy)]
pub(crate) struct BpKey2(BpKey);

/// Median of a list (sorted in place); 0 for an empty list.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}
