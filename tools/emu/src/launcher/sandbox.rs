//! The world of a command under `xhsa-emu run --rocm 6.4` (or 7.2): the ROCm root as its
//! filesystem, with the host's `/proc`, `/tmp`, devices, working directory and home, plus what
//! amdgpu and KFD would publish for the emulated GPUs: `/dev/kfd`, `/dev/dri/{card,renderD}N`,
//! the KFD topology under `/sys/devices/virtual/kfd` (and `/sys/class/kfd`), a PCI device per
//! GPU with its DRM nodes, and `/sys/dev/char/226:N`.
//!
//! How: the launcher moves itself into a private mount namespace (`unshare(CLONE_NEWNS)`, all
//! mounts private, nothing leaks to the host), bind-mounts the host directories into the root
//! and *merges* generated entries into `/dev`, `/sys/devices`, `/sys/class` and `/sys/dev/char`:
//! a tmpfs over the directory holding bind mounts of every host entry plus the generated ones.
//! CMD is then started with `chroot(root)` and `chdir(cwd)`. Device nodes are real character
//! nodes (`mknod`) so `stat` reports what a real system does; opening them reaches the
//! emulator's interposer, never a driver.
//!
//! Needs root (CAP_SYS_ADMIN for mounts, CAP_MKNOD, CAP_SYS_CHROOT); as another user the
//! launcher says so. What it is not: a security boundary.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};

use crate::kfd::sysfs::{self, Entry, DRM_MAJOR, RENDER_MINOR_BASE};
use crate::kfd::topology::Node;

/// The character-device major `/dev/kfd` gets (dynamic on a real system; any unused one).
pub const KFD_MAJOR: u64 = 238;

/// One generated entry of a merged directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    Dir,
    File(String),
    Link(String),
    Char(u64, u64),
}

/// Generated entries by relative path ("a/b/c").
pub type Tree = BTreeMap<String, Item>;

fn add(tree: &mut Tree, entries: Vec<Entry>, prefix: &str) {
    for e in entries {
        let (p, item) = match e {
            Entry::Dir(p) => (p, Item::Dir),
            Entry::File(p, s) => (p, Item::File(s)),
            Entry::Link(p, t) => (p, Item::Link(t)),
        };
        let full = if prefix.is_empty() { p } else { format!("{prefix}/{p}") };
        // Parents are directories.
        let mut parent = full.as_str();
        while let Some((up, _)) = parent.rsplit_once('/') {
            tree.entry(up.to_string()).or_insert(Item::Dir);
            parent = up;
        }
        tree.insert(full, item);
    }
}

/// What to merge into `/sys/devices`, `/sys/class`, `/sys/dev/char` and `/dev` for `nodes`.
pub struct Generated {
    pub sys_devices: Tree,
    pub sys_class: Tree,
    pub sys_dev_char: Tree,
    pub sys_module: Tree,
    pub dev: Tree,
}

