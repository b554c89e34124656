//! Lemon rules over plain history records: pure judgments, no storage (issue 44, point 3).
//!
//! The records are [`NodeRun`]s: one node's view of one run, from its own store or from the
//! JSON reports of many nodes. Each rule is stated in the guide (docs/src/history.md) with its
//! source.

pub mod catalog;
mod from_report;
pub mod ids;
mod judge;
mod node;
pub mod runs;
mod standing;
mod view;

pub use judge::{Catalog, describe, judge, lemon_hosts, lemon_node};
pub use runs::{comes_and_goes, merge, run_key};
pub use standing::mark_standing;
pub use view::{HistoryView, NodeView, view};

pub use from_report::{RunInfo, node_runs};

pub use node::check as check_node;

use std::collections::{BTreeMap, BTreeSet};

pub use crate::core::{FindingRec, HistorySummary, NodeRun};

/// Why a node (or a pair) was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lemon {
    /// Same finding in >= 3 of the node's last 10 runs while other nodes of those runs passed it,
    /// and gone in a run between two that had it (a fault that stands is not a lemon).
    Repeat {
        node: String,
        finding: String,
        runs: usize,
        /// The node's runs the rule looked at (its last [`REPEAT_WINDOW`], or all it has).
        window: usize,
    },
    /// Same XID on one GPU in >= 5 bursts within 24 h (bursts split by 180 s quiet; NVSentinel).
    XidBursts {
        node: String,
        gpu: u32,
        xid: u32,
        bursts: usize,
    },
    /// `link.slow`/`link.unreachable` on the node in >= 2 runs with different partners (or
    /// naming the node itself, whatever its partner): the fault moves with the node.
    LinkMoves {
        node: String,
        /// The partners named (empty when every finding named the node itself).
        partners: Vec<String>,
        runs: usize,
        /// Some finding named the node itself slow or unreachable, whatever its partner.
        itself: bool,
    },
    /// A fault that stays with one pair in >= 2 runs: its cable or port, not either node.
    Pair { a: String, b: String, runs: usize },
    /// Left out of the healthy set in more than a third of >= 3 runs, and back in it between.
    LeftOut {
        node: String,
        out: usize,
        runs: usize,
    },
}

/// Window of a node's most recent runs the repeat rule looks at.
pub const REPEAT_WINDOW: usize = 10;
/// Runs within the window that make a repeat lemon.
pub const REPEAT_MIN: usize = 3;
/// Quiet gap that splits XID bursts (NVSentinel).
pub const BURST_GAP_S: i64 = 180;
/// Bursts within [`BURST_WINDOW_S`] that make an XID lemon (NVSentinel).
pub const BURST_MIN: usize = 5;
/// Window for XID bursts.
pub const BURST_WINDOW_S: i64 = 24 * 3600;

/// Ids judged by a rule of their own (XID bursts, link faults that move), not by repeats.
fn has_own_rule(id: &str) -> bool {
    is_link(id) || id == crate::gpu::ids::XID.as_str() || id.starts_with("history.")
}

fn is_link(id: &str) -> bool {
    id == crate::link::ids::SLOW.as_str() || id == crate::link::ids::UNREACHABLE.as_str()
}

/// Every lemon the rules name over `runs`, in a stable order. Each node's runs are counted
/// once ([`merge`]), and each rule names only a fault that came back after it had gone.
pub fn lemons(runs: &[NodeRun]) -> Vec<Lemon> {
    let merged;
    let runs = if runs::is_merged(runs) {
        runs
    } else {
        merged = merge(runs);
        &merged[..]
    };
    let mut out = repeat(runs);
    out.extend(xid_bursts(runs));
    out.extend(links(runs));
    out.extend(left_out(runs));
    out
}

fn by_node(runs: &[NodeRun]) -> BTreeMap<&str, Vec<&NodeRun>> {
    let mut m: BTreeMap<&str, Vec<&NodeRun>> = BTreeMap::new();
    for r in runs {
        m.entry(r.node.as_str()).or_default().push(r);
    }
    for v in m.values_mut() {
        v.sort_by_key(|r| r.time);
    }
    m
}

fn repeat(runs: &[NodeRun]) -> Vec<Lemon> {
    // Per run: the distinct nodes that took part, and those that had each finding id.
    let mut nodes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut with: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for r in runs {
        nodes
            .entry(r.run.as_str())
            .or_default()
            .insert(r.node.as_str());
        for f in &r.findings {
            with.entry((r.run.as_str(), f.id.as_str()))
                .or_default()
                .insert(r.node.as_str());
        }
    }
    let size: BTreeMap<&str, usize> = nodes.iter().map(|(k, v)| (*k, v.len())).collect();
    let had: BTreeMap<(&str, &str), usize> = with.iter().map(|(k, v)| (*k, v.len())).collect();
    let mut out = Vec::new();
    for (node, nr) in by_node(runs) {
        let last = &nr[nr.len().saturating_sub(REPEAT_WINDOW)..];
        let ids_of = |r: &NodeRun| -> BTreeSet<String> {
            r.findings
                .iter()
                .filter(|f| !f.user)
                .map(|f| f.id.clone())
                .collect()
        };
        let per_run: Vec<BTreeSet<String>> = last.iter().map(|r| ids_of(r)).collect();
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (r, ids) in last.iter().zip(&per_run) {
            for id in ids {
                if others_passed(r, id, &size, &had) {
                    *count.entry(id.as_str()).or_default() += 1;
                }
            }
        }
        for (id, c) in count {
            let returned = comes_and_goes(per_run.iter().map(|ids| ids.contains(id)));
            if c >= REPEAT_MIN && returned && !has_own_rule(id) {
                out.push(Lemon::Repeat {
                    node: node.into(),
                    finding: id.into(),
                    runs: c,
                    window: last.len(),
                });
            }
        }
    }
    out
}

