//! `gpu.clocks` (hardware slowdown, thermal or power-brake clock event reasons active) and
//! `gpu.persistence` (persistence mode off).

use super::{Judged, Probed, about, per_gpu, why_missing};
use crate::core::{Finding, Fix, Status};

/// Clock event reasons that mean the hardware is holding the GPU back.
const SLOWDOWNS: &[(&str, &str)] = &[
    (
        "hw_slowdown",
        "hardware slowdown (overheating or power supply)",
    ),
    ("hw_thermal_slowdown", "hardware thermal slowdown"),
    (
        "hw_power_brake_slowdown",
        "power brake (the power supply asked for less)",
    ),
    ("sw_thermal_slowdown", "driver thermal slowdown"),
];

pub fn events(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(crate::gpu::ids::CLOCKS, "clock slowdowns", gpus, |g, h| {
        let Some(reasons) = &h.clock_event_reasons else {
            return Judged::Unknown(why_missing(h, "clock_event_reasons"));
        };
        let active: Vec<&str> = SLOWDOWNS
            .iter()
            .filter(|(n, _)| reasons.iter().any(|r| r == n))
            .map(|(_, d)| *d)
            .collect();
        if active.is_empty() {
            return Judged::Fine;
        }
        Judged::Problem(
            about(
                crate::gpu::ids::CLOCKS,
                Status::Warn,
                g,
                format!(
                    "GPU {} is slowed down by {}: in a multi-node job the slowest GPU sets \
                     everyone's pace",
                    g.index,
                    active.join(", ")
                ),
            )
            .with("clock_event_reasons", reasons)
            .fix(
                Fix::new(
                    "Check cooling (fans, airflow, inlet temperature) and the power supplies; \
                     the reasons clear when the cause does",
                )
                .command(format!(
                    "nvidia-smi -q -i {} -d PERFORMANCE,TEMPERATURE,POWER",
                    g.index
                )),
            ),
        )
    })
}

pub fn persistence(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(
        crate::gpu::ids::PERSISTENCE,
        "persistence mode",
        gpus,
        |g, h| match h.persistence_mode {
            None => Judged::Unknown(why_missing(h, "persistence_mode")),
            Some(true) => Judged::Fine,
            Some(false) => Judged::Problem(
                about(
                    crate::gpu::ids::PERSISTENCE,
                    Status::Warn,
                    g,
                    format!(
                        "GPU {} has persistence mode off: the driver tears the GPU down when the \
                     last process exits, so every job start pays seconds of initialisation \
                     and ECC/XID state can be lost between runs",
                        g.index
                    ),
                )
                .with("persistence_mode", false)
                .fix(
                    Fix::new("Turn persistence mode on (or run nvidia-persistenced at boot)")
                        .command("sudo nvidia-smi -pm 1")
                        .command("sudo systemctl enable --now nvidia-persistenced"),
                ),
            ),
        },
    )
}
