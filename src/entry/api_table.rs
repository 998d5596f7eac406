//! The HSA API tables a tool library receives in `OnLoad`, and which of their entries libxhsa
//! may replace in a given runtime: every table is checked by version and size before a field is
//! touched. A table whose major version is unknown is left alone (and reported); a known table
//! that is shorter than a field's end does not get that field patched.
//!
//! Offsets are those of ROCr's `hsa_api_trace.h`: core table major 1 (ROCm 5.x) and 2 (ROCm 6.x)
//! have the same layout for the entries here; the AMD extension table was reordered in major 2
//! (ROCm 6.x), moving `hsa_amd_queue_set_priority_fn` from 312 to 328. A table's minor version
//! is its size in bytes.
#![forbid(unsafe_code)]

/// `ApiTableVersion` of a table: major and minor (= size in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableVersion {
    pub major: u32,
    pub minor: u32,
}

/// An entry libxhsa replaces (every function that takes a queue, and the signal stores that
/// ring doorbells; docs/libxhsa-shadow-queues.md §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    QueueCreate,
    QueueDestroy,
    QueueInactivate,
    LoadReadIndexScacquire,
    LoadReadIndexRelaxed,
    LoadWriteIndexScacquire,
    LoadWriteIndexRelaxed,
    StoreWriteIndexRelaxed,
    StoreWriteIndexScrelease,
    CasWriteIndexScacqScrel,
    CasWriteIndexScacquire,
    CasWriteIndexRelaxed,
    CasWriteIndexScrelease,
    AddWriteIndexScacqScrel,
    AddWriteIndexScacquire,
    AddWriteIndexRelaxed,
    AddWriteIndexScrelease,
    StoreReadIndexRelaxed,
    StoreReadIndexScrelease,
    SignalStoreRelaxed,
    SignalStoreScrelease,
    SignalSilentStoreRelaxed,
    SignalSilentStoreScrelease,
    ProfilingSetProfilerEnabled,
    QueueCuSetMask,
    QueueCuGetMask,
    QueueSetPriority,
    /// `hsa_amd_queue_get_info` (ROCm 6.x only: the AMD extension table of major 2).
    QueueGetInfo,
    /// `hsa_shut_down`.
    ShutDown,
    /// `hsa_code_object_reader_create_from_memory` (which library a code object loaded from
    /// memory belongs to, for the whitelist).
    CodeObjectReaderFromMemory,
}

impl Hook {
    /// Every hook, in declaration order (`ALL[h as usize] == h`).
    pub const ALL: [Hook; 30] = [
        Hook::QueueCreate,
        Hook::QueueDestroy,
        Hook::QueueInactivate,
        Hook::LoadReadIndexScacquire,
        Hook::LoadReadIndexRelaxed,
        Hook::LoadWriteIndexScacquire,
        Hook::LoadWriteIndexRelaxed,
        Hook::StoreWriteIndexRelaxed,
        Hook::StoreWriteIndexScrelease,
        Hook::CasWriteIndexScacqScrel,
        Hook::CasWriteIndexScacquire,
        Hook::CasWriteIndexRelaxed,
        Hook::CasWriteIndexScrelease,
        Hook::AddWriteIndexScacqScrel,
        Hook::AddWriteIndexScacquire,
        Hook::AddWriteIndexRelaxed,
        Hook::AddWriteIndexScrelease,
        Hook::StoreReadIndexRelaxed,
        Hook::StoreReadIndexScrelease,
        Hook::SignalStoreRelaxed,
        Hook::SignalStoreScrelease,
        Hook::SignalSilentStoreRelaxed,
        Hook::SignalSilentStoreScrelease,
        Hook::ProfilingSetProfilerEnabled,
        Hook::QueueCuSetMask,
        Hook::QueueCuGetMask,
        Hook::QueueSetPriority,
        Hook::QueueGetInfo,
        Hook::ShutDown,
        Hook::CodeObjectReaderFromMemory,
    ];
}

