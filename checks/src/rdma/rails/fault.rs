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

/// What every `ib.rail-fault` finding of one verdict shares: the rails, the reference, the status.
struct Ctx<'a> {
    input: &'a ClusterInput<'a>,
    rails: BTreeMap<u32, Vec<Rail>>,
    reference: String,
    reference_gbps: Option<f64>,
    status: Status,
    retest_note: &'static str,
}

impl Ctx<'_> {
    fn host(&self, rank: u32) -> String {
        self.input
            .host(rank)
            .unwrap_or_else(|| format!("rank{rank}"))
    }
}

pub fn findings(input: &ClusterInput, v: &RailVerdict) -> Vec<Finding> {
    let c = Ctx {
        input,
        rails: rails_by_rank(input),
        reference: gbps(v.reference_gbps),
        reference_gbps: v.reference_gbps,
        status: if v.retested {
            Status::Fail
        } else {
            Status::Warn
        },
        retest_note: if v.retested {
            "confirmed by a retest against known-good partners"
        } else {
            "not yet retested"
        },
    };
    let mut out: Vec<Finding> = v.blames.iter().map(|b| blame_finding(&c, b)).collect();
    if out.is_empty() {
        out.push(
            Finding::new(
                ID,
                Status::Pass,
                "rails",
                format!(
                    "{} per-rail NCCL pair tests passed (reference {}{})",
                    v.judged,
                    c.reference,
                    if v.retested { ", after a retest" } else { "" }
                ),
            )
            .with("judged", v.judged)
            .with("reference_gbps", v.reference_gbps),
        );
    }
    out
}

fn blame_finding(c: &Ctx, b: &Blame) -> Finding {
    match b {
        Blame::NodeRail {
            node,
            rail: index,
            bad_with,
            good_with,
            median_gbps,
            errors,
        } => node_rail(
            c,
            *node,
            *index,
            (bad_with, good_with),
            *median_gbps,
            errors,
        ),
        Blame::Node { node, rails: bad } => whole_node(c, *node, bad),
        Blame::RailSwitch { rail: index, nodes } => rail_switch(c, *index, nodes),
        Blame::Pair {
            a,
            b,
            rail: index,
            gbps: value,
            error,
            ends_pass_elsewhere,
        } => pair(
            c,
            (*a, *b),
            *index,
            *value,
            error.as_deref(),
            *ends_pass_elsewhere,
        ),
    }
}

/// One node's rail, bad with `bad_with` while those partners pass on it with others.
fn node_rail(
    c: &Ctx,
    node: u32,
    index: u32,
    (bad_with, good_with): (&[u32], &[u32]),
    median_gbps: Option<f64>,
    errors: &[String],
) -> Finding {
    let (input, rails, reference, retest_note) = (c.input, &c.rails, &c.reference, c.retest_note);
    let host = c.host(node);
    let r = rail(rails, node, index);
    let mut cmds = link_fix(r, &host);
    if let Some(cmd) = hca_without(rails.get(&node), &[index]) {
        cmds.push(format!(
            "{cmd}   # on {host}, to leave the rail out for now"
        ));
    }
    Finding::new(
        ID,
        c.status,
        format!("{host} {}", rail_label(rails, node, index)),
        format!(
            "{} of {}: NCCL send/recv {} with {} while those partners pass on rail {index} with others ({}, reference {reference}; {retest_note}){}",
            rail_label(rails, node, index),
            input.who(node),
            if median_gbps.is_some_and(|m| m > 0.0) && errors.is_empty() { "is slow" } else { "fails" },
            input.hosts_within(bad_with, 60),
            match median_gbps {
                Some(m) => format!("median {m:.0} Gb/s"),
                None => "no run passed".to_string(),
            },
            errors.first().map(|e| format!(": {e}")).unwrap_or_default()
        ),
    )
    .on_node(Some(node))
    .with("kind", "node-rail")
    .with("rail", index)
    .with("hca", r.map(|r| r.port_name()))
    .with("gpu", r.and_then(|r| r.gpu))
    .with("bad_with", bad_with)
    .with("good_with", good_with)
    .with("median_gbps", median_gbps)
    .with("reference_gbps", c.reference_gbps)
    .with("errors", errors)
    .fix(Fix {
        hint: format!(
            "Reseat or replace the cable or transceiver on {} of {host} (mlxlink shows its errors and speed); until then leave the rail out with NCCL_IB_HCA.",
            r.map(|r| r.port_name()).unwrap_or_else(|| format!("rail {index}"))
        ),
        commands: cmds,
    })
}

