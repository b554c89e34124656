//! Where this node stands in the job: nnodes, rank, master address and port, job id, from flags, --hosts, Slurm or torchrun/Kubernetes env.

// TEMPORARY stub until the launcher branch lands.
use crate::cli::ClusterArgs;
use std::collections::BTreeMap;

pub struct Placement {
    pub nnodes: u32,
    pub rank: u32,
    pub master_addr: String,
    pub master_port: u16,
    pub job_id: Option<String>,
    pub expected_hosts: Vec<String>,
    pub source: &'static str,
}
pub struct LocalIdentity {
    pub hostname: String,
    pub addrs: Vec<std::net::IpAddr>,
}
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    #[error("{0}")]
    Missing(String),
}
pub fn resolve(
    args: &ClusterArgs,
    _env: &BTreeMap<String, String>,
    _me: &LocalIdentity,
) -> Result<Placement, LauncherError> {
    Ok(Placement {
        nnodes: args
            .nnodes
            .ok_or_else(|| LauncherError::Missing("--nnodes".into()))?,
        rank: args
            .node_rank
            .ok_or_else(|| LauncherError::Missing("--node-rank".into()))?,
        master_addr: args
            .master_addr
            .clone()
            .ok_or_else(|| LauncherError::Missing("--master-addr".into()))?,
        master_port: args.master_port.unwrap_or(29500),
        job_id: args.rdzv_id.clone(),
        expected_hosts: vec![],
        source: "flags",
    })
}
