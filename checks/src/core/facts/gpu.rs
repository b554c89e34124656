//! GPU facts: the GPUs NVML lists with their processes, and what the GEMM test measured on them
//! (per GPU the matrix-multiply rate per data type, the result's check against the exact product,
//! the clocks, power and temperature while it ran, and the timeline of a sustained load).
//!
//! Every field is optional or empty by default, so facts of older releases still load.

use super::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuFacts {
    /// Why NVML could not be used (no driver, library missing); None when it loaded.
    pub nvml_error: Option<String>,
    pub driver_version: Option<String>,
    /// CUDA version the driver supports, "12.8".
    pub cuda_driver_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Node-level GPU health (kernel log XIDs, fabric manager, peermem, ACS, bandwidth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_health: Option<GpuNodeHealth>,
    /// Matrix-multiply speed and exactness per GPU (`check --thorough`, `--gemm`, `--burn`,
    /// and every node of `cluster`); absent when not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute: Option<GpuCompute>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub processes: Vec<GpuProcess>,
    pub mig_enabled: Option<bool>,
    /// UUIDs of this GPU's MIG devices ("MIG-..."), when MIG is enabled.
    pub mig_devices: Vec<String>,
    /// Why some fields are missing, when a per-GPU query failed.
    pub error: Option<String>,
    /// PCIe, memory, NVLink, clocks and fabric as NVML reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<GpuHealth>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_bytes: Option<u64>,
    pub command: Option<String>,
}

/// What the GEMM test measured on one node. Absent when it did not run (not asked for, or
/// facts of an older release); `skipped` says why when it was asked for and could not run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuCompute {
    /// Why nothing was measured (no GPU, no libcublas, the worker failed or timed out).
    pub skipped: Option<String>,
    /// The worker stopped early (timed out, crashed, printed garbage): what it reported before
    /// is kept.
    pub error: Option<String>,
    /// The cuBLAS version the worker loaded (`cublasGetVersion`: 120803 for 12.8.3).
    pub cublas_version: Option<u32>,
    /// Where that libcublas was found.
    pub cublas_library: Option<String>,
    /// Square problem size of the timed multiply (m = n = k).
    pub size: u32,
    /// Square problem size of the checked multiply.
    pub check_size: u32,
    pub gpus: Vec<GpuGemm>,
    /// The sustained load (`--burn SECONDS`, `--thorough`); absent when not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burn: Option<GemmBurn>,
}

/// One GPU's results.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuGemm {
    /// NVML's index (as every other GPU fact), mapped from the CUDA ordinal by PCI address.
    pub gpu: u32,
    pub pci_bus_id: Option<String>,
    /// NVML's name, "NVIDIA H100 80GB HBM3".
    pub model: String,
    pub uuid: Option<String>,
    /// CUDA compute capability, "9.0".
    pub compute_capability: Option<String>,
    /// Why this GPU measured nothing (it failed on its own while others ran).
    pub error: Option<String>,
    pub rates: Vec<GemmRate>,
    /// Data types not measured on this GPU, with why ("fp8: libcublasLt not found").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub types_skipped: Vec<String>,
    /// Checked multiplies, one per data type that has an exact check.
    pub checks: Vec<GemmCheck>,
    /// Clocks, power and temperature read right after the timed multiplies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<GpuLoadState>,
}

/// The measured rate of one data type.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GemmRate {
    /// "bf16", "fp16", "tf32", "fp32", "fp8".
    pub dtype: String,
    /// Dense TFLOP/s: 2·m·n·k per multiply over the CUDA-event time of the timed ones.
    pub tflops: f64,
    /// Multiplies timed (after the untimed warm-up).
    pub iters: u32,
}

/// One checked multiply: seeded small-integer inputs whose exact product fits the FP32
/// accumulator, so every correct GPU returns the same bits whatever its model, cuBLAS version
/// or algorithm; the result is also checked against the exact integer product.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GemmCheck {
    pub dtype: String,
    /// 64-bit checksum of the result's bytes (hex).
    pub checksum: String,
    /// Elements that differ from the exact product (rows and columns found by exact
    /// checksums of the whole result, their crossings compared one by one).
    pub wrong_elements: u64,
    /// Rows and columns that hold a wrong element.
    pub wrong_rows: u32,
    pub wrong_cols: u32,
    /// `wrong_elements` is exact (false: a lower bound, too many rows and columns to compare).
    pub exact: bool,
    /// The first wrong element: (row, column, value returned, exact value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<WrongElement>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Default)]
#[serde(default)]
pub struct WrongElement {
    pub row: u32,
    pub col: u32,
    pub got: f64,
    pub want: f64,
}

/// Clocks, power, temperature and clock event reasons of one GPU at one moment (NVML).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuLoadState {
    pub sm_clock_mhz: Option<u32>,
    pub max_sm_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    /// The power limit in force, and the board's default: a limit below the default is a cap
    /// someone set (`nvidia-smi -pl`).
    pub power_limit_w: Option<f64>,
    pub power_default_limit_w: Option<f64>,
    /// Active clock event (throttle) reasons by name, as `GpuHealth::clock_event_reasons`.
    pub clock_event_reasons: Vec<String>,
}

/// The sustained load: every GPU multiplies for `seconds` at once; each window of about one
/// second gives each GPU's rate and its NVML state.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GemmBurn {
    pub seconds: u32,
    pub dtype: String,
    pub gpus: Vec<BurnTimeline>,
    /// Why the burn stopped early or did not run, when it did.
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct BurnTimeline {
    /// NVML index.
    pub gpu: u32,
    pub samples: Vec<BurnSample>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct BurnSample {
    /// Seconds since the burn started (end of the window).
    pub t_s: f64,
    pub tflops: f64,
    #[serde(flatten)]
    pub state: GpuLoadState,
}
