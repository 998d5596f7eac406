//! `XHSA_LOG`: the log filter, checked directive by directive so that a malformed one is named
//! rather than silencing every log line.

use super::env::ENV_LOG;
use super::error::SettingError;

/// The log filter used when `XHSA_LOG` is unset, empty or not accepted.
pub const DEFAULT_LOG: &str = "warn";
/// The levels `XHSA_LOG` accepts, alone or after `TARGET=` (any case).
pub const LOG_LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];
pub(super) const ACCEPTED_LOG: &str = "accepted: a level (off, error, warn, info, debug, trace; any case), or a comma-separated list of \
                            LEVEL and TARGET=LEVEL directives where TARGET is xhsa or a path under it such as \
                            xhsa::scheduler (e.g. info, or warn,xhsa::scheduler=debug)";

/// Why one `XHSA_LOG` directive is not accepted.
pub(super) fn log_directive_problem(directive: &str) -> Option<String> {
    let is_level = |s: &str| LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(s));
    let is_target = |s: &str| {
        s == "xhsa"
            || s.strip_prefix("xhsa::").is_some_and(|rest| {
                rest.split("::").all(|part| {
                    !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            })
    };
    match directive.split_once('=') {
        None if is_level(directive) => None,
        None => Some(format!("{directive:?} is not a level")),
        Some((target, level)) => {
            let (target, level) = (target.trim(), level.trim());
            if !is_target(target) {
                Some(format!("{directive:?}: {target:?} is not xhsa or a path under it (libxhsa logs nothing else)"))
            } else if !is_level(level) {
                Some(format!("{directive:?}: {level:?} is not a level"))
            } else {
                None
            }
        }
    }
}

/// Validates `XHSA_LOG` (the variable's value, `None` when unset or not UTF-8) and returns the
/// filter to install (`tracing`'s `EnvFilter` syntax): the value itself when every directive is
/// accepted, otherwise [`DEFAULT_LOG`] with the error to report.
///
/// Accepted: a comma-separated list (empty items ignored, at least one left) of directives, each a level — `off`,
/// `error`, `warn`, `info`, `debug` or `trace`, any case — or `TARGET=LEVEL` where `TARGET` is
/// `xhsa` or a module path under it (`xhsa::scheduler`), the only targets libxhsa logs under.
/// Everything else `EnvFilter` would take is refused: a bare word that is not a level (EnvFilter
/// reads `infoo` as a target name and so silences libxhsa entirely, errors included), a target
/// that is not libxhsa's (which would silence it the same way), numeric levels, span and field
/// filters. Unset, empty or blank means [`DEFAULT_LOG`] without an error.
pub fn log_filter(value: Option<&str>) -> (String, Option<SettingError>) {
    let Some(text) = value.filter(|v| !v.trim().is_empty()) else {
        return (DEFAULT_LOG.to_string(), None);
    };
    // Spaces around items and around `=` are dropped (EnvFilter refuses them).
    let directives: Vec<String> = text
        .split(',')
        .map(|d| d.split('=').map(str::trim).collect::<Vec<_>>().join("="))
        .filter(|d| !d.is_empty())
        .collect();
    let problem = if directives.is_empty() {
        Some("no directive".to_string())
    } else {
        directives.iter().find_map(|d| log_directive_problem(d))
    };
    match problem {
        None => (directives.join(","), None),
        Some(problem) => {
            let e = SettingError::new(
                ENV_LOG,
                Some(text.to_string()),
                format!("{problem} ({ACCEPTED_LOG})"),
                format!("using {DEFAULT_LOG}"),
            );
            (DEFAULT_LOG.to_string(), Some(e))
        }
    }
}
