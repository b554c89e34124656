//! The healthy set: when the cluster fails, the largest set of nodes the measurements show working together, and why each other node is left out.
//!
//! A pure function of a measured [`Report`]: node-level faults (never joined, a `fail`
//! finding of its own) remove the node; GPU count and versions split the rest into groups
//! (the larger is kept); every failed pair on a network is broken by removing the node that
//! explains the most failures (ties: keep rank 0, then the faster node, then the lower rank),
//! exactly (a bounded search) when the failures are few. The cost after the measurements is
//! O(n + failed links) (plus a log factor for the priority order).

pub mod catalog;
pub mod faster;
pub mod ids;

use crate::core::{BindStatus, Link, LinkOutcome, Links, NetworkEval, NodeFacts, Report, Status};
use crate::link::vertex_cover::cover;
use crate::net::networks::{discover, evaluate};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The finding id a healthy set that misses the user's constraints fires.
pub use crate::healthy_set::ids::HEALTHY_SET as ID;

/// The user's constraints on the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthyOptions {
    /// The fewest nodes the job can run on (`--min-nodes`, else the MIN of `--nnodes=MIN:MAX`, else 1).
    pub min_nodes: u32,
    /// The node count must be a multiple of this (`--nodes-multiple-of`, 1 when not given).
    pub multiple_of: u32,
    /// Also leave out stragglers: the nodes `link.slow` names as slow nodes.
    pub exclude_slow: bool,
    /// Nodes the job expects (ranks `0..nnodes`); the report's own count when absent.
    pub nnodes: Option<u32>,
}

impl Default for HealthyOptions {
    fn default() -> Self {
        HealthyOptions {
            min_nodes: 1,
            multiple_of: 1,
            exclude_slow: false,
            nnodes: None,
        }
    }
}

/// One node left out of the set.
#[derive(Clone, Debug, PartialEq)]
pub struct Exclusion {
    pub rank: u32,
    /// Empty when unknown (a node that never joined, with no host list to name it).
    pub hostname: String,
    /// The finding ids that explain it (empty for a node left idle by `--nodes-multiple-of`).
    pub reasons: Vec<String>,
    /// Working, but left idle to round the set down to a multiple of K.
    pub idle: bool,
    /// In words: why this node is out.
    pub why: String,
}

/// The set, as computed from the measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthySet {
    /// Original ranks in the set, master first, then rank order: index = rank within the set.
    pub order: Vec<u32>,
    /// Nodes the job expected.
    pub total: u32,
    /// Left out, in rank order.
    pub excluded: Vec<Exclusion>,
    /// The network the set connects on (its id, as `networks` names it).
    pub network: Option<String>,
    /// The set's master: an original rank.
    pub master: Option<u32>,
    /// The master port, proven free on the master.
    pub master_port: u16,
    /// Why this master (set when it is not rank 0).
    pub master_reason: Option<String>,
    /// True when no larger set satisfies the same rules (exact search or node-level faults only).
    pub largest: bool,
    pub min_nodes: u32,
    pub multiple_of: u32,
    /// The set meets `min_nodes` and `multiple_of` and is not empty.
    pub met: bool,
    /// Finding ids by the nodes they cost, most first.
    pub cost: Vec<(String, u32)>,
}

impl HealthySet {
    pub fn count(&self) -> usize {
        self.order.len()
    }

    /// Why the set misses the constraints, naming the findings that cost the most nodes.
    pub fn shortfall(&self) -> Option<String> {
        if self.met {
            return None;
        }
        let costs: Vec<String> = self
            .cost
            .iter()
            .take(5)
            .map(|(id, n)| format!("{id} ({n} node{})", if *n == 1 { "" } else { "s" }))
            .collect();
        let costs = if costs.is_empty() {
            String::new()
        } else {
            format!(
                "; the findings that cost the most nodes: {}",
                costs.join(", ")
            )
        };
        let what = if self.order.is_empty() {
            "no node is healthy".to_string()
        } else {
            format!(
                "the healthy set has {} of {} nodes, fewer than --min-nodes {}",
                self.order.len(),
                self.total,
                self.min_nodes
            )
        };
        Some(format!("{what}{costs}"))
    }
}

