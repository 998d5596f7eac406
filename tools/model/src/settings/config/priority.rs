//! Which priority a queue gets: the sources in precedence order (operator, environment,
//! config rules, the application's stream priority) resolved to one level ([`resolve_level`]).

use crate::priority::{Level, Priority, StreamPriority};
use crate::settings::whitelist::name_matches;

use super::file::Config;
use super::identity::ProcessIdentity;

/// Where a queue's level came from (for the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrioritySource {
    /// `XHSA_PRIORITY` or its alias.
    Environment,
    /// The `[[library]]` rule for this library name.
    LibraryRule(String),
    /// The `[[process]]` rule for this process name.
    ProcessRule(String),
    /// The config file's top-level `priority`.
    ConfigDefault,
    /// Nothing set: 0.
    BuiltinDefault,
}

/// Everything the priority of one queue depends on.
#[derive(Clone, Copy, Debug)]
pub struct PriorityInputs<'a> {
    /// What the application set with `hsa_amd_queue_set_priority` (`Normal` until set).
    pub stream: StreamPriority,
    /// `XHSA_PRIORITY` (or its alias), if validly set.
    pub env: Option<Level>,
    /// The config file.
    pub config: &'a Config,
    /// The process.
    pub process: &'a ProcessIdentity,
    /// Path or code object URI of the library that created the queue, if known.
    pub library: Option<&'a str>,
}

/// The level of a queue and where it came from; see the module doc for the precedence.
pub fn resolve_level(inputs: &PriorityInputs<'_>) -> (Level, PrioritySource) {
    if let Some(level) = inputs.env {
        return (level, PrioritySource::Environment);
    }
    if let Some(library) = inputs.library.and_then(crate::settings::whitelist::library_file_name) {
        if let Some(rule) =
            inputs.config.library_rules.iter().find(|r| name_matches(&r.name, &library))
        {
            return (rule.priority, PrioritySource::LibraryRule(rule.name.clone()));
        }
    }
    if let Some(rule) = inputs.config.process_rules.iter().find(|r| inputs.process.matches(&r.name))
    {
        return (rule.priority, PrioritySource::ProcessRule(rule.name.clone()));
    }
    if let Some(level) = inputs.config.priority {
        return (level, PrioritySource::ConfigDefault);
    }
    (Level::DEFAULT, PrioritySource::BuiltinDefault)
}

/// The effective priority of a queue: [`resolve_level`]'s level with the application's stream
/// priority.
pub fn effective_priority(inputs: &PriorityInputs<'_>) -> Priority {
    Priority::new(resolve_level(inputs).0, inputs.stream)
}
