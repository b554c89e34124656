//! What rank 0's coordinator runs from: the validated job, passed down as it is, and what this
//! node established before the rendezvous (its placement, the secret, its own addresses). Every
//! other setting is read from the job through the methods here, never copied into a second
//! config.

use super::job::{ClusterJob, JobShape};
use crate::advise::C10dAdvice;
use crate::placement::Placement;
use crate::transport::auth::{Secret, SecretSource};
use crate::transport::events::Events;
use preflight_checks::model::{self, Finding, PlacementInfo};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// The job and the rendezvous as this node found them.
#[derive(Clone, Debug)]
pub struct Rendezvous {
    pub job: Arc<ClusterJob>,
    /// The placement the rendezvous uses (`Placement::for_rendezvous`: its `master_port` is the
    /// coordinator's port).
    pub placement: Placement,
    /// The job's own master port: the advice and the port checks keep it (it differs from the
    /// coordinator's under torchrun).
    pub job_master_port: u16,
    pub secret: Secret,
    /// Where the secret came from (`cluster.auth`).
    pub secret_source: SecretSource,
    /// This node's own addresses (admitted with the known hosts').
    pub own_addrs: Vec<IpAddr>,
    /// Where progress and log lines go.
    pub events: Events,
}

impl Rendezvous {
    /// The rendezvous of `nnodes` nodes around rank 0 at `master_addr`:29500, ranks from
    /// `source`, for a coordinator without a launcher (a simulation's, a test's).
    pub fn standalone(
        job: ClusterJob,
        nnodes: u32,
        master_addr: &str,
        source: &'static str,
        secret: Secret,
        secret_source: SecretSource,
    ) -> Rendezvous {
        let own = master_addr.parse().into_iter().collect();
        Rendezvous {
            job: Arc::new(job),
            placement: Placement {
                nnodes,
                rank: 0,
                master_addr: master_addr.to_string(),
                master_port: 29500,
                job_id: None,
                job_id_source: None,
                expected_hosts: Vec::new(),
                source,
                c10d: None,
                coordinator_port: 29500,
                coordinator_note: None,
            },
            job_master_port: 29500,
            secret,
            secret_source,
            own_addrs: own,
            events: Events::none(),
        }
    }

    pub fn nnodes(&self) -> u32 {
        self.placement.nnodes
    }

    /// The master's address as the nodes dial it (for `cluster.auth`).
    pub fn master_addr(&self) -> &str {
        &self.placement.master_addr
    }

    /// The job's master port (see [`Rendezvous::job_master_port`]).
    pub fn master_port(&self) -> u16 {
        self.job_master_port
    }

    /// `--timeout`: bounds the join and every phase.
    pub fn join_timeout(&self) -> Duration {
        self.job.timeout
    }

    /// Added to the join window only: how long a node may still be multiplying on its GPUs
    /// before it joins (`GemmPlan::join_grace`).
    pub fn join_grace(&self) -> Duration {
        self.job.gemm.join_grace(self.job.timeout)
    }

    /// Expected host per rank (`--hosts`, Slurm); empty otherwise.
    pub fn expected_hosts(&self) -> &[String] {
        &self.placement.expected_hosts
    }

    /// The job's shape for this many nodes.
    pub fn shape(&self) -> JobShape {
        self.job.shape.with_nnodes(self.placement.nnodes)
    }

    /// Why the coordinator listens on another port than the master port (under torchrun).
    pub fn coordinator_note(&self) -> Option<String> {
        self.placement.coordinator_note.clone()
    }

    /// How the ranks were found, for the report (`placement`).
    pub fn placement_info(&self) -> PlacementInfo {
        placement_info(&self.placement)
    }

    /// Set when ranks are assigned at join (c10d): the launch commands keep the c10d rendezvous.
    pub fn c10d(&self) -> Option<C10dAdvice> {
        let p = &self.placement;
        p.c10d.as_ref().map(|j| C10dAdvice {
            endpoint: preflight_checks::net::host_port(&j.endpoint, p.master_port),
            rdzv_id: p.job_id.clone(),
        })
    }

    /// `--rdzv-backend=c10d`: every node resolves rank 0's FQDN, the name torchrun publishes
    /// (`cluster.fqdn`).
    pub fn resolve_fqdn(&self) -> bool {
        self.job
            .placement
            .rdzv_backend
            .as_deref()
            .is_some_and(crate::placement::is_c10d)
    }
}

/// How a node's placement was found, for its report.
pub fn placement_info(p: &Placement) -> PlacementInfo {
    PlacementInfo {
        source: p.source.to_string(),
        endpoint: p
            .c10d
            .as_ref()
            .map(|j| preflight_checks::net::host_port(&j.endpoint, p.master_port)),
        unassigned: p.rank_pending(),
    }
}

/// `cluster.auth`: where the secret came from; a warning with the fix when there is none.
pub fn auth_finding(source: &SecretSource, master: &str, port: u16) -> Finding {
    let subject = preflight_checks::net::host_port(master, port);
    if source.is_secret() {
        return Finding::new(
            preflight_checks::rendezvous::ids::AUTH,
            model::Status::Pass,
            subject,
            format!("nodes authenticate with {}", source.describe()),
        )
        .with("source", source.describe());
    }
    Finding::new(
        preflight_checks::rendezvous::ids::AUTH,
        model::Status::Warn,
        subject.clone(),
        format!(
            "no secret source: nodes prove only that they know {subject}, so anyone who can reach it could join as a rank, read every node's facts and add made-up links"
        ),
    )
    .with("source", source.describe())
    .fix(
        model::Fix::new(
            "Give every node one secret through the launcher's environment (the job script exports it before srun/torchrun), or a file: --token-file PATH",
        )
        .command("export PREFLIGHT_TOKEN=$(openssl rand -hex 16)"),
    )
}
