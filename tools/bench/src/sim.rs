//! `xhsa-bench predict`: the scenario's workloads driven through the emulator's own HWS model
//! (`xhsa_emu::device::Hws`, the code the shared device runs) in virtual device time, with an
//! ideal host: no launch cost, no wake-up latency, no time lost between a kernel's completion
//! and the fetch of the next one unless `hop_ns` says so. It shows what the timing model
//! implies, free of this host's scheduling noise, and in seconds rather than minutes.
//!
//! It mirrors the emulator's packet processor: HIP sets the barrier bit on every dispatch, so a
//! stream's next kernel is fetched when the previous one completes; the device refills the CU
//! slots freed by a completion (from every queue with work) before that fetch.
//!
//! An LLM server's request (a process with `step_model`) is its prefill table followed by its
//! decode steps, one table each; after every token the host waits for the step to complete
//! before issuing the next (the workload's `hipStreamSynchronize`), so each step's first kernel
//! is issued its host time after the previous token.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use xhsa_emu::device::{Capacity, CuPool, Hws, KernelJob, Profile, WgNeed};

use crate::phase::{Decoded, PhaseResult, StreamResult};
use crate::scenario::{Process, Role};
use crate::table::{Table, CUS, LDS_PER_CU, WAVES_PER_CU};

/// Host and device-side delays of the prediction (device ns).
#[derive(Clone, Copy, Debug)]
pub struct Host {
    /// From a kernel's completion to the next kernel of its stream reaching the HWS.
    pub hop_ns: u64,
    /// Queue priority every stream's hardware queue gets (native: all the same).
    pub priority: u8,
    /// Workgroup run-time jitter of the device (`timing.wg_jitter` of tools/bench/device.toml).
    pub wg_jitter: f64,
    /// CU pipe and HBM capacities the kernels' contention profiles share
    /// (`timing.cu_pipe_capacity`, `timing.hbm_bytes_per_ns`).
    pub capacity: Capacity,
}

