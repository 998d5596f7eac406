//! Code objects ROCr loads from memory, and the libraries that asked for them.
//!
//! ROCr names a loaded code object by URI: `file:///usr/lib/librocsparse.so.1#offset=N&size=M`
//! when the runtime loaded it from a file, `memory://PID#offset=0xADDR&size=M` when from memory.
//! HIP 6.x loads its libraries' code objects from their files; HIP 7.x extracts (and
//! decompresses) them into its own heap and loads them from there, so the URI no longer names
//! the library. libxhsa therefore notes, when `hsa_code_object_reader_create_from_memory` is
//! called, which libraries are on the caller's stack (HIP loads a library's code objects when
//! that library registers its fat binary or launches its first kernel), and the whitelist
//! matches a memory URI through them.
//!
//! What it is not: the stack walk or the loader calls (`origin`); this is the bookkeeping.
#![forbid(unsafe_code)]

use std::collections::VecDeque;

/// The code-object readers remembered at most (the oldest are forgotten first).
pub const REMEMBERED: usize = 4096;

/// One code object read from memory: where, how big, and the libraries that asked for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryCodeObject {
    pub address: u64,
    pub size: u64,
    pub libraries: Vec<String>,
}

/// The code objects read from memory, newest first (an address may be reused after its code
/// object is freed: the newest record wins).
#[derive(Debug, Default)]
pub struct MemoryCodeObjects {
    records: VecDeque<MemoryCodeObject>,
}

impl MemoryCodeObjects {
    /// None yet (usable in a `static`).
    pub const fn new() -> MemoryCodeObjects {
        MemoryCodeObjects { records: VecDeque::new() }
    }
}

impl MemoryCodeObjects {
    /// Notes a code object read from `[address, address + size)` for `libraries`.
    pub fn note(&mut self, address: u64, size: u64, libraries: Vec<String>) {
        if self.records.len() == REMEMBERED {
            self.records.pop_back();
        }
        self.records.push_front(MemoryCodeObject { address, size, libraries });
    }

    /// The libraries that asked for the code object at `address` (its start, as a memory URI
    /// names it), if one was noted.
    pub fn libraries_of(&self, address: u64) -> Option<&[String]> {
        self.records.iter().find(|r| r.address == address).map(|r| r.libraries.as_slice())
    }

    /// Forgets everything (the runtime shut down).
    pub fn clear(&mut self) {
        self.records.clear();
    }
}

/// The address and size a `memory://PID#offset=0xADDR&size=N` URI names; `None` for any other
/// URI.
pub fn memory_uri(uri: &str) -> Option<(u64, u64)> {
    let rest = uri.strip_prefix("memory://")?;
    let (_pid, query) = rest.split_once('#')?;
    let (mut offset, mut size) = (None, None);
    for part in query.split('&') {
        let (k, v) = part.split_once('=')?;
        let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok()?,
            None => v.parse().ok()?,
        };
        match k {
            "offset" => offset = Some(n),
            "size" => size = Some(n),
            _ => {}
        }
    }
    Some((offset?, size?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_uris_give_address_and_size_and_other_uris_nothing() {
        assert_eq!(
            memory_uri("memory://26056#offset=0x557adaa4a260&size=47520"),
            Some((0x557a_daa4_a260, 47520))
        );
        assert_eq!(memory_uri("memory://1#size=16&offset=4096"), Some((4096, 16)));
        for bad in [
            "file:///usr/lib/librocsparse.so.1#offset=4096&size=16",
            "memory://1",
            "memory://1#offset=0x10",
            "memory://1#offset=zz&size=1",
            "memory://1#offset",
        ] {
            assert_eq!(memory_uri(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_newest_record_of_an_address_wins_and_the_oldest_are_forgotten() {
        let mut m = MemoryCodeObjects::default();
        m.note(0x1000, 64, vec!["liba.so".into()]);
        m.note(0x1000, 64, vec!["libb.so".into()]);
        assert_eq!(m.libraries_of(0x1000), Some(&["libb.so".to_string()][..]));
        assert_eq!(m.libraries_of(0x2000), None);
        for i in 0..REMEMBERED as u64 {
            m.note(0x10_0000 + i, 1, vec![]);
        }
        assert_eq!(m.libraries_of(0x1000), None, "forgotten after {REMEMBERED} newer ones");
        assert!(m.libraries_of(0x10_0000).is_some());
        m.clear();
        assert_eq!(m.libraries_of(0x10_0000), None);
    }
}
