//! Which file descriptors are emulated devices: `/dev/kfd` and the DRM render nodes
//! `/dev/dri/renderD<128+N>` of the emulated GPUs.
//!
//! An emulated descriptor is a `memfd` (never a driver): it has its own inode, so a copy made by
//! `dup`, `fcntl(F_DUPFD_CLOEXEC)` (as libdrm's `amdgpu_device_initialize` does) or inherited
//! through `fork` is recognised by `fstat` as the same device. Descriptors seen are cached by
//! number; `close`, `dup2` and `dup3` on a number drop it from the cache.

use std::collections::HashMap;
use std::sync::Mutex;

/// The character-device major `/dev/kfd` reports (dynamic on a real system; the launcher's
/// device node uses the same).
pub const KFD_MAJOR: u32 = 238;

/// What an emulated descriptor stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Kfd,
    /// A render node, by DRM minor (128 + GPU index).
    Render(u32),
}

struct Registry {
    /// (st_dev, st_ino) of each memfd we created -> device.
    inodes: HashMap<(u64, u64), Device>,
    /// Descriptor numbers known to be emulated.
    fds: HashMap<i32, Device>,
}

static REG: Mutex<Option<Registry>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = REG.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(|| Registry { inodes: HashMap::new(), fds: HashMap::new() }))
}

fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: an all-zero `stat` is a valid value; fstat writes into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer. A raw syscall: our own `fstat` interposer
    // must not be re-entered.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) };
    (r == 0).then_some((st.st_dev, st.st_ino))
}

/// Creates a descriptor for `dev` (close-on-exec when `cloexec`); -1 with errno on failure.
pub fn create(dev: Device, cloexec: bool) -> i32 {
    let name: &std::ffi::CStr = match dev {
        Device::Kfd => c"xhsa-emu-kfd",
        Device::Render(_) => c"xhsa-emu-render",
    };
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), if cloexec { libc::MFD_CLOEXEC } else { 0 }) };
    if fd < 0 {
        return fd;
    }
    if let Some(id) = identity(fd) {
        with(|r| {
            r.inodes.insert(id, dev);
            r.fds.insert(fd, dev);
        });
    }
    fd
}

/// The emulated device `fd` stands for, if any.
pub fn device(fd: i32) -> Option<Device> {
    if fd < 0 {
        return None;
    }
    let (known, any) = with(|r| (r.fds.get(&fd).copied(), !r.inodes.is_empty()));
    if known.is_some() || !any {
        return known;
    }
    let id = identity(fd)?;
    with(|r| {
        let d = r.inodes.get(&id).copied();
        if let Some(d) = d {
            r.fds.insert(fd, d);
        }
        d
    })
}

/// `fd` is being closed or replaced: forget its number.
pub fn forget(fd: i32) {
    with(|r| {
        r.fds.remove(&fd);
    });
}

/// The DRM minor named by a render-node path `/dev/dri/renderD<N>`, if it is one.
pub fn render_minor(path: &[u8]) -> Option<u32> {
    let n = path.strip_prefix(b"/dev/dri/renderD")?;
    if n.is_empty() || n.len() > 4 || !n.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(n).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_a_descriptor_are_the_same_device() {
        let fd = create(Device::Render(128), true);
        assert!(fd >= 0);
        assert_eq!(device(fd), Some(Device::Render(128)));
        // SAFETY: duplicating a descriptor we own.
        let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        assert_eq!(device(copy), Some(Device::Render(128)));
        forget(copy);
        // SAFETY: closing descriptors we own.
        unsafe { libc::syscall(libc::SYS_close, copy) };
        let mut p = [0i32; 2];
        // SAFETY: a pipe of our own, into a two-element array.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        assert_eq!(device(p[0]), None);
        for f in [fd, p[0], p[1]] {
            forget(f);
            // SAFETY: closing descriptors we own.
            unsafe { libc::syscall(libc::SYS_close, f) };
        }
    }

    #[test]
    fn render_paths() {
        assert_eq!(render_minor(b"/dev/dri/renderD128"), Some(128));
        assert_eq!(render_minor(b"/dev/dri/renderD"), None);
        assert_eq!(render_minor(b"/dev/dri/card0"), None);
        assert_eq!(render_minor(b"/dev/dri/renderD12x"), None);
    }
}
