//! The private runtime directory of one `xhsa-emu run`:
//!
//! ```text
//! $XDG_RUNTIME_DIR/xhsa-emu/run-<unique>/  (else $TMPDIR or /tmp: xhsa-emu-<uid>/run-<unique>/), 0700
//!   lock                               held (flock) by the launcher while it runs
//!   lib/libhsakmt.so.1 -> the thunk    ROCr's DT_NEEDED name, found through LD_LIBRARY_PATH
//!   bin/lsmod                          prints an amdgpu line: rocminfo runs `lsmod | grep amdgpu`
//! ```
//!
//! Removed when CMD exits (and on drop). The name is made unique by creating it, not derived
//! from the pid alone: launchers in different PID namespaces (containers sharing this
//! directory) can have the same pid. Directories left by launchers that were killed are swept
//! by the next run: an entry whose lock nobody holds is removed (a lock, unlike a pid, means
//! the same in every namespace).

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The soname ROCr 5.x links against.
pub const THUNK_SONAME: &str = "libhsakmt.so.1";

/// What the `lsmod` stand-in prints (the line in `/proc/modules` form, after lsmod's header).
pub const LSMOD_SCRIPT: &str = "#!/bin/sh\n# xhsa-emu: the emulated amdgpu module, for rocminfo's `lsmod | grep amdgpu`.\n\
printf '%s\\n' 'Module                  Size  Used by' 'amdgpu 16384 0 - Live 0x0000000000000000 (xhsa-emu)'\n";

#[derive(Debug)]
pub struct RuntimeDir {
    root: PathBuf,
    /// Created by this process and removed on drop.
    owned: bool,
    /// `lock`, held while this launcher runs (none for a view).
    _lock: Option<fs::File>,
}

/// The prefix of the launchers' entries in the base directory.
const PREFIX: &str = "run-";

impl RuntimeDir {
    /// Creates the directory for this process, with the thunk link and `bin/lsmod`.
    pub fn create(thunk: &Path) -> io::Result<RuntimeDir> {
        let base = base_dir()?;
        sweep_stale(&base);
        let (root, lock) = create_unique(&base)?;
        let rt = RuntimeDir { root, owned: true, _lock: Some(lock) };
        DirBuilder::new()
            .mode(0o700)
            .create(rt.lib_dir())
            .map_err(|e| annotate(e, &rt.lib_dir()))?;
        DirBuilder::new()
            .mode(0o700)
            .create(rt.bin_dir())
            .map_err(|e| annotate(e, &rt.bin_dir()))?;
        std::os::unix::fs::symlink(thunk, rt.thunk_link())
            .map_err(|e| annotate(e, &rt.thunk_link()))?;
        let lsmod = rt.bin_dir().join("lsmod");
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(&lsmod)?;
        io::Write::write_all(&mut f, LSMOD_SCRIPT.as_bytes())?;
        Ok(rt)
    }

    /// A view of an existing layout at `root`, which is never removed (for tests and tools).
    pub fn at(root: PathBuf) -> RuntimeDir {
        RuntimeDir { root, owned: false, _lock: None }
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    pub fn lib_dir(&self) -> PathBuf {
        self.root.join("lib")
    }

    pub fn bin_dir(&self) -> PathBuf {
        self.root.join("bin")
    }

    /// `lib/libhsakmt.so.1`.
    pub fn thunk_link(&self) -> PathBuf {
        self.lib_dir().join(THUNK_SONAME)
    }

    /// Removes the directory now, reporting a failure.
    pub fn remove(mut self) -> io::Result<()> {
        let owned = std::mem::replace(&mut self.owned, false);
        if owned {
            fs::remove_dir_all(&self.root)?;
        }
        Ok(())
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        if self.owned {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

fn annotate(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// `$XDG_RUNTIME_DIR/xhsa-emu` (a per-user directory already), else `<tmp>/xhsa-emu-<uid>`;
/// created 0700, and refused if it is not a directory of ours closed to others.
fn base_dir() -> io::Result<PathBuf> {
    let uid = crate::sys::process::uid();
    let xdg = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir());
    let base = match xdg {
        Some(x) => x.join("xhsa-emu"),
        None => std::env::temp_dir().join(format!("xhsa-emu-{uid}")),
    };
    match DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(annotate(e, &base)),
    }
    let m = fs::symlink_metadata(&base).map_err(|e| annotate(e, &base))?;
    if !m.file_type().is_dir() || m.uid() != uid || m.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} must be a directory owned by uid {uid} with mode 0700 (remove it, or set XDG_RUNTIME_DIR)", base.display()),
        ));
    }
    Ok(base)
}

