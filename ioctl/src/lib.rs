//! xhsa-ioctl — the AMD KFD (`/dev/kfd`) ioctl ABI at uapi 1.17 in Rust, plus a thin safe API.
//!
//! What it is:
//! - [`abi`]: `include/uapi/linux/kfd_ioctl.h` of uapi 1.17 (Linux 6.12) transcribed by hand —
//!   every argument struct as a `#[repr(C)]` Rust struct (the `DBG_TRAP` union as a Rust
//!   `union`), every `AMDKFD_IOC_*` number computed by a `const fn` `_IOC` from `size_of` its
//!   struct, the flag and enum constants, and [`abi::Request`] to turn a request number back
//!   into a typed request (for code that parses ioctls, such as an emulated KFD).
//! - [`Kfd`]: an owned `/dev/kfd` fd with one method per ioctl the scheduler needs (version,
//!   queue create/destroy/update, CU mask, wave state, runtime enable, debug-trap
//!   enable/disable/suspend/resume, exception queries and queue snapshots, ...), each failure
//!   a [`KfdError`] that says which ioctl
//!   failed and what the errno means for it.
//!
//! What it is not: no policy (it never decides what to suspend or when), no device model (it
//! knows nothing of GPUs, topology or the emulator), no HSA. It does not read the system's C
//! header: the tests compare this transcription with a bindgen of the system header when one
//! is installed, and with constants transcribed from upstream otherwise.
//!
//! All `unsafe` code is the one `libc::ioctl` call in `kfd.rs`.
//!
//! Talking to the kernel:
//!
//! ```no_run
//! use xhsa_ioctl::{queue_statuses, Kfd};
//!
//! let kfd = Kfd::open()?;
//! let version = kfd.get_version()?;
//! println!("KFD uapi {}.{}", version.major_version, version.minor_version);
//!
//! // Preempt two of this process's queues (needs DBG_TRAP ENABLE and RUNTIME_ENABLE first).
//! let pid = std::process::id();
//! let mut queues = [3, 4];
//! let suspended = kfd.dbg_trap_suspend_queues(pid, &mut queues, 0, 0)?;
//! for status in queue_statuses(&queues).filter(|s| !s.ok()) {
//!     eprintln!("queue {} not suspended: {status:?}", status.queue_id);
//! }
//! kfd.dbg_trap_resume_queues(pid, &mut queues)?;
//! # let _ = suspended;
//! # Ok::<(), xhsa_ioctl::KfdError>(())
//! ```
//!
//! Parsing one (what an emulated KFD does with the request number it is handed):
//!
//! ```
//! use xhsa_ioctl::abi::{DbgTrapArgs, DbgTrapOp, Request};
//!
//! assert_eq!(Request::from_raw(0xC020_4B26), Some(Request::DbgTrap));
//! assert_eq!(Request::DbgTrap.arg_size(), 32);
//! // A uapi 1.11 CREATE_QUEUE (88-byte argument) is still CREATE_QUEUE to the kernel.
//! assert_eq!(Request::from_raw_lenient(0xC058_4B02), Some(Request::CreateQueue));
//!
//! let bytes = DbgTrapArgs::encode(42, &DbgTrapOp::Disable); // the 32 bytes the caller passed
//! let call = DbgTrapArgs::decode(&bytes);
//! assert_eq!((call.pid, call.op), (42, Some(DbgTrapOp::Disable)));
//! ```
#![warn(missing_debug_implementations)]

pub mod abi;
pub mod error;
pub mod kfd;

pub use abi::{IoctlArgs, RawRequest, Request, KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION};
pub use error::KfdError;
pub use kfd::{queue_statuses, DebugEvent, Kfd, QueueWaveState, KFD_DEVICE_PATH};
