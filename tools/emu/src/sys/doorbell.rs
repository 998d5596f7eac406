//! Noticing doorbell writes without polling: the doorbell pages are write-protected, and the
//! first store after arming traps into a SIGSEGV handler that unprotects the area, bumps a
//! notification word and wakes the packet processor through a futex, then lets the store
//! retry. The packet processor re-arms (write-protects) an area before it goes to sleep and
//! only then reads the doorbells, so no store is missed: one that lands before the re-arm is
//! read, one after it traps again.
//!
//! Measured on the project's VMs (docs/emulator.md): a trapped store stalls the writer about
//! 4.5 µs, a re-arm costs about 1 µs; only the first store after a re-arm traps.
//!
//! Faults outside a registered area go to the handler that was installed before ours (or the
//! default action), so the host application's own SIGSEGV behaviour is unchanged.
//!
//! Signal chaining: our handler must stay the one the kernel calls, or a doorbell store traps
//! into someone else's. LLVM does exactly that: while comgr compiles in-process (hipRTC, as
//! rocFFT does at plan time), LLVM's signal handlers are installed over ours, and a doorbell
//! store by another thread then runs LLVM's crash handler, which deletes the compiler's
//! temporary output files and puts our handler back; the store retries and rings, but the
//! compile fails (`unable to rename temporary ... .o.tmp`, rocFFT's `rocfft_plan_create
//! failed`). So once ours is installed, [`app_sigaction`] (the thunk's `sigaction` and `signal`
//! when preloaded) keeps it in place: the process's own SIGSEGV handler is recorded as the one
//! faults outside the doorbells are handed to, and reported back as the current one, as if
//! ours were not there.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

use super::futex;

const MAX_AREAS: usize = 32;

struct Area {
    start: AtomicUsize,
    end: AtomicUsize,
    word: AtomicPtr<AtomicU32>,
    traps: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Area = Area {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    word: AtomicPtr::new(std::ptr::null_mut()),
    traps: AtomicU64::new(0),
};
static AREAS: [Area; MAX_AREAS] = [EMPTY; MAX_AREAS];
static INSTALL: Once = Once::new();
/// Our handler is the kernel's SIGSEGV action (from then on the process's own is [`APP`]).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The SIGSEGV action the process itself set (the one before ours, then whatever it set through
/// [`app_sigaction`]): two slots, the current one named by `current`, so that our handler reads
/// a whole action while a writer fills the other slot.
struct AppAction {
    slots: [UnsafeCell<MaybeUninit<libc::sigaction>>; 2],
    current: AtomicUsize,
    /// Writers take turns: 0 free, 1 held, 2 held with writers waiting (a futex lock: no
    /// allocation, a waiting writer blocks; our signal handler only tries it, and its unlock is
    /// one async-signal-safe wake).
    writing: AtomicU32,
}

// SAFETY: a slot is written only by the holder of `writing`, and only the slot `current` does
// not name; readers copy the slot `current` names.
unsafe impl Sync for AppAction {}

static APP: AppAction = AppAction {
    slots: [UnsafeCell::new(MaybeUninit::uninit()), UnsafeCell::new(MaybeUninit::uninit())],
    current: AtomicUsize::new(0),
    writing: AtomicU32::new(0),
};

impl AppAction {
    fn lock(&self) {
        if self.try_lock() {
            return;
        }
        // Held: say a writer waits, and sleep until the holder lets go.
        while self.writing.swap(2, Ordering::Acquire) != 0 {
            super::futex::wait(&self.writing, 2, None);
        }
    }

    fn try_lock(&self) -> bool {
        self.writing.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    fn unlock(&self) {
        if self.writing.swap(0, Ordering::Release) == 2 {
            super::futex::wake_all(&self.writing);
        }
    }

    /// The current action. Only after the first [`AppAction::set`] (made before our handler is
    /// installed).
    fn get(&self) -> libc::sigaction {
        let i = self.current.load(Ordering::Acquire);
        // SAFETY: slot `i` was fully written before `current` named it (Release/Acquire).
        unsafe { (*self.slots[i].get()).assume_init_read() }
    }

    /// Sets the action; the caller holds the lock.
    fn set(&self, a: &libc::sigaction) {
        let next = 1 - self.current.load(Ordering::Relaxed);
        // SAFETY: the lock holder is the only writer, and readers read the other slot.
        unsafe { (*self.slots[next].get()).write(*a) };
        self.current.store(next, Ordering::Release);
    }
}

type SigactionFn =
    unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;

/// libc's `sigaction`: the definition after this object's (the thunk exports one of its own,
/// which calls [`app_sigaction`]), looked up before our handler is installed.
static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);

fn real_sigaction() -> SigactionFn {
    let mut p = REAL_SIGACTION.load(Ordering::Acquire);
    if p == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds libc's definition.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"sigaction".as_ptr()) } as usize;
        assert!(p != 0, "xhsa-emu: libc's sigaction not found (dlsym RTLD_NEXT)");
        REAL_SIGACTION.store(p, Ordering::Release);
    }
    // SAFETY: p is libc's sigaction, whose type this is.
    unsafe { std::mem::transmute::<usize, SigactionFn>(p) }
}

