//! A user queue made by hand on the emulated KFD (the raw ioctls, no runtime): for the test
//! binaries that drive the KFD directly. Each binary uses part of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use xhsa_ioctl::abi::*;
use xhsa_ioctl::Kfd;

/// A user queue in this process's memory: `amd_queue_t` (its dispatch ids), the ring, and a
/// kernel object.
pub struct Queue {
    pub id: u32,
    base: *mut u8,
}

pub const RING: u64 = 4096;
pub const AMD_QUEUE: usize = 0;
pub const RING_AT: usize = 4096;
pub const KERNEL_AT: usize = 8192;

impl Queue {
    /// Registers 16 KiB of our memory with the KFD and creates an AQL queue on it, holding
    /// (before the queue exists) a dispatch of `workgroups` workgroups of 256 work-items when
    /// `workgroups > 0`.
    pub fn create(kfd: &Kfd, workgroups: u32) -> Queue {
        let layout = std::alloc::Layout::from_size_align(16384, 4096).unwrap();
        // SAFETY: a non-zero size; the block is leaked (the emulated device may read it until
        // the process exits).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!base.is_null());
        let mut alloc = AllocMemoryOfGpuArgs {
            va_addr: base as u64,
            size: 16384,
            gpu_id: gpu(),
            flags: KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            mmap_offset: base as u64,
            ..Default::default()
        };
        // SAFETY: ALLOC_MEMORY_OF_GPU reads and writes only the argument struct.
        unsafe { kfd.ioctl(&mut alloc) }.expect("register the queue memory");
        let q = Queue { id: u32::MAX, base };
        if workgroups > 0 {
            q.write_dispatch(workgroups);
        }
        let mut a = CreateQueueArgs {
            ring_base_address: q.addr(RING_AT),
            write_pointer_address: q.addr(AMD_QUEUE + 56),
            read_pointer_address: q.addr(AMD_QUEUE + 128),
            ring_size: RING as u32,
            gpu_id: gpu(),
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        kfd.create_queue(&mut a).expect("CREATE_QUEUE");
        Queue { id: a.queue_id, ..q }
    }

    /// The same queue memory under another KFD id (what an unknown id does).
    pub fn with_id(&self, id: u32) -> Queue {
        Queue { id, base: self.base }
    }

    pub fn addr(&self, off: usize) -> u64 {
        self.base as u64 + off as u64
    }

    pub fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is 8-aligned inside the leaked 16 KiB block.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// Packet 0: a kernel dispatch (header last), and the write index past it.
    pub fn write_dispatch(&self, workgroups: u32) {
        let mut p = [0u8; 64];
        p[2..4].copy_from_slice(&1u16.to_le_bytes()); // 1 dimension
        p[4..6].copy_from_slice(&256u16.to_le_bytes());
        p[6..8].copy_from_slice(&1u16.to_le_bytes());
        p[8..10].copy_from_slice(&1u16.to_le_bytes());
        p[12..16].copy_from_slice(&(256 * workgroups).to_le_bytes());
        p[16..20].copy_from_slice(&1u32.to_le_bytes());
        p[20..24].copy_from_slice(&1u32.to_le_bytes());
        p[32..40].copy_from_slice(&self.addr(KERNEL_AT).to_le_bytes());
        // The kernel: a descriptor whose code (256 bytes on) is `s_endpgm`; the ISA
        // interpreter runs it when the dispatch completes.
        // SAFETY: KERNEL_AT + 260 is inside the block; nothing reads it yet.
        unsafe {
            std::ptr::copy_nonoverlapping(
                256i64.to_le_bytes().as_ptr(),
                self.base.add(KERNEL_AT + 16),
                8,
            );
            std::ptr::copy_nonoverlapping(
                0xBF81_0000u32.to_le_bytes().as_ptr(),
                self.base.add(KERNEL_AT + 256),
                4,
            );
        }
        // SAFETY: the ring slot is inside the block; the queue does not exist yet.
        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr().add(2), self.base.add(RING_AT + 2), 62) };
        // SAFETY: 2-aligned, inside the block.
        unsafe { &*(self.base.add(RING_AT) as *const AtomicU16) }
            .store(u16::from(2u8), Ordering::Release);
        self.word(AMD_QUEUE + 56).store(1, Ordering::Release);
    }

    /// Packets completed (`read_dispatch_id`).
    pub fn completed(&self) -> u64 {
        self.word(AMD_QUEUE + 128).load(Ordering::Acquire)
    }

    pub fn update(
        &self,
        kfd: &Kfd,
        percentage: u32,
        priority: u32,
    ) -> Result<(), xhsa_ioctl::KfdError> {
        kfd.update_queue(UpdateQueueArgs {
            ring_base_address: self.addr(RING_AT),
            queue_id: self.id,
            ring_size: RING as u32,
            queue_percentage: percentage,
            queue_priority: priority,
        })
    }

    /// Waits (within 15 s) for the dispatch to complete (`read_dispatch_id` past it).
    pub fn wait(&self, what: &str) {
        let t0 = Instant::now();
        while self.completed() == 0 {
            assert!(t0.elapsed() < Duration::from_secs(15), "{what} never completed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The emulated GPU 0's KFD gpu id.
pub fn gpu() -> u32 {
    xhsa_emu::kfd::topology::gpu_id(0)
}
