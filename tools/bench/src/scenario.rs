//! Scenario files: which workload processes share the GPU, in which roles.
//!
//! ```toml
//! description = "ResNet-18 bs8 at 20 req/s beside ResNet-50 bs1024 flat out"
//! time_scale = 10          # default of `run --time-scale`
//!
//! [[process]]
//! model = "resnet18_bs8"   # a table in tools/workloads/models/
//! role = "hp"              # hp: latency job (requests timed); lp: batch job (items counted)
//! rate = 20.0              # requests per device-second; absent: back to back (flat out)
//! priority = "high"        # the scheduling class xhsa will give it (native mode ignores it)
//!
//! [[process]]               # one process, several threads, each with its own stream
//! model = "matmul2048_task"
//! streams = [{ role = "hp" }, { role = "lp", count = 15 }]
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What a stream's job is measured for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Latency job: every request's latency is recorded.
    Hp,
    /// Batch job: items per second are counted.
    Lp,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Hp => "hp",
            Role::Lp => "lp",
        }
    }
}

/// The scheduling class a stream asks xhsa for. Native mode submits every stream the way
/// PyTorch does (one plain stream, default priority), so the class changes nothing there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    High,
    Normal,
    Low,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    pub role: Role,
    /// Requests per device-second; None: back to back.
    pub rate: Option<f64>,
    pub priority: Priority,
}

/// One workload process (repeated `count` times in the scenario).
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    pub model: String,
    /// Its streams, one thread each. A process with one stream submits through HIP's default
    /// stream, as PyTorch does.
    pub streams: Vec<Stream>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub time_scale: f64,
    pub processes: Vec<Process>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    #[serde(default)]
    description: String,
    #[serde(default = "one")]
    time_scale: f64,
    process: Vec<RawProcess>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProcess {
    model: String,
    #[serde(default = "one_u")]
    count: u32,
    role: Option<Role>,
    rate: Option<f64>,
    priority: Option<Priority>,
    streams: Option<Vec<RawStream>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStream {
    role: Role,
    rate: Option<f64>,
    priority: Option<Priority>,
    #[serde(default = "one_u")]
    count: u32,
}

fn one() -> f64 {
    1.0
}
fn one_u() -> u32 {
    1
}

fn default_priority(role: Role) -> Priority {
    match role {
        Role::Hp => Priority::High,
        Role::Lp => Priority::Low,
    }
}

fn stream(role: Role, rate: Option<f64>, priority: Option<Priority>) -> Result<Stream, String> {
    if let Some(r) = rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(format!("rate = {r}: must be a positive number of requests per second (omit it for back to back)"));
        }
    }
    Ok(Stream { role, rate, priority: priority.unwrap_or(default_priority(role)) })
}

impl Scenario {
    /// Parses a scenario's text; `models` lists the model tables that exist.
    pub fn parse(name: &str, text: &str, models: &[String]) -> Result<Scenario, String> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| format!("scenario {name}: {e}"))?;
        if !(raw.time_scale.is_finite() && (1.0..=1000.0).contains(&raw.time_scale)) {
            return Err(format!(
                "scenario {name}: time_scale = {} is out of range 1-1000",
                raw.time_scale
            ));
        }
        let mut processes = Vec::new();
        for p in raw.process {
            if !models.contains(&p.model) {
                return Err(format!(
                    "scenario {name}: unknown model {:?}; models: {}",
                    p.model,
                    models.join(", ")
                ));
            }
            let streams = match (p.role, p.streams) {
                (Some(role), None) => vec![stream(role, p.rate, p.priority).map_err(|e| format!("scenario {name}: {e}"))?],
                (None, Some(list)) if p.rate.is_none() && p.priority.is_none() => {
                    let mut v = Vec::new();
                    for s in list {
                        let one = stream(s.role, s.rate, s.priority).map_err(|e| format!("scenario {name}: {e}"))?;
                        v.extend(std::iter::repeat_n(one, s.count as usize));
                    }
                    v
                }
                _ => return Err(format!("scenario {name}: process {:?} needs either `role` (with optional rate, priority) or `streams`, not both", p.model)),
            };
            if streams.is_empty() {
                return Err(format!("scenario {name}: process {:?} has no streams", p.model));
            }
            for _ in 0..p.count {
                processes.push(Process { model: p.model.clone(), streams: streams.clone() });
            }
        }
        if !processes.iter().any(|p| p.streams.iter().any(|s| s.role == Role::Hp)) {
            return Err(format!("scenario {name}: needs at least one stream with role = \"hp\""));
        }
        Ok(Scenario {
            name: name.to_string(),
            description: raw.description,
            time_scale: raw.time_scale,
            processes,
        })
    }

    /// Whether any stream has this role.
    pub fn has(&self, role: Role) -> bool {
        self.processes.iter().any(|p| p.streams.iter().any(|s| s.role == role))
    }

    /// The processes of one phase: only the streams of `role` (both when None); processes left
    /// without streams drop out.
    pub fn phase(&self, role: Option<Role>) -> Vec<Process> {
        self.processes
            .iter()
            .filter_map(|p| {
                let streams: Vec<Stream> = p
                    .streams
                    .iter()
                    .filter(|s| role.is_none_or(|r| s.role == r))
                    .cloned()
                    .collect();
                (!streams.is_empty()).then(|| Process { model: p.model.clone(), streams })
            })
            .collect()
    }
}

