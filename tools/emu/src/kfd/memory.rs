//! The process's GPU-visible memory as KFD knows it: allocations (VRAM, system/GTT, doorbell,
//! reserved-only ranges such as the scratch aperture) and registered user memory (userptr).
//!
//! The device reads and writes at the same virtual addresses as the host; this table is how it
//! tells an access to mapped memory from a fault. One exception: user memory a ROCm 6.x thunk
//! registers (userptr) has a GPU virtual address of the thunk's choosing, apart from the user's
//! CPU address; such a range records its host address, and [`GpuView`] turns device addresses
//! inside it into host ones.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
    /// The largest size any range has had: how far back from an address a range that contains
    /// it can start (ranges may overlap: see [`containing`]).
    widest: AtomicU64,
    /// Ranges whose bytes live elsewhere (`host != 0`): 0 in the common case, where
    /// [`Memory::to_host`] costs nothing.
    elsewhere: AtomicUsize,
}

fn moved(r: &Range) -> bool {
    r.host != 0 && r.host != r.start
}

/// The range containing `addr` that starts last. Ranges may overlap: ROCm 5.2 (over the
/// emulator's thunk) registers user memory at its own CPU address, and a page registered for an
/// earlier buffer stays registered when the application frees that buffer and a larger one is
/// allocated over it; both registrations then cover the page, and the larger one goes on beyond
/// the smaller's end. The nearest range by start need not contain `addr`, so this looks further
/// back, as far as the widest range could reach (the common case, where the nearest one
/// contains it, costs one lookup).
fn containing(g: &BTreeMap<u64, Range>, addr: u64, widest: u64) -> Option<&Range> {
    for (_, r) in g.range(..=addr).rev() {
        if addr < r.end() {
            return Some(r);
        }
        if addr - r.start >= widest {
            break; // a range starting earlier cannot reach addr
        }
    }
    None
}

impl Memory {
    pub fn insert(&self, r: Range) {
        let mut g = self.ranges.write().unwrap_or_else(|p| p.into_inner());
        self.widest.fetch_max(r.size, Ordering::Relaxed);
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
        match containing(&g, addr, self.widest()) {
            Some(r) if moved(r) => r.host + (addr - r.start),
            _ => addr,
        }
    }

    /// The range containing `addr` (of ranges that overlap there, the one that starts last).
    pub fn find(&self, addr: u64) -> Option<Range> {
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        containing(&g, addr, self.widest()).cloned()
    }

    fn widest(&self) -> u64 {
        self.widest.load(Ordering::Relaxed)
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
        let Some(end) = addr.checked_add(len) else { return false };
        // As through the GPU's page tables: the access may run across ranges that follow each
        // other without a gap (two allocations, or two userptr registrations of one buffer,
        // side by side), none of them only reserved.
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        let widest = self.widest();
        let mut at = addr;
        while at < end {
            match containing(&g, at, widest) {
                Some(r) if r.kind != MemKind::Reserved => at = r.end(),
                _ => return false,
            }
        }
        true
    }

    /// Whether every device address is the same host address (no range lives elsewhere).
    fn identity(&self) -> bool {
        self.elsewhere.load(Ordering::Acquire) == 0
    }

