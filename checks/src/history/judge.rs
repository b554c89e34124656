//! `history.lemon`: the lemon rules over each node's own past runs (`facts.history`, as it sent
//! them) and this run, as findings. A node's history speaks only for that node: rank 0 files
//! every run it sent under its own host name, keeps the bounds, and names a pair only when both
//! ends recorded it, so no node's claims can make another node a lemon.

use super::ids::LEMON;
use super::{Lemon, RunInfo, lemons, node_runs};
use crate::core::{
    Action, Entry, Fault, Finding, FindingRec, Fix, NodeRun, Problem, RUN_FINDINGS, Remedy, Report,
    SUMMARY_RUNS, Status,
};

/// The catalog entry of a finding id (the registry's): its action, and the kind of fault that
/// decides how far a lemon escalates.
pub type Catalog<'a> = &'a dyn Fn(&str) -> Option<Entry>;
use std::collections::{BTreeMap, BTreeSet};

/// The `history.lemon` findings for `report`'s nodes: their past runs and this one. `catalog`
/// gives a finding id's entry, whose action a lemon escalates as far as its kind of fault goes.
pub fn judge(report: &Report, info: &RunInfo, catalog: Catalog) -> Vec<Finding> {
    let runs = runs_of(report, info);
    if runs.iter().all(|r| r.run == info.run) {
        return Vec::new();
    }
    let ranks: BTreeMap<&str, u32> = report
        .nodes
        .iter()
        .rev()
        .map(|n| (n.hostname.as_str(), n.rank))
        .collect();
    lemons(&runs)
        .into_iter()
        .filter(|l| trusted(l, &runs))
        .filter_map(|l| {
            let host = lemon_node(&l);
            let rank = match host {
                Some(h) => Some(*ranks.get(h)?),
                None => None,
            };
            Some(finding(&l, &runs, catalog).on_node(rank))
        })
        .collect()
}

/// The node a lemon names; None for a pair.
pub fn lemon_node(l: &Lemon) -> Option<&str> {
    match l {
        Lemon::Repeat { node, .. }
        | Lemon::XidBursts { node, .. }
        | Lemon::LinkMoves { node, .. }
        | Lemon::LeftOut { node, .. } => Some(node),
        Lemon::Pair { .. } => None,
    }
}

/// Every lemon of `runs` (records of many nodes, as `preflight history` reads them) as a
/// `history.lemon` finding without a rank.
pub fn describe(runs: &[NodeRun], catalog: Catalog) -> Vec<Finding> {
    lemons(runs)
        .iter()
        .map(|l| finding(l, runs, catalog))
        .collect()
}

/// Every node's past runs as it sent them (filed under its host name, within the bounds, this
/// run's own id left out) and this run's records.
fn runs_of(report: &Report, info: &RunInfo) -> Vec<NodeRun> {
    let mut runs = Vec::new();
    for n in &report.nodes {
        let Some(h) = &n.facts.history else { continue };
        let start = h.runs.len().saturating_sub(SUMMARY_RUNS);
        for r in &h.runs[start..] {
            if r.run == info.run {
                continue;
            }
            let mut r = r.clone();
            r.node = n.hostname.clone();
            r.findings.truncate(RUN_FINDINGS);
            runs.push(r);
        }
    }
    runs.extend(node_runs(report, info));
    runs
}

/// A pair is named only when each end's own records name the other.
fn trusted(l: &Lemon, runs: &[NodeRun]) -> bool {
    let Lemon::Pair { a, b, .. } = l else {
        return true;
    };
    let names = |me: &str, other: &str| {
        runs.iter().filter(|r| r.node == me).any(|r| {
            r.findings
                .iter()
                .any(|f| f.partner.as_deref() == Some(other))
        })
    };
    names(a, b) && names(b, a)
}

/// The worst catalog action among `ids` and the kind of their fault (hardware over
/// configuration), escalated as far as that kind goes ([`Fault::escalate`]: hardware towards a
/// GPU reset, a reboot, a repair, a replacement; a configuration fault stays a change of
/// configuration or a reboot). An id the catalog does not hold is hardware to repair.
fn escalated<'a>(ids: impl Iterator<Item = &'a str> + Clone, catalog: Catalog) -> (Action, Fault) {
    let on_gpu = ids.clone().any(|id| id.starts_with(GPU_CONCERN));
    let entries: Vec<Option<Entry>> = ids.map(catalog).collect();
    let action = entries
        .iter()
        .map(|e| {
            e.and_then(|e| e.remedy)
                .map_or(Action::DrainAndRepair, |r| r.action)
        })
        .max()
        .unwrap_or(Action::None);
    let fault = entries
        .iter()
        .map(|e| e.map_or(Fault::Hardware, |e| e.fault()))
        .max()
        .unwrap_or(Fault::Hardware)
        .max(Fault::Config);
    (fault.escalate(action, on_gpu), fault)
}

/// The prefix every GPU finding id shares (`gpu.xid`, `gpu.ecc`, ...).
const GPU_CONCERN: &str = "gpu.";

