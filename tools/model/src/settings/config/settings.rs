//! All of a process's settings together ([`Settings`]): read from its environment and config
//! file once, with the errors to report.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::partition::{Reserve, DEFAULT_RESERVE};
use crate::priority::{Level, Priority, StreamPriority};
use crate::settings::whitelist::Whitelist;
use crate::sharing::Sharing;
use crate::window_size::WindowSize;

use super::env::{EnvSettings, DEFAULT_BOARD_DIR};
use super::error::SettingError;
use super::file::Config;
use super::identity::ProcessIdentity;
use super::priority::{effective_priority, PriorityInputs};

/// The settings of a process: environment and config file combined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `XHSA_DISABLE`: pure passthrough.
    pub disable: bool,
    /// W: `XHSA_WINDOW`, else the config's `window`, else 2.
    pub window: WindowSize,
    /// The environment's and the config file's passthrough libraries.
    pub passthrough: Whitelist,
    /// `XHSA_PRIORITY` (or its alias).
    pub env_priority: Option<Level>,
    /// The config file (empty without one).
    pub config: Config,
    /// `XHSA_CONFIG`.
    pub config_path: Option<PathBuf>,
    /// `XHSA_LOG`.
    pub log: Option<String>,
    /// `XHSA_BOARD_DIR`, else [`DEFAULT_BOARD_DIR`].
    pub board_dir: PathBuf,
    /// `XHSA_RESERVE`, else the config's `reserve`, else [`DEFAULT_RESERVE`] (`auto@1`): a
    /// reserved CU partition for the latency-critical levels ([`crate::partition`]); `None`
    /// when set to `none`.
    pub reserve: Option<Reserve>,
    /// `XHSA_POLICY`, else the config's `policy`, else `slo:1.2x`
    /// ([`crate::sharing::DEFAULT_POLICY`]): how this process's
    /// lower-priority queues share the GPU with higher work ([`crate::sharing`]).
    pub policy: Sharing,
}

impl Settings {
    /// The highest level a non-root controller may give this process's queues
    /// (`control_max_level`, default 255: no cap).
    pub fn control_max_level(&self) -> Level {
        self.config.control_max_level.unwrap_or(Level::MAX)
    }

    /// Whether a controller of real uid `uid` may give this process's queues `level`: root
    /// always, others up to [`Settings::control_max_level`]; `Err(cap)` otherwise.
    pub fn control_allows(&self, uid: u32, level: Level) -> Result<(), Level> {
        let cap = self.control_max_level();
        if uid != 0 && level > cap {
            Err(cap)
        } else {
            Ok(())
        }
    }

    /// Combines what the environment and the config file say.
    pub fn combine(env: EnvSettings, config: Config) -> Settings {
        let mut passthrough = env.passthrough_libs;
        passthrough.extend(config.passthrough_libs.entries());
        Settings {
            disable: env.disable,
            window: env.window.or(config.window).unwrap_or_default(),
            reserve: env.reserve.or(config.reserve).unwrap_or(Some(DEFAULT_RESERVE)),
            policy: env.policy.or(config.policy).unwrap_or_default(),
            passthrough,
            env_priority: env.priority,
            config_path: env.config_path,
            log: env.log,
            board_dir: env
                .board_dir
                .or_else(|| config.board_dir.clone())
                .unwrap_or_else(|| PathBuf::from(DEFAULT_BOARD_DIR)),
            config,
        }
    }

    /// Reads the environment through `lookup` and the config file it names through `read`. With
    /// `XHSA_DISABLE=1` the config file is not read.
    pub fn load(
        lookup: impl Fn(&str) -> Option<OsString>,
        read: impl Fn(&Path) -> std::io::Result<String>,
    ) -> (Settings, Vec<SettingError>) {
        let (env, mut errors) = EnvSettings::from_lookup(lookup);
        let config = match (&env.config_path, env.disable) {
            (Some(path), false) => {
                let (config, config_errors) = Config::load(path, read);
                errors.extend(config_errors);
                config
            }
            _ => Config::default(),
        };
        (Settings::combine(env, config), errors)
    }

    /// Reads the process environment and the config file from disk.
    pub fn from_process_env() -> (Settings, Vec<SettingError>) {
        Settings::load(|name| std::env::var_os(name), |p| std::fs::read_to_string(p))
    }

    /// The effective priority of a queue of this process.
    pub fn priority_for(
        &self,
        stream: StreamPriority,
        process: &ProcessIdentity,
        library: Option<&str>,
    ) -> Priority {
        effective_priority(&PriorityInputs {
            stream,
            env: self.env_priority,
            config: &self.config,
            process,
            library,
        })
    }
}
