//! Shared memory between the device process and its clients: anonymous files (`memfd`) passed
//! over the control socket, never named files, so a private `/dev/shm` or a separate IPC
//! namespace (a container's) does not matter. Mapped `MAP_SHARED`, they hold futex words and
//! single-producer/single-consumer rings. This is the hot path: a client posts kernels and the
//! device posts completions with no socket round trip, waking the other side through a futex
//! in the shared mapping (futexes on shared file pages work across namespaces).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sys::sock;

/// Entries per ring.
pub const RING: usize = 8192;
/// Layout guard and protocol version of the shared areas: "XHSAEMU3" since job entries carry
/// the client's epoch (a device and clients of different versions refuse each other).
const MAGIC: u64 = 0x5848_5341_454d_5533; // "XHSAEMU3"

/// A kernel a client hands to the device's scheduler.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobEntry {
    /// The client's queue key.
    pub key: u32,
    pub waves: u32,
    pub lds: u32,
    /// The client's connection epoch when it posted the entry: the device takes only entries
    /// of the epoch the client announced (entries left from a device that went away are the
    /// client's to post again).
    pub epoch: u32,
    pub tag: u64,
    pub workgroups: u64,
    pub wg_ns: u64,
    /// Device time the client fetched the packet.
    pub submit_ns: u64,
    /// Contention profile of one workgroup: pipe utilisation in millionths, HBM bytes.
    pub util_micro: u32,
    pub _pad2: u32,
    pub hbm_bytes: u64,
}

/// A kernel the device has finished.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoneEntry {
    pub key: u32,
    pub _pad: u32,
    pub tag: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[repr(C)]
struct Ring<T> {
    head: AtomicU64,
    _pad0: [u64; 7],
    tail: AtomicU64,
    _pad1: [u64; 7],
    slots: [std::cell::UnsafeCell<T>; RING],
}

/// The per-client shared page set: the client's wake word and its two rings.
#[repr(C)]
pub struct ClientArea {
    magic: u64,
    _pad0: [u64; 7],
    /// Bumped (then futex-woken) by doorbell traps, host pokes and the device's completions.
    pub wake: AtomicU32,
    _pad1: [u32; 15],
    jobs: Ring<JobEntry>,
    done: Ring<DoneEntry>,
}

/// The device-wide shared page: the device thread's wake word.
#[repr(C)]
pub struct DeviceArea {
    magic: u64,
    _pad0: [u64; 7],
    pub wake: AtomicU32,
}

// SAFETY: the rings are single-producer/single-consumer with the slot ownership handed over by
// the head/tail atomics (release/acquire); the other fields are atomics.
unsafe impl Sync for ClientArea {}
// SAFETY: its fields are plain integers and atomics, each of them Sync.
unsafe impl Sync for DeviceArea {}

/// A shared file mapping of one `T`.
pub struct Shared<T: 'static> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: `T` is Sync (checked by the bound on `get`); the mapping is owned here.
unsafe impl<T: Sync> Send for Shared<T> {}
// SAFETY: `T` is Sync, so shared references to it may cross threads; the mapping is owned here.
unsafe impl<T: Sync> Sync for Shared<T> {}

impl<T: Sync + 'static> Shared<T> {
    /// A new anonymous file holding one zero-filled `T` (a valid empty value of every area type
    /// here), mapped; the descriptor is for passing to the other side.
    pub fn create(name: &std::ffi::CStr) -> io::Result<(Shared<T>, OwnedFd)> {
        let fd = sock::memfd(name, std::mem::size_of::<T>() as u64)?;
        Ok((Shared::map(&fd)?, fd))
    }

    /// Maps the area in `fd` (received from the other side); refused if it is too small.
    pub fn map(fd: &OwnedFd) -> io::Result<Shared<T>> {
        let len = std::mem::size_of::<T>();
        let have = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        if have < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("shared area of {have} bytes, {len} expected"),
            ));
        }
        // SAFETY: mapping `len` bytes of a file we hold open and that is at least that long;
        // MAP_SHARED so both processes see the same pages.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Shared { ptr: p.cast(), len })
    }

    pub fn get(&self) -> &T {
        // SAFETY: the mapping holds a `T` (zero-initialised or initialised by the creator) for
        // as long as `self` lives; all shared mutation goes through atomics.
        unsafe { &*self.ptr }
    }
}

impl<T: 'static> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no reference outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl<T: Copy> Ring<T> {
    fn push(&self, v: T) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head - self.tail.load(Ordering::Acquire) >= RING as u64 {
            return false;
        }
        // SAFETY: the slot at `head` belongs to the producer until head is published.
        unsafe { *self.slots[head as usize % RING].get() = v };
        self.head.store(head + 1, Ordering::Release);
        true
    }

    fn pop(&self) -> Option<T> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: the slot at `tail` was published by the producer's release store of head.
        let v = unsafe { *self.slots[tail as usize % RING].get() };
        self.tail.store(tail + 1, Ordering::Release);
        Some(v)
    }

    fn peek(&self) -> Option<T> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: as in `pop`, without consuming.
        Some(unsafe { *self.slots[tail as usize % RING].get() })
    }
}

impl ClientArea {
    pub fn init(&self) {
        // Layout guard for the other side.
        let p = &self.magic as *const u64 as *mut u64;
        // SAFETY: the creator writes the magic once before handing the file to the device.
        unsafe { p.write_volatile(MAGIC) };
    }

    pub fn valid(&self) -> bool {
        // SAFETY: plain read of an initialised word.
        unsafe { (&self.magic as *const u64).read_volatile() == MAGIC }
    }

    /// Client side: posts a kernel; false if the ring is full.
    pub fn post_job(&self, j: JobEntry) -> bool {
        self.jobs.push(j)
    }

    /// Device side: takes the next posted kernel.
    pub fn take_job(&self) -> Option<JobEntry> {
        self.jobs.pop()
    }

    /// Device side: posts a completion; false if the ring is full.
    pub fn post_done(&self, d: DoneEntry) -> bool {
        self.done.push(d)
    }

    /// Client side: the next completion, if any.
    pub fn take_done(&self) -> Option<DoneEntry> {
        self.done.pop()
    }

    /// Client side: the next completion without taking it.
    pub fn peek_done(&self) -> Option<DoneEntry> {
        self.done.peek()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_pass_entries_in_order_through_a_shared_file() {
        let (a, fd) = Shared::<ClientArea>::create(c"xhsa-test").unwrap();
        a.get().init();
        let b: Shared<ClientArea> = Shared::map(&fd).unwrap();
        assert!(b.get().valid());
        for i in 0..10 {
            assert!(a.get().post_job(JobEntry { key: 1, tag: i, ..Default::default() }));
        }
        for i in 0..10 {
            assert_eq!(b.get().take_job().unwrap().tag, i);
        }
        assert!(b.get().take_job().is_none());
        for i in 0..RING as u64 {
            assert!(b.get().post_done(DoneEntry { tag: i, ..Default::default() }));
        }
        assert!(!b.get().post_done(DoneEntry::default()), "full");
        assert_eq!(a.get().peek_done().unwrap().tag, 0);
        assert_eq!(a.get().take_done().unwrap().tag, 0);
    }
}
