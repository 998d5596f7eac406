//! What the interception layer has seen: HSA queues created and destroyed, doorbell stores,
//! priority calls, and the KFD queue behind every hardware queue (its id and doorbell), learnt
//! both from `hsaKmtCreateQueue` (ROCm 5.x, thunk as a shared library) and from the
//! `AMDKFD_IOC_CREATE_QUEUE` ioctl (ROCm 6.x, thunk linked into ROCr). The preemption levels
//! use these ids; nothing needs to guess them.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::entry::addr_map::AddrMap;

/// How libxhsa was loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loading {
    Preload,
    ToolsLib,
}

/// Where a KFD queue was learnt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KfdSource {
    Thunk,
    Ioctl,
}

/// A hardware queue as KFD knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KfdQueue {
    /// Ring base address: the key both sources share.
    pub ring: u64,
    /// KFD's queue id, from `hsaKmtCreateQueue` and/or the ioctl.
    pub id_from_thunk: Option<u32>,
    pub id_from_ioctl: Option<u32>,
    /// The doorbell: its address (thunk) or KFD's mmap offset (ioctl).
    pub doorbell: Option<u64>,
    pub doorbell_offset: Option<u64>,
    /// KFD queue type (`KFD_IOC_QUEUE_TYPE_*`), when seen through the ioctl.
    pub kfd_type: Option<u32>,
    /// Ring size in bytes, queue percentage and KFD priority the runtime gave (ioctl).
    pub ring_bytes: Option<u32>,
    pub percentage: Option<u32>,
    pub priority: Option<u32>,
}

/// What the CREATE_QUEUE ioctl said of a queue, besides its id.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KfdCreate {
    pub ring_bytes: u32,
    pub percentage: u32,
    pub priority: u32,
}

impl KfdQueue {
    /// KFD's id, whichever source gave it.
    pub fn id(&self) -> Option<u32> {
        self.id_from_ioctl.or(self.id_from_thunk)
    }
}

#[derive(Debug)]
pub struct Interception {
    pub queues_created: AtomicU64,
    pub queues_destroyed: AtomicU64,
    pub doorbell_stores: AtomicU64,
    pub priority_calls: AtomicU64,
    /// Doorbell handles of the queues the application holds (looked up on every signal store).
    doorbells: AddrMap,
    kfd: Mutex<Vec<KfdQueue>>,
    /// The runtime's `/dev/kfd` descriptor (the one its CREATE_QUEUE ioctls use); -1 unseen.
    kfd_fd: AtomicI32,
}

impl Default for Interception {
    fn default() -> Interception {
        Interception {
            queues_created: AtomicU64::new(0),
            queues_destroyed: AtomicU64::new(0),
            doorbell_stores: AtomicU64::new(0),
            priority_calls: AtomicU64::new(0),
            doorbells: AddrMap::default(),
            kfd: Mutex::new(Vec::new()),
            kfd_fd: AtomicI32::new(-1),
        }
    }
}

impl Interception {
    /// An HSA queue was created; `doorbell` is its doorbell signal's handle.
    pub fn queue_created(&self, doorbell: u64) {
        self.queues_created.fetch_add(1, Ordering::Relaxed);
        self.doorbells.insert(doorbell, 1);
    }

    pub fn queue_destroyed(&self, doorbell: u64) {
        self.queues_destroyed.fetch_add(1, Ordering::Relaxed);
        self.doorbells.remove(doorbell);
    }

