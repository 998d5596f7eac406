//! Where the emulator's thunk is: `$XHSA_EMU_THUNK` if set, else `libhsakmt.so` beside the
//! launcher's executable (cargo builds both into `target/<profile>/`).

use std::fmt;
use std::path::{Path, PathBuf};

use super::env::THUNK;

/// File name cargo gives the thunk cdylib (package `xhsa-emu-thunk`, lib `hsakmt`).
pub const FILE_NAME: &str = "libhsakmt.so";

#[derive(Debug)]
pub struct NotFound {
    pub path: PathBuf,
    pub from_env: bool,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.from_env {
            write!(f, "the emulator's thunk is not at {} (from ${THUNK}); point ${THUNK} at libhsakmt.so, or unset it and run `cargo build --workspace`", self.path.display())
        } else {
            write!(f, "the emulator's thunk is not at {}; build it with `cargo build --workspace` (same profile as xhsa-emu), or set ${THUNK} to its path", self.path.display())
        }
    }
}

impl std::error::Error for NotFound {}

/// The thunk to load, as an absolute path (the runtime directory links to it).
pub fn locate() -> Result<PathBuf, NotFound> {
    let env = std::env::var_os(THUNK).filter(|v| !v.is_empty()).map(PathBuf::from);
    let exe = std::env::current_exe().ok();
    locate_from(env, exe.as_deref())
}

/// [`locate`] over explicit inputs: the `$XHSA_EMU_THUNK` value and the launcher's path.
pub fn locate_from(env: Option<PathBuf>, exe: Option<&Path>) -> Result<PathBuf, NotFound> {
    let (path, from_env) = match env {
        Some(p) => (p, true),
        None => (exe.and_then(Path::parent).unwrap_or(Path::new(".")).join(FILE_NAME), false),
    };
    if !path.is_file() {
        return Err(NotFound { path, from_env });
    }
    Ok(path.canonicalize().unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_wins_and_a_missing_file_is_named() {
        assert_eq!(
            locate_from(Some("/bin/sh".into()), Some(Path::new("/nowhere/xhsa-emu"))).unwrap(),
            Path::new("/bin/sh").canonicalize().unwrap()
        );
        let e = locate_from(None, Some(Path::new("/nowhere/xhsa-emu"))).unwrap_err();
        assert_eq!(e.path, Path::new("/nowhere/libhsakmt.so"));
        let msg = e.to_string();
        assert!(
            msg.contains("/nowhere/libhsakmt.so") && msg.contains("cargo build --workspace"),
            "{msg}"
        );
        let e = locate_from(Some("/nowhere/x.so".into()), None).unwrap_err();
        assert!(e.from_env && e.to_string().contains("/nowhere/x.so"));
    }
}
