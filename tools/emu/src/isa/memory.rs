//! The interpreter's view of device memory: the process's memory through [`DeviceMemory`],
//! every access checked against the KFD memory table first (an access outside it is the GPU's
//! memory fault, [`Fault`]). A few ranges found accessible are remembered (aligned windows of
//! 1 MiB, 64 KiB or 4 KiB around the accesses), so the lanes of a wave touching a few buffers
//! cost a table look-up only when they reach a new window.

use std::cell::Cell;

use crate::kernels::Fault;
use crate::sys::devmem::DeviceMemory;

pub struct Memory<'a> {
    pub mem: &'a dyn DeviceMemory,
    accessible: &'a dyn Fn(u64, u64) -> bool,
    /// Ranges known accessible: `[start, end)`, replaced round robin.
    known: [Cell<(u64, u64)>; 8],
    next: Cell<usize>,
}

/// Windows tried around a missed access, largest first.
const WINDOWS: [u64; 3] = [1 << 20, 1 << 16, 1 << 12];

impl<'a> Memory<'a> {
    pub fn new(mem: &'a dyn DeviceMemory, accessible: &'a dyn Fn(u64, u64) -> bool) -> Self {
        Memory { mem, accessible, known: Default::default(), next: Cell::new(0) }
    }

    pub fn check(&self, addr: u64, len: u64, write: bool) -> Result<(), Fault> {
        let Some(end) = addr.checked_add(len) else { return Err(Fault { addr, write }) };
        if self.known.iter().any(|k| {
            let (s, e) = k.get();
            addr >= s && end <= e
        }) {
            return Ok(());
        }
        for w in WINDOWS {
            let start = addr & !(w - 1);
            let stop = end.div_ceil(w) * w;
            if (self.accessible)(start, stop - start) {
                let n = self.next.get();
                self.known[n % self.known.len()].set((start, stop));
                self.next.set(n + 1);
                return Ok(());
            }
        }
        if (self.accessible)(addr, len) {
            // A buffer smaller than the windows: remember the access's own range.
            let n = self.next.get();
            self.known[n % self.known.len()].set((addr, end));
            self.next.set(n + 1);
            return Ok(());
        }
        Err(Fault { addr, write })
    }

    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.check(addr, buf.len() as u64, false)?;
        self.mem.read(addr, buf);
        Ok(())
    }

    pub fn write(&self, addr: u64, buf: &[u8]) -> Result<(), Fault> {
        self.check(addr, buf.len() as u64, true)?;
        self.mem.write(addr, buf);
        Ok(())
    }

    /// An atomic read-modify-write of the 4-byte (`wide` false) or 8-byte word at `addr`:
    /// stores `f(old)`, returns `old`. Atomic against the other threads that execute waves and
    /// the host's (a compare-and-exchange loop).
    pub fn atomic(&self, addr: u64, wide: bool, f: impl Fn(u64) -> u64) -> Result<u64, Fault> {
        let n = if wide { 8 } else { 4 };
        self.check(addr, n, true)?;
        let mut b = [0u8; 8];
        self.mem.read(addr, &mut b[..n as usize]);
        let mut old = u64::from_le_bytes(b);
        loop {
            match self.mem.compare_exchange(addr, wide, old, f(old)) {
                Ok(o) => return Ok(o),
                Err(now) => old = now,
            }
        }
    }

    pub fn read_u32(&self, addr: u64) -> Result<u32, Fault> {
        self.check(addr, 4, false)?;
        Ok(self.mem.read_u32(addr))
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Reads `n` dwords.
    pub fn read_dwords(&self, addr: u64, out: &mut [u32]) -> Result<(), Fault> {
        if let [one] = out {
            *one = self.read_u32(addr)?;
            return Ok(());
        }
        let mut b = [0u8; 64];
        for (k, chunk) in out.chunks_mut(16).enumerate() {
            let bytes = &mut b[..chunk.len() * 4];
            self.read(addr + 64 * k as u64, bytes)?;
            for (j, d) in chunk.iter_mut().enumerate() {
                *d = u32::from_le_bytes(bytes[j * 4..j * 4 + 4].try_into().expect("4 bytes"));
            }
        }
        Ok(())
    }
}
