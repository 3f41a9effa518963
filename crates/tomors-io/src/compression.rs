//! Compression of chunked volume outputs (HDF5, NeXus): `none`,
//! `deflate[:level]` (zlib, every HDF5 reader) and `lzf` (fast; h5py ships
//! the filter).

use std::fmt;
use std::str::FromStr;

/// How the chunks of an HDF5/NeXus volume are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None,
    /// zlib/deflate at a level 0–9 (with the byte shuffle filter).
    Deflate(u8),
    /// LZF (with the byte shuffle filter).
    Lzf,
}

/// The deflate level of a plain `deflate`.
pub const DEFAULT_DEFLATE_LEVEL: u8 = 4;

impl FromStr for Compression {
    type Err = String;

    /// `none`, `deflate`, `deflate:LEVEL` (0–9) or `lzf`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        match t.split_once(':') {
            None => match t.as_str() {
                "none" => Ok(Self::None),
                "deflate" | "gzip" | "zlib" => Ok(Self::Deflate(DEFAULT_DEFLATE_LEVEL)),
                "lzf" => Ok(Self::Lzf),
                _ => Err(format!(
                    "'{s}': unknown compression (use deflate[:level], lzf or none)"
                )),
            },
            Some(("deflate" | "gzip" | "zlib", level)) => match level.parse::<u8>() {
                Ok(l) if l <= 9 => Ok(Self::Deflate(l)),
                _ => Err(format!("'{s}': the deflate level is an integer 0–9")),
            },
            Some(_) => Err(format!(
                "'{s}': unknown compression (use deflate[:level], lzf or none)"
            )),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => write!(f, "none"),
            Self::Deflate(l) => write!(f, "deflate:{l}"),
            Self::Lzf => write!(f, "lzf"),
        }
    }
}

impl Compression {
    /// Applies the filters to an HDF5 dataset builder.
    pub(crate) fn apply(self, b: hdf5::DatasetBuilderEmpty) -> hdf5::DatasetBuilderEmpty {
        match self {
            Self::None => b,
            Self::Deflate(level) => b.shuffle().deflate(level),
            Self::Lzf => b.shuffle().lzf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        assert_eq!("none".parse(), Ok(Compression::None));
        assert_eq!("deflate".parse(), Ok(Compression::Deflate(4)));
        assert_eq!("deflate:9".parse(), Ok(Compression::Deflate(9)));
        assert_eq!("LZF".parse(), Ok(Compression::Lzf));
        assert!("deflate:10".parse::<Compression>().is_err());
        assert!("deflate:x".parse::<Compression>().is_err());
        assert!("blosc".parse::<Compression>().is_err());
        for c in [Compression::None, Compression::Deflate(2), Compression::Lzf] {
            assert_eq!(c.to_string().parse(), Ok(c));
        }
    }
}
