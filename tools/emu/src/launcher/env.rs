//! The environment contract between the launcher and the thunk.
//!
//! CMD inherits the launcher's environment with these changes:
//!
//! | variable | value |
//! |---|---|
//! | `LD_LIBRARY_PATH` | `<rt>/lib[:old]`: ROCr's `DT_NEEDED libhsakmt.so.1` resolves to the emulator |
//! | `LD_PRELOAD` | `[old:]<rt>/lib/libhsakmt.so.1`: ours after the user's interposers (libxhsa.so first) |
//! | `PATH` | `<rt>/bin:old`: the `lsmod` rocminfo runs |
//! | `XHSA_EMU_GPUS` | `N` (always) |
//! | `XHSA_EMU_TIME_SCALE` | `X`, only when `--time-scale` is given |
//! | `XHSA_EMU_CONFIG` | absolute path of the config, only when one is in effect |
//! | `XHSA_EMU_ISA` | the ISA the emulated GPUs report (`gfx90a`, `gfx942`): kernel code the loader's list does not name is executed as this ISA |
//!
//! Nothing is filtered: `XHSA_EMU_FAULT` (injected preemption faults, `kfd::fault`),
//! `XHSA_EMU_LOG` and `XHSA_EMU_DEVICE_DIR` reach CMD's processes as the user set them.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use super::runtime_dir::RuntimeDir;

pub const GPUS: &str = "XHSA_EMU_GPUS";
pub const TIME_SCALE: &str = "XHSA_EMU_TIME_SCALE";
pub const CONFIG: &str = "XHSA_EMU_CONFIG";
pub const ISA: &str = "XHSA_EMU_ISA";
/// Path of the thunk .so the launcher puts under ROCr (read by the launcher only).
pub const THUNK: &str = "XHSA_EMU_THUNK";

/// `PATH` when the launcher's own is unset (glibc's default search path, as execvp uses).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What the command line chose.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub gpus: u32,
    pub time_scale: Option<f64>,
    /// Absolute path of the config in effect.
    pub config: Option<PathBuf>,
    /// The ISA the emulated GPUs report (`gfx90a`, `gfx942`).
    pub isa: String,
}

/// The variables to set in CMD's environment (everything else is inherited); `old` reads the
/// launcher's environment.
pub fn child_env(
    rt: &RuntimeDir,
    s: &Settings,
    old: impl Fn(&str) -> Option<OsString>,
) -> Vec<(OsString, OsString)> {
    let nonempty = |k: &str| old(k).filter(|v| !v.is_empty());
    let mut out = vec![
        (
            "LD_LIBRARY_PATH".into(),
            prepend(rt.lib_dir().as_os_str(), nonempty("LD_LIBRARY_PATH").as_deref()),
        ),
        (
            "LD_PRELOAD".into(),
            append(nonempty("LD_PRELOAD").as_deref(), rt.thunk_link().as_os_str()),
        ),
        (
            "PATH".into(),
            prepend(
                rt.bin_dir().as_os_str(),
                Some(nonempty("PATH").as_deref().unwrap_or(OsStr::new(DEFAULT_PATH))),
            ),
        ),
        (GPUS.into(), s.gpus.to_string().into()),
        (ISA.into(), s.isa.clone().into()),
    ];
    if let Some(x) = s.time_scale {
        out.push((TIME_SCALE.into(), x.to_string().into()));
    }
    if let Some(c) = &s.config {
        out.push((CONFIG.into(), c.clone().into_os_string()));
    }
    out
}

/// `first[:rest]`.
fn prepend(first: &OsStr, rest: Option<&OsStr>) -> OsString {
    let mut v = first.to_os_string();
    if let Some(r) = rest {
        v.push(":");
        v.push(r);
    }
    v
}

/// `[old:]last`. ld.so accepts both spaces and colons between LD_PRELOAD entries.
fn append(old: Option<&OsStr>, last: &OsStr) -> OsString {
    match old {
        Some(o) => {
            let mut v = o.to_os_string();
            v.push(":");
            v.push(last);
            v
        }
        None => last.to_os_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(rt: &RuntimeDir, s: &Settings, old: &[(&str, &str)]) -> HashMap<String, String> {
        let old: HashMap<String, OsString> =
            old.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        child_env(rt, s, |k| old.get(k).cloned())
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect()
    }

    #[test]
    fn ours_go_first_in_the_search_paths_and_last_in_the_preload_list() {
        let rt = RuntimeDir::at(PathBuf::from("/rt"));
        let s = Settings { gpus: 2, time_scale: None, config: None, isa: "gfx942".into() };
        let e = env_of(
            &rt,
            &s,
            &[("LD_LIBRARY_PATH", "/a:/b"), ("LD_PRELOAD", "/x/libxhsa.so"), ("PATH", "/usr/bin")],
        );
        assert_eq!(e["LD_LIBRARY_PATH"], "/rt/lib:/a:/b");
        assert_eq!(e["LD_PRELOAD"], "/x/libxhsa.so:/rt/lib/libhsakmt.so.1");
        assert_eq!(e["PATH"], "/rt/bin:/usr/bin");
        assert_eq!(e[GPUS], "2");
        assert_eq!(e[ISA], "gfx942");
        assert!(!e.contains_key(TIME_SCALE) && !e.contains_key(CONFIG));
    }

    #[test]
    fn unset_or_empty_variables_leave_no_stray_separator() {
        let rt = RuntimeDir::at(PathBuf::from("/rt"));
        let s = Settings {
            gpus: 1,
            time_scale: Some(2.5),
            config: Some("/etc/emu.toml".into()),
            isa: "gfx90a".into(),
        };
        let e = env_of(&rt, &s, &[("LD_LIBRARY_PATH", "")]);
        assert_eq!(e["LD_LIBRARY_PATH"], "/rt/lib");
        assert_eq!(e["LD_PRELOAD"], "/rt/lib/libhsakmt.so.1");
        assert_eq!(e["PATH"], format!("/rt/bin:{DEFAULT_PATH}"));
        assert_eq!(e[TIME_SCALE], "2.5");
        assert_eq!(e[CONFIG], "/etc/emu.toml");
    }
}