/// The generated entries for the emulated GPUs among `nodes` (KFD topology with `num_xcc` XCCs
/// and MEC firmware `fw_version` per GPU).
pub fn generate(nodes: &[Node], num_xcc: u32, fw_version: u32) -> Generated {
    let mut sys_devices = Tree::new();
    add(&mut sys_devices, sysfs::kfd_tree(nodes, num_xcc, fw_version), "virtual/kfd/kfd");
    let (pci, chr) = sysfs::drm_tree(nodes);
    add(&mut sys_devices, pci.clone(), "");
    let mut sys_dev_char = Tree::new();
    add(&mut sys_dev_char, chr, "");
    let mut sys_class = Tree::new();
    sys_class.insert("kfd".into(), Item::Dir);
    sys_class.insert("kfd/kfd".into(), Item::Link("../../devices/virtual/kfd/kfd".into()));
    sys_class.insert("drm".into(), Item::Dir);
    let mut dev = Tree::new();
    dev.insert("kfd".into(), Item::Char(KFD_MAJOR, 0));
    dev.insert("dri".into(), Item::Dir);
    for (g, n) in nodes.iter().filter(|n| n.simds > 0).enumerate() {
        let g = g as u64;
        let render = u64::from(RENDER_MINOR_BASE) + g;
        let drm = format!("../../devices/{}/drm", sysfs::pci_dir(n));
        sys_class.insert(format!("drm/card{g}"), Item::Link(format!("{drm}/card{g}")));
        sys_class
            .insert(format!("drm/renderD{render}"), Item::Link(format!("{drm}/renderD{render}")));
        dev.insert(format!("dri/card{g}"), Item::Char(u64::from(DRM_MAJOR), g));
        dev.insert(format!("dri/renderD{render}"), Item::Char(u64::from(DRM_MAJOR), render));
    }
    // The amdgpu module, live (rocminfo checks /sys/module/amdgpu/initstate).
    let mut sys_module = Tree::new();
    sys_module.insert("amdgpu".into(), Item::Dir);
    sys_module.insert("amdgpu/initstate".into(), Item::File("live\n".into()));
    sys_module.insert("amdgpu/refcnt".into(), Item::File("1\n".into()));
    sys_module.insert("amdgpu/parameters".into(), Item::Dir);
    Generated { sys_devices, sys_class, sys_dev_char, sys_module, dev }
}

fn err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

fn bind(src: &Path, dst: &Path) -> Result<(), String> {
    mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
        .map_err(|e| err(format_args!("bind-mount {} on {}", src.display(), dst.display()), e))
}

/// The generated entries directly under `prefix` ("" = top), by name.
fn children<'a>(tree: &'a Tree, prefix: &str) -> Vec<(&'a str, &'a Item)> {
    tree.iter()
        .filter_map(|(k, v)| {
            let rest = if prefix.is_empty() {
                Some(k.as_str())
            } else {
                k.strip_prefix(prefix).and_then(|r| r.strip_prefix('/'))
            }?;
            (!rest.is_empty() && !rest.contains('/')).then_some((rest, v))
        })
        .collect()
}

fn create(path: &Path, item: &Item, tree: &Tree, rel: &str) -> Result<(), String> {
    match item {
        Item::Dir => {
            fs::create_dir(path).map_err(|e| err(format_args!("mkdir {}", path.display()), e))?;
            for (name, it) in children(tree, rel) {
                create(&path.join(name), it, tree, &format!("{rel}/{name}"))?;
            }
            Ok(())
        }
        Item::File(s) => {
            fs::write(path, s).map_err(|e| err(format_args!("write {}", path.display()), e))
        }
        Item::Link(t) => std::os::unix::fs::symlink(t, path)
            .map_err(|e| err(format_args!("symlink {}", path.display()), e)),
        Item::Char(maj, min) => {
            mknod(path, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), makedev(*maj, *min))
                .map_err(|e| err(format_args!("mknod {}", path.display()), e))?;
            // As udev leaves KFD and render nodes: read-write for all (mknod honours the umask).
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(path, fs::Permissions::from_mode(0o666))
                .map_err(|e| err(format_args!("chmod {}", path.display()), e))
        }
    }
}

