//! xhsa-bench: calibrated workloads on one emulated (or real) GPU.
//!
//! - [`table`]: kernel tables, the flat description of one request the workload replays;
//! - [`models`]: how those tables are derived from layer shapes and MI308X figures;
//! - [`scenario`]: scenario files (`tools/bench/scenarios/*.toml`);
//! - [`sim`]: the emulator's HWS model driven in virtual time (`xhsa-bench predict`);
//! - [`run`]: starting the workload processes on a private emulated device, phase by phase;
//! - [`stats`], [`report`]: percentiles, the table and the JSON.

pub mod models;
pub mod phase;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod stats;
pub mod table;
