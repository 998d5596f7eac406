//! The settings a person writes: environment variables and the config file, as libxhsa reads
//! them and `xhsactl config check` checks them.
//!
//! - [`config`]: the environment variables, the config file (`XHSA_CONFIG`), their precedence,
//!   and which priority a queue gets ([`config::Settings`]).
//! - [`whitelist`]: the passthrough whitelist (`XHSA_PASSTHROUGH_LIBS`): which libraries'
//!   queues and kernels bypass the rings and the window.
//!
//! What it is not: nothing here logs or panics (a malformed value comes back as a
//! [`config::SettingError`] that the caller reports once).
#![forbid(unsafe_code)]

pub mod config;
pub mod whitelist;

/// An environment of fixed `vars` in the shape the settings' `from_lookup` takes (what a
/// variable is set to; unset when absent): for tests and for tools that check settings given to
/// them rather than their own environment.
pub fn lookup_in(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
    let map: std::collections::HashMap<String, std::ffi::OsString> =
        vars.iter().map(|(k, v)| (k.to_string(), std::ffi::OsString::from(v))).collect();
    move |k| map.get(k).cloned()
}
