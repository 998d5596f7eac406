//! The device's view of memory: the same virtual addresses as the host's.
//!
//! [`DeviceMemory`] is what the packet processor and kernel models use; [`HostMemory`] is the
//! real implementation, dereferencing addresses in this process after the KFD memory table has
//! said they are backed. Tests use a fake implementation of the trait.

use std::sync::atomic::{AtomicI64, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Byte-addressed access to device-visible memory. Addresses are checked by the caller
/// against the KFD memory table before they reach an implementation.
pub trait DeviceMemory: Send + Sync {
    fn read(&self, addr: u64, buf: &mut [u8]);
    fn write(&self, addr: u64, buf: &[u8]);
    /// Copies `len` bytes; the ranges may overlap.
    fn copy(&self, dst: u64, src: u64, len: u64);
    fn fill32(&self, dst: u64, value: u32, count: u64);
    fn load_u64(&self, addr: u64) -> u64;
    fn store_u64(&self, addr: u64, value: u64);
    fn store_u16(&self, addr: u64, value: u16);
    /// Atomic add on a signed 64-bit word (signal values); returns the previous value.
    fn fetch_add_i64(&self, addr: u64, delta: i64) -> i64;
    /// Compare-and-exchange of a 4-byte (`wide` false) or 8-byte word: stores `new` if the
    /// word holds `current`; Ok(previous) if it did, Err(what it holds) if not. Atomic
    /// against every other thread's accesses (the interpreter's threads, the host's) when the
    /// word is naturally aligned, as the GPU's atomics require.
    fn compare_exchange(&self, addr: u64, wide: bool, current: u64, new: u64) -> Result<u64, u64>;

    fn read_u32(&self, addr: u64) -> u32 {
        let mut b = [0u8; 4];
        self.read(addr, &mut b);
        u32::from_le_bytes(b)
    }

    fn read_u64(&self, addr: u64) -> u64 {
        let mut b = [0u8; 8];
        self.read(addr, &mut b);
        u64::from_le_bytes(b)
    }
}

/// This process's memory, accessed directly: every method dereferences the addresses it is
/// given. Only [`HostMemory::new`] makes one, under its obligation.
#[derive(Debug)]
pub struct HostMemory(());

impl HostMemory {
    /// Access to this process's memory at raw addresses.
    ///
    /// # Safety
    ///
    /// Every address range given to the result's methods lies, for the whole access, in memory
    /// of this process that is mapped with the access asked for (readable for reads, writable
    /// for writes; naturally aligned for the atomic ones): the caller checks addresses against
    /// the KFD memory table, or passes only buffers it owns.
    pub const unsafe fn new() -> HostMemory {
        HostMemory(())
    }
}

impl DeviceMemory for HostMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) {
        // SAFETY: the caller checked that [addr, addr+len) lies in a backed, mapped range of
        // this process; u8 has no alignment requirement; the device has no aliasing contract
        // with the host beyond what a GPU has (racy accesses are the program's).
        unsafe { std::ptr::copy(addr as *const u8, buf.as_mut_ptr(), buf.len()) }
    }

    fn read_u32(&self, addr: u64) -> u32 {
        // SAFETY: as in `read`, for 4 bytes; the read is unaligned-safe.
        u32::from_le(unsafe { std::ptr::read_unaligned(addr as *const u32) })
    }

    fn write(&self, addr: u64, buf: &[u8]) {
        // SAFETY: as in `read`, for a writable backed range.
        unsafe { std::ptr::copy(buf.as_ptr(), addr as *mut u8, buf.len()) }
    }

    fn copy(&self, dst: u64, src: u64, len: u64) {
        // SAFETY: as in `read`/`write`; `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len as usize) }
    }

    fn fill32(&self, dst: u64, value: u32, count: u64) {
        if dst.is_multiple_of(4) {
            // SAFETY: checked range, 4-byte aligned.
            let s = unsafe { std::slice::from_raw_parts_mut(dst as *mut u32, count as usize) };
            s.fill(value);
        } else {
            let b = value.to_le_bytes();
            for i in 0..count {
                self.write(dst + i * 4, &b);
            }
        }
    }

    fn load_u64(&self, addr: u64) -> u64 {
        // SAFETY: checked range; signal and queue words are 8-byte aligned by their ABI.
        unsafe { (*(addr as *const AtomicU64)).load(Ordering::Acquire) }
    }

    fn store_u64(&self, addr: u64, value: u64) {
        // SAFETY: as in `load_u64`.
        unsafe { (*(addr as *const AtomicU64)).store(value, Ordering::Release) }
    }

    fn store_u16(&self, addr: u64, value: u16) {
        // SAFETY: checked range; packet headers are 2-byte aligned.
        unsafe { (*(addr as *const AtomicU16)).store(value, Ordering::Release) }
    }

    fn fetch_add_i64(&self, addr: u64, delta: i64) -> i64 {
        // SAFETY: as in `load_u64`.
        unsafe { (*(addr as *const AtomicI64)).fetch_add(delta, Ordering::AcqRel) }
    }

    fn compare_exchange(&self, addr: u64, wide: bool, current: u64, new: u64) -> Result<u64, u64> {
        match (wide, addr.is_multiple_of(if wide { 8 } else { 4 })) {
            // SAFETY: checked range, aligned for the atomic type; the word is only ever
            // accessed as plain memory otherwise, which atomics tolerate.
            (true, true) => unsafe {
                (*(addr as *const AtomicU64)).compare_exchange(
                    current,
                    new,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
            },
            // SAFETY: as above, for a 4-byte word.
            (false, true) => unsafe {
                (*(addr as *const AtomicU32)).compare_exchange(
                    current as u32,
                    new as u32,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
            }
            .map(u64::from)
            .map_err(u64::from),
            // Misaligned: a plain read and write (no atomicity to keep).
            (wide, false) => {
                let n = if wide { 8 } else { 4 };
                let mut b = [0u8; 8];
                self.read(addr, &mut b[..n]);
                let old = u64::from_le_bytes(b);
                if old != current {
                    return Err(old);
                }
                self.write(addr, &new.to_le_bytes()[..n]);
                Ok(old)
            }
        }
    }
}

/// A fake device memory for tests: a sparse byte map.
#[cfg(test)]
pub mod fake {
    use super::DeviceMemory;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct FakeMemory(pub Mutex<HashMap<u64, u8>>);

    impl DeviceMemory for FakeMemory {
        fn read(&self, addr: u64, buf: &mut [u8]) {
            let m = self.0.lock().unwrap();
            for (i, b) in buf.iter_mut().enumerate() {
                *b = *m.get(&(addr + i as u64)).unwrap_or(&0);
            }
        }
        fn write(&self, addr: u64, buf: &[u8]) {
            let mut m = self.0.lock().unwrap();
            for (i, b) in buf.iter().enumerate() {
                m.insert(addr + i as u64, *b);
            }
        }
        fn copy(&self, dst: u64, src: u64, len: u64) {
            let mut tmp = vec![0; len as usize];
            self.read(src, &mut tmp);
            self.write(dst, &tmp);
        }
        fn fill32(&self, dst: u64, value: u32, count: u64) {
            for i in 0..count {
                self.write(dst + 4 * i, &value.to_le_bytes());
            }
        }
        fn load_u64(&self, addr: u64) -> u64 {
            self.read_u64(addr)
        }
        fn store_u64(&self, addr: u64, value: u64) {
            self.write(addr, &value.to_le_bytes());
        }
        fn store_u16(&self, addr: u64, value: u16) {
            self.write(addr, &value.to_le_bytes());
        }
        fn fetch_add_i64(&self, addr: u64, delta: i64) -> i64 {
            let old = self.read_u64(addr) as i64;
            self.write(addr, &(old.wrapping_add(delta)).to_le_bytes());
            old
        }
        fn compare_exchange(
            &self,
            addr: u64,
            wide: bool,
            current: u64,
            new: u64,
        ) -> Result<u64, u64> {
            let mut m = self.0.lock().unwrap();
            let n = if wide { 8 } else { 4 };
            let old = (0..n)
                .fold(0u64, |v, i| v | u64::from(*m.get(&(addr + i)).unwrap_or(&0)) << (8 * i));
            if old != current {
                return Err(old);
            }
            for i in 0..n {
                m.insert(addr + i, (new >> (8 * i)) as u8);
            }
            Ok(old)
        }
    }
}
