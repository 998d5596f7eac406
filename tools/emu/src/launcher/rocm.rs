//! Which ROCm userland a command runs on: the host's (Debian bookworm's ROCm 5.2, thunk as
//! `libhsakmt.so.1`, gfx90a), or the users' ROCm 6.4 or 7.2 in its own root (Debian sid's and
//! experimental's packages, thunk inside ROCr), built by `./x setup` (tools/rocm64/setup.sh,
//! tools/rocm72/setup.sh).

use std::fmt;
use std::path::PathBuf;

use crate::kfd::topology;

/// Where `./x setup` builds the ROCm 6.4 root unless `$XHSA_ROCM64_ROOT` names another place.
pub const DEFAULT_ROOT: &str = "/var/lib/xhsa/rocm-6.4";
/// Overrides [`DEFAULT_ROOT`] (read by the launcher and by tools/rocm64/setup.sh).
pub const ROOT_VAR: &str = "XHSA_ROCM64_ROOT";
/// Where `./x setup` builds the ROCm 7.2 root unless `$XHSA_ROCM72_ROOT` names another place.
pub const DEFAULT_ROOT_72: &str = "/var/lib/xhsa/rocm-7.2";
/// Overrides [`DEFAULT_ROOT_72`] (read by the launcher and by tools/rocm72/setup.sh).
pub const ROOT_VAR_72: &str = "XHSA_ROCM72_ROOT";
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
    /// ROCm 7.2 from its own root (Debian experimental's; as 6.4, the thunk is inside ROCr).
    V7_2,
}

impl Rocm {
    pub const ACCEPTED: &'static str = "accepted: 5.2 (the host's ROCm, default), 6.4 (the ROCm 6.4 root) or 7.2 (the ROCm 7.2 root)";

    pub fn parse(s: &str) -> Result<Rocm, String> {
        match s.trim() {
            "5.2" | "5" => Ok(Rocm::V5_2),
            "6.4" | "6" => Ok(Rocm::V6_4),
            "7.2" | "7" => Ok(Rocm::V7_2),
            other => Err(format!("unknown ROCm version {other:?}; {}", Rocm::ACCEPTED)),
        }
    }

    /// The root's default place and the variable that overrides it; None for the host's 5.2.
    pub fn root_place(self) -> Option<(&'static str, &'static str)> {
        match self {
            Rocm::V5_2 => None,
            Rocm::V6_4 => Some((DEFAULT_ROOT, ROOT_VAR)),
            Rocm::V7_2 => Some((DEFAULT_ROOT_72, ROOT_VAR_72)),
        }
    }
}

impl fmt::Display for Rocm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rocm::V5_2 => "5.2",
            Rocm::V6_4 => "6.4",
            Rocm::V7_2 => "7.2",
        })
    }
}

/// An ISA `--isa` accepts, as (major, minor, stepping).
pub fn parse_isa(s: &str) -> Result<(u32, u32, u32), String> {
    match s.trim() {
        "gfx942" => Ok(topology::GFX942),
        "gfx90a" => Ok(topology::GFX_VERSION),
        other => Err(format!("unknown ISA {other:?}; accepted: gfx942 (the MI308X's own, default under --rocm 6.4 and 7.2) or gfx90a (Debian's precompiled rocBLAS, rocSPARSE, rocRAND and rocFFT kernels)")),
    }
}

/// The ISA the emulated GPUs report: gfx942 under 6.4 and 7.2 unless `--isa` says otherwise;
/// under 5.2 always gfx90a (ROCr 5.2 and clang 15 cannot target gfx942).
pub fn isa(rocm: Rocm, flag: Option<(u32, u32, u32)>) -> Result<(u32, u32, u32), String> {
    match (rocm, flag) {
        (Rocm::V5_2, None | Some(topology::GFX_VERSION)) => Ok(topology::GFX_VERSION),
        (Rocm::V5_2, Some(_)) => {
            Err("--isa gfx942 needs --rocm 6.4 or 7.2: ROCm 5.2 (ROCr 5.2, clang 15) cannot target gfx942"
                .into())
        }
        (Rocm::V6_4 | Rocm::V7_2, None) => Ok(topology::GFX942),
        (Rocm::V6_4 | Rocm::V7_2, Some(g)) => Ok(g),
    }
}

/// [`root`] with `rocm`'s variable read from this process's environment.
pub fn root_from_env(rocm: Rocm) -> Result<PathBuf, String> {
    root(rocm, rocm.root_place().and_then(|(_, var)| std::env::var_os(var)))
}

/// The root of ROCm `rocm` (6.4 or 7.2): its variable's value (`var`, read by the caller) or its
/// default place, checked complete.
pub fn root(rocm: Rocm, var: Option<std::ffi::OsString>) -> Result<PathBuf, String> {
    let Some((default, name)) = rocm.root_place() else {
        return Err(format!("ROCm {rocm} is the host's: it has no root"));
    };
    let from_var = var.as_ref().is_some_and(|v| !v.is_empty());
    let root = var.filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| default.into());
    let how = if from_var { format!(" (from ${name})") } else { String::new() };
    if !root.join(READY_MARK).is_file() {
        return Err(format!(
            "the ROCm {rocm} root at {}{how} is missing or incomplete (no {READY_MARK}); build it with `./x setup` (as root), or point ${name} at one",
            root.display()
        ));
    }
    if !root.join("usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1").exists() {
        return Err(format!("the ROCm {rocm} root at {}{how} has no libhsa-runtime64.so.1; rebuild it with `./x setup`", root.display()));
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
        assert_eq!(Rocm::parse("7.2").unwrap(), Rocm::V7_2);
        let e = Rocm::parse("6.3").unwrap_err();
        assert!(e.contains("accepted: 5.2") && e.contains("6.4") && e.contains("7.2"), "{e}");
        assert_eq!(isa(Rocm::V7_2, None).unwrap(), (9, 4, 2));
        assert_eq!(isa(Rocm::V7_2, Some((9, 0, 10))).unwrap(), (9, 0, 10));
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
        let e = root(Rocm::V6_4, Some(d.clone().into_os_string())).unwrap_err();
        assert!(e.contains(READY_MARK) && e.contains(ROOT_VAR) && e.contains("./x setup"), "{e}");
        let e = root(Rocm::V7_2, Some(d.clone().into_os_string())).unwrap_err();
        assert!(
            e.contains("ROCm 7.2") && e.contains(ROOT_VAR_72) && e.contains("./x setup"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
