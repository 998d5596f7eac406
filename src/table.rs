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

/// An entry libxhsa replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    QueueCreate,
    QueueDestroy,
    SignalStoreRelaxed,
    SignalStoreScrelease,
    QueueSetPriority,
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

/// Known core-table layouts by major version (ROCm 5.x: 1, ROCm 6.x: 2).
pub const CORE_LAYOUTS: &[(u32, &[(Hook, usize)])] = &[
    (1, &[(Hook::QueueCreate, 72), (Hook::QueueDestroy, 88), (Hook::SignalStoreRelaxed, 344), (Hook::SignalStoreScrelease, 352)]),
    (2, &[(Hook::QueueCreate, 72), (Hook::QueueDestroy, 88), (Hook::SignalStoreRelaxed, 344), (Hook::SignalStoreScrelease, 352)]),
];

/// Known AMD-extension-table layouts by major version.
pub const AMD_LAYOUTS: &[(u32, &[(Hook, usize)])] = &[(1, &[(Hook::QueueSetPriority, 312)]), (2, &[(Hook::QueueSetPriority, 328)])];

/// What to patch, and what to report about the tables that are not (fully) patched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub patches: Vec<Patch>,
    pub notes: Vec<String>,
}

fn plan_table(plan: &mut Plan, table: Table, name: &str, v: Option<TableVersion>, layouts: &[(u32, &[(Hook, usize)])]) {
    let Some(v) = v else {
        plan.notes.push(format!("the runtime gave no {name} table; its entries are not intercepted"));
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
            plan.notes.push(format!("{name} table {}.{} is too short for {hook:?} (offset {offset}); not patched", v.major, v.minor));
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

#[cfg(test)]
mod tests {
    use super::*;
    use hsa_sys::hsa::{AmdExtTable, CoreApiTable};
    use std::mem::{offset_of, size_of};

    #[test]
    fn rocr_5_2_tables_are_patched_where_the_headers_say() {
        // Debian's ROCr 5.2 passes core 1.1016 and AMD extension 1.400.
        let p = plan(Some(TableVersion { major: 1, minor: 1016 }), Some(TableVersion { major: 1, minor: 400 }));
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        assert_eq!(p.patches.len(), 5);
        if hsa_sys::hsa::HSA_CORE_API_TABLE_MAJOR_VERSION == 1 {
            // The transcribed offsets agree with the headers this crate was built against.
            let off = |h| p.patches.iter().find(|x| x.hook == h).unwrap().offset;
            assert_eq!(off(Hook::QueueCreate), offset_of!(CoreApiTable, hsa_queue_create_fn));
            assert_eq!(off(Hook::QueueDestroy), offset_of!(CoreApiTable, hsa_queue_destroy_fn));
            assert_eq!(off(Hook::SignalStoreRelaxed), offset_of!(CoreApiTable, hsa_signal_store_relaxed_fn));
            assert_eq!(off(Hook::SignalStoreScrelease), offset_of!(CoreApiTable, hsa_signal_store_screlease_fn));
            assert_eq!(off(Hook::QueueSetPriority), offset_of!(AmdExtTable, hsa_amd_queue_set_priority_fn));
            assert_eq!(size_of::<CoreApiTable>(), 1016);
        }
    }

    #[test]
    fn rocm_6_tables_use_the_reordered_amd_layout() {
        // ROCm 6.2's hsa_api_trace.h: core major 2 (same offsets), AMD extension major 2 (576 bytes,
        // hsa_amd_queue_set_priority_fn at 328).
        let p = plan(Some(TableVersion { major: 2, minor: 1024 }), Some(TableVersion { major: 2, minor: 576 }));
        assert!(p.notes.is_empty());
        let pr = p.patches.iter().find(|x| x.hook == Hook::QueueSetPriority).unwrap();
        assert_eq!((pr.table, pr.offset), (Table::AmdExt, 328));
    }

    #[test]
    fn unknown_or_short_tables_are_left_alone_and_reported() {
        let p = plan(Some(TableVersion { major: 3, minor: 2048 }), Some(TableVersion { major: 1, minor: 300 }));
        assert!(p.patches.is_empty(), "{:?}", p.patches);
        assert!(p.notes[0].contains("core API table version 3.2048 is unknown"), "{:?}", p.notes);
        assert!(p.notes[1].contains("too short for QueueSetPriority"), "{:?}", p.notes);
        let p = plan(None, None);
        assert_eq!(p.notes.len(), 2);
    }

    #[test]
    fn a_longer_table_of_a_known_major_is_patched() {
        let p = plan(Some(TableVersion { major: 1, minor: 4096 }), None);
        assert_eq!(p.patches.len(), 4);
    }
}
