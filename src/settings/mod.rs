//! What the operator and the environment decide, beyond the shared settings vocabulary of
//! `xhsa_model::settings` (the environment, the config file, priorities, the whitelist).
//!
//! - [`fault`]: `XHSA_FAULT_INJECT`, the test knob that makes chosen internal steps fail.
//!
//! What it is not: nothing here logs or panics, and the preemption settings (`XHSA_PREEMPT`)
//! live with preemption, in [`crate::preempt::settings`].
#![forbid(unsafe_code)]

pub mod fault;
