//! Preemption when the runtime's KFD calls are not seen: loaded only through `HSA_TOOLS_LIB`,
//! libxhsa is dlopened by ROCr, so its `ioctl` and `hsaKmtCreateQueue` interpose nothing and
//! neither the runtime's `/dev/kfd` descriptor nor its queues' KFD ids are seen.
//!
//! - The descriptor: libxhsa opens `/dev/kfd` itself. KFD looks a process up by its address
//!   space (`kfd_open` → `kfd_create_process` → `find_process`), so this descriptor reaches the
//!   KFD process the runtime's queues belong to; it stays open for the process's life.
//! - The ids: each hardware queue libxhsa owns is handed to the preemption with its ring base
//!   address ([`crate::preempt::Preemption::add_unresolved`]); the watcher looks the ids up in
//!   KFD's queue snapshot (`DBG_TRAP GET_QUEUE_SNAPSHOT`, by ring base) the first time one of
//!   them is to be taken off, never on the application's threads
//!   ([`super::kfd_port::RuntimeKfd`]'s `queue_snapshot`).
//! - The KFD priority: `UPDATE_QUEUE` sets it with the percentage, so putting a queue back
//!   needs the one the runtime last gave. Every priority change of a hardware queue libxhsa
//!   owns goes through ROCr's `hsa_amd_queue_set_priority` ([`hw_priority_set`] follows it);
//!   ROCr's `UPDATE_QUEUE` there also sets percentage 100, which puts a deactivated queue back
//!   on: the preemption deactivates it again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use xhsa_model::ids::QueueId;
use xhsa_model::priority::StreamPriority;

use super::api_table::RocrVersion;
use super::rocr::rocr;
use super::{global, inside, memory};
use crate::preempt::{KfdPort, Preemption};

/// The preemption follows hardware priorities through [`hw_priority_set`].
static UNSEEN: AtomicBool = AtomicBool::new(false);

/// `hsa_queue_t::base_address`.
const BASE_ADDRESS: u64 = std::mem::offset_of!(hsa_sys::hsa::hsa_queue_t, base_address) as u64;

/// KFD's priority of a queue ROCr created: `HSA_QUEUE_PRIORITY_NORMAL`, which the thunk maps to 7.
const CREATED_PRIORITY: u32 = 7;
/// The percentage ROCr creates its queues with.
const CREATED_PERCENTAGE: u32 = 100;

/// A port on a `/dev/kfd` descriptor of libxhsa's own (one per GPU's watcher; `None`, logged,
/// when it cannot be opened). Called when a GPU's first queue is created, not on a doorbell.
pub(crate) fn port() -> Option<Box<dyn KfdPort>> {
    static SAID: AtomicBool = AtomicBool::new(false);
    let kfd = match xhsa_ioctl::Kfd::open() {
        Ok(k) => k,
        Err(e) => {
            tracing::warn!("xhsa: the runtime's KFD calls are not seen and /dev/kfd cannot be opened ({e}): level 1 only");
            return None;
        }
    };
    UNSEEN.store(true, Ordering::Release);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::info!("xhsa: the runtime's KFD calls are not seen (HSA_TOOLS_LIB): KFD queue ids come from KFD's queue snapshot, on a /dev/kfd descriptor of libxhsa's own");
    }
    Some(Box::new(super::kfd_port::RuntimeKfd::own(kfd)))
}

/// Hands queue `id`, whose hardware queue's ring starts at `ring`, to `pre` without its KFD id
/// (found later in KFD's queue snapshot).
pub(crate) fn register(pre: &Preemption, id: u64, ring: u64) -> bool {
    if !UNSEEN.load(Ordering::Acquire) {
        return false;
    }
    pre.add_unresolved(QueueId(id), ring, CREATED_PRIORITY, CREATED_PERCENTAGE);
    true
}

/// ROCr gave hardware queue `hw` (an `hsa_queue_t` libxhsa created) `priority` through
/// `hsa_amd_queue_set_priority`, successfully: the preemption keeps its KFD priority.
pub(crate) fn hw_priority_set(hw: u64, priority: StreamPriority) {
    if !UNSEEN.load(Ordering::Acquire) || hw == 0 {
        return;
    }
    let kfd = kfd_priority(priority, rocr_version());
    // SAFETY: the ring-base field of a live hardware queue (the caller's, just updated).
    let ring = unsafe { memory::read_u64(hw + BASE_ADDRESS) };
    for (_, gpu) in global().gpus.iter() {
        if let Some(pre) = gpu.preempt.get() {
            pre.runtime_priority(ring, kfd);
        }
    }
}

fn rocr_version() -> Option<RocrVersion> {
    static V: OnceLock<Option<RocrVersion>> = OnceLock::new();
    *V.get_or_init(|| {
        let id = rocr().and_then(|r| inside(|| r.build_id()))?;
        super::api_table::parse_rocr_build_id(&id)
    })
}

/// The KFD priority ROCr gives a queue for `hsa_amd_queue_set_priority(priority)`: ROCr maps
/// low, normal and high to `HSA_QUEUE_PRIORITY_MINIMUM`, `NORMAL` and `MAXIMUM` (ROCr 1.5,
/// ROCm 5.x) or `HIGH` (ROCr 1.15, ROCm 6.4, which keeps `MAXIMUM` for PC sampling); the thunk
/// maps -3..=3 to KFD 0, 3, 5, 7, 9, 11, 15.
fn kfd_priority(priority: StreamPriority, rocr: Option<RocrVersion>) -> u32 {
    match priority {
        StreamPriority::Low => 0,
        StreamPriority::Normal => 7,
        StreamPriority::High if rocr.is_some_and(|v| (v.major, v.minor) >= (1, 15)) => 11,
        StreamPriority::High => 15,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kfd_priorities_follow_the_rocr_version() {
        let v = |minor| Some(RocrVersion { major: 1, minor });
        assert_eq!(kfd_priority(StreamPriority::Low, v(5)), 0);
        assert_eq!(kfd_priority(StreamPriority::Normal, v(15)), 7);
        assert_eq!(kfd_priority(StreamPriority::High, v(5)), 15);
        assert_eq!(kfd_priority(StreamPriority::High, v(15)), 11);
        assert_eq!(kfd_priority(StreamPriority::High, None), 15);
    }
}
