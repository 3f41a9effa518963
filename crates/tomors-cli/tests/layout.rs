//! The layout checks of issue 12 (`scripts/check-layout.sh`): no import
//! circle between the modules of `tomors-cuda` and `tomors-cli`, no file over
//! 800 lines in `tomors-cuda`; and the script itself finds a planted cycle
//! and a planted oversize file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check_layout(args: &[&str]) -> Output {
    let out = Command::new("bash")
        .arg(repo().join("scripts/check-layout.sh"))
        .args(args)
        .output()
        .expect("bash runs scripts/check-layout.sh");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_workspace_has_no_import_cycle_and_no_oversize_cuda_file() {
    let out = check_layout(&[]);
    let text = stdout(&out);
    assert!(out.status.success(), "check-layout failed:\n{text}");
    assert!(text.contains("tomors-cuda/src: "), "{text}");
    assert!(text.contains("tomors-cli/src: "), "{text}");
    assert_eq!(text.matches("no cycle").count(), 2, "{text}");
    assert!(text.contains("no .rs/.cu file over 800 lines"), "{text}");
}

#[test]
fn the_script_sees_the_layers_of_tomors_cuda() {
    // Edges the layout is built on: if the parser stopped seeing them, the
    // "no cycle" above would prove nothing.
    let out = check_layout(&["-v"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    for edge in [
        "edge in the crate root: iterative/ -> runtime/",
        "edge in the crate root: iterative/ -> fbp/",
        "edge in the crate root: cone/ -> fbp/",
        "edge in the crate root: fbp/ -> runtime/",
        "edge in iterative/: iterative/parallel/ -> iterative/device/",
        "edge in iterative/: iterative/cone/ -> iterative/run.rs",
        "edge in the crate root: config/ -> run/",
        "edge in the crate root: run/ -> job/",
        "edge in cmd/: cmd/recon.rs -> cmd/args.rs",
    ] {
        assert!(text.contains(edge), "missing '{edge}' in:\n{text}");
    }
}

/// Writes `files` (path, contents) under a fresh folder.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, body) in files {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }
    dir
}

#[test]
fn a_cycle_through_a_reexport_and_a_sibling_folder_is_found() {
    // a/ uses b/ through b's facade; b/inner.rs uses a/ through a path in
    // code (no `use`); strings and comments naming crate:: paths are not
    // edges.
    let t = tree(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        (
            "src/a/mod.rs",
            "mod x;\npub use x::X;\nuse crate::b::Y; // crate::c::Z\n",
        ),
        ("src/a/x.rs", "pub struct X;\n"),
        ("src/b/mod.rs", "mod inner;\npub use inner::Y;\n"),
        (
            "src/b/inner.rs",
            "pub struct Y;\nfn f() -> crate::a::X { let _s = \"crate::c::Z\"; crate::a::X }\n",
        ),
        ("src/c.rs", "pub struct Z;\n"),
    ]);
    let src = t.path().join("src");
    let out = check_layout(&[src.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("CYCLE in the crate root"), "{text}");
    assert!(
        text.contains("a/ -> b/") && text.contains("b/ -> a/"),
        "{text}"
    );
    assert!(
        !text.contains("c.rs"),
        "comment or string taken as an edge:\n{text}"
    );
}

#[test]
fn a_folder_file_and_its_children_may_use_each_other_but_siblings_may_not() {
    let ok = tree(&[
        ("src/lib.rs", "mod e;\n"),
        ("src/e/mod.rs", "mod p;\nmod q;\nstruct E { k: p::K }\n"),
        ("src/e/p.rs", "use super::*;\npub struct K;\nimpl E {}\n"),
        ("src/e/q.rs", "use super::p::K;\n"),
    ]);
    let src = ok.path().join("src");
    let out = check_layout(&[src.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));

    let bad = tree(&[
        ("src/lib.rs", "mod e;\n"),
        ("src/e/mod.rs", "mod p;\nmod q;\n"),
        ("src/e/p.rs", "use super::q::L;\npub struct K;\n"),
        (
            "src/e/q.rs",
            "pub struct L;\n#[cfg(test)]\nmod tests {\n    use super::super::p::K;\n}\n",
        ),
    ]);
    let src = bad.path().join("src");
    let out = check_layout(&[src.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("CYCLE in e/: "), "{text}");
}

#[test]
fn an_oversize_file_fails() {
    let long = "// line\n".repeat(12);
    let t = tree(&[("src/lib.rs", "mod a;\n"), ("src/a.rs", &long)]);
    let src = t.path().join("src");
    let out = check_layout(&[
        "--max-lines",
        "10",
        "--sizes",
        t.path().to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("a.rs: OVERSIZE: 12 lines (limit 10)"),
        "{text}"
    );
    assert!(text.contains("no cycle"), "{text}");
}