/// Whether some other node of `r`'s run passed `id`: counted over the records of that run at
/// hand (many nodes' reports), else from the counts the node recorded (its own store). A run
/// of one node has no other node: it counts, so a node checked alone is judged by itself.
fn others_passed(
    r: &NodeRun,
    id: &str,
    size: &BTreeMap<&str, usize>,
    had: &BTreeMap<(&str, &str), usize>,
) -> bool {
    let n = size.get(r.run.as_str()).copied().unwrap_or(0);
    if n > 1 {
        let h = had.get(&(r.run.as_str(), id)).copied().unwrap_or(0);
        return h < n;
    }
    let with = r
        .findings
        .iter()
        .find(|f| f.id == id)
        .map_or(0, |f| f.with.max(1));
    r.nodes <= 1 || with < r.nodes
}

/// Number of bursts in the densest 24 h window of sorted event times.
pub fn max_bursts_24h(times: &[i64]) -> usize {
    let mut starts = Vec::new();
    let mut prev: Option<i64> = None;
    for &t in times {
        if prev.is_none_or(|p| t - p > BURST_GAP_S) {
            starts.push(t);
        }
        prev = Some(t);
    }
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..starts.len() {
        while starts[hi] - starts[lo] >= BURST_WINDOW_S {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

fn xid_bursts(runs: &[NodeRun]) -> Vec<Lemon> {
    let mut ev: BTreeMap<(&str, u32, u32), Vec<i64>> = BTreeMap::new();
    for r in runs {
        for f in &r.findings {
            if let (Some(g), Some(x)) = (f.gpu, f.xid) {
                ev.entry((r.node.as_str(), g, x))
                    .or_default()
                    .push(f.at.unwrap_or(r.time));
            }
        }
    }
    let mut out = Vec::new();
    for ((node, gpu, xid), mut t) in ev {
        // Successive runs see the same logged event: count it once.
        t.sort_unstable();
        t.dedup();
        let bursts = max_bursts_24h(&t);
        if bursts >= BURST_MIN {
            out.push(Lemon::XidBursts {
                node: node.into(),
                gpu,
                xid,
                bursts,
            });
        }
    }
    out
}

fn links(runs: &[NodeRun]) -> Vec<Lemon> {
    // Runs (by run id) in which each unordered pair had a link fault.
    let mut pairs: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    // Per node: the runs with a link fault on it, and the partners named in them (a fault that
    // names the node itself, with no partner, is one with every partner).
    let mut faulty: BTreeMap<&str, (BTreeSet<&str>, BTreeSet<&str>, bool)> = BTreeMap::new();
    for r in runs {
        for f in r.findings.iter().filter(|f| is_link(&f.id)) {
            let entry = faulty.entry(r.node.as_str()).or_default();
            entry.0.insert(r.run.as_str());
            match &f.partner {
                Some(p) => {
                    entry.1.insert(p.as_str());
                    let key = if r.node.as_str() <= p.as_str() {
                        (r.node.as_str(), p.as_str())
                    } else {
                        (p.as_str(), r.node.as_str())
                    };
                    pairs.entry(key).or_default().insert(r.run.as_str());
                }
                None => entry.2 = true,
            }
        }
    }
    // A node's (or a pair's) link faults count only when they came and went over its runs.
    let nodes = by_node(runs);
    let returned = |node: &str, faulty_run: &dyn Fn(&str) -> bool| {
        nodes
            .get(node)
            .is_some_and(|nr| comes_and_goes(nr.iter().map(|r| faulty_run(r.run.as_str()))))
    };
    let moving: BTreeSet<&str> = faulty
        .iter()
        .filter(|(_, (rs, ps, any))| rs.len() >= 2 && (ps.len() >= 2 || *any))
        .filter(|(n, (rs, _, _))| returned(n, &|run| rs.contains(run)))
        .map(|(n, _)| *n)
        .collect();
    let mut out: Vec<Lemon> = moving
        .iter()
        .map(|n| Lemon::LinkMoves {
            node: (*n).into(),
            partners: faulty[n].1.iter().map(|p| (*p).into()).collect(),
            runs: faulty[n].0.len(),
            itself: faulty[n].2,
        })
        .collect();
    for ((a, b), rs) in &pairs {
        if rs.len() >= 2
            && !moving.contains(a)
            && !moving.contains(b)
            && returned(a, &|run| rs.contains(run))
        {
            out.push(Lemon::Pair {
                a: (*a).into(),
                b: (*b).into(),
                runs: rs.len(),
            });
        }
    }
    out
}

fn left_out(runs: &[NodeRun]) -> Vec<Lemon> {
    let mut out = Vec::new();
    for (node, nr) in by_node(runs) {
        let judged: Vec<bool> = nr.iter().filter_map(|r| r.healthy).collect();
        let o = judged.iter().filter(|h| !**h).count();
        let returned = comes_and_goes(judged.iter().map(|h| !*h));
        if judged.len() >= 3 && o * 3 > judged.len() && returned {
            out.push(Lemon::LeftOut {
                node: node.into(),
                out: o,
                runs: judged.len(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
