// Header search for hsa-sys. Used by `build.rs` (as `mod headers`) and by `tests/headers.rs`,
// which feeds it fake environments and temporary directories. It reads no environment itself:
// the caller passes a lookup function, so the search is testable.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One set of headers that must be found together in one directory.
pub struct HeaderSet {
    /// Human name used in messages.
    pub what: &'static str,
    /// The header that locates the set; the directory holding it is the include directory.
    pub main: &'static str,
    /// Subdirectory of an include root that may hold `main` (`hsa` for `<root>/hsa/hsa.h`).
    pub subdir: &'static str,
    /// Every header the bindings need, `main` included; all must sit in the same directory.
    pub headers: &'static [&'static str],
    /// Variables naming a directory that holds `main` (or its parent), tried first, in order;
    /// `true` also tries the named directory's parent (`$HSA_INCLUDE_DIR/..` for the thunk,
    /// since `hsakmt.h` sits beside `hsa/`, not in it).
    pub env_vars: &'static [(&'static str, bool)],
    /// The Debian package that installs these headers.
    pub debian_package: &'static str,
}

/// ROCr, the HSA runtime (`libhsa-runtime64`).
pub const ROCR: HeaderSet = HeaderSet {
    what: "ROCr (HSA runtime)",
    main: "hsa.h",
    subdir: "hsa",
    headers: &[
        "hsa.h",
        "hsa_ext_amd.h",
        "hsa_api_trace.h",
        "amd_hsa_queue.h",
        "amd_hsa_signal.h",
        "amd_hsa_kernel_code.h",
        "hsa_ven_amd_loader.h",
    ],
    env_vars: &[("HSA_INCLUDE_DIR", false)],
    debian_package: "libhsa-runtime-dev",
};

/// ROCt, the KFD thunk (`libhsakmt`).
pub const HSAKMT: HeaderSet = HeaderSet {
    what: "ROCt (hsakmt thunk)",
    main: "hsakmt.h",
    subdir: "hsakmt",
    headers: &["hsakmt.h", "hsakmttypes.h"],
    env_vars: &[("HSAKMT_INCLUDE_DIR", false), ("HSA_INCLUDE_DIR", true)],
    debian_package: "libhsakmt-dev",
};

/// Variables that steer the search; `build.rs` emits `rerun-if-env-changed` for each.
pub const ENV_VARS: &[&str] =
    &["HSA_INCLUDE_DIR", "HSAKMT_INCLUDE_DIR", "ROCM_PATH", NO_SYSTEM_HEADERS];

/// Test-only switch: when set (to anything), the system locations below are not searched, so a
/// missing header can be provoked on a machine that has the Debian packages installed.
pub const NO_SYSTEM_HEADERS: &str = "XHSA_SYS_NO_SYSTEM_HEADERS";

/// Include roots searched after the environment: Debian's, then ROCm's default install prefix.
pub const SYSTEM_ROOTS: &[&str] = &["/usr/include", "/opt/rocm/include"];

/// A directory to look in, and why it is on the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub dir: PathBuf,
    pub origin: String,
}

/// The directories to search for `set`, in order. For each root `R` the search later tries
/// both `R/<main>` and `R/<subdir>/<main>`.
pub fn candidates(set: &HeaderSet, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<Candidate> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut out = Vec::new();
    for &(name, parent_too) in set.env_vars {
        let Some(dir) = var(name) else { continue };
        let parent = dir.parent().filter(|_| parent_too).map(Path::to_path_buf);
        out.push(Candidate { dir, origin: format!("${name}") });
        if let Some(dir) = parent {
            out.push(Candidate { dir, origin: format!("${name}/..") });
        }
    }
    if let Some(rocm) = var("ROCM_PATH") {
        out.push(Candidate { dir: rocm.join("include"), origin: "$ROCM_PATH/include".into() });
    }
    if var(NO_SYSTEM_HEADERS).is_none() {
        for root in SYSTEM_ROOTS {
            out.push(Candidate { dir: root.into(), origin: "system".into() });
        }
    }
    out
}

/// Finds the first directory holding every header of `set`. On failure, returns the message
/// `build.rs` panics with: the missing header, every directory tried, and how to fix it.
pub fn find(set: &HeaderSet, candidates: &[Candidate]) -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    // The most useful header to name: a companion missing next to a found `main`, else `main`.
    let mut missing = set.main;
    for cand in candidates {
        for dir in [cand.dir.clone(), cand.dir.join(set.subdir)] {
            match set.headers.iter().find(|h| !dir.join(h).is_file()) {
                None => return Ok(dir),
                Some(&h) => {
                    if h != set.main && missing == set.main {
                        missing = h;
                    }
                    tried.push((dir, cand.origin.clone(), h));
                }
            }
        }
    }
    Err(missing_message(set, missing, &tried))
}

fn missing_message(set: &HeaderSet, missing: &str, tried: &[(PathBuf, String, &str)]) -> String {
    let mut m = format!("hsa-sys: cannot find the {} header `{missing}`.\n", set.what);
    let _ = writeln!(m, "  Needed together in one directory: {}.", set.headers.join(", "));
    if tried.is_empty() {
        m.push_str(
            "  No directory was searched (no variable set and system locations disabled).\n",
        );
    } else {
        m.push_str("  Searched, in order:\n");
        for (dir, origin, h) in tried {
            let _ = writeln!(m, "    {:<40} ({origin}): no {h}", dir.display());
        }
    }
    let vars = set.env_vars.iter().map(|v| v.0).collect::<Vec<_>>().join(" or ");
    let _ = write!(
        m,
        "  Fix: install the Debian package `{pkg}` (apt-get install {pkg}), or set {vars} to the \
         directory holding {main} (or to its parent holding {sub}/{main}), or set ROCM_PATH to a \
         ROCm install (headers under $ROCM_PATH/include/{sub}/).",
        pkg = set.debian_package,
        main = set.main,
        sub = set.subdir,
    );
    m
}

/// Best-effort release of the package that provided the headers in `dir`: ROCm's
/// `<prefix>/.info/version` for a ROCm install, else the version dpkg records for the owning
/// Debian package, else `None`.
pub fn release_of(dir: &Path, main: &str) -> Option<String> {
    for prefix in dir.ancestors().skip(1).take(2) {
        if let Ok(v) = std::fs::read_to_string(prefix.join(".info/version")) {
            return Some(v.trim().to_string());
        }
    }
    let header = dir.join(main).canonicalize().ok()?;
    let owner = dpkg_query(&["-S".as_ref(), header.as_os_str()])?;
    let package = owner.split(':').next()?.trim().to_string();
    dpkg_query(&["-W".as_ref(), "-f=${Version}".as_ref(), package.as_ref()])
}

fn dpkg_query(args: &[&std::ffi::OsStr]) -> Option<String> {
    let out = std::process::Command::new("dpkg-query").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.lines().next()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
