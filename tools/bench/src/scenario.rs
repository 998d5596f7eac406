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
//!
//! [[process]]               # an LLM server: each request is a prefill, then `steps` decode steps
//! model = "llama3_8b_prefill"        # the prefill table (the request's first token)
//! step_model = "llama3_8b_decode_bs8" # the table of one decode step (one more token)
//! steps = 32
//! role = "hp"
//! rate = 1.2
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
    /// An LLM server: every request of its streams is `model` (the prefill), then these decode
    /// steps, each synchronised (the host reads each step's tokens).
    pub decode: Option<Decode>,
}

/// The decode steps of an LLM server's request.
#[derive(Clone, Debug, PartialEq)]
pub struct Decode {
    /// The table of one decode step.
    pub step_model: String,
    /// Steps per request (tokens after the first).
    pub steps: u32,
}

impl Process {
    /// The model tables this process replays.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.model.as_str())
            .chain(self.decode.as_ref().map(|d| d.step_model.as_str()))
    }
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
    step_model: Option<String>,
    steps: Option<u32>,
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
            for m in std::iter::once(&p.model).chain(p.step_model.as_ref()) {
                if !models.contains(m) {
                    return Err(format!(
                        "scenario {name}: unknown model {m:?}; models: {}",
                        models.join(", ")
                    ));
                }
            }
            let decode = match (p.step_model, p.steps) {
                (Some(step_model), Some(steps)) if steps >= 1 => Some(Decode { step_model, steps }),
                (None, None) => None,
                (_, steps) => {
                    return Err(format!(
                        "scenario {name}: process {:?}: an LLM server needs both `step_model` (a \
                         model table) and `steps` (decode steps per request, >= 1){}",
                        p.model,
                        if steps == Some(0) { "; steps = 0 given" } else { "" }
                    ))
                }
            };
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
                processes.push(Process {
                    model: p.model.clone(),
                    streams: streams.clone(),
                    decode: decode.clone(),
                });
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
                (!streams.is_empty()).then(|| Process {
                    model: p.model.clone(),
                    streams,
                    decode: p.decode.clone(),
                })
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
    fn an_llm_server_has_a_step_model_and_steps() {
        let mut m = models();
        m.extend(["llm_prefill", "llm_step"].map(String::from));
        let s = Scenario::parse(
            "t",
            "[[process]]\nmodel = \"llm_prefill\"\nstep_model = \"llm_step\"\nsteps = 32\nrole = \"hp\"\nrate = 2\n\
             [[process]]\nmodel = \"resnet50_bs1024\"\nrole = \"lp\"\n",
            &m,
        )
        .unwrap();
        let d = s.processes[0].decode.as_ref().unwrap();
        assert_eq!((d.step_model.as_str(), d.steps), ("llm_step", 32));
        assert_eq!(s.processes[0].models().collect::<Vec<_>>(), ["llm_prefill", "llm_step"]);
        assert_eq!(s.processes[1].decode, None);
        assert_eq!(s.phase(Some(Role::Hp))[0].decode.as_ref(), Some(d));
        for bad in
            ["step_model = \"llm_step\"", "steps = 4", "step_model = \"llm_step\"\nsteps = 0"]
        {
            let e = Scenario::parse(
                "t",
                &format!("[[process]]\nmodel = \"llm_prefill\"\nrole = \"hp\"\n{bad}\n"),
                &m,
            )
            .unwrap_err();
            assert!(e.contains("step_model") && e.contains("steps"), "{bad}: {e}");
        }
        let e = Scenario::parse(
            "t",
            "[[process]]\nmodel = \"llm_prefill\"\nstep_model = \"nope\"\nsteps = 2\nrole = \"hp\"\n",
            &m,
        )
        .unwrap_err();
        assert!(e.contains("unknown model \"nope\"") && e.contains("llm_step"), "{e}");
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
