//! RDMA facts beyond the port state: the PCIe placement and driver of each HCA, and the GPUs'
//! PCIe paths, which together give the rails (GPU r with its closest HCA).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
