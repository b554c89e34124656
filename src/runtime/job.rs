//! The validated jobs the runtime takes (built by `config` from the flags and the environment).

use super::seams::SeamsRef;
use crate::placement::PlacementFlags;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Where probes read the OS from, and whether NVML is loaded.
#[derive(Clone, Debug)]
pub struct ProbeJob {
    pub root: PathBuf,
    pub no_gpu: bool,
    /// The job's own environment from its launch line (`NCCL_SOCKET_IFNAME=bond0 torchrun ...`),
    /// laid over the probed environment so the node checks judge what the job will see.
    pub job_env: BTreeMap<String, String>,
    /// Names the line removes (`env -u NAME`).
    pub job_unset: Vec<String>,
    /// What a test stands in for (fake GPUs, an RDMA fixture, ...); the real machine otherwise.
    pub seams: SeamsRef,
    /// This node's history store (`--history`).
    pub history: crate::history::HistoryOpt,
}

impl ProbeJob {
    /// Lays the line's environment over the probed one.
    pub fn overlay(&self, env: &mut BTreeMap<String, String>) {
        for name in &self.job_unset {
            env.remove(name);
        }
        env.extend(self.job_env.clone());
    }
}

/// The job's shape as the checks judge it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobShape {
    pub nproc_per_node: Option<u32>,
    pub expect_gpus: Option<u32>,
    /// Nodes in the job, when known (`check --nnodes`, the launcher, the cluster's placement):
    /// with the processes per node it gives the world size the scale checks judge against.
    pub nnodes: Option<u32>,
    /// Processes per node a pasted launch line asks for: counts toward the world size only
    /// (`gpu.count` judges `nproc_per_node`, `launch.nproc` the line).
    pub line_nproc: Option<u32>,
    /// `--xid-window` in seconds (None: the default 2 h).
    pub xid_window_s: Option<u64>,
}

impl JobShape {
    /// This shape for a job of `nnodes` nodes.
    pub fn with_nnodes(self, nnodes: u32) -> JobShape {
        JobShape {
            nnodes: Some(nnodes),
            ..self
        }
    }
}

/// `preflight cluster` (and the cluster run `preflight torchrun` starts).
#[derive(Clone, Debug)]
pub struct ClusterJob {
    pub probe: ProbeJob,
    pub placement: PlacementFlags,
    /// The process environment the placement and the local group read.
    pub env: BTreeMap<String, String>,
    /// The job's token, when given (else the job id, else nothing, is the secret).
    pub token: Option<Token>,
    /// Bounds the join and every phase.
    pub timeout: Duration,
    pub timing: Timing,
    pub allreduce: AllreducePlan,
    pub min_busbw: Option<f64>,
    /// `--min-link-gbit`.
    pub min_link_gbit: Option<f64>,
    pub shape: JobShape,
    pub script: Vec<String>,
    /// The healthy set's constraints (`--min-nodes`, `--nodes-multiple-of`, `--exclude-slow`).
    pub healthy: preflight_checks::cluster::healthy_set::HealthyOptions,
    /// `--full-report`: this rank asks rank 0 for the whole report (above 64 nodes the other
    /// ranks get a copy without the other nodes' facts and the links).
    pub whole_report: bool,
    /// `--idle-test`: how long the idle test holds connections silent (zero: off).
    pub idle_test: Duration,
    /// The GPUs' matrix-multiply test on every node.
    pub gemm: GemmPlan,
}

impl ClusterJob {
    /// A job with no flags and no environment (a simulation's, a test's): `timing` and
    /// `allreduce` as given, a 60 s timeout, the real machine's seams, nothing else set.
    pub fn standalone(timing: Timing, allreduce: AllreducePlan) -> ClusterJob {
        ClusterJob {
            probe: ProbeJob {
                root: PathBuf::from("/"),
                no_gpu: false,
                job_env: BTreeMap::new(),
                job_unset: Vec::new(),
                seams: super::seams::real(),
                history: crate::history::HistoryOpt::Off,
            },
            placement: PlacementFlags::default(),
            env: BTreeMap::new(),
            token: None,
            timeout: Duration::from_secs(60),
            timing,
            allreduce,
            min_busbw: None,
            min_link_gbit: None,
            shape: JobShape::default(),
            script: Vec::new(),
            healthy: Default::default(),
            whole_report: false,
            idle_test: Duration::ZERO,
            gemm: GemmPlan::default(),
        }
    }
}

/// Whether the GPUs multiply (`--gemm`, `--no-gemm`, `--burn`, `--thorough`), and for how long
/// under sustained load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemmPlan {
    pub run: bool,
    /// Seconds of sustained load after the quick test (0: none).
    pub burn_s: u32,
}

impl GemmPlan {
    /// Seconds of sustained load `--thorough` asks for.
    pub const THOROUGH_BURN_S: u32 = 30;

    /// In `cluster`, the longest a node may multiply before it joins (a hung GPU is cut off
    /// there by the worker's watchdog): the join timeout plus the sustained load. The other
    /// nodes wait that much longer to join, so a node still multiplying is named by its GPU
    /// finding, not as a node that never joined. Zero when the test does not run.
    pub fn join_grace(&self, join_timeout: std::time::Duration) -> std::time::Duration {
        if !self.run {
            return std::time::Duration::ZERO;
        }
        join_timeout + std::time::Duration::from_secs(u64::from(self.burn_s) * 12 / 10)
    }

    /// From the flags: `default` is whether this command runs it unasked.
    pub fn from_flags(
        gemm: bool,
        no_gemm: bool,
        burn: Option<u32>,
        default: bool,
        thorough: bool,
    ) -> GemmPlan {
        if no_gemm {
            return GemmPlan::default();
        }
        let burn_s = burn.unwrap_or(if thorough && default {
            Self::THOROUGH_BURN_S
        } else {
            0
        });
        GemmPlan {
            run: gemm || burn_s > 0 || default,
            burn_s,
        }
    }
}

/// A token and where it came from (`--token / PREFLIGHT_TOKEN`, `--token-file PATH`); never empty.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub value: String,
    pub from: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(from {})", self.from)
    }
}

/// How long each measurement runs (`--quick`, default, `--thorough`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub connect_timeout: std::time::Duration,
    pub pings: u32,
    pub bulk: std::time::Duration,
    /// Random perfect matchings measured for throughput beyond the ring (see `schedule`).
    pub matchings: u32,
}

/// Which all-reduce to measure (`--allreduce`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AllreduceMode {
    Off,
    Tcp,
    Nccl,
    /// NCCL when every node has GPUs and libnccl, else TCP.
    Auto,
}

/// What to measure, from the command line of rank 0.
#[derive(Clone, Debug, PartialEq)]
pub struct AllreducePlan {
    pub mode: AllreduceMode,
    pub sizes: Vec<u64>,
    pub compare_env: BTreeMap<String, String>,
    pub streams: u32,
    pub warmup: u32,
    pub iters: u32,
    /// Bounds every wait inside one size (a connect, a chunk).
    pub step_timeout: Duration,
    /// The longest a node may stay silent before it is given up on (from `--timeout`).
    pub silence: Duration,
}

impl AllreducePlan {
    /// How long a whole run may take before a node is given up on.
    pub fn limit(&self) -> Duration {
        self.step_timeout * (self.sizes.len() as u32 + 2) + Duration::from_secs(10)
    }
}
