//! The board: one shared-memory table per GPU where every queue of every process using libxhsa
//! publishes its priority and its work, so each process can tell whether higher-priority work
//! exists elsewhere on the GPU ([`xhsa_model::contention::Contention`]) and `xhsa-top` can show it
//! all.
//!
//! This module is the data model and the pure functions over it: plain `#[repr(C)]` data, no
//! atomics, no mapping. The shared-memory edge maps the file, checks the header with
//! [`BoardHeader::validate`], and wraps each slot access in atomics and a seqlock (the slot's
//! [`seq`](Slot::seq) word: odd while a writer is inside, readers retry on a change); it claims a
//! slot with a compare-and-swap on [`state`](Slot::state). Everything here assumes it was handed
//! a consistent copy.
//!
//! # Layout, version 8
//!
//! All fields little endian and naturally aligned; the file is `64 + slot_count * 400` bytes
//! ([`board_size`]).
//!
//! Header ([`BoardHeader`], 64 bytes at offset 0):
//!
//! | offset | type       | field            | value                                          |
//! |-------:|------------|------------------|------------------------------------------------|
//! | 0      | `u64`      | `magic`          | [`BOARD_MAGIC`], the bytes `XHSABRD\0`         |
//! | 8      | `u32`      | `layout_version` | [`BOARD_LAYOUT_VERSION`] (8)                   |
//! | 12     | `u32`      | `slot_count`     | number of slots, `1..=`[`MAX_SLOT_COUNT`]      |
//! | 16     | `u32`      | `slot_size`      | 400                                            |
//! | 20     | `u32`      | `stats_version`  | [`STATS_LAYOUT_VERSION`] of the embedded stats |
//! | 24     | `u32`      | `header_size`    | 64                                             |
//! | 28     | `u32`      | `gpu_id`         | the device: its KFD node id (see below)        |
//! | 32     | `u32`      | `high_water`     | slots `0..high_water` have ever been claimed   |
//! | 36     | `u32`      | `wake`           | futex word: bumped when a queue's priority or whether it has work changes |
//! | 40     | `u32`      | `waiters`        | threads blocked on `wake` (wakers skip the syscall at 0) |
//! | 44     | `u32`      | `reserved1`      | zero                                           |
//! | 48     | `u64`      | `wake_ns`        | `CLOCK_MONOTONIC` ns of the last bump of `wake` (wake-up latency) |
//! | 56     | `u32`      | `split`          | the live CU split (`XHSA_RESERVE=auto@LEVEL`): epoch in the high 16 bits, reserved CUs in the low 16 (0: the whole GPU); changed only by compare-and-swap ([`SplitWord`]) |
//! | 60     | `u32`      | `split_at_ms`    | `CLOCK_MONOTONIC` ms (wrapping) of the last change of `split`, written by the process whose swap made it |
//!
//! Slot `i` ([`Slot`], 400 bytes at offset `64 + 400 * i`):
//!
//! | offset | type         | field         | meaning                                                        |
//! |-------:|--------------|---------------|----------------------------------------------------------------|
//! | 0      | `u32`        | `seq`         | seqlock word of the shared-memory edge (0 in plain data)       |
//! | 4      | `u32`        | `state`       | [`SLOT_FREE`] (0), [`SLOT_LIVE`] (1), [`SLOT_CLEARING`] (2)    |
//! | 8      | `u32`        | `pid`         | owning process, in its own pid namespace                       |
//! | 12     | `u32`        | `partition`   | CU partition id of the queue                                   |
//! | 16     | `u64`        | `owner_token` | the owner's random token ([`Owner`])                           |
//! | 24     | `u64`        | `queue_id`    | the owner's [`QueueId`]                                        |
//! | 32     | `QueueStats` | `stats`       | priorities, state, counters, latency histogram ([`xhsa_model::stats`], 240 bytes) |
//! | 272    | `[u8; 16]`   | `name`        | the owner's process name (`comm`), NUL-padded                  |
//! | 288    | `[RecentPreemption; 4]` | `recent` | the last preemptions, newest first: `start_ns` (`CLOCK_MONOTONIC`), `duration_ns` (0 while still off); zeros when unused |
//! | 352    | `Control`    | `control`     | a request of `xhsactl` ([`Control`]): `seq`, `op`, `level`, `uid` |
//! | 368    | `Ack`        | `ack`         | the owner's answer ([`Ack`]): `seq`, `status`, `detail`, reserved |
//! | 384    | `u64`        | `pid_ns`      | the owner's pid namespace (inode of `/proc/self/ns/pid`), 0 if unknown |
//! | 392    | `u32`        | `owner_uid`   | the owner's real uid                                           |
//! | 396    | `u32`        | `sharing`     | the owner's sharing policy: its code ([`xhsa_model::sharing::Sharing::code`]) in the high 16 bits, the share its held queues get now in per mille in the low 16 |
//!
//! The owner writes bytes 8..352 and 384..400 under the seqlock; `control` is written by
//! controllers and `ack` by the owner outside it (each word atomically, the protocol is in
//! [`crate::shared`]).
//!
//! Version 8 grew the stats by `rounds` (stats layout 7: how many rounds of work-groups each
//! queue's dispatches need on each eighth of the GPU, from which the live CU split expects a
//! reserve's slowdown before trying it), so the slot by 64 bytes. Version 7 grew the stats by `own_packet_ns` (stats layout 6: each queue's time per packet
//! without higher-priority work beside it, which its owner's take-off decisions use), so the slot
//! by 8 bytes. Version 6 grew the stats by `busy_ns` (stats layout 5: each queue's cumulative busy time,
//! which the live CU split measures by), so the slot by 8 bytes. Version 5 turned the slot's last reserved word into `sharing` (the owner's `XHSA_POLICY`
//! and its state, for `xhsa-top`) and the header's last reserved bytes into the live CU split. Version 4 identifies owners without trusting pids (containers have their own pid
//! namespaces): `owner_start` became a random `owner_token`, liveness is the owner's lock on its
//! slot's bytes of the file (an open-file-description lock, which the kernel drops when the
//! process goes, in whatever namespace), and `pid_ns`/`owner_uid` let a monitor in another
//! namespace find the process and its user. Version 3 grew the slot from 128 to 320 bytes for `xhsa-top` and `xhsactl`: the stats'
//! requested priority, state, preemption counters and latency histogram, the process name, the
//! recent preemptions, and the control/ack words. Version 2 added `wake` and `waiters` (version 1
//! had zeros there) and the stats' packet-time estimate (see [`xhsa_model::stats`]): each process's preemption watcher blocks on `wake`
//! (`FUTEX_WAIT` on the shared mapping) and every publisher whose queue's priority or "has work"
//! changed bumps it and wakes the waiters, so a batch process learns of a latency-critical
//! request within a futex wake-up, without polling.
//!
//! A queue has work when `stats.pending + stats.in_flight > 0`. Entries of dead processes are
//! removed by [`cleanup_stale`] (over plain copies, with a liveness test given by the caller;
//! the shared-memory edge tests the owner's lock), which every process runs when it attaches and
//! periodically, so a crashed process never throttles the others.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::fmt;
use xhsa_model::contention::{Contention, ExternalWork};
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::priority::Priority;
use xhsa_model::stats::{QueueStats, FLAG_PAUSED, STATS_LAYOUT_VERSION};

