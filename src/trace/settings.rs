//! The trace settings.
//!
//! | variable | accepted | default | meaning |
//! |---|---|---|---|
//! | `XHSA_TRACE` | a file path; `%p` in it stands for the process id, `%%` for `%` | unset: no trace | write the trace of this process there (Chrome trace-event JSON, [`super::chrome`]); the file is created or truncated |
//! | `XHSA_TRACE_BUFFER` | integer `16..=16777216` | 65536 | events per buffer: each source (a GPU's scheduler, a GPU's preemption) records into one buffer of this many events, handed to the writer thread when full ([`super::recorder`]) |
//!
//! A malformed value is reported once (variable, value, accepted forms, what is used instead):
//! a malformed `XHSA_TRACE` leaves tracing off; a malformed `XHSA_TRACE_BUFFER` uses the default.
#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use xhsa_model::settings::config::SettingError;

/// `XHSA_TRACE`.
pub const ENV_TRACE: &str = "XHSA_TRACE";
/// `XHSA_TRACE_BUFFER`.
pub const ENV_TRACE_BUFFER: &str = "XHSA_TRACE_BUFFER";
/// Events per buffer unless `XHSA_TRACE_BUFFER` says otherwise.
pub const DEFAULT_BUFFER: usize = 65_536;
/// The accepted buffer sizes.
pub const BUFFER_RANGE: std::ops::RangeInclusive<usize> = 16..=16_777_216;

const ACCEPTED_TRACE: &str =
    "a file path, in which %p stands for the process id and %% for % (e.g. /tmp/xhsa-%p.json)";

/// The trace settings; see the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSettings {
    /// The file, `%p` already replaced; `None`: no trace.
    pub file: Option<PathBuf>,
    /// Events per buffer.
    pub buffer: usize,
}

impl Default for TraceSettings {
    fn default() -> TraceSettings {
        TraceSettings { file: None, buffer: DEFAULT_BUFFER }
    }
}

/// `template` with `%p` replaced by `pid` and `%%` by `%`; `None` for any other `%`.
fn expand(template: &OsStr, pid: u32) -> Option<PathBuf> {
    let mut out = Vec::new();
    let mut bytes = template.as_bytes().iter();
    while let Some(&b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'p') => out.extend_from_slice(pid.to_string().as_bytes()),
            Some(b'%') => out.push(b'%'),
            _ => return None,
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

impl TraceSettings {
    /// Reads the variables through `lookup` for process `pid`; every malformed one is an error.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
        pid: u32,
    ) -> (TraceSettings, Vec<SettingError>) {
        let mut s = TraceSettings::default();
        let mut errors = Vec::new();
        let set = |name: &str| lookup(name).filter(|v| !v.to_string_lossy().trim().is_empty());
        if let Some(v) = set(ENV_TRACE_BUFFER) {
            let text = v.to_string_lossy().trim().to_string();
            match text.parse::<usize>() {
                Ok(n) if BUFFER_RANGE.contains(&n) => s.buffer = n,
                _ => errors.push(SettingError {
                    setting: ENV_TRACE_BUFFER.into(),
                    value: Some(text),
                    problem: format!(
                        "expected a number of events, an integer in {}..={}",
                        BUFFER_RANGE.start(),
                        BUFFER_RANGE.end()
                    ),
                    fallback: format!("using {DEFAULT_BUFFER}"),
                }),
            }
        }
        if let Some(v) = set(ENV_TRACE) {
            match expand(&v, pid) {
                Some(p) => s.file = Some(p),
                None => errors.push(SettingError {
                    setting: ENV_TRACE.into(),
                    value: Some(v.to_string_lossy().into_owned()),
                    problem: format!("expected {ACCEPTED_TRACE}"),
                    fallback: "no trace is written".into(),
                }),
            }
        }
        (s, errors)
    }

    /// From the process environment.
    pub fn from_process_env() -> (TraceSettings, Vec<SettingError>) {
        TraceSettings::from_lookup(|k| std::env::var_os(k), std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use xhsa_model::settings::lookup_in as env;

    #[test]
    fn unset_means_no_trace() {
        assert_eq!(TraceSettings::from_lookup(env(&[]), 1), (TraceSettings::default(), vec![]));
        assert_eq!(TraceSettings::from_lookup(env(&[("XHSA_TRACE", "  ")]), 1).0.file, None);
    }

    #[test]
    fn the_file_and_buffer_are_read_with_the_pid_in_the_name() {
        let (s, e) = TraceSettings::from_lookup(
            env(&[("XHSA_TRACE", "/tmp/t-%p-100%%.json"), ("XHSA_TRACE_BUFFER", "64")]),
            4242,
        );
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            s,
            TraceSettings { file: Some(PathBuf::from("/tmp/t-4242-100%.json")), buffer: 64 }
        );
    }

    #[test]
    fn malformed_values_are_reported_with_the_accepted_forms() {
        for bad in ["0", "15", "16777217", "-5", "lots", "64k"] {
            let (s, e) = TraceSettings::from_lookup(
                env(&[("XHSA_TRACE", "/tmp/x.json"), ("XHSA_TRACE_BUFFER", bad)]),
                1,
            );
            assert_eq!(s.buffer, DEFAULT_BUFFER, "{bad}");
            assert_eq!(
                s.file,
                Some(PathBuf::from("/tmp/x.json")),
                "a bad buffer size does not turn the trace off"
            );
            assert_eq!(e.len(), 1);
            let msg = e[0].to_string();
            assert!(
                msg.contains("XHSA_TRACE_BUFFER")
                    && msg.contains("16..=16777216")
                    && msg.contains("using 65536"),
                "{msg}"
            );
        }
        for bad in ["/tmp/x-%d.json", "/tmp/x%"] {
            let (s, e) = TraceSettings::from_lookup(env(&[("XHSA_TRACE", bad)]), 1);
            assert_eq!(s.file, None, "{bad}");
            let msg = e[0].to_string();
            assert!(
                msg.starts_with("XHSA_TRACE=")
                    && msg.contains("%p stands for the process id")
                    && msg.contains("no trace"),
                "{msg}"
            );
        }
    }
}