/// Most of a node's rails bad: the node itself, not one cable.
fn whole_node(c: &Ctx, node: u32, bad: &[u32]) -> Finding {
    let (reference, retest_note) = (&c.reference, c.retest_note);
    let host = c.host(node);
    let names: Vec<String> = bad.iter().map(|i| rail_label(&c.rails, node, *i)).collect();
    Finding::new(
        ID,
        c.status,
        host.clone(),
        format!(
            "{} fails or is slow on {} of its rails with partners that pass elsewhere ({}; reference {reference}; {retest_note}): the node itself (HCA driver or firmware, PCIe, GPUDirect), not one cable",
            c.input.who(node),
            bad.len(),
            names.join(", ")
        ),
    )
    .on_node(Some(node))
    .with("kind", "node")
    .with("rails", bad)
    .with("reference_gbps", c.reference_gbps)
    .fix(
        Fix::new(format!("Drain {host} and check its RDMA stack: port states, the driver's kernel log, GPUDirect (gpu.peermem, ib.iommu); run the job without it until fixed."))
            .command(format!("ssh {host} ibstat"))
            .command(format!("ssh {host} 'dmesg | grep -iE \"mlx5|infiniband\" | tail'"))
            .command(format!("preflight check --format json   # on {host}")),
    )
}

/// The same rail bad on many nodes: that rail's switch or its uplinks.
fn rail_switch(c: &Ctx, index: u32, nodes: &[u32]) -> Finding {
    let (input, reference) = (c.input, &c.reference);
    let hca = nodes
        .first()
        .and_then(|n| rail(&c.rails, *n, index))
        .map(|r| format!(" ({} on {})", r.port_name(), input.who(nodes[0])))
        .unwrap_or_default();
    Finding::new(
        ID,
        c.status,
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
    .with("reference_gbps", c.reference_gbps)
    .fix(
        Fix::new(format!("Check the switch that carries rail {index} for these nodes (its ports, uplinks and log); until fixed, run the job with NCCL_IB_HCA leaving rail {index}'s HCA out on every node."))
            .command("ibswitches")
            .command("ibdiagnet --pc -P all=1")
            .command("iblinkinfo | grep -v LinkUp"),
    )
}

/// One pair on one rail: the path between the two ends.
fn pair(
    c: &Ctx,
    (a, b): (u32, u32),
    index: u32,
    value: Option<f64>,
    error: Option<&str>,
    ends_pass_elsewhere: bool,
) -> Finding {
    let (input, rails, reference, retest_note) = (c.input, &c.rails, &c.reference, c.retest_note);
    let (ha, hb) = (c.host(a), c.host(b));
    let ra = rail(rails, a, index);
    let dev = ra.map(|r| r.hca.clone()).unwrap_or_else(|| "mlx5_0".into());
    Finding::new(
        ID,
        c.status,
        format!("{ha}<->{hb} rail {index}"),
        format!(
            "rail {index} between {} ({}) and {} ({}): {}{} ({retest_note}){}",
            input.who(a),
            rail_label(rails, a, index),
            input.who(b),
            rail_label(rails, b, index),
            match value {
                Some(v) => format!("{v:.0} Gb/s against a reference of {reference}"),
                None => "the NCCL send/recv failed".into(),
            },
            error.map(|e| format!(": {e}")).unwrap_or_default(),
            if ends_pass_elsewhere {
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
