//! The validated jobs the runtime takes (built by `config` from the flags and the environment).

use super::Timing;
use super::allreduce::AllreducePlan;
use crate::placement::PlacementFlags;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Where probes read the OS from, and whether NVML is loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeJob {
    pub root: PathBuf,
    pub no_gpu: bool,
}

/// The job's shape as the checks judge it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobShape {
    pub nproc_per_node: Option<u32>,
    pub expect_gpus: Option<u32>,
}

/// `preflight cluster` (and the cluster run `preflight torchrun` starts).
#[derive(Clone, Debug)]
pub struct ClusterJob {
    pub probe: ProbeJob,
    pub placement: PlacementFlags,
    /// The process environment the placement and the local group read.
    pub env: BTreeMap<String, String>,
    pub token: Option<String>,
    /// Bounds the join and every phase.
    pub timeout: Duration,
    pub timing: Timing,
    pub allreduce: AllreducePlan,
    pub min_busbw: Option<f64>,
    pub shape: JobShape,
    pub script: Vec<String>,
}
