//! Cluster mode: rendezvous on the master port, pairwise measurements, one report for every node.

pub mod agent;
pub mod allreduce;
pub mod allreduce_node;
pub mod auth;
pub mod coordinator;
pub mod launcher;
pub mod local_group;
pub mod nccl_node;
pub mod wire;

use crate::cli::ClusterArgs;

/// A line on stderr, prefixed so it is told apart from the report.
pub fn log(msg: &str) {
    crate::progress::eprint_line(&format!("preflight: {msg}"));
}

/// One node's own findings in a cluster run. Only rank 0 binds the master port, so
/// `port.in-use` is judged there alone.
pub fn node_findings(
    rank: u32,
    facts: &preflight_checks::model::NodeFacts,
    master_port: u16,
    nproc_per_node: Option<u32>,
    expect_gpus: Option<u32>,
) -> Vec<preflight_checks::model::Finding> {
    let ctx = preflight_checks::CheckContext {
        rank: Some(rank),
        master_port,
        nproc_per_node,
        expect_gpus,
    };
    preflight_checks::check_node(facts, &ctx)
        .into_iter()
        .filter(|f| rank == 0 || f.id != "port.in-use")
        .collect()
}

/// Runs `preflight cluster` on this node (once per node under torchrun: see `local_group`).
pub fn run(args: ClusterArgs) -> anyhow::Result<u8> {
    let env = preflight_checks::probe::env::all();
    local_group::run_once_per_node(args, &env, agent::run)
}

/// How long each measurement runs (`--quick`, default, `--thorough`).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub connect_timeout: std::time::Duration,
    pub pings: u32,
    pub bulk: std::time::Duration,
}

impl Timing {
    pub fn from_args(args: &ClusterArgs) -> Timing {
        use std::time::Duration;
        if args.quick {
            Timing {
                connect_timeout: Duration::from_secs(1),
                pings: 20,
                bulk: Duration::from_millis(200),
            }
        } else if args.thorough {
            Timing {
                connect_timeout: Duration::from_secs(3),
                pings: 200,
                bulk: Duration::from_secs(3),
            }
        } else {
            Timing {
                connect_timeout: Duration::from_secs(2),
                pings: 50,
                bulk: Duration::from_secs(1),
            }
        }
    }
}
