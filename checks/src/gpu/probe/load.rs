//! A GPU's clocks, temperature, power and clock event reasons at one moment (NVML), read while
//! the GEMM test loads it. Each query fails on its own and leaves its field empty.

use crate::core::GpuLoadState;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};

/// An open NVML to sample from; None fields where a query is not supported.
pub struct LoadSampler {
    nvml: Nvml,
}

impl LoadSampler {
    /// Opens NVML (the same library search as the GPU probe); Err says why not.
    pub fn open() -> Result<LoadSampler, String> {
        super::init_nvml().map(|nvml| LoadSampler { nvml })
    }

    /// The state of the GPU at `pci_bus_id` (NVML's or the sysfs form), None when NVML does not
    /// know it.
    pub fn read(&self, pci_bus_id: &str) -> Option<GpuLoadState> {
        let bdf = super::node::sysfs_bdf(pci_bus_id)?;
        let d = self.nvml.device_by_pci_bus_id(bdf.as_str()).ok()?;
        let mw = |v: u32| f64::from(v) / 1000.0;
        Some(GpuLoadState {
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
            max_sm_clock_mhz: d.max_clock_info(Clock::SM).ok(),
            temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
            power_w: d.power_usage().ok().map(mw),
            power_limit_w: d.enforced_power_limit().ok().map(mw),
            power_default_limit_w: d.power_management_limit_default().ok().map(mw),
            clock_event_reasons: d
                .current_throttle_reasons()
                .map(super::nvml_health::reason_names)
                .unwrap_or_default(),
        })
    }
}
