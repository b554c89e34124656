//! The healthy-set block under the verdict of a failing cluster: "Train now on 7 of 10 nodes", the nodes to leave out with their finding ids, the master, the launch line with the rank variable, and the re-check.

use super::super::Style;
use super::super::sanitize::{line, shown};
use super::{paint, wrap::wrap};
use preflight_checks::hostlist::compress_within;
use preflight_checks::model::{HealthyExclusion, HealthySetAdvice, Report, Status};
use std::collections::BTreeMap;
use std::fmt::Write;

const COMMAND: &str = "    ";
/// Names of a rank mapping shown before "and N more".
const SHOWN: usize = 8;

/// The block, or nothing when the report has no healthy set.
pub fn block(report: &Report, style: Style, rank: u32, whole: bool) -> String {
    let Some(h) = report
        .recommendation
        .as_ref()
        .and_then(|r| r.healthy_set.as_ref())
    else {
        return String::new();
    };
    let width = usize::from(style.width);
    let mut out = String::from("\n");
    let head = if h.constraints.met {
        format!(
            "Train now on {} of {} nodes: {} ({})",
            h.count,
            h.total,
            shown(&h.hosts),
            if h.largest {
                "the largest set the measurements allow"
            } else {
                "the best set found; a larger one may exist"
            }
        )
    } else {
        format!(
            "{} cannot train now on a healthy set: {}",
            paint::mark(Status::Fail, style),
            line(h.why.as_deref().unwrap_or("the set misses the constraints"))
        )
    };
    out.push_str(&paint::bold(&wrap(&head, width, "", "  "), style));
    out.push_str(&wrap(&leave_out(h), width, "  ", "    "));
    if !whole {
        out.push_str(&this_node(h, rank, width));
        return out;
    }
    if let Some(why) = &h.master_reason {
        out.push_str(&wrap(
            &format!(
                "Master: {} port {}: {}",
                shown(h.master_addr.as_deref().unwrap_or("?")),
                h.master_port,
                line(why)
            ),
            width,
            "  ",
            "    ",
        ));
    }
    if h.constraints.met
        && let Some(first) = h.launch.first()
    {
        out.push_str(&wrap(
            &format!(
                "Launch on each node of the set, NODE_RANK its rank in the set ({}):",
                mapping(h)
            ),
            width,
            "  ",
            "    ",
        ));
        let cmd = first
            .command
            .replacen("--node-rank=0 ", "--node-rank=$NODE_RANK ", 1);
        let _ = writeln!(out, "{COMMAND}{}", line(&cmd));
        if !h.node_env.is_empty() {
            out.push_str(&wrap(
                "Some nodes need their own NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME: take each node's line from `preflight launch --report FILE --healthy-set`.",
                width,
                "  ",
                "    ",
            ));
        }
        out.push_str(&wrap(
            "Every node's line, an srun line, a hostfile or the exclude list: preflight launch --report FILE --healthy-set --format torchrun|srun|hostfile|exclude|sbatch|k8s-env",
            width,
            "  ",
            "    ",
        ));
    }
    out.push_str(&wrap(
        "Re-check the set (on each of its nodes):",
        width,
        "  ",
        "    ",
    ));
    let _ = writeln!(out, "{COMMAND}{}", line(&h.recheck));
    out
}

/// "Leave out 3: node04 (cluster.rendezvous), node[06,09] (link.unreachable)".
fn leave_out(h: &HealthySetAdvice) -> String {
    if h.excluded.is_empty() {
        return "Leave out no node".into();
    }
    let mut by_why: BTreeMap<String, Vec<&HealthyExclusion>> = BTreeMap::new();
    for e in &h.excluded {
        let key = if e.idle {
            format!("idle: --nodes-multiple-of {}", h.constraints.multiple_of)
        } else {
            e.reasons.join(", ")
        };
        by_why.entry(key).or_default().push(e);
    }
    let mut groups: Vec<(String, Vec<&HealthyExclusion>)> = by_why.into_iter().collect();
    groups.sort_by_key(|(_, names)| std::cmp::Reverse(names.len()));
    let parts: Vec<String> = groups
        .iter()
        .map(|(why, nodes)| {
            // Hosts in hostlist syntax; a node with no known name by its rank.
            let names: Vec<&str> = nodes
                .iter()
                .map(|e| e.hostname.as_str())
                .filter(|h| !h.is_empty())
                .collect();
            let mut who: Vec<String> = Vec::new();
            if !names.is_empty() {
                who.push(shown(&compress_within(&names, 60)).into_owned());
            }
            let unnamed: Vec<String> = nodes
                .iter()
                .filter(|e| e.hostname.is_empty())
                .map(|e| format!("rank {}", e.node))
                .collect();
            if !unnamed.is_empty() {
                who.push(unnamed.join(", "));
            }
            format!("{} ({})", who.join(", "), shown(why))
        })
        .collect();
    format!("Leave out {}: {}", h.excluded.len(), parts.join(", "))
}

/// "node02=0, node01=1, ... and 90 more".
fn mapping(h: &HealthySetAdvice) -> String {
    let mut parts: Vec<String> = h
        .launch
        .iter()
        .take(SHOWN)
        .map(|l| format!("{}={}", shown(&l.hostname), l.node_rank))
        .collect();
    if h.launch.len() > SHOWN {
        parts.push(format!("and {} more", h.launch.len() - SHOWN));
    }
    parts.join(", ")
}

/// What a node other than rank 0 needs: left out, or its own line in the set.
fn this_node(h: &HealthySetAdvice, rank: u32, width: usize) -> String {
    if let Some(e) = h.excluded.iter().find(|e| e.node == rank) {
        return wrap(
            &format!("This node (rank {rank}) is left out: {}", line(&e.why)),
            width,
            "  ",
            "    ",
        );
    }
    match h.launch.iter().find(|l| l.node == rank) {
        Some(l) if h.constraints.met => format!(
            "  This node is rank {} of the set; its command:\n{COMMAND}{}\n",
            l.node_rank,
            line(&l.command)
        ),
        _ => String::new(),
    }
}