/// Makes `target` show every entry of the host directory `source` (bind mounts; symbolic links
/// copied) plus the generated `tree` entries under `rel`; a generated directory that exists on
/// the host is merged the same way, one level down.
fn merge(target: &Path, source: &Path, tree: &Tree, rel: &str) -> Result<(), String> {
    mount(Some("tmpfs"), target, Some("tmpfs"), MsFlags::MS_NOSUID, Some("mode=0755"))
        .map_err(|e| err(format_args!("mount a tmpfs on {}", target.display()), e))?;
    let ours: BTreeMap<&str, &Item> = children(tree, rel).into_iter().collect();
    if let Ok(rd) = fs::read_dir(source) {
        for ent in rd.flatten() {
            let name = ent.file_name();
            let Some(n) = name.to_str() else { continue };
            let (src, dst) = (source.join(n), target.join(n));
            let sub = if rel.is_empty() { n.to_string() } else { format!("{rel}/{n}") };
            let Ok(ft) = ent.file_type() else { continue };
            match ours.get(n) {
                Some(Item::Dir) if ft.is_dir() => {
                    fs::create_dir(&dst)
                        .map_err(|e| err(format_args!("mkdir {}", dst.display()), e))?;
                    merge(&dst, &src, tree, &sub)?;
                }
                Some(_) => {} // ours replaces the host's entry
                None if ft.is_symlink() => {
                    if let Ok(t) = fs::read_link(&src) {
                        let _ = std::os::unix::fs::symlink(t, &dst);
                    }
                }
                None if ft.is_dir() => {
                    fs::create_dir(&dst)
                        .map_err(|e| err(format_args!("mkdir {}", dst.display()), e))?;
                    bind(&src, &dst)?;
                }
                None => {
                    // Files, device nodes, sockets: an empty file as the mount point.
                    if fs::File::create(&dst).is_ok() {
                        // A host file that cannot be bound (e.g. a socket that went away) is left out.
                        if bind(&src, &dst).is_err() {
                            let _ = fs::remove_file(&dst);
                        }
                    }
                }
            }
        }
    }
    for (name, item) in &ours {
        let dst = target.join(name);
        if fs::symlink_metadata(&dst).is_ok() {
            continue; // merged above
        }
        let sub = if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
        create(&dst, item, tree, &sub)?;
    }
    Ok(())
}

/// Host paths CMD needs at the same place inside the root: its working directory, home, the
/// runtime directories and the emulator's own files. Paths inside `root` or under another
/// listed path are dropped; `/` is never bound.
pub fn bind_list(root: &Path, wanted: &[PathBuf]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = wanted
        .iter()
        .filter(|p| p.is_absolute() && p.as_os_str() != "/" && !p.starts_with(root) && p.exists())
        .cloned()
        .collect();
    v.sort();
    v.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in v {
        if !out.iter().any(|o| p.starts_with(o)) {
            out.push(p);
        }
    }
    out
}

/// A prepared sandbox: the root to chroot into and the directory to start in.
#[derive(Clone, Debug)]
pub struct Sandbox {
    root: CString,
    cwd: CString,
}

