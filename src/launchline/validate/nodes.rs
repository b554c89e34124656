//! `launch.nnodes` and `launch.node-rank`: the node count and this node's rank in it.

use super::{CommandShape, Correction, finding, flag};
use crate::launchline::args::Parsed;
use preflight_checks::model::{Finding, Fix, Status};
use std::net::IpAddr;

pub(super) fn nnodes(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let name = flag(p, "nnodes");
    let given = p.value("nnodes");
    let rank = plan.rank;
    let f = match (given, plan.nnodes) {
        (Some(v), None) => finding(
            preflight_checks::launch::ids::NNODES,
            Status::Fail,
            rank,
            v,
            format!("{name}={v} on rank {rank} is neither N nor MIN:MAX; torchrun stops"),
        )
        .with("nnodes", v)
        .fix(Fix::new(format!("use {name}=2 (two nodes) or {name}=1:4 (elastic)"))),
        (Some(v), Some((min, max))) if min == 0 || min > max => {
            let fixed = if min > max && max > 0 {
                format!("{max}:{min}")
            } else {
                "1".to_string()
            };
            let f = finding(
                preflight_checks::launch::ids::NNODES,
                Status::Fail,
                rank,
                v,
                format!("{name}={v} on rank {rank}: torchrun needs 0 < MIN <= MAX (assert 0 < min_nodes <= max_nodes)"),
            )
            .with("nnodes", v)
            .fix(Fix::new(format!("use {name}={fixed}")));
            return (
                f,
                Some(Correction::SetValue {
                    name: "nnodes",
                    value: fixed,
                }),
            );
        }
        (Some(v), Some((min, max))) if min != max && plan.backend == "static" && !plan.standalone => {
            finding(
                preflight_checks::launch::ids::NNODES,
                Status::Warn,
                rank,
                v,
                format!("{name}={v} is an elastic range, but the static rendezvous needs a fixed count and waits for {max} nodes"),
            )
            .with("nnodes", v)
            .fix(Fix::new(format!("use --rdzv-backend=c10d with {name}={v}, or a fixed {name}={max}")))
        }
        (None, _) if multi_node_hint(p, plan).is_some() => {
            let why = multi_node_hint(p, plan).unwrap_or_default();
            let at_least = (plan.rank + 1).max(2);
            finding(
                preflight_checks::launch::ids::NNODES,
                Status::Fail,
                rank,
                "--nnodes",
                format!("--nnodes is missing, so torchrun on rank {rank} runs a 1-node job on its own although {why}"),
            )
            .with("nnodes", "1:1 (default)")
            .with("because", why)
            .fix(Fix::new(format!("add --nnodes=N with N the number of nodes (at least {at_least}), the same on every node")))
        }
        _ => {
            let (min, max) = plan.nnodes.unwrap_or((1, 1));
            let shown = given.unwrap_or("1 (default)");
            finding(
                preflight_checks::launch::ids::NNODES,
                Status::Pass,
                rank,
                shown,
                if min == max {
                    format!("{max} node(s)")
                } else {
                    format!("elastic: {min} to {max} nodes")
                },
            )
            .with("min", min)
            .with("max", max)
        }
    };
    (f, None)
}

/// Why the command looks multi-node although `--nnodes` is absent.
fn multi_node_hint(p: &Parsed, plan: &CommandShape) -> Option<String> {
    if plan.standalone {
        return None;
    }
    if plan.rank > 0 {
        return Some(format!("{}={}", flag(p, "node-rank"), plan.rank));
    }
    match &plan.endpoint {
        Some((host, _))
            if !is_loopback_name(host) && (p.has("master-addr") || p.has("rdzv-endpoint")) =>
        {
            Some(format!(
                "the rendezvous is on {host}, another machine's address"
            ))
        }
        _ => None,
    }
}

fn is_loopback_name(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

pub(super) fn node_rank(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let name = flag(p, "node-rank");
    let max = plan.max_nodes();
    let given = p.value("node-rank");
    if let Some(v) = given {
        if v.trim().parse::<u32>().is_err() {
            let f = finding(
                preflight_checks::launch::ids::NODE_RANK,
                Status::Fail,
                0,
                v,
                format!("{name}={v} is not a whole number; torchrun stops"),
            )
            .with("node_rank", v)
            .fix(Fix::new(format!(
                "use {name}=R with R this node's rank, 0..{}",
                max.saturating_sub(1)
            )));
            return (f, None);
        }
    }
    // `--nnodes=0` (max 0) is launch.nnodes' failure; there is no rank range to hold this one to.
    if plan.nnodes.is_some() && max > 0 && plan.rank >= max && !plan.standalone {
        let last = max - 1;
        let f = finding(
            preflight_checks::launch::ids::NODE_RANK,
            Status::Fail,
            plan.rank,
            plan.rank.to_string(),
            format!(
                "{name}={} but {} node(s): ranks run 0..{last}, so torchrun waits forever for nodes that do not exist",
                plan.rank, max
            ),
        )
        .with("node_rank", plan.rank)
        .with("nnodes", max);
        if max == 1 {
            let f = f.fix(Fix::new(format!("a 1-node job is rank 0: use {name}=0")));
            return (
                f,
                Some(Correction::SetValue {
                    name: "node-rank",
                    value: "0".into(),
                }),
            );
        }
        return (
            f.fix(Fix::new(format!(
                "use {name}=R with R in 0..{last}, a different one on each node"
            ))),
            None,
        );
    }
    if plan.is_multi_node() && plan.backend == "static" && !plan.rank_given {
        let f = finding(
            preflight_checks::launch::ids::NODE_RANK,
            Status::Fail,
            0,
            "--node-rank",
            format!(
                "--node-rank is missing in a {max}-node static rendezvous: every node takes the default rank 0 and they never form a group"
            ),
        )
        .with("nnodes", max)
        .fix(Fix::new(format!(
            "add --node-rank=R on each node (0 on the master, 1..{} on the others), or use --rdzv-backend=c10d which assigns ranks",
            max - 1
        )));
        return (f, None);
    }
    let f = finding(
        preflight_checks::launch::ids::NODE_RANK,
        Status::Pass,
        plan.rank,
        plan.rank.to_string(),
        if plan.backend != "static" && !plan.standalone && plan.is_multi_node() {
            format!(
                "the {} rendezvous assigns node ranks; this node reads as rank {}",
                plan.backend, plan.rank
            )
        } else {
            format!("node rank {} of {}", plan.rank, max)
        },
    )
    .with("node_rank", plan.rank)
    .with("given", plan.rank_given);
    (f, None)
}
