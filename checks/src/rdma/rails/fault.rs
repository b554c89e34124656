//! `ib.rail-fault`: the per-rail NCCL pair tests judged by [`super::localise`], each blamed part
//! named as (node, rail HCA, GPU), node, rail switch or pair, with the numbers and the fix.

use super::localise::{Blame, RailResult, RailVerdict, localise};
use super::mapping::{Rail, map_rails};
use crate::core::ClusterInput;
use crate::core::{Finding, Fix, Status};
use std::collections::BTreeMap;

pub use crate::rdma::ids::RAIL_FAULT as ID;

/// One node's rails by rail number.
fn rails_by_rank(input: &ClusterInput) -> BTreeMap<u32, Vec<Rail>> {
    input
        .nodes
        .iter()
        .map(|(r, f)| (*r, map_rails(&f.ib)))
        .collect()
}

fn rail(rails: &BTreeMap<u32, Vec<Rail>>, rank: u32, index: u32) -> Option<&Rail> {
    rails.get(&rank)?.iter().find(|r| r.index == index)
}

/// "rail 5 (mlx5_5/1, GPU 5)" on that node, or "rail 5".
fn rail_label(rails: &BTreeMap<u32, Vec<Rail>>, rank: u32, index: u32) -> String {
    rail(rails, rank, index)
        .map(Rail::label)
        .unwrap_or_else(|| format!("rail {index}"))
}

fn gbps(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} Gb/s"))
        .unwrap_or_else(|| "failed".into())
}

/// `NCCL_IB_HCA` keeping a node's rails except `leave_out` (exact names with `=`).
fn hca_without(rails: Option<&Vec<Rail>>, leave_out: &[u32]) -> Option<String> {
    let keep: Vec<String> = rails?
        .iter()
        .filter(|r| !leave_out.contains(&r.index))
        .map(|r| format!("{}:{}", r.hca, r.port))
        .collect();
    (!keep.is_empty()).then(|| {
        format!("export NCCL_IB_HCA={}", {
            let mut s = String::from("=");
            s.push_str(&keep.join(","));
            s
        })
    })
}

fn link_fix(r: Option<&Rail>, host: &str) -> Vec<String> {
    let Some(r) = r else {
        return vec!["ibstat".into()];
    };
    let target = r.hca_bdf.clone().unwrap_or_else(|| r.hca.clone());
    vec![
        format!("ssh {host} ibstat {} {}", r.hca, r.port),
        format!("ssh {host} mlxlink -d {target} -p {} -m -c -e", r.port),
        format!(
            "ssh {host} ibportstate -C {} -P {} -D 0 {} query",
            r.hca, r.port, r.port
        ),
    ]
}

/// The nodes that took no part in tests that ran (`skipped`: rank and why), one skip per reason
/// with the hosts, so a node left out is never silently missing from the verdict.
pub fn left_out(input: &ClusterInput, skipped: &[(u32, String)]) -> Vec<Finding> {
    let mut by_reason: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (rank, why) in skipped {
        by_reason.entry(why.as_str()).or_default().push(*rank);
    }
    by_reason
        .into_iter()
        .map(|(why, mut ranks)| {
            ranks.sort_unstable();
            let f = Finding::new(
                ID,
                Status::Skip,
                input.hosts_within(&ranks, 60),
                format!(
                    "{} took no part in the per-rail NCCL pair tests: {why}",
                    if ranks.len() == 1 {
                        input.who(ranks[0])
                    } else {
                        format!("{} nodes ({})", ranks.len(), input.hosts_within(&ranks, 80))
                    }
                ),
            )
            .with("ranks", &ranks)
            .with("reason", why);
            if ranks.len() == 1 {
                f.on_node(Some(ranks[0]))
            } else {
                f
            }
        })
        .collect()
}

pub fn check(input: &ClusterInput, results: &[RailResult]) -> Vec<Finding> {
    if results.is_empty() {
        return vec![Finding::new(
            ID,
            Status::Skip,
            "rails",
            "no per-rail NCCL pair tests ran (no GPUs or no RDMA rails on the nodes, or not requested)",
        )];
    }
    let verdict = localise(results);
    findings(input, &verdict)
}

