//! What the operator and the environment decide: the settings read at start-up and the values
//! they are made of.
//!
//! - [`config`]: the environment variables, the config file (`XHSA_CONFIG`), their precedence,
//!   and which priority a queue gets ([`config::Settings`]).
//! - [`priority`]: the operator's level and the application's stream priority, combined into
//!   one totally ordered [`priority::Priority`].
//! - [`whitelist`]: the passthrough whitelist (`XHSA_PASSTHROUGH_LIBS`): which libraries'
//!   queues and kernels bypass the rings and the window.
//! - [`fault`]: `XHSA_FAULT_INJECT`, the test knob that makes chosen internal steps fail.
//!
//! What it is not: nothing here logs or panics (a malformed value comes back as a
//! [`config::SettingError`] that the edge, [`crate::entry`], reports once), and the preemption
//! settings (`XHSA_PREEMPT`) live with preemption, in [`crate::preempt::settings`].
#![forbid(unsafe_code)]

pub mod config;
pub mod fault;
pub mod priority;
pub mod whitelist;

/// An environment of `vars` for the settings' `from_lookup` in tests (what a variable is set to;
/// unset when absent).
#[cfg(test)]
pub(crate) fn fake_env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
    let map: std::collections::HashMap<String, std::ffi::OsString> = vars.iter().map(|(k, v)| (k.to_string(), std::ffi::OsString::from(v))).collect();
    move |k| map.get(k).cloned()
}
