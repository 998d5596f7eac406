//! The interpreter's view of device memory: the process's memory through [`DeviceMemory`],
//! every access checked against the KFD memory table first (an access outside it is the GPU's
//! memory fault, [`Fault`]). The last range found accessible is remembered, so the lanes of a
//! wave touching one buffer cost one table look-up.

use std::cell::Cell;

use crate::kernels::Fault;
use crate::sys::devmem::DeviceMemory;

pub struct Memory<'a> {
    pub mem: &'a dyn DeviceMemory,
    accessible: &'a dyn Fn(u64, u64) -> bool,
    /// A range known accessible: `[start, end)`.
    known: Cell<(u64, u64)>,
}

/// Granule the accessible-range cache grows by: a check of one address also proves its whole
/// 4 KiB page when the table says so.
const PAGE: u64 = 4096;

impl<'a> Memory<'a> {
    pub fn new(mem: &'a dyn DeviceMemory, accessible: &'a dyn Fn(u64, u64) -> bool) -> Self {
        Memory { mem, accessible, known: Cell::new((0, 0)) }
    }

    pub fn check(&self, addr: u64, len: u64, write: bool) -> Result<(), Fault> {
        let (s, e) = self.known.get();
        let Some(end) = addr.checked_add(len) else { return Err(Fault { addr, write }) };
        if addr >= s && end <= e {
            return Ok(());
        }
        let page = addr & !(PAGE - 1);
        let page_end = end.div_ceil(PAGE) * PAGE;
        if (self.accessible)(page, page_end - page) {
            self.known.set((page, page_end));
            return Ok(());
        }
        if (self.accessible)(addr, len) {
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

    pub fn read_u32(&self, addr: u64) -> Result<u32, Fault> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Reads `n` dwords.
    pub fn read_dwords(&self, addr: u64, out: &mut [u32]) -> Result<(), Fault> {
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
