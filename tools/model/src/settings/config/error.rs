//! A setting that could not be used as given ([`SettingError`]), and the parsers of the values
//! every source shares (level, window, boolean).

use std::fmt;

use crate::priority::Level;
use crate::window_size::WindowSize;

/// A setting that could not be used as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    /// Where: a variable (`XHSA_WINDOW`) or a config file and key (`/etc/xhsa.toml: window`).
    pub setting: String,
    /// The value found, as text; `None` when the problem is not one value (unreadable file).
    pub value: Option<String>,
    /// What is wrong, with the accepted forms.
    pub problem: String,
    /// What is used instead.
    pub fallback: String,
}

impl SettingError {
    pub(super) fn new(
        setting: impl Into<String>,
        value: Option<String>,
        problem: impl Into<String>,
        fallback: impl Into<String>,
    ) -> SettingError {
        SettingError {
            setting: setting.into(),
            value,
            problem: problem.into(),
            fallback: fallback.into(),
        }
    }
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => {
                write!(f, "{}={:?}: {}; {}", self.setting, value, self.problem, self.fallback)
            }
            None => write!(f, "{}: {}; {}", self.setting, self.problem, self.fallback),
        }
    }
}

impl std::error::Error for SettingError {}

pub(super) fn parse_level(text: &str) -> Option<Level> {
    text.trim().parse::<i64>().ok().and_then(Level::new)
}

pub(super) fn parse_window(text: &str) -> Option<WindowSize> {
    text.trim().parse::<u64>().ok().and_then(WindowSize::new)
}

/// Parses a boolean flag: `0`/`1`/`true`/`false`/`yes`/`no`, any case, surrounding whitespace
/// ignored.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Some(true),
        "0" | "false" | "no" => Some(false),
        _ => None,
    }
}