/// `XHSABRD\0`, little endian.
pub const BOARD_MAGIC: u64 = u64::from_le_bytes(*b"XHSABRD\0");
/// Version of the board layout.
pub const BOARD_LAYOUT_VERSION: u32 = 8;
/// Size of the header in bytes.
pub const HEADER_SIZE: usize = 64;
/// Size of one slot in bytes.
pub const SLOT_SIZE: usize = 400;
/// Slots a board has unless configured otherwise (one per queue: 400 KiB in all).
pub const DEFAULT_SLOT_COUNT: u32 = 1024;
/// Most slots a board may have (20 MiB).
pub const MAX_SLOT_COUNT: u32 = 65536;

/// `state` of an unused slot.
pub const SLOT_FREE: u32 = 0;
/// `state` of a slot owned by a live queue.
pub const SLOT_LIVE: u32 = 1;
/// `state` of a slot being cleared (by its owner or by the process that found the owner dead);
/// readers treat it as free, nobody may claim it until it is [`SLOT_FREE`] again.
pub const SLOT_CLEARING: u32 = 2;

/// Bytes of a board with `slot_count` slots.
pub fn board_size(slot_count: u32) -> usize {
    HEADER_SIZE + SLOT_SIZE * slot_count as usize
}

/// The board header; see the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BoardHeader {
    /// [`BOARD_MAGIC`].
    pub magic: u64,
    /// [`BOARD_LAYOUT_VERSION`].
    pub layout_version: u32,
    /// Number of slots.
    pub slot_count: u32,
    /// [`SLOT_SIZE`].
    pub slot_size: u32,
    /// [`STATS_LAYOUT_VERSION`].
    pub stats_version: u32,
    /// [`HEADER_SIZE`].
    pub header_size: u32,
    /// The device: its KFD node id (`HSA_AMD_AGENT_INFO_DRIVER_NODE_ID`, the same in every
    /// process of the machine).
    pub gpu_id: u32,
    /// Slots `0..high_water` have ever been claimed; readers scan no further. Only grows.
    pub high_water: u32,
    /// Futex word bumped on every change of a queue's priority or work (see the module doc).
    pub wake: u32,
    /// Threads blocked on `wake`.
    pub waiters: u32,
    /// Zero.
    pub reserved1: u32,
    /// `CLOCK_MONOTONIC` nanoseconds of the last bump of `wake`.
    pub wake_ns: u64,
    /// The live CU split ([`SplitWord`]).
    pub split: u32,
    /// When `split` last changed, `CLOCK_MONOTONIC` ms (wrapping).
    pub split_at_ms: u32,
}

/// The header's live CU split: which reserved size is in force and its epoch (every change a new
/// one, so a process can tell it has applied the latest).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SplitWord {
    pub epoch: u16,
    /// Reserved CUs; 0: no split, the whole GPU.
    pub cus: u16,
}

impl SplitWord {
    /// From the header word.
    pub fn from_word(w: u32) -> SplitWord {
        SplitWord { epoch: (w >> 16) as u16, cus: w as u16 }
    }

