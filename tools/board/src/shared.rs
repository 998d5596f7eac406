//! The board in shared memory: one file per GPU that every libxhsa process using that GPU maps,
//! so a batch process yields to a latency-critical one it never talks to. No daemon: whichever
//! process comes first creates the file; a process that dies leaves entries the next reader
//! clears.
//!
//! The layout and the pure functions are [`crate::layout`]; this module is the concurrency
//! protocol over the mapped words ([`crate::map::SharedWords`]), in safe code:
//!
//! - **Creation.** `O_CREAT|O_EXCL|O_NOFOLLOW` with mode 0600 (or 0660 and the configured
//!   group), sized with `ftruncate`, header fields written, `magic` stored last with release.
//! - **Opening an existing file** (`O_NOFOLLOW|O_NONBLOCK`): it must be a regular file owned as
//!   its name says and closed to others, of a size a board can have ([`check_trust`]), else it
//!   is refused untouched ([`BoardError::Untrusted`]); the opener then waits (up to
//!   [`INIT_WAIT`]) for the magic and validates the header ([`BoardHeader::validate`]); a
//!   board of another layout is not used (the caller logs it and schedules in-process).
//! - **Claiming** a slot: the slot's lock first (an open-file-description lock on its bytes of
//!   the file), then compare-and-swap of `state` from [`SLOT_FREE`] to [`SLOT_LIVE`], then raise
//!   `high_water`. A freed slot's other fields are zero, so a reader that sees a fresh claim
//!   before its data sees an idle queue.
//! - **Liveness.** A live slot whose lock nobody holds has a dead owner: the kernel drops a
//!   process's locks with its last descriptor of the file, in whatever pid namespace it ran.
//!   No pid is trusted (containers share pids).
//! - **Writing** (only the owner writes a live slot): seqlock ([`crate::seqlock`]) — `seq` made odd, fields stored,
//!   `seq` made even with release. **Reading**: copy the slot between two equal even `seq`
//!   loads, else retry (a few times; a slot that never settles is skipped as idle).
//! - **Clearing** (owner release, or a dead owner found by anyone): compare-and-swap of `state`
//!   from [`SLOT_LIVE`] to [`SLOT_CLEARING`] (one clearer wins), re-check the owner, zero the
//!   fields, store [`SLOT_FREE`], then (the owner) drop the lock.
//! - **Control.** A controller proves its uid with a request file beside the board
//!   ([`SharedBoard::send_control`], [`SharedBoard::verify_control`]).
//!
//! File names: `<dir>/xhsa-u<uid>-gpu<node>.board` with owner-only permissions, or
//! `<dir>/xhsa-g<gid>-gpu<node>.board` shared with a group (`board_group` in the config). The
//! directory is `XHSA_BOARD_DIR`, default `/dev/shm`; processes in several containers share a
//! board by mounting one directory (`docs/deployment.md`).

#![forbid(unsafe_code)]

use crate::layout::{
    board_size, summarize, Ack, BoardFull, BoardHeader, Control, LayoutError, Owner,
    RecentPreemption, Slot, SplitWord, Summary, ACK_UNVERIFIED, BOARD_MAGIC, HEADER_SIZE,
    MAX_SLOT_COUNT, NAME_BYTES, RECENT_PREEMPTIONS, SLOT_CLEARING, SLOT_FREE, SLOT_LIVE, SLOT_SIZE,
};
use crate::map::SharedWords;
use crate::owner::pid_namespace;
use crate::place::{check_trust, request_path, uid, BoardPlace};
use crate::seqlock;
use nix::fcntl::{fcntl, FcntlArg};
use std::collections::BTreeSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xhsa_model::clock::monotonic_ns;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::priority::Priority;
use xhsa_model::stats::{QueueStats, LATENCY_BUCKETS};

/// Words per slot.
const SLOT_WORDS: usize = SLOT_SIZE / 4;
/// Words of the header.
const HEADER_WORDS: usize = HEADER_SIZE / 4;
/// Word index of `high_water` in the header.
const HIGH_WATER_WORD: usize = 8;
/// Word index of the `wake` futex word in the header.
const WAKE_WORD: usize = 9;
/// Word index of `waiters` in the header.
const WAITERS_WORD: usize = 10;
/// Word index of `wake_ns` (two words, low first) in the header.
const WAKE_NS_WORD: usize = 12;
/// How long an opener waits for the creator to finish the header.
pub const INIT_WAIT: Duration = Duration::from_secs(2);
/// Seqlock read attempts before a slot is skipped. An owner keeps `seq` odd for a few stores;
/// a writer that keeps it odd (a crashed or hostile one) costs readers only this many loads.
const READ_ATTEMPTS: usize = 4;

