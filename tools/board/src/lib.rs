//! xhsa-board: the per-GPU board, a shared-memory file through which every libxhsa process on
//! a GPU sees the others' queues, priorities and work, and through which `xhsa-top` and
//! `xhsactl` watch and steer them (`docs/board.md`).
//!
//! - [`layout`]: the file's layout (header, slots, control words) and the pure functions over
//!   plain copies of it (claim, publish, summaries, contention).
//! - [`map`]: the mapped file seen as 32-bit atomics: the one `unsafe` cast of the mapping.
//! - [`futex`]: sleeping on a shared word until another process changes it.
//! - [`seqlock`]: a slot's seqlock (one writer, readers anywhere), checked under loom.
//! - [`shared`]: the concurrency protocol over the mapped words (creation, seqlocked slots,
//!   clearing dead owners, control requests and acks), in safe code.
//! - [`place`]: where the board files live and how they are named.
//! - [`owner`]: the process that owns a slot, and whether it still runs.
//!
//! What it is not: no scheduling decision (libxhsa's window and preemption policy read what the
//! board says), no interception and no ROCm: it links no HSA symbol, so the monitor can use it
//! without libxhsa. No daemon either: whichever process comes first creates the file.

pub mod futex;
pub mod layout;
pub mod map;
pub mod owner;
pub mod place;
pub mod seqlock;
pub mod shared;
