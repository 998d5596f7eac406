//! With `--features link`, ROCr is linked and callable. No GPU is needed: on a machine without
//! `/dev/kfd`, `hsa_init` returns an error status, and that is fine here.
#![cfg(feature = "link")]

use std::ffi::{c_char, CStr};

use hsa_sys::hsa;

#[test]
fn rocr_is_linked() {
    // SAFETY: hsa_init takes no arguments; a successful init is balanced by hsa_shut_down.
    let init = unsafe { hsa::hsa_init() };
    eprintln!("hsa_init: {init:#x}");
    if init == hsa::HSA_STATUS_SUCCESS {
        // SAFETY: the runtime was initialised just above.
        assert_eq!(unsafe { hsa::hsa_shut_down() }, hsa::HSA_STATUS_SUCCESS);
    }

    let mut text: *const c_char = std::ptr::null();
    // SAFETY: `text` is a valid out-pointer; ROCr stores a pointer to a static string into it.
    let status = unsafe { hsa::hsa_status_string(hsa::HSA_STATUS_ERROR, &mut text) };
    if status == hsa::HSA_STATUS_SUCCESS {
        assert!(!text.is_null());
        // SAFETY: on success `text` points at a NUL-terminated static string owned by ROCr.
        eprintln!("HSA_STATUS_ERROR: {:?}", unsafe { CStr::from_ptr(text) });
    }
}
