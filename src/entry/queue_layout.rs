//! Where ROCr keeps its queue object beside the queue the application holds, by ROCr version.
//!
//! ROCr allocates every queue as a private `SharedQueue`: the `amd_queue` struct the application
//! sees (its first member is the `hsa_queue_t`), then a `core::Queue*` through which each HSA
//! queue function finds its object (`Queue::Convert`). A shadow copies both (the pointer is the
//! safety net of docs/libxhsa-shadow-queues.md §6.6: a call libxhsa did not intercept acts on
//! the hardware queue instead of reading garbage), so libxhsa must know where the pointer is:
//!
//! | ROCr | ROCm | `amd_queue` | pointer at |
//! |---|---|---|---|
//! | 1.5-1.14 | 5.0-6.3 | `amd_queue_t` (256 bytes) | 256 |
//! | 1.15-1.18 | 6.4-7.x | `amd_queue_v2_t` (2304 bytes: `amd_queue_t`'s 256 with the V2 scratch fields, then `scratch_last_used_index[MAX_NUM_XCC = 128]` of 16 bytes) | 2304 |
//!
//! 1.5-1.14 were read in ROCR-Runtime's `core/inc/queue.h` of every release tag; 1.15 was
//! measured on Debian's ROCr 6.4.3 (a queue's word at 2304 is set, at 256 it is zero; its
//! `amd_hsa_queue.h` defines `amd_queue_v2_t` as above); 1.16-1.18 are read in rocm-systems'
//! `projects/rocr-runtime` (`struct SharedQueue { amd_queue_v2_t amd_queue; Queue* core_queue; }`,
//! version 1.18.0 on its development branch). Any other version: not known, every queue passes
//! through (one warning says so). The caller also checks each queue: the pointer must be set
//! where the layout says, or that queue passes through.
//!
//! What it is not: a reader of queue memory (that is `memory`); this is the table only.
#![forbid(unsafe_code)]

use std::ops::RangeInclusive;

use super::api_table::{parse_rocr_build_id, RocrVersion};

/// Where the queue object's pointer is in ROCr's `SharedQueue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedQueueLayout {
    /// Bytes of the `amd_queue` struct at the start (what a shadow copies of the hardware queue).
    pub amd_queue_bytes: usize,
    /// Offset of ROCr's `core::Queue*` (right after the `amd_queue` struct).
    pub core_queue_word: u64,
}

/// `amd_queue_t`: 256 bytes.
pub const AMD_QUEUE_V1: SharedQueueLayout =
    SharedQueueLayout { amd_queue_bytes: 256, core_queue_word: 256 };
/// `amd_queue_v2_t`: 256 bytes, then 128 XCCs' `scratch_last_used_index` of two `u64`.
pub const AMD_QUEUE_V2: SharedQueueLayout =
    SharedQueueLayout { amd_queue_bytes: 256 + 128 * 16, core_queue_word: 256 + 128 * 16 };

const fn v(major: u32, minor: u32) -> RocrVersion {
    RocrVersion { major, minor }
}

/// The ROCr versions whose layout is known, each with its layout.
pub const KNOWN: [(RangeInclusive<RocrVersion>, SharedQueueLayout); 2] =
    [(v(1, 5)..=v(1, 14), AMD_QUEUE_V1), (v(1, 15)..=v(1, 18), AMD_QUEUE_V2)];

/// The layout of the ROCr whose build identifier is `build_id` (`None` when ROCr did not give
/// one) with its version, or why libxhsa may not shadow its queues.
pub fn shared_queue_layout(
    build_id: Option<&str>,
) -> Result<(RocrVersion, SharedQueueLayout), String> {
    let Some(id) = build_id else {
        return Err("ROCr did not report its version (HSA_AMD_SYSTEM_INFO_BUILD_VERSION)".into());
    };
    let Some(version) = parse_rocr_build_id(id) else {
        return Err(format!("ROCr's build identifier {id:?} names no version"));
    };
    match KNOWN.iter().find(|(range, _)| range.contains(&version)) {
        Some((_, layout)) => Ok((version, *layout)),
        None => Err(format!(
            "ROCr {version} (build {id:?}) is not a version whose private queue layout libxhsa knows ({}-{}, ROCm 5.0-7.x)",
            KNOWN[0].0.start(),
            KNOWN[KNOWN.len() - 1].0.end()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocm_5_to_6_3_keep_the_pointer_after_amd_queue_t_and_6_4_to_7_after_amd_queue_v2_t() {
        for (id, want) in [
            ("\"1.5.0-local-build-unknown\"", AMD_QUEUE_V1),
            ("1.7.5-a-b", AMD_QUEUE_V1),
            ("1.11.0-x-y", AMD_QUEUE_V1),
            ("1.14.60300-x-y", AMD_QUEUE_V1),
            ("1.15.60400-x-y", AMD_QUEUE_V2),
            ("1.16.0-x-y", AMD_QUEUE_V2),
            ("1.18.70000-rocm-rel-7.0-1-abc", AMD_QUEUE_V2),
        ] {
            assert_eq!(shared_queue_layout(Some(id)).map(|(_, l)| l), Ok(want), "{id}");
        }
        assert_eq!(AMD_QUEUE_V2.core_queue_word, 2304);
        assert_eq!(AMD_QUEUE_V1.amd_queue_bytes, std::mem::size_of::<hsa_sys::hsa::amd_queue_t>());
    }

    #[test]
    fn other_versions_and_missing_identifiers_are_refused_with_the_reason() {
        for (id, why) in [
            (Some("1.19.70300-x-y"), "ROCr 1.19 (build \"1.19.70300-x-y\") is not a version whose private queue layout libxhsa knows (1.5-1.18, ROCm 5.0-7.x)"),
            (Some("1.4.0-x-y"), "ROCr 1.4 "),
            (Some("2.0.0-x-y"), "ROCr 2.0 "),
            (Some("garbage"), "names no version"),
            (None, "did not report its version"),
        ] {
            let e = shared_queue_layout(id).unwrap_err();
            assert!(e.contains(why), "{id:?}: {e}");
        }
    }
}