/// Creates `<base>/run-<pid>-<n>` for the first `n` nobody has (creating it is the test), with
/// its `lock` held. The lock file is locked under another name and only then renamed `lock`
/// (the lock stays with the open file): a launcher sweeping at the same moment never finds a
/// `lock` it can take and removes a directory being set up (it did, when several processes
/// started at once: "cannot set up the runtime directory: No such file or directory").
fn create_unique(base: &Path) -> io::Result<(PathBuf, fs::File)> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for n in 0u32.. {
        let root = base.join(format!("{PREFIX}{}-{:x}", std::process::id(), nanos.wrapping_add(n)));
        match DirBuilder::new().mode(0o700).create(&root) {
            Ok(()) => {
                let unnamed = root.join("lock.new");
                let lock = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&unnamed)
                    .map_err(|e| annotate(e, &root))?;
                lock.try_lock().map_err(|e| annotate(io::Error::other(e.to_string()), &root))?;
                fs::rename(&unnamed, root.join("lock")).map_err(|e| annotate(e, &root))?;
                return Ok((root, lock));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(annotate(e, &root)),
        }
    }
    unreachable!("u32 names run out")
}

/// Removes `<base>/run-*` entries whose launcher is gone: their `lock` is free. An entry
/// without a lock yet (a launcher between creating it and locking) is left alone.
fn sweep_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else { return };
    for e in entries.flatten() {
        if !e.file_name().to_str().is_some_and(|n| n.starts_with(PREFIX)) {
            continue;
        }
        let Ok(lock) = fs::OpenOptions::new().write(true).open(e.path().join("lock")) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_created_and_removed() {
        let rt = RuntimeDir::create(Path::new("/bin/sh")).unwrap();
        let root = rt.path().to_path_buf();
        assert_eq!(fs::metadata(&root).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(fs::read_link(rt.thunk_link()).unwrap(), Path::new("/bin/sh"));
        let lsmod = rt.bin_dir().join("lsmod");
        assert!(fs::metadata(&lsmod).unwrap().permissions().mode() & 0o111 != 0);
        let out = std::process::Command::new(&lsmod).output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).lines().any(|l| l.starts_with("amdgpu ")));
        rt.remove().unwrap();
        assert!(!root.exists());
    }

    #[test]
    fn two_launchers_get_two_directories_and_only_a_dead_ones_is_swept() {
        let a = RuntimeDir::create(Path::new("/bin/sh")).unwrap();
        let b = RuntimeDir::create(Path::new("/bin/sh")).unwrap();
        assert_ne!(a.path(), b.path());
        // A launcher killed before removing its directory: nobody holds its lock.
        let (dead, lock) = create_unique(a.path().parent().unwrap()).unwrap();
        drop(lock);
        sweep_stale(a.path().parent().unwrap());
        assert!(!dead.exists());
        assert!(a.path().exists() && b.path().exists());
    }

    /// Launchers started together (six workload processes of a benchmark phase): each sweeps
    /// while the others set up. None may remove another's directory in the middle of its set-up
    /// (the lock file existed, unlocked, for a moment: a sweeper took it and removed the lot).
    #[test]
    fn launchers_starting_together_never_sweep_each_other() {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..200 {
                        let rt = RuntimeDir::create(Path::new("/bin/sh"))
                            .unwrap_or_else(|e| panic!("set-up failed beside others: {e}"));
                        assert!(rt.thunk_link().exists() && rt.bin_dir().join("lsmod").exists());
                        rt.remove().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_view_is_never_removed() {
        let dir = std::env::temp_dir().join(format!("xhsa-emu-view-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        drop(RuntimeDir::at(dir.clone()));
        assert!(dir.exists());
        fs::remove_dir(&dir).unwrap();
    }
}
