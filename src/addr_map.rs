//! A fixed-capacity map from non-zero `u64` keys to `u64` values whose lookups take no lock.
//!
//! libxhsa must recognise its shadow queues and shadow doorbells on every queue-index call and
//! every `hsa_signal_store_*`, and HIP stores to its own signals constantly: the miss path has to
//! cost a few loads, not a lock. Keys are queue addresses and signal handles (never 0).
//!
//! Open addressing with linear probing over `CAPACITY` slots. Writers (insert, remove) are
//! serialised by a mutex; readers only load atomics. A removed key leaves a tombstone so that
//! probes for keys placed after it still find them; an insert reuses the first tombstone on its
//! probe path. A reader racing with the removal of the key it looks up may see it or not — the
//! callers only remove a key when the object it names is being destroyed, and using an object
//! while destroying it is the application's error.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Number of slots; at most `CAPACITY / 2` live keys are accepted so probes stay short.
pub const CAPACITY: usize = 1024;

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;

/// The map; see the module doc.
pub struct AddrMap {
    keys: Vec<AtomicU64>,
    values: Vec<AtomicU64>,
    /// Live keys, guarded with the writers.
    writer: Mutex<usize>,
}

impl Default for AddrMap {
    fn default() -> AddrMap {
        AddrMap::new()
    }
}

impl std::fmt::Debug for AddrMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AddrMap({} keys)", self.len())
    }
}

fn home(key: u64) -> usize {
    // Fibonacci hashing: queue addresses and signal handles share their low bits.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % CAPACITY
}

impl AddrMap {
    /// An empty map.
    pub fn new() -> AddrMap {
        AddrMap {
            keys: (0..CAPACITY).map(|_| AtomicU64::new(EMPTY)).collect(),
            values: (0..CAPACITY).map(|_| AtomicU64::new(0)).collect(),
            writer: Mutex::new(0),
        }
    }

    /// The value of `key`, without taking a lock.
    pub fn get(&self, key: u64) -> Option<u64> {
        if key == EMPTY || key == TOMBSTONE {
            return None;
        }
        let mut i = home(key);
        for _ in 0..CAPACITY {
            match self.keys[i].load(Ordering::Acquire) {
                EMPTY => return None,
                k if k == key => return Some(self.values[i].load(Ordering::Acquire)),
                _ => i = (i + 1) % CAPACITY,
            }
        }
        None
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces `key`; false when the key is 0 or `u64::MAX` or the map is full.
    pub fn insert(&self, key: u64, value: u64) -> bool {
        if key == EMPTY || key == TOMBSTONE {
            return false;
        }
        let mut live = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut i = home(key);
        let mut free = None;
        for _ in 0..CAPACITY {
            match self.keys[i].load(Ordering::Relaxed) {
                k if k == key => {
                    self.values[i].store(value, Ordering::Release);
                    return true;
                }
                EMPTY => {
                    free.get_or_insert(i);
                    break;
                }
                TOMBSTONE => {
                    free.get_or_insert(i);
                }
                _ => {}
            }
            i = (i + 1) % CAPACITY;
        }
        let Some(slot) = free else { return false };
        if *live >= CAPACITY / 2 {
            return false;
        }
        // The value first: a reader that sees the key sees its value.
        self.values[slot].store(value, Ordering::Release);
        self.keys[slot].store(key, Ordering::Release);
        *live += 1;
        true
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, key: u64) -> Option<u64> {
        if key == EMPTY || key == TOMBSTONE {
            return None;
        }
        let mut live = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut i = home(key);
        for _ in 0..CAPACITY {
            match self.keys[i].load(Ordering::Relaxed) {
                EMPTY => return None,
                k if k == key => {
                    self.keys[i].store(TOMBSTONE, Ordering::Release);
                    *live -= 1;
                    return Some(self.values[i].load(Ordering::Relaxed));
                }
                _ => i = (i + 1) % CAPACITY,
            }
        }
        None
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        *self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_get_remove() {
        let m = AddrMap::new();
        assert!(m.is_empty());
        assert!(m.insert(0x7f00_1000, 1));
        assert!(m.insert(0x7f00_2000, 2));
        assert_eq!(m.get(0x7f00_1000), Some(1));
        assert!(m.insert(0x7f00_1000, 3), "replacing a key");
        assert_eq!(m.get(0x7f00_1000), Some(3));
        assert_eq!(m.len(), 2);
        assert_eq!(m.remove(0x7f00_1000), Some(3));
        assert_eq!(m.get(0x7f00_1000), None);
        assert_eq!(m.get(0x7f00_2000), Some(2));
        assert_eq!(m.remove(0x7f00_1000), None);
        assert!(!m.insert(0, 1) && !m.insert(u64::MAX, 1));
        assert_eq!(m.get(0), None);
    }

    #[test]
    fn full_map_refuses_and_tombstones_are_reused() {
        let m = AddrMap::new();
        let keys: Vec<u64> = (1..=(CAPACITY as u64 / 2)).map(|k| k * 64).collect();
        for &k in &keys {
            assert!(m.insert(k, k + 1));
        }
        assert!(!m.insert(0xdead_0000, 1), "at most CAPACITY/2 keys");
        for &k in &keys {
            assert_eq!(m.get(k), Some(k + 1));
        }
        for &k in keys.iter().step_by(2) {
            m.remove(k);
        }
        for &k in keys.iter().skip(1).step_by(2) {
            assert_eq!(m.get(k), Some(k + 1), "found past tombstones");
        }
        assert!(m.insert(0xdead_0000, 7));
        assert_eq!(m.get(0xdead_0000), Some(7));
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u8..3, 1u64..40, 0u64..100), 1..400)) {
            let m = AddrMap::new();
            let mut model = HashMap::new();
            for (op, k, v) in ops {
                let key = k * 4096; // addresses collide in their low bits
                match op {
                    0 => { proptest::prop_assert!(m.insert(key, v)); model.insert(key, v); }
                    1 => { proptest::prop_assert_eq!(m.remove(key), model.remove(&key)); }
                    _ => { proptest::prop_assert_eq!(m.get(key), model.get(&key).copied()); }
                }
            }
            proptest::prop_assert_eq!(m.len(), model.len());
        }
    }
}