impl Hook {
    /// The C name of the hook's field in ROCr's `hsa_api_trace.h` (`CoreApiTable` or
    /// `AmdExtTable`).
    pub const fn c_field(self) -> &'static str {
        match self {
            Hook::QueueCreate => "hsa_queue_create_fn",
            Hook::QueueDestroy => "hsa_queue_destroy_fn",
            Hook::QueueInactivate => "hsa_queue_inactivate_fn",
            Hook::LoadReadIndexScacquire => "hsa_queue_load_read_index_scacquire_fn",
            Hook::LoadReadIndexRelaxed => "hsa_queue_load_read_index_relaxed_fn",
            Hook::LoadWriteIndexScacquire => "hsa_queue_load_write_index_scacquire_fn",
            Hook::LoadWriteIndexRelaxed => "hsa_queue_load_write_index_relaxed_fn",
            Hook::StoreWriteIndexRelaxed => "hsa_queue_store_write_index_relaxed_fn",
            Hook::StoreWriteIndexScrelease => "hsa_queue_store_write_index_screlease_fn",
            Hook::CasWriteIndexScacqScrel => "hsa_queue_cas_write_index_scacq_screl_fn",
            Hook::CasWriteIndexScacquire => "hsa_queue_cas_write_index_scacquire_fn",
            Hook::CasWriteIndexRelaxed => "hsa_queue_cas_write_index_relaxed_fn",
            Hook::CasWriteIndexScrelease => "hsa_queue_cas_write_index_screlease_fn",
            Hook::AddWriteIndexScacqScrel => "hsa_queue_add_write_index_scacq_screl_fn",
            Hook::AddWriteIndexScacquire => "hsa_queue_add_write_index_scacquire_fn",
            Hook::AddWriteIndexRelaxed => "hsa_queue_add_write_index_relaxed_fn",
            Hook::AddWriteIndexScrelease => "hsa_queue_add_write_index_screlease_fn",
            Hook::StoreReadIndexRelaxed => "hsa_queue_store_read_index_relaxed_fn",
            Hook::StoreReadIndexScrelease => "hsa_queue_store_read_index_screlease_fn",
            Hook::SignalStoreRelaxed => "hsa_signal_store_relaxed_fn",
            Hook::SignalStoreScrelease => "hsa_signal_store_screlease_fn",
            Hook::SignalSilentStoreRelaxed => "hsa_signal_silent_store_relaxed_fn",
            Hook::SignalSilentStoreScrelease => "hsa_signal_silent_store_screlease_fn",
            Hook::ProfilingSetProfilerEnabled => "hsa_amd_profiling_set_profiler_enabled_fn",
            Hook::QueueCuSetMask => "hsa_amd_queue_cu_set_mask_fn",
            Hook::QueueCuGetMask => "hsa_amd_queue_cu_get_mask_fn",
            Hook::QueueSetPriority => "hsa_amd_queue_set_priority_fn",
            Hook::QueueGetInfo => "hsa_amd_queue_get_info_fn",
            Hook::ShutDown => "hsa_shut_down_fn",
            Hook::CodeObjectReaderFromMemory => "hsa_code_object_reader_create_from_memory_fn",
        }
    }
}

/// Which table an entry lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Core,
    AmdExt,
}

/// A field to replace: the hook and its byte offset in its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patch {
    pub table: Table,
    pub hook: Hook,
    pub offset: usize,
}

const FN_PTR: usize = 8;

/// The core-table entries, identical in major 1 (ROCm 5.x) and 2 (ROCm 6.x).
const CORE_FIELDS: &[(Hook, usize)] = &[
    (Hook::ShutDown, 24),
    (Hook::QueueCreate, 72),
    (Hook::QueueDestroy, 88),
    (Hook::QueueInactivate, 96),
    (Hook::LoadReadIndexScacquire, 104),
    (Hook::LoadReadIndexRelaxed, 112),
    (Hook::LoadWriteIndexScacquire, 120),
    (Hook::LoadWriteIndexRelaxed, 128),
    (Hook::StoreWriteIndexRelaxed, 136),
    (Hook::StoreWriteIndexScrelease, 144),
    (Hook::CasWriteIndexScacqScrel, 152),
    (Hook::CasWriteIndexScacquire, 160),
    (Hook::CasWriteIndexRelaxed, 168),
    (Hook::CasWriteIndexScrelease, 176),
    (Hook::AddWriteIndexScacqScrel, 184),
    (Hook::AddWriteIndexScacquire, 192),
    (Hook::AddWriteIndexRelaxed, 200),
    (Hook::AddWriteIndexScrelease, 208),
    (Hook::StoreReadIndexRelaxed, 216),
    (Hook::StoreReadIndexScrelease, 224),
    (Hook::SignalStoreRelaxed, 344),
    (Hook::SignalStoreScrelease, 352),
    (Hook::SignalSilentStoreRelaxed, 832),
    (Hook::SignalSilentStoreScrelease, 840),
    (Hook::CodeObjectReaderFromMemory, 944),
];

