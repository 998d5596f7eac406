//! A shadow queue's life: built over a new hardware queue (its own `amd_queue_t`, ring and
//! doorbell signal), and drained and freed before its hardware queue is destroyed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hsa_sys::hsa::{hsa_agent_t, hsa_queue_t, hsa_status_t, HSA_STATUS_ERROR};
use xhsa_model::ids::QueueId;
use xhsa_model::priority::StreamPriority;

use crate::entry::memory;
use crate::entry::queue_layout::{shared_queue_layout, SharedQueueLayout, AMD_QUEUE_V1};
use crate::entry::rocr::rocr;
use crate::entry::{global, inside, Global};
use crate::path::aql_ring::AqlRing;
use crate::path::scheduler::Drain;
use crate::path::shadow_queue::{HwQueue, ShadowQueue, TRACKING_START};
use crate::settings::fault::Point;

use super::abi::{QueueFn, BASE_ADDRESS, DOORBELL, READ_INDEX, RING_OFFSET, SIZE, WRITE_INDEX};
use super::board_wiring::{attach_board, register_preemptable};
use super::registry::creating_library;
use super::registry::{callbacks, DOORBELLS, HW_OF, NEXT_ID, SHADOWS, UNSHADOWED};
use super::scheduler_lock::{with_gpu, with_queue};

/// The running ROCr's private queue layout ([`crate::entry::queue_layout`]), asked once; `None`
/// when its version is not one whose layout libxhsa knows: one warning says so, and every queue
/// is passed through unshadowed.
pub(super) fn rocr_layout() -> Option<SharedQueueLayout> {
    static LAYOUT: std::sync::OnceLock<Option<SharedQueueLayout>> = std::sync::OnceLock::new();
    *LAYOUT.get_or_init(|| {
        // Without ROCr's functions no shadow can be built anyway; build_shadow says why.
        let Some(r) = rocr() else { return Some(AMD_QUEUE_V1) };
        let id = inside(|| r.build_id());
        match shared_queue_layout(id.as_deref()) {
            Ok((v, layout)) => {
                tracing::debug!(
                    "xhsa: ROCr {v} (build {:?}): queue layout known, queue object at +{}",
                    id.unwrap_or_default(),
                    layout.core_queue_word
                );
                Some(layout)
            }
            Err(why) => {
                tracing::warn!(
                    "xhsa: {why}; its queues are passed through unshadowed and unscheduled"
                );
                None
            }
        }
    })
}

