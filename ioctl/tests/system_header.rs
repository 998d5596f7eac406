//! The hand-written ABI against a bindgen of the system's `<linux/kfd_ioctl.h>` (see
//! `build.rs`; `KFD_IOCTL_H` picks another header). Whatever uapi version that header is, every
//! struct, field, request and constant it defines must exist here with the same layout and
//! value; the only differences allowed are the ones later uapi versions made, listed in
//! [`GROWN_SINCE`] and checked to be exactly an extension of the older layout.
//!
//! Without the header (no linux-libc-dev), `cfg(system_kfd_header)` is unset and only
//! `system_header_absent` runs; `layout.rs`, `requests.rs` and `constants.rs` still compare
//! against the upstream 1.17 values.

#[cfg(system_kfd_header)]
mod common;

#[cfg(system_kfd_header)]
// Generated code: bindgen writes `unsafe` operations and blocks without the SAFETY comments and
// blocks the workspace's unsafe lints ask for, so they are allowed here and only here.
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::pedantic,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/kfd_sys.rs"));
    include!(concat!(env!("OUT_DIR"), "/kfd_sys_tables.rs"));
}

/// Structs that grew after an older uapi: (C name, the minor version that grew it). Against a
/// header older than that, the header's layout must be a prefix of ours.
#[cfg(system_kfd_header)]
const GROWN_SINCE: &[(&str, u32)] = &[
    // 1.14 added `signal_event_data` to the anonymous union of `kfd_event_data`.
    ("kfd_event_data__bindgen_ty_1", 14),
    // 1.17 added `sdma_engine_id` and `pad`: 88 -> 96 bytes, and a new CREATE_QUEUE number.
    ("kfd_ioctl_create_queue_args", 17),
];

/// Constants whose value moves with the uapi version: the header's may be lower.
#[cfg(system_kfd_header)]
const VERSIONED: &[&str] = &["KFD_IOCTL_MINOR_VERSION", "AMDKFD_COMMAND_END"];

#[cfg(system_kfd_header)]
mod compare {
    use super::common::{arg_struct, mine_const, mine_of};
    use super::{sys, GROWN_SINCE, VERSIONED};
    use xhsa_ioctl::abi::{IocFields, Request};

    fn normalize(v: i128) -> u64 {
        if v < 0 {
            // A C `(1 << 31)` enum member: the `__u32` bits.
            assert!(v >= i128::from(i32::MIN), "{v}");
            v as i32 as u32 as u64
        } else {
            v as u64
        }
    }

    fn sys_minor() -> u32 {
        let (_, v) = sys::SYS_CONSTS
            .iter()
            .find(|(n, _)| *n == "KFD_IOCTL_MINOR_VERSION")
            .expect("the header defines KFD_IOCTL_MINOR_VERSION");
        *v as u32
    }

    /// Whether `c_name` may legitimately differ from this header (it grew in a later minor).
    fn may_have_grown(c_name: &str) -> bool {
        GROWN_SINCE.iter().any(|&(n, minor)| n == c_name && sys_minor() < minor)
    }

    #[test]
    fn header_is_found_and_not_newer_than_this_crate() {
        eprintln!("comparing with {} (uapi 1.{})", sys::SYS_HEADER, sys_minor());
        assert!(sys_minor() <= xhsa_ioctl::KFD_IOCTL_MINOR_VERSION);
        assert!(!sys::SYS_REQUESTS.is_empty() && !sys::sys_layouts().is_empty());
    }

    #[test]
    fn every_struct_of_the_header_has_the_same_layout() {
        let mut grown = Vec::new();
        for (name, size, align, fields) in sys::sys_layouts() {
            let mine = mine_of(name);
            for &(field, offset) in &fields {
                assert_eq!(mine.field(field), Some(offset), "offset_of {name}.{field}");
            }
            assert_eq!(mine.align, align, "align_of {name}");
            let mine_names: Vec<&str> = mine.fields.iter().map(|(n, _)| *n).collect();
            let sys_names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
            if mine_names == sys_names {
                assert_eq!(mine.size, size, "size_of {name}");
                continue;
            }
            // An older header: its fields must be our first ones, and it must end where our
            // first newer field starts (a union: no larger than ours).
            assert!(may_have_grown(name), "{name}: fields {sys_names:?} != {mine_names:?}");
            assert_eq!(&mine_names[..sys_names.len()], &sys_names[..], "{name}: not a prefix");
            let (first_new, new_offset) = mine.fields[sys_names.len()];
            let is_union = mine.fields.iter().all(|&(_, off)| off == 0);
            if is_union {
                assert!(size <= mine.size, "{name}: {size} > {}", mine.size);
            } else {
                let end = new_offset.next_multiple_of(align);
                assert_eq!(size, end, "{name} should end where {first_new} starts");
            }
            grown.push(name);
        }
        eprintln!("grown since uapi 1.{}: {grown:?}", sys_minor());
    }

    #[test]
    #[allow(clippy::unnecessary_cast)] // `c_ulong` is `u32` on 32-bit targets
    fn every_request_of_the_header_has_the_same_number() {
        let layouts = sys::sys_layouts();
        let sys_size =
            |c_name: &str| layouts.iter().find(|l| l.0 == c_name).map(|l| l.1).expect(c_name);
        for &(name, number) in sys::SYS_REQUESTS {
            let req = Request::ALL
                .into_iter()
                .find(|r| r.name() == name)
                .unwrap_or_else(|| panic!("{name} is missing"));
            let arg = arg_struct(req);
            let theirs = IocFields::decode(number as _);
            let ours = IocFields::decode(req.raw());
            assert_eq!((theirs.dir, theirs.ty, theirs.nr), (ours.dir, ours.ty, ours.nr), "{name}");
            assert_eq!(theirs.size, sys_size(arg), "{name}: the header's own struct size");
            assert_eq!(ours.size, mine_of(arg).size, "{name}: our struct size");
            if may_have_grown(arg) {
                // An older uapi's number for the same command: the kernel runs it alike.
                assert_eq!(Request::from_raw_lenient(number as _), Some(req), "{name}");
            } else {
                assert_eq!(req.raw() as u64, number, "{name}: {:#x} != {number:#x}", req.raw());
                assert_eq!(Request::from_raw(number as _), Some(req), "{name}");
            }
        }
        // What the header lacks must be past its table.
        let (_, end) = sys::SYS_CONSTS.iter().find(|(n, _)| *n == "AMDKFD_COMMAND_END").unwrap();
        for req in Request::ALL {
            if !sys::SYS_REQUESTS.iter().any(|(n, _)| *n == req.name()) {
                assert!(i128::from(req.nr()) >= *end, "{req} is in the header's range but absent");
            }
        }
    }

    #[test]
    fn every_constant_of_the_header_has_the_same_value() {
        for &(name, value) in sys::SYS_CONSTS {
            let mine = mine_const(name).unwrap_or_else(|| panic!("{name} is missing"));
            let theirs = normalize(value);
            if VERSIONED.contains(&name) {
                assert!(theirs <= mine, "{name}: header {theirs} > ours {mine}");
            } else {
                assert_eq!(mine, theirs, "{name}: {mine:#x} != header {theirs:#x}");
            }
        }
    }
}

#[cfg(not(system_kfd_header))]
#[test]
fn system_header_absent() {
    eprintln!(
        "no <linux/kfd_ioctl.h> at build time: system-header comparison skipped \
         (the upstream-constant tests still ran)"
    );
}
