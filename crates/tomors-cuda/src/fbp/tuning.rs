//! The tuning cache: the fastest measured back-projection configuration per
//! (device name, driver, kernel, interpolation, slices), written by
//! `tomors tune` ([`crate::tune`]) and read by every [`crate::CudaBackend`]
//! whose kernel is [`crate::KernelChoice::Auto`].
//!
//! The file (`tuning.tsv` in the kernel cache directory, see
//! [`crate::runtime::compile::cache_dir`], or `$TOMORS_TUNING_FILE`) holds one line
//! per entry, tab-separated:
//! `device  driver  kernel  interpolation  slices  configuration  GU/s`,
//! where `kernel` is the family (`standard`, `tex-opt`, `alu`, `hybrid`, with
//! the texel mode: `alu-float2`, …) and `configuration` the full kernel name
//! that [`crate::KernelChoice`] parses. `slices` is the class 1, 2 or 4: the
//! slab has at least that many slices. Lines that do not parse are skipped
//! with a warning, so a damaged file never stops a reconstruction.

use std::path::{Path, PathBuf};

use tomors_core::Interpolation;

use crate::error::{CudaError, Result};
use crate::fbp::kernels::{BpConfig, KernelChoice, SliceMode};

/// One measured best configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct TuningEntry {
    /// Device name (as the driver reports it).
    pub device: String,
    /// Driver version.
    pub driver: i32,
    /// Kernel family with its texel mode (e.g. `alu-float2`).
    pub kernel: String,
    /// Interpolation.
    pub interp: Interpolation,
    /// Slice class: 1, 2 or 4.
    pub slices: usize,
    /// The configuration.
    pub config: BpConfig,
    /// Measured GU/s.
    pub gups: f64,
}

/// The slice class of a slab of `slices` slices: 4, 2 or 1.
pub fn slice_class(slices: usize) -> usize {
    match slices {
        0 | 1 => 1,
        2 | 3 => 2,
        _ => 4,
    }
}

/// The family name of a configuration (kernel and texel mode), e.g.
/// `alu-float2`, `tex-opt`, `alu-oversample-float2`.
pub fn family(cfg: &BpConfig) -> String {
    let kernel = match cfg.kernel {
        crate::fbp::kernels::KernelKind::Alu(p) if p.oversample => "alu-oversample",
        k => k.name(),
    };
    match cfg.mode {
        SliceMode::F32 => kernel.to_string(),
        m => format!("{kernel}-{}", m.name()),
    }
}

/// Whether a configuration computes in f32 throughout and interpolates as
/// asked (no half values, no oversampling): the only ones
/// [`TuningCache::best`] picks for `Auto`.
pub fn is_exact(cfg: &BpConfig) -> bool {
    cfg.mode != SliceMode::Half4
        && !matches!(cfg.kernel, crate::fbp::kernels::KernelKind::Alu(p)
            if p.oversample || (p.hybrid > 0 && !p.hybrid_exact))
}

/// Whether a slab of `slices` slices keeps at least half the slices of a
/// block of `cfg` busy (the line-sweep kernel's blocks hold 32 × its slices
/// per lane; every other kernel's a texel's or two).
pub fn fills_its_blocks(cfg: &BpConfig, slices: usize) -> bool {
    !matches!(
        cfg.kernel,
        crate::fbp::kernels::KernelKind::Sweep(_) | crate::fbp::kernels::KernelKind::Tensor(_)
    ) || 2 * slices >= cfg.slices_per_block()
}

/// The entries of a tuning file.
#[derive(Clone, Debug, Default)]
pub struct TuningCache {
    /// All entries, in file order.
    pub entries: Vec<TuningEntry>,
}

impl TuningCache {
    /// The tuning file: `$TOMORS_TUNING_FILE`, else `tuning.tsv` in the
    /// kernel cache directory.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("TOMORS_TUNING_FILE") {
            return Some(PathBuf::from(p));
        }
        crate::runtime::compile::cache_dir().map(|d| d.join("tuning.tsv"))
    }

    /// Parses the text of a tuning file; unreadable lines are skipped with
    /// a warning naming `origin` and the line.
    pub fn parse(text: &str, origin: &str) -> Self {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_line(line) {
                Some(e) => entries.push(e),
                None => tracing::warn!("{origin}:{}: ignoring an unreadable tuning line", i + 1),
            }
        }
        Self { entries }
    }

    /// Reads `path` (an empty cache when it does not exist).
    ///
    /// Errors: a file that exists but cannot be read.
    pub fn load(path: &Path) -> Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(t) => Ok(Self::parse(&t, &path.display().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(CudaError::Parameter(format!(
                "{}: cannot read the tuning file: {e}",
                path.display()
            ))),
        }
    }

    /// Replaces the entries of the same (device, driver, kernel, interp,
    /// slices) with `new` ones.
    pub fn merge(&mut self, new: Vec<TuningEntry>) {
        self.entries.retain(|e| {
            !new.iter().any(|n| {
                n.device == e.device
                    && n.driver == e.driver
                    && n.kernel == e.kernel
                    && n.interp == e.interp
                    && n.slices == e.slices
            })
        });
        self.entries.extend(new);
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut s = String::from(
            "# tomors tuning cache: device\tdriver\tkernel\tinterpolation\tslices\tconfiguration\tGU/s\n",
        );
        for e in &self.entries {
            s.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{:.1}\n",
                e.device, e.driver, e.kernel, e.interp, e.slices, e.config, e.gups
            ));
        }
        s
    }

    /// Writes the file atomically (a temporary file renamed into place).
    ///
    /// Errors: the directory cannot be created or the file written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let err = |e: std::io::Error| {
            CudaError::Parameter(format!(
                "{}: cannot write the tuning file: {e}",
                path.display()
            ))
        };
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(err)?;
        }
        let tmp = path.with_extension("tsv.tmp");
        std::fs::write(&tmp, self.to_text()).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }

    /// The fastest exact configuration ([`is_exact`]) measured on this
    /// device and driver for `interp` whose texel holds no more slices
    /// than a slab of `slices` has.
    pub fn best(
        &self,
        device: &str,
        driver: i32,
        interp: Interpolation,
        slices: usize,
    ) -> Option<&TuningEntry> {
        let class = slice_class(slices);
        self.entries
            .iter()
            .filter(|e| {
                e.device == device
                    && e.driver == driver
                    && e.interp == interp
                    && e.slices == class
                    && is_exact(&e.config)
                    && e.config.supports(interp)
                    && fills_its_blocks(&e.config, slices)
            })
            .max_by(|a, b| a.gups.total_cmp(&b.gups))
    }
}

