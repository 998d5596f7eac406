//! The preemption settings: which mechanism (`XHSA_PREEMPT`) and the bounds that keep
//! preemption from starving the low priorities or stalling the device too often.
//!
//! | variable | accepted | default | meaning |
//! |---|---|---|---|
//! | `XHSA_PREEMPT` | `off`, `queue`, `suspend`, `auto` | `auto` | `queue`: deactivate with `UPDATE_QUEUE` (percentage 0; level 2 with CWSR saving running waves); `suspend`: `DBG_TRAP SUSPEND_QUEUES` (debug trap enabled on this process; level 3); `auto`: try both and keep the one measured cheaper (see [`super::mechanism`]); `off`: level 1 only |
//! | `XHSA_PREEMPT_MAX_MS` | integer `1..=60000` | 100 | starvation bound: a queue is never kept off the GPU longer than this at a stretch |
//! | `XHSA_PREEMPT_MIN_RUN_MS` | integer `0..=60000` | 10 | after the starvation bound put a queue back, it runs at least this long before it can be preempted again |
//! | `XHSA_PREEMPT_BUDGET` | integer percent `1..=100` | 10 | device-wide preemptions are rate limited: the KFD calls that take queues off the GPU (each stalls every queue of the device) may use at most this share of any one-second window |
//!
//! A malformed value is reported once (variable, value, accepted forms, what is used) and the
//! default is used; nothing else is disturbed.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;
use std::ffi::OsString;
use std::fmt;
use xhsa_model::settings::config::SettingError;

/// `XHSA_PREEMPT`.
pub const ENV_PREEMPT: &str = "XHSA_PREEMPT";
/// `XHSA_PREEMPT_MAX_MS`.
pub const ENV_MAX_MS: &str = "XHSA_PREEMPT_MAX_MS";
/// `XHSA_PREEMPT_MIN_RUN_MS`.
pub const ENV_MIN_RUN_MS: &str = "XHSA_PREEMPT_MIN_RUN_MS";
/// `XHSA_PREEMPT_BUDGET`.
pub const ENV_BUDGET: &str = "XHSA_PREEMPT_BUDGET";

/// Which mechanism takes queues off the GPU.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PreemptMode {
    /// Level 1 only.
    Off,
    /// `UPDATE_QUEUE` with queue percentage 0, and back.
    Queue,
    /// `DBG_TRAP SUSPEND_QUEUES` / `RESUME_QUEUES`.
    Suspend,
    /// Both tried; the cheaper by measured cost kept.
    Auto,
}

impl fmt::Display for PreemptMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PreemptMode::Off => "off",
            PreemptMode::Queue => "queue",
            PreemptMode::Suspend => "suspend",
            PreemptMode::Auto => "auto",
        })
    }
}

/// The preemption settings; see the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PreemptSettings {
    pub mode: PreemptMode,
    /// Longest time a queue stays off the GPU at a stretch.
    pub max_preempted_ns: Nanos,
    /// Shortest run after the starvation bound ended a preemption.
    pub min_run_ns: Nanos,
    /// Share of each second the device-wide preemption calls may take, in percent.
    pub budget_pct: u32,
}

impl Default for PreemptSettings {
    fn default() -> PreemptSettings {
        PreemptSettings {
            mode: PreemptMode::Auto,
            max_preempted_ns: 100_000_000,
            min_run_ns: 10_000_000,
            budget_pct: 10,
        }
    }
}

const MS: Nanos = 1_000_000;