    /// A signal store; counted when the signal is the doorbell of a queue seen created.
    pub fn signal_store(&self, handle: u64) {
        if self.doorbells.contains(handle) {
            self.doorbell_stores.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn priority_call(&self) {
        self.priority_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a KFD queue learnt from either source; both describe the same queue when they
    /// name the same ring.
    pub fn kfd_queue(
        &self,
        source: KfdSource,
        ring: u64,
        id: u32,
        doorbell: Option<u64>,
        doorbell_offset: Option<u64>,
        kfd_type: Option<u32>,
    ) {
        let mut v = self.kfd.lock().unwrap_or_else(|p| p.into_inner());
        let i = match v.iter().position(|q| q.ring == ring) {
            Some(i) => i,
            None => {
                v.push(KfdQueue { ring, ..Default::default() });
                v.len() - 1
            }
        };
        let q = &mut v[i];
        match source {
            KfdSource::Thunk => q.id_from_thunk = Some(id),
            KfdSource::Ioctl => q.id_from_ioctl = Some(id),
        }
        q.doorbell = q.doorbell.or(doorbell);
        q.doorbell_offset = q.doorbell_offset.or(doorbell_offset);
        q.kfd_type = q.kfd_type.or(kfd_type);
    }

    /// The CREATE_QUEUE ioctl's details of the queue at `ring`, and the descriptor it used.
    pub fn kfd_created(&self, ring: u64, fd: i32, created: KfdCreate) {
        if fd >= 0 {
            self.kfd_fd.store(fd, Ordering::Relaxed);
        }
        let mut v = self.kfd.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = v.iter_mut().find(|q| q.ring == ring) {
            q.ring_bytes = Some(created.ring_bytes);
            q.percentage = Some(created.percentage);
            q.priority = Some(created.priority);
        }
    }

    /// The runtime's `/dev/kfd` descriptor, once a CREATE_QUEUE ioctl was seen.
    pub fn kfd_fd(&self) -> Option<i32> {
        Some(self.kfd_fd.load(Ordering::Relaxed)).filter(|&fd| fd >= 0)
    }

    /// The KFD queue whose ring starts at `ring`.
    pub fn kfd_queue_at(&self, ring: u64) -> Option<KfdQueue> {
        self.kfd.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|q| q.ring == ring).cloned()
    }

    pub fn kfd_queues(&self) -> Vec<KfdQueue> {
        self.kfd.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// One line for the log.
    pub fn summary(&self) -> String {
        let kfd: Vec<String> = self
            .kfd_queues()
            .iter()
            .map(|q| {
                let src = match (q.id_from_thunk.is_some(), q.id_from_ioctl.is_some()) {
                    (true, true) => "thunk+ioctl",
                    (true, false) => "thunk",
                    _ => "ioctl",
                };
                format!("{}@{:#x}({src})", q.id().map_or("?".into(), |i| i.to_string()), q.ring)
            })
            .collect();
        format!(
            "{} HSA queues created, {} destroyed, {} doorbell stores, {} priority calls; KFD queues: [{}]",
            self.queues_created.load(Ordering::Relaxed),
            self.queues_destroyed.load(Ordering::Relaxed),
            self.doorbell_stores.load(Ordering::Relaxed),
            self.priority_calls.load(Ordering::Relaxed),
            kfd.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sources_describe_one_queue_by_its_ring() {
        let i = Interception::default();
        i.kfd_queue(KfdSource::Thunk, 0x1000, 3, Some(0xd000), None, None);
        i.kfd_queue(KfdSource::Ioctl, 0x1000, 3, None, Some(0xc000_0000_0000_0008), Some(2));
        i.kfd_queue(KfdSource::Ioctl, 0x2000, 4, None, None, Some(1));
        let q = i.kfd_queues();
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].id(), q[0].doorbell, q[0].kfd_type), (Some(3), Some(0xd000), Some(2)));
        assert!(i.summary().contains("3@0x1000(thunk+ioctl)"), "{}", i.summary());
    }

    #[test]
    fn only_doorbell_stores_are_counted() {
        let i = Interception::default();
        i.queue_created(0x55);
        i.signal_store(0x55);
        i.signal_store(0x66);
        assert_eq!(i.doorbell_stores.load(Ordering::Relaxed), 1);
        i.queue_destroyed(0x55);
        i.signal_store(0x55);
        assert_eq!(i.doorbell_stores.load(Ordering::Relaxed), 1);
    }
}