/// Known core-table layouts by major version (ROCm 5.x: 1, ROCm 6.x: 2).
pub const CORE_LAYOUTS: &[(u32, &[(Hook, usize)])] = &[(1, CORE_FIELDS), (2, CORE_FIELDS)];

/// Known AMD-extension-table layouts by major version (major 2, ROCm 6.x, reordered the
/// entries after `hsa_amd_queue_cu_set_mask`).
pub const AMD_LAYOUTS: &[(u32, &[(Hook, usize)])] = &[
    (
        1,
        &[
            (Hook::ProfilingSetProfilerEnabled, 32),
            (Hook::QueueCuSetMask, 96),
            (Hook::QueueSetPriority, 312),
            (Hook::QueueCuGetMask, 392),
        ],
    ),
    // hsa_amd_queue_get_info_fn at 560: offsetof in ROCm 6.4.3's hsa_api_trace.h (table 592 bytes).
    (
        2,
        &[
            (Hook::ProfilingSetProfilerEnabled, 32),
            (Hook::QueueCuSetMask, 96),
            (Hook::QueueSetPriority, 328),
            (Hook::QueueCuGetMask, 432),
            (Hook::QueueGetInfo, 560),
        ],
    ),
];

/// What to patch, and what to report about the tables that are not (fully) patched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub patches: Vec<Patch>,
    pub notes: Vec<String>,
}

fn plan_table(
    plan: &mut Plan,
    table: Table,
    name: &str,
    v: Option<TableVersion>,
    layouts: &[(u32, &[(Hook, usize)])],
) {
    let Some(v) = v else {
        plan.notes
            .push(format!("the runtime gave no {name} table; its entries are not intercepted"));
        return;
    };
    let Some((_, fields)) = layouts.iter().find(|(m, _)| *m == v.major) else {
        let known: Vec<String> = layouts.iter().map(|(m, _)| m.to_string()).collect();
        plan.notes.push(format!(
            "{name} table version {}.{} is unknown (known majors: {}); it is left untouched",
            v.major,
            v.minor,
            known.join(", ")
        ));
        return;
    };
    for &(hook, offset) in fields.iter() {
        if offset + FN_PTR <= v.minor as usize {
            plan.patches.push(Patch { table, hook, offset });
        } else {
            plan.notes.push(format!(
                "{name} table {}.{} is too short for {hook:?} (offset {offset}); not patched",
                v.major, v.minor
            ));
        }
    }
}

/// The patches for a runtime whose core and AMD-extension tables have these versions.
pub fn plan(core: Option<TableVersion>, amd: Option<TableVersion>) -> Plan {
    let mut p = Plan::default();
    plan_table(&mut p, Table::Core, "core API", core, CORE_LAYOUTS);
    plan_table(&mut p, Table::AmdExt, "AMD extension", amd, AMD_LAYOUTS);
    p
}

