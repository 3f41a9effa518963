//! Run-time compilation of the CUDA kernels with NVRTC, and the on-disk
//! cache of compiled cubins.
//!
//! Kernel parameters are baked into the source as `#define`s (the source
//! compiled is `#define NAME VALUE` lines followed by the `.cu` file), so each
//! configuration is its own cubin. Cubins are cached in
//! `$TOMORS_CUDA_CACHE`, else the platform's cache directory from `dirs`
//! (Linux: `$XDG_CACHE_HOME/tomors`, else `~/.cache/tomors`), in files keyed by the device name, the driver version
//! and a hash of the complete source and options (see [`cache_file_name`]).

use std::ffi::CString;
use std::path::{Path, PathBuf};

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

/// Cache file name for a compiled kernel: readable parts (kernel, device,
/// driver) plus a hash of everything that changes the binary.
pub fn cache_file_name(
    kernel: &str,
    device_name: &str,
    driver: i32,
    source: &str,
    options: &[String],
) -> String {
    let mut key = Vec::with_capacity(source.len() + 256);
    key.extend_from_slice(source.as_bytes());
    for o in options {
        key.push(0);
        key.extend_from_slice(o.as_bytes());
    }
    key.push(0);
    key.extend_from_slice(device_name.as_bytes());
    key.extend_from_slice(&driver.to_le_bytes());
    key.extend_from_slice(&nvrtc_version().unwrap_or((0, 0)).0.to_le_bytes());
    let dev: String = device_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let kern: String = kernel
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{kern}-{dev}-drv{driver}-{:016x}.cubin", fnv1a64(&key))
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

/// NVRTC's (major, minor) version.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    if !nvrtc_available() {
        return Err(CudaError::MissingLibrary("NVRTC (libnvrtc.so)"));
    }
    let (mut a, mut b) = (0, 0);
    // SAFETY: out-parameters.
    let r = unsafe { nv::nvrtcVersion(&mut a, &mut b) };
    if r != nv::nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::Compile {
            kernel: "nvrtcVersion".into(),
            log: format!("{r:?}"),
        });
    }
    Ok((a, b))
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

/// Writes `bytes` to `path` through a temporary name and a rename, so a
/// concurrent reader never sees a partial file.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// A cubin for `kernel` with `defines` on a device called `device_name` of
/// compute capability `cc` and driver `driver`: from the disk cache when
/// present, else compiled and stored. Returns the cubin and whether it came
/// from the cache.
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
    let file = cache_file_name(kernel, device_name, driver, &source, &options);
    let dir = cache_dir();
    if let Some(d) = &dir {
        let p = d.join(&file);
        if let Ok(bytes) = std::fs::read(&p) {
            // A cubin is an ELF file; anything else is a damaged entry.
            if bytes.len() > 4 && &bytes[..4] == b"\x7fELF" {
                return Ok((bytes, true));
            }
        }
    }
    let cubin = compile_cubin(kernel, &source, &options)?;
    if let Some(d) = &dir {
        if std::fs::create_dir_all(d).is_ok() {
            if let Err(e) = write_atomic(&d.join(&file), &cubin) {
                tracing::debug!("could not cache {file}: {e}");
            }
        }
    }
    Ok((cubin, false))
}
