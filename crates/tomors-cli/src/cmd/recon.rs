//! `tomors recon`: the command-line flags, turned into one [`Job`] and run.

use std::path::PathBuf;

use anyhow::{bail, Result};

use super::args::{
    bin_factors, index_range, index_range_step, memory_size, three_sizes, value_range, ConeArgs,
    FilterArgs, InputArgs, IterativeArgs, PreprocessArgs,
};
use crate::backend_select::BackendArgs;
use crate::job::geometry::{CenterArg, GeometrySpec};
use crate::job::half::HalfSpec;
use crate::job::input::{AngleUnit, Endian, InputSpec, RawArgs, RawDtype, RoiSpec};
use crate::job::method::{FbpSpec, MethodSpec};
use crate::job::output::OutputSpec;
use crate::job::Job;

/// Arguments of `tomors recon`.
#[derive(clap::Args, Debug)]
pub struct ReconArgs {
    /// Projections: an HDF5 file (DXchange or NeXus NXtomo, with flats and
    /// darks), a TIFF stack (directory, glob such as 'proj_*.tif', or
    /// multi-page file), an .npy file [angle][row][col] (or [angle][col]),
    /// or raw with --raw-shape.
    #[arg(required_unless_present_any = ["config", "config_from"])]
    pub input: Option<PathBuf>,
    /// Output: a .npy file, an .h5 file (dataset /volume with the geometry as
    /// attributes), a .nxs file (NeXus NXentry/NXdata), a .zarr store
    /// (OME-Zarr with a multiscale pyramid), or a directory that receives a
    /// TIFF per slice. Every output records the run's configuration
    /// (`--config-from` repeats it).
    #[arg(long, required_unless_present_any = ["config", "config_from"])]
    pub out: Option<PathBuf>,
    /// Options from a TOML file (keys are the long flag names, e.g.
    /// `filter = "hann"`, `center = 1021.5`, `input = "scan.h5"`); flags
    /// given on the command line override it. Unknown keys are errors.
    #[arg(long, value_name = "FILE", conflicts_with = "config_from")]
    pub config: Option<PathBuf>,
    /// Repeat the run that wrote OUTPUT, from the configuration recorded in
    /// it (give a new --out; other flags override the recorded ones). Fails
    /// when a recorded input changed since.
    #[arg(long, value_name = "OUTPUT")]
    pub config_from: Option<PathBuf>,
    /// Chunk compression of an HDF5 or NeXus output: deflate[:LEVEL] (0–9,
    /// default 4), lzf or none (default none); both read by h5py.
    #[arg(long, value_name = "METHOD")]
    pub compression: Option<tomors_io::Compression>,
    /// Projection angles as a 1-D .npy file (radians unless --angles-unit deg).
    #[arg(long, conflicts_with = "angle_range")]
    pub angles: Option<PathBuf>,
    /// Unit of the values in --angles (default rad), or of the angles stored
    /// in an HDF5 input (default: its `units` attribute, else degrees).
    #[arg(long, value_enum)]
    pub angles_unit: Option<AngleUnit>,
    /// Without --angles: angles evenly spaced over this range in degrees,
    /// end excluded (default 180; cone beam: 360).
    #[arg(long)]
    pub angle_range: Option<f32>,
    /// Rotation-axis position in detector pixels from the left edge of a row
    /// (bin k centred at k; default: the detector centre (n−1)/2), or A:B
    /// for an axis drifting linearly from A at the first detector row to B
    /// at the last, or `auto` to find it (Vo et al. 2014 Fourier metric on a
    /// few rows).
    #[arg(long, allow_hyphen_values = true)]
    pub center: Option<CenterArg>,
    /// With --center auto: the detector row to search on (default: up to 3
    /// rows spread over the reconstructed ones, median taken).
    #[arg(long)]
    pub center_row: Option<usize>,
    /// With --center auto: search the centre between detector columns A
    /// and B (detector pixels, as --center; default ±50 px around the
    /// middle, or the whole detector with --half-acquisition); 0:N−1
    /// searches the whole detector.
    #[arg(long, value_name = "A:B", allow_hyphen_values = true, value_parser = value_range)]
    pub center_range: Option<(f32, f32)>,
    /// A 360° scan with the rotation axis near one edge of the detector
    /// (half acquisition, extended field of view): opposite projections are
    /// stitched (linear weights in their overlap) into a 180° scan of about
    /// twice the width, and the wider slice is reconstructed. The axis is
    /// --center (detector pixels) or, with --center auto or no --center,
    /// found by matching the mirrored opposite projections (left or right
    /// side; --center-range, --center-row). Parallel beam only.
    #[arg(long)]
    pub half_acquisition: bool,
    /// Detector rows (slices) to reconstruct, as a:b (end excluded; either
    /// end may be left out).
    #[arg(long, value_name = "A:B", value_parser = index_range)]
    pub slices: Option<(Option<usize>, Option<usize>)>,
    /// Detector columns to use, as a:b (end excluded; either end may be left
    /// out); --center stays in the whole detector's pixels.
    #[arg(long, value_name = "A:B", value_parser = index_range)]
    pub cols: Option<(Option<usize>, Option<usize>)>,
    /// Projections to use, as a:b[:step] (end excluded).
    #[arg(long, value_name = "A:B[:STEP]", value_parser = index_range_step)]
    pub projections: Option<super::args::RangeStep>,
    /// Average blocks of ROWS×COLS detector pixels (one factor: both);
    /// --slices and --center-row then count binned rows, --center stays in
    /// detector pixels.
    #[arg(long, value_name = "ROWS,COLS", value_parser = bin_factors)]
    pub binning: Option<(usize, usize)>,
    /// Average every N consecutive projections (their angles averaged).
    #[arg(long, value_name = "N")]
    pub bin_angles: Option<usize>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Slices per slab handed to the FBP backend (default 32).
    #[arg(long)]
    pub slab: Option<usize>,
    /// Parallel-beam FBP method: direct (the exact back projection) or
    /// fourier (direct Fourier reconstruction by gridding, O(n² log n): the
    /// fastest for large jobs, within about 1e-5 of the same FBP computed
    /// exactly; needs evenly spaced angles) (default direct).
    #[arg(long)]
    pub method: Option<tomors_core::fourier::Method>,
    /// Shape of a raw input file: angles,rows,cols.
    #[arg(long, value_name = "ANGLES,ROWS,COLS", value_parser = three_sizes)]
    pub raw_shape: Option<[usize; 3]>,
    /// Element type of a raw input file (default f32).
    #[arg(long, value_enum)]
    pub raw_dtype: Option<RawDtype>,
    /// Byte order of a raw input file (default little).
    #[arg(long, value_enum)]
    pub raw_endian: Option<Endian>,
    /// Bytes to skip at the start of a raw input file (default 0).
    #[arg(long)]
    pub raw_offset: Option<u64>,
    /// Accept a raw input file longer than --raw-offset + its shape's bytes
    /// (the surplus at the end is ignored; without it the sizes must match).
    #[arg(long)]
    pub raw_allow_trailing: bool,
    /// Replace an existing output.
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub io: InputArgs,
    #[command(flatten)]
    pub pre: PreprocessArgs,
    /// Memory budget, e.g. 512M or 4G (binary units). FBP streams slab by
    /// slab (read → reconstruct → write) within it (default 2G); the
    /// iterative methods and cone beam hold the whole scan and fail when it
    /// does not fit (default: no limit).
    #[arg(long, value_name = "SIZE", value_parser = memory_size)]
    pub memory: Option<usize>,
    /// Sample type of a TIFF-stack output: 32 (float), 16 or 8 (unsigned,
    /// scaled linearly from --tiff-range; default 32).
    #[arg(long)]
    pub tiff_bits: Option<u32>,
    /// Values mapped to 0 and to the largest integer of a 16/8-bit TIFF
    /// output, as lo:hi.
    #[arg(long, value_name = "LO:HI", allow_hyphen_values = true, value_parser = value_range)]
    pub tiff_range: Option<(f32, f32)>,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub cone: ConeArgs,
    #[command(flatten)]
    pub iterative: IterativeArgs,
}

