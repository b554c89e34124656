//! The faster set: when the nodes `link.slow` names slow with every partner hold the ring all-reduce back by more than their share of the work, the set without them and the predicted gain.
//!
//! The model. A ring all-reduce moves every byte through every hop, so it runs at the pace of
//! its slowest hop; a hop `a -> b` carries what `a` sends and `b` receives, so each node's rate
//! is the lower of the medians of its measured sends and receives on the set's network, and
//! the ring's bound is the lowest rate among its nodes. Leaving the slow nodes out raises that
//! bound from `ring_with` to `ring_without`, and the all-reduce's bus bandwidth by the same
//! factor (applied to the measured all-reduce when one ran on these nodes, else to the bound).
//! A data-parallel step whose time is the all-reduce's then trains `without/with * k/n` as
//! many samples per second on `k` of the `n` nodes, so the set is offered only when the
//! speed-up beats `n/k`: the slow nodes cost the collective more than their share of the work.
//! (When compute dominates the step the gain is smaller; the numbers are an upper bound.)

use super::{HealthyOptions, HealthySet, set_of_with, stragglers};
use crate::core::Links;
use crate::core::{LinkOutcome, NodeFacts, Report, Status};
use crate::net::networks::{discover, evaluate};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The set without the slow nodes, and what leaving them out is predicted to gain.
#[derive(Clone, Debug, PartialEq)]
pub struct Faster {
    /// The set without the slow nodes (the healthy set's rules with `--exclude-slow`).
    pub set: HealthySet,
    /// The slow nodes it leaves out (original ranks).
    pub slow: Vec<u32>,
    /// Nodes of the launch it is compared with: every node, or the healthy set of a failing cluster.
    pub nodes_with: u32,
    /// The ring's bound (Gbit/s) with the slow nodes, and the node that sets it.
    pub ring_with_gbit_s: f64,
    pub ring_with_node: u32,
    /// The ring's bound (Gbit/s) without them, and the node that sets it.
    pub ring_without_gbit_s: f64,
    pub ring_without_node: u32,
    /// The all-reduce's bus bandwidth with them (measured when `measured`), GB/s.
    pub busbw_with_gb_s: f64,
    /// Predicted without them, GB/s.
    pub busbw_without_gb_s: f64,
    /// `busbw_with_gb_s` is the measured all-reduce's (else the ring's bound).
    pub measured: bool,
}

impl Faster {
    /// Nodes in the faster set.
    pub fn nodes_without(&self) -> u32 {
        self.set.count() as u32
    }

    /// How many times faster the all-reduce runs without the slow nodes.
    pub fn speedup(&self) -> f64 {
        self.ring_without_gbit_s / self.ring_with_gbit_s
    }

    /// The speed-up that only pays for the nodes left out (`n/k`).
    pub fn break_even(&self) -> f64 {
        f64::from(self.nodes_with) / f64::from(self.nodes_without().max(1))
    }

    /// Samples per second of a step that is all all-reduce, without against with.
    pub fn throughput_gain(&self) -> f64 {
        self.speedup() / self.break_even()
    }

    /// Seconds to all-reduce 1 GB with the slow nodes.
    pub fn seconds_per_gb_with(&self) -> f64 {
        seconds_per_gb(self.nodes_with, self.busbw_with_gb_s)
    }

    /// Seconds to all-reduce 1 GB without them.
    pub fn seconds_per_gb_without(&self) -> f64 {
        seconds_per_gb(self.nodes_without(), self.busbw_without_gb_s)
    }
}

/// nccl-tests' definition: busbw = bytes / time * 2(n-1)/n, so time = 1 GB * 2(n-1)/n / busbw.
pub fn seconds_per_gb(n: u32, busbw_gb_s: f64) -> f64 {
    let n = f64::from(n.max(1));
    if busbw_gb_s > 0.0 {
        2.0 * (n - 1.0) / n / busbw_gb_s
    } else {
        f64::INFINITY
    }
}

/// The faster set of a cluster report, when `link.slow` names slow nodes whose removal is
/// predicted to pay for itself; None otherwise (no slow node, fewer than two nodes left, no
/// measured rate, or a gain under the nodes' share).
pub fn faster_set(report: &Report, opts: &HealthyOptions) -> Option<Faster> {
    faster_set_with(report, &Links::borrowed(&report.links), opts)
}