impl Default for Host {
    fn default() -> Self {
        Host { hop_ns: 0, priority: 7, wg_jitter: 0.0, capacity: Capacity::default() }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrival(usize),
    Submit(usize),
}

struct S {
    role: Role,
    rate: Option<f64>,
    table: Table,
    busy: bool,
    /// Arrivals so far of a fixed-rate stream.
    arrivals: u64,
    offset: u64,
    /// Requests that arrived while the previous one ran: they start when it completes (the
    /// request loop is synchronous, as a PyTorch serving loop is).
    pending: u32,
    start: u64,
    kernel: usize,
    /// When the host issues the current kernel.
    host_t: u64,
    done: Vec<(u64, u64)>,
    /// An LLM server's token boundaries: kernel counts after which a token is out (the
    /// prefill's length, then the end of each step). Empty for other workloads.
    marks: Vec<usize>,
    /// Arrival times of the requests not yet started.
    arrived: VecDeque<u64>,
    arrival: u64,
    tokens: Vec<u64>,
    decoded: Vec<Decoded>,
}

fn start(s: &mut S, t: u64, i: usize, heap: &mut BinaryHeap<Reverse<(u64, Ev)>>) {
    s.busy = true;
    s.start = t;
    s.kernel = 0;
    s.arrival = s.arrived.pop_front().unwrap_or(t);
    s.tokens.clear();
    s.host_t = t + s.table.kernels[0].host_ns;
    heap.push(Reverse((s.host_t, Ev::Submit(i))));
}

/// The kernels of one request of process `p` and its token boundaries (see [`S::marks`]).
fn request_table(p: &Process, tables: &HashMap<String, Table>) -> (Table, Vec<usize>) {
    let mut t = tables[&p.model].clone();
    let mut marks = Vec::new();
    if let Some(d) = &p.decode {
        let step = &tables[&d.step_model];
        marks.push(t.kernels.len());
        for _ in 0..d.steps {
            t.kernels.extend(step.kernels.iter().cloned());
            marks.push(t.kernels.len());
        }
    }
    (t, marks)
}

/// Runs `processes` (their streams, with the tables of `tables` by model name) for `seconds`
/// of device time.
pub fn run(
    processes: &[Process],
    tables: &HashMap<String, Table>,
    seconds: f64,
    host: Host,
) -> PhaseResult {
    let mut hws = Hws::new(CuPool::new(CUS as usize, WAVES_PER_CU, LDS_PER_CU))
        .with_jitter(host.wg_jitter)
        .with_capacity(host.capacity);
    let mut streams = Vec::new();
    let mut owner = Vec::new();
    for (pi, p) in processes.iter().enumerate() {
        for (si, st) in p.streams.iter().enumerate() {
            let key = streams.len() as u32;
            hws.add_queue(key, host.priority);
            // Stagger the starts a little, as processes never start in the same nanosecond.
            let offset = 37_000 * streams.len() as u64;
            let (table, marks) = request_table(p, tables);
            streams.push(S {
                role: st.role,
                rate: st.rate,
                table,
                marks,
                arrived: VecDeque::new(),
                arrival: 0,
                tokens: Vec::new(),
                decoded: Vec::new(),
                host_t: 0,
                busy: false,
                arrivals: 0,
                offset,
                pending: 0,
                start: 0,
                kernel: 0,
                done: Vec::new(),
            });
            owner.push((pi, si));
        }
    }
    let end = (seconds * 1e9) as u64;
    let mut heap: BinaryHeap<Reverse<(u64, Ev)>> = BinaryHeap::new();
    for (i, s) in streams.iter().enumerate() {
        heap.push(Reverse((s.offset, Ev::Arrival(i))));
    }
    let mut tags: HashMap<u64, usize> = HashMap::new();
    let mut next_tag = 1u64;
    loop {
        let te = heap.peek().map(|Reverse((t, _))| *t);
        let th = hws.next_event();
        let now = match (te, th) {
            (None, None) => break,
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
        };
        if now > end {
            break;
        }
        if th.is_some_and(|b| b <= now) {
            let Some((t, done)) = hws.step(now) else {
                continue;
            };
            for c in done {
                let i = tags.remove(&c.tag).expect("known tag");
                let s = &mut streams[i];
                s.kernel += 1;
                let token = s.marks.binary_search(&s.kernel).is_ok();
                if token {
                    s.tokens.push(t);
                    // The host waited for this token: the next step starts from it.
                    s.host_t = s.host_t.max(t);
                }
                if s.kernel == s.table.kernels.len() {
                    if !s.marks.is_empty() {
                        s.decoded.push(Decoded {
                            arrival: s.arrival as f64 / 1e9,
                            first: s.tokens[0] as f64 / 1e9,
                            steps: s.tokens[1..].iter().map(|&x| x as f64 / 1e9).collect(),
                        });
                    }
                    s.done.push((s.start, t));
                    s.busy = false;
                    if s.rate.is_none() || s.pending > 0 {
                        s.pending = s.pending.saturating_sub(1);
                        start(s, t, i, &mut heap);
                    }
                } else {
                    s.host_t += s.table.kernels[s.kernel].host_ns;
                    heap.push(Reverse((s.host_t.max(t + host.hop_ns), Ev::Submit(i))));
                }
            }
            continue;
        }
        let Reverse((t, ev)) = heap.pop().expect("peeked");
        hws.sync(t);
        match ev {
            Ev::Arrival(i) => {
                let s = &mut streams[i];
                s.arrived.push_back(t);
                if let Some(rate) = s.rate {
                    s.arrivals += 1;
                    let next = s.offset + (s.arrivals as f64 * 1e9 / rate) as u64;
                    heap.push(Reverse((next, Ev::Arrival(i))));
                }
                if s.busy {
                    s.pending += 1;
                } else {
                    start(s, t, i, &mut heap);
                }
            }
            Ev::Submit(i) => {
                let s = &streams[i];
                let k = &s.table.kernels[s.kernel];
                let tag = next_tag;
                next_tag += 1;
                tags.insert(tag, i);
                let job = KernelJob {
                    tag,
                    workgroups: k.workgroups,
                    need: WgNeed { waves: k.waves(), lds: k.lds },
                    wg_ns: k.wg_ns,
                    profile: Profile {
                        cu_util: k.util_permille as f32 / 1000.0,
                        hbm_bytes: k.bytes_per_wg,
                    },
                };
                hws.submit(i as u32, job, t);
            }
        }
    }
    let streams = streams
        .into_iter()
        .zip(owner)
        .map(|(s, (process, stream))| StreamResult {
            process,
            stream,
            role: s.role,
            model: s.table.model.clone(),
            items: s.table.items,
            unit: s.table.unit.clone(),
            requests: s.done.iter().map(|&(a, b)| (a as f64 / 1e9, b as f64 / 1e9)).collect(),
            decoded: s.decoded,
        })
        .collect();
    PhaseResult { streams, seconds }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Priority, Stream};
    use crate::table::Kernel;

    fn table(name: &str, kernels: Vec<Kernel>) -> Table {
        Table { model: name.into(), items: 1, unit: "img".into(), kernels }
    }

    fn k(wgs: u64, lds: u32, wg_ns: u64, host_ns: u64) -> Kernel {
        Kernel {
            label: "k".into(),
            workgroups: wgs,
            threads: 256,
            lds,
            wg_ns,
            host_ns,
            util_permille: 0,
            bytes_per_wg: 0,
        }
    }

    fn proc(model: &str, role: Role, rate: Option<f64>) -> Process {
        Process {
            model: model.into(),
            streams: vec![Stream { role, rate, priority: Priority::Normal }],
            decode: None,
        }
    }

