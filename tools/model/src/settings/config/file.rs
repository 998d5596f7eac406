//! The config file (`XHSA_CONFIG`, TOML): its keys, the `[[process]]` and `[[library]]`
//! priority rules and the groups, checked key by key ([`Config`]).

use std::path::{Path, PathBuf};

use crate::partition::{Reserve, ACCEPTED_RESERVE};
use crate::priority::Level;
use crate::settings::whitelist::Whitelist;
use crate::sharing::{Sharing, ACCEPTED_POLICY};
use crate::window_size::WindowSize;

use super::env::{ACCEPTED_PRIORITY, ACCEPTED_WINDOW, ENV_CONFIG};
use super::error::SettingError;

pub(super) const CONFIG_KEYS: &[&str] = &[
    "priority",
    "window",
    "passthrough_libs",
    "board_dir",
    "board_group",
    "control_max_level",
    "reserve",
    "policy",
    "process",
    "library",
];
pub(super) const RULE_KEYS: &[&str] = &["name", "priority"];
/// `value` parsed (`parsed`), or an error at `at` saying what was `expected` and what is used
/// instead (`fallback`).
fn checked<T>(
    parsed: Option<T>,
    at: impl FnOnce() -> String,
    value: &toml::Value,
    expected: &str,
    fallback: &str,
    errors: &mut Vec<SettingError>,
) -> Option<T> {
    if parsed.is_none() {
        errors.push(SettingError::new(at(), Some(value_text(value)), expected, fallback));
    }
    parsed
}

/// A `[[process]]` or `[[library]]` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The process or library name.
    pub name: String,
    /// The level it gives.
    pub priority: Level,
}

/// What the config file says; absent or malformed values are `None` / empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Top-level `priority`.
    pub priority: Option<Level>,
    /// Top-level `window`.
    pub window: Option<WindowSize>,
    /// `passthrough_libs`.
    pub passthrough_libs: Whitelist,
    /// `[[process]]` rules, in file order.
    pub process_rules: Vec<Rule>,
    /// `[[library]]` rules, in file order.
    pub library_rules: Vec<Rule>,
    /// `board_dir`.
    pub board_dir: Option<PathBuf>,
    /// `board_group`.
    pub board_group: Option<GroupSpec>,
    /// `control_max_level`.
    pub control_max_level: Option<Level>,
    /// `reserve` (`Some(None)`: `none`).
    pub reserve: Option<Option<Reserve>>,
    /// `policy`.
    pub policy: Option<Sharing>,
}

/// A group, as the config names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupSpec {
    /// A numeric gid.
    Id(u32),
    /// A group name, resolved when the board is opened.
    Name(String),
}

pub(super) fn accepted(keys: &[&str]) -> String {
    keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
}

pub(super) fn value_text(value: &toml::Value) -> String {
    value.to_string()
}

