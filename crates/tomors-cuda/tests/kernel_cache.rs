//! The on-disk cubin cache without NVRTC or a GPU: the key covers every
//! input, entries survive concurrent writers (threads and processes) whole,
//! and a truncated, damaged or foreign entry is recompiled, never loaded.
//! Fake "cubins" (an ELF magic plus pseudo-random bytes) stand in for NVRTC output.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use tomors_cuda::compile::{cached_or_compile, read_entry, write_entry, CacheKey, CacheMiss};

/// A fake cubin of `len` bytes: ELF magic, then bytes derived from `seed`.
fn fake_cubin(seed: u64, len: usize) -> Vec<u8> {
    let mut v = b"\x7fELF".to_vec();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.push((s >> 32) as u8);
    }
    v
}

fn options() -> Vec<String> {
    vec![
        "--gpu-architecture=sm_90".to_string(),
        "--std=c++17".to_string(),
    ]
}

fn base_key(options: &[String]) -> CacheKey<'_> {
    CacheKey {
        kernel: "backproject",
        source: "#define NX 64\n#line 1\nkernel source",
        options,
        device_name: "NVIDIA H200",
        cc: (9, 0),
        nvrtc: (12, 8),
        driver: 13000,
    }
}

/// The temporary files a writer may leave behind (none expected).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn key_changes_with_each_component() {
    let o = options();
    let base = base_key(&o);
    assert_eq!(base.hash(), base_key(&o).hash());
    assert_eq!(base.file_name(), base_key(&o).file_name());
    let name = base.file_name();
    assert!(name.starts_with("backproject-NVIDIA_H200-drv13000-sm90-"));
    assert!(name.ends_with(".cubin"));
    assert!(name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
    let o2 = vec!["--gpu-architecture=sm_90".to_string()];
    let o3 = vec![
        "--gpu-architecture=sm_90".to_string(),
        "--std=c++17".to_string(),
        "-I/usr/local/cuda-13/include".to_string(),
    ];
    // Option boundaries matter: ["a", "bc"] is not ["ab", "c"].
    let o4 = vec![
        "--gpu-architecture=sm_90--std=c++17".to_string(),
        String::new(),
    ];
    let variants = [
        CacheKey {
            kernel: "filter",
            ..base.clone()
        },
        CacheKey {
            source: "#define NX 65\n#line 1\nkernel source",
            ..base.clone()
        },
        CacheKey {
            options: &o2,
            ..base.clone()
        },
        CacheKey {
            options: &o3,
            ..base.clone()
        },
        CacheKey {
            options: &o4,
            ..base.clone()
        },
        CacheKey {
            device_name: "NVIDIA H100 80GB HBM3",
            ..base.clone()
        },
        CacheKey {
            cc: (9, 1),
            ..base.clone()
        },
        CacheKey {
            cc: (10, 0),
            ..base.clone()
        },
        CacheKey {
            nvrtc: (12, 9),
            ..base.clone()
        },
        CacheKey {
            nvrtc: (13, 8),
            ..base.clone()
        },
        CacheKey {
            driver: 13010,
            ..base.clone()
        },
    ];
    let mut hashes: Vec<u64> = variants.iter().map(CacheKey::hash).collect();
    hashes.push(base.hash());
    let n = hashes.len();
    hashes.sort_unstable();
    hashes.dedup();
    assert_eq!(hashes.len(), n, "two different keys share a hash");
    for v in &variants {
        assert_ne!(v.file_name(), name, "{v:?}");
    }
}

#[test]
fn entry_round_trip_and_every_damage_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k.cubin");
    let cubin = fake_cubin(1, 5000);
    assert_eq!(read_entry(&p, 7), Err(CacheMiss::Absent));
    write_entry(&p, 7, &cubin).unwrap();
    assert_eq!(read_entry(&p, 7).unwrap(), cubin);
    assert_eq!(read_entry(&p, 8), Err(CacheMiss::OtherKey));
    let whole = std::fs::read(&p).unwrap();
    assert_eq!(whole.len(), cubin.len() + 32);
    // Truncated at any point: header, payload, one byte short.
    for cut in [0, 4, 20, 31, 32, 100, whole.len() - 1] {
        std::fs::write(&p, &whole[..cut]).unwrap();
        assert!(
            matches!(read_entry(&p, 7), Err(CacheMiss::Corrupt(_))),
            "cut at {cut}"
        );
    }
    // One byte too many.
    let mut longer = whole.clone();
    longer.push(0);
    std::fs::write(&p, &longer).unwrap();
    assert!(matches!(read_entry(&p, 7), Err(CacheMiss::Corrupt(_))));
    // One flipped bit anywhere in the payload.
    for at in [32, 33, 1000, whole.len() - 1] {
        let mut bad = whole.clone();
        bad[at] ^= 0x10;
        std::fs::write(&p, &bad).unwrap();
        assert!(
            matches!(read_entry(&p, 7), Err(CacheMiss::Corrupt(_))),
            "flip at {at}"
        );
    }
    // A bare cubin (the old cache format) is not taken either.
    std::fs::write(&p, &cubin).unwrap();
    assert!(matches!(read_entry(&p, 7), Err(CacheMiss::Corrupt(_))));
    // An intact entry whose payload is not an ELF image.
    write_entry(&p, 7, b"not a cubin at all").unwrap();
    assert!(matches!(read_entry(&p, 7), Err(CacheMiss::Corrupt(_))));
}

