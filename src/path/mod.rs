//! The data path of one process, as safe logic: what happens to an application's packets from
//! its doorbell store to the hardware queue libxhsa owns.
//!
//! In the order a packet meets them:
//!
//! - [`packet`]: AQL packets as values (copied byte for byte, never modified), and the barrier
//!   packets libxhsa builds itself.
//! - [`packet_width`]: how many rounds of work-groups a dispatch needs on parts of the GPU,
//!   which the live sizing expects a reserve's slowdown from.
//! - [`aql_ring`]: taking the published packets out of a shadow ring, writing packets into a
//!   hardware ring (body first, header last), over an abstract queue memory.
//! - [`shadow_queue`]: one shadow queue, its states and the bookkeeping of its tracking
//!   barriers.
//! - [`partition`]: the priority rings of one CU partition ([`partition::Partition`]), which
//!   pick the next packet to forward.
//! - [`partitions`]: the GPU's CU partitions (one, or the two sides of `XHSA_RESERVE`) and
//!   which partition each queue's rings are in.
//! - [`window`]: the level-1 in-flight window, which decides how many packets a queue may have
//!   on the hardware while higher-priority work waits.
//! - [`packet_time`]: how long a queue's packets take on the hardware, measured from its
//!   completions.
//! - [`scheduler`]: the forwarding passes that tie these together, with completions,
//!   degradation and drain.
//!
//! What it is not: no raw memory and no runtime calls (the edge, [`crate::entry`], implements
//! the [`aql_ring::QueueMemory`] and [`scheduler::Hardware`] these modules work over), no
//! cross-process state ([`crate::board`]) and no hardware preemption ([`crate::preempt`]).
//! Everything here is `#![forbid(unsafe_code)]` and tested without a runtime.
#![forbid(unsafe_code)]

pub mod aql_ring;
pub mod latency;
pub mod packet;
pub mod packet_time;
pub mod packet_width;
pub mod partition;
pub mod partitions;
pub mod scheduler;
pub mod shadow_queue;
pub mod window;
