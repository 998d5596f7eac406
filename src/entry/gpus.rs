//! One scheduler per GPU the process uses: each GPU has its own priority rings, its own board
//! (the per-GPU table other processes on that GPU read) and its own preemption watcher, since
//! work on one GPU never delays work on another. A queue belongs to the GPU of the agent it was
//! created on (its KFD node id); [`GPU_OF`] finds it from the queue id without a lock.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use crate::entry::addr_map::AddrMap;
use crate::entry::topology::Cus;
use crate::path::scheduler::Scheduler;
use crate::preempt::Preemption;
use crate::settings::fault::FaultPlan;
use crate::trace::queue_track::QueueTracer;
use crate::trace::Sink;
use xhsa_model::partition::{Reserve, Side, Split, DEFAULT_RESERVE};
use xhsa_model::window_size::WindowSize;

/// Most GPUs one process schedules (KFD nodes beyond are passed through).
pub(crate) const MAX_GPUS: usize = 64;

/// One GPU's scheduling state.
pub(crate) struct Gpu {
    /// Its KFD node id (`None` if the runtime did not say).
    pub node: Option<u32>,
    pub sched: Mutex<Scheduler>,
    /// A pass was asked for while the scheduler was busy.
    pub pass_wanted: AtomicBool,
    /// Some queue waits for hardware room: the application's read-index polls retry a pass.
    pub stalled: AtomicBool,
    /// Some queue has untracked packets on the hardware ([`Scheduler::has_untracked`]): when
    /// another process shows up with work, the watcher asks for a pass that tracks them, so
    /// their completions are counted even if this process submits nothing more.
    pub untracked: AtomicBool,
    /// Passes left behind by an application thread wait for the forwarder thread.
    pub handed_off: AtomicBool,
    /// The board was tried (once).
    pub board_tried: AtomicBool,
    /// `XHSA_RESERVE` was applied to its scheduler, or found not to apply (once).
    pub split_planned: std::sync::Once,
    /// The GPU's preemption, once its board and the runtime's KFD descriptor are known.
    pub preempt: OnceLock<Arc<Preemption>>,
    /// `XHSA_RESERVE=auto@LEVEL`: what its live sizing needs, once its topology is known.
    pub sizing: OnceLock<crate::preempt::watcher::SizingSetup>,
    /// The queue tracks of `XHSA_TRACE` (none when unset); used under `sched`'s lock only.
    pub trace: Option<Mutex<QueueTracer>>,
}

/// The GPUs of the process, in the order they were first used.
pub(crate) struct Gpus {
    slots: [OnceLock<Gpu>; MAX_GPUS],
    adding: Mutex<()>,
    window: WindowSize,
    /// `XHSA_RESERVE`: each GPU's CUs are split by it when the GPU is first used.
    reserve: Option<Reserve>,
    faults: Arc<FaultPlan>,
    trace: Option<Arc<Sink>>,
}

/// libxhsa queue id → index of its GPU + 1.
pub(crate) static GPU_OF: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);

impl Gpus {
    pub fn new(
        window: WindowSize,
        reserve: Option<Reserve>,
        faults: Arc<FaultPlan>,
        trace: Option<Arc<Sink>>,
    ) -> Gpus {
        Gpus {
            slots: [const { OnceLock::new() }; MAX_GPUS],
            adding: Mutex::new(()),
            window,
            reserve,
            faults,
            trace,
        }
    }

    /// GPU `index`, if used.
    pub fn get(&self, index: usize) -> Option<&Gpu> {
        self.slots.get(index)?.get()
    }

    /// The GPU of queue `id`.
    pub fn of_queue(&self, id: u64) -> Option<(usize, &Gpu)> {
        let i = GPU_OF.get(id)?.checked_sub(1)? as usize;
        Some((i, self.get(i)?))
    }

    /// The GPU with KFD node `node`, added on first use; `None` when [`MAX_GPUS`] are in use.
    pub fn for_node(&self, node: Option<u32>) -> Option<(usize, &Gpu)> {
        if let Some(found) = self.iter().find(|(_, g)| g.node == node) {
            return Some(found);
        }
        let _adding = self.adding.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = self.iter().find(|(_, g)| g.node == node) {
            return Some(found);
        }
        let index = self.slots.iter().position(|s| s.get().is_none())?;
        let gpu = Gpu {
            node,
            sched: Mutex::new(Scheduler::new(self.window, self.faults.clone())),
            split_planned: std::sync::Once::new(),
            pass_wanted: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            untracked: AtomicBool::new(false),
            handed_off: AtomicBool::new(false),
            board_tried: AtomicBool::new(false),
            preempt: OnceLock::new(),
            sizing: OnceLock::new(),
            trace: self.trace.as_ref().map(|t| Mutex::new(QueueTracer::new(t.recorder()))),
        };
        let _ = self.slots[index].set(gpu);
        Some((index, self.slots[index].get()?))
    }