/// Why a board could not be opened.
#[derive(Debug)]
pub enum BoardError {
    /// Creating, opening, sizing or mapping the file failed.
    Io { path: PathBuf, what: &'static str, err: io::Error },
    /// The file is not a board this libxhsa can use.
    Layout { path: PathBuf, err: LayoutError },
    /// The creator never finished the header.
    NotInitialized { path: PathBuf },
    /// The file is not one this process may trust (another user's, a symbolic link, open to
    /// others, of an impossible size); nothing was read or written through it.
    Untrusted { path: PathBuf, why: String },
}

impl fmt::Display for BoardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoardError::Io { path, what, err } => write!(f, "board {}: {what}: {err}", path.display()),
            BoardError::Layout { path, err } => write!(f, "board {}: {err}", path.display()),
            BoardError::NotInitialized { path } => {
                write!(f, "board {}: its creator did not finish initializing it within {:?}", path.display(), INIT_WAIT)
            }
            BoardError::Untrusted { path, why } => write!(
                f,
                "board {}: refused, not used and left untouched: {why}. A board must be a regular file owned as its name \
                 says, not open to others: remove it if it is not yours, or choose another directory (XHSA_BOARD_DIR)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for BoardError {}

/// A claimed slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SlotHandle {
    index: usize,
    owner: Owner,
}

impl SlotHandle {
    /// The slot's index.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// A controller's request on its way ([`SharedBoard::send_control`]): its `seq`, and its request
/// file, removed when this is dropped.
#[derive(Debug)]
pub struct Request {
    /// The `seq` the owner's [`Ack`] will name.
    pub seq: u32,
    path: PathBuf,
}

impl Drop for Request {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why a controller's request could not be sent.
#[derive(Debug)]
pub enum ControlError {
    /// Other controllers kept the slot's control word busy.
    Busy,
    /// The request file could not be created beside the board (the directory must let the
    /// controller create files: `/dev/shm` does; a shared board directory should be mode 1777
    /// or writable by the group).
    RequestFile { path: PathBuf, err: io::Error },
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::Busy => write!(f, "other controllers kept the queue's control word busy"),
            ControlError::RequestFile { path, err } => write!(
                f,
                "cannot create the request file {} ({err}): the board directory must let you create files (mode 1777 like /dev/shm, or writable by the board's group)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ControlError {}

/// A mapped board.
pub struct SharedBoard {
    words: SharedWords,
    /// The open file: this process's locks on its slots live on its open file description.
    file: File,
    path: PathBuf,
    slot_count: usize,
    /// Slots this board object holds the lock of (its own queues').
    held: Mutex<BTreeSet<usize>>,
    /// Held across every write of this board object to a slot's seqlocked words: the seqlock
    /// has one writer per slot, and the owner is one process of many threads (a queue's publish
    /// on an application's thread, the watcher's beat, a clear).
    writing: Mutex<()>,
    /// This process's pid namespace, written into its slots (0 if unknown).
    pid_ns: u64,
}

/// Flags of every open of a board or request file: never through a symbolic link, never
/// blocking (a FIFO planted in its place), not inherited across `exec`.
const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// `fstat` and [`check_trust`] of an opened board file.
fn trusted(file: &File, path: &Path) -> Result<(), BoardError> {
    let meta = file.metadata().map_err(|err| BoardError::Io {
        path: path.to_path_buf(),
        what: "stat",
        err,
    })?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    check_trust(&meta, name).map_err(|why| BoardError::Untrusted { path: path.to_path_buf(), why })
}

/// What an open of an existing board file says, as a [`BoardError`] (a symbolic link named).
fn open_error(path: &Path, err: io::Error) -> BoardError {
    if err.raw_os_error() == Some(libc::ELOOP) {
        return BoardError::Untrusted {
            path: path.to_path_buf(),
            why: "it is a symbolic link".into(),
        };
    }
    BoardError::Io { path: path.to_path_buf(), what: "open", err }
}

/// The lock description of slot `index`'s bytes in the file (an OFD lock: `l_pid` 0).
fn slot_flock(index: usize, kind: i32) -> libc::flock {
    libc::flock {
        l_type: kind as i16,
        l_whence: libc::SEEK_SET as i16,
        l_start: (HEADER_SIZE + index * SLOT_SIZE) as libc::off_t,
        l_len: SLOT_SIZE as libc::off_t,
        l_pid: 0,
    }
}

fn header_to_words(h: &BoardHeader) -> [u32; HEADER_WORDS] {
    let mut w = [0u32; HEADER_WORDS];
    w[0] = h.magic as u32;
    w[1] = (h.magic >> 32) as u32;
    w[2] = h.layout_version;
    w[3] = h.slot_count;
    w[4] = h.slot_size;
    w[5] = h.stats_version;
    w[6] = h.header_size;
    w[7] = h.gpu_id;
    w[HIGH_WATER_WORD] = h.high_water;
    w[WAKE_WORD] = h.wake;
    w[WAITERS_WORD] = h.waiters;
    w[11] = h.reserved1;
    w[WAKE_NS_WORD] = h.wake_ns as u32;
    w[WAKE_NS_WORD + 1] = (h.wake_ns >> 32) as u32;
    w[SPLIT_WORD] = h.split;
    w[SPLIT_WORD + 1] = h.split_at_ms;
    w
}

fn header_from_words(w: &[u32; HEADER_WORDS]) -> BoardHeader {
    let u64_at = |i: usize| u64::from(w[i]) | (u64::from(w[i + 1]) << 32);
    BoardHeader {
        magic: u64_at(0),
        layout_version: w[2],
        slot_count: w[3],
        slot_size: w[4],
        stats_version: w[5],
        header_size: w[6],
        gpu_id: w[7],
        high_water: w[HIGH_WATER_WORD],
        wake: w[WAKE_WORD],
        waiters: w[WAITERS_WORD],
        reserved1: w[11],
        wake_ns: u64_at(WAKE_NS_WORD),
        split: w[SPLIT_WORD],
        split_at_ms: w[SPLIT_WORD + 1],
    }
}

/// Word index of the header's `split` (and `split_at_ms` after it).
const SPLIT_WORD: usize = 14;
/// Word index of the first word after the owner's first seqlocked part (the control words follow).
const OWNER_END: usize = 88;
/// Word index of the stats' `rounds` in the slot.
const ROUNDS_WORD: usize = 52;
/// Word index of the slot's `name`.
const NAME_WORD: usize = 68;
/// Word index of the slot's first recent preemption.
const RECENT_WORD: usize = 72;
/// Word index of [`Control`]'s `seq`.
const CONTROL_WORD: usize = 88;
/// Word index of [`Ack`]'s `seq`.
const ACK_WORD: usize = 92;
/// Word index of `pid_ns`, where the owner's second seqlocked part begins (to the slot's end).
const PID_NS_WORD: usize = 96;

/// A slot as its 100 words, in the layout of [`crate::layout`].
pub fn slot_to_words(s: &Slot) -> [u32; SLOT_WORDS] {
    let mut w = [0u32; SLOT_WORDS];
    let put64 = |w: &mut [u32; SLOT_WORDS], i: usize, v: u64| {
        w[i] = v as u32;
        w[i + 1] = (v >> 32) as u32;
    };
    w[0] = s.seq;
    w[1] = s.state;
    w[2] = s.pid;
    w[3] = s.partition;
    put64(&mut w, 4, s.owner_token);
    put64(&mut w, 6, s.queue_id);
    let st = &s.stats;
    w[8] = st.priority as u32;
    w[9] = st.flags;
    w[10] = st.pending;
    w[11] = st.in_flight;
    put64(&mut w, 12, st.submitted);
    put64(&mut w, 14, st.forwarded);
    put64(&mut w, 16, st.completed);
    put64(&mut w, 18, st.throttle_ns);
    put64(&mut w, 20, st.throttle_events);
    put64(&mut w, 22, st.packet_ns);
    w[24] = st.requested as u32;
    w[25] = st.state;
    put64(&mut w, 26, st.preemptions);
    put64(&mut w, 28, st.preempted_ns);
    w[30..30 + LATENCY_BUCKETS].copy_from_slice(&st.latency);
    put64(&mut w, 46, st.beat_ns);
    put64(&mut w, 48, st.busy_ns);
    put64(&mut w, 50, st.own_packet_ns);
    for (i, &r) in st.rounds.iter().enumerate() {
        put64(&mut w, ROUNDS_WORD + 2 * i, r);
    }
    for (i, chunk) in s.name.chunks_exact(4).enumerate() {
        w[NAME_WORD + i] = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    for (i, r) in s.recent.iter().enumerate() {
        put64(&mut w, RECENT_WORD + 4 * i, r.start_ns);
        put64(&mut w, RECENT_WORD + 2 + 4 * i, r.duration_ns);
    }
    w[CONTROL_WORD] = s.control.seq;
    w[CONTROL_WORD + 1] = s.control.op;
    w[CONTROL_WORD + 2] = s.control.level as u32;
    w[CONTROL_WORD + 3] = s.control.uid;
    w[ACK_WORD] = s.ack.seq;
    w[ACK_WORD + 1] = s.ack.status;
    w[ACK_WORD + 2] = s.ack.detail as u32;
    w[ACK_WORD + 3] = s.ack.reserved;
    put64(&mut w, PID_NS_WORD, s.pid_ns);
    w[PID_NS_WORD + 2] = s.owner_uid;
    w[PID_NS_WORD + 3] = s.sharing;
    w
}

/// The inverse of [`slot_to_words`].
pub fn slot_from_words(w: &[u32; SLOT_WORDS]) -> Slot {
    let u64_at = |i: usize| u64::from(w[i]) | (u64::from(w[i + 1]) << 32);
    let mut latency = [0u32; LATENCY_BUCKETS];
    latency.copy_from_slice(&w[30..30 + LATENCY_BUCKETS]);
    let mut name = [0u8; NAME_BYTES];
    for (i, chunk) in name.chunks_exact_mut(4).enumerate() {
        chunk.copy_from_slice(&w[NAME_WORD + i].to_le_bytes());
    }
    let mut recent = [RecentPreemption::default(); RECENT_PREEMPTIONS];
    for (i, r) in recent.iter_mut().enumerate() {
        *r = RecentPreemption {
            start_ns: u64_at(RECENT_WORD + 4 * i),
            duration_ns: u64_at(RECENT_WORD + 2 + 4 * i),
        };
    }
    Slot {
        seq: w[0],
        state: w[1],
        pid: w[2],
        partition: w[3],
        owner_token: u64_at(4),
        queue_id: u64_at(6),
        stats: QueueStats {
            priority: w[8] as i32,
            flags: w[9],
            pending: w[10],
            in_flight: w[11],
            submitted: u64_at(12),
            forwarded: u64_at(14),
            completed: u64_at(16),
            throttle_ns: u64_at(18),
            throttle_events: u64_at(20),
            packet_ns: u64_at(22),
            requested: w[24] as i32,
            state: w[25],
            preemptions: u64_at(26),
            preempted_ns: u64_at(28),
            latency,
            beat_ns: u64_at(46),
            busy_ns: u64_at(48),
            own_packet_ns: u64_at(50),
            rounds: std::array::from_fn(|i| u64_at(ROUNDS_WORD + 2 * i)),
        },
        name,
        recent,
        control: Control {
            seq: w[CONTROL_WORD],
            op: w[CONTROL_WORD + 1],
            level: w[CONTROL_WORD + 2] as i32,
            uid: w[CONTROL_WORD + 3],
        },
        ack: Ack {
            seq: w[ACK_WORD],
            status: w[ACK_WORD + 1],
            detail: w[ACK_WORD + 2] as i32,
            reserved: w[ACK_WORD + 3],
        },
        pid_ns: u64_at(PID_NS_WORD),
        owner_uid: w[PID_NS_WORD + 2],
        sharing: w[PID_NS_WORD + 3],
    }
}

impl SharedBoard {
    /// Opens the board of KFD node `node` in `place`, creating it with `slot_count` slots if it
    /// does not exist.
    pub fn open(place: &BoardPlace, node: u32, slot_count: u32) -> Result<SharedBoard, BoardError> {
        let path = place.path(node, uid());
        let io_err = |what: &'static str| {
            let path = path.clone();
            move |err: io::Error| BoardError::Io { path, what, err }
        };
        let mode = if place.group.is_some() { 0o660 } else { 0o600 };
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(OPEN_FLAGS)
            .open(&path)
        {
            Ok(file) => {
                Self::create(file, path.clone(), place, node, slot_count).inspect_err(|_| {
                    let _ = std::fs::remove_file(&path);
                })
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(OPEN_FLAGS)
                    .open(&path)
                    .map_err(|e| open_error(&path, e))?;
                trusted(&file, &path)?;
                Self::attach(file, path)
            }
            Err(e) => Err(io_err("create")(e)),
        }
    }

    fn create(
        file: File,
        path: PathBuf,
        place: &BoardPlace,
        node: u32,
        slot_count: u32,
    ) -> Result<SharedBoard, BoardError> {
        let io_err = |what: &'static str| {
            let path = path.clone();
            move |err: io::Error| BoardError::Io { path, what, err }
        };
        if let Some(gid) = place.group {
            std::os::unix::fs::fchown(&file, None, Some(gid)).map_err(io_err("set its group"))?;
            // The umask may have narrowed the mode given at creation.
            file.set_permissions(std::fs::Permissions::from_mode(0o660))
                .map_err(io_err("set its mode"))?;
        }
        let header = BoardHeader::new(slot_count, node).ok_or_else(|| BoardError::Layout {
            path: path.clone(),
            err: LayoutError::SlotCount(slot_count),
        })?;
        file.set_len(board_size(slot_count) as u64).map_err(io_err("size"))?;
        let words = SharedWords::map(&file).map_err(io_err("map"))?;
        let hw = header_to_words(&header);
        let w = words.words();
        for (i, v) in hw.iter().enumerate().skip(2) {
            w[i].store(*v, Ordering::Relaxed);
        }
        w[1].store(hw[1], Ordering::Relaxed);
        // The magic's low word last: an opener that sees it sees the whole header.
        w[0].store(hw[0], Ordering::Release);
        Ok(SharedBoard::new(words, file, path, slot_count as usize))
    }

    /// Opens an existing board file (a reader or controller: `xhsa-top`, `xhsactl`); never
    /// creates one. Read and write access to the file are needed (the futex and control words).
    pub fn open_existing(path: &Path) -> Result<SharedBoard, BoardError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(OPEN_FLAGS)
            .open(path)
            .map_err(|e| open_error(path, e))?;
        trusted(&file, path)?;
        Self::attach(file, path.to_path_buf())
    }

