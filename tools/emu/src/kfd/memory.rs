//! The process's GPU-visible memory as KFD knows it: allocations (VRAM, system/GTT, doorbell,
//! reserved-only ranges such as the scratch aperture) and registered user memory (userptr).
//!
//! The device reads and writes at the same virtual addresses as the host; this table is how it
//! tells an access to mapped memory from a fault. One exception: user memory a ROCm 6.x thunk
//! registers (userptr) has a GPU virtual address of the thunk's choosing, apart from the user's
//! CPU address; such a range records its host address, and [`GpuView`] turns device addresses
//! inside it into host ones.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

use crate::sys::devmem::{DeviceMemory, HostMemory};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// Device-local memory (reported VRAM, backed lazily by host memory).
    Vram,
    /// System memory allocated for the GPU (GTT).
    System,
    /// Host memory registered by the application (userptr).
    Userptr,
    /// A buffer of another process imported from its DMA-buf (AMDKFD_IOC_IMPORT_DMABUF): device
    /// memory, not charged to this process (amdkfd charges a buffer's memory to its allocator).
    Imported,
    /// An address range reserved without backing the device may touch (e.g. scratch).
    Reserved,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub size: u64,
    pub kind: MemKind,
    /// Node the memory was allocated on (0 = the CPU node).
    pub node: u32,
    /// The raw `HsaMemFlags` word it was allocated or registered with.
    pub flags: u32,
    /// GPU nodes it is mapped to; empty = not mapped.
    pub mapped_nodes: Vec<u32>,
    pub user_data: u64,
    /// KFD's buffer handle (0 for ranges the thunk only reserved).
    pub handle: u64,
    /// Where the range's bytes are in this process when that is not `start` (a userptr range
    /// at a GPU address of the thunk's choosing); 0 = at `start`.
    pub host: u64,
}