/// `sigaction(2)` for the process's own code (the thunk's `sigaction` and `signal`): for
/// SIGSEGV once our handler is installed, the action is recorded as the process's own, which
/// faults outside the doorbell areas are handed to, and the previous one (as the process set it)
/// is returned; our handler stays the kernel's. `None` for other signals (the caller hands those
/// to libc). Before our handler is installed SIGSEGV goes to libc too (under the same lock as
/// the installation, so that neither is lost).
///
/// # Safety
///
/// `sigaction(2)`'s contract: `act` is null or points to a valid action, `old` is null or
/// writable for one.
pub unsafe fn app_sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<libc::c_int> {
    if sig != libc::SIGSEGV {
        return None;
    }
    APP.lock();
    let r = if INSTALLED.load(Ordering::Acquire) {
        if !old.is_null() {
            // SAFETY: the caller's pointer, writable for one action.
            unsafe { old.write(APP.get()) };
        }
        if !act.is_null() {
            // SAFETY: the caller's pointer to a valid action.
            APP.set(unsafe { &*act });
        }
        0
    } else {
        // SAFETY: forwarding the caller's arguments to libc unchanged.
        unsafe { real_sigaction()(sig, act, old) }
    };
    APP.unlock();
    Some(r)
}

/// A registered doorbell area: page-aligned memory whose stores notify `word`.
#[derive(Debug)]
pub struct TrappedArea {
    index: usize,
    start: usize,
    len: usize,
}

/// Why an area could not be registered.
#[derive(Debug)]
pub enum TrapError {
    NotPageAligned,
    TooManyAreas,
    Mprotect(std::io::Error),
}

impl std::fmt::Display for TrapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrapError::NotPageAligned => f.write_str("doorbell area is not page aligned"),
            TrapError::TooManyAreas => write!(f, "more than {MAX_AREAS} doorbell areas"),
            TrapError::Mprotect(e) => write!(f, "mprotect of a doorbell area failed: {e}"),
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

impl TrappedArea {
    /// Registers `[start, start + len)` so that stores into it, once armed, notify `word`.
    ///
    /// # Safety
    /// The range must be a mapping the caller owns, used only for doorbells, that stays
    /// mapped until the area is dropped.
    pub unsafe fn register(
        start: *mut u8,
        len: usize,
        word: &'static AtomicU32,
    ) -> Result<TrappedArea, TrapError> {
        let page = page_size();
        if !(start as usize).is_multiple_of(page) || !len.is_multiple_of(page) || len == 0 {
            return Err(TrapError::NotPageAligned);
        }
        install_handler();
        for (index, a) in AREAS.iter().enumerate() {
            if a.start.compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            {
                a.word.store(word as *const AtomicU32 as *mut AtomicU32, Ordering::Release);
                a.end.store(start as usize + len, Ordering::Release);
                a.start.store(start as usize, Ordering::Release);
                return Ok(TrappedArea { index, start: start as usize, len });
            }
        }
        Err(TrapError::TooManyAreas)
    }

