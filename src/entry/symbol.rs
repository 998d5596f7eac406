//! Addresses of C functions as typed function pointers: the one place libxhsa makes something
//! callable out of an address (a symbol the dynamic loader found, or an entry of ROCr's API
//! table). Every other module asks [`typed`], under the obligation its `# Safety` states. It also
//! keeps the original entries of ROCr's API table that `OnLoad` replaced ([`original`]), so that
//! both loading modes find ROCr's functions here.
//!
//! What it is not: a symbol lookup (that is [`super::next_symbol`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::api_table::Hook;

/// The original table entries libxhsa replaced, by [`Hook`] (0: not patched).
static ORIGINALS: [AtomicUsize; Hook::ALL.len()] = [const { AtomicUsize::new(0) }; Hook::ALL.len()];

/// The original entry `h` libxhsa replaced in the API table (0 when it did not).
pub(crate) fn original(h: Hook) -> usize {
    ORIGINALS[h as usize].load(Ordering::Acquire)
}

/// Keeps `addr`, the original entry `h` of ROCr's API table, before libxhsa replaces it.
pub(crate) fn save_original(h: Hook, addr: usize) {
    ORIGINALS[h as usize].store(addr, Ordering::Release);
}

/// A C function-pointer type: `extern "C" fn(..) -> R` or `unsafe extern "C" fn(..) -> R`.
///
/// # Safety
///
/// Implemented only for function-pointer types, which are one pointer wide and never null.
pub(crate) unsafe trait CFn: Copy {}

macro_rules! c_fn {
    ($($arg:ident),*) => {
        // SAFETY: a function-pointer type: one pointer wide, never null.
        unsafe impl<R, $($arg),*> CFn for unsafe extern "C" fn($($arg),*) -> R {}
        // SAFETY: as above.
        unsafe impl<R, $($arg),*> CFn for extern "C" fn($($arg),*) -> R {}
    };
}

c_fn!();
c_fn!(A);
c_fn!(A, B);
c_fn!(A, B, C);
c_fn!(A, B, C, D);
c_fn!(A, B, C, D, E);
c_fn!(A, B, C, D, E, F);
c_fn!(A, B, C, D, E, F, G);
c_fn!(A, B, C, D, E, F, G, H);
c_fn!(A, B, C, D, E, F, G, H, I);
c_fn!(A, B, C, D, E, F, G, H, I, J);

/// The function at `addr` as an `F`; `None` for address 0 (not found, not patched).
///
/// # Safety
///
/// `addr` is 0 or the address of a function whose C signature (arguments, result, calling
/// convention) is `F`'s, and the function stays loaded for as long as the result is called.
pub(crate) unsafe fn typed<F: CFn>(addr: usize) -> Option<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
    // SAFETY: `F` is a function-pointer type of the size of `usize` (`CFn`, asserted above),
    // `addr` is not null, and the caller vouches that a function of `F`'s signature is there.
    (addr != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&addr) })
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn seven(x: u32) -> u32 {
        x + 7
    }

    #[test]
    fn an_address_becomes_the_function_it_is_and_zero_none() {
        let addr = seven as extern "C" fn(u32) -> u32 as usize;
        // SAFETY: `addr` is `seven`'s address, of exactly this type, and `seven` is static.
        let f = unsafe { typed::<extern "C" fn(u32) -> u32>(addr) }.unwrap();
        assert_eq!(f(1), 8);
        // SAFETY: 0 is allowed.
        assert!(unsafe { typed::<extern "C" fn(u32) -> u32>(0) }.is_none());
    }
}
