//! The verdict: advice from every joined node's facts and the links, then every finding, in one report.

use crate::report::ReportBuilder;
use crate::runtime::advice::{Seen, alive_or_joined};
use crate::runtime::members::JoinedNode;
use crate::runtime::node::node_findings;
use crate::runtime::phases::{RailReport, Traffic};
use crate::runtime::rendezvous::Rendezvous;
use preflight_checks::cluster::as_written::{Given, as_written};
use preflight_checks::cluster::{ClusterInput, Refusal, check_cluster};
use preflight_checks::collective::{CollectiveInput, check_collectives};
use preflight_checks::model::{self, Links, Mode, NodeFacts, Report};
use preflight_checks::networks;

/// A joined node handed to [`build_report`], its facts moved there (the report keeps them, so
/// rank 0 holds one copy of every node's facts, not two).
pub(crate) struct Member {
    pub rank: u32,
    pub facts: NodeFacts,
    pub alive: bool,
}

/// The runtime's members, their facts moved out for [`build_report`] (nothing reads a member's
/// facts after the verdict).
pub(crate) fn take_members(members: &mut [JoinedNode]) -> Vec<Member> {
    members
        .iter_mut()
        .map(|m| Member {
            rank: m.rank,
            facts: std::mem::take(&mut m.facts),
            alive: m.alive,
        })
        .collect()
}

/// The report: every finding from the facts and `links` (both moved into the report, never
/// copied: at a thousand nodes they are most of rank 0's memory), compacted above 64 nodes
/// (from the links' dense table when they have one: never every link as a record).
pub(crate) fn build_report(
    owned: Vec<Member>,
    links: Links<'static>,
    run: &Rendezvous,
    recommendation: model::Recommendation,
    traffic: Traffic,
    refused: &[Refusal],
    retested: &[(u32, u32, String)],
) -> Report {
    let Traffic {
        allreduce: outcome,
        rails,
    } = traffic;
    let seen: Vec<Seen> = owned
        .iter()
        .map(|m| Seen {
            rank: m.rank,
            facts: &m.facts,
            alive: m.alive,
        })
        .collect();
    let members = &seen[..];
    let nodes = alive_or_joined(members);
    let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&nodes, &links), &links, &ranks);
    let chosen = networks::choose(&evals);
    let mut findings = Vec::new();
    for (rank, facts) in &nodes {
        findings.extend(node_findings(*rank, facts, run.master_port(), run.shape()));
    }
    for m in members.iter().filter(|m| !m.alive) {
        findings.push(
            model::Finding::new(
                preflight_checks::rendezvous::ids::RENDEZVOUS,
                model::Status::Fail,
                format!("rank {}", m.rank),
                format!(
                    "rank {} ({}) joined but stopped answering during the measurements; its results are incomplete",
                    m.rank, m.facts.hostname
                ),
            )
            .with("rank", m.rank)
            .with("hostname", &m.facts.hostname)
            .on_node(Some(m.rank))
            .fix(model::Fix::new("check that preflight is still running on that node and that it was not killed (dmesg, the scheduler's log)")),
        );
    }
    let input = ClusterInput {
        nodes: &nodes,
        nnodes: run.nnodes(),
        expected_hosts: run.expected_hosts(),
        links: &links,
        evals: &evals,
        chosen,
        master_port: run.master_port(),
        refused,
        min_link_gbit: run.job.min_link_gbit,
        retested,
    };
    findings.extend(check_cluster(&input));
    findings.extend(rail_findings(&input, &rails));
    let given_ips = Some(run.master_addr())
        .filter(|m| !m.is_empty())
        .map(|m| crate::placement::resolve_host(m).addrs)
        .unwrap_or_default();
    findings.push(as_written(
        &input,
        (!given_ips.is_empty()).then_some(Given {
            master: run.master_addr(),
            ips: &given_ips,
        }),
        &recommendation,
    ));
    findings.push(preflight_checks::cluster::nccl_auto_pick::nccl_auto_pick(
        &input,
        &recommendation,
    ));
    findings.push(crate::runtime::rendezvous::auth_finding(
        &run.secret_source,
        run.master_addr(),
        run.master_port(),
    ));
    let collective = CollectiveInput {
        results: &outcome.results,
        links: &links,
        min_busbw_gb_s: run.job.min_busbw,
        not_run: outcome.not_run.clone(),
        one_node: false,
        slow_parts: Vec::new(),
        link_reference_gbit: None,
    }
    .with_link_verdict(&findings);
    findings.extend(check_collectives(&collective));
    // The borrows of the facts end here: they move into the report.
    drop(nodes);
    drop(seen);
    let mut builder = ReportBuilder::new(Mode::Cluster);
    for m in owned {
        builder = builder.node(m.rank, m.facts);
    }
    let mut report = builder
        .findings(findings)
        .collectives(outcome.results)
        .recommendation(Some(recommendation))
        .placement(Some(run.placement_info()))
        .build();
    // When the cluster fails: the set of nodes to train on now.
    let healthy = crate::advise::healthy::HealthyInput::new(
        &run.job.healthy,
        run.nnodes(),
        run.shape().nproc_per_node,
        &run.job.script,
    );
    crate::advise::healthy::attach_with(&mut report, &links, &healthy);
    // When slow nodes cost the all-reduce more than their share: the set without them.
    crate::advise::faster::attach_with(&mut report, &links, &healthy);
    // The lemons: every node's own past runs (as it sent them) and this run.
    let rank0 = report.hostname(0).unwrap_or("rank0").to_string();
    let info = crate::history::run_info("cluster", &run.job.env, None, &rank0);
    report.run_id = Some(info.run.clone());
    crate::history::judge_lemons(&mut report, &info);
    // Above 64 nodes the links are kept compactly (the healthy set was computed from all).
    crate::report_compact::compact_links(&mut report, links);
    report
}

/// `ib.rail-fault` from the localised per-rail results (a skip with the reason when they did
/// not run), and `ib.counters-grew` per node from its two snapshots; nothing on a cluster
/// without RDMA devices, nor where no rail phase was attempted.
fn rail_findings(input: &ClusterInput, rails: &RailReport) -> Vec<model::Finding> {
    use preflight_checks::rails::{fault, grew};
    if input.nodes.iter().all(|(_, f)| f.ib.devices.is_empty()) {
        return Vec::new();
    }
    let mut out = match (&rails.outcome.verdict, &rails.outcome.not_run) {
        (Some(v), _) => {
            let mut out = fault::findings(input, v);
            out.extend(fault::left_out(input, &rails.outcome.skipped));
            out
        }
        (None, Some(why)) => vec![model::Finding::new(
            fault::ID,
            model::Status::Skip,
            "rails",
            why.clone(),
        )],
        // No rail phase was attempted (a simulation): nothing to say.
        (None, None) => Vec::new(),
    };
    out.extend(grew::check_cluster(input, &rails.counters_after));
    out
}
