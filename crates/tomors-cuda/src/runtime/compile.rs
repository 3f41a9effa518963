//! Run-time compilation of the CUDA kernels with NVRTC, and the on-disk
//! cache of compiled cubins.
//!
//! Kernel parameters are baked into the source as `#define`s (the source
//! compiled is `#define NAME VALUE` lines followed by the `.cu` file), so each
//! configuration is its own cubin. Cubins are cached in
//! `$TOMORS_CUDA_CACHE`, else the platform's cache directory from `dirs`
//! (Linux: `$XDG_CACHE_HOME/tomors`, else `~/.cache/tomors`), in files keyed by a hash of the complete source, the NVRTC
//! options, the device (name and compute capability), the NVRTC version and
//! the driver version ([`CacheKey`]). Each file carries a header (key hash,
//! payload length and hash) checked on read, so a truncated or damaged entry
//! is recompiled, never loaded; entries are written through a unique
//! temporary file and a rename, so concurrent processes are safe.

use std::ffi::CString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::nvrtc::{result as nvrtc, sys as nv};

use crate::error::{CudaError, Result};

/// 64-bit FNV-1a hash: stable across runs, platforms and compiler versions
/// (unlike `std`'s `DefaultHasher`), so it can name cache files.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The complete source handed to NVRTC: one `#define` per parameter, then the kernel file.
pub fn build_source(defines: &[(String, String)], code: &str) -> String {
    let mut s = String::with_capacity(code.len() + 64 * defines.len());
    for (k, v) in defines {
        s.push_str("#define ");
        s.push_str(k);
        s.push(' ');
        s.push_str(v);
        s.push('\n');
    }
    s.push_str("#line 1\n");
    s.push_str(code);
    s
}

/// Where `cuda_fp16.h` and friends are looked for: `$TOMORS_CUDA_INCLUDE`,
/// else `/usr/local/cuda/include`.
pub fn include_dir() -> Option<PathBuf> {
    let p = std::env::var_os("TOMORS_CUDA_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/cuda/include"));
    p.is_dir().then_some(p)
}

/// NVRTC options for a device of compute capability `cc`. NVRTC optimises by
/// default (it rejects `-O3`).
pub fn nvrtc_options(cc: (i32, i32)) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture=sm_{}{}", cc.0, cc.1),
        "--std=c++17".to_string(),
    ];
    if let Some(inc) = include_dir() {
        o.push(format!("-I{}", inc.display()));
    }
    o
}

/// Everything that changes a compiled kernel: the key of its cache entry.
///
/// The file name holds readable parts (kernel, device, driver) and a 64-bit
/// hash of every field; the same hash is stored in the file's header and
/// checked on read, so a renamed or colliding file is not taken for another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey<'a> {
    /// Kernel file name (e.g. `backproject`).
    pub kernel: &'a str,
    /// The complete source compiled (defines included, see [`build_source`]).
    pub source: &'a str,
    /// NVRTC options (see [`nvrtc_options`]).
    pub options: &'a [String],
    /// Device name as the driver reports it.
    pub device_name: &'a str,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    /// NVRTC's (major, minor) version ((0, 0) when unknown).
    pub nvrtc: (i32, i32),
    /// Driver version (e.g. 13000).
    pub driver: i32,
}

impl CacheKey<'_> {
    /// The 64-bit hash of every field (length-prefixed, so no two different
    /// keys serialise to the same bytes).
    pub fn hash(&self) -> u64 {
        let mut key = Vec::with_capacity(self.source.len() + 256);
        let mut field = |b: &[u8]| {
            key.extend_from_slice(&(b.len() as u64).to_le_bytes());
            key.extend_from_slice(b);
        };
        field(b"tomors-cubin-key-v2");
        field(self.kernel.as_bytes());
        field(self.source.as_bytes());
        field(&(self.options.len() as u64).to_le_bytes());
        for o in self.options {
            field(o.as_bytes());
        }
        field(self.device_name.as_bytes());
        field(&self.cc.0.to_le_bytes());
        field(&self.cc.1.to_le_bytes());
        field(&self.nvrtc.0.to_le_bytes());
        field(&self.nvrtc.1.to_le_bytes());
        field(&self.driver.to_le_bytes());
        fnv1a64(&key)
    }

    /// The cache file name: `KERNEL-DEVICE-drvN-smXY-HASH.cubin`, with every
    /// character outside `[A-Za-z0-9]` of the kernel and device names
    /// replaced by `_`.
    pub fn file_name(&self) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect()
        };
        format!(
            "{}-{}-drv{}-sm{}{}-{:016x}.cubin",
            clean(self.kernel),
            clean(self.device_name),
            self.driver,
            self.cc.0,
            self.cc.1,
            self.hash()
        )
    }
}

