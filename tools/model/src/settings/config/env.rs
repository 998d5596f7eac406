//! The environment variables libxhsa reads ([`EnvSettings`]), each with its alias and its
//! accepted forms.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::partition::{Reserve, ACCEPTED_RESERVE};
use crate::priority::Level;
use crate::settings::whitelist::Whitelist;
use crate::sharing::{Sharing, ACCEPTED_POLICY};
use crate::window_size::WindowSize;

use super::error::{parse_bool, parse_level, parse_window, SettingError};

/// `XHSA_PRIORITY`.
pub const ENV_PRIORITY: &str = "XHSA_PRIORITY";
/// XSched's name for the priority, accepted as an alias.
pub const ENV_PRIORITY_ALIAS: &str = "XSCHED_AUTO_XQUEUE_PRIORITY";
/// `XHSA_WINDOW`.
pub const ENV_WINDOW: &str = "XHSA_WINDOW";
/// `XHSA_DISABLE`.
pub const ENV_DISABLE: &str = "XHSA_DISABLE";
/// `XHSA_PASSTHROUGH_LIBS`.
pub const ENV_PASSTHROUGH_LIBS: &str = "XHSA_PASSTHROUGH_LIBS";
/// XSched's name for the passthrough list, accepted as an alias.
pub const ENV_PASSTHROUGH_LIBS_ALIAS: &str = "XSCHED_PASSTHROUGH_LIBS";
/// `XHSA_CONFIG`.
pub const ENV_CONFIG: &str = "XHSA_CONFIG";
/// `XHSA_LOG`.
pub const ENV_LOG: &str = "XHSA_LOG";
/// `XHSA_RESERVE`.
pub const ENV_RESERVE: &str = "XHSA_RESERVE";
/// `XHSA_POLICY`.
pub const ENV_POLICY: &str = "XHSA_POLICY";
/// `XHSA_BOARD_DIR`.
pub const ENV_BOARD_DIR: &str = "XHSA_BOARD_DIR";
/// Where boards live unless `XHSA_BOARD_DIR` says otherwise.
pub const DEFAULT_BOARD_DIR: &str = "/dev/shm";

pub(super) const ACCEPTED_PRIORITY: &str = "an integer in -256..=255 (higher is more urgent)";
pub(super) const ACCEPTED_WINDOW: &str = "an integer in 1..=1024";
pub(super) const ACCEPTED_BOOL: &str = "one of 0, 1, true, false, yes, no";
/// What the environment says; unset or malformed values are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvSettings {
    /// `XHSA_PRIORITY` / `XSCHED_AUTO_XQUEUE_PRIORITY`.
    pub priority: Option<Level>,
    /// `XHSA_WINDOW`.
    pub window: Option<WindowSize>,
    /// `XHSA_DISABLE`.
    pub disable: bool,
    /// `XHSA_PASSTHROUGH_LIBS` / `XSCHED_PASSTHROUGH_LIBS`.
    pub passthrough_libs: Whitelist,
    /// `XHSA_CONFIG`.
    pub config_path: Option<PathBuf>,
    /// `XHSA_LOG`.
    pub log: Option<String>,
    /// `XHSA_BOARD_DIR`.
    pub board_dir: Option<PathBuf>,
    /// `XHSA_RESERVE` (`Some(None)`: `none`).
    pub reserve: Option<Option<Reserve>>,
    /// `XHSA_POLICY`.
    pub policy: Option<Sharing>,
}

/// Reads one variable as text: `None` if unset or empty; an error if not UTF-8.
/// Variable `name` parsed by `parse`; a malformed value is an error naming the `accepted` forms
/// and what is used instead (`fallback`), and gives `None`.
fn parsed_var<T>(
    lookup: &impl Fn(&str) -> Option<OsString>,
    name: &str,
    accepted: &str,
    fallback: &str,
    errors: &mut Vec<SettingError>,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    let text = text_var(lookup, name, errors, fallback)?;
    let value = parse(&text);
    if value.is_none() {
        errors.push(SettingError::new(name, Some(text), format!("expected {accepted}"), fallback));
    }
    value
}

