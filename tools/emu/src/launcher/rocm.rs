//! Which ROCm userland a command runs on: the host's (Debian bookworm's ROCm 5.2, thunk as
//! `libhsakmt.so.1`, gfx90a) or the users' ROCm 6.4 in its own root (Debian sid's packages,
//! thunk inside ROCr), built by `./x setup` (tools/rocm64/setup.sh).

use std::fmt;
use std::path::PathBuf;

use crate::kfd::topology;

/// Where `./x setup` builds the ROCm 6.4 root unless `$XHSA_ROCM64_ROOT` names another place.
pub const DEFAULT_ROOT: &str = "/var/lib/xhsa/rocm-6.4";
/// Overrides [`DEFAULT_ROOT`] (read by the launcher and by tools/rocm64/setup.sh).
pub const ROOT_VAR: &str = "XHSA_ROCM64_ROOT";
/// Written last by the set-up script: a root without it is incomplete.
pub const READY_MARK: &str = ".xhsa-ready";

/// A ROCm userland `--rocm` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rocm {
    /// The host's ROCm 5.2 (the emulator's thunk stands in for `libhsakmt.so.1`).
    V5_2,
    /// ROCm 6.4 from its own root (the thunk is inside ROCr: the emulator answers at the
    /// `/dev/kfd`, DRM and sysfs level).
    V6_4,
}

impl Rocm {
    pub const ACCEPTED: &'static str =
        "accepted: 5.2 (the host's ROCm, default) or 6.4 (the ROCm 6.4 root)";

    pub fn parse(s: &str) -> Result<Rocm, String> {
        match s.trim() {
            "5.2" | "5" => Ok(Rocm::V5_2),
            "6.4" | "6" => Ok(Rocm::V6_4),
            other => Err(format!("unknown ROCm version {other:?}; {}", Rocm::ACCEPTED)),
        }
    }
}

impl fmt::Display for Rocm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rocm::V5_2 => "5.2",
            Rocm::V6_4 => "6.4",
        })
    }
}

/// An ISA `--isa` accepts, as (major, minor, stepping).
pub fn parse_isa(s: &str) -> Result<(u32, u32, u32), String> {
    match s.trim() {
        "gfx942" => Ok(topology::GFX942),
        "gfx90a" => Ok(topology::GFX_VERSION),
        other => Err(format!("unknown ISA {other:?}; accepted: gfx942 (the MI308X's own, default under --rocm 6.4) or gfx90a (Debian's precompiled rocBLAS, rocSPARSE, rocRAND and rocFFT kernels)")),
    }
}

/// The ISA the emulated GPUs report: gfx942 under 6.4 unless `--isa` says otherwise; under 5.2
/// always gfx90a (ROCr 5.2 and clang 15 cannot target gfx942).
pub fn isa(rocm: Rocm, flag: Option<(u32, u32, u32)>) -> Result<(u32, u32, u32), String> {
    match (rocm, flag) {
        (Rocm::V5_2, None | Some(topology::GFX_VERSION)) => Ok(topology::GFX_VERSION),
        (Rocm::V5_2, Some(_)) => {
            Err("--isa gfx942 needs --rocm 6.4: ROCm 5.2 (ROCr 5.2, clang 15) cannot target gfx942"
                .into())
        }
        (Rocm::V6_4, None) => Ok(topology::GFX942),
        (Rocm::V6_4, Some(g)) => Ok(g),
    }
}

/// The ROCm 6.4 root: `$XHSA_ROCM64_ROOT` or [`DEFAULT_ROOT`], checked complete.
pub fn root(var: Option<std::ffi::OsString>) -> Result<PathBuf, String> {
    let from_var = var.as_ref().is_some_and(|v| !v.is_empty());
    let root = var
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
    let how = if from_var { format!(" (from ${ROOT_VAR})") } else { String::new() };
    if !root.join(READY_MARK).is_file() {
        return Err(format!(
            "the ROCm 6.4 root at {}{how} is missing or incomplete (no {READY_MARK}); build it with `./x setup` (as root), or point ${ROOT_VAR} at one",
            root.display()
        ));
    }
    if !root.join("usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1").exists() {
        return Err(format!("the ROCm 6.4 root at {}{how} has no libhsa-runtime64.so.1; rebuild it with `./x setup`", root.display()));
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_isas() {
        assert_eq!(Rocm::parse("6.4").unwrap(), Rocm::V6_4);
        assert_eq!(Rocm::parse(" 5.2 ").unwrap(), Rocm::V5_2);
        assert!(Rocm::parse("6.3").unwrap_err().contains("accepted: 5.2"));
        assert_eq!(isa(Rocm::V6_4, None).unwrap(), (9, 4, 2));
        assert_eq!(isa(Rocm::V6_4, Some(parse_isa("gfx90a").unwrap())).unwrap(), (9, 0, 10));
        assert_eq!(isa(Rocm::V5_2, None).unwrap(), (9, 0, 10));
        assert!(isa(Rocm::V5_2, Some((9, 4, 2))).unwrap_err().contains("--rocm 6.4"));
        assert!(parse_isa("gfx1100").unwrap_err().contains("accepted: gfx942"));
    }

    #[test]
    fn a_root_without_its_mark_is_refused_by_name() {
        let d = std::env::temp_dir().join(format!("xhsa-root-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let e = root(Some(d.clone().into_os_string())).unwrap_err();
        assert!(e.contains(READY_MARK) && e.contains(ROOT_VAR) && e.contains("./x setup"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