/// Cache file name for a compiled kernel with this process's NVRTC version
/// and the compute capability read from the `--gpu-architecture=sm_XY`
/// option (see [`CacheKey::file_name`]).
pub fn cache_file_name(
    kernel: &str,
    device_name: &str,
    driver: i32,
    source: &str,
    options: &[String],
) -> String {
    let cc = options
        .iter()
        .find_map(|o| o.strip_prefix("--gpu-architecture=sm_"))
        .and_then(|a| {
            let (maj, min) = a.split_at(a.len().saturating_sub(1));
            Some((maj.parse().ok()?, min.parse().ok()?))
        })
        .unwrap_or((0, 0));
    CacheKey {
        kernel,
        source,
        options,
        device_name,
        cc,
        nvrtc: nvrtc_version().unwrap_or((0, 0)),
        driver,
    }
    .file_name()
}

/// The cache directory (created on first use): `$TOMORS_CUDA_CACHE`, else
/// `tomors` in the platform's cache directory (`dirs::cache_dir`); `None`
/// when no home is known.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TOMORS_CUDA_CACHE") {
        return Some(PathBuf::from(p));
    }
    dirs::cache_dir().map(|d| d.join("tomors"))
}

/// Whether the NVRTC library can be loaded.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { nv::is_culib_present() }
}

/// NVRTC's (major, minor) version (asked once per process).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    static VERSION: std::sync::OnceLock<Option<(i32, i32)>> = std::sync::OnceLock::new();
    if !nvrtc_available() {
        return Err(CudaError::MissingLibrary("NVRTC (libnvrtc.so)"));
    }
    let v = VERSION.get_or_init(|| {
        let (mut a, mut b) = (0, 0);
        // SAFETY: out-parameters.
        let r = unsafe { nv::nvrtcVersion(&mut a, &mut b) };
        (r == nv::nvrtcResult::NVRTC_SUCCESS).then_some((a, b))
    });
    v.ok_or_else(|| CudaError::Compile {
        kernel: "nvrtcVersion".into(),
        log: "nvrtcVersion failed".into(),
    })
}

fn nv_check(r: nv::nvrtcResult, kernel: &str, what: &str) -> Result<()> {
    if r == nv::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Compile {
            kernel: kernel.to_string(),
            log: format!("{what}: {r:?}"),
        })
    }
}

/// An NVRTC program, destroyed on drop.
struct Program(nv::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtc::create_program, destroyed once.
        unsafe {
            let _ = nvrtc::destroy_program(self.0);
        }
    }
}

/// Compiles `source` to a cubin with NVRTC (needs no GPU, only libnvrtc).
///
/// Program creation, compilation and the log go through cudarc's checked
/// NVRTC layer; the cubin is read with raw calls, as cudarc only returns PTX.
pub fn compile_cubin(kernel: &str, source: &str, options: &[String]) -> Result<Vec<u8>> {
    if !nvrtc_available() {
        return Err(CudaError::MissingLibrary("NVRTC (libnvrtc.so)"));
    }
    let src =
        CString::new(source).map_err(|_| CudaError::Parameter("NUL in kernel source".into()))?;
    let name = CString::new(format!("{kernel}.cu"))
        .map_err(|_| CudaError::Parameter(format!("NUL in kernel name {kernel:?}")))?;
    if let Some(o) = options.iter().find(|o| o.contains('\0')) {
        return Err(CudaError::Parameter(format!("NUL in NVRTC option {o:?}")));
    }
    let prog = Program(
        nvrtc::create_program(&src, Some(&name))
            .map_err(|e| nv_check(e.0, kernel, "nvrtcCreateProgram").unwrap_err())?,
    );
    // SAFETY: `prog` is a live program; the options hold no NUL (checked).
    let r = unsafe { nvrtc::compile_program(prog.0, options) };
    // SAFETY: as above.
    let log = unsafe { nvrtc::get_program_log(prog.0) }
        .ok()
        .map(|l| {
            let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    if let Err(e) = r {
        return Err(CudaError::Compile {
            kernel: kernel.to_string(),
            log: format!("{:?} with options {options:?}\n{log}", e.0),
        });
    }
    if !log.trim().is_empty() {
        tracing::debug!("NVRTC log for {kernel}: {log}");
    }
    let mut size = 0usize;
    // SAFETY: out-parameter on a compiled program.
    nv_check(
        unsafe { nv::nvrtcGetCUBINSize(prog.0, &mut size) },
        kernel,
        "nvrtcGetCUBINSize",
    )?;
    let mut cubin = vec![0u8; size];
    // SAFETY: the buffer holds the size NVRTC reported.
    nv_check(
        unsafe { nv::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr() as *mut std::ffi::c_char) },
        kernel,
        "nvrtcGetCUBIN",
    )?;
    if cubin.is_empty() {
        return Err(CudaError::Compile {
            kernel: kernel.to_string(),
            log: "NVRTC returned an empty cubin (is the architecture a real sm_XX?)".into(),
        });
    }
    Ok(cubin)
}

/// How many modules this process took from the disk cache and how many it
/// compiled (see [`cache_stats`]).
static LOADED: AtomicUsize = AtomicUsize::new(0);
static COMPILED: AtomicUsize = AtomicUsize::new(0);

/// (modules loaded from the disk cache, modules compiled) in this process so far.
pub fn cache_stats() -> (usize, usize) {
    (
        LOADED.load(Ordering::Relaxed),
        COMPILED.load(Ordering::Relaxed),
    )
}

/// The one-line summary the CLI logs at the end of a run, or `None` when no
/// kernel was needed: `kernel cache: N modules loaded from cache, M compiled (DIR)`.
pub fn cache_summary() -> Option<String> {
    let (loaded, compiled) = cache_stats();
    if loaded + compiled == 0 {
        return None;
    }
    let dir = cache_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "no cache directory".into());
    Some(format!(
        "kernel cache: {loaded} modules loaded from cache, {compiled} compiled ({dir})"
    ))
}