    /// Splits GPU `index`'s CUs by `XHSA_RESERVE` (once, before its first queue; without the
    /// setting nothing): `cus` says what the GPU has.
    pub fn plan_partitions(&self, index: usize, cus: impl FnOnce() -> Result<Cus, String>) {
        let (Some(reserve), Some(gpu)) = (self.reserve, self.get(index)) else { return };
        gpu.split_planned.call_once(|| {
            if reserve.auto {
                // Sized live: the whole GPU until the board says otherwise (the watcher applies
                // the board's split, and may change it).
                // The GPU can be split at all: the smallest reserve can be planned.
                let planned = cus().and_then(|c| {
                    Split::plan(reserve.sized(1), c.count, c.xccs)
                        .map(|_| c)
                        .map_err(|e| e.to_string())
                });
                match planned {
                    Ok(c) => {
                        tracing::info!(
                            "xhsa: GPU node {}: XHSA_RESERVE={reserve}{}: the reserved partition is sized live from measured demand ({} CUs in {} XCC(s); sizes {:?})",
                            gpu.node.unwrap_or_default(),
                            if reserve == DEFAULT_RESERVE { " (the default)" } else { "" },
                            c.count,
                            c.xccs,
                            Split::sizes(c.count, c.xccs)
                        );
                        let setup = crate::preempt::watcher::SizingSetup {
                            reserve,
                            cu_count: c.count,
                            xccs: c.xccs,
                        };
                        let _ = gpu.sizing.set(setup);
                        let occupancy = crate::entry::topology::node_occupancy(gpu.node, c.count);
                        gpu.sched.lock().unwrap_or_else(|p| p.into_inner()).set_occupancy(occupancy);
                        if let Some(pre) = gpu.preempt.get() {
                            pre.set_sizing(setup);
                        }
                    }
                    Err(why) => not_applied(reserve, gpu.node, &why),
                }
                return;
            }
            let split = plan_split(reserve, gpu.node, cus());
            gpu.sched.lock().unwrap_or_else(|p| p.into_inner()).set_split(split);
        });
    }

    /// The GPUs in use.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Gpu)> {
        self.slots.iter().enumerate().map_while(|(i, s)| s.get().map(|g| (i, g)))
    }
}

/// The split of KFD node `node`'s CUs by `reserve`, logged once per GPU; `None` (one partition,
/// said why) when its CUs are not known or cannot be split.
fn plan_split(reserve: Reserve, node: Option<u32>, cus: Result<Cus, String>) -> Option<Split> {
    let planned =
        cus.and_then(|cus| Split::plan(reserve, cus.count, cus.xccs).map_err(|e| e.to_string()));
    match planned {
        Ok(split) => {
            let cus = |side| split.mask(side).iter().map(|w| w.count_ones()).sum::<u32>();
            tracing::info!(
                "xhsa: GPU node {}: XHSA_RESERVE={reserve}: queues of {} and above run on {} reserved CUs, the others on {} CUs{}",
                node.unwrap_or_default(),
                match reserve.from.stream() {
                    xhsa_model::priority::StreamPriority::Low => format!("level {}", reserve.from.level()),
                    s => format!("level {} at stream priority {s:?}", reserve.from.level()),
                },
                cus(Side::Reserved),
                cus(Side::Shared),
                if split.reserved_cus != reserve.cus { " (rounded to whole XCCs)" } else { "" }
            );
            Some(split)
        }
        Err(why) => {
            not_applied(reserve, node, &why);
            None
        }
    }
}

/// Says, once per GPU, that `reserve` cannot split KFD node `node`'s CUs, and why: a warning
/// when the reserve was asked for, information when it is the default (`auto@1`, which a GPU
/// that cannot be split simply does without).
fn not_applied(reserve: Reserve, node: Option<u32>, why: &str) {
    if reserve == DEFAULT_RESERVE {
        tracing::info!(
            "xhsa: the default reserve ({reserve}) is not applied on GPU node {node:?} ({why}); its queues share one partition, the whole GPU"
        );
    } else {
        tracing::warn!(
            "xhsa: XHSA_RESERVE={reserve} is not applied on GPU node {node:?} ({why}); its queues share one partition, the whole GPU"
        );
    }
}