    /// The header word.
    pub fn word(self) -> u32 {
        (u32::from(self.epoch) << 16) | u32::from(self.cus)
    }

    /// The next split, of `cus` CUs.
    pub fn next(self, cus: u16) -> SplitWord {
        SplitWord { epoch: self.epoch.wrapping_add(1), cus }
    }
}

/// Why a mapped board cannot be used.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// Not a board (or not initialized yet).
    BadMagic(u64),
    /// A board of another libxhsa layout version.
    Version {
        /// Version found.
        found: u32,
        /// Version this build writes.
        expected: u32,
    },
    /// A board whose embedded stats have another layout version.
    StatsVersion {
        /// Version found.
        found: u32,
        /// Version this build writes.
        expected: u32,
    },
    /// Header or slot size differs from this build's.
    Size {
        /// `(header_size, slot_size)` found.
        found: (u32, u32),
    },
    /// `slot_count` is 0 or above [`MAX_SLOT_COUNT`].
    SlotCount(u32),
    /// The mapping is shorter than the header says.
    Truncated {
        /// Bytes mapped.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::BadMagic(m) => write!(f, "not an xhsa board (magic {m:#018x})"),
            LayoutError::Version { found, expected } => {
                write!(f, "board layout version {found}, this build of xhsa reads and writes version {expected} (the board was made by another release of xhsa: use tools and libraries of one release, or another XHSA_BOARD_DIR)")
            }
            LayoutError::StatsVersion { found, expected } => {
                write!(f, "board stats layout version {found}, this build of xhsa reads and writes version {expected} (another release of xhsa made the board)")
            }
            LayoutError::Size { found: (h, s) } => {
                write!(f, "board header/slot sizes {h}/{s}, expected {HEADER_SIZE}/{SLOT_SIZE}")
            }
            LayoutError::SlotCount(n) => {
                write!(f, "board slot count {n} outside 1..={MAX_SLOT_COUNT}")
            }
            LayoutError::Truncated { len, needed } => {
                write!(f, "board file is {len} bytes, needs {needed}")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

impl BoardHeader {
    /// The header of a new board, or `None` for a slot count outside `1..=MAX_SLOT_COUNT`.
    pub fn new(slot_count: u32, gpu_id: u32) -> Option<BoardHeader> {
        (1..=MAX_SLOT_COUNT).contains(&slot_count).then_some(BoardHeader {
            magic: BOARD_MAGIC,
            layout_version: BOARD_LAYOUT_VERSION,
            slot_count,
            slot_size: SLOT_SIZE as u32,
            stats_version: STATS_LAYOUT_VERSION,
            header_size: HEADER_SIZE as u32,
            gpu_id,
            high_water: 0,
            wake: 0,
            waiters: 0,
            reserved1: 0,
            wake_ns: 0,
            split: 0,
            split_at_ms: 0,
        })
    }

    /// Checks a header found in a mapping of `mapped_len` bytes.
    pub fn validate(&self, mapped_len: usize) -> Result<(), LayoutError> {
        if self.magic != BOARD_MAGIC {
            return Err(LayoutError::BadMagic(self.magic));
        }
        if self.layout_version != BOARD_LAYOUT_VERSION {
            return Err(LayoutError::Version {
                found: self.layout_version,
                expected: BOARD_LAYOUT_VERSION,
            });
        }
        if self.stats_version != STATS_LAYOUT_VERSION {
            return Err(LayoutError::StatsVersion {
                found: self.stats_version,
                expected: STATS_LAYOUT_VERSION,
            });
        }
        if self.header_size as usize != HEADER_SIZE || self.slot_size as usize != SLOT_SIZE {
            return Err(LayoutError::Size { found: (self.header_size, self.slot_size) });
        }
        if !(1..=MAX_SLOT_COUNT).contains(&self.slot_count) {
            return Err(LayoutError::SlotCount(self.slot_count));
        }
        let needed = board_size(self.slot_count);
        if mapped_len < needed {
            return Err(LayoutError::Truncated { len: mapped_len, needed });
        }
        Ok(())
    }
}

/// A process, as the board identifies it: its pid (in its own pid namespace: processes of two
/// containers may have the same one) and a random token it drew when it opened the board, so
/// that two processes never share an owner. Whether the owner still runs is not read from its
/// pid but from the lock it holds on its slots ([`crate::shared::SharedBoard::is_held`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// Process id, as the owner sees it.
    pub pid: u32,
    /// The owner's random token (never 0 for a real owner).
    pub token: u64,
}

/// Recent preemptions a slot keeps.
pub const RECENT_PREEMPTIONS: usize = 4;
/// Bytes of the process name.
pub const NAME_BYTES: usize = 16;

/// One preemption of a queue, as its slot keeps it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RecentPreemption {
    /// `CLOCK_MONOTONIC` nanoseconds when it was taken off (0: unused entry).
    pub start_ns: u64,
    /// How long it stayed off; 0 while still off.
    pub duration_ns: u64,
}

