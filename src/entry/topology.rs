//! A GPU's CUs: how many, and in how many XCCs, which is what splitting it into CU partitions
//! needs ([`xhsa_model::partition::Split`]).
//!
//! The runtime says first (`HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT`; `HSA_AMD_AGENT_INFO_NUM_XCC`
//! from ROCm 6.0); KFD's topology (`/sys/class/kfd/kfd/topology/nodes/N/properties`) fills what
//! it does not. sysfs is the kernel's (not a shared place another user can write), and it is not
//! namespaced: a container with the GPU sees its host's KFD nodes, as ROCr does. Where neither
//! knows an XCC count (ROCm 5.x, a kernel before the multi-XCC parts) the GPU has one XCC.

/// `HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT` (hsa_ext_amd.h, ROCm 5.x-7.x).
pub(crate) const AGENT_INFO_CU_COUNT: u32 = 0xA002;
/// `HSA_AMD_AGENT_INFO_NUM_XCC` (hsa_ext_amd.h, ROCm 6.0 and later).
pub(crate) const AGENT_INFO_NUM_XCC: u32 = 0xA111;

use crate::path::packet_width::Occupancy;

/// A GPU's CUs from what the runtime said (`count`, `xccs`) and KFD node `node`'s topology.
pub(crate) fn gpu_cus(
    count: Option<u32>,
    xccs: Option<u32>,
    node: Option<u32>,
) -> Result<Cus, String> {
    let sysfs = || node.ok_or_else(|| "its KFD node is not known".to_string()).and_then(node_cus);
    match (count.filter(|&c| c > 0), xccs.filter(|&x| x > 0)) {
        (Some(count), Some(xccs)) => Ok(Cus { count, xccs }),
        (Some(count), None) => Ok(Cus { count, xccs: sysfs().map_or(1, |c| c.xccs) }),
        (None, _) => sysfs(),
    }
}

/// Where KFD lists its nodes.
const NODES: &str = "/sys/class/kfd/kfd/topology/nodes";

/// A GPU's CUs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cus {
    pub count: u32,
    pub xccs: u32,
}

/// Reads a node's properties file: its CUs, or why not.
pub(crate) fn node_cus(node: u32) -> Result<Cus, String> {
    let path = properties_path(node);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    parse(&text).ok_or_else(|| format!("{path}: no simd_count and simd_per_cu of a GPU"))
}

/// What a CU of KFD node `node` (of `cu_count` CUs) holds at once: its wave slots
/// (`simd_per_cu x max_waves_per_simd`), LDS (`lds_size_in_kb`) and wave size
/// (`wave_front_size`) from its topology, each as gfx90a and gfx942 have it where the node or
/// the file does not say ([`Occupancy::gfx9`]).
pub(crate) fn node_occupancy(node: Option<u32>, cu_count: u32) -> Occupancy {
    let text = node.and_then(|n| std::fs::read_to_string(properties_path(n)).ok());
    occupancy(text.as_deref().unwrap_or(""), cu_count)
}

/// [`node_occupancy`] from a `properties` file's text.
pub(crate) fn occupancy(text: &str, cu_count: u32) -> Occupancy {
    let value = |key: &str| property(text, key).filter(|&n| n > 0);
    let d = Occupancy::gfx9(cu_count);
    let waves = value("simd_per_cu").zip(value("max_waves_per_simd")).map(|(s, w)| s * w);
    Occupancy {
        cu_count,
        waves_per_cu: waves.unwrap_or(d.waves_per_cu),
        lds_bytes_per_cu: value("lds_size_in_kb").map_or(d.lds_bytes_per_cu, |k| k << 10),
        wave_size: value("wave_front_size").unwrap_or(d.wave_size),
    }
}

/// Node `node`'s `properties` file.
fn properties_path(node: u32) -> String {
    format!("{NODES}/{node}/properties")
}

/// The value of `key` in a `properties` file's text (`key value` lines), if it is a number.
fn property(text: &str, key: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse::<u32>().ok()).flatten()
    })
}

/// The CUs a `properties` file describes (`simd_count / simd_per_cu`, `num_xcc` or 1); `None`
/// for a node without SIMDs (a CPU) or a file without them.
pub(crate) fn parse(text: &str) -> Option<Cus> {
    let value = |key: &str| property(text, key);
    let simds = value("simd_count")?;
    let per_cu = value("simd_per_cu").filter(|&n| n > 0)?;
    let count = simds / per_cu;
    (count > 0).then(|| Cus { count, xccs: value("num_xcc").unwrap_or(1).max(1) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cu_holds_what_the_topology_says_else_what_gfx9_has() {
        let text = "simd_count 320\nmax_waves_per_simd 10\nlds_size_in_kb 128\nwave_front_size 32\nsimd_per_cu 4\n";
        let o = occupancy(text, 80);
        assert_eq!(
            o,
            Occupancy {
                cu_count: 80,
                waves_per_cu: 40,
                lds_bytes_per_cu: 128 << 10,
                wave_size: 32
            }
        );
        // Missing or zero fields: gfx90a's and gfx942's.
        assert_eq!(occupancy("simd_count 320\nlds_size_in_kb 0\n", 80), Occupancy::gfx9(80));
        assert_eq!(node_occupancy(None, 104), Occupancy::gfx9(104));
    }

    #[test]
    fn the_runtime_first_then_kfd_then_one_xcc() {
        assert_eq!(gpu_cus(Some(80), Some(4), None), Ok(Cus { count: 80, xccs: 4 }));
        // ROCm 5.x: no XCC count from the runtime, none from an unknown node: one XCC.
        assert_eq!(gpu_cus(Some(104), None, None), Ok(Cus { count: 104, xccs: 1 }));
        assert!(gpu_cus(None, None, None).is_err());
        assert!(gpu_cus(Some(0), Some(4), Some(u32::MAX)).unwrap_err().contains("properties"));
    }

    #[test]
    fn cus_and_xccs_from_a_properties_file() {
        let mi308x =
            "cpu_cores_count 0\nsimd_count 320\nmem_banks_count 1\nsimd_per_cu 4\nnum_xcc 4\n";
        assert_eq!(parse(mi308x), Some(Cus { count: 80, xccs: 4 }));
        let older = "simd_count 440\nsimd_per_cu 4\n";
        assert_eq!(parse(older), Some(Cus { count: 110, xccs: 1 }), "no num_xcc: one XCC");
        assert_eq!(parse("cpu_cores_count 16\nsimd_count 0\nsimd_per_cu 0\n"), None);
        assert_eq!(parse("simd_count x\nsimd_per_cu 4\n"), None);
        assert_eq!(parse(""), None);
    }
}
