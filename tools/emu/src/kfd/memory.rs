//! The process's GPU-visible memory as KFD knows it: allocations (VRAM, system/GTT, doorbell,
//! reserved-only ranges such as the scratch aperture) and registered user memory (userptr).
//!
//! The device reads and writes at the same virtual addresses as the host; this table is how it
//! tells an access to mapped memory from a fault.

use std::collections::BTreeMap;
use std::sync::RwLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// Device-local memory (reported VRAM, backed lazily by host memory).
    Vram,
    /// System memory allocated for the GPU (GTT).
    System,
    /// Host memory registered by the application (userptr).
    Userptr,
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
}

impl Range {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

#[derive(Debug, Default)]
pub struct Memory {
    ranges: RwLock<BTreeMap<u64, Range>>,
}

impl Memory {
    pub fn insert(&self, r: Range) {
        self.ranges.write().unwrap_or_else(|p| p.into_inner()).insert(r.start, r);
    }

    /// Removes the range starting exactly at `start`.
    pub fn remove(&self, start: u64) -> Option<Range> {
        self.ranges.write().unwrap_or_else(|p| p.into_inner()).remove(&start)
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
            Some(r) => r.kind != MemKind::Reserved && addr.checked_add(len).is_some_and(|e| e <= r.end()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, size: u64, kind: MemKind) -> Range {
        Range { start, size, kind, node: 1, flags: 0, mapped_nodes: vec![], user_data: 0, handle: start }
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
}