    fn new(words: SharedWords, file: File, path: PathBuf, slot_count: usize) -> SharedBoard {
        SharedBoard {
            words,
            file,
            path,
            slot_count,
            held: Mutex::new(BTreeSet::new()),
            writing: Mutex::new(()),
            pid_ns: pid_namespace("self").unwrap_or(0),
        }
    }

    /// The header as it is now.
    pub fn header(&self) -> BoardHeader {
        let w = self.words.words();
        let mut hw = [0u32; HEADER_WORDS];
        for (i, v) in hw.iter_mut().enumerate() {
            *v = w[i].load(Ordering::Relaxed);
        }
        header_from_words(&hw)
    }

    fn attach(file: File, path: PathBuf) -> Result<SharedBoard, BoardError> {
        let deadline = Instant::now() + INIT_WAIT;
        loop {
            let len = file
                .metadata()
                .map_err(|err| BoardError::Io { path: path.clone(), what: "stat", err })?
                .len();
            if len > board_size(MAX_SLOT_COUNT) as u64 {
                return Err(BoardError::Untrusted {
                    path,
                    why: format!("{len} bytes is larger than any board"),
                });
            }
            if len as usize >= HEADER_SIZE {
                let words = SharedWords::map(&file).map_err(|err| BoardError::Io {
                    path: path.clone(),
                    what: "map",
                    err,
                })?;
                let w = words.words();
                let magic = w[0].load(Ordering::Acquire);
                if magic != 0 && magic != BOARD_MAGIC as u32 {
                    let err = LayoutError::BadMagic(
                        u64::from(magic) | (u64::from(w[1].load(Ordering::Relaxed)) << 32),
                    );
                    return Err(BoardError::Layout { path, err });
                }
                if magic == BOARD_MAGIC as u32 {
                    let mut hw = [0u32; HEADER_WORDS];
                    for (i, v) in hw.iter_mut().enumerate() {
                        *v = w[i].load(Ordering::Relaxed);
                    }
                    let header = header_from_words(&hw);
                    header
                        .validate(words.len())
                        .map_err(|err| BoardError::Layout { path: path.clone(), err })?;
                    return Ok(SharedBoard::new(words, file, path, header.slot_count as usize));
                }
            }
            if Instant::now() >= deadline {
                return Err(BoardError::NotInitialized { path });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of slots.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    fn slot_words(&self, index: usize) -> &[AtomicU32] {
        let start = HEADER_WORDS + index * SLOT_WORDS;
        &self.words.words()[start..start + SLOT_WORDS]
    }

    fn high_water(&self) -> usize {
        (self.words.words()[HIGH_WATER_WORD].load(Ordering::Acquire) as usize).min(self.slot_count)
    }

    /// Takes a free slot for `queue` of `owner`, publishing `priority` with no work.
    ///
    /// The slot's lock is taken first (an open-file-description lock on the slot's bytes of the
    /// file, held until [`release`](Self::release) or until this process is gone, whatever its
    /// pid namespace), then the slot turned live: a live slot whose lock nobody holds has a dead
    /// owner ([`cleanup_dead`](Self::cleanup_dead)).
    pub fn claim(
        &self,
        owner: Owner,
        partition: PartitionId,
        queue: QueueId,
        priority: Priority,
    ) -> Result<SlotHandle, BoardFull> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        for index in 0..self.slot_count {
            let w = self.slot_words(index);
            if w[1].load(Ordering::Relaxed) != SLOT_FREE {
                continue;
            }
            // A free slot whose lock this board still holds was taken away from it (cleared by
            // someone who could write the file): its lock is reused.
            let ours = held.contains(&index);
            if !ours && !self.lock_slot(index, libc::F_WRLCK) {
                continue;
            }
            if w[1]
                .compare_exchange(SLOT_FREE, SLOT_LIVE, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                if !ours {
                    self.lock_slot(index, libc::F_UNLCK);
                }
                continue;
            }
            held.insert(index);
            self.words.words()[HIGH_WATER_WORD].fetch_max(index as u32 + 1, Ordering::AcqRel);
            let handle = SlotHandle { index, owner };
            self.reset_control(index);
            let mut slot = Slot::claimed(owner, partition, queue, priority);
            slot.pid_ns = self.pid_ns;
            slot.owner_uid = uid();
            self.write(index, &slot);
            return Ok(handle);
        }
        Err(BoardFull { slots: self.slot_count })
    }

    /// Takes (`F_WRLCK`) or drops (`F_UNLCK`) this board object's lock on slot `index`'s bytes;
    /// `false` if another process holds it (or locking failed).
    fn lock_slot(&self, index: usize, kind: i32) -> bool {
        fcntl(self.file.as_raw_fd(), FcntlArg::F_OFD_SETLK(&slot_flock(index, kind))).is_ok()
    }

    /// Whether slot `index`'s lock is held: by this board object (its own slots), or by another
    /// open of the file (a live process, in any pid namespace). A process that is gone holds no
    /// lock: the kernel dropped it when the process's last descriptor of the file closed.
    pub fn is_held(&self, index: usize) -> bool {
        if self.held.lock().unwrap_or_else(|e| e.into_inner()).contains(&index) {
            return true;
        }
        let mut fl = slot_flock(index, libc::F_WRLCK);
        match fcntl(self.file.as_raw_fd(), FcntlArg::F_OFD_GETLK(&mut fl)) {
            Ok(_) => i32::from(fl.l_type) != libc::F_UNLCK,
            // Cannot tell: take the owner for alive (clearing a live owner's slot is worse).
            Err(_) => true,
        }
    }

    /// Whether this board object holds slot `index` (one of its own queues' slots).
    pub fn holds(&self, index: usize) -> bool {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).contains(&index)
    }

    /// Seqlock write of the owner's fields (every field from `pid` to `recent`; the caller
    /// owns the slot). The control and ack words are not touched.
    fn write(&self, index: usize, slot: &Slot) {
        let _one_writer = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.write_locked(index, slot);
    }

    /// [`write`](Self::write) with `writing` held by the caller.
    fn write_locked(&self, index: usize, slot: &Slot) {
        let words = slot_to_words(slot);
        let owner = words.iter().copied().enumerate();
        let owner = owner.filter(|&(i, _)| (2..OWNER_END).contains(&i) || i >= PID_NS_WORD);
        seqlock::write(self.slot_words(index), owner);
    }

    /// Zeroes the control and ack words of slot `index` (a slot being cleared or claimed).
    fn reset_control(&self, index: usize) {
        for word in &self.slot_words(index)[CONTROL_WORD..PID_NS_WORD] {
            word.store(0, Ordering::Relaxed);
        }
    }

    /// A consistent copy of slot `index`, or `None` if it kept changing.
    pub fn read(&self, index: usize) -> Option<Slot> {
        seqlock::read::<_, SLOT_WORDS>(self.slot_words(index), READ_ATTEMPTS)
            .map(|words| slot_from_words(&words))
    }

    /// Publishes the counters of the slot `handle` holds; `false` if it no longer holds it (a
    /// reader took the owner for dead: the caller should claim again).
    pub fn publish(&self, handle: &SlotHandle, stats: &QueueStats) -> bool {
        self.publish_with(handle, |slot| slot.stats = *stats)
    }

    /// Publishes what `update` changes in the owner's fields of the slot `handle` holds (the
    /// counters, the name, the recent preemptions), confirmed now (the counters' `beat_ns`);
    /// `false` if it no longer holds it.
    ///
    /// This board object's writes are one at a time (`writing`), so the owner's own read of its
    /// slot fails only while another process writes it: a clearer, which turns the state word
    /// from live first (then `false`), or a hostile writer keeping the sequence odd. While the
    /// slot is still live the update is skipped and `true` returned: the slot is not given up
    /// (claiming another would leave this one live with frozen counters beside it), and the
    /// owner's next publish carries everything.
    pub fn publish_with(&self, handle: &SlotHandle, update: impl FnOnce(&mut Slot)) -> bool {
        let _one_writer = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut slot) = self.read(handle.index) else {
            return self.slot_words(handle.index)[1].load(Ordering::Acquire) == SLOT_LIVE;
        };
        if !slot.is_live() || slot.owner() != handle.owner {
            return false;
        }
        let (pid, token, queue, pid_ns, owner_uid) =
            (slot.pid, slot.owner_token, slot.queue_id, slot.pid_ns, slot.owner_uid);
        update(&mut slot);
        slot.stats.beat_ns = monotonic_ns();
        (slot.pid, slot.owner_token, slot.queue_id, slot.pid_ns, slot.owner_uid) =
            (pid, token, queue, pid_ns, owner_uid);
        self.write_locked(handle.index, &slot);
        // A clearer may have started between the check and the write; its zeroing wins.
        self.slot_words(handle.index)[1].load(Ordering::Acquire) == SLOT_LIVE
    }