#[test]
fn compile_once_then_load_and_recompile_damaged_entries() {
    let dir = tempfile::tempdir().unwrap();
    let o = options();
    let key = base_key(&o);
    let calls = AtomicUsize::new(0);
    let compile = || {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(fake_cubin(42, 3000))
    };
    let (a, hit) = cached_or_compile(Some(dir.path()), &key, compile).unwrap();
    assert!(!hit);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let (b, hit) = cached_or_compile(Some(dir.path()), &key, compile).unwrap();
    assert!(hit);
    assert_eq!(a, b);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "a cached module was compiled"
    );
    // Truncate the entry: the next call recompiles and repairs it.
    let p = dir.path().join(key.file_name());
    let len = std::fs::metadata(&p).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let (c, hit) = cached_or_compile(Some(dir.path()), &key, compile).unwrap();
    assert!(!hit);
    assert_eq!(c, a);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(read_entry(&p, key.hash()).unwrap(), a, "entry not repaired");
    // Any change of the key misses the old entry.
    let other = CacheKey {
        driver: key.driver + 10,
        ..key.clone()
    };
    let (_, hit) = cached_or_compile(Some(dir.path()), &other, compile).unwrap();
    assert!(!hit);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // A compile error is returned and nothing is stored.
    let third = CacheKey {
        kernel: "linalg",
        ..key.clone()
    };
    let err = cached_or_compile(Some(dir.path()), &third, || {
        Err(tomors_cuda::CudaError::Parameter("boom".into()))
    });
    assert!(err.is_err());
    assert!(!dir.path().join(third.file_name()).exists());
    // No directory: compiles every time, stores nothing.
    let (_, hit) = cached_or_compile(None, &key, compile).unwrap();
    assert!(!hit);
    // The cache directory is created when missing.
    let nested = dir.path().join("a/b");
    cached_or_compile(Some(&nested), &key, compile).unwrap();
    assert!(read_entry(&nested.join(key.file_name()), key.hash()).is_ok());
    assert!(leftovers(dir.path()).is_empty());
}

/// Writes `rounds` entries of a large fake cubin (seed-dependent) to `path`.
fn hammer(path: &Path, key: u64, seed: u64, rounds: usize) {
    let cubin = fake_cubin(seed, 1 << 20);
    for _ in 0..rounds {
        write_entry(path, key, &cubin).unwrap();
    }
}

/// Reads `path` `rounds` times: every read is either absent (before the
/// first rename) or one complete writer's payload.
fn check_reads(path: &Path, key: u64, seeds: &[u64], rounds: usize) -> usize {
    let valid: Vec<Vec<u8>> = seeds.iter().map(|&s| fake_cubin(s, 1 << 20)).collect();
    let mut seen = 0;
    for _ in 0..rounds {
        match read_entry(path, key) {
            Ok(b) => {
                assert!(valid.contains(&b), "a read returned a mixed payload");
                seen += 1;
            }
            Err(CacheMiss::Absent) => {}
            Err(e) => panic!("a reader saw a partial entry: {e:?}"),
        }
    }
    seen
}

#[test]
fn concurrent_thread_writers_leave_one_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shared.cubin");
    let seeds = [1u64, 2, 3, 4, 5, 6];
    std::thread::scope(|s| {
        for &seed in &seeds {
            let p = &p;
            s.spawn(move || hammer(p, 99, seed, 20));
        }
        s.spawn(|| check_reads(&p, 99, &seeds, 200));
    });
    let b = read_entry(&p, 99).expect("one valid file at the end");
    assert!(seeds.iter().any(|&s| b == fake_cubin(s, 1 << 20)));
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// Child half of the two-process test: runs only when the parent sets the
/// variables (as a plain test it returns at once).
#[test]
fn child_process_writer() {
    let (Ok(path), Ok(seed)) = (
        std::env::var("TOMORS_CACHE_TEST_PATH"),
        std::env::var("TOMORS_CACHE_TEST_SEED"),
    ) else {
        return;
    };
    hammer(Path::new(&path), 99, seed.parse().unwrap(), 30);
}

#[test]
fn concurrent_process_writers_leave_one_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shared.cubin");
    let exe = std::env::current_exe().unwrap();
    let seeds = [11u64, 12];
    let children: Vec<_> = seeds
        .iter()
        .map(|seed| {
            Command::new(&exe)
                .args(["--exact", "child_process_writer", "--test-threads=1"])
                .env("TOMORS_CACHE_TEST_PATH", &p)
                .env("TOMORS_CACHE_TEST_SEED", seed.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    check_reads(&p, 99, &seeds, 300);
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a writer process failed");
    }
    let b = read_entry(&p, 99).expect("one valid file at the end");
    assert!(seeds.iter().any(|&s| b == fake_cubin(s, 1 << 20)));
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