fn parse_line(line: &str) -> Option<TuningEntry> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != 7 {
        return None;
    }
    let config = match f[5].parse::<KernelChoice>().ok()? {
        KernelChoice::Fixed(c) => c,
        KernelChoice::Auto => return None,
    };
    let slices: usize = f[4].parse().ok()?;
    let gups: f64 = f[6].parse().ok()?;
    if !matches!(slices, 1 | 2 | 4) || !gups.is_finite() || config.mode.slices() > slices {
        return None;
    }
    Some(TuningEntry {
        device: f[0].to_string(),
        driver: f[1].parse().ok()?,
        kernel: f[2].to_string(),
        interp: f[3].parse().ok()?,
        slices,
        config,
        gups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbp::kernels::{AluParams, KernelKind};

    fn entry(kernel: KernelKind, mode: SliceMode, slices: usize, gups: f64) -> TuningEntry {
        let config = BpConfig { kernel, mode };
        TuningEntry {
            device: "GPU X".into(),
            driver: 13000,
            kernel: family(&config),
            interp: Interpolation::Linear,
            slices,
            config,
            gups,
        }
    }

    #[test]
    fn round_trip_merge_and_best() {
        let alu = KernelKind::Alu(AluParams {
            tile: 64,
            ..AluParams::default()
        });
        let mut c = TuningCache::default();
        c.merge(vec![
            entry(KernelKind::TexOpt, SliceMode::Float2, 2, 2000.0),
            entry(alu, SliceMode::Float2, 2, 3000.0),
            entry(alu, SliceMode::Half4, 4, 9000.0),
            entry(alu, SliceMode::F32, 1, 1500.0),
        ]);
        let text = c.to_text();
        let back = TuningCache::parse(&text, "test");
        assert_eq!(back.entries, c.entries);
        // Half is never picked for Auto; the class of a 3-slice slab is 2.
        let b = back.best("GPU X", 13000, Interpolation::Linear, 3).unwrap();
        assert_eq!(b.config.to_string(), "alu-float2@t64,s16,a1,r1,b2");
        assert!(back
            .best("GPU X", 13000, Interpolation::Linear, 8)
            .is_none());
        assert!(back
            .best("GPU Y", 13000, Interpolation::Linear, 2)
            .is_none());
        assert!(back
            .best("GPU X", 12000, Interpolation::Linear, 2)
            .is_none());
        // A new measurement replaces the old one of the same key.
        let mut c2 = back.clone();
        c2.merge(vec![entry(alu, SliceMode::Float2, 2, 2500.0)]);
        assert_eq!(c2.entries.len(), 4);
        let b = c2.best("GPU X", 13000, Interpolation::Linear, 2).unwrap();
        assert_eq!(b.gups, 2500.0);
    }

    #[test]
    fn damaged_lines_are_skipped() {
        let text = "# header\nGPU X\t13000\talu\tlinear\t1\talu\t100.0\n\
                    GPU X\t13000\talu\tlinear\t1\tnot-a-kernel\t100.0\n\
                    GPU X\t13000\talu\tlinear\t1\talu-float2\t100.0\n\
                    short line\n\
                    GPU X\tx\talu\tlinear\t1\talu\t1\n";
        let c = TuningCache::parse(text, "t");
        // Only the first line is valid (float2 needs a class of 2 or more).
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.entries[0].gups, 100.0);
    }

    #[test]
    fn missing_file_is_empty_and_save_load_round_trips() {
        let dir = std::env::temp_dir().join(format!("tomors-tuning-{}", std::process::id()));
        let path = dir.join("t.tsv");
        assert!(TuningCache::load(&path).unwrap().entries.is_empty());
        let mut c = TuningCache::default();
        c.merge(vec![entry(KernelKind::Standard, SliceMode::F32, 1, 700.0)]);
        c.save(&path).unwrap();
        assert_eq!(TuningCache::load(&path).unwrap().entries, c.entries);
        let _ = std::fs::remove_dir_all(dir);
    }
}