impl ReconArgs {
    /// The job these flags describe (one field per flag; the checks are
    /// the job's).
    pub fn job(self) -> Result<Job> {
        let Some(input) = self.input else {
            bail!("no input: give it on the command line or as `input` in the configuration");
        };
        let Some(out) = self.out else {
            bail!("no output: give --out (or `out` in the configuration)");
        };
        let half = self.half_acquisition.then_some(HalfSpec {
            axis: match self.center {
                Some(CenterArg::At(c)) => Some(c),
                _ => None,
            },
            center_row: self.center_row,
            range: self.center_range,
            slices: self.slices,
        });
        Ok(Job {
            input: InputSpec {
                path: input,
                open: self.io.open_options(),
                raw: RawArgs {
                    shape: self.raw_shape,
                    dtype: self.raw_dtype,
                    endian: self.raw_endian,
                    offset: self.raw_offset,
                    allow_trailing: self.raw_allow_trailing,
                },
                angles: self.angles,
                angles_unit: self.angles_unit,
                angle_range: self.angle_range,
                roi: RoiSpec {
                    cols: self.cols,
                    projections: self.projections,
                    binning: self.binning,
                    bin_angles: self.bin_angles,
                },
                half,
            },
            pre: self.pre.spec(),
            geometry: GeometrySpec {
                kind: self.cone.geometry,
                center: self.center,
                center_row: self.center_row,
                center_range: self.center_range,
                half_acquisition: self.half_acquisition,
                slices: self.slices,
                cone: self.cone.spec(),
            },
            method: MethodSpec {
                algorithm: self.iterative.algorithm,
                fbp: FbpSpec {
                    method: self.method,
                    ..self.filter.spec(self.slab)
                },
                iterative: self.iterative.spec(),
            },
            backend: self.backend,
            output: OutputSpec {
                path: out,
                overwrite: self.overwrite,
                tiff_bits: self.tiff_bits,
                tiff_range: self.tiff_range,
                compression: self.compression,
                provenance: None,
            },
            memory: self.memory,
        })
    }
}
