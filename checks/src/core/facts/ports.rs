//! Port facts: whether the master port binds, and who holds it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BindStatus {
    Free,
    InUse,
    Denied,
    /// The address family is not available (no IPv6).
    Unsupported,
    #[default]
    Error,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct BindResult {
    pub status: BindStatus,
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PortFacts {
    pub port: u16,
    /// Binding 0.0.0.0:port.
    pub ipv4: BindResult,
    /// Binding [::]:port (what torchrun does).
    pub ipv6: BindResult,
    /// Processes with a socket listening on the port.
    pub holders: Vec<PortHolder>,
    /// A nearby port that was verified bindable on both families.
    pub suggested_free: Option<u16>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PortHolder {
    pub pid: Option<u32>,
    pub command: Option<String>,
    pub local_address: String,
    pub inode: u64,
    /// The Slurm job the holding process belongs to: its cgroup (`.../job_<id>/...`), else its
    /// environment's `SLURM_JOB_ID`. None outside Slurm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
    /// Whether that job runs on this node now: `true` when the process sits in the job's own
    /// cgroup or slurmd lists it (`scontrol listpids`), `false` when slurmd lists no such pid
    /// (the job ended and left it behind), None when it could not be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_running: Option<bool>,
}
