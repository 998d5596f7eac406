//! Where the shared device lives: a directory per user and device configuration (owner-only),
//! holding the device's socket (`device.sock`, the only rendezvous: the shared memory travels
//! over it as descriptors), the lock its starters take (`start.lock`) and its log
//! (`device.log`). Processes launched with the same configuration (config file contents, time
//! scale, number of GPUs) share a device; a different configuration is a different device.
//! `XHSA_EMU_DEVICE_DIR` selects a directory explicitly (tests use private ones; containers
//! that share one device mount the same directory).

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The per-user directory under which the devices live.
pub fn base_dir() -> PathBuf {
    let uid = crate::sys::process::uid();
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(r) if !r.is_empty() => PathBuf::from(r).join("xhsa-emu-devices"),
        _ => std::env::temp_dir().join(format!("xhsa-emu-{uid}")).join("devices"),
    }
}

/// The configuration that identifies a device, from the launcher's environment contract.
fn fingerprint() -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let var = |k: &str| std::env::var_os(k).unwrap_or_default();
    let config = var("XHSA_EMU_CONFIG");
    std::fs::read(&config).unwrap_or_default().hash(&mut h);
    var("XHSA_EMU_TIME_SCALE").hash(&mut h);
    var("XHSA_EMU_GPUS").hash(&mut h);
    format!("{:016x}", h.finish())
}

/// The device directory for this process's configuration, created 0700 if missing; refused if
/// it is not ours.
pub fn device_dir() -> io::Result<PathBuf> {
    let dir = match std::env::var_os("XHSA_EMU_DEVICE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => base_dir().join(format!("dev-{}", fingerprint())),
    };
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    let uid = crate::sys::process::uid();
    if !meta.is_dir() || meta.uid() != uid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a directory owned by uid {uid}", dir.display()),
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

pub fn socket(dir: &Path) -> PathBuf {
    dir.join("device.sock")
}

pub fn start_lock(dir: &Path) -> PathBuf {
    dir.join("start.lock")
}

pub fn log(dir: &Path) -> PathBuf {
    dir.join("device.log")
}