/// `Control::op`: no request.
pub const OP_NONE: u32 = 0;
/// `Control::op`: run the queue at level `level` (the operator's override).
pub const OP_SET_PRIORITY: u32 = 1;
/// `Control::op`: drop the operator's override (back to the requested priority).
pub const OP_CLEAR_PRIORITY: u32 = 2;
/// `Control::op`: pause: hold the queue's packets and take it off the GPU.
pub const OP_PAUSE: u32 = 3;
/// `Control::op`: resume a paused queue.
pub const OP_RESUME: u32 = 4;
/// Give the owner's process another sharing policy (`level`: its code,
/// [`xhsa_model::sharing::Sharing::code`]); the policy is the process's, for every GPU.
pub const OP_SET_POLICY: u32 = 5;

/// A controller's request to the owner of a slot (`xhsactl`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Control {
    /// Even when complete; a controller makes it odd while it writes the other words.
    pub seq: u32,
    /// `OP_*`.
    pub op: u32,
    /// The level of [`OP_SET_PRIORITY`].
    pub level: i32,
    /// The uid the controller says it has, for display. The owner does not trust it: it takes
    /// the requester's uid from the request file the controller created
    /// ([`crate::shared::SharedBoard::verify_control`]).
    pub uid: u32,
}

/// `Ack::status`: applied.
pub const ACK_APPLIED: u32 = 1;
/// `Ack::status`: refused, the level is above the cap for non-root users (`detail`: the cap).
pub const ACK_ABOVE_CAP: u32 = 2;
/// `Ack::status`: refused, the operation is unknown to the owner's libxhsa.
pub const ACK_UNKNOWN_OP: u32 = 3;
/// `Ack::status`: refused, the level is not a level (`-256..=255`).
pub const ACK_BAD_LEVEL: u32 = 4;
/// `Ack::status`: refused, the request came without a valid request file of its sender (its
/// uid could not be established).
pub const ACK_UNVERIFIED: u32 = 5;
/// `Ack::status`: refused, the sender is neither root nor the owner's user (`detail`: the
/// sender's uid).
pub const ACK_NOT_PERMITTED: u32 = 6;

/// The owner's answer to the last [`Control`] it read.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Ack {
    /// The `Control::seq` answered.
    pub seq: u32,
    /// `ACK_*`.
    pub status: u32,
    /// Detail of a refusal (the cap for [`ACK_ABOVE_CAP`]).
    pub detail: i32,
    /// Zero.
    pub reserved: u32,
}

/// A process name as the slot stores it: the first [`NAME_BYTES`] bytes, NUL-padded.
pub fn name_bytes(name: &str) -> [u8; NAME_BYTES] {
    let mut out = [0u8; NAME_BYTES];
    let mut n = name.len().min(NAME_BYTES);
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// One board slot; see the module doc.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Slot {
    /// Seqlock word of the shared-memory edge; plain data keeps 0.
    pub seq: u32,
    /// [`SLOT_FREE`] or [`SLOT_LIVE`].
    pub state: u32,
    /// Owning process id, in the owner's pid namespace.
    pub pid: u32,
    /// CU partition of the queue.
    pub partition: u32,
    /// The owner's random token ([`Owner::token`]).
    pub owner_token: u64,
    /// The owner's queue id.
    pub queue_id: u64,
    /// The queue's published counters.
    pub stats: QueueStats,
    /// The owner's process name, NUL-padded.
    pub name: [u8; NAME_BYTES],
    /// The last preemptions, newest first.
    pub recent: [RecentPreemption; RECENT_PREEMPTIONS],
    /// A controller's request.
    pub control: Control,
    /// The owner's answer.
    pub ack: Ack,
    /// The owner's pid namespace (the inode of `/proc/self/ns/pid`), 0 if unknown: with
    /// [`Slot::pid`] it finds the process from another namespace ([`crate::owner::Locator`]).
    pub pid_ns: u64,
    /// The owner's real uid.
    pub owner_uid: u32,
    /// The owner's sharing policy: code << 16 | share per mille ([`Slot::sharing`]).
    pub sharing: u32,
}

impl Slot {
    /// A freshly claimed slot: live, owned by `owner` for `queue`, publishing `priority` with
    /// no work (`seq` 0: the shared-memory edge keeps its own).
    pub fn claimed(
        owner: Owner,
        partition: PartitionId,
        queue: QueueId,
        priority: Priority,
    ) -> Slot {
        Slot {
            seq: 0,
            state: SLOT_LIVE,
            pid: owner.pid,
            partition: partition.0,
            owner_token: owner.token,
            queue_id: queue.0,
            stats: QueueStats {
                priority: priority.rank(),
                requested: priority.rank(),
                ..QueueStats::default()
            },
            ..Slot::default()
        }
    }

    /// A key for the slot's queue, the same in every process's view and stable while the queue
    /// lives (its slot index is not: a queue that moves partitions is claimed again).
    pub fn queue_key(&self) -> u64 {
        self.owner_token ^ self.queue_id.rotate_left(32)
    }

    /// The owner's sharing policy (`None`: a code this build does not know) and the share its
    /// held queues get now, per mille.
    pub fn sharing(&self) -> (Option<xhsa_model::sharing::Sharing>, u32) {
        (
            xhsa_model::sharing::Sharing::from_code((self.sharing >> 16) as u16),
            self.sharing & 0xffff,
        )
    }