/// A node-level failure judged by the pairs instead (the graph), or by the version groups; or
/// one the healthy set's own launch avoids (`cluster.master-elsewhere`: a master name that led
/// the node astray, where the launch names rank 0 by an address every node joined through).
fn judged_elsewhere(id: &str, subject: &str) -> bool {
    (id.starts_with("link.") && !subject.contains("<->*"))
        || id == crate::rendezvous::ids::VERSIONS
        || id == crate::gpu::ids::GPUS
        || id == crate::rendezvous::ids::MASTER_ELSEWHERE
        || id == ID
}

fn hostname_of(report: &Report, rank: u32, expected: &HashMap<u32, String>) -> String {
    report
        .hostname(rank)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .or_else(|| expected.get(&rank).cloned())
        .unwrap_or_default()
}

/// What a node must share with the others of its group.
fn group_key(f: &NodeFacts) -> (u32, Vec<Option<String>>) {
    (
        crate::gpu::visible_devices::visible_gpu_count(f),
        vec![
            f.gpu.driver_version.clone(),
            f.gpu.cuda_driver_version.clone(),
            f.nccl.version.clone(),
            f.nccl.torch_version.clone(),
        ],
    )
}

/// Mean measured throughput of each node's ok links, both directions.
fn throughput(links: &Links) -> HashMap<u32, f64> {
    let mut sum: HashMap<u32, (f64, u32)> = HashMap::new();
    // A measured link is always a record.
    for l in links.records() {
        if let (LinkOutcome::Ok, Some(t)) = (l.result, l.throughput_gbit_s.map(f64::from))
            && t.is_finite()
        {
            for r in [l.from, l.to] {
                let e = sum.entry(r).or_insert((0.0, 0));
                e.0 += t;
                e.1 += 1;
            }
        }
    }
    sum.into_iter()
        .map(|(r, (s, n))| (r, s / f64::from(n.max(1))))
        .collect()
}

/// The nodes `link.slow` named as slow nodes (sending, receiving or both): the same judgment,
/// against a reference the slow nodes cannot move, that the report's findings give.
pub(crate) fn stragglers(report: &Report) -> BTreeSet<u32> {
    report
        .findings
        .iter()
        .filter_map(|f| crate::link::verdict::Slow::of(f)?.slow_node())
        .collect()
}

/// The failed pairs (unordered) on a network among `alive`: a pair fails when a link to its
/// member address failed and none to it succeeded.
fn failed_pairs(
    links: &Links,
    address: &HashMap<u32, String>,
    alive: &BTreeSet<u32>,
) -> BTreeSet<(u32, u32)> {
    let on = |l: &crate::core::LinkResult| {
        alive.contains(&l.from)
            && alive.contains(&l.to)
            && address.get(&l.to).is_some_and(|a| *a == l.address)
    };
    let on_link = |l: &Link| {
        alive.contains(&l.from)
            && alive.contains(&l.to)
            && address.get(&l.to).is_some_and(|a| *a == **l.address)
    };
    let mut failed: HashSet<(u32, u32)> = links
        .records()
        .filter(|l| l.result != LinkOutcome::Ok && on(l))
        .map(|l| (l.from, l.to))
        .collect();
    if links.is_dense() {
        // A pair that failed on one link and connected on another: looked up, not scanned.
        failed.retain(|(a, b)| {
            !address
                .get(b)
                .is_some_and(|addr| links.connected(*a, *b, addr))
        });
    } else if !failed.is_empty() {
        for l in links.iter().filter(|l| l.result == LinkOutcome::Ok) {
            if failed.contains(&(l.from, l.to)) && on_link(&l) {
                failed.remove(&(l.from, l.to));
            }
        }
    }
    failed
        .into_iter()
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect()
}

/// One candidate answer: the set, and why each other node is out.
struct Candidate {
    keep: BTreeSet<u32>,
    out: BTreeMap<u32, (Vec<String>, String)>,
    network: Option<String>,
    exact: bool,
}

/// The node count the rendezvous findings report (at least `--nnodes`), and the rank and host
/// of each node they name missing.
fn rendezvous_expected(report: &Report, opts: &HealthyOptions) -> (u32, HashMap<u32, String>) {
    let mut expected: HashMap<u32, String> = HashMap::new();
    let mut nnodes = opts.nnodes.unwrap_or(0);
    for f in report
        .findings
        .iter()
        .filter_map(crate::rendezvous::verdict::Rendezvous::of)
    {
        if let Some(n) = f.nnodes {
            nnodes = nnodes.max(n);
        }
        for m in f.missing {
            if let (Some(r), Some(h)) = (m.rank, m.host) {
                expected.insert(r, h);
            }
        }
    }
    (nnodes, expected)
}

