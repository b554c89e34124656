//! Localisation of per-rail pair results (issue 34), a pure function: which (node, rail), node,
//! rail switch or pair explains the failed or slow NCCL pair tests. The fail-slow model
//! (`crate::link::fail_slow`) applied to rails: the reference is the upper quartile of the passing
//! results (a slow minority, or one dead rail, cannot move it), and a part is named only when
//! partners that pass elsewhere agree.
//!
//! - A (node, rail) bad with two or more partners that pass elsewhere on that rail is the
//!   node's rail (its HCA, cable or transceiver).
//! - A node with most of its rails bad is the node.
//! - The same rail bad (more bad partners than good) on [`SWITCH_MIN_NODES`] or more nodes is
//!   that rail's switch.
//! - A bad pair both of whose ends are not otherwise blamed is the path between them.
//!
//! A retest measures each pair again ([`retest_plan`]); a pair keeps its best result, so a
//! transient failure clears and a broken part stays broken. Work is O(r log r) in results.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Under this share of the reference a passing pair counts as slow. NCCL send/recv over one
/// IB rail is steady; ClusterKit flags pairs under 93% of the best, we leave headroom for a busy
/// moment and let the retest confirm.
pub const RAIL_SLOW_SHARE: f64 = 0.75;

/// Nodes with the same rail bad before the rail's switch is blamed instead of each node.
pub const SWITCH_MIN_NODES: usize = 3;

/// Pairs one retest measures at most.
pub const RETEST_MAX: usize = 64;

/// One 2-rank NCCL send/recv between nodes `a` and `b` on rail `rail`.
#[derive(Clone, Debug, PartialEq)]
pub struct RailResult {
    pub a: u32,
    pub b: u32,
    pub rail: u32,
    /// Bus bandwidth in Gbit/s; None when the test failed.
    pub gbps: Option<f64>,
    /// What failed (NCCL's error, the watchdog), when it did.
    pub error: Option<String>,
    /// 0 for the first measurement, 1.. for retests.
    pub round: u32,
}

impl RailResult {
    fn key(&self) -> (u32, u32, u32) {
        (self.a.min(self.b), self.a.max(self.b), self.rail)
    }
}

