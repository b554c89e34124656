//! The cluster's advice from every joined node's facts and the links, as the phases and the
//! verdict see the nodes ([`Seen`]: the runtime's members, or a simulation's).

use super::members::JoinedNode;
use super::rendezvous::Rendezvous;
use crate::advise::{ClusterAdviceInput, advise_cluster};
use preflight_checks::model::{self, Links, NodeFacts};
use preflight_checks::networks;
use std::collections::BTreeMap;

/// A joined node as the verdict sees it (the runtime's members, or a simulation's).
pub(crate) struct Seen<'a> {
    pub rank: u32,
    pub facts: &'a NodeFacts,
    /// Still answering at the end of the measurements.
    pub alive: bool,
}

/// The verdict's view of the runtime's members.
pub(crate) fn seen(members: &[JoinedNode]) -> Vec<Seen<'_>> {
    members
        .iter()
        .map(|m| Seen {
            rank: m.rank,
            facts: &m.facts,
            alive: m.alive,
        })
        .collect()
}

/// The advice from every joined node's facts and the links, with `env_override` set on top.
pub(crate) fn advise(
    members: &[Seen],
    links: &Links,
    run: &Rendezvous,
    env_override: BTreeMap<String, String>,
    rail_verdict: Option<&preflight_checks::rails::localise::RailVerdict>,
) -> model::Recommendation {
    let nodes = alive_or_joined(members);
    let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&nodes, links), links, &ranks);
    advise_cluster(
        &nodes,
        &evals,
        &ClusterAdviceInput {
            nnodes: run.nnodes(),
            master_port: run.master_port(),
            nproc_per_node: run.shape().nproc_per_node,
            script: run.job.script.clone(),
            env_override,
            coordinator_note: run.coordinator_note(),
            given_master: Some(run.master_addr())
                .filter(|m| !m.is_empty())
                .map(|m| (m.to_string(), crate::placement::resolve_host(m).addrs)),
            c10d: run.c10d(),
            rail_verdict: rail_verdict.cloned(),
        },
    )
}

/// Every joined node (dead ones included: their facts still count for the checks).
pub(crate) fn alive_or_joined<'a>(members: &[Seen<'a>]) -> Vec<(u32, &'a NodeFacts)> {
    members.iter().map(|m| (m.rank, m.facts)).collect()
}
