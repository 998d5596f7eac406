//! Helpers shared by the integration tests: where cargo put the artefacts, and ELF inspection
//! through binutils (present wherever the project builds).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`: the directory holding the cdylibs and binaries of this build.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test-binary>
    exe.parent().and_then(Path::parent).expect("test binary lives in target/<profile>/deps").to_path_buf()
}

/// A library or binary cargo built: `target/<profile>/NAME`, or `deps/NAME` when only the
/// test build produced it.
pub fn artifact(name: &str) -> PathBuf {
    let dir = target_dir();
    let top = dir.join(name);
    if top.exists() {
        return top;
    }
    dir.join("deps").join(name)
}

/// Runs `readelf ARGS FILE` and returns its standard output.
pub fn readelf(args: &[&str], file: &Path) -> String {
    let out = Command::new("readelf").args(args).arg(file).output().expect("run readelf (binutils)");
    assert!(out.status.success(), "readelf {args:?} {} failed", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The dynamic symbols of an ELF file: the defined ones (with `defined`) or the undefined ones,
/// each with its version suffix stripped.
pub fn dynamic_symbols(file: &Path, defined: bool) -> BTreeSet<String> {
    let flag = if defined { "--defined-only" } else { "--undefined-only" };
    let out = Command::new("nm").args(["-D", flag]).arg(file).output().expect("run nm (binutils)");
    assert!(out.status.success(), "nm -D {}", file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|s| s.split('@').next().unwrap_or(s).to_string())
        .collect()
}