    /// Write-protects the area: the next store into it traps and notifies.
    pub fn arm(&self) -> Result<(), TrapError> {
        // SAFETY: the range is the registered mapping (see `register`); PROT_READ keeps reads
        // working, and stores are handled by our SIGSEGV handler.
        let r =
            unsafe { libc::mprotect(self.start as *mut libc::c_void, self.len, libc::PROT_READ) };
        if r != 0 {
            return Err(TrapError::Mprotect(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The registered range: (start address, length in bytes).
    pub fn range(&self) -> (usize, usize) {
        (self.start, self.len)
    }

    /// Stores that trapped so far.
    pub fn traps(&self) -> u64 {
        AREAS[self.index].traps.load(Ordering::Relaxed)
    }
}

impl Drop for TrappedArea {
    fn drop(&mut self) {
        // SAFETY: as in `arm`; leaves the area writable, as an unregistered area must be.
        unsafe {
            libc::mprotect(
                self.start as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        let a = &AREAS[self.index];
        a.end.store(0, Ordering::Release);
        a.start.store(0, Ordering::Release);
    }
}

fn install_handler() {
    INSTALL.call_once(|| {
        let real = real_sigaction();
        APP.lock();
        // SAFETY: a zeroed sigaction is a valid starting value; the previous action is recorded
        // as the process's own before our handler can run.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_segv as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut prev: libc::sigaction = std::mem::zeroed();
            real(libc::SIGSEGV, std::ptr::null(), &mut prev);
            APP.set(&prev);
            real(libc::SIGSEGV, &sa, std::ptr::null_mut());
        }
        INSTALLED.store(true, Ordering::Release);
        APP.unlock();
    });
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for a in &AREAS {
        let start = a.start.load(Ordering::Acquire);
        if start == 0
            || start == usize::MAX
            || addr < start
            || addr >= a.end.load(Ordering::Acquire)
        {
            continue;
        }
        let len = a.end.load(Ordering::Acquire) - start;
        // SAFETY: mprotect is async-signal-safe; the range is a registered doorbell mapping.
        unsafe {
            libc::mprotect(start as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE)
        };
        a.traps.fetch_add(1, Ordering::Relaxed);
        let word = a.word.load(Ordering::Acquire);
        if !word.is_null() {
            // SAFETY: registered words are 'static.
            let w = unsafe { &*word };
            w.fetch_add(1, Ordering::Release);
            futex::wake_all(w);
        }
        return;
    }
    chain(sig, info, ctx);
}

/// Hands a fault that is not ours to the process's own handler (the one installed before ours,
/// or set since through [`app_sigaction`]), as the kernel would have: with its mask and
/// `SA_NODEFER`, and reset to the default first if it asked for `SA_RESETHAND`.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = APP.get();
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Restore the default action and return: the fault repeats and ends the process the
        // way it would have without us.
        // SAFETY: plain sigaction call (libc's; async-signal-safe) with a valid zeroed struct.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            real_sigaction()(sig, &sa, std::ptr::null_mut());
        }
        return;
    }
    if prev.sa_flags & libc::SA_RESETHAND != 0 && APP.try_lock() {
        // The kernel resets such an action before running it (a writer busy on another thread
        // wins instead).
        // SAFETY: a zeroed sigaction is the default action.
        let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        APP.set(&dfl);
        APP.unlock();
    }
    // SAFETY: sigset operations on local sets and pthread_sigmask (async-signal-safe); the
    // mask the fault arrived with comes back when our handler returns.
    unsafe {
        let mut block = prev.sa_mask;
        if prev.sa_flags & libc::SA_NODEFER != 0 {
            let mut unblock: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut unblock);
            libc::sigaddset(&mut unblock, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &unblock, std::ptr::null_mut());
            libc::sigdelset(&mut block, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, std::ptr::null_mut());
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed as an SA_SIGINFO handler with this type.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the previous handler was installed as a plain handler with this type.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A writer that finds the action's lock held sleeps on it (the word says a writer waits)
    /// and gets it when the holder lets go.
    #[test]
    fn a_second_writer_sleeps_until_the_first_lets_go() {
        static LOCK: AppAction = AppAction {
            slots: [UnsafeCell::new(MaybeUninit::uninit()), UnsafeCell::new(MaybeUninit::uninit())],
            current: AtomicUsize::new(0),
            writing: AtomicU32::new(0),
        };
        LOCK.lock();
        assert!(!LOCK.try_lock());
        let waiter = std::thread::spawn(|| {
            LOCK.lock();
            LOCK.unlock();
        });
        let start = std::time::Instant::now();
        while LOCK.writing.load(Ordering::Acquire) != 2 {
            assert!(start.elapsed() < Duration::from_secs(10), "the waiter never said it waits");
            std::thread::sleep(Duration::from_millis(1));
        }
        LOCK.unlock();
        waiter.join().unwrap();
        assert_eq!(LOCK.writing.load(Ordering::Acquire), 0);
        assert!(LOCK.try_lock());
        LOCK.unlock();
    }

    #[test]
    fn a_store_into_an_armed_area_notifies_and_lands() {
        let page = page_size();
        // SAFETY: fresh anonymous mapping owned by the test.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as *mut u8;
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        // SAFETY: the mapping is ours and lives for the test.
        let area = unsafe { TrappedArea::register(p, page, word) }.unwrap();
        area.arm().unwrap();
        let addr = p as usize;
        let writer = std::thread::spawn(move || {
            // SAFETY: in-bounds aligned store into the mapping.
            unsafe { (*(addr as *const AtomicU64)).store(42, Ordering::Release) };
            // A second store does not trap: the area is unprotected until re-armed.
            // SAFETY: in-bounds aligned store into the mapping (its second word).
            unsafe { (*(addr as *const AtomicU64).add(1)).store(7, Ordering::Release) };
        });
        while word.load(Ordering::Acquire) == 0 {
            futex::wait(word, 0, Some(Duration::from_secs(5)));
        }
        writer.join().unwrap();
        // SAFETY: in-bounds aligned reads.
        assert_eq!(unsafe { *(p as *const u64) }, 42);
        // SAFETY: in-bounds aligned read (the mapping's second word).
        assert_eq!(unsafe { *(p as *const u64).add(1) }, 7);
        assert_eq!(area.traps(), 1);
        area.arm().unwrap();
        // SAFETY: in-bounds aligned store into the mapping.
        unsafe { (*(addr as *const AtomicU64)).store(43, Ordering::Release) };
        assert_eq!(area.traps(), 2);
        assert_eq!(word.load(Ordering::Acquire), 2);
    }
}