fn finding(l: &Lemon, runs: &[NodeRun], catalog: Catalog) -> Finding {
    let dates = |node: &str, pick: &dyn Fn(&FindingRec) -> bool| {
        let t: Vec<i64> = runs
            .iter()
            .filter(|r| r.node == node && r.findings.iter().any(pick))
            .map(|r| r.time)
            .collect();
        (t.iter().min().copied(), t.iter().max().copied())
    };
    let (node, rule, subject, summary, (action, fault), (first, last)) = match l {
        Lemon::Repeat {
            node,
            finding,
            runs: n,
            window,
        } => (
            Some(node.as_str()),
            "repeat",
            finding.clone(),
            format!(
                "{node} had {finding} in {n} of its last {window} runs, and it went away in between{}: the fault comes and goes with this node",
                if runs.iter().any(|r| r.node == *node
                    && r.nodes > 1
                    && r.findings.iter().any(|f| f.id == *finding))
                {
                    ", while the other nodes of those runs passed it"
                } else {
                    ""
                }
            ),
            escalated(std::iter::once(finding.as_str()), catalog),
            dates(node, &|f| f.id == *finding),
        ),
        Lemon::XidBursts {
            node,
            gpu,
            xid,
            bursts,
        } => (
            Some(node.as_str()),
            "xid-bursts",
            format!("GPU {gpu} XID {xid}"),
            format!(
                "GPU {gpu} of {node} logged XID {xid} in {bursts} bursts within 24 h (NVSentinel's rule: {} bursts, split by {} s of quiet)",
                super::BURST_MIN,
                super::BURST_GAP_S
            ),
            escalated(std::iter::once(crate::gpu::ids::XID.as_str()), catalog),
            dates(node, &|f| f.xid == Some(*xid) && f.gpu == Some(*gpu)),
        ),
        Lemon::LinkMoves {
            node,
            partners,
            runs: n,
            itself,
        } => (
            Some(node.as_str()),
            "link-moves",
            "links".to_string(),
            format!(
                "{node} had link faults in {n} runs, {}: the fault moves with the node (its NIC, cable or switch port)",
                match (*itself, partners.is_empty()) {
                    (true, true) =>
                        "named slow or unreachable itself, with every partner".to_string(),
                    (true, false) => format!(
                        "named slow or unreachable itself, and with {}",
                        partners.join(", ")
                    ),
                    _ => format!("with different partners ({})", partners.join(", ")),
                }
            ),
            escalated(
                [crate::link::ids::SLOW, crate::link::ids::UNREACHABLE]
                    .iter()
                    .map(|id| id.as_str()),
                catalog,
            ),
            dates(node, &|f| f.id.starts_with("link.")),
        ),
        Lemon::Pair { a, b, runs: n } => (
            None,
            "pair",
            format!("{a}<->{b}"),
            format!(
                "the link between {a} and {b} failed in {n} runs while each worked with its other partners: its cable or switch port, not either node"
            ),
            (Action::DrainAndRepair, Fault::Hardware),
            dates(a, &|f| f.partner.as_deref() == Some(b.as_str())),
        ),
        Lemon::LeftOut { node, out, runs: n } => (
            Some(node.as_str()),
            "left-out",
            "healthy set".to_string(),
            format!(
                "{node} was left out of the healthy set in {out} of its {n} runs (more than a third)"
            ),
            (Action::None.escalate(false), Fault::Hardware),
            (None, None),
        ),
    };
    let reason = format!("preflight: [node_problem] {action}: lemon ({rule}) {subject}");
    let mut fix = Fix::new(match (node, fault) {
        (Some(host), Fault::Config | Fault::User) => format!(
            "{host} keeps getting this back after it was fixed: the fix did not hold. Find what \
             restores it (a configuration manager, the node image, a cron job or a service) and \
             fix it there{}; `preflight history` on the node lists every run that named it.",
            if action == Action::Reboot {
                ", or reboot the node to clear what it left running"
            } else {
                ""
            }
        ),
        (host, _) => format!(
            "{} Take it out of service and {}; `preflight history` on the node lists every run that named it.",
            match host {
                Some(host) =>
                    format!("{host} is a lemon: the same hardware fault returns run after run."),
                None => "The fault stays with this pair of nodes.".to_string(),
            },
            match action {
                Action::Replace => "replace the part (contact the vendor)",
                Action::Reboot => "reboot it",
                Action::ResetGpu => "reset the GPU",
                _ => "repair it",
            }
        ),
    });
    if let (Some(host), Fault::Hardware) = (node, fault) {
        fix = fix.command(format!(
            "scontrol update NodeName={host} State=DRAIN Reason={}",
            crate::infra::shellword::quote(&reason)
        ));
    }
    fix = fix.command("preflight history");
    let mut f = Finding::new(LEMON, Status::Warn, subject, summary)
        .with("rule", rule)
        .with("fault", fault.as_str())
        .with("runs", lemon_runs(l))
        .remedy(Remedy {
            action,
            problem: Problem::Node,
        })
        .fix(fix);
    if let (Some(first), Some(last)) = (first, last) {
        f = f.with("first_seen", first).with("last_seen", last);
    }
    match l {
        Lemon::Repeat { finding, .. } => f = f.with("finding", finding),
        Lemon::XidBursts {
            gpu, xid, bursts, ..
        } => f = f.with("gpu", gpu).with("xid", xid).with("bursts", bursts),
        Lemon::LinkMoves { partners, .. } => f = f.with("partners", partners),
        Lemon::Pair { a, b, .. } => f = f.with("nodes", [a, b]),
        Lemon::LeftOut { out, .. } => f = f.with("left_out", out),
    }
    if let Some(host) = node {
        f = f.with("hostname", host);
    }
    f
}

fn lemon_runs(l: &Lemon) -> usize {
    match l {
        Lemon::Repeat { runs, .. }
        | Lemon::LinkMoves { runs, .. }
        | Lemon::Pair { runs, .. }
        | Lemon::LeftOut { runs, .. } => *runs,
        Lemon::XidBursts { bursts, .. } => *bursts,
    }
}

/// Host names of nodes `findings` names lemons (for the drain hooks and the summary line).
pub fn lemon_hosts(report: &Report) -> BTreeSet<String> {
    report
        .findings
        .iter()
        .filter(|f| f.is(LEMON))
        .filter_map(|f| f.node.and_then(|r| report.hostname(r)).map(str::to_string))
        .collect()
}
