//! One emulated GPU shared by many processes: the device process ([`server`]) owns each GPU's
//! HWS and clock; every process ([`client`]) keeps its own packet processor, memory and
//! events, creates queues over a control socket and exchanges kernels and completions with
//! the device through shared-memory rings ([`shm`]).

pub mod client;
pub mod paths;
pub mod protocol;
pub mod server;
pub use crate::sys::shm;
