//! GPU health facts (issue 22): per GPU what NVML says about its PCIe link, memory, NVLink,
//! clocks and fabric; per node the kernel log's XIDs, NVSwitch and fabric manager, the
//! GPUDirect RDMA module, ACS on PCIe bridges and the measured copy bandwidth.
//!
//! Every field is optional or empty by default, so facts of older releases still load; a
//! query NVML refused lands in `unsupported` with its reason instead of a value.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What NVML reported about one GPU's health. Absent in facts of older releases.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuHealth {
    /// "Hopper", "Ampere", "Volta" ... (NVML's architecture), when known.
    pub architecture: Option<String>,
    /// Current and maximum PCIe link width and generation.
    pub pcie: Option<PcieLink>,
    /// PCIe replay counter (link-level retransmissions since the driver loaded).
    pub pcie_replay_counter: Option<u64>,
    /// Performance state: 0 for P0 (full speed) ... 15; idle GPUs sit at P8 and above.
    pub performance_state: Option<u32>,
    /// ECC mode currently enabled.
    pub ecc_enabled: Option<bool>,
    /// Volatile (since the driver loaded) uncorrectable ECC errors.
    pub ecc_volatile_uncorrected: Option<u64>,
    /// Volatile correctable ECC errors.
    pub ecc_volatile_corrected: Option<u64>,
    /// Row remapping (Ampere and newer).
    pub remapped_rows: Option<RemappedRows>,
    /// Page retirement (pre-Ampere: Volta, Turing).
    pub retired_pages: Option<RetiredPages>,
    /// NVLink state per link, in link order (empty on GPUs without NVLink).
    pub nvlinks: Vec<NvLinkState>,
    /// Active clock event (throttle) reasons, by name: "hw_slowdown", "sw_power_cap" ...
    pub clock_event_reasons: Option<Vec<String>>,
    pub persistence_mode: Option<bool>,
    /// GB200-class fabric state from NVML (`nvmlDeviceGetGpuFabricInfoV`).
    pub fabric: Option<GpuFabric>,
    /// Queries that failed or are not supported on this GPU: query name -> reason.
    pub unsupported: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct PcieLink {
    pub current_width: u32,
    pub max_width: u32,
    pub current_gen: u32,
    pub max_gen: u32,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    /// A remap waits for a GPU reset.
    pub pending: bool,
    /// A remap failed: the GPU has run out of spare rows.
    pub failed: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct RetiredPages {
    pub single_bit: u32,
    pub double_bit: u32,
    /// Pages wait for a reboot (or reset) to be retired.
    pub pending: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct NvLinkState {
    pub link: u32,
    pub active: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct GpuFabric {
    /// "not_supported", "not_started", "in_progress", "completed".
    pub state: String,
    /// NVML's status of the registration ("Success" or the error).
    pub status: String,
    /// The fabric reports degraded bandwidth.
    pub degraded_bandwidth: Option<bool>,
}

/// Node-level GPU health facts. Absent in facts of older releases and on nodes without GPUs.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuNodeHealth {
    pub kernel_log: KernelLog,
    /// NVSwitch devices found (HGX/DGX baseboards need the fabric manager).
    pub nvswitches: u32,
    /// The fabric manager daemon (`nv-fabricmanager`) is running; None when not looked for.
    pub fabric_manager_running: Option<bool>,
    /// The GPUDirect RDMA module loaded: "nvidia_peermem" or "nv_peer_mem"; None when neither.
    pub peermem_module: Option<String>,
    /// The NVIDIA kernel module is the open one (`/proc/driver/nvidia/version` says "Open Kernel
    /// Module"), which with Linux 5.12+ lets NCCL use DMA-BUF for GPUDirect RDMA; None when unread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvidia_open_module: Option<bool>,
    /// Running under a hypervisor (the `hypervisor` CPU flag): ACS is the host's business.
    pub virtualized: Option<bool>,
    /// ACS state of the PCIe bridges above the GPUs and RDMA NICs.
    pub acs: AcsFacts,
    /// Copy bandwidth measured with CUDA (`preflight check`); empty when not measured.
    pub bandwidth: Vec<GpuBandwidth>,
    /// Why the bandwidth was not measured, when it was not.
    pub bandwidth_skipped: Option<String>,
}

/// XIDs the kernel log holds.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct KernelLog {
    /// Where it was read: "/dev/kmsg", "journalctl -k", "dmesg".
    pub source: Option<String>,
    /// Why it could not be read (no permission, no tool), when it could not.
    pub error: Option<String>,
    /// Oldest record's age in seconds: how far back the log reaches.
    pub covers_s: Option<u64>,
    /// The read stopped at a bound (bytes or time): older records were not seen.
    pub truncated: bool,
    pub xids: Vec<XidEvent>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct XidEvent {
    pub xid: u32,
    /// The PCI address the driver named ("0000:3b:00").
    pub pci: String,
    /// Seconds before the probe, when the record had a timestamp.
    pub age_s: Option<u64>,
    /// The kernel's line (cut at 300 characters).
    pub message: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct AcsFacts {
    /// Why ACS could not be judged (extended config space needs root ...), when it could not.
    pub error: Option<String>,
    /// Bridges above a GPU or NIC, with their ACS control bits.
    pub bridges: Vec<AcsBridge>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct AcsBridge {
    /// PCI address of the bridge ("0000:00:01.0").
    pub bridge: String,
    /// The GPU or NIC below it ("0000:3b:00.0").
    pub below: String,
    /// ACS Source Validation enabled (lspci: `ACSCtl: SrcValid+`).
    pub src_valid: bool,
    /// The ACS control register, as read.
    pub ctl: u16,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuBandwidth {
    /// "h2d", "d2h" (pinned host memory) or "p2p".
    pub kind: String,
    /// GPU index (the source for p2p).
    pub gpu: u32,
    /// Destination GPU for p2p.
    pub peer: Option<u32>,
    /// GB/s (1e9 bytes/s).
    pub gb_s: f64,
    pub bytes: u64,
    /// PCI address of the measured GPU as CUDA saw it ("0000:3b:00.0"), to match NVML's index
    /// whatever CUDA's device order.
    pub pci_bus_id: Option<String>,
}