    /// Frees the slot `handle` holds.
    pub fn release(&self, handle: SlotHandle) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let cleared = self.clear_if(handle.index, |s| s.owner() == handle.owner);
        if held.remove(&handle.index) {
            self.lock_slot(handle.index, libc::F_UNLCK);
        }
        cleared
    }

    /// Clears slot `index` if it is live and `condition` holds for its contents.
    fn clear_if(&self, index: usize, condition: impl Fn(&Slot) -> bool) -> bool {
        let _one_writer = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.slot_words(index);
        if w[1]
            .compare_exchange(SLOT_LIVE, SLOT_CLEARING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        match self.read(index) {
            Some(slot) if condition(&slot) => {
                self.write_locked(index, &Slot { state: SLOT_CLEARING, ..Slot::default() });
                self.reset_control(index);
                w[1].store(SLOT_FREE, Ordering::Release);
                true
            }
            _ => {
                w[1].store(SLOT_LIVE, Ordering::Release);
                false
            }
        }
    }

    /// Copies of the live slots with their indices.
    pub fn live_slots(&self) -> Vec<(usize, Slot)> {
        (0..self.high_water())
            .filter_map(|i| Some((i, self.read(i)?)))
            .filter(|(_, s)| s.is_live())
            .collect()
    }

    /// Copies of the live slots.
    pub fn snapshot(&self) -> Vec<Slot> {
        (0..self.high_water()).filter_map(|i| self.read(i)).filter(Slot::is_live).collect()
    }

    /// Confirms that the owner of the slot `handle` holds is running and its counters stand
    /// (their `beat_ns`, without which readers stop counting its work after
    /// [`STALE_AFTER_NS`](xhsa_model::stats::STALE_AFTER_NS)); `false` if it no longer holds it.
    pub fn confirm(&self, handle: &SlotHandle) -> bool {
        self.publish_with(handle, |_| {})
    }

    /// What the board says now, leaving out `exclude`'s own queues.
    pub fn summary(&self, exclude: Option<Owner>) -> Summary {
        summarize(&self.snapshot(), exclude, monotonic_ns())
    }

    /// The live CU split in force and when it last changed (`CLOCK_MONOTONIC` ms, wrapping).
    pub fn split(&self) -> (SplitWord, u32) {
        let w = self.words.words();
        let split = SplitWord::from_word(w[SPLIT_WORD].load(Ordering::Acquire));
        (split, w[SPLIT_WORD + 1].load(Ordering::Relaxed))
    }

    /// Changes the live CU split from `old` to `new` if nobody changed it since `old` was read,
    /// stamps the change (`now_ms`) and wakes every watcher; `false` if another process's change
    /// came first.
    pub fn swap_split(&self, old: SplitWord, new: SplitWord, now_ns: u64) -> bool {
        let w = self.words.words();
        if w[SPLIT_WORD]
            .compare_exchange(old.word(), new.word(), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        w[SPLIT_WORD + 1].store((now_ns / 1_000_000) as u32, Ordering::Release);
        self.notify(now_ns, 0);
        true
    }

    /// The current value of the `wake` word: pass it to [`SharedBoard::wait`].
    pub fn wake_seq(&self) -> u32 {
        self.words.words()[WAKE_WORD].load(Ordering::Acquire)
    }

    /// Tells every process waiting on the board that a queue's priority or work changed: records
    /// the time (`now_ns`, `CLOCK_MONOTONIC`), bumps `wake` and, only when more than `skip`
    /// threads wait (the caller's own watcher, when the change cannot concern it), wakes them
    /// (one `FUTEX_WAKE`; never blocks).
    pub fn notify(&self, now_ns: u64, skip: u32) {
        let w = self.words.words();
        w[WAKE_NS_WORD].store(now_ns as u32, Ordering::Relaxed);
        w[WAKE_NS_WORD + 1].store((now_ns >> 32) as u32, Ordering::Relaxed);
        w[WAKE_WORD].fetch_add(1, Ordering::SeqCst);
        if w[WAITERS_WORD].load(Ordering::SeqCst) > skip {
            crate::futex::futex_wake(&w[WAKE_WORD]);
        }
    }

    /// `CLOCK_MONOTONIC` nanoseconds of the last [`SharedBoard::notify`] (0 if none; a value
    /// read while a notify writes it may mix two times: it is only used for statistics).
    pub fn last_wake_ns(&self) -> u64 {
        let w = self.words.words();
        u64::from(w[WAKE_NS_WORD].load(Ordering::Relaxed))
            | (u64::from(w[WAKE_NS_WORD + 1].load(Ordering::Relaxed)) << 32)
    }

    /// Blocks until `wake` differs from `seen` (a [`SharedBoard::notify`] since `seen` was
    /// read), `timeout` passes, or a spurious wake-up; never spins.
    pub fn wait(&self, seen: u32, timeout: Option<Duration>) {
        let w = self.words.words();
        w[WAITERS_WORD].fetch_add(1, Ordering::SeqCst);
        if w[WAKE_WORD].load(Ordering::SeqCst) == seen {
            crate::futex::futex_wait(&w[WAKE_WORD], seen, timeout);
        }
        w[WAITERS_WORD].fetch_sub(1, Ordering::SeqCst);
    }

    /// A controller's request to the owner of slot `index` (`xhsactl`). The controller first
    /// creates the request file ([`request_path`]: `O_EXCL`, never through a link) holding
    /// `"<op> <level>"`: the kernel records the controller's uid as its owner, which is how the
    /// owner learns who asks ([`verify_control`](Self::verify_control)); the words are then
    /// written under the control `seq` (odd while writing; a concurrent controller of the same
    /// slot waits its turn, bounded) and every watcher is woken. The returned [`Request`] names
    /// the `seq` the owner's [`Ack`] answers and removes the request file when dropped.
    pub fn send_control(
        &self,
        index: usize,
        op: u32,
        level: i32,
        now_ns: u64,
    ) -> Result<Request, ControlError> {
        let w = self.slot_words(index);
        for _ in 0..200 {
            let c = w[CONTROL_WORD].load(Ordering::Acquire);
            if c & 1 == 0
                && w[CONTROL_WORD]
                    .compare_exchange(c, c.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                // Never 0: an all-zero slot has no request.
                let mut seq = c.wrapping_add(2);
                if seq == 0 {
                    seq = 2;
                }
                let path = request_path(&self.path, index, seq);
                let created = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .custom_flags(OPEN_FLAGS)
                    .open(&path);
                // Once created, the file is ours: the request removes it, whatever happens next.
                let written = created.map(|f| (f, Request { seq, path: path.clone() }));
                let written = written.and_then(|(mut f, r)| {
                    f.write_all(format!("{op} {level}\n").as_bytes()).map(|()| r)
                });
                let request = match written {
                    Ok(r) => r,
                    Err(err) => {
                        // Give the slot's control word back as it was.
                        w[CONTROL_WORD].store(c, Ordering::Release);
                        return Err(ControlError::RequestFile { path, err });
                    }
                };
                w[CONTROL_WORD + 1].store(op, Ordering::Relaxed);
                w[CONTROL_WORD + 2].store(level as u32, Ordering::Relaxed);
                w[CONTROL_WORD + 3].store(uid(), Ordering::Relaxed);
                w[CONTROL_WORD].store(seq, Ordering::Release);
                self.notify(now_ns, 0);
                return Ok(request);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Err(ControlError::Busy)
    }

    /// Who sent `control`, the request waiting in slot `index`: the owner of its request file,
    /// if that file exists beside the board, is a regular file and holds the same operation and
    /// level as the slot's words. `Err` is the refusal to answer with ([`ACK_UNVERIFIED`]).
    /// The words alone prove nothing: anyone who may write the board can write any uid there.
    pub fn verify_control(&self, index: usize, control: &Control) -> Result<u32, u32> {
        let path = request_path(&self.path, index, control.seq);
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(OPEN_FLAGS)
            .open(&path)
            .map_err(|_| ACK_UNVERIFIED)?;
        let meta = file.metadata().map_err(|_| ACK_UNVERIFIED)?;
        if !meta.file_type().is_file() || meta.len() > 64 {
            return Err(ACK_UNVERIFIED);
        }
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|_| ACK_UNVERIFIED)?;
        let mut fields = text.split_whitespace();
        let op: Option<u32> = fields.next().and_then(|f| f.parse().ok());
        let level: Option<i32> = fields.next().and_then(|f| f.parse().ok());
        if op != Some(control.op) || level != Some(control.level) || fields.next().is_some() {
            return Err(ACK_UNVERIFIED);
        }
        Ok(std::os::unix::fs::MetadataExt::uid(&meta))
    }

    /// The request waiting in slot `index` for its owner: complete (even `seq`), not answered
    /// yet (the ack names another `seq`).
    pub fn pending_control(&self, index: usize) -> Option<Control> {
        let w = self.slot_words(index);
        let seq = w[CONTROL_WORD].load(Ordering::Acquire);
        if seq == 0 || seq & 1 == 1 || w[ACK_WORD].load(Ordering::Acquire) == seq {
            return None;
        }
        let c = Control {
            seq,
            op: w[CONTROL_WORD + 1].load(Ordering::Relaxed),
            level: w[CONTROL_WORD + 2].load(Ordering::Relaxed) as i32,
            uid: w[CONTROL_WORD + 3].load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (w[CONTROL_WORD].load(Ordering::Relaxed) == seq).then_some(c)
    }

    /// The owner answers request `seq` of slot `index` and wakes the controller waiting for it.
    pub fn acknowledge(&self, index: usize, seq: u32, status: u32, detail: i32) {
        let w = self.slot_words(index);
        w[ACK_WORD + 1].store(status, Ordering::Relaxed);
        w[ACK_WORD + 2].store(detail as u32, Ordering::Relaxed);
        w[ACK_WORD].store(seq, Ordering::Release);
        crate::futex::futex_wake(&w[ACK_WORD]);
    }

    /// Blocks until the owner of slot `index` answered request `seq`, or `timeout`; never spins.
    pub fn wait_ack(&self, index: usize, seq: u32, timeout: Duration) -> Option<Ack> {
        let w = self.slot_words(index);
        let deadline = Instant::now() + timeout;
        loop {
            let a = w[ACK_WORD].load(Ordering::Acquire);
            if a == seq {
                return Some(Ack {
                    seq,
                    status: w[ACK_WORD + 1].load(Ordering::Relaxed),
                    detail: w[ACK_WORD + 2].load(Ordering::Relaxed) as i32,
                    reserved: 0,
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            crate::futex::futex_wait(&w[ACK_WORD], a, Some(deadline - now));
        }
    }

    /// Frees the live slots whose lock nobody holds (their owners are gone); returns how many.
    pub fn cleanup_dead(&self) -> usize {
        let mut n = 0;
        for index in 0..self.high_water() {
            let Some(slot) = self.read(index) else { continue };
            if slot.is_live()
                && !self.is_held(index)
                && self.clear_if(index, |s| s.owner() == slot.owner())
            {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owner::this_process;
    use crate::place::{board_file_node, board_files};
    use xhsa_model::priority::Level;

    fn place(name: &str) -> BoardPlace {
        let dir =
            std::env::temp_dir().join(format!("xhsa-board-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        BoardPlace { dir, group: None }
    }

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    #[test]
    fn the_split_changes_only_from_the_value_read_and_wakes_the_watchers() {
        let place = place("split");
        let a = SharedBoard::open(&place, 3, 8).unwrap();
        let b = SharedBoard::open(&place, 3, 8).unwrap();
        let (s0, _) = a.split();
        assert_eq!(s0, SplitWord::default(), "a new board: no split");
        let seen = b.wake_seq();
        assert!(a.swap_split(s0, s0.next(40), 7_000_000));
        assert_eq!(b.split(), (SplitWord { epoch: 1, cus: 40 }, 7));
        assert_ne!(b.wake_seq(), seen, "the watchers are woken");
        // A process that read the old value loses: its change is not made.
        assert!(!b.swap_split(s0, s0.next(20), 9_000_000));
        assert_eq!(a.split(), (SplitWord { epoch: 1, cus: 40 }, 7));
        assert_eq!(a.header().split, SplitWord { epoch: 1, cus: 40 }.word());
    }

    #[test]
    fn slot_word_indices_are_the_layouts_offsets() {
        use std::mem::offset_of;
        let stats = offset_of!(Slot, stats);
        assert_eq!(stats, 8 * 4);
        assert_eq!(stats + offset_of!(QueueStats, beat_ns), 46 * 4);
        assert_eq!(stats + offset_of!(QueueStats, busy_ns), 48 * 4);
        assert_eq!(stats + offset_of!(QueueStats, own_packet_ns), 50 * 4);
        assert_eq!(stats + offset_of!(QueueStats, rounds), ROUNDS_WORD * 4);
        assert_eq!(OWNER_END * 4, offset_of!(Slot, control));
        assert_eq!(NAME_WORD * 4, offset_of!(Slot, name));
        assert_eq!(RECENT_WORD * 4, offset_of!(Slot, recent));
        assert_eq!(CONTROL_WORD * 4, offset_of!(Slot, control));
        assert_eq!(ACK_WORD * 4, offset_of!(Slot, ack));
        assert_eq!(PID_NS_WORD * 4, offset_of!(Slot, pid_ns));
        assert_eq!((PID_NS_WORD + 3) * 4, offset_of!(Slot, sharing));
        assert_eq!(SLOT_WORDS * 4, std::mem::size_of::<Slot>());
    }

    #[test]
    fn slot_words_round_trip() {
        let s = Slot {
            seq: 4,
            state: SLOT_LIVE,
            pid: 77,
            partition: 3,
            owner_token: 0x1_0000_0002,
            queue_id: 0xffff_0000_1234,
            stats: QueueStats {
                priority: -1020,
                flags: 5,
                pending: 6,
                in_flight: 7,
                submitted: 1 << 40,
                forwarded: 9,
                completed: 10,
                throttle_ns: 11,
                throttle_events: 12,
                packet_ns: 13,
                requested: -8,
                state: 2,
                preemptions: 14,
                preempted_ns: 1 << 50,
                latency: std::array::from_fn(|i| i as u32 * 3 + 1),
                beat_ns: 1 << 45,
                busy_ns: (1 << 52) | 3,
                own_packet_ns: (1 << 53) | 5,
                rounds: std::array::from_fn(|i| (1 << (40 + i)) | i as u64),
            },
            name: crate::layout::name_bytes("batch-job"),
            recent: std::array::from_fn(|i| RecentPreemption {
                start_ns: 100 + i as u64,
                duration_ns: 7 * i as u64,
            }),
            control: Control { seq: 4, op: 1, level: -3, uid: 1000 },
            ack: Ack { seq: 2, status: 1, detail: -7, reserved: 0 },
            pid_ns: 0xf000_0000_4026_5318,
            owner_uid: 1000,
            sharing: 0x2078_00fa,
        };
        let back = slot_from_words(&slot_to_words(&s));
        assert_eq!(back, s);
        assert_eq!(back.name(), "batch-job");
    }

    #[test]
    fn board_file_names() {
        assert_eq!(board_file_node("xhsa-u1000-gpu2.board"), Some(2));
        assert_eq!(board_file_node("xhsa-g44-gpu17.board"), Some(17));
        for bad in [
            "xhsa-u-gpu2.board",
            "xhsa-x1-gpu2.board",
            "xhsa-u1-gpu.board",
            "xhsa-u1-gpu2.boardx",
            "other",
            "xhsa-u1a-gpu2.board",
        ] {
            assert_eq!(board_file_node(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_controller_request_reaches_the_owner_once_and_its_answer_wakes_the_controller() {
        let place = place("control");
        let owner_side = std::sync::Arc::new(SharedBoard::open(&place, 4, 8).unwrap());
        let me = this_process();
        let h = owner_side.claim(me, PartitionId(0), QueueId(9), p(0)).unwrap();
        assert_eq!(owner_side.pending_control(h.index()), None, "a fresh slot has no request");
        let ctl = SharedBoard::open_existing(owner_side.path()).unwrap();
        let wake = ctl.wake_seq();
        let request = ctl.send_control(h.index(), crate::layout::OP_SET_PRIORITY, 7, 1).unwrap();
        let seq = request.seq;
        assert_ne!(ctl.wake_seq(), wake, "watchers are woken");
        let got = owner_side.pending_control(h.index()).unwrap();
        assert_eq!(
            (got.seq, got.op, got.level, got.uid),
            (seq, crate::layout::OP_SET_PRIORITY, 7, uid())
        );
        assert_eq!(
            owner_side.verify_control(h.index(), &got),
            Ok(uid()),
            "the request file names the sender"
        );
        // Publishing does not disturb the request.
        assert!(owner_side
            .publish(&h, &QueueStats { priority: p(0).rank(), pending: 1, ..Default::default() }));
        assert_eq!(owner_side.pending_control(h.index()).map(|c| c.seq), Some(seq));
        let owner2 = owner_side.clone();
        let idx = h.index();
        let answer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            owner2.acknowledge(idx, seq, crate::layout::ACK_ABOVE_CAP, 0);
        });
        let ack = ctl.wait_ack(h.index(), seq, Duration::from_secs(5)).expect("answered");
        answer.join().unwrap();
        assert_eq!((ack.seq, ack.status, ack.detail), (seq, crate::layout::ACK_ABOVE_CAP, 0));
        assert_eq!(owner_side.pending_control(h.index()), None, "answered once");
        // Nobody answers: the wait times out.
        drop(request);
        let seq2 = ctl.send_control(h.index(), crate::layout::OP_PAUSE, 0, 2).unwrap().seq;
        assert_ne!(seq2, seq);
        assert_eq!(ctl.wait_ack(h.index(), seq2, Duration::from_millis(20)), None);
        // A released slot forgets the request.
        assert!(owner_side.release(h));
        let again = owner_side.claim(me, PartitionId(0), QueueId(10), p(0)).unwrap();
        assert_eq!(again.index(), idx);
        assert_eq!(owner_side.pending_control(again.index()), None);
        assert!(matches!(
            SharedBoard::open_existing(&place.dir.join("xhsa-u1-gpu99.board")),
            Err(BoardError::Io { .. })
        ));
        assert_eq!(board_files(&place.dir).unwrap(), vec![(owner_side.path().to_path_buf(), 4)]);
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn a_second_process_sees_the_first_ones_queues_and_its_exit() {
        let place = place("two");
        let a = SharedBoard::open(&place, 1, 16).unwrap();
        let b = SharedBoard::open(&place, 1, 1024).unwrap();
        assert_eq!(b.slot_count(), 16, "the creator's size wins");
        assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o600);
        let me = this_process();
        // Another process with the same pid (another container's): told apart by its token.
        let other = Owner { pid: me.pid, token: me.token.wrapping_add(1) };
        let hp = a.claim(me, PartitionId(0), QueueId(1), p(5)).unwrap();
        let lp = b.claim(other, PartitionId(0), QueueId(2), p(-5)).unwrap();
        assert_ne!(hp.index(), lp.index());
        assert_eq!(b.summary(None).highest_with_work, None, "no work yet");
        assert!(
            a.publish(&hp, &QueueStats { priority: p(5).rank(), pending: 3, ..Default::default() })
        );
        assert_eq!(b.summary(Some(other)).highest_with_work, Some(p(5)));
        assert_eq!(b.summary(Some(me)).live, 1);
        assert_eq!(a.summary(Some(me)).highest_with_work, None, "a process leaves itself out");
        // While `b` is open its owner lives, whatever its pid says.
        assert!(a.is_held(lp.index()) && b.is_held(hp.index()));
        assert_eq!(a.cleanup_dead(), 0);
        assert_eq!(b.cleanup_dead(), 0, "a live owner's slots stay, its own included");
        // `b` goes (its descriptor closes, as at a process's exit): its lock with it.
        let lp_index = lp.index();
        drop(b);
        assert!(!a.is_held(lp_index));
        assert_eq!(a.cleanup_dead(), 1);
        assert_eq!(a.cleanup_dead(), 0);
        assert!(a.read(lp_index).is_some_and(|s| !s.is_live()));
        let b = SharedBoard::open(&place, 1, 1024).unwrap();
        assert!(a.release(hp));
        assert_eq!(b.summary(None).live, 0);
        let again = b.claim(me, PartitionId(0), QueueId(3), p(0)).unwrap();
        assert_eq!(again.index(), 0, "freed slots are reused");
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn full_board_and_foreign_files_are_reported() {
        let place = place("full");
        let a = SharedBoard::open(&place, 2, 2).unwrap();
        let me = this_process();
        a.claim(me, PartitionId(0), QueueId(1), p(0)).unwrap();
        a.claim(me, PartitionId(0), QueueId(2), p(0)).unwrap();
        assert_eq!(a.claim(me, PartitionId(0), QueueId(3), p(0)), Err(BoardFull { slots: 2 }));
        // A file that is not a board (wrong magic) is never used.
        let bogus = place.path(9, uid());
        std::fs::write(&bogus, vec![0xabu8; 4096]).unwrap();
        std::fs::set_permissions(&bogus, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = SharedBoard::open(&place, 9, 16).err().expect("not a board");
        assert!(matches!(err, BoardError::Layout { err: LayoutError::BadMagic(_), .. }), "{err}");
        assert!(err.to_string().contains("not an xhsa board"), "{err}");
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn files_another_user_could_have_planted_are_refused_untouched() {
        let place = place("hostile");
        let is_root = uid() == 0;
        // Open to others (0666), a symbolic link to a file of ours, a FIFO, another user's file.
        let open = place.path(1, uid());
        std::fs::write(&open, vec![0x11u8; 4096]).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let target = place.dir.join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::os::unix::fs::symlink(&target, place.path(2, uid())).unwrap();
        nix::unistd::mkfifo(&place.path(3, uid()), nix::sys::stat::Mode::from_bits_truncate(0o600))
            .unwrap();
        for node in [1, 2, 3] {
            let err = SharedBoard::open(&place, node, 16).err().expect("refused");
            assert!(matches!(err, BoardError::Untrusted { .. }), "node {node}: {err}");
            assert!(err.to_string().contains("refused"), "{err}");
            let err = SharedBoard::open_existing(&place.path(node, uid())).err().expect("refused");
            assert!(matches!(err, BoardError::Untrusted { .. }), "node {node}: {err}");
        }
        assert!(SharedBoard::open(&place, 2, 16)
            .err()
            .expect("refused")
            .to_string()
            .contains("symbolic link"));
        assert_eq!(std::fs::read(&open).unwrap(), vec![0x11u8; 4096], "its bytes untouched");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        if is_root {
            // Root's board file owned by someone else: refused too.
            let theirs = place.path(4, uid());
            std::fs::write(&theirs, vec![0u8; 4096]).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            let err = SharedBoard::open(&place, 4, 16).err().expect("refused");
            assert!(err.to_string().contains("owned by uid 65534"), "{err}");
        }
        // A board of ours, of an impossible size: refused before anything is mapped.
        let huge = place.path(5, uid());
        let f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&huge).unwrap();
        f.set_len(board_size(MAX_SLOT_COUNT) as u64 + 4096).unwrap();
        assert!(matches!(SharedBoard::open(&place, 5, 16), Err(BoardError::Untrusted { .. })));
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn a_request_without_its_senders_file_is_not_believed() {
        let place = place("forged");
        let owner = SharedBoard::open(&place, 6, 8).unwrap();
        let h = owner.claim(this_process(), PartitionId(0), QueueId(1), p(0)).unwrap();
        // A writer of the board puts words in the control slot claiming to be root, with no
        // request file.
        let w = owner.slot_words(h.index());
        w[CONTROL_WORD + 1].store(crate::layout::OP_PAUSE, Ordering::Relaxed);
        w[CONTROL_WORD + 3].store(0, Ordering::Relaxed);
        w[CONTROL_WORD].store(8, Ordering::Release);
        let forged = owner.pending_control(h.index()).expect("the words look like a request");
        assert_eq!(forged.uid, 0);
        assert_eq!(owner.verify_control(h.index(), &forged), Err(ACK_UNVERIFIED));
        // A request file that says something else than the words: not believed either.
        std::fs::write(request_path(owner.path(), h.index(), 8), b"1 255\n").unwrap();
        assert_eq!(owner.verify_control(h.index(), &forged), Err(ACK_UNVERIFIED));
        // The file's owner, not the words, is the sender.
        std::fs::write(
            request_path(owner.path(), h.index(), 8),
            format!("{} 0\n", crate::layout::OP_PAUSE),
        )
        .unwrap();
        assert_eq!(owner.verify_control(h.index(), &forged), Ok(uid()));
        if uid() == 0 {
            std::os::unix::fs::chown(request_path(owner.path(), h.index(), 8), Some(4321), None)
                .unwrap();
            assert_eq!(owner.verify_control(h.index(), &forged), Ok(4321));
        }
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn a_slot_held_odd_by_a_writer_is_skipped_as_idle() {
        let place = place("odd");
        let board = SharedBoard::open(&place, 7, 8).unwrap();
        let h = board.claim(this_process(), PartitionId(0), QueueId(1), p(3)).unwrap();
        assert!(board
            .publish(&h, &QueueStats { priority: p(3).rank(), pending: 2, ..Default::default() }));
        assert_eq!(board.summary(None).highest_with_work, Some(p(3)));
        // A writer that never finishes (crashed mid-write, or hostile).
        board.slot_words(h.index())[0].fetch_add(1, Ordering::AcqRel);
        assert_eq!(board.read(h.index()), None);
        assert_eq!(
            board.summary(None).highest_with_work,
            None,
            "an unreadable slot holds nobody back"
        );
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn concurrent_claims_and_reads_stay_consistent() {
        let place = place("threads");
        let board = std::sync::Arc::new(SharedBoard::open(&place, 3, 64).unwrap());
        let me = this_process();
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let board = board.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for q in 0..8 {
                        mine.push(
                            board
                                .claim(me, PartitionId(0), QueueId(t * 100 + q), p(t as i64))
                                .unwrap(),
                        );
                    }
                    for round in 0..200u32 {
                        for h in &mine {
                            let stats = QueueStats {
                                priority: p(t as i64).rank(),
                                pending: round,
                                in_flight: round,
                                ..Default::default()
                            };
                            assert!(board.publish(h, &stats));
                        }
                        for s in board.snapshot() {
                            assert_eq!(s.stats.pending, s.stats.in_flight, "torn read");
                        }
                    }
                    mine
                })
            })
            .collect();
        let all: Vec<SlotHandle> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let mut indices: Vec<usize> = all.iter().map(|h| h.index()).collect();
        indices.sort();
        indices.dedup();
        assert_eq!(indices.len(), 32, "every claim got its own slot");
        assert_eq!(board.summary(None).highest_with_work, Some(p(3)));
        std::fs::remove_dir_all(&place.dir).unwrap();
    }
}