    /// The sharing word of `policy` with its held queues' share now, per mille.
    pub fn sharing_word(policy: xhsa_model::sharing::Sharing, share_permille: u32) -> u32 {
        (u32::from(policy.code()) << 16) | share_permille.min(1000)
    }

    /// The owner's process name.
    pub fn name(&self) -> String {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }

    /// Whether a live queue owns the slot.
    pub fn is_live(&self) -> bool {
        self.state == SLOT_LIVE
    }

    /// The owner (meaningful when live).
    pub fn owner(&self) -> Owner {
        Owner { pid: self.pid, token: self.owner_token }
    }

    /// The published priority of a live slot with work, as a reader at `now_ns`
    /// (`CLOCK_MONOTONIC`) counts it ([`QueueStats::has_work_at`]: only while its owner confirms
    /// it); `None` if free, idle, stale or undecodable.
    pub fn priority_with_work(&self, now_ns: u64) -> Option<Priority> {
        if self.is_live() && self.stats.has_work_at(now_ns) {
            self.stats.priority()
        } else {
            None
        }
    }
}

/// Every slot is taken.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BoardFull {
    /// Number of slots.
    pub slots: usize,
}

impl fmt::Display for BoardFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "all {} board slots are taken", self.slots)
    }
}

impl std::error::Error for BoardFull {}

/// Takes the first free slot for `queue` of `owner`; returns its index. The slot starts with
/// zeroed stats at `priority`.
pub fn claim(
    slots: &mut [Slot],
    owner: Owner,
    partition: PartitionId,
    queue: QueueId,
    priority: Priority,
) -> Result<usize, BoardFull> {
    let index =
        slots.iter().position(|s| s.state == SLOT_FREE).ok_or(BoardFull { slots: slots.len() })?;
    slots[index] =
        Slot { seq: slots[index].seq, ..Slot::claimed(owner, partition, queue, priority) };
    Ok(index)
}

fn owned(slots: &[Slot], index: usize, owner: Owner) -> bool {
    slots.get(index).is_some_and(|s| s.is_live() && s.owner() == owner)
}

fn clear(slot: &mut Slot) {
    *slot = Slot { seq: slot.seq, ..Slot::default() };
}

/// Frees slot `index` if `owner` holds it; returns whether it did.
pub fn release(slots: &mut [Slot], index: usize, owner: Owner) -> bool {
    if !owned(slots, index, owner) {
        return false;
    }
    clear(&mut slots[index]);
    true
}

/// Frees every slot of `owner` (process exit); returns how many.
pub fn release_all(slots: &mut [Slot], owner: Owner) -> usize {
    let mut n = 0;
    for slot in slots.iter_mut().filter(|s| s.is_live() && s.owner() == owner) {
        clear(slot);
        n += 1;
    }
    n
}

/// Publishes a queue's counters into slot `index` if `owner` holds it; returns whether it did.
pub fn publish(slots: &mut [Slot], index: usize, owner: Owner, stats: &QueueStats) -> bool {
    if !owned(slots, index, owner) {
        return false;
    }
    slots[index].stats = *stats;
    true
}

/// Frees the slots of owners `is_alive` says are gone; returns how many. Liveness is the
/// caller's: the edge checks `/proc/<pid>/stat` (existence and start time).
pub fn cleanup_stale(slots: &mut [Slot], is_alive: impl Fn(Owner) -> bool) -> usize {
    let mut n = 0;
    for slot in slots.iter_mut().filter(|s| s.state != SLOT_FREE) {
        if !is_alive(slot.owner()) {
            clear(slot);
            n += 1;
        }
    }
    n
}

/// What the board says about the GPU.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Highest priority of a queue with work.
    pub highest_with_work: Option<Priority>,
    /// Live slots counted.
    pub live: usize,
    /// Live slots with work.
    pub with_work: usize,
    /// Live slots whose priority does not decode (ignored).
    pub invalid: usize,
}

impl Summary {
    /// Whether some queue has work at a priority above `p`.
    pub fn has_higher_work(&self, p: Priority) -> bool {
        self.highest_with_work.is_some_and(|h| h > p)
    }

    /// The board's part of the window's view.
    pub fn contention(&self) -> Contention {
        Contention::external(self.highest_with_work)
    }
}

fn counted(slot: &Slot, exclude: Option<Owner>) -> bool {
    slot.is_live() && exclude.is_none_or(|me| slot.owner() != me)
}

/// Summarizes the live slots at `now_ns` (`CLOCK_MONOTONIC`: work its owner stopped confirming
/// is not counted), leaving out those of `exclude` (the calling process, which knows its own
/// queues exactly).
pub fn summarize(slots: &[Slot], exclude: Option<Owner>, now_ns: u64) -> Summary {
    let mut summary = Summary::default();
    for slot in slots.iter().filter(|s| counted(s, exclude)) {
        summary.live += 1;
        let Some(priority) = slot.stats.priority() else {
            summary.invalid += 1;
            continue;
        };
        if slot.stats.has_work_at(now_ns) {
            summary.with_work += 1;
            summary.highest_with_work = summary.highest_with_work.max(Some(priority));
        }
    }
    summary
}

