//! What the emulator's test binaries share: a stable content hash for the files they keep in
//! the tests' scratch directory (`target/tmp`) between runs.

/// A 64-bit FNV-1a hash (stable across builds, unlike std's `DefaultHasher`).
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