/// Builds and registers the shadow of hardware queue `hw`; returns its address.
pub(super) fn build_shadow(
    g: &Global,
    id: u64,
    agent: hsa_agent_t,
    hw: u64,
    size: u32,
    layout: SharedQueueLayout,
) -> Result<u64, String> {
    if g.faults.hit(Point::ShadowCreate) {
        return Err("injected by XHSA_FAULT_INJECT".into());
    }
    let r = rocr().ok_or("a ROCr function libxhsa needs was not found")?;
    if size == 0 || !size.is_power_of_two() {
        return Err(format!("unexpected queue size {size}"));
    }
    // SAFETY: fields of the amd_queue_t ROCr just created for this shadow, which nobody writes
    // (ROCr set them at creation).
    let (hw_size, hw_base, hw_doorbell) = unsafe {
        (
            memory::read_u32(hw + SIZE) as u64,
            memory::read_u64(hw + BASE_ADDRESS),
            memory::read_u64(hw + DOORBELL),
        )
    };
    let hw_ring = AqlRing { base: hw_base, slots: hw_size, amd_queue: hw };
    let hwq = HwQueue { queue: hw, ring: hw_ring, doorbell: hw_doorbell };
    if hw_size == 0 || !hw_size.is_power_of_two() || hw_ring.base == 0 {
        return Err(format!(
            "the hardware queue has an unexpected ring ({hw_size} slots at {:#x})",
            hw_ring.base
        ));
    }
    // SAFETY: the word after the amd_queue struct of the SharedQueue ROCr just allocated, in a
    // ROCr version whose layout puts its queue object's pointer there (`rocr_layout`).
    let core_queue = unsafe { memory::read_u64(hw + layout.core_queue_word) };
    if core_queue == 0 {
        return Err(format!(
            "ROCr's queue object is not at +{} of the queue, where its version's layout puts it",
            layout.core_queue_word
        ));
    }
    let bytes = RING_OFFSET as usize + size as usize * crate::path::packet::PACKET_SIZE;
    let mem = inside(|| r.alloc_gpu_visible(agent, bytes))
        .ok_or("no GPU-readable fine-grained system memory")?;
    let Some(doorbell) = inside(|| r.signal_create(0)) else {
        inside(|| r.free(mem));
        return Err("hsa_signal_create failed".into());
    };
    let Some(tracking) = inside(|| r.signal_create(TRACKING_START)) else {
        inside(|| {
            r.signal_destroy(doorbell);
            r.free(mem);
        });
        return Err("hsa_signal_create failed".into());
    };
    // The hardware queue's amd_queue struct (type, features, id, apertures, max CU/wave ids,
    // properties), then the shadow's own ring, doorbell, size and indices.
    // SAFETY: `mem` is the shadow's allocation (the amd_queue struct and ROCr's queue-object
    // word, then `size` packets at RING_OFFSET, which lies past both in every layout), just made
    // and known to nobody else; `hw` is ROCr's live SharedQueue of that layout, whose fields
    // read here ROCr set at creation.
    unsafe {
        memory::copy(hw, mem, layout.amd_queue_bytes);
        memory::write_u64(mem + layout.core_queue_word, core_queue);
        memory::invalidate_ring(mem + RING_OFFSET, size as u64);
        memory::write_u64(mem + BASE_ADDRESS, mem + RING_OFFSET);
        memory::write_u64(mem + DOORBELL, doorbell);
        memory::write_u32(mem + SIZE, size);
        memory::write_u64(mem + WRITE_INDEX, 0);
        memory::write_u64(mem + READ_INDEX, 0);
    }
    let shadow = AqlRing { base: mem + RING_OFFSET, slots: size as u64, amd_queue: mem };
    let node = inside(|| r.node_id(agent));
    let gpu = g.gpus.for_node(node).map(|(i, _)| i);
    if let Some(gpu) = gpu {
        attach_board(g, gpu, node);
        g.gpus.plan_partitions(gpu, || {
            use crate::entry::topology::{gpu_cus, AGENT_INFO_CU_COUNT, AGENT_INFO_NUM_XCC};
            let count = inside(|| r.agent_u32(agent, AGENT_INFO_CU_COUNT));
            gpu_cus(count, inside(|| r.agent_u32(agent, AGENT_INFO_NUM_XCC)), node)
        });
    }
    let library = creating_library(g, id);
    let priority = g.settings.priority_for(StreamPriority::Normal, &g.identity, library.as_deref());
    let added = gpu.is_some_and(|gpu| {
        crate::entry::gpus::GPU_OF.insert(id, gpu as u64 + 1)
            && with_gpu(gpu, |s, _, _, _| {
                s.add(ShadowQueue::new(QueueId(id), shadow, hwq, tracking), priority)
            }) == Some(true)
    });
    if added && SHADOWS.insert(mem, id) && HW_OF.insert(mem, hw) && DOORBELLS.insert(doorbell, id) {
        register_preemptable(g, gpu.unwrap_or(0), id, &hw_ring);
        let hw_priority = priority.hardware();
        if hw_priority != StreamPriority::Normal
            && !super::calls::set_hw_priority(r, hw, hw_priority)
        {
            tracing::warn!("xhsa: queue {id}: ROCr refused hardware priority {hw_priority:?}; it keeps the default");
        }
        if let Some(gpu) = gpu {
            give_partition_mask(gpu, id, hw);
        }
        tracing::debug!("xhsa: queue {id}: shadow {mem:#x} ({size} packets) over hardware queue {hw:#x} ({hw_size} packets), {priority:?}");
        return Ok(mem);
    }
    SHADOWS.remove(mem);
    HW_OF.remove(mem);
    DOORBELLS.remove(doorbell);
    with_queue(id, |s, _, _, now| s.remove(QueueId(id), now));
    crate::entry::gpus::GPU_OF.remove(id);
    inside(|| {
        r.signal_destroy(doorbell);
        r.signal_destroy(tracking);
        r.free(mem);
    });
    Err("too many queues".into())
}

/// Gives hardware queue `hw` of queue `id` the CU mask of its partition (`XHSA_RESERVE`), once,
/// at creation: each mask change costs a device-wide unmap on an HWS GPU. Without a split the
/// queue keeps every CU.
fn give_partition_mask(gpu: usize, id: u64, hw: u64) {
    if let Some(Some(mask)) = with_gpu(gpu, |s, _, _, _| s.cu_mask_of(QueueId(id))) {
        set_partition_masks(vec![(hw, mask)]);
    }
}

