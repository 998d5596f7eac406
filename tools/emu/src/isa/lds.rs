//! A workgroup's LDS: `group_segment_size` bytes (the descriptor's static size plus the
//! dispatch's dynamic size), zero at the start of the workgroup as the hardware leaves it
//! undefined. Accesses out of range read 0 and drop writes, as the hardware's LDS bounds check
//! does (addresses are compared against the allocation's size).

#[derive(Clone, Debug, Default)]
pub struct Lds {
    bytes: Vec<u8>,
}

impl Lds {
    pub fn new(size: usize) -> Lds {
        Lds { bytes: vec![0; size] }
    }

    /// Zero again, for the next workgroup.
    pub fn clear(&mut self) {
        self.bytes.fill(0);
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn range(&self, addr: u32, n: usize) -> Option<std::ops::Range<usize>> {
        let a = addr as usize;
        let e = a.checked_add(n)?;
        (e <= self.bytes.len()).then_some(a..e)
    }

    pub fn read(&self, addr: u32, out: &mut [u8]) {
        match self.range(addr, out.len()) {
            Some(r) => out.copy_from_slice(&self.bytes[r]),
            None => out.fill(0),
        }
    }

    pub fn write(&mut self, addr: u32, data: &[u8]) {
        if let Some(r) = self.range(addr, data.len()) {
            self.bytes[r].copy_from_slice(data);
        }
    }

    #[inline]
    pub fn read_u32(&self, addr: u32) -> u32 {
        let a = addr as usize;
        self.bytes.get(a..a + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    pub fn write_u32(&mut self, addr: u32, v: u32) {
        let a = addr as usize;
        if let Some(b) = self.bytes.get_mut(a..a + 4) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }

    pub fn read_u64(&self, addr: u32) -> u64 {
        let mut b = [0u8; 8];
        self.read(addr, &mut b);
        u64::from_le_bytes(b)
    }

    pub fn write_u64(&mut self, addr: u32, v: u64) {
        self.write(addr, &v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_reads_zero_and_drops_writes() {
        let mut l = Lds::new(16);
        l.write_u32(12, 7);
        assert_eq!(l.read_u32(12), 7);
        l.write_u32(14, 9);
        assert_eq!(l.read_u32(14), 0);
        assert_eq!(l.read_u32(12), 7);
    }
}