impl Range {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

#[derive(Debug, Default)]
pub struct Memory {
    ranges: RwLock<BTreeMap<u64, Range>>,
    /// Ranges whose bytes live elsewhere (`host != 0`): 0 in the common case, where
    /// [`Memory::to_host`] costs nothing.
    elsewhere: AtomicUsize,
}

fn moved(r: &Range) -> bool {
    r.host != 0 && r.host != r.start
}

impl Memory {
    pub fn insert(&self, r: Range) {
        let mut g = self.ranges.write().unwrap_or_else(|p| p.into_inner());
        if moved(&r) {
            self.elsewhere.fetch_add(1, Ordering::AcqRel);
        }
        if let Some(old) = g.insert(r.start, r) {
            if moved(&old) {
                self.elsewhere.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Removes the range starting exactly at `start`.
    pub fn remove(&self, start: u64) -> Option<Range> {
        let r = self.ranges.write().unwrap_or_else(|p| p.into_inner()).remove(&start);
        if r.as_ref().is_some_and(moved) {
            self.elsewhere.fetch_sub(1, Ordering::AcqRel);
        }
        r
    }

    /// The host address of device address `addr` (itself, except inside a range whose bytes
    /// live elsewhere).
    pub fn to_host(&self, addr: u64) -> u64 {
        if self.elsewhere.load(Ordering::Acquire) == 0 {
            return addr;
        }
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        match g.range(..=addr).next_back() {
            Some((_, r)) if addr < r.end() && moved(r) => r.host + (addr - r.start),
            _ => addr,
        }
    }

    /// The range containing `addr`.
    pub fn find(&self, addr: u64) -> Option<Range> {
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        g.range(..=addr).next_back().map(|(_, r)| r).filter(|r| addr < r.end()).cloned()
    }

    /// The range with KFD buffer handle `handle`.
    pub fn find_handle(&self, handle: u64) -> Option<Range> {
        if handle == 0 {
            return None;
        }
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        g.values().find(|r| r.handle == handle).cloned()
    }

    /// Applies `f` to the range starting at `start`.
    pub fn update(&self, start: u64, f: impl FnOnce(&mut Range)) -> bool {
        let mut g = self.ranges.write().unwrap_or_else(|p| p.into_inner());
        match g.get_mut(&start) {
            Some(r) => {
                f(r);
                true
            }
            None => false,
        }
    }

    /// Whether the device may access `[addr, addr + len)`: inside one backed range.
    pub fn device_accessible(&self, addr: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        match self.find(addr) {
            Some(r) => {
                r.kind != MemKind::Reserved && addr.checked_add(len).is_some_and(|e| e <= r.end())
            }
            None => false,
        }
    }

    /// Bytes of VRAM allocated.
    pub fn vram_used(&self) -> u64 {
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        g.values().filter(|r| r.kind == MemKind::Vram).map(|r| r.size).sum()
    }

    pub fn len(&self) -> usize {
        self.ranges.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Device memory as the GPU sees it: host memory at the same addresses, except inside ranges
/// whose bytes live elsewhere ([`Memory::to_host`]). An access is expected to lie in one range
/// (the callers check [`Memory::device_accessible`] first).
pub struct GpuView<'a> {
    memory: &'a Memory,
}

impl<'a> GpuView<'a> {
    pub fn new(memory: &'a Memory) -> Self {
        GpuView { memory }
    }
}

/// The host's memory behind a GPU view's translated addresses.
// SAFETY: a GpuView's addresses are translated by the KFD memory table (`to_host`), whose ranges
// are mapped in this process while they are in the table; the device model checks each access
// against the table before it reaches the view.
const HOST: HostMemory = unsafe { HostMemory::new() };

impl DeviceMemory for GpuView<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) {
        HOST.read(self.memory.to_host(addr), buf)
    }
    fn read_u32(&self, addr: u64) -> u32 {
        HOST.read_u32(self.memory.to_host(addr))
    }
    fn write(&self, addr: u64, buf: &[u8]) {
        HOST.write(self.memory.to_host(addr), buf)
    }
    fn copy(&self, dst: u64, src: u64, len: u64) {
        HOST.copy(self.memory.to_host(dst), self.memory.to_host(src), len)
    }
    fn fill32(&self, dst: u64, value: u32, count: u64) {
        HOST.fill32(self.memory.to_host(dst), value, count)
    }
    fn load_u64(&self, addr: u64) -> u64 {
        HOST.load_u64(self.memory.to_host(addr))
    }
    fn store_u64(&self, addr: u64, value: u64) {
        HOST.store_u64(self.memory.to_host(addr), value)
    }
    fn store_u16(&self, addr: u64, value: u16) {
        HOST.store_u16(self.memory.to_host(addr), value)
    }
    fn fetch_add_i64(&self, addr: u64, delta: i64) -> i64 {
        HOST.fetch_add_i64(self.memory.to_host(addr), delta)
    }
    fn compare_exchange(&self, addr: u64, wide: bool, current: u64, new: u64) -> Result<u64, u64> {
        HOST.compare_exchange(self.memory.to_host(addr), wide, current, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, size: u64, kind: MemKind) -> Range {
        Range {
            host: 0,
            start,
            size,
            kind,
            node: 1,
            flags: 0,
            mapped_nodes: vec![],
            user_data: 0,
            handle: start,
        }
    }

    #[test]
    fn lookups_find_the_containing_range() {
        let m = Memory::default();
        m.insert(r(0x1000, 0x2000, MemKind::Vram));
        m.insert(r(0x10000, 0x1000, MemKind::Userptr));
        assert_eq!(m.find(0x1fff).unwrap().start, 0x1000);
        assert!(m.find(0x3000).is_none());
        assert!(m.find(0xfff).is_none());
        assert!(m.device_accessible(0x1000, 0x2000));
        assert!(!m.device_accessible(0x2000, 0x2000));
        assert!(!m.device_accessible(0x5000, 8));
        assert_eq!(m.vram_used(), 0x2000);
        assert_eq!(m.find_handle(0x10000).unwrap().kind, MemKind::Userptr);
        assert!(m.find_handle(0x5000).is_none());
        assert!(m.update(0x1000, |r| r.user_data = 5));
        assert_eq!(m.find(0x1800).unwrap().user_data, 5);
        assert_eq!(m.remove(0x1000).unwrap().size, 0x2000);
        assert!(!m.device_accessible(0x1000, 1));
    }

    #[test]
    fn reserved_ranges_are_not_accessible() {
        let m = Memory::default();
        m.insert(r(0x100000, 0x100000, MemKind::Reserved));
        assert!(m.find(0x100010).is_some());
        assert!(!m.device_accessible(0x100010, 4));
    }

    #[test]
    fn a_range_living_elsewhere_is_read_through_its_host_address() {
        let m = Memory::default();
        let mut host = [0u8; 64];
        host[8] = 0x5a;
        let gpu_va = 0x7000_0000_0000u64;
        let mut rr = r(gpu_va, 64, MemKind::Userptr);
        rr.host = host.as_ptr() as u64;
        m.insert(rr);
        assert_eq!(m.to_host(gpu_va + 8), host.as_ptr() as u64 + 8);
        assert_eq!(m.to_host(0x1000), 0x1000);
        let v = GpuView::new(&m);
        assert_eq!(v.read_u32(gpu_va + 8) & 0xff, 0x5a);
        v.store_u64(gpu_va + 16, 7);
        assert_eq!(host[16], 7);
        m.remove(gpu_va);
        assert_eq!(m.to_host(gpu_va + 8), gpu_va + 8);
    }
}