/// Why each node is out on its own: a fail finding of its own, a wrong all-reduce result, never
/// joined, or (with `--exclude-slow`) a slow node.
fn node_faults(
    report: &Report,
    opts: &HealthyOptions,
    joined: &BTreeSet<u32>,
    nnodes: u32,
) -> BTreeMap<u32, (Vec<String>, String)> {
    let mut out: BTreeMap<u32, (Vec<String>, String)> = BTreeMap::new();
    for f in &report.findings {
        let Some(r) = f.node else { continue };
        if f.status != Status::Fail || judged_elsewhere(&f.id, &f.subject) || r >= nnodes {
            continue;
        }
        let e = out.entry(r).or_insert_with(|| (Vec::new(), String::new()));
        if !e.0.contains(&f.id) {
            e.0.push(f.id.clone());
        }
        if e.1.is_empty() {
            e.1 = f.summary.clone();
        }
    }
    for c in &report.collectives {
        for r in c.failed_ranks.iter().filter(|r| joined.contains(r)) {
            let e = out.entry(*r).or_insert_with(|| (Vec::new(), String::new()));
            let id = crate::collective::ids::WRONG.to_string();
            if !e.0.contains(&id) {
                e.0.push(id);
            }
            if e.1.is_empty() {
                e.1 = format!("its all-reduce result differed ({} {})", c.transport, c.op);
            }
        }
    }
    for r in (0..nnodes).filter(|r| !joined.contains(r)) {
        let e = out.entry(r).or_insert_with(|| (Vec::new(), String::new()));
        if e.0.is_empty() {
            e.0.push(crate::rendezvous::ids::RENDEZVOUS.into());
        }
        e.1 = "it never joined the coordinator".into();
    }
    if opts.exclude_slow {
        for r in stragglers(report) {
            if joined.contains(&r) && !out.contains_key(&r) {
                out.insert(
                    r,
                    (
                        vec![crate::link::ids::SLOW.into()],
                        "link.slow names it a slow node: slow with every healthy partner (--exclude-slow)".into(),
                    ),
                );
            }
        }
    }
    out
}

/// The largest set over the groups and networks: per network, the group's members on it less a
/// vertex cover of its failed pairs; the other groups are out for their versions.
fn best_candidate(
    links: &Links,
    groups: &[BTreeSet<u32>],
    evals: &[NetworkEval],
    facts: &BTreeMap<u32, &NodeFacts>,
    tp: &HashMap<u32, f64>,
) -> Option<Candidate> {
    let mut best: Option<Candidate> = None;
    for (gi, group) in groups.iter().enumerate() {
        if best.as_ref().is_some_and(|b| b.keep.len() >= group.len()) {
            break;
        }
        for eval in evals {
            let net = &eval.network;
            let mut cand_out: BTreeMap<u32, (Vec<String>, String)> = BTreeMap::new();
            let mut alive = BTreeSet::new();
            for r in group {
                if net.members.contains_key(r) {
                    alive.insert(*r);
                } else {
                    cand_out.insert(
                        *r,
                        (
                            vec![crate::link::ids::UNREACHABLE.into()],
                            format!("it has no address on the network {}", net.id),
                        ),
                    );
                }
            }
            let address: HashMap<u32, String> = net
                .members
                .iter()
                .map(|(r, m)| (*r, m.address.to_string()))
                .collect();
            let edges = failed_pairs(links, &address, &alive);
            let (removed, exact) = cover(&edges, tp);
            for r in &removed {
                alive.remove(r);
            }
            // Each removed node, with the nodes of the set it failed with.
            let mut peers: HashMap<u32, Vec<u32>> = HashMap::new();
            for (a, b) in &edges {
                for (x, y) in [(a, b), (b, a)] {
                    if removed.contains(x) && alive.contains(y) {
                        peers.entry(*x).or_default().push(*y);
                    }
                }
            }
            for r in &removed {
                let why = match peers.get_mut(r) {
                    Some(p) => {
                        p.sort_unstable();
                        format!(
                            "its connections with {} failed on {}",
                            crate::core::cluster_common::ranks_phrase(p),
                            net.id
                        )
                    }
                    None => format!(
                        "its connections with other left-out nodes failed on {}",
                        net.id
                    ),
                };
                cand_out.insert(*r, (vec![crate::link::ids::UNREACHABLE.into()], why));
            }
            if best.as_ref().is_some_and(|b| b.keep.len() >= alive.len()) {
                continue;
            }
            for other in groups.iter().enumerate().filter(|(i, _)| *i != gi) {
                for r in other.1 {
                    cand_out.insert(
                        *r,
                        version_reason(facts[r], facts[group.first().unwrap_or(r)]),
                    );
                }
            }
            best = Some(Candidate {
                keep: alive,
                out: cand_out,
                network: Some(net.id.clone()),
                exact,
            });
        }
    }
    best
}