    #[test]
    fn alone_latency_is_the_tables_alone_time() {
        let t = table(
            "a",
            vec![
                k(800, 32768, 10_000, 30_000),
                k(10, 0, 5_000, 30_000),
                k(100, 32768, 50_000, 45_000),
            ],
        );
        let want = t.alone_ns() as f64 / 1e6;
        let tables = HashMap::from([("a".to_string(), t)]);
        let r = run(&[proc("a", Role::Hp, Some(100.0))], &tables, 1.0, Host::default());
        let s = r.summarize(0.0, 1.0);
        let l = s.hp.unwrap();
        assert_eq!(l.count, 100);
        assert!(
            (l.mean_ms - want).abs() < 1e-6 && (l.p99_ms - want).abs() < 1e-6,
            "{l:?} vs {want}"
        );
    }

    /// docs/timing-model-contention.md 6.2: every shipped model alone gives, to the ns, what it
    /// gives without contention profiles (the fixed-end model), with the scenarios' jitter.
    #[test]
    fn every_model_alone_is_unchanged_by_its_contention_profile() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/models");
        let host = Host { wg_jitter: 0.1, ..Host::default() };
        for (name, seconds) in [
            ("resnet18_bs8", 0.5),
            ("resnet50_bs8", 0.5),
            ("bert_base", 0.5),
            ("resnet50_bs1024", 1.2),
        ] {
            let text = std::fs::read_to_string(dir.join(format!("{name}.kernels"))).unwrap();
            let with = Table::parse(&text).unwrap();
            assert!(with.kernels.iter().any(|k| k.profiled()), "{name}");
            let mut without = with.clone();
            for k in &mut without.kernels {
                k.util_permille = 0;
                k.bytes_per_wg = 0;
            }
            let go = |t: &Table| {
                let tables = HashMap::from([(name.to_string(), t.clone())]);
                let r = run(&[proc(name, Role::Hp, None)], &tables, seconds, host);
                r.streams[0].requests.clone()
            };
            let (a, b) = (go(&with), go(&without));
            assert!(!a.is_empty(), "{name}");
            assert_eq!(a, b, "{name}");
        }
    }

    #[test]
    fn an_llm_servers_tokens_follow_its_tables() {
        // Prefill: one 1 ms kernel; a step: two kernels of 100 us, each issued 10 us after
        // the host may (the first after the previous token).
        let pre = table("pre", vec![k(80, 0, 1_000_000, 0)]);
        let step = table("step", vec![k(80, 0, 100_000, 10_000); 2]);
        let tables = HashMap::from([("pre".to_string(), pre), ("step".to_string(), step)]);
        let mut p = proc("pre", Role::Hp, Some(10.0));
        p.decode = Some(crate::scenario::Decode { step_model: "step".into(), steps: 3 });
        let r = run(&[p], &tables, 1.0, Host::default());
        let d = &r.streams[0].decoded;
        assert_eq!(d.len(), 10);
        for x in d {
            assert!((x.first - x.arrival - 1e-3).abs() < 1e-12, "{x:?}");
            let mut prev = x.first;
            for &t in &x.steps {
                // 10 us host, 100 us, 100 us (the second kernel's host time overlaps).
                assert!((t - prev - 210e-6).abs() < 1e-12, "{x:?}");
                prev = t;
            }
        }
        let s = r.summarize(0.0, 1.0);
        assert_eq!((s.ttft.unwrap().count, s.tpot.unwrap().count), (10, 30));
    }

    #[test]
    fn contention_slows_co_running_jobs() {
        // Two jobs whose workgroups each use 0.6 of a CU's pipe: alone 1 ms per request,
        // together on every CU at 1.2 x.
        let mut kern = k(80, 0, 100_000, 0);
        kern.util_permille = 600;
        let t = table("a", vec![kern; 10]);
        let tables = HashMap::from([("a".to_string(), t)]);
        let procs = [proc("a", Role::Hp, None), proc("a", Role::Lp, None)];
        let s = run(&procs, &tables, 1.0, Host::default()).summarize(0.1, 1.0);
        let l = s.hp.unwrap();
        assert!((l.mean_ms - 1.2).abs() < 0.05, "{l:?}");
    }

    #[test]
    fn long_lp_workgroups_delay_the_hp_job() {
        let hp = table("hp", vec![k(80, 32768, 20_000, 0); 10]);
        let lp = table("lp", vec![k(100_000, 32768, 1_000_000, 0)]);
        let tables = HashMap::from([("hp".to_string(), hp), ("lp".to_string(), lp)]);
        let procs = [proc("hp", Role::Hp, Some(50.0)), proc("lp", Role::Lp, None)];
        let s = run(&procs, &tables, 3.0, Host::default()).summarize(1.0, 3.0);
        let l = s.hp.unwrap();
        // Alone 0.2 ms; each HP kernel now waits for LP workgroups of 1 ms to finish.
        assert!(l.mean_ms > 1.0, "{l:?}");
        assert!(s.lp_throughput_per_s.unwrap() > 0.0);
    }
}
