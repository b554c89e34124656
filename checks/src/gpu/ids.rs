//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const NVML: FindingId = FindingId::new("gpu.nvml");
pub const COUNT: FindingId = FindingId::new("gpu.count");
pub const VISIBLE_DEVICES: FindingId = FindingId::new("gpu.visible-devices");
pub const IN_USE: FindingId = FindingId::new("gpu.in-use");
pub const MIG: FindingId = FindingId::new("gpu.mig");
pub const PCIE_LINK: FindingId = FindingId::new("gpu.pcie-link");
pub const PCIE_REPLAY: FindingId = FindingId::new("gpu.pcie-replay");
pub const XID: FindingId = FindingId::new("gpu.xid");
pub const ECC: FindingId = FindingId::new("gpu.ecc");
pub const ROW_REMAP: FindingId = FindingId::new("gpu.row-remap");
pub const RETIRED_PAGES: FindingId = FindingId::new("gpu.retired-pages");
pub const NVLINK: FindingId = FindingId::new("gpu.nvlink");
pub const FABRIC_MANAGER: FindingId = FindingId::new("gpu.fabric-manager");
pub const PEERMEM: FindingId = FindingId::new("gpu.peermem");
pub const CLOCKS: FindingId = FindingId::new("gpu.clocks");
pub const PERSISTENCE: FindingId = FindingId::new("gpu.persistence");
pub const BANDWIDTH: FindingId = FindingId::new("gpu.bandwidth");
pub const COMPUTE_SLOW: FindingId = FindingId::new("gpu.compute-slow");
pub const COMPUTE_WRONG: FindingId = FindingId::new("gpu.compute-wrong");
pub const COMPUTE_THROTTLE: FindingId = FindingId::new("gpu.compute-throttle");
pub const PCIE_ACS: FindingId = FindingId::new("pcie.acs");
pub const GPUS: FindingId = FindingId::new("cluster.gpus");
pub const GPU_HEALTH: FindingId = FindingId::new("cluster.gpu-health");