impl Sandbox {
    /// Enters a private mount namespace and builds the world described above. Call while the
    /// launcher is single-threaded (unshare(CLONE_NEWNS) refuses a process that shares its
    /// filesystem attributes with other threads).
    pub fn enter(root: &Path, binds: &[PathBuf], gen: &Generated) -> Result<Sandbox, String> {
        if crate::sys::process::euid() != 0 {
            return Err("--rocm 6.4 and 7.2 run the command in a private mount namespace with the ROCm root as its filesystem, which needs root (mounts, device nodes, chroot); run xhsa-emu as root".into());
        }
        unshare(CloneFlags::CLONE_NEWNS).map_err(|e| err("unshare(CLONE_NEWNS)", e))?;
        mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
            .map_err(|e| err("make / private", e))?;
        let at = |p: &str| root.join(p.trim_start_matches('/'));
        for d in ["proc", "sys", "dev", "tmp"] {
            fs::create_dir_all(at(d))
                .map_err(|e| err(format_args!("mkdir {}", at(d).display()), e))?;
        }
        bind(Path::new("/proc"), &at("proc"))?;
        bind(Path::new("/sys"), &at("sys"))?;
        bind(Path::new("/tmp"), &at("tmp"))?;
        merge(&at("dev"), Path::new("/dev"), &gen.dev, "")?;
        merge(&at("sys/devices"), Path::new("/sys/devices"), &gen.sys_devices, "")?;
        merge(&at("sys/class"), Path::new("/sys/class"), &gen.sys_class, "")?;
        merge(&at("sys/module"), Path::new("/sys/module"), &gen.sys_module, "")?;
        fs::create_dir_all(at("sys/dev/char")).ok();
        merge(&at("sys/dev/char"), Path::new("/sys/dev/char"), &gen.sys_dev_char, "")?;
        for p in bind_list(root, binds) {
            if p.starts_with("/tmp")
                || p.starts_with("/proc")
                || p.starts_with("/sys")
                || p.starts_with("/dev")
            {
                continue;
            }
            let dst = root.join(p.strip_prefix("/").unwrap_or(&p));
            if p.is_dir() {
                fs::create_dir_all(&dst)
                    .map_err(|e| err(format_args!("mkdir {}", dst.display()), e))?;
            } else {
                if let Some(parent) = dst.parent() {
                    fs::create_dir_all(parent)
                        .map_err(|e| err(format_args!("mkdir {}", parent.display()), e))?;
                }
                if !dst.exists() {
                    fs::File::create(&dst)
                        .map_err(|e| err(format_args!("create {}", dst.display()), e))?;
                }
            }
            bind(&p, &dst)?;
        }
        let cwd = std::env::current_dir().map_err(|e| err("the working directory", e))?;
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| format!("{} contains a NUL byte", p.display()))
        };
        Ok(Sandbox { root: c(root)?, cwd: c(&cwd)? })
    }

    /// In the child between fork and exec: `chroot(root)`, `chdir(cwd)`. Only async-signal-safe
    /// calls, no allocation.
    pub fn apply(&self) -> io::Result<()> {
        // rustix's calls are system calls without allocation (a `&CStr` is passed as it is).
        rustix::process::chroot(self.root.as_c_str())?;
        if rustix::process::chdir(self.cwd.as_c_str()).is_err() {
            // The working directory could not be bound: start at the root's `/`.
            rustix::process::chdir(c"/")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::kfd::topology;

    #[test]
    fn generated_entries_have_their_parents_and_the_nodes_a_real_system_has() {
        let nodes = topology::nodes_for(&Config::default(), 2, 24 << 30, 2, topology::GFX942);
        let g = generate(&nodes, 4, 185);
        assert_eq!(g.sys_devices.get("virtual"), Some(&Item::Dir));
        assert_eq!(g.sys_devices.get("virtual/kfd/kfd/topology/nodes/2"), Some(&Item::Dir));
        assert!(
            matches!(g.sys_devices.get("virtual/kfd/kfd/topology/nodes/1/properties"), Some(Item::File(s)) if s.contains("gfx_target_version 90402"))
        );
        assert_eq!(g.dev.get("dri/renderD129"), Some(&Item::Char(226, 129)));
        assert_eq!(g.dev.get("dri/card1"), Some(&Item::Char(226, 1)));
        assert_eq!(g.dev.get("kfd"), Some(&Item::Char(KFD_MAJOR, 0)));
        assert_eq!(
            g.sys_class.get("drm/renderD128"),
            Some(&Item::Link("../../devices/pci0000:0c/0000:0c:00.0/drm/renderD128".into()))
        );
        let top: Vec<&str> = children(&g.sys_devices, "").into_iter().map(|(n, _)| n).collect();
        assert_eq!(top, ["pci0000:0c", "pci0000:0d", "virtual"]);
        assert_eq!(children(&g.sys_devices, "virtual/kfd").len(), 1);
    }

    #[test]
    fn binds_skip_the_root_itself_nested_paths_and_slash() {
        let t = std::env::temp_dir();
        let root = t.join("no-such-root");
        let sub = t.join("xhsa-bind-test-sub");
        fs::create_dir_all(&sub).unwrap();
        let got = bind_list(
            &root,
            &[
                PathBuf::from("/"),
                t.clone(),
                sub.clone(),
                root.join("x"),
                PathBuf::from("relative"),
                PathBuf::from("/nonexistent-xhsa"),
            ],
        );
        assert_eq!(got, vec![t.clone()]);
        fs::remove_dir(&sub).unwrap();
    }
}