/// Magic bytes at the start of a cache file (format version 2).
const MAGIC: &[u8; 8] = b"TMRSCUB2";
/// Header: magic, key hash, payload length, payload hash (all little endian).
const HEADER: usize = 8 + 8 + 8 + 8;

/// Why a cache file was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheMiss {
    /// No such file (or it could not be read).
    Absent,
    /// The file is shorter than its header says, longer, or its payload hash
    /// differs: truncated or damaged.
    Corrupt(String),
    /// The file belongs to another key (hash collision or a renamed file).
    OtherKey,
}

/// Reads the cache entry at `path` for the key hashed `key_hash`: the cubin
/// when the file is complete, intact, for this key and an ELF image.
pub fn read_entry(path: &Path, key_hash: u64) -> std::result::Result<Vec<u8>, CacheMiss> {
    let bytes = std::fs::read(path).map_err(|_| CacheMiss::Absent)?;
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(CacheMiss::Corrupt("no tomors cubin header".into()));
    }
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    if word(8) != key_hash {
        return Err(CacheMiss::OtherKey);
    }
    let (len, hash) = (word(16), word(24));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(CacheMiss::Corrupt(format!(
            "{} payload bytes, header says {len}",
            payload.len()
        )));
    }
    if fnv1a64(payload) != hash {
        return Err(CacheMiss::Corrupt("payload hash mismatch".into()));
    }
    // A cubin is an ELF file.
    if payload.len() < 4 || &payload[..4] != b"\x7fELF" {
        return Err(CacheMiss::Corrupt("payload is not an ELF image".into()));
    }
    Ok(payload.to_vec())
}

/// Writes the cache entry for `key_hash` with `cubin` to `path` atomically:
/// into a uniquely named temporary file in the same directory (so concurrent
/// threads and processes never share one), flushed to disk, then renamed
/// over `path`. A reader sees the old file, no file, or the complete new one.
pub fn write_entry(path: &Path, key_hash: u64, cubin: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".cubin-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    let mut head = Vec::with_capacity(HEADER);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&key_hash.to_le_bytes());
    head.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    head.extend_from_slice(&fnv1a64(cubin).to_le_bytes());
    tmp.write_all(&head)?;
    tmp.write_all(cubin)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The cubin for `key` from the cache directory `dir` when a valid entry is
/// there, else from `compile` (then stored; a failure to store is logged,
/// not returned). Returns the cubin and whether it came from the cache.
/// A damaged or foreign entry is logged and replaced.
pub fn cached_or_compile(
    dir: Option<&Path>,
    key: &CacheKey<'_>,
    compile: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<(Vec<u8>, bool)> {
    let (file, hash) = (key.file_name(), key.hash());
    if let Some(d) = dir {
        match read_entry(&d.join(&file), hash) {
            Ok(cubin) => {
                LOADED.fetch_add(1, Ordering::Relaxed);
                return Ok((cubin, true));
            }
            Err(CacheMiss::Absent) => {}
            Err(why) => {
                tracing::warn!("kernel cache entry {file} unusable ({why:?}): recompiling")
            }
        }
    }
    let cubin = compile()?;
    COMPILED.fetch_add(1, Ordering::Relaxed);
    if let Some(d) = dir {
        let stored =
            std::fs::create_dir_all(d).and_then(|_| write_entry(&d.join(&file), hash, &cubin));
        if let Err(e) = stored {
            tracing::debug!("could not cache {file} in {}: {e}", d.display());
        }
    }
    Ok((cubin, false))
}

/// A cubin for `kernel` with `defines` on a device called `device_name` of
/// compute capability `cc` and driver `driver`: from the disk cache when
/// present and intact, else compiled and stored. Returns the cubin and
/// whether it came from the cache.
pub fn cubin_cached(
    kernel: &str,
    code: &str,
    defines: &[(String, String)],
    device_name: &str,
    cc: (i32, i32),
    driver: i32,
) -> Result<(Vec<u8>, bool)> {
    let source = build_source(defines, code);
    let options = nvrtc_options(cc);
    let key = CacheKey {
        kernel,
        source: &source,
        options: &options,
        device_name,
        cc,
        nvrtc: nvrtc_version().unwrap_or((0, 0)),
        driver,
    };
    cached_or_compile(cache_dir().as_deref(), &key, || {
        compile_cubin(kernel, &source, &options)
    })
}
