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