    /// The bytes from `addr` (at most `len`) that lie in one range, and so at consecutive host
    /// addresses from `to_host(addr)`: where an access spanning ranges is cut.
    pub fn contiguous(&self, addr: u64, len: u64) -> u64 {
        let g = self.ranges.read().unwrap_or_else(|p| p.into_inner());
        match containing(&g, addr, self.widest()) {
            Some(r) => len.min(r.end() - addr),
            // Outside every range: host memory up to the next range.
            _ => match g.range(addr..).next() {
                Some((&start, _)) => len.min(start - addr),
                None => len,
            },
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
/// whose bytes live elsewhere ([`Memory::to_host`]). The callers check
/// [`Memory::device_accessible`] first; reads, writes, copies and fills that span ranges are
/// cut where a range ends (each range may live elsewhere on the host).
pub struct GpuView<'a> {
    memory: &'a Memory,
}

impl<'a> GpuView<'a> {
    pub fn new(memory: &'a Memory) -> Self {
        GpuView { memory }
    }

    /// `len` bytes from `addr` as the runs the memory table maps contiguously (an access may
    /// cross adjacent allocations): each run's host address and its range of the caller's buffer.
    fn runs(
        &self,
        addr: u64,
        len: usize,
    ) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> + '_ {
        let mut done = 0usize;
        std::iter::from_fn(move || {
            (done < len).then(|| {
                let a = addr + done as u64;
                let n = self.memory.contiguous(a, (len - done) as u64) as usize;
                let run = done..done + n;
                done += n;
                (self.memory.to_host(a), run)
            })
        })
    }
}

/// The host's memory behind a GPU view's translated addresses.
// SAFETY: a GpuView's addresses are translated by the KFD memory table (`to_host`), whose ranges
// are mapped in this process while they are in the table; the device model checks each access
// against the table before it reaches the view.
const HOST: HostMemory = unsafe { HostMemory::new() };

impl DeviceMemory for GpuView<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) {
        if self.memory.identity() {
            return HOST.read(addr, buf);
        }
        for (host, run) in self.runs(addr, buf.len()) {
            HOST.read(host, &mut buf[run]);
        }
    }
    fn read_u32(&self, addr: u64) -> u32 {
        HOST.read_u32(self.memory.to_host(addr))
    }
    fn write(&self, addr: u64, buf: &[u8]) {
        if self.memory.identity() {
            return HOST.write(addr, buf);
        }
        for (host, run) in self.runs(addr, buf.len()) {
            HOST.write(host, &buf[run]);
        }
    }
    fn copy(&self, dst: u64, src: u64, len: u64) {
        if self.memory.identity() {
            return HOST.copy(dst, src, len);
        }
        let mut done = 0u64;
        while done < len {
            let (d, s) = (dst + done, src + done);
            let n = self.memory.contiguous(d, self.memory.contiguous(s, len - done));
            HOST.copy(self.memory.to_host(d), self.memory.to_host(s), n);
            done += n;
        }
    }
    fn fill32(&self, dst: u64, value: u32, count: u64) {
        if self.memory.identity() {
            return HOST.fill32(dst, value, count);
        }
        // Ranges start and end on pages: a piece is whole dwords.
        let mut done = 0u64;
        while done < count {
            let d = dst + 4 * done;
            let n = (self.memory.contiguous(d, 4 * (count - done)) / 4).max(1);
            HOST.fill32(self.memory.to_host(d), value, n);
            done += n;
        }
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

    /// A GPU's page tables map allocations side by side as one run of addresses: ROCm 5.2's HIP
    /// locks a large pageable buffer in pieces (userptr registrations next to each other), and
    /// ROCr's SDMA copies of 4 MiB - 32 bytes then cross from one piece into the next (the
    /// emulator faulted: "SDMA memory fault" and ROCr's VMFaultHandler abort; found by
    /// tests/programs/hip_copies.hip). A gap or a reserved range in between is still a fault.
    #[test]
    fn accesses_run_across_ranges_side_by_side() {
        let m = Memory::default();
        m.insert(r(0x10000, 0x3000, MemKind::Userptr));
        m.insert(r(0x13000, 0x2000, MemKind::Userptr));
        m.insert(r(0x15000, 0x1000, MemKind::Vram));
        m.insert(r(0x17000, 0x1000, MemKind::Vram));
        m.insert(r(0x18000, 0x1000, MemKind::Reserved));
        m.insert(r(0x19000, 0x1000, MemKind::Vram));
        assert!(m.device_accessible(0x12f00, 0x200));
        assert!(m.device_accessible(0x10000, 0x6000));
        assert!(!m.device_accessible(0x10000, 0x6001), "a gap at 0x16000");
        assert!(!m.device_accessible(0x17f00, 0x200), "a reserved range at 0x18000");
        assert!(!m.device_accessible(0x17f00, 0x1200), "through a reserved range");
        assert!(!m.device_accessible(u64::MAX - 4, 8));
        assert_eq!(m.contiguous(0x12f00, 0x200), 0x100);
        assert_eq!(m.contiguous(0x13000, 0x200), 0x200);
        assert_eq!(m.contiguous(0x16800, 0x1000), 0x800, "outside: up to the next range");
    }

    /// Overlapping registrations (a page registered for a buffer the application freed, inside
    /// a larger buffer registered later at or before it): every byte the larger one covers is
    /// accessible, also past the smaller one's end. The emulator faulted an SDMA copy of the
    /// last 32 bytes of a 4 MiB pageable read-back (`hip_basic memcpy`, `memcpy.after_freed_async`,
    /// rarely: it needs such a stale page in the buffer), as "SDMA linear copy outside one
    /// mapped range ... dst_range=None", and ROCr aborted on the memory fault.
    #[test]
    fn a_range_inside_a_larger_one_does_not_hide_the_rest_of_it() {
        let m = Memory::default();
        m.insert(r(0x10_0000, 0x40_1000, MemKind::Userptr));
        m.insert(r(0x30_0000, 0x1000, MemKind::Userptr));
        m.insert(r(0x20_0000, 0x1000, MemKind::Vram)); // a VRAM buffer elsewhere
        m.insert(r(0x80_0000, 0x1000, MemKind::Userptr));
        let tail = 0x10_0000 + 0x40_0000 - 32;
        assert!(m.device_accessible(tail, 32));
        assert!(m.device_accessible(0x10_0000, 0x40_1000));
        assert_eq!(m.find(tail).map(|r| r.start), Some(0x10_0000));
        assert_eq!(m.find(0x30_0800).map(|r| r.start), Some(0x30_0000), "the one starting last");
        assert_eq!(m.contiguous(0x30_1000, 0x10), 0x10);
        assert_eq!(m.contiguous(0x30_0f00, 0x200), 0x100, "cut where the inner range ends");
        assert!(!m.device_accessible(0x50_1000, 8), "past every range");
        assert!(m.find(0x50_1000).is_none());
        assert!(!m.device_accessible(0x40_0000, 0x10_2000), "runs past the larger one's end");
        // A removed outer range leaves only the inner one.
        m.remove(0x10_0000);
        assert!(!m.device_accessible(tail, 32));
        assert!(m.device_accessible(0x30_0000, 0x1000));
    }

    /// Copies and fills across two ranges whose bytes live at unrelated host addresses go to
    /// each range's own bytes.
    #[test]
    fn copies_and_fills_spanning_ranges_are_cut_at_each_range() {
        let m = Memory::default();
        let (mut a, mut b, mut c) = ([0u8; 0x100], [0u8; 0x100], [0u8; 0x200]);
        let va = 0x7000_0000_0000u64;
        for (k, host) in [a.as_mut_ptr(), b.as_mut_ptr()].into_iter().enumerate() {
            let mut rr = r(va + 0x100 * k as u64, 0x100, MemKind::Userptr);
            rr.host = host as u64;
            m.insert(rr);
        }
        let mut rc = r(va + 0x1000, 0x200, MemKind::Userptr);
        rc.host = c.as_mut_ptr() as u64;
        m.insert(rc);
        let v = GpuView::new(&m);
        v.fill32(va + 0xf0, 0x1122_3344, 8);
        assert_eq!(a[0xf0..0xf4], [0x44, 0x33, 0x22, 0x11][..]);
        assert_eq!(b[0x0c..0x10], [0x44, 0x33, 0x22, 0x11][..]);
        assert_eq!(b[0x10], 0);
        v.write(va + 0x1000, &(0..=255u8).chain(0..=255).collect::<Vec<u8>>());
        v.copy(va + 0x80, va + 0x1000 + 0x7c, 0x100);
        let mut back = [0u8; 0x100];
        v.read(va + 0x80, &mut back);
        assert_eq!(&a[0x80..0x100], &c[0x7c..0xfc]);
        assert_eq!(&b[0..0x80], &c[0xfc..0x17c]);
        assert_eq!(&back[..], &c[0x7c..0x17c]);
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