/// Gives hardware queues their partition's CU mask: at creation, or when a priority crossing
/// `XHSA_RESERVE`'s threshold moved the queue. A refusal is logged once; the queue keeps the CUs
/// it had (every CU for a new one).
pub(super) fn set_partition_masks(masks: Vec<(u64, crate::path::partition::CuMask)>) {
    let Some(r) = rocr().filter(|_| !masks.is_empty()) else { return };
    for (hw, mask) in masks {
        if inside(|| r.set_hw_cu_mask(hw, mask.words())) {
            tracing::debug!("xhsa: hardware queue {hw:#x} on its partition's {} CUs", mask.count());
        } else {
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            crate::entry::log::log_once(&SAID, || {
                tracing::warn!("xhsa: ROCr refused the CU mask of a queue's partition (hsa_amd_queue_cu_set_mask); such queues keep the CUs they had (every CU for a new one)")
            });
        }
    }
}

/// How long `hsa_queue_destroy` waits for the hardware to take and complete what libxhsa held.
pub(super) const DESTROY_PATIENCE: Duration = Duration::from_secs(30);
/// Shows a queue libxhsa passes through without a shadow on its GPU's board (state
/// `passthrough`), so that the monitor sees every queue; `library` created it.
pub(super) fn show_unshadowed(g: &Global, agent: hsa_agent_t, queue: u64, library: Option<&str>) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let Some(r) = rocr() else { return };
        let node = inside(|| r.node_id(agent));
        let Some((gpu, _)) = g.gpus.for_node(node) else { return };
        attach_board(g, gpu, node);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if crate::entry::gpus::GPU_OF.insert(id, gpu as u64 + 1) && UNSHADOWED.insert(queue, id) {
            let priority = g.settings.priority_for(StreamPriority::Normal, &g.identity, library);
            with_gpu(gpu, |s, _, _, _| s.add_unshadowed(QueueId(id), priority));
        }
    }));
    if r.is_err() {
        tracing::debug!("xhsa: a passthrough queue could not be shown on the board");
    }
}

pub(super) fn destroy_shadow(real: QueueFn, shadow: u64, id: QueueId) -> hsa_status_t {
    let Some(r) = rocr() else { return HSA_STATUS_ERROR };
    let hw = HW_OF.get(shadow).unwrap_or(0);
    // SAFETY: the doorbell field of a shadow libxhsa built and has not freed.
    let doorbell = unsafe { memory::read_u64(shadow + DOORBELL) };
    // A queue off the GPU goes back first (its last packets must run; KFD blocks destroying a
    // suspended queue) and is never taken off again.
    if let Some(pre) = global().gpus.of_queue(id.0).and_then(|(_, g)| g.preempt.get()) {
        pre.forget(id);
    }
    with_queue(id.0, |s, m, _, now| s.close(id, m, now));
    let deadline = Instant::now() + DESTROY_PATIENCE;
    let wait = loop {
        match with_queue(id.0, |s, m, hw, _| s.drain_step(id, m, hw)) {
            Some(Drain::Done { wait_for }) => break wait_for,
            Some(Drain::NeedRoom) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            _ => {
                tracing::warn!("xhsa: {id}: the hardware queue stayed full; destroying it with packets still held");
                break None;
            }
        }
    };
    if let Some((signal, target)) = wait {
        loop {
            if inside(|| r.signal_wait_at_most(signal, target, 100)) <= target {
                break;
            }
            let failed = with_queue(id.0, |s, _, _, _| s.queue(id).is_some_and(|q| q.failed))
                .unwrap_or(true);
            if failed {
                break;
            }
            if Instant::now() > deadline {
                tracing::warn!("xhsa: {id}: its last packets did not complete within {DESTROY_PATIENCE:?}; destroying it anyway");
                break;
            }
        }
    }
    // The last completion handler normally runs right after the final barrier; give it a moment,
    // so that the scheduler's bookkeeping sees the queue's last completions.
    let armed = || {
        with_queue(id.0, |s, _, _, _| s.queue(id).is_some_and(|q| q.tracking.armed && !q.failed))
            .unwrap_or(false)
    };
    let settle = Instant::now() + Duration::from_millis(200);
    while armed() && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(1));
    }
    SHADOWS.remove(shadow);
    HW_OF.remove(shadow);
    DOORBELLS.remove(doorbell);
    callbacks().remove(&id.0);
    let removed = with_queue(id.0, |s, _, _, now| s.remove(id, now)).flatten();
    crate::entry::gpus::GPU_OF.remove(id.0);
    // SAFETY: the hardware queue libxhsa created for this shadow; nothing of libxhsa uses it now.
    let status = inside(|| unsafe { real(hw as *mut hsa_queue_t) });
    inside(|| {
        r.signal_destroy(doorbell);
        // Disarmed and destroyed once the completion waiter cannot be using it.
        if let Some(q) = &removed {
            crate::entry::completions::retire(r, q.tracking.signal);
        }
        r.free(shadow);
    });
    global().seen.queue_destroyed(doorbell);
    status
}