/// The other processes' work by CU partition at `now_ns` (the highest priority with work of each
/// partition id, and the highest present: confirmed, paused queues apart), leaving out the slots of `exclude`; and how many live slots were counted.
pub fn external_work(slots: &[Slot], exclude: Option<Owner>, now_ns: u64) -> (ExternalWork, usize) {
    let mut work = ExternalWork::none();
    let mut live = 0;
    for slot in slots.iter().filter(|s| counted(s, exclude)) {
        live += 1;
        if let Some(p) = slot.priority_with_work(now_ns) {
            work.add(PartitionId(slot.partition), p);
        }
        let present = !slot.stats.has_flag(FLAG_PAUSED) && slot.stats.confirmed_at(now_ns);
        if let Some(p) = slot.stats.priority().filter(|_| present) {
            work.add_present(PartitionId(slot.partition), p);
        }
    }
    (work, live)
}

/// Whether a queue of another process than `exclude` has work at a priority above `p`, at
/// `now_ns`.
pub fn has_higher_work(slots: &[Slot], p: Priority, exclude: Option<Owner>, now_ns: u64) -> bool {
    slots
        .iter()
        .filter(|s| counted(s, exclude))
        .filter_map(|s| s.priority_with_work(now_ns))
        .any(|q| q > p)
}

