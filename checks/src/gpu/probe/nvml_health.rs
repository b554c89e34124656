//! One GPU's health through NVML: PCIe link and replays, P-state, ECC, row remapping or page
//! retirement, NVLink, clock event reasons, persistence mode and fabric state.
//!
//! Each query fails on its own: a failure (not supported on this GPU, no permission) lands in
//! `GpuHealth::unsupported` with NVML's reason, never in a wrong value.

use crate::core::{GpuFabric, GpuHealth, NvLinkState, PcieLink, RemappedRows, RetiredPages};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlGpuFabricInfoV_t, nvmlReturn_enum_NVML_SUCCESS};

/// NVLink links NVML can number (NVML_NVLINK_MAX_LINKS on Blackwell).
const MAX_NVLINKS: u32 = 18;

/// Reads every health field of `d`, recording what failed.
pub fn read(nvml: &Nvml, d: &Device) -> GpuHealth {
    let mut h = GpuHealth::default();
    let put = |h: &mut GpuHealth, what: &str, e: NvmlError| {
        h.unsupported.insert(what.to_string(), e.to_string());
    };
    match d.architecture() {
        Ok(a) => h.architecture = Some(arch_name(a)),
        Err(e) => put(&mut h, "architecture", e),
    }
    match pcie(d) {
        Ok(p) => h.pcie = Some(p),
        Err(e) => put(&mut h, "pcie_link", e),
    }
    match d.pcie_replay_counter() {
        Ok(n) => h.pcie_replay_counter = Some(u64::from(n)),
        Err(e) => put(&mut h, "pcie_replay_counter", e),
    }
    match d.performance_state() {
        Ok(p) => h.performance_state = Some(p.as_c()),
        Err(e) => put(&mut h, "performance_state", e),
    }
    match d.is_ecc_enabled() {
        Ok(m) => {
            h.ecc_enabled = Some(m.currently_enabled);
            if m.currently_enabled {
                match d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile) {
                    Ok(n) => h.ecc_volatile_uncorrected = Some(n),
                    Err(e) => put(&mut h, "ecc_volatile_uncorrected", e),
                }
                match d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile) {
                    Ok(n) => h.ecc_volatile_corrected = Some(n),
                    Err(e) => put(&mut h, "ecc_volatile_corrected", e),
                }
            }
        }
        Err(e) => put(&mut h, "ecc_mode", e),
    }
    match remapped_rows(nvml, d) {
        Ok(r) => h.remapped_rows = Some(r),
        Err(e) => put(&mut h, "remapped_rows", e),
    }
    // Page retirement is the pre-Ampere mechanism; Ampere and newer remap rows instead.
    if h.remapped_rows.is_none() {
        match retired_pages(d) {
            Ok(r) => h.retired_pages = Some(r),
            Err(e) => put(&mut h, "retired_pages", e),
        }
    }
    for link in 0..MAX_NVLINKS {
        match d.link_wrapper_for(link).is_active() {
            Ok(active) => h.nvlinks.push(NvLinkState { link, active }),
            // Links past the GPU's last one answer InvalidArg / NotSupported: stop there.
            Err(e) => {
                if link == 0 {
                    put(&mut h, "nvlink", e);
                }
                break;
            }
        }
    }
    match d.current_throttle_reasons() {
        Ok(r) => h.clock_event_reasons = Some(reason_names(r)),
        Err(e) => put(&mut h, "clock_event_reasons", e),
    }
    match d.is_in_persistent_mode() {
        Ok(p) => h.persistence_mode = Some(p),
        Err(e) => put(&mut h, "persistence_mode", e),
    }
    match fabric(nvml, d) {
        Ok(Some(f)) => h.fabric = Some(f),
        Ok(None) => {}
        Err(e) => put(&mut h, "fabric", e),
    }
    h
}

fn pcie(d: &Device) -> Result<PcieLink, NvmlError> {
    Ok(PcieLink {
        current_width: d.current_pcie_link_width()?,
        max_width: d.max_pcie_link_width()?,
        current_gen: d.current_pcie_link_gen()?,
        max_gen: d.max_pcie_link_gen()?,
    })
}

fn retired_pages(d: &Device) -> Result<RetiredPages, NvmlError> {
    Ok(RetiredPages {
        single_bit: d
            .retired_pages(RetirementCause::MultipleSingleBitEccErrors)?
            .len() as u32,
        double_bit: d.retired_pages(RetirementCause::DoubleBitEccError)?.len() as u32,
        pending: d.are_pages_pending_retired()?,
    })
}

/// `nvmlDeviceGetRemappedRows` (nvml-wrapper 0.13 has no wrapper for it).
fn remapped_rows(nvml: &Nvml, d: &Device) -> Result<RemappedRows, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corr, mut unc, mut pending, mut failed) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: the handle is live for `d`'s lifetime; the out pointers are valid u32s.
    nvml_try(unsafe { sym(d.handle(), &mut corr, &mut unc, &mut pending, &mut failed) })?;
    Ok(RemappedRows {
        correctable: corr,
        uncorrectable: unc,
        pending: pending != 0,
        failed: failed != 0,
    })
}

/// `nvmlDeviceGetGpuFabricInfoV` (v3); None where the GPU has no fabric (state not supported).
fn fabric(nvml: &Nvml, d: &Device) -> Result<Option<GpuFabric>, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref())?;
    // SAFETY: a zeroed plain C struct is a valid value; NVML checks `version`.
    let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
    info.version = std::mem::size_of::<nvmlGpuFabricInfoV_t>() as u32 | (3 << 24);
    // SAFETY: the handle is live for `d`'s lifetime; `info` is a valid, versioned struct.
    nvml_try(unsafe { sym(d.handle(), &mut info) })?;
    let state = match info.state {
        0 => return Ok(None),
        1 => "not_started",
        2 => "in_progress",
        3 => "completed",
        _ => "unknown",
    };
    let status = if info.status == nvmlReturn_enum_NVML_SUCCESS {
        "Success".to_string()
    } else {
        nvml_try(info.status)
            .err()
            .map_or_else(|| "Success".into(), |e| e.to_string())
    };
    // healthMask bits 0-1: degraded bandwidth (1 = true, 2 = false, 0 = not supported).
    let degraded_bandwidth = match info.healthMask & 0x3 {
        1 => Some(true),
        2 => Some(false),
        _ => None,
    };
    Ok(Some(GpuFabric {
        state: state.into(),
        status,
        degraded_bandwidth,
    }))
}

fn arch_name(a: DeviceArchitecture) -> String {
    format!("{a:?}")
}

/// The clock event reasons that are set, by stable names.
pub fn reason_names(r: ThrottleReasons) -> Vec<String> {
    let table: &[(ThrottleReasons, &str)] = &[
        (ThrottleReasons::GPU_IDLE, "gpu_idle"),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "applications_clocks_setting",
        ),
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            "hw_power_brake_slowdown",
        ),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            "display_clock_setting",
        ),
    ];
    table
        .iter()
        .filter(|(bit, _)| r.contains(*bit))
        .map(|(_, name)| (*name).to_string())
        .collect()
}
