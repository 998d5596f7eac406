//! A snapshot as JSON: `{"gpus":[{"node":N,"processes":[{"pid":P,"name":S,"queues":[{"id":Q,
//! "partition":S,"priority":L,"state":S,"pending":N,"in_flight":N,"dispatched":N,"preemptions":N,...}]}]}]}`.
//!
//! `priority` and `requested_priority` are levels (`-256..=255`, higher is more urgent), with
//! their stream priorities beside them; times are nanoseconds; the latency histogram is a list
//! of buckets with their upper bound in µs (`null` for the last, open one).
#![forbid(unsafe_code)]

use crate::snapshot::{Queue, Snapshot};
use serde::Serialize;

#[derive(Serialize)]
struct Root<'a> {
    board_dir: String,
    gpus: Vec<GpuJ<'a>>,
    problems: &'a [String],
}

#[derive(Serialize)]
struct GpuJ<'a> {
    node: u32,
    board: String,
    processes: Vec<ProcessJ<'a>>,
}

#[derive(Serialize)]
struct ProcessJ<'a> {
    /// The pid as this monitor sees it (a container's process: its host pid, when visible).
    pid: u32,
    /// The pid in the process's own namespace.
    ns_pid: u32,
    /// Runs in another pid namespace (a container).
    container: bool,
    /// `pid` is a pid of this monitor's namespace.
    visible: bool,
    cgroup: Option<&'a str>,
    uid: u32,
    name: &'a str,
    alive: bool,
    /// `strict`, `weights:H:L`, `slo:Kx`, `cap:PCT` (`XHSA_POLICY`).
    policy: &'a str,
    /// The share of time its held queues get now, per mille.
    held_share_permille: u32,
    queues: Vec<QueueJ<'a>>,
}

#[derive(Serialize)]
struct Bucket {
    le_us: Option<u64>,
    count: u32,
}

#[derive(Serialize)]
struct Recent {
    started_ns_ago: u64,
    duration_ns: Option<u64>,
}

#[derive(Serialize)]
struct QueueJ<'a> {
    id: u64,
    /// `whole`, or `reserved (CUS@LEVEL)` / `shared (CUS@LEVEL)` under `XHSA_RESERVE`.
    partition: String,
    priority: Option<i32>,
    stream: Option<&'a str>,
    requested_priority: Option<i32>,
    requested_stream: Option<&'a str>,
    state: &'static str,
    paused: bool,
    overridden: bool,
    stale: bool,
    confirmed_ns_ago: u64,
    pending: u32,
    in_flight: u32,
    submitted: u64,
    dispatched: u64,
    completed: u64,
    preemptions: u64,
    time_preempted_ns: u64,
    time_held_ns: u64,
    held_events: u64,
    packet_ns: u64,
    own_packet_ns: u64,
    time_busy_ns: u64,
    latency_p50_us: Option<u64>,
    latency_p99_us: Option<u64>,
    latency: Vec<Bucket>,
    recent_preemptions: Vec<Recent>,
}

fn queue(q: &Queue) -> QueueJ<'_> {
    QueueJ {
        id: q.id,
        partition: q.partition.to_string(),
        priority: q.priority.map(|p| p.level),
        stream: q.priority.map(|p| p.stream),
        requested_priority: q.requested.map(|p| p.level),
        requested_stream: q.requested.map(|p| p.stream),
        state: q.state.name(),
        paused: q.paused,
        overridden: q.overridden,
        stale: q.stale,
        confirmed_ns_ago: q.confirmed_ns_ago,
        pending: q.pending,
        in_flight: q.in_flight,
        submitted: q.submitted,
        dispatched: q.dispatched,
        completed: q.completed,
        preemptions: q.preemptions,
        time_preempted_ns: q.preempted_ns,
        time_held_ns: q.held_ns,
        held_events: q.held_events,
        packet_ns: q.packet_ns,
        own_packet_ns: q.own_packet_ns,
        time_busy_ns: q.busy_ns,
        latency_p50_us: q.latency_quantile_us(0.5),
        latency_p99_us: q.latency_quantile_us(0.99),
        latency: q.latency.iter().map(|(le, n)| Bucket { le_us: *le, count: *n }).collect(),
        recent_preemptions: q
            .recent_preemptions
            .iter()
            .map(|(ago, d)| Recent { started_ns_ago: *ago, duration_ns: *d })
            .collect(),
    }
}

/// The snapshot as one line of JSON.
pub fn render(s: &Snapshot) -> String {
    let root = Root {
        board_dir: s.dir.display().to_string(),
        gpus: s
            .gpus
            .iter()
            .map(|g| GpuJ {
                node: g.node,
                board: g.board.display().to_string(),
                processes: g
                    .processes
                    .iter()
                    .map(|p| ProcessJ {
                        pid: p.pid,
                        ns_pid: p.ns_pid,
                        container: p.other_namespace,
                        visible: p.visible,
                        cgroup: p.cgroup.as_deref(),
                        uid: p.uid,
                        name: &p.name,
                        alive: p.alive,
                        policy: &p.policy,
                        held_share_permille: p.held_share_permille,
                        queues: p.queues.iter().map(queue).collect(),
                    })
                    .collect(),
            })
            .collect(),
        problems: &s.problems,
    };
    serde_json::to_string(&root).unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
}