pub fn findings(input: &ClusterInput, v: &RailVerdict) -> Vec<Finding> {
    let rails = rails_by_rank(input);
    let reference = gbps(v.reference_gbps);
    let status = if v.retested {
        Status::Fail
    } else {
        Status::Warn
    };
    let retest_note = if v.retested {
        "confirmed by a retest against known-good partners"
    } else {
        "not yet retested"
    };
    let mut out = Vec::new();
    for b in &v.blames {
        let f = match b {
            Blame::NodeRail {
                node,
                rail: index,
                bad_with,
                good_with,
                median_gbps,
                errors,
            } => {
                let host = input.host(*node).unwrap_or_else(|| format!("rank{node}"));
                let r = rail(&rails, *node, *index);
                let mut cmds = link_fix(r, &host);
                if let Some(c) = hca_without(rails.get(node), &[*index]) {
                    cmds.push(format!("{c}   # on {host}, to leave the rail out for now"));
                }
                Finding::new(
                    ID,
                    status,
                    format!("{host} {}", rail_label(&rails, *node, *index)),
                    format!(
                        "{} of {}: NCCL send/recv {} with {} while those partners pass on rail {index} with others ({}, reference {reference}; {retest_note}){}",
                        rail_label(&rails, *node, *index),
                        input.who(*node),
                        if median_gbps.is_some_and(|m| m > 0.0) && errors.is_empty() { "is slow" } else { "fails" },
                        input.hosts_within(bad_with, 60),
                        match median_gbps {
                            Some(m) => format!("median {m:.0} Gb/s"),
                            None => "no run passed".to_string(),
                        },
                        errors.first().map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                )
                .on_node(Some(*node))
                .with("kind", "node-rail")
                .with("rail", index)
                .with("hca", r.map(|r| r.port_name()))
                .with("gpu", r.and_then(|r| r.gpu))
                .with("bad_with", bad_with)
                .with("good_with", good_with)
                .with("median_gbps", median_gbps)
                .with("reference_gbps", v.reference_gbps)
                .with("errors", errors)
                .fix(Fix {
                    hint: format!(
                        "Reseat or replace the cable or transceiver on {} of {host} (mlxlink shows its errors and speed); until then leave the rail out with NCCL_IB_HCA.",
                        r.map(|r| r.port_name()).unwrap_or_else(|| format!("rail {index}"))
                    ),
                    commands: cmds,
                })
            }
            Blame::Node { node, rails: bad } => {
                let host = input.host(*node).unwrap_or_else(|| format!("rank{node}"));
                let names: Vec<String> =
                    bad.iter().map(|i| rail_label(&rails, *node, *i)).collect();
                Finding::new(
                    ID,
                    status,
                    host.clone(),
                    format!(
                        "{} fails or is slow on {} of its rails with partners that pass elsewhere ({}; reference {reference}; {retest_note}): the node itself (HCA driver or firmware, PCIe, GPUDirect), not one cable",
                        input.who(*node),
                        bad.len(),
                        names.join(", ")
                    ),
                )
                .on_node(Some(*node))
                .with("kind", "node")
                .with("rails", bad)
                .with("reference_gbps", v.reference_gbps)
                .fix(
                    Fix::new(format!("Drain {host} and check its RDMA stack: port states, the driver's kernel log, GPUDirect (gpu.peermem, ib.iommu); run the job without it until fixed."))
                        .command(format!("ssh {host} ibstat"))
                        .command(format!("ssh {host} 'dmesg | grep -iE \"mlx5|infiniband\" | tail'"))
                        .command(format!("preflight check --format json   # on {host}")),
                )
            }
            Blame::RailSwitch { rail: index, nodes } => {
                let hca = nodes
                    .first()
                    .and_then(|n| rail(&rails, *n, *index))
                    .map(|r| format!(" ({} on {})", r.port_name(), input.who(nodes[0])))
                    .unwrap_or_default();
                Finding::new(
                    ID,
                    status,
                    format!("rail {index} switch"),
                    format!(
                        "rail {index}{hca} fails or is slow on {} nodes ({}) with more bad partners than good (reference {reference}): the rail-{index} switch or its uplinks, not the nodes",
                        nodes.len(),
                        input.hosts_within(nodes, 80)
                    ),
                )
                .with("kind", "rail-switch")
                .with("rail", index)
                .with("nodes", nodes)
                .with("reference_gbps", v.reference_gbps)
                .fix(
                    Fix::new(format!("Check the switch that carries rail {index} for these nodes (its ports, uplinks and log); until fixed, run the job with NCCL_IB_HCA leaving rail {index}'s HCA out on every node."))
                        .command("ibswitches")
                        .command("ibdiagnet --pc -P all=1")
                        .command("iblinkinfo | grep -v LinkUp"),
                )
            }
            Blame::Pair {
                a,
                b,
                rail: index,
                gbps: value,
                error,
                ends_pass_elsewhere,
            } => {
                let (ha, hb) = (
                    input.host(*a).unwrap_or_else(|| format!("rank{a}")),
                    input.host(*b).unwrap_or_else(|| format!("rank{b}")),
                );
                let ra = rail(&rails, *a, *index);
                let dev = ra.map(|r| r.hca.clone()).unwrap_or_else(|| "mlx5_0".into());
                Finding::new(
                    ID,
                    status,
                    format!("{ha}<->{hb} rail {index}"),
                    format!(
                        "rail {index} between {} ({}) and {} ({}): {}{} ({retest_note}){}",
                        input.who(*a),
                        rail_label(&rails, *a, *index),
                        input.who(*b),
                        rail_label(&rails, *b, *index),
                        match value {
                            Some(v) => format!("{v:.0} Gb/s against a reference of {reference}"),
                            None => "the NCCL send/recv failed".into(),
                        },
                        error.as_ref().map(|e| format!(": {e}")).unwrap_or_default(),
                        if *ends_pass_elsewhere {
                            ": both ends pass with other partners, so it is the path between them (switch ports, routing, cabling)"
                        } else {
                            ": no other partner to tell the two ends from their path (two nodes, or both ends bad elsewhere)"
                        }
                    ),
                )
                .with("kind", "pair")
                .with("ranks", [a, b])
                .with("rail", index)
                .with("gbps", value)
                .with("error", error)
                .with("ends_pass_elsewhere", ends_pass_elsewhere)
                .fix(
                    Fix::new("Reproduce the pair on this rail alone and trace its route; check the switch ports between them.")
                        .command(format!("ssh {hb} ib_write_bw -d {dev} --report_gbits"))
                        .command(format!("ssh {ha} ib_write_bw -d {dev} --report_gbits {hb}"))
                        .command("ibdiagnet --pc -P all=1"),
                )
            }
        };
        out.push(f);
    }
    if out.is_empty() {
        out.push(
            Finding::new(
                ID,
                Status::Pass,
                "rails",
                format!(
                    "{} per-rail NCCL pair tests passed (reference {reference}{})",
                    v.judged,
                    if v.retested { ", after a retest" } else { "" }
                ),
            )
            .with("judged", v.judged)
            .with("reference_gbps", v.reference_gbps),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::NodeFacts;

    #[test]
    fn nodes_left_out_are_named_once_per_reason() {
        let facts: Vec<NodeFacts> = (1..=4)
            .map(|i| NodeFacts {
                hostname: format!("gpu{i:02}"),
                ..Default::default()
            })
            .collect();
        let nodes: Vec<(u32, &NodeFacts)> = facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let input = ClusterInput::of_nodes(&nodes, 4);
        let out = left_out(
            &input,
            &[
                (3, "no InfiniBand/RoCE devices".into()),
                (1, "cannot run NCCL: no GPU visible".into()),
                (2, "cannot run NCCL: no GPU visible".into()),
            ],
        );
        assert_eq!(out.len(), 2, "{out:#?}");
        assert_eq!(out[0].status, Status::Skip);
        assert_eq!(out[0].subject, "gpu[02-03]");
        assert_eq!(
            out[0].summary,
            "2 nodes (gpu[02-03]) took no part in the per-rail NCCL pair tests: cannot run NCCL: no GPU visible"
        );
        assert_eq!(out[0].node, None);
        assert_eq!(
            out[1].summary,
            "rank 3 (gpu04) took no part in the per-rail NCCL pair tests: no InfiniBand/RoCE devices"
        );
        assert_eq!(out[1].node, Some(3));
        assert!(left_out(&input, &[]).is_empty());
    }
}
