//! The amdkfd uapi (`include/uapi/linux/kfd_ioctl.h`) at version 1.17, transcribed by hand:
//! every argument struct as `#[repr(C)]`, every `AMDKFD_IOC_*` number computed from its
//! struct, and the flag and enum constants under their C names.
//!
//! Source: Linux v6.12 `include/uapi/linux/kfd_ioctl.h` (`KFD_IOCTL_MINOR_VERSION 17`). Struct
//! names are the C ones in CamelCase without the `kfd_ioctl_` prefix
//! (`struct kfd_ioctl_create_queue_args` → [`CreateQueueArgs`]); field names are the C ones
//! (the few CamelCase C fields become snake_case, noted on the field). C enums are plain `u32`
//! constants, since the structs carry them as `__u32`.
//!
//! One file per concept; everything is re-exported here.

pub mod criu;
pub mod dbg_trap;
pub mod debug;
pub mod event;
pub mod exception;
pub mod ioc;
pub mod memory;
pub mod process;
pub mod queue;
pub mod request;
pub mod smi;
pub mod svm;
pub mod version;

pub use criu::*;
pub use dbg_trap::*;
pub use debug::*;
pub use event::*;
pub use exception::*;
pub use ioc::*;
pub use memory::*;
pub use process::*;
pub use queue::*;
pub use request::*;
pub use smi::*;
pub use svm::*;
pub use version::*;
