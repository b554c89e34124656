//! Lemon rules over plain history records: pure judgments, no storage (issue 44, point 3).

use std::collections::{BTreeMap, BTreeSet};

/// One non-pass finding a node recorded in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingRec {
    /// Finding id, e.g. `link.slow`.
    pub id: String,
    /// Partner node for link findings.
    pub partner: Option<String>,
    /// GPU index for `gpu.xid`.
    pub gpu: Option<u32>,
    /// XID number for `gpu.xid`.
    pub xid: Option<u32>,
}

/// One node's record of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRun {
    /// Run identity shared by the nodes of one cluster run (job id or rank-0 run id).
    pub run: String,
    /// Unix seconds.
    pub time: i64,
    /// Host name.
    pub node: String,
    /// Whether the node was in the healthy set (`None` when the run had none).
    pub healthy: Option<bool>,
    /// Non-pass findings.
    pub findings: Vec<FindingRec>,
}

/// Why a node (or a pair) was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lemon {
    /// Same finding in >= 3 of the node's last 10 runs while other nodes of those runs passed it.
    Repeat {
        node: String,
        finding: String,
        runs: usize,
    },
    /// Same XID on one GPU in >= 5 bursts within 24 h (bursts split by 180 s quiet; NVSentinel).
    XidBursts {
        node: String,
        gpu: u32,
        xid: u32,
        bursts: usize,
    },
    /// `link.slow`/`link.unreachable` with >= 2 different partners: the fault moves with the node.
    LinkMoves { node: String, partners: Vec<String> },
    /// A fault that stays with one pair in >= 2 runs: its cable or port, not either node.
    Pair { a: String, b: String, runs: usize },
    /// Left out of the healthy set in more than a third of >= 3 runs.
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

fn is_link(id: &str) -> bool {
    id == "link.slow" || id == "link.unreachable"
}

/// Every lemon the rules name over `runs`, in a stable order.
pub fn lemons(runs: &[NodeRun]) -> Vec<Lemon> {
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
    // Per run: how many nodes took part, and how many had each finding id.
    let mut size: BTreeMap<&str, usize> = BTreeMap::new();
    let mut had: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for r in runs {
        *size.entry(r.run.as_str()).or_default() += 1;
        let ids: BTreeSet<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
        for id in ids {
            *had.entry((r.run.as_str(), id)).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (node, nr) in by_node(runs) {
        let last = &nr[nr.len().saturating_sub(REPEAT_WINDOW)..];
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for r in last {
            let ids: BTreeSet<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
            for id in ids {
                let n = size.get(r.run.as_str()).copied().unwrap_or(0);
                let h = had.get(&(r.run.as_str(), id)).copied().unwrap_or(0);
                // Others passed it: some other node of this run lacks the finding.
                if n > 1 && h < n {
                    *count.entry(id).or_default() += 1;
                }
            }
        }
        for (id, c) in count {
            if c >= REPEAT_MIN && !is_link(id) {
                out.push(Lemon::Repeat {
                    node: node.into(),
                    finding: id.into(),
                    runs: c,
                });
            }
        }
    }
    out
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
                ev.entry((r.node.as_str(), g, x)).or_default().push(r.time);
            }
        }
    }
    let mut out = Vec::new();
    for ((node, gpu, xid), mut t) in ev {
        t.sort_unstable();
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
    let mut pairs: BTreeMap<(String, String), BTreeSet<&str>> = BTreeMap::new();
    for r in runs {
        for f in r.findings.iter().filter(|f| is_link(&f.id)) {
            if let Some(p) = &f.partner {
                let key = if r.node <= *p {
                    (r.node.clone(), p.clone())
                } else {
                    (p.clone(), r.node.clone())
                };
                pairs.entry(key).or_default().insert(r.run.as_str());
            }
        }
    }
    let mut partners: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (a, b) in pairs.keys() {
        partners.entry(a).or_default().insert(b);
        partners.entry(b).or_default().insert(a);
    }
    let moving: BTreeSet<&str> = partners
        .iter()
        .filter(|(_, ps)| ps.len() >= 2)
        .map(|(n, _)| *n)
        .collect();
    let mut out: Vec<Lemon> = moving
        .iter()
        .map(|n| Lemon::LinkMoves {
            node: (*n).into(),
            partners: partners[n].iter().map(|p| (*p).into()).collect(),
        })
        .collect();
    for ((a, b), rs) in &pairs {
        if rs.len() >= 2 && !moving.contains(a.as_str()) && !moving.contains(b.as_str()) {
            out.push(Lemon::Pair {
                a: a.clone(),
                b: b.clone(),
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
        if judged.len() >= 3 && o * 3 > judged.len() {
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
