//! Where the boards live: the directory, the file names (one file per GPU, per user or per
//! group), and finding the board files in a directory.
#![forbid(unsafe_code)]

use std::io;
use std::path::{Path, PathBuf};

/// Where boards live and who may share them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoardPlace {
    /// The directory (`XHSA_BOARD_DIR`, default `/dev/shm`).
    pub dir: PathBuf,
    /// Share with this group (mode 0660) instead of owner-only (0600).
    pub group: Option<u32>,
}

impl BoardPlace {
    /// The board file of KFD node `node`.
    pub fn path(&self, node: u32, uid: u32) -> PathBuf {
        match self.group {
            Some(gid) => self.dir.join(format!("xhsa-g{gid}-gpu{node}.board")),
            None => self.dir.join(format!("xhsa-u{uid}-gpu{node}.board")),
        }
    }
}

pub(crate) fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The board files in `dir` and their KFD node ids (`xhsa-u<uid>-gpu<node>.board`,
/// `xhsa-g<gid>-gpu<node>.board`), by node then name.
pub fn board_files(dir: &Path) -> io::Result<Vec<(PathBuf, u32)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(node) = board_file_node(name) {
            out.push((entry.path(), node));
        }
    }
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    Ok(out)
}

/// The KFD node id in a board file name, if it is one.
pub fn board_file_node(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("xhsa-")?.strip_suffix(".board")?;
    let (who, node) = rest.split_once("-gpu")?;
    let id = who.strip_prefix('u').or_else(|| who.strip_prefix('g'))?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
    (!node.is_empty() && node.bytes().all(|b| b.is_ascii_digit())).then(|| node.parse().ok())?
}

/// Whom a board file belongs to, by its name: `xhsa-u<uid>-…` to a user, `xhsa-g<gid>-…` to a
/// group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Belongs {
    /// Owner-only: this uid owns it, nobody else may read or write it.
    User(u32),
    /// Shared with this group: the file's group, nobody outside it may read or write it.
    Group(u32),
}

/// Whom the board file `name` belongs to, if the name is a board file's.
pub fn belongs(name: &str) -> Option<Belongs> {
    board_file_node(name)?;
    let rest = name.strip_prefix("xhsa-")?;
    let (who, _) = rest.split_once("-gpu")?;
    if let Some(u) = who.strip_prefix('u') {
        return u.parse().ok().map(Belongs::User);
    }
    who.strip_prefix('g')?.parse().ok().map(Belongs::Group)
}

/// Whether an opened board file may be trusted, from its `fstat` and its name: a regular file,
/// owned as its name says (`xhsa-u<uid>-…`: that uid owns it and only it has access, mode
/// `0600` or narrower; `xhsa-g<gid>-…`: that group is the file's and others have no access),
/// of a size a board can have. `Err` says what is wrong, for a message naming the file.
pub fn check_trust(meta: &std::fs::Metadata, name: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    let mode = meta.mode() & 0o7777;
    match belongs(name) {
        None => return Err(
            "not a board file name (xhsa-u<uid>-gpu<node>.board or xhsa-g<gid>-gpu<node>.board)"
                .into(),
        ),
        Some(Belongs::User(u)) => {
            if meta.uid() != u {
                return Err(format!(
                    "owned by uid {}, not by uid {u} whose board it names",
                    meta.uid()
                ));
            }
            if mode & 0o077 != 0 {
                return Err(format!(
                    "mode {mode:o} gives others access (an owner-only board has mode 600)"
                ));
            }
        }
        Some(Belongs::Group(g)) => {
            if meta.gid() != g {
                return Err(format!(
                    "its group is gid {}, not gid {g} whose board it names",
                    meta.gid()
                ));
            }
            if mode & 0o007 != 0 {
                return Err(format!("mode {mode:o} gives users outside group {g} access (a group board has mode 660)"));
            }
        }
    }
    let len = meta.len();
    let max = crate::layout::board_size(crate::layout::MAX_SLOT_COUNT) as u64;
    if len > max || !len.is_multiple_of(4) {
        return Err(format!(
            "{len} bytes is not the size of a board (a multiple of 4, at most {max})"
        ));
    }
    Ok(())
}

/// The request file through which a controller proves who it is to the owner of slot `index`
/// for request `seq`: beside the board, created by the controller (so the kernel records its
/// uid as the file's owner), holding `"<op> <level>\n"`.
pub fn request_path(board: &Path, index: usize, seq: u32) -> PathBuf {
    let mut name = board.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".req-{index}-{seq}"));
    board.with_file_name(name)
}