/// The healthy set of a failing cluster report; None when the report is not a failing cluster.
pub fn healthy_set(report: &Report, opts: &HealthyOptions) -> Option<HealthySet> {
    healthy_set_of(report, &Links::borrowed(&report.links), opts)
}

/// [`healthy_set`] with the links given apart from the report (the coordinator's, held
/// compactly: see [`Links`]).
pub fn healthy_set_of(report: &Report, links: &Links, opts: &HealthyOptions) -> Option<HealthySet> {
    if report.status != Status::Fail {
        return None;
    }
    set_of_with(report, links, opts)
}

/// The set the same rules keep, whatever the report's status (the faster set of a passing
/// cluster is this with `exclude_slow`); None when the report is not a cluster's.
pub fn set_of(report: &Report, opts: &HealthyOptions) -> Option<HealthySet> {
    set_of_with(report, &Links::borrowed(&report.links), opts)
}

/// [`set_of`] with the links given apart from the report.
pub fn set_of_with(report: &Report, links: &Links, opts: &HealthyOptions) -> Option<HealthySet> {
    if report.mode != crate::core::Mode::Cluster {
        return None;
    }
    let joined: BTreeSet<u32> = report
        .nodes
        .iter()
        .map(|n| n.rank)
        .filter(|r| *r != u32::MAX)
        .collect();
    let (nnodes, expected) = rendezvous_expected(report, opts);
    let nnodes = nnodes.max(joined.last().map_or(0, |r| r + 1));
    // Node-level faults: never joined, or a fail finding of its own.
    let mut out = node_faults(report, opts, &joined, nnodes);
    let tp = throughput(links);
    let facts: BTreeMap<u32, &NodeFacts> = report
        .nodes
        .iter()
        .filter(|n| joined.contains(&n.rank))
        .map(|n| (n.rank, &n.facts))
        .collect();
    // Groups of nodes that agree on GPU count and versions, largest first.
    let mut groups: BTreeMap<(u32, Vec<Option<String>>), BTreeSet<u32>> = BTreeMap::new();
    for (r, f) in &facts {
        if !out.contains_key(r) {
            groups.entry(group_key(f)).or_default().insert(*r);
        }
    }
    let mut groups: Vec<BTreeSet<u32>> = groups.into_values().collect();
    groups.sort_by_key(|g| {
        (
            std::cmp::Reverse(g.len()),
            !g.contains(&0),
            g.first().copied(),
        )
    });
    let pairs: Vec<(u32, &NodeFacts)> = facts.iter().map(|(r, f)| (*r, *f)).collect();
    let ranks: Vec<u32> = facts.keys().copied().collect();
    let networks = discover(&pairs, links);
    let evals = evaluate(&networks, links, &ranks);
    let best = best_candidate(links, &groups, &evals, &facts, &tp);
    let mut best = best.unwrap_or(Candidate {
        keep: BTreeSet::new(),
        out: BTreeMap::new(),
        network: None,
        exact: true,
    });
    let exact = best.exact;
    out.append(&mut best.out);
    // Round down to a multiple of K: the slowest nodes stay idle.
    let k = opts.multiple_of.max(1) as usize;
    let extra = best.keep.len() % k;
    if extra > 0 && best.keep.len() > k {
        let mut by_speed: Vec<u32> = best.keep.iter().copied().collect();
        by_speed.sort_by_key(|r| {
            (
                (tp.get(r).copied().unwrap_or(0.0) * 1000.0) as i64,
                std::cmp::Reverse(*r),
            )
        });
        for r in by_speed.into_iter().take(extra) {
            best.keep.remove(&r);
            out.insert(
                r,
                (
                    Vec::new(),
                    format!(
                        "idle: it works, but --nodes-multiple-of {k} rounds the set down and its links are among the slowest"
                    ),
                ),
            );
        }
    }
    let met = !best.keep.is_empty()
        && best.keep.len() >= opts.min_nodes.max(1) as usize
        && best.keep.len() % k == 0;
    let requested_port = report
        .recommendation
        .as_ref()
        .map_or(29500, |r| r.master_port);
    let (master, master_port, master_reason) =
        pick_master(&best.keep, &facts, requested_port, best.network.as_deref());
    let mut order: Vec<u32> = master.into_iter().collect();
    order.extend(best.keep.iter().copied().filter(|r| Some(*r) != master));
    let mut cost: BTreeMap<String, u32> = BTreeMap::new();
    for (reasons, _) in out.values() {
        for id in reasons {
            *cost.entry(id.clone()).or_default() += 1;
        }
    }
    let mut cost: Vec<(String, u32)> = cost.into_iter().collect();
    cost.sort_by_key(|(id, n)| (std::cmp::Reverse(*n), id.clone()));
    let excluded = out
        .into_iter()
        .map(|(rank, (reasons, why))| Exclusion {
            rank,
            hostname: hostname_of(report, rank, &expected),
            idle: reasons.is_empty(),
            reasons,
            why,
        })
        .collect();
    Some(HealthySet {
        order,
        total: nnodes,
        excluded,
        network: best.network,
        master,
        master_port,
        master_reason,
        largest: exact && groups.len() <= 1,
        min_nodes: opts.min_nodes.max(1),
        multiple_of: k as u32,
        met,
        cost,
    })
}