/// [`faster_set`] with the links given apart from the report (the coordinator's, held
/// compactly).
pub fn faster_set_with(report: &Report, links: &Links, opts: &HealthyOptions) -> Option<Faster> {
    let slow_named = stragglers(report);
    if slow_named.is_empty() {
        return None;
    }
    let plain = HealthyOptions {
        exclude_slow: false,
        ..opts.clone()
    };
    // The launch it is compared with: every joined node, or the failing cluster's healthy set.
    let base: BTreeSet<u32> = if report.status == Status::Fail {
        let set = set_of_with(report, links, &plain)?;
        if !set.met {
            return None;
        }
        set.order.into_iter().collect()
    } else {
        report.nodes.iter().map(|n| n.rank).collect()
    };
    let set = set_of_with(
        report,
        links,
        &HealthyOptions {
            exclude_slow: true,
            ..opts.clone()
        },
    )?;
    let slow: Vec<u32> = slow_named
        .iter()
        .copied()
        .filter(|r| base.contains(r) && !set.order.contains(r))
        .collect();
    if slow.is_empty() || !set.met || set.count() < 2 {
        return None;
    }
    let bound = |members: &BTreeSet<u32>| -> Option<(u32, f64)> {
        node_rates(report, links, set.network.as_deref(), members)
            .into_iter()
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
    };
    let (with_node, with) = bound(&base)?;
    let (without_node, without) = bound(&set.order.iter().copied().collect())?;
    if with <= 0.0 || !slow.contains(&with_node) {
        return None;
    }
    let measured = measured_busbw(report, base.len() as u32);
    let busbw_with = measured.unwrap_or(with / 8.0);
    let faster = Faster {
        nodes_with: base.len() as u32,
        ring_with_gbit_s: with,
        ring_with_node: with_node,
        ring_without_gbit_s: without,
        ring_without_node: without_node,
        busbw_with_gb_s: busbw_with,
        busbw_without_gb_s: busbw_with * without / with,
        measured: measured.is_some(),
        slow,
        set,
    };
    (faster.speedup() > faster.break_even()).then_some(faster)
}

/// Each member's rate on the network (its id, as `networks` names it; the first evaluated when
/// None) among `members`: the lower of the medians of its measured sends to and receives from
/// the other members, Gbit/s.
fn node_rates(
    report: &Report,
    links: &Links,
    network: Option<&str>,
    members: &BTreeSet<u32>,
) -> BTreeMap<u32, f64> {
    let facts: Vec<(u32, &NodeFacts)> = report.nodes.iter().map(|n| (n.rank, &n.facts)).collect();
    let ranks: Vec<u32> = facts.iter().map(|(r, _)| *r).collect();
    let evals = evaluate(&discover(&facts, links), links, &ranks);
    let eval = evals
        .iter()
        .find(|e| network.is_some_and(|n| e.network.id == n))
        .or_else(|| evals.first());
    let address: HashMap<u32, String> = eval
        .map(|e| {
            e.network
                .members
                .iter()
                .map(|(r, m)| (*r, m.address.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let mut sends: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut recvs: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    // Measured links are kept as records (only plain connectivity is a table cell).
    for l in links.records() {
        let on = address.get(&l.to).is_some_and(|a| *a == l.address)
            && members.contains(&l.from)
            && members.contains(&l.to);
        if let (LinkOutcome::Ok, Some(t), true) = (l.result, l.throughput_gbit_s, on)
            && t.is_finite()
            && t > 0.0
        {
            sends.entry(l.from).or_default().push(f64::from(t));
            recvs.entry(l.to).or_default().push(f64::from(t));
        }
    }
    let mut rates = BTreeMap::new();
    for r in ranks.into_iter().filter(|r| members.contains(r)) {
        let rate = [sends.get_mut(&r), recvs.get_mut(&r)]
            .into_iter()
            .flatten()
            .filter_map(|v| crate::infra::stats::median(v))
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))));
        if let Some(rate) = rate {
            rates.insert(r, rate);
        }
    }
    rates
}

/// The large-message bus bandwidth of an all-reduce that ran on `ranks` nodes (its ring order's
/// length; NCCL's `ranks` counts GPUs) (NCCL's first,
/// else the TCP ring's), GB/s.
fn measured_busbw(report: &Report, ranks: u32) -> Option<f64> {
    let usable = |transport: &str| {
        report
            .collectives
            .iter()
            .filter(|c| c.transport == transport && c.config != "compare")
            .filter(|c| {
                (if c.order.is_empty() {
                    c.ranks
                } else {
                    c.order.len() as u32
                }) == ranks
            })
            .find_map(|c| crate::collective::large_row(c).map(|row| row.busbw_gb_s))
            .filter(|b| b.is_finite() && *b > 0.0)
    };
    usable("nccl").or_else(|| usable("tcp"))
}

#[cfg(test)]
#[path = "faster_tests.rs"]
mod tests;