pub(super) fn text_var(
    lookup: &impl Fn(&str) -> Option<OsString>,
    name: &str,
    errors: &mut Vec<SettingError>,
    fallback: &str,
) -> Option<String> {
    let raw = lookup(name)?;
    match raw.into_string() {
        Ok(s) if s.trim().is_empty() => None,
        Ok(s) => Some(s),
        Err(raw) => {
            errors.push(SettingError::new(
                name,
                Some(raw.to_string_lossy().into_owned()),
                "not valid UTF-8",
                fallback,
            ));
            None
        }
    }
}

/// A variable with an alias: the primary wins when set; a differing alias is reported. Returns
/// the name the value came from, and the value.
pub(super) fn aliased_var<'n>(
    lookup: &impl Fn(&str) -> Option<OsString>,
    primary: &'n str,
    alias: &'n str,
    errors: &mut Vec<SettingError>,
    fallback: &str,
) -> Option<(&'n str, String)> {
    let p = text_var(lookup, primary, errors, fallback);
    let a = text_var(lookup, alias, errors, fallback);
    match (p, a) {
        (Some(p), Some(a)) => {
            if p.trim() != a.trim() {
                errors.push(SettingError::new(
                    alias,
                    Some(a),
                    format!("ignored: {primary} is also set and takes precedence"),
                    format!("using {primary}={p:?}"),
                ));
            }
            Some((primary, p))
        }
        (Some(p), None) => Some((primary, p)),
        (None, Some(a)) => Some((alias, a)),
        (None, None) => None,
    }
}

impl EnvSettings {
    /// Reads the environment through `lookup` (a variable's value, `None` if unset).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> (EnvSettings, Vec<SettingError>) {
        let mut errors = Vec::new();
        let mut env = EnvSettings::default();

        let fallback = "using the config file's priority, else 0";
        if let Some((name, text)) =
            aliased_var(&lookup, ENV_PRIORITY, ENV_PRIORITY_ALIAS, &mut errors, fallback)
        {
            env.priority = parse_level(&text);
            if env.priority.is_none() {
                errors.push(SettingError::new(
                    name,
                    Some(text),
                    format!("expected {ACCEPTED_PRIORITY}"),
                    fallback,
                ));
            }
        }

        env.window = parsed_var(
            &lookup,
            ENV_WINDOW,
            ACCEPTED_WINDOW,
            "using the config file's window, else 2",
            &mut errors,
            parse_window,
        );
        env.reserve = parsed_var(
            &lookup,
            ENV_RESERVE,
            ACCEPTED_RESERVE,
            "using the config file's reserve, else the default (auto@1)",
            &mut errors,
            Reserve::parse_setting,
        );
        env.policy = parsed_var(
            &lookup,
            ENV_POLICY,
            ACCEPTED_POLICY,
            "using the config file's policy, else the default (slo:1.2x)",
            &mut errors,
            Sharing::parse,
        );

        let fallback = "scheduling stays enabled";
        if let Some(text) = text_var(&lookup, ENV_DISABLE, &mut errors, fallback) {
            match parse_bool(&text) {
                Some(disable) => env.disable = disable,
                None => errors.push(SettingError::new(
                    ENV_DISABLE,
                    Some(text),
                    format!("expected {ACCEPTED_BOOL}"),
                    fallback,
                )),
            }
        }

        let fallback = "using the config file's list only";
        if let Some((_, text)) = aliased_var(
            &lookup,
            ENV_PASSTHROUGH_LIBS,
            ENV_PASSTHROUGH_LIBS_ALIAS,
            &mut errors,
            fallback,
        ) {
            env.passthrough_libs = Whitelist::parse(&text);
        }

        // A path need not be UTF-8.
        env.config_path = lookup(ENV_CONFIG)
            .filter(|p| !p.to_string_lossy().trim().is_empty())
            .map(PathBuf::from);
        env.log = text_var(&lookup, ENV_LOG, &mut errors, "using the default log filter");
        env.board_dir = lookup(ENV_BOARD_DIR)
            .filter(|p| !p.to_string_lossy().trim().is_empty())
            .map(PathBuf::from);
        (env, errors)
    }

    /// Reads the process environment.
    pub fn from_process_env() -> (EnvSettings, Vec<SettingError>) {
        EnvSettings::from_lookup(|name| std::env::var_os(name))
    }
}