/// The priorities at which some queue (of another process than `exclude`) has work, at `now_ns`.
pub fn priorities_with_work(
    slots: &[Slot],
    exclude: Option<Owner>,
    now_ns: u64,
) -> BTreeSet<Priority> {
    slots
        .iter()
        .filter(|s| counted(s, exclude))
        .filter_map(|s| s.priority_with_work(now_ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::mem::{align_of, offset_of, size_of};
    use xhsa_model::priority::Level;
    use xhsa_model::stats::STALE_AFTER_NS;

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    /// The readers' clock in these tests: the slots' owners confirmed their counters (`beat_ns`
    /// 0) just now.
    const NOW: u64 = 0;

    const A: Owner = Owner { pid: 100, token: 5 };
    const B: Owner = Owner { pid: 200, token: 7 };

    #[test]
    fn layout_v6() {
        assert_eq!(size_of::<BoardHeader>(), HEADER_SIZE);
        assert_eq!(align_of::<BoardHeader>(), 8);
        assert_eq!(offset_of!(BoardHeader, magic), 0);
        assert_eq!(offset_of!(BoardHeader, layout_version), 8);
        assert_eq!(offset_of!(BoardHeader, slot_count), 12);
        assert_eq!(offset_of!(BoardHeader, slot_size), 16);
        assert_eq!(offset_of!(BoardHeader, stats_version), 20);
        assert_eq!(offset_of!(BoardHeader, header_size), 24);
        assert_eq!(offset_of!(BoardHeader, gpu_id), 28);
        assert_eq!(offset_of!(BoardHeader, high_water), 32);
        assert_eq!(offset_of!(BoardHeader, wake), 36);
        assert_eq!(offset_of!(BoardHeader, waiters), 40);
        assert_eq!(offset_of!(BoardHeader, reserved1), 44);
        assert_eq!(offset_of!(BoardHeader, wake_ns), 48);
        assert_eq!(offset_of!(BoardHeader, split), 56);
        assert_eq!(offset_of!(BoardHeader, split_at_ms), 60);

        assert_eq!(size_of::<Slot>(), SLOT_SIZE);
        assert_eq!(align_of::<Slot>(), 8);
        assert_eq!(offset_of!(Slot, seq), 0);
        assert_eq!(offset_of!(Slot, state), 4);
        assert_eq!(offset_of!(Slot, pid), 8);
        assert_eq!(offset_of!(Slot, partition), 12);
        assert_eq!(offset_of!(Slot, owner_token), 16);
        assert_eq!(offset_of!(Slot, queue_id), 24);
        assert_eq!(offset_of!(Slot, stats), 32);
        assert_eq!(offset_of!(Slot, name), 272);
        assert_eq!(offset_of!(Slot, recent), 288);
        assert_eq!(offset_of!(Slot, control), 352);
        assert_eq!(offset_of!(Slot, ack), 368);
        assert_eq!(offset_of!(Slot, pid_ns), 384);
        assert_eq!(offset_of!(Slot, owner_uid), 392);
        assert_eq!(offset_of!(Slot, sharing), 396);
        assert_eq!(size_of::<RecentPreemption>(), 16);
        assert_eq!(size_of::<Control>(), 16);
        assert_eq!(size_of::<Ack>(), 16);

        assert_eq!(&BOARD_MAGIC.to_le_bytes(), b"XHSABRD\0");
        assert_eq!(board_size(DEFAULT_SLOT_COUNT), 64 + 400 * 1024);
    }

    #[test]
    fn names_are_cut_at_16_bytes_on_a_character_boundary() {
        let mut slot = Slot { name: name_bytes("inference"), ..Slot::default() };
        assert_eq!(slot.name(), "inference");
        slot.name = name_bytes("a-very-long-process-name");
        assert_eq!(slot.name(), "a-very-long-proc");
        slot.name = name_bytes("ééééééééé"); // 18 bytes: the 9th character does not fit whole
        assert_eq!(slot.name(), "éééééééé");
    }

    #[test]
    fn header_validation() {
        let h = BoardHeader::new(16, 0x1234).unwrap();
        assert_eq!(h.validate(board_size(16)), Ok(()));
        assert_eq!(
            h.validate(board_size(15)),
            Err(LayoutError::Truncated { len: board_size(15), needed: board_size(16) })
        );
        assert_eq!(BoardHeader::new(0, 0), None);
        assert_eq!(BoardHeader::new(MAX_SLOT_COUNT + 1, 0), None);
        let bad = BoardHeader { magic: 0, ..h };
        assert_eq!(bad.validate(usize::MAX), Err(LayoutError::BadMagic(0)));
        let bad = BoardHeader { layout_version: 1, ..h };
        assert_eq!(
            bad.validate(usize::MAX),
            Err(LayoutError::Version { found: 1, expected: BOARD_LAYOUT_VERSION })
        );
        let bad = BoardHeader { stats_version: 9, ..h };
        assert!(matches!(
            bad.validate(usize::MAX),
            Err(LayoutError::StatsVersion { found: 9, .. })
        ));
        let bad = BoardHeader { slot_size: 128, ..h };
        assert_eq!(bad.validate(usize::MAX), Err(LayoutError::Size { found: (64, 128) }));
        let bad = BoardHeader { slot_count: 0, ..h };
        assert_eq!(bad.validate(usize::MAX), Err(LayoutError::SlotCount(0)));
        assert!(LayoutError::Version { found: 2, expected: 1 }.to_string().contains("version 2"));
    }

    #[test]
    fn claim_publish_release() {
        let mut slots = vec![Slot::default(); 2];
        let a = claim(&mut slots, A, PartitionId(0), QueueId(1), p(3)).unwrap();
        let b = claim(&mut slots, B, PartitionId(0), QueueId(1), p(0)).unwrap();
        assert_eq!((a, b), (0, 1));
        assert_eq!(
            claim(&mut slots, A, PartitionId(0), QueueId(2), p(0)),
            Err(BoardFull { slots: 2 })
        );
        assert_eq!(slots[a].stats.priority(), Some(p(3)));
        // Idle slots are not work.
        assert_eq!(summarize(&slots, None, NOW).highest_with_work, None);
        assert_eq!(summarize(&slots, None, NOW).live, 2);
        let busy = QueueStats { priority: p(3).rank(), pending: 1, ..QueueStats::default() };
        assert!(publish(&mut slots, a, A, &busy));
        assert!(!publish(&mut slots, a, B, &busy), "only the owner publishes");
        assert!(!publish(&mut slots, 9, A, &busy));
        let s = summarize(&slots, None, NOW);
        assert_eq!((s.highest_with_work, s.with_work), (Some(p(3)), 1));
        assert!(s.has_higher_work(p(2)) && !s.has_higher_work(p(3)));
        assert_eq!(s.contention(), Contention::external(Some(p(3))));
        // A process does not see its own entries.
        assert_eq!(summarize(&slots, Some(A), NOW).highest_with_work, None);
        assert!(has_higher_work(&slots, p(0), Some(B), NOW));
        assert!(!has_higher_work(&slots, p(0), Some(A), NOW));
        // A recycled pid is another owner.
        assert!(summarize(&slots, Some(Owner { pid: 100, token: 6 }), NOW)
            .highest_with_work
            .is_some());
        assert!(!release(&mut slots, a, B));
        assert!(release(&mut slots, a, A));
        assert!(!release(&mut slots, a, A));
        assert_eq!(slots[a], Slot::default());
        assert_eq!(
            claim(&mut slots, A, PartitionId(1), QueueId(2), p(0)),
            Ok(0),
            "freed slots are reused"
        );
        assert_eq!(release_all(&mut slots, A), 1);
        assert_eq!(release_all(&mut slots, A), 0);
    }

    #[test]
    fn cleanup_removes_dead_owners_only() {
        let mut slots = vec![Slot::default(); 4];
        for (owner, q) in [(A, 1), (B, 1), (A, 2)] {
            let i = claim(&mut slots, owner, PartitionId(0), QueueId(q), p(9)).unwrap();
            publish(
                &mut slots,
                i,
                owner,
                &QueueStats { priority: p(9).rank(), in_flight: 3, ..Default::default() },
            );
        }
        assert!(has_higher_work(&slots, p(0), Some(B), NOW));
        assert_eq!(cleanup_stale(&mut slots, |o| o != A), 2);
        assert!(!has_higher_work(&slots, p(0), Some(B), NOW), "a dead process never throttles");
        assert!(has_higher_work(&slots, p(0), None, NOW));
        assert_eq!(cleanup_stale(&mut slots, |_| true), 0);
        assert_eq!(slots.iter().filter(|s| s.is_live()).count(), 1);
    }

    #[test]
    fn undecodable_priorities_are_ignored() {
        let mut slots = vec![Slot::default(); 1];
        claim(&mut slots, A, PartitionId(0), QueueId(1), p(0)).unwrap();
        publish(
            &mut slots,
            0,
            A,
            &QueueStats { priority: i32::MAX, pending: 1, ..Default::default() },
        );
        let s = summarize(&slots, None, NOW);
        assert_eq!((s.live, s.invalid, s.highest_with_work), (1, 1, None));
        assert!(!has_higher_work(&slots, Priority::LOWEST, None, NOW));
        assert!(priorities_with_work(&slots, None, NOW).is_empty());
    }

    #[test]
    fn a_stopped_owners_work_goes_stale() {
        let mut slots = vec![Slot::default(); 2];
        let a = claim(&mut slots, A, PartitionId(0), QueueId(1), p(5)).unwrap();
        publish(
            &mut slots,
            a,
            A,
            &QueueStats {
                priority: p(5).rank(),
                in_flight: 2,
                beat_ns: 1_000,
                ..Default::default()
            },
        );
        let fresh = 1_000 + STALE_AFTER_NS;
        assert_eq!(summarize(&slots, Some(B), fresh).highest_with_work, Some(p(5)));
        assert!(has_higher_work(&slots, p(0), Some(B), fresh));
        let stale = fresh + 1;
        let s = summarize(&slots, Some(B), stale);
        assert_eq!(
            (s.live, s.with_work, s.highest_with_work),
            (1, 0, None),
            "still live, no longer counted"
        );
        assert!(!has_higher_work(&slots, p(0), Some(B), stale));
        assert!(priorities_with_work(&slots, Some(B), stale).is_empty());
        // Confirmed again (the process runs on): counted again.
        slots[a].stats.beat_ns = stale;
        assert!(has_higher_work(&slots, p(0), Some(B), stale));
    }

    #[test]
    fn presence_counts_confirmed_queues_with_work_or_not_and_not_paused_ones() {
        let mut slots = vec![Slot::default(); 3];
        let idle = QueueStats { priority: p(5).rank(), beat_ns: 1_000, ..Default::default() };
        let a = claim(&mut slots, A, PartitionId(0), QueueId(1), p(5)).unwrap();
        publish(&mut slots, a, A, &idle);
        let paused = QueueStats {
            priority: p(9).rank(),
            flags: FLAG_PAUSED,
            beat_ns: 1_000,
            ..Default::default()
        };
        let b = claim(&mut slots, A, PartitionId(0), QueueId(2), p(9)).unwrap();
        publish(&mut slots, b, A, &paused);
        let fresh = 1_000 + STALE_AFTER_NS;
        let (work, live) = external_work(&slots, Some(B), fresh);
        assert_eq!(live, 2);
        assert_eq!(work.contention_in(PartitionId(0)).external_highest, None, "no work");
        assert_eq!(work.present_in(PartitionId(0)), Some(p(5)), "present, the paused one apart");
        let (work, _) = external_work(&slots, Some(B), fresh + 1);
        assert_eq!(work.present_in(PartitionId(0)), None, "unconfirmed: a stopped owner");
        let (work, _) = external_work(&slots, Some(A), fresh);
        assert_eq!(work.present_in(PartitionId(0)), None, "the caller's own queues apart");
    }

    proptest! {
        /// The summary agrees with a direct computation, whatever is in the slots.
        #[test]
        fn summary_matches_direct_computation(
            entries in proptest::collection::vec(
                (0u32..3, 1u32..4, -3i64..3, 0u32..3, 0u32..3, 0u32..2, proptest::bool::ANY), 0..40),
            me in 1u32..4,
            probe in -4i64..4,
        ) {
            // Owners that stopped confirming their counters (`stopped`) are as old as a beat can
            // be and still count, plus one nanosecond.
            let now = 10 * STALE_AFTER_NS;
            let slots: Vec<Slot> = entries.iter().map(|&(state, pid, level, pending, in_flight, bad, stopped)| Slot {
                state,
                pid,
                owner_token: 1,
                stats: QueueStats {
                    priority: if bad == 1 && level == 0 { 3 } else { p(level).rank() },
                    pending,
                    in_flight,
                    beat_ns: if stopped { now - STALE_AFTER_NS - 1 } else { now - STALE_AFTER_NS },
                    ..Default::default()
                },
                ..Default::default()
            }).collect();
            let me = Owner { pid: me, token: 1 };
            let s = summarize(&slots, Some(me), now);
            let others = slots.iter().filter(|s| s.state == SLOT_LIVE && s.pid != me.pid);
            let expected = others.clone()
                .filter(|s| s.stats.pending + s.stats.in_flight > 0 && s.stats.beat_ns + STALE_AFTER_NS >= now)
                .filter_map(|s| Priority::from_rank(s.stats.priority))
                .max();
            prop_assert_eq!(s.highest_with_work, expected);
            prop_assert_eq!(s.live, others.count());
            prop_assert_eq!(has_higher_work(&slots, p(probe), Some(me), now), expected.is_some_and(|e| e > p(probe)));
            prop_assert_eq!(priorities_with_work(&slots, Some(me), now).into_iter().next_back(), expected);
            // After every owner but `me` dies, nothing throttles `me`.
            let mut cleaned = slots.clone();
            cleanup_stale(&mut cleaned, |o| o == me);
            prop_assert_eq!(summarize(&cleaned, Some(me), now).highest_with_work, None);
        }
    }
}
