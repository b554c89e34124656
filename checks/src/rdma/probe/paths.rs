//! RDMA placement from sysfs: each HCA's PCIe path (through the `/sys/class/infiniband/<hca>/device`
//! link), its driver and IOMMU group, its verbs device, its port counters, and the GPUs' PCIe
//! paths. Read only on nodes that have RDMA devices, so a node without HCAs pays nothing.

use crate::core::{Gpu, GpuPciPath, RdmaPci};
use crate::infra::root::Root;
use std::collections::BTreeMap;
use std::path::Path;

/// Most counter files read per port directory.
const MAX_COUNTERS: usize = 64;

/// The `hw_counters` the rail checks read (RoCE retransmissions and transport errors).
pub const HW_COUNTERS: &[&str] = &[
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "req_transport_retries_exceeded",
    "roce_slow_restart",
    "implied_nak_seq_err",
];

/// The HCA's PCIe placement and driver; None when its `device` link does not resolve.
pub fn hca_pci(root: &Root, hca: &str) -> Option<RdmaPci> {
    let dev = format!("/sys/class/infiniband/{hca}/device");
    let (root_complex, path) = pci_path(root, &dev)?;
    if path.is_empty() {
        return None;
    }
    let driver = root.link_name(format!("{dev}/driver"));
    let driver_version = driver
        .as_ref()
        .and_then(|d| root.attr(format!("/sys/module/{d}/version")));
    Some(RdmaPci {
        bdf: path.last().cloned().unwrap_or_default(),
        path,
        root: root_complex,
        driver,
        driver_version,
        iommu: root.attr(format!("{dev}/iommu_group/type")),
    })
}

/// The verbs device sysfs lists under the HCA (`uverbs0`).
pub fn hca_uverbs(root: &Root, hca: &str) -> Option<String> {
    root.list(format!(
        "/sys/class/infiniband/{hca}/device/infiniband_verbs"
    ))
    .into_iter()
    .find(|n| n.starts_with("uverbs"))
}

/// Entries of `/dev/infiniband` as this process sees them (empty when absent).
pub fn dev_infiniband(root: &Root) -> Vec<String> {
    root.list("/dev/infiniband")
}

/// Numeric counter files of one directory, at most [`MAX_COUNTERS`]; `only` limits the names.
pub fn counters(root: &Root, dir: &str, only: Option<&[&str]>) -> BTreeMap<String, u64> {
    let names: Vec<String> = match only {
        Some(list) => list.iter().map(|s| s.to_string()).collect(),
        None => root.list(dir),
    };
    names
        .into_iter()
        .take(MAX_COUNTERS)
        .filter_map(|n| {
            let v = root.attr_num::<u64>(format!("{dir}/{n}"))?;
            Some((n, v))
        })
        .collect()
}

/// The PCIe path of each GPU NVML listed.
pub fn gpu_paths(root: &Root, gpus: &[Gpu]) -> Vec<GpuPciPath> {
    gpus.iter()
        .filter_map(|g| {
            let bdf = crate::gpu::probe::node::sysfs_bdf(&g.pci_bus_id)?;
            let dev = format!("/sys/bus/pci/devices/{bdf}");
            let (root_complex, path) = pci_path(root, &dev)?;
            if path.is_empty() {
                return None;
            }
            Some(GpuPciPath {
                gpu: g.index,
                iommu: root.attr(format!("{dev}/iommu_group/type")),
                bdf,
                path,
                root: root_complex,
            })
        })
        .collect()
}

/// The root complex and the PCI addresses from the root port down to the device, from the
/// resolved path of a sysfs device link (`/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0`).
fn pci_path(root: &Root, link: &str) -> Option<(Option<String>, Vec<String>)> {
    let base = std::fs::canonicalize(root.path("/")).ok()?;
    let real = std::fs::canonicalize(root.path(link)).ok()?;
    let inside = real.strip_prefix(&base).ok()?;
    Some(split_pci_path(inside))
}

/// `sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0` -> (`pci0000:00`, [`0000:00:01.0`, `0000:3b:00.0`]).
pub fn split_pci_path(p: &Path) -> (Option<String>, Vec<String>) {
    let mut root_complex = None;
    let mut path = Vec::new();
    for c in p.components() {
        let name = c.as_os_str().to_string_lossy();
        if name.starts_with("pci") && name.contains(':') {
            root_complex = Some(name.into_owned());
            path.clear();
        } else if is_bdf(&name) {
            path.push(name.into_owned());
        }
    }
    (root_complex, path)
}

/// "0000:3b:00.0"
pub fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.char_indices()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_sysfs_device_path_into_root_and_bridges() {
        let (rc, path) = split_pci_path(Path::new(
            "sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:04.0/0000:1b:00.0",
        ));
        assert_eq!(rc.as_deref(), Some("pci0000:17"));
        assert_eq!(
            path,
            [
                "0000:17:01.0",
                "0000:18:00.0",
                "0000:19:04.0",
                "0000:1b:00.0"
            ]
        );
        assert_eq!(
            split_pci_path(Path::new("sys/devices/virtual/net")).1.len(),
            0
        );
        assert!(!is_bdf("0000:3b:00"));
        assert!(!is_bdf("zzzz:3b:00.0"));
    }
}