/// ROCr's own version (its library version, `MAJOR.MINOR`: `libhsa-runtime64.so.1.14.60200` is
/// 1.14), as ROCr reports it at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RocrVersion {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for RocrVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The version in ROCr's build identifier, the string `hsa_system_get_info` returns for
/// `HSA_AMD_SYSTEM_INFO_BUILD_VERSION` (0x200, present since ROCm 5.0): ROCr's CMake makes it
/// `MAJOR.MINOR.COMMITS-JOB-HASH` (`ROCR_BUILD_ID`, stringified once more by `STRING()`, so the
/// string itself carries double quotes: Debian's 5.2.3 returns `"1.5.0-local-build-unknown"`
/// quotes included). `None` when it does not start with `MAJOR.MINOR.`.
pub fn parse_rocr_build_id(id: &str) -> Option<RocrVersion> {
    let mut parts = id.trim().trim_matches('"').splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    // The third part (commit count, then the job and hash) must be there: a bare "1.5" is not
    // a build identifier.
    parts.next()?;
    Some(RocrVersion { major, minor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsa_sys::hsa::{AmdExtTable, CoreApiTable};
    use std::mem::{offset_of, size_of};

    #[test]
    fn rocr_5_2_tables_are_patched_where_the_headers_say() {
        // Debian's ROCr 5.2 passes core 1.1016 and AMD extension 1.400.
        let p = plan(
            Some(TableVersion { major: 1, minor: 1016 }),
            Some(TableVersion { major: 1, minor: 400 }),
        );
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // Every hook but hsa_amd_queue_get_info, which 5.x's AMD extension table does not have.
        assert_eq!(p.patches.len(), Hook::ALL.len() - 1);
        assert!(p.patches.iter().all(|x| x.hook != Hook::QueueGetInfo));
        for (i, h) in Hook::ALL.iter().enumerate() {
            assert_eq!(*h as usize, i);
        }
        if hsa_sys::hsa::HSA_CORE_API_TABLE_MAJOR_VERSION == 1 {
            // The transcribed offsets agree with the headers this crate was built against.
            let off = |h| p.patches.iter().find(|x| x.hook == h).unwrap().offset;
            use Hook::*;
            let core = [
                (ShutDown, offset_of!(CoreApiTable, hsa_shut_down_fn)),
                (QueueCreate, offset_of!(CoreApiTable, hsa_queue_create_fn)),
                (QueueDestroy, offset_of!(CoreApiTable, hsa_queue_destroy_fn)),
                (QueueInactivate, offset_of!(CoreApiTable, hsa_queue_inactivate_fn)),
                (
                    LoadReadIndexScacquire,
                    offset_of!(CoreApiTable, hsa_queue_load_read_index_scacquire_fn),
                ),
                (
                    LoadReadIndexRelaxed,
                    offset_of!(CoreApiTable, hsa_queue_load_read_index_relaxed_fn),
                ),
                (
                    LoadWriteIndexScacquire,
                    offset_of!(CoreApiTable, hsa_queue_load_write_index_scacquire_fn),
                ),
                (
                    LoadWriteIndexRelaxed,
                    offset_of!(CoreApiTable, hsa_queue_load_write_index_relaxed_fn),
                ),
                (
                    StoreWriteIndexRelaxed,
                    offset_of!(CoreApiTable, hsa_queue_store_write_index_relaxed_fn),
                ),
                (
                    StoreWriteIndexScrelease,
                    offset_of!(CoreApiTable, hsa_queue_store_write_index_screlease_fn),
                ),
                (
                    CasWriteIndexScacqScrel,
                    offset_of!(CoreApiTable, hsa_queue_cas_write_index_scacq_screl_fn),
                ),
                (
                    CasWriteIndexScacquire,
                    offset_of!(CoreApiTable, hsa_queue_cas_write_index_scacquire_fn),
                ),
                (
                    CasWriteIndexRelaxed,
                    offset_of!(CoreApiTable, hsa_queue_cas_write_index_relaxed_fn),
                ),
                (
                    CasWriteIndexScrelease,
                    offset_of!(CoreApiTable, hsa_queue_cas_write_index_screlease_fn),
                ),
                (
                    AddWriteIndexScacqScrel,
                    offset_of!(CoreApiTable, hsa_queue_add_write_index_scacq_screl_fn),
                ),
                (
                    AddWriteIndexScacquire,
                    offset_of!(CoreApiTable, hsa_queue_add_write_index_scacquire_fn),
                ),
                (
                    AddWriteIndexRelaxed,
                    offset_of!(CoreApiTable, hsa_queue_add_write_index_relaxed_fn),
                ),
                (
                    AddWriteIndexScrelease,
                    offset_of!(CoreApiTable, hsa_queue_add_write_index_screlease_fn),
                ),
                (
                    StoreReadIndexRelaxed,
                    offset_of!(CoreApiTable, hsa_queue_store_read_index_relaxed_fn),
                ),
                (
                    StoreReadIndexScrelease,
                    offset_of!(CoreApiTable, hsa_queue_store_read_index_screlease_fn),
                ),
                (SignalStoreRelaxed, offset_of!(CoreApiTable, hsa_signal_store_relaxed_fn)),
                (SignalStoreScrelease, offset_of!(CoreApiTable, hsa_signal_store_screlease_fn)),
                (
                    SignalSilentStoreRelaxed,
                    offset_of!(CoreApiTable, hsa_signal_silent_store_relaxed_fn),
                ),
                (
                    SignalSilentStoreScrelease,
                    offset_of!(CoreApiTable, hsa_signal_silent_store_screlease_fn),
                ),
                (
                    ProfilingSetProfilerEnabled,
                    offset_of!(AmdExtTable, hsa_amd_profiling_set_profiler_enabled_fn),
                ),
                (QueueCuSetMask, offset_of!(AmdExtTable, hsa_amd_queue_cu_set_mask_fn)),
                (QueueCuGetMask, offset_of!(AmdExtTable, hsa_amd_queue_cu_get_mask_fn)),
                (QueueSetPriority, offset_of!(AmdExtTable, hsa_amd_queue_set_priority_fn)),
            ];
            for (h, o) in core {
                assert_eq!(off(h), o, "{h:?}");
            }
            assert_eq!(size_of::<CoreApiTable>(), 1016);
        }
    }

    #[test]
    fn rocm_6_tables_use_the_reordered_amd_layout() {
        // ROCm 6.2's hsa_api_trace.h: core major 2 (same offsets), AMD extension major 2 (576 bytes,
        // hsa_amd_queue_set_priority_fn at 328).
        let p = plan(
            Some(TableVersion { major: 2, minor: 1024 }),
            Some(TableVersion { major: 2, minor: 576 }),
        );
        assert!(p.notes.is_empty());
        let pr = p.patches.iter().find(|x| x.hook == Hook::QueueSetPriority).unwrap();
        assert_eq!((pr.table, pr.offset), (Table::AmdExt, 328));
        let gm = p.patches.iter().find(|x| x.hook == Hook::QueueCuGetMask).unwrap();
        assert_eq!(gm.offset, 432);
        // 576 bytes hold hsa_amd_queue_get_info_fn (560..568); 6.4.3's table is 592.
        let gi = p.patches.iter().find(|x| x.hook == Hook::QueueGetInfo).unwrap();
        assert_eq!((gi.table, gi.offset), (Table::AmdExt, 560));
        let p = plan(
            Some(TableVersion { major: 2, minor: 1024 }),
            Some(TableVersion { major: 2, minor: 560 }),
        );
        assert!(
            p.patches.iter().all(|x| x.hook != Hook::QueueGetInfo)
                && p.notes.iter().any(|n| n.contains("too short for QueueGetInfo")),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn unknown_or_short_tables_are_left_alone_and_reported() {
        let p = plan(
            Some(TableVersion { major: 3, minor: 2048 }),
            Some(TableVersion { major: 1, minor: 300 }),
        );
        // Only the entries inside the short AMD table: the profiler and CU-mask hooks.
        assert_eq!(
            p.patches.iter().map(|x| x.hook).collect::<Vec<_>>(),
            vec![Hook::ProfilingSetProfilerEnabled, Hook::QueueCuSetMask]
        );
        assert!(p.notes[0].contains("core API table version 3.2048 is unknown"), "{:?}", p.notes);
        assert!(p.notes[1].contains("too short for QueueSetPriority"), "{:?}", p.notes);
        assert!(p.notes[2].contains("too short for QueueCuGetMask"), "{:?}", p.notes);
        let p = plan(None, None);
        assert_eq!(p.notes.len(), 2);
    }

    #[test]
    fn a_longer_table_of_a_known_major_is_patched() {
        let p = plan(Some(TableVersion { major: 1, minor: 4096 }), None);
        assert_eq!(p.patches.len(), CORE_FIELDS.len());
    }

    #[test]
    fn rocr_build_ids_are_parsed() {
        let v = |major, minor| Some(RocrVersion { major, minor });
        assert_eq!(
            parse_rocr_build_id("\"1.5.0-local-build-unknown\""),
            v(1, 5),
            "Debian's 5.2.3, quotes included"
        );
        assert_eq!(parse_rocr_build_id("1.5.0-local-build-unknown"), v(1, 5));
        assert_eq!(parse_rocr_build_id("1.14.60200-rocm-rel-6.2-116-df7549038b45"), v(1, 14));
        assert_eq!(parse_rocr_build_id(" 1.15.0-local-build-abc-dirty"), v(1, 15));
        for bad in ["", "1", "1.5", "rocm-6.2", "1.x.0", "v1.5.0", "ROCR BUILD ID: 1.5.0"] {
            assert_eq!(parse_rocr_build_id(bad), None, "{bad:?}");
        }
    }
}
