//! RDMA facts beyond the port state: the PCIe placement and driver of each HCA, and the GPUs'
//! PCIe paths, which together give the rails (GPU r with its closest HCA).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where an HCA sits on PCIe and which driver stack runs it.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct RdmaPci {
    /// The HCA's PCI address ("0000:3b:00.0"): the target of `/sys/class/infiniband/<hca>/device`.
    pub bdf: String,
    /// The PCI addresses from the root port down to the HCA itself (the resolved sysfs path).
    pub path: Vec<String>,
    /// The PCI root complex ("pci0000:00").
    pub root: Option<String>,
    /// The kernel driver (`mlx5_core`).
    pub driver: Option<String>,
    /// `/sys/module/<driver>/version` (MLNX_OFED/DOCA drivers set it; inbox drivers do not).
    pub driver_version: Option<String>,
    /// `iommu_group/type`: "identity" (passthrough), "DMA" or "DMA-FQ" (translated); None
    /// without an IOMMU group.
    pub iommu: Option<String>,
}

/// One GPU's PCIe path, as the rail mapping needs it.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct GpuPciPath {
    /// NVML's index.
    pub gpu: u32,
    /// sysfs form of the GPU's address ("0000:3c:00.0").
    pub bdf: String,
    /// The PCI addresses from the root port down to the GPU.
    pub path: Vec<String>,
    /// The PCI root complex ("pci0000:00").
    pub root: Option<String>,
    /// `iommu_group/type` of the GPU, when it has a group.
    pub iommu: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IbFacts {
    pub devices: Vec<IbDevice>,
    /// Path of libibverbs when installed.
    pub verbs_library: Option<String>,
    pub error: Option<String>,
    /// The PCIe path of each GPU, for the rail mapping (read only when RDMA devices exist).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_pci_paths: Vec<GpuPciPath>,
    /// `/dev/infiniband` as this process sees it (a container may lack it); None when not looked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_infiniband: Option<Vec<String>>,
}

impl IbFacts {
    /// `(device, port)` of every ACTIVE port, in device order.
    pub fn active_ports(&self) -> Vec<(&str, u32)> {
        self.devices
            .iter()
            .flat_map(|d| {
                d.ports
                    .iter()
                    .filter(|p| p.is_active())
                    .map(move |p| (d.name.as_str(), p.port))
            })
            .collect()
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IbDevice {
    pub name: String,
    pub hca_type: Option<String>,
    pub fw_ver: Option<String>,
    pub ports: Vec<IbPort>,
    /// Where the HCA sits on PCIe, for the rail mapping and the driver stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<RdmaPci>,
    /// The verbs character device (`uverbs0`) sysfs names for this HCA, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uverbs: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IbPort {
    pub port: u32,
    /// "ACTIVE", "DOWN", "INIT", "ARMED" (sysfs `state` without the number).
    pub state: String,
    /// "LinkUp", "Disabled", "Polling" (sysfs `phys_state` without the number).
    pub phys_state: String,
    pub rate: Option<String>,
    pub rate_gbps: Option<f64>,
    /// "InfiniBand" or "Ethernet" (RoCE).
    pub link_layer: String,
    /// The net device this port maps to (ib0, ens1f0np0), if any.
    pub netdev: Option<String>,
    /// `counters/<name>` (IB PortCounters: some 4, 8 or 16 bits wide, saturating).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
    /// `hw_counters/<name>` the rail checks read (RoCE retransmissions and timeouts).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hw_counters: BTreeMap<String, u64>,
}

impl IbPort {
    pub fn is_active(&self) -> bool {
        self.state.eq_ignore_ascii_case("ACTIVE")
    }
}

/// One entry of a RoCE port's GID table.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct GidEntry {
    pub device: String,
    pub port: u32,
    pub index: u32,
    /// As sysfs writes it: `0000:0000:0000:0000:0000:ffff:0a02:0015`.
    pub gid: String,
    /// `gid_attrs/types/<index>`: "RoCE v2", "IB/RoCE v1".
    pub kind: Option<String>,
    /// `gid_attrs/ndevs/<index>`: the net device it belongs to.
    pub netdev: Option<String>,
}

// ----- cluster-level data (filled by `preflight cluster`) -----