/// The scenario files of a directory, by name (file stem), sorted.
pub fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension().is_some_and(|x| x == "toml"))
                .then(|| p.file_stem()?.to_str().map(str::to_string))
                .flatten()
        })
        .collect();
    v.sort();
    v
}

/// Loads scenario `name` (a name from `dir`, or a path to a `.toml` file).
pub fn load(dir: &Path, name: &str, models: &[String]) -> Result<Scenario, String> {
    let path = if name.ends_with(".toml") || name.contains('/') {
        PathBuf::from(name)
    } else {
        dir.join(format!("{name}.toml"))
    };
    let text = std::fs::read_to_string(&path).map_err(|_| {
        let known = list(dir);
        format!(
            "unknown scenario {name:?}; scenarios: {} (or a path to a .toml file)",
            if known.is_empty() { "none found".into() } else { known.join(", ") }
        )
    })?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or(name);
    Scenario::parse(stem, &text, models)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn models() -> Vec<String> {
        ["resnet18_bs8", "resnet50_bs1024", "matmul2048_task"].map(String::from).to_vec()
    }

    #[test]
    fn parses_roles_rates_and_streams() {
        let s = Scenario::parse(
            "t",
            "time_scale = 4\n[[process]]\nmodel = \"resnet18_bs8\"\nrole = \"hp\"\nrate = 20\n\
             [[process]]\nmodel = \"matmul2048_task\"\nstreams = [{ role = \"hp\" }, { role = \"lp\", count = 3 }]\n",
            &models(),
        )
        .unwrap();
        assert_eq!(s.time_scale, 4.0);
        assert_eq!(s.processes.len(), 2);
        assert_eq!(s.processes[0].streams[0].rate, Some(20.0));
        assert_eq!(s.processes[0].streams[0].priority, Priority::High);
        assert_eq!(s.processes[1].streams.len(), 4);
        assert_eq!(s.phase(Some(Role::Hp)).len(), 2);
        assert_eq!(s.phase(Some(Role::Lp)).len(), 1);
        assert_eq!(s.phase(Some(Role::Lp))[0].streams.len(), 3);
    }

    #[test]
    fn errors_list_what_exists() {
        let e = Scenario::parse("t", "[[process]]\nmodel = \"vgg\"\nrole = \"hp\"\n", &models())
            .unwrap_err();
        assert!(e.contains("unknown model") && e.contains("resnet18_bs8"), "{e}");
        let e = Scenario::parse(
            "t",
            "[[process]]\nmodel = \"resnet18_bs8\"\nrole = \"hp\"\nspeed = 1\n",
            &models(),
        )
        .unwrap_err();
        assert!(e.contains("speed"), "{e}");
        let e = Scenario::parse(
            "t",
            "[[process]]\nmodel = \"resnet18_bs8\"\nrole = \"lp\"\n",
            &models(),
        )
        .unwrap_err();
        assert!(e.contains("hp"), "{e}");
        let e = Scenario::parse(
            "t",
            "[[process]]\nmodel = \"resnet18_bs8\"\nrole = \"hp\"\nrate = -1\n",
            &models(),
        )
        .unwrap_err();
        assert!(e.contains("rate"), "{e}");
    }

    #[test]
    fn unknown_scenario_lists_the_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let e = load(&dir, "nope", &models()).unwrap_err();
        for s in ["r18-alone", "moderate", "intensive", "bert6", "matmul16"] {
            assert!(e.contains(s), "{e}");
        }
    }

    #[test]
    fn shipped_scenarios_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let models: Vec<String> = crate::models::NAMES.iter().map(|s| s.to_string()).collect();
        for s in list(&dir) {
            load(&dir, &s, &models).unwrap();
        }
    }
}
