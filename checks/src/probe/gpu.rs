//! GPUs through NVML (loaded at run time; a missing driver is a fact, not a crash).

use crate::model::GpuFacts;

pub fn probe() -> GpuFacts {
    GpuFacts::default()
}