/// Why a node of another GPU/version group is out, naming what differs.
fn version_reason(f: &NodeFacts, kept: &NodeFacts) -> (Vec<String>, String) {
    let (gpus, vers) = group_key(f);
    let (kgpus, kvers) = group_key(kept);
    if gpus != kgpus && vers == kvers {
        return (
            vec![crate::gpu::ids::GPUS.into()],
            format!("it has {gpus} visible GPU(s) where the larger group has {kgpus}"),
        );
    }
    let names = ["driver", "CUDA", "NCCL", "torch"];
    let diffs: Vec<String> = names
        .iter()
        .zip(vers.iter().zip(kvers.iter()))
        .filter(|(_, (a, b))| a != b)
        .map(|(n, (a, b))| {
            format!(
                "{n} {} (the larger group: {})",
                a.as_deref().unwrap_or("none"),
                b.as_deref().unwrap_or("none")
            )
        })
        .collect();
    (
        vec![crate::rendezvous::ids::VERSIONS.into()],
        format!(
            "its versions differ from the larger group's: {}",
            diffs.join(", ")
        ),
    )
}

/// Rank 0 when it is in the set; else the lowest rank of the set with the master port (or
/// its verified alternative) proven free there. Every node of the set reached every other
/// on the set's network, so any member's address is reached by all.
fn pick_master(
    keep: &BTreeSet<u32>,
    facts: &BTreeMap<u32, &NodeFacts>,
    port: u16,
    network: Option<&str>,
) -> (Option<u32>, u16, Option<String>) {
    if keep.contains(&0) {
        return (Some(0), port, None);
    }
    let proven = |r: &u32| -> Option<u16> {
        let p = &facts.get(r)?.ports;
        if p.port == port && p.ipv4.status == BindStatus::Free && p.ipv6.status != BindStatus::InUse
        {
            Some(port)
        } else {
            p.suggested_free
        }
    };
    let net = network.unwrap_or("the set's network");
    for r in keep {
        if let Some(p) = proven(r) {
            let host = facts.get(r).map_or("", |f| f.hostname.as_str());
            return (
                Some(*r),
                p,
                Some(format!(
                    "rank 0 is left out, so rank {r} ({host}) is the master: every node of the set reached it on {net}, and port {p} was bound successfully there"
                )),
            );
        }
    }
    match keep.first() {
        Some(r) => (
            Some(*r),
            port,
            Some(format!(
                "rank 0 is left out, so rank {r} is the master: every node of the set reached it on {net}; no port was proven free there, so check port {port} before the launch"
            )),
        ),
        None => (None, port, None),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
