//! Shadow queues at the edge: what every interposed queue function does, shared by both loading
//! modes ([`super::preload`] passes ROCr's next definition, [`super::tools_lib`] the saved table
//! entry as `real`).
//!
//! - `hsa_queue_create` creates the hardware queue through `real` and hands the application a
//!   shadow (its own `amd_queue_t`, ring and doorbell signal, in GPU-readable memory), unless
//!   the queue type is one libxhsa does not schedule or building the shadow fails: then the
//!   hardware queue itself (passthrough for that queue).
//! - Index functions on a shadow act on the shadow's indices; everything else passes through.
//! - A store to a shadow doorbell runs a forwarding pass on the caller's thread
//!   ([`crate::path::scheduler::Scheduler::pass`]); any other signal store passes through after one
//!   lock-free lookup.
//! - CU mask, priority, profiling and inactivate apply to the hardware queue; destroy drains.
//! - The hardware queue's errors reach the application's callback with the shadow pointer.
//!
//! Each interposed function here takes `real`, the definition it replaces (`None` when it was
//! not found: then it fails as the HSA function would, or does nothing), and is `unsafe` with
//! the contract of the HSA function of its name (see [`super::preload`]): `real` must be that
//! function, and the other arguments must meet that function's HSA contract.
//!
//! One concept per file: [`abi`] (the C signatures and `amd_queue_t` offsets), [`registry`]
//! (which queue is whose), [`scheduler_lock`] (running work on a GPU's scheduler),
//! [`create_destroy`] and [`shadow`] (a queue's life), [`board_wiring`] (board, watcher,
//! controllers), [`callbacks`] (ROCr's calls into libxhsa), [`calls`] (every other queue call).

mod abi;
mod board_wiring;
mod callbacks;
mod calls;
mod create_destroy;
mod registry;
mod scheduler_lock;
mod shadow;

pub(crate) use abi::{
    AddIndexFn, CasIndexFn, CuGetMaskFn, CuSetMaskFn, LoadIndexFn, ProfilerFn, QueueCallback,
    QueueCreateFn, QueueFn, QueueGetInfoFn, SetPriorityFn, SignalStoreFn, StoreIndexFn, READ_INDEX,
    WRITE_INDEX,
};
pub(crate) use calls::{
    add_write_index, cas_write_index, cu_get_mask, cu_set_mask, load_index, queue_get_info,
    set_priority, set_profiler_enabled, signal_store, store_read_index, store_write_index,
};
pub(crate) use create_destroy::{queue_create, queue_destroy, queue_inactivate};
pub(crate) use registry::WHITELISTED_QUEUES;
pub(crate) use scheduler_lock::forwarded_work;