impl PreemptSettings {
    /// Reads the variables through `lookup`; every malformed one is an error and its default is
    /// used.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> (PreemptSettings, Vec<SettingError>) {
        let d = PreemptSettings::default();
        let mut s = d;
        let mut errors = Vec::new();
        let text = |name: &str| {
            lookup(name).map(|v| v.to_string_lossy().trim().to_string()).filter(|v| !v.is_empty())
        };
        let mut bad = |name: &str, value: &str, accepted: &str, default: String| {
            errors.push(SettingError {
                setting: name.to_string(),
                value: Some(value.to_string()),
                problem: format!("expected {accepted}"),
                fallback: format!("using {default}"),
            });
        };
        if let Some(v) = text(ENV_PREEMPT) {
            match v.to_ascii_lowercase().as_str() {
                "off" | "0" | "none" => s.mode = PreemptMode::Off,
                "queue" => s.mode = PreemptMode::Queue,
                "suspend" => s.mode = PreemptMode::Suspend,
                "auto" => s.mode = PreemptMode::Auto,
                _ => bad(ENV_PREEMPT, &v, "one of off, queue, suspend, auto", d.mode.to_string()),
            }
        }
        let mut ms = |name: &str, lo: u64, hi: u64, default: Nanos| -> Nanos {
            match text(name) {
                None => default,
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if (lo..=hi).contains(&n) => n * MS,
                    _ => {
                        bad(
                            name,
                            &v,
                            &format!("an integer number of milliseconds in {lo}..={hi}"),
                            format!("{} ms", default / MS),
                        );
                        default
                    }
                },
            }
        };
        s.max_preempted_ns = ms(ENV_MAX_MS, 1, 60_000, d.max_preempted_ns);
        s.min_run_ns = ms(ENV_MIN_RUN_MS, 0, 60_000, d.min_run_ns);
        if let Some(v) = text(ENV_BUDGET) {
            match v.trim_end_matches('%').parse::<u32>() {
                Ok(n) if (1..=100).contains(&n) => s.budget_pct = n,
                _ => bad(
                    ENV_BUDGET,
                    &v,
                    "an integer percentage in 1..=100",
                    format!("{}", d.budget_pct),
                ),
            }
        }
        (s, errors)
    }

    /// From the process environment.
    pub fn from_process_env() -> (PreemptSettings, Vec<SettingError>) {
        PreemptSettings::from_lookup(|k| std::env::var_os(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use xhsa_model::settings::lookup_in as env;

    #[test]
    fn defaults_and_valid_values() {
        let (s, e) = PreemptSettings::from_lookup(env(&[]));
        assert!(e.is_empty());
        assert_eq!(s, PreemptSettings::default());
        assert_eq!(s.mode, PreemptMode::Auto);
        let (s, e) = PreemptSettings::from_lookup(env(&[
            (ENV_PREEMPT, " Suspend "),
            (ENV_MAX_MS, "250"),
            (ENV_MIN_RUN_MS, "0"),
            (ENV_BUDGET, "25%"),
        ]));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            s,
            PreemptSettings {
                mode: PreemptMode::Suspend,
                max_preempted_ns: 250 * MS,
                min_run_ns: 0,
                budget_pct: 25
            }
        );
        assert_eq!(
            PreemptSettings::from_lookup(env(&[(ENV_PREEMPT, "off")])).0.mode,
            PreemptMode::Off
        );
        assert_eq!(
            PreemptSettings::from_lookup(env(&[(ENV_PREEMPT, "queue")])).0.mode,
            PreemptMode::Queue
        );
    }

    #[test]
    fn malformed_values_name_the_variable_and_the_accepted_forms() {
        let (s, e) = PreemptSettings::from_lookup(env(&[
            (ENV_PREEMPT, "always"),
            (ENV_MAX_MS, "0"),
            (ENV_BUDGET, "200"),
            (ENV_MIN_RUN_MS, "x"),
        ]));
        assert_eq!(s, PreemptSettings::default());
        assert_eq!(e.len(), 4);
        let text: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        assert!(
            text[0].contains("XHSA_PREEMPT=\"always\"")
                && text[0].contains("off, queue, suspend, auto"),
            "{}",
            text[0]
        );
        assert!(
            text.iter().any(|t| t.contains("XHSA_PREEMPT_MAX_MS") && t.contains("1..=60000")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.contains("XHSA_PREEMPT_BUDGET") && t.contains("1..=100")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.contains("XHSA_PREEMPT_MIN_RUN_MS") && t.contains("0..=60000")),
            "{text:?}"
        );
    }
}