/// The part a set of bad results points at.
#[derive(Clone, Debug, PartialEq)]
pub enum Blame {
    /// One node's rail: bad with `bad_with`, partners that pass elsewhere on that rail.
    NodeRail {
        node: u32,
        rail: u32,
        bad_with: Vec<u32>,
        good_with: Vec<u32>,
        median_gbps: Option<f64>,
        errors: Vec<String>,
    },
    /// Most of a node's rails are bad.
    Node { node: u32, rails: Vec<u32> },
    /// The same rail bad on many nodes: that rail's switch (or its uplinks).
    RailSwitch { rail: u32, nodes: Vec<u32> },
    /// One pair on one rail, both ends fine elsewhere (or nothing else to compare with).
    Pair {
        a: u32,
        b: u32,
        rail: u32,
        gbps: Option<f64>,
        error: Option<String>,
        /// Both ends passed with other partners on this rail.
        ends_pass_elsewhere: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct RailVerdict {
    /// Upper quartile of the passing results, Gbit/s.
    pub reference_gbps: Option<f64>,
    pub blames: Vec<Blame>,
    /// Distinct (pair, rail) results judged, and how many of them were bad.
    pub judged: usize,
    pub bad: usize,
    /// Whether any retest result was among the input.
    pub retested: bool,
}

impl RailVerdict {
    pub fn clean(&self) -> bool {
        self.blames.is_empty()
    }
}

/// Each (pair, rail)'s best result over all rounds: a pass beats a failure, a higher figure a
/// lower one.
pub fn best_results(results: &[RailResult]) -> Vec<RailResult> {
    let mut best: BTreeMap<(u32, u32, u32), RailResult> = BTreeMap::new();
    for r in results.iter().filter(|r| r.a != r.b) {
        let k = r.key();
        let better = match best.get(&k) {
            None => true,
            Some(old) => match (old.gbps, r.gbps) {
                (None, Some(_)) => true,
                (Some(o), Some(n)) => n > o,
                _ => false,
            },
        };
        if better {
            best.insert(k, r.clone());
        }
    }
    best.into_values().collect()
}

#[derive(Default)]
struct Unit {
    bad_with: BTreeSet<u32>,
    good_with: BTreeSet<u32>,
    values: Vec<f64>,
    errors: Vec<String>,
}

/// The upper quartile of the passing results, Gbit/s (none when nothing passed above zero).
fn reference_of(merged: &[RailResult]) -> Option<f64> {
    let mut passing: Vec<f64> = merged
        .iter()
        .filter_map(|r| r.gbps)
        .filter(|v| v.is_finite())
        .collect();
    passing.sort_by(f64::total_cmp);
    crate::infra::stats::percentile(&passing, 0.75).filter(|v| *v > 0.0)
}

/// Each (node, rail)'s partners, bad and good, figures and first errors; and the bad results.
fn tally(
    merged: &[RailResult],
    reference: Option<f64>,
) -> (HashMap<(u32, u32), Unit>, Vec<&RailResult>) {
    let is_bad = |r: &RailResult| match (r.gbps, reference) {
        (None, _) => true,
        (Some(v), Some(reference)) => !v.is_finite() || v < RAIL_SLOW_SHARE * reference,
        (Some(_), None) => false,
    };
    let mut units: HashMap<(u32, u32), Unit> = HashMap::new();
    let mut bad_results = Vec::new();
    for r in merged {
        let bad = is_bad(r);
        for (me, other) in [(r.a, r.b), (r.b, r.a)] {
            let u = units.entry((me, r.rail)).or_default();
            if bad {
                u.bad_with.insert(other);
                if let Some(e) = &r.error
                    && u.errors.len() < 3
                {
                    u.errors.push(e.clone());
                }
            } else {
                u.good_with.insert(other);
            }
            if let Some(v) = r.gbps {
                u.values.push(v);
            }
        }
        if bad {
            bad_results.push(r);
        }
    }
    (units, bad_results)
}

pub fn localise(results: &[RailResult]) -> RailVerdict {
    let merged = best_results(results);
    let reference = reference_of(&merged);
    let (units, bad_results) = tally(&merged, reference);
    let passes = |n: u32, rail: u32| {
        units
            .get(&(n, rail))
            .is_some_and(|u| !u.good_with.is_empty())
    };
    // (node, rail) with two or more bad partners that pass elsewhere on the rail.
    let mut node_rails: BTreeMap<(u32, u32), ()> = BTreeMap::new();
    for ((n, rail), u) in &units {
        let witnesses = u.bad_with.iter().filter(|p| passes(**p, *rail)).count();
        if witnesses >= 2 {
            node_rails.insert((*n, *rail), ());
        }
    }
    // Nodes with most of their rails bad.
    let mut rails_of: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (n, rail) in units.keys() {
        rails_of.entry(*n).or_default().insert(*rail);
    }
    let mut blames = Vec::new();
    let mut bad_nodes: BTreeSet<u32> = BTreeSet::new();
    for (n, rails) in &rails_of {
        let bad: Vec<u32> = rails
            .iter()
            .copied()
            .filter(|r| node_rails.contains_key(&(*n, *r)))
            .collect();
        if bad.len() >= 2 && bad.len() * 2 > rails.len() {
            bad_nodes.insert(*n);
            blames.push(Blame::Node {
                node: *n,
                rails: bad,
            });
        }
    }
    // The same rail bad on many nodes: its switch.
    let mut switch_rails: BTreeSet<u32> = BTreeSet::new();
    let mut by_rail: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for ((n, rail), u) in &units {
        if !bad_nodes.contains(n) && u.bad_with.len() > u.good_with.len() {
            by_rail.entry(*rail).or_default().push(*n);
        }
    }
    for (rail, mut nodes) in by_rail {
        if nodes.len() >= SWITCH_MIN_NODES {
            nodes.sort_unstable();
            switch_rails.insert(rail);
            blames.push(Blame::RailSwitch { rail, nodes });
        }
    }
    let mut named_units: BTreeSet<(u32, u32)> = BTreeSet::new();
    for (n, rail) in node_rails.keys() {
        if bad_nodes.contains(n) || switch_rails.contains(rail) {
            continue;
        }
        let u = &units[&(*n, *rail)];
        let mut values = u.values.clone();
        named_units.insert((*n, *rail));
        blames.push(Blame::NodeRail {
            node: *n,
            rail: *rail,
            bad_with: u.bad_with.iter().copied().collect(),
            good_with: u.good_with.iter().copied().collect(),
            median_gbps: crate::infra::stats::median(&mut values),
            errors: u.errors.clone(),
        });
    }
    for r in &bad_results {
        let explained = bad_nodes.contains(&r.a)
            || bad_nodes.contains(&r.b)
            || switch_rails.contains(&r.rail)
            || named_units.contains(&(r.a, r.rail))
            || named_units.contains(&(r.b, r.rail));
        if explained {
            continue;
        }
        blames.push(Blame::Pair {
            a: r.a.min(r.b),
            b: r.a.max(r.b),
            rail: r.rail,
            gbps: r.gbps,
            error: r.error.clone(),
            ends_pass_elsewhere: passes(r.a, r.rail) && passes(r.b, r.rail),
        });
    }
    blames.sort_by_key(blame_order);
    RailVerdict {
        reference_gbps: reference,
        judged: merged.len(),
        bad: bad_results.len(),
        retested: results.iter().any(|r| r.round > 0),
        blames,
    }
}

fn blame_order(b: &Blame) -> (u8, u32, u32, u32) {
    match b {
        Blame::RailSwitch { rail, .. } => (0, *rail, 0, 0),
        Blame::Node { node, .. } => (1, *node, 0, 0),
        Blame::NodeRail { node, rail, .. } => (2, *node, *rail, 0),
        Blame::Pair { a, b, rail, .. } => (3, *a, *b, *rail),
    }
}

/// The pairs to measure again before naming: each suspect's bad pairs (a transient clears), and
/// each suspect against a known-good partner on the same rail; at most [`RETEST_MAX`], the
/// switch blames left alone (many nodes already agree).
pub fn retest_plan(results: &[RailResult], verdict: &RailVerdict) -> Vec<(u32, u32, u32)> {
    let merged = best_results(results);
    let reference = verdict.reference_gbps.unwrap_or(0.0);
    let good = |r: &RailResult| r.gbps.is_some_and(|v| v >= RAIL_SLOW_SHARE * reference);
    let mut suspects: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut plan: Vec<(u32, u32, u32)> = Vec::new();
    let push = |plan: &mut Vec<(u32, u32, u32)>, a: u32, b: u32, rail: u32| {
        let k = (a.min(b), a.max(b), rail);
        if a != b && !plan.contains(&k) && plan.len() < RETEST_MAX {
            plan.push(k);
        }
    };
    for b in &verdict.blames {
        match b {
            Blame::NodeRail { node, rail, .. } => {
                suspects.insert((*node, *rail));
            }
            Blame::Node { node, rails } => {
                for r in rails.iter().take(2) {
                    suspects.insert((*node, *r));
                }
            }
            Blame::Pair { a, b, rail, .. } => {
                push(&mut plan, *a, *b, *rail);
                suspects.insert((*a, *rail));
                suspects.insert((*b, *rail));
            }
            Blame::RailSwitch { .. } => {}
        }
    }
    for (n, rail) in &suspects {
        for r in merged
            .iter()
            .filter(|r| r.rail == *rail && (r.a == *n || r.b == *n))
        {
            if !good(r) {
                push(&mut plan, r.a, r.b, *rail);
            }
        }
        // A partner that passed on this rail with someone else, not a suspect itself.
        let partner = merged
            .iter()
            .filter(|r| r.rail == *rail && good(r) && r.a != *n && r.b != *n)
            .flat_map(|r| [r.a, r.b])
            .find(|p| !suspects.contains(&(*p, *rail)));
        if let Some(p) = partner {
            push(&mut plan, *n, p, *rail);
        }
    }
    plan
}

/// Splits pairs into rounds in which no (node, rail) appears twice (one child per node and
/// rail at a time).
pub fn rounds(plan: &[(u32, u32, u32)]) -> Vec<Vec<(u32, u32, u32)>> {
    type Round = (BTreeSet<(u32, u32)>, Vec<(u32, u32, u32)>);
    let mut out: Vec<Round> = Vec::new();
    for p in plan {
        let (a, b, rail) = *p;
        let slot = out
            .iter_mut()
            .find(|(busy, _)| !busy.contains(&(a, rail)) && !busy.contains(&(b, rail)));
        match slot {
            Some((busy, pairs)) => {
                busy.insert((a, rail));
                busy.insert((b, rail));
                pairs.push(*p);
            }
            None => out.push(([(a, rail), (b, rail)].into_iter().collect(), vec![*p])),
        }
    }
    out.into_iter().map(|(_, p)| p).collect()
}