impl Config {
    /// Parses config text; `origin` (usually the path) prefixes the error locations.
    pub fn parse(text: &str, origin: &str) -> (Config, Vec<SettingError>) {
        let mut errors = Vec::new();
        let mut config = Config::default();
        let table = match text.parse::<toml::Table>() {
            Ok(table) => table,
            Err(e) => {
                let problem = format!("not a valid TOML file: {}", e.to_string().trim_end());
                errors.push(SettingError::new(origin, None, problem, "ignoring the whole file"));
                return (config, errors);
            }
        };
        let at = |key: &str| format!("{origin}: {key}");
        for (key, value) in &table {
            match key.as_str() {
                "priority" => {
                    config.priority = checked(
                        value.as_integer().and_then(Level::new),
                        || at(key),
                        value,
                        &format!("expected {ACCEPTED_PRIORITY}"),
                        "using XHSA_PRIORITY or a matching rule if any, else 0",
                        &mut errors,
                    );
                }
                "window" => {
                    config.window = checked(
                        value
                            .as_integer()
                            .and_then(|n| u64::try_from(n).ok())
                            .and_then(WindowSize::new),
                        || at(key),
                        value,
                        &format!("expected {ACCEPTED_WINDOW}"),
                        "using XHSA_WINDOW if set, else 2",
                        &mut errors,
                    );
                }
                "passthrough_libs" => match value {
                    toml::Value::String(s) => config.passthrough_libs = Whitelist::parse(s),
                    toml::Value::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            match item.as_str() {
                                Some(s) => config.passthrough_libs.extend(s.split(',')),
                                None => errors.push(SettingError::new(
                                    format!("{origin}: passthrough_libs[{i}]"),
                                    Some(value_text(item)),
                                    "expected a library name (string)",
                                    "skipping this entry",
                                )),
                            }
                        }
                    }
                    other => errors.push(SettingError::new(
                        at(key),
                        Some(value_text(other)),
                        "expected an array of library names or one comma-separated string",
                        "using no passthrough libraries from the file",
                    )),
                },
                "reserve" => {
                    config.reserve = checked(
                        value.as_str().and_then(Reserve::parse_setting),
                        || at(key),
                        value,
                        &format!("expected a string {ACCEPTED_RESERVE}"),
                        "using XHSA_RESERVE if set, else the default (auto@1)",
                        &mut errors,
                    );
                }
                "policy" => {
                    config.policy = checked(
                        value.as_str().and_then(Sharing::parse),
                        || at(key),
                        value,
                        &format!("expected a string {ACCEPTED_POLICY}"),
                        "using XHSA_POLICY if set, else the default (slo:1.2x)",
                        &mut errors,
                    );
                }
                "board_dir" => {
                    config.board_dir = match value {
                        toml::Value::String(dir) if dir.trim().starts_with('/') => {
                            Some(PathBuf::from(dir.trim()))
                        }
                        _ => None,
                    };
                    if config.board_dir.is_none() {
                        errors.push(SettingError::new(
                            at(key),
                            Some(value_text(value)),
                            "expected an absolute directory path (a string starting with '/')",
                            "XHSA_BOARD_DIR, else /dev/shm",
                        ));
                    }
                }
                "board_group" => {
                    config.board_group = match value {
                        toml::Value::Integer(n) => u32::try_from(*n).ok().map(GroupSpec::Id),
                        toml::Value::String(name) if !name.trim().is_empty() => {
                            Some(GroupSpec::Name(name.trim().to_string()))
                        }
                        _ => None,
                    };
                    if config.board_group.is_none() {
                        errors.push(SettingError::new(
                            at(key),
                            Some(value_text(value)),
                            "expected a group name (string) or a numeric gid",
                            "each user's processes share a board of their own (mode 0600)",
                        ));
                    }
                }
                "control_max_level" => {
                    config.control_max_level = value.as_integer().and_then(Level::new);
                    if config.control_max_level.is_none() {
                        errors.push(SettingError::new(
                            at(key),
                            Some(value_text(value)),
                            format!("expected {ACCEPTED_PRIORITY}"),
                            "non-root users' xhsactl set-priority is not capped (255)",
                        ));
                    }
                }
                "process" | "library" => {
                    let rules = parse_rules(key, value, origin, &mut errors);
                    if key == "process" {
                        config.process_rules = rules;
                    } else {
                        config.library_rules = rules;
                    }
                }
                other => errors.push(SettingError::new(
                    at(other),
                    Some(value_text(value)),
                    format!("unknown key `{other}`; accepted keys: {}", accepted(CONFIG_KEYS)),
                    "ignoring it",
                )),
            }
        }
        (config, errors)
    }

    /// Reads and parses a config file through `read` (so tests need no files).
    pub fn load(
        path: &Path,
        read: impl Fn(&Path) -> std::io::Result<String>,
    ) -> (Config, Vec<SettingError>) {
        let origin = path.display().to_string();
        match read(path) {
            Ok(text) => Config::parse(&text, &origin),
            Err(e) => (
                Config::default(),
                vec![SettingError::new(
                    format!("{ENV_CONFIG}={origin}"),
                    None,
                    format!("cannot read the config file: {e}"),
                    "running without a config file",
                )],
            ),
        }
    }
}

pub(super) fn parse_rules(
    kind: &str,
    value: &toml::Value,
    origin: &str,
    errors: &mut Vec<SettingError>,
) -> Vec<Rule> {
    let Some(items) = value.as_array() else {
        errors.push(SettingError::new(
            format!("{origin}: {kind}"),
            Some(value_text(value)),
            format!("expected an array of tables ([[{kind}]] sections with `name` and `priority`)"),
            format!("no {kind} rules"),
        ));
        return Vec::new();
    };
    let mut rules = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = |key: &str| format!("{origin}: {kind}[{i}]{key}");
        let Some(table) = item.as_table() else {
            errors.push(SettingError::new(
                at(""),
                Some(value_text(item)),
                "expected a table with `name` and `priority`",
                "skipping this rule",
            ));
            continue;
        };
        let mut name = None;
        let mut priority = None;
        let mut valid = true;
        for (key, v) in table {
            match key.as_str() {
                "name" => match v.as_str().map(str::trim).filter(|s| !s.is_empty()) {
                    Some(s) => name = Some(s.to_string()),
                    None => {
                        valid = false;
                        errors.push(SettingError::new(
                            at(".name"),
                            Some(value_text(v)),
                            format!("expected a non-empty {kind} name (string)"),
                            "skipping this rule",
                        ));
                    }
                },
                "priority" => match v.as_integer().and_then(Level::new) {
                    Some(level) => priority = Some(level),
                    None => {
                        valid = false;
                        errors.push(SettingError::new(
                            at(".priority"),
                            Some(value_text(v)),
                            format!("expected {ACCEPTED_PRIORITY}"),
                            "skipping this rule",
                        ));
                    }
                },
                other => errors.push(SettingError::new(
                    at(&format!(".{other}")),
                    Some(value_text(v)),
                    format!("unknown key `{other}`; accepted keys: {}", accepted(RULE_KEYS)),
                    "ignoring it",
                )),
            }
        }
        match (name, priority) {
            (Some(name), Some(priority)) => rules.push(Rule { name, priority }),
            _ if !valid => {}
            (name, _) => errors.push(SettingError::new(
                at(""),
                None,
                format!("missing `{}`", if name.is_none() { "name" } else { "priority" }),
                "skipping this rule",
            )),
        }
    }
    rules
}
