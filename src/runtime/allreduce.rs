//! The all-reduce phase on the coordinator: picks TCP or NCCL, hands every node its part, merges
//! the nodes' timings into nccl-tests-style rows (the slowest node's time per size).

use super::coordinator::{JoinedNode, Step, Wait, gather, send_orders};
use crate::transport::events::Events;
use crate::transport::wire::{Msg, NcclOrder, RankRow, RingOrder};
use preflight_checks::model::{CollectiveResult, CollectiveRow, NodeFacts, Recommendation};
use preflight_checks::networks::NetworkEval;
use std::collections::BTreeMap;
use std::time::Duration;

/// Which all-reduce to measure (`--allreduce`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AllreduceMode {
    Off,
    Tcp,
    Nccl,
    /// NCCL when every node has GPUs and libnccl, else TCP.
    Auto,
}

/// What to measure, from the command line of rank 0.
#[derive(Clone, Debug, PartialEq)]
pub struct AllreducePlan {
    pub mode: AllreduceMode,
    pub sizes: Vec<u64>,
    pub compare_env: BTreeMap<String, String>,
    pub streams: u32,
    pub warmup: u32,
    pub iters: u32,
    /// Bounds every wait inside one size (a connect, a chunk).
    pub step_timeout: Duration,
    /// The longest a node may stay silent before it is given up on (from `--timeout`).
    pub silence: Duration,
}

impl AllreducePlan {
    /// How long a whole run may take before a node is given up on.
    fn limit(&self) -> Duration {
        self.step_timeout * (self.sizes.len() as u32 + 2) + Duration::from_secs(10)
    }
}

/// The results, or why nothing was measured.
#[derive(Default)]
pub struct Outcome {
    pub results: Vec<CollectiveResult>,
    pub not_run: Option<String>,
    /// What the run chose not to measure, and why (for the recommendation's reasons).
    pub notes: Vec<String>,
}

/// The transport `--allreduce` resolves to for these nodes, or why none runs.
pub fn transport(mode: AllreduceMode, nodes: &[(u32, &NodeFacts)]) -> Result<&'static str, String> {
    match mode {
        AllreduceMode::Off => Err("not measured (--allreduce off)".into()),
        AllreduceMode::Tcp => Ok("tcp"),
        AllreduceMode::Nccl => Ok("nccl"),
        AllreduceMode::Auto => {
            if !nodes.is_empty()
                && nodes
                    .iter()
                    .all(|(_, f)| crate::measure::nccl::unready(f).is_none())
            {
                Ok("nccl")
            } else {
                Ok("tcp")
            }
        }
    }
}

/// Runs the all-reduce the plan asks for, with the advised environment and, with
/// `--compare-env`, a second time with those variables changed.
pub(super) fn measure_allreduce(
    members: &mut [JoinedNode],
    evals: &[NetworkEval],
    rec: &Recommendation,
    plan: &AllreducePlan,
    events: &Events,
) -> Outcome {
    let alive: Vec<(u32, &NodeFacts)> = members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, &m.facts))
        .collect();
    let transport = match transport(plan.mode, &alive) {
        Ok(t) => t,
        Err(why) => {
            return Outcome {
                not_run: Some(why),
                ..Default::default()
            };
        }
    };
    let alive_ranks: Vec<u32> = alive.iter().map(|(r, _)| *r).collect();
    // No network connects every pair: one failed pair among n² does not skip the all-reduce;
    // it runs (TCP) over a ring of links that worked, on the network closest to complete.
    let mut ring_note = None;
    let mut ring_order = None;
    let chosen = match preflight_checks::networks::choose(evals) {
        Some(c) => c,
        None => {
            let candidate = evals
                .iter()
                .filter(|e| {
                    alive_ranks
                        .iter()
                        .all(|r| e.network.members.contains_key(r))
                })
                .max_by_key(|e| e.pairs_ok);
            let ring = candidate.and_then(|e| working_ring(e, &alive_ranks).map(|o| (e, o)));
            match (transport, ring) {
                ("tcp", Some((e, order))) => {
                    ring_note = Some(format!(
                        "the all-reduce ran over a ring of links that connected on {} ({} of {} ordered pairs did not: they are left out of the ring; see link.unreachable)",
                        e.network.id,
                        e.pairs_total - e.pairs_ok,
                        e.pairs_total
                    ));
                    ring_order = Some(order);
                    e
                }
                _ => {
                    return Outcome {
                        not_run: Some(
                            "not measured: no network connects every node, and no ring of working links covers them all (see link.unreachable)".into(),
                        ),
                        ..Default::default()
                    };
                }
            }
        }
    };
    let mut configs = vec![("advice", BTreeMap::new())];
    if !plan.compare_env.is_empty() {
        configs.push(("compare", plan.compare_env.clone()));
    }
    let mut results = Vec::new();
    let mut notes: Vec<String> = ring_note.into_iter().collect();
    for (config, overrides) in configs {
        let net = if transport == "tcp" && config == "compare" {
            match tcp_compare_network(evals, &overrides) {
                Ok(net) => net,
                Err(note) => {
                    notes.push(note);
                    continue;
                }
            }
        } else {
            chosen
        };
        let env = merged_env(&rec.env, None, &overrides);
        let mut base = base_result(transport, net, members, env, config);
        if let (Some(order), true) = (&ring_order, std::ptr::eq(net, chosen)) {
            base.order = order.clone();
        }
        events.phase(format!("{transport} all-reduce ({config})"));
        events.log(format!(
            "coordinator: {transport} all-reduce ({config}) starts on {} nodes, {} sizes",
            base.order.len(),
            plan.sizes.len()
        ));
        let result = if transport == "tcp" {
            tcp_ring(members, base, plan, events)
        } else {
            nccl_run(members, rec, &overrides, base, plan, events)
        };
        events.log(format!(
            "coordinator: {} all-reduce ({config}) done: {} sizes{}",
            transport,
            result.rows.len(),
            result
                .error
                .as_ref()
                .map(|e| format!(", error: {e}"))
                .unwrap_or_default()
        ));
        results.push(result);
    }
    Outcome {
        results,
        not_run: None,
        notes,
    }
}

/// The TCP ring follows only `NCCL_SOCKET_IFNAME`: with `--compare-env` naming it, the network
/// whose interfaces it selects on every node; otherwise there is nothing to compare.
fn tcp_compare_network<'a>(
    evals: &'a [NetworkEval],
    overrides: &BTreeMap<String, String>,
) -> Result<&'a NetworkEval, String> {
    let Some(value) = overrides.get("NCCL_SOCKET_IFNAME") else {
        return Err(
            "--compare-env was not measured: the TCP ring changes only with NCCL_SOCKET_IFNAME; the other variables apply to --allreduce nccl"
                .into(),
        );
    };
    let spec = preflight_checks::ifname::IfnameSpec::parse(value);
    evals
        .iter()
        .filter(|e| e.fully_connected)
        .find(|e| e.network.members.values().all(|m| spec.matches(&m.interface)))
        .ok_or_else(|| {
            format!(
                "--compare-env NCCL_SOCKET_IFNAME={value} was not measured: it selects no network that connects every node"
            )
        })
}

/// The environment a node runs with: the advice, its own values, then the overrides.
fn merged_env(
    env: &BTreeMap<String, String>,
    own: Option<&BTreeMap<String, String>>,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut e = env.clone();
    if let Some(own) = own {
        e.extend(own.clone());
    }
    e.extend(overrides.clone());
    e
}

fn base_result(
    transport: &str,
    chosen: &NetworkEval,
    members: &[JoinedNode],
    env: BTreeMap<String, String>,
    config: &str,
) -> CollectiveResult {
    let order: Vec<u32> = members
        .iter()
        .filter(|m| m.alive && chosen.network.members.contains_key(&m.rank))
        .map(|m| m.rank)
        .collect();
    let mut names: Vec<String> = chosen
        .network
        .members
        .values()
        .map(|m| m.interface.clone())
        .collect();
    names.sort();
    names.dedup();
    CollectiveResult {
        op: "allreduce".into(),
        transport: transport.into(),
        ranks: order.len() as u32,
        env,
        addresses: order
            .iter()
            .filter_map(|r| {
                let m = chosen.network.members.get(r)?;
                Some((r.to_string(), m.address.to_string()))
            })
            .collect(),
        order,
        network: Some(format!("{} ({})", chosen.network.id, names.join("/"))),
        config: config.into(),
        ..Default::default()
    }
}

/// A ring through every rank in `ranks` whose every hop (a node to the next, as the TCP ring
/// connects) is a link the probe connected on `net`; rank order where it works, otherwise a
/// neighbour swapped in around each failed hop. `None` when no such ring is found.
pub(crate) fn working_ring(net: &NetworkEval, ranks: &[u32]) -> Option<Vec<u32>> {
    let bad: std::collections::HashSet<(u32, u32)> =
        net.failures.iter().map(|l| (l.from, l.to)).collect();
    ring_avoiding(ranks, &bad)
}

/// A ring through `ranks` that uses no hop in `bad` (see [`working_ring`]).
fn ring_avoiding(ranks: &[u32], bad: &std::collections::HashSet<(u32, u32)>) -> Option<Vec<u32>> {
    let ok = |a: u32, b: u32| !bad.contains(&(a, b));
    let n = ranks.len();
    if n < 2 {
        return Some(ranks.to_vec());
    }
    let mut order = ranks.to_vec();
    for attempt in 0..4usize {
        if attempt > 0 {
            order.rotate_left((1 + attempt) % n);
        }
        let mut stuck = false;
        for i in 0..n - 1 {
            if ok(order[i], order[i + 1]) && (i + 2 < n || ok(order[i + 1], order[0])) {
                continue;
            }
            let found = (i + 1..n).find(|&j| {
                ok(order[i], order[j])
                    && (i + 2 < n || ok(order[j], order[0]))
                    && (j == i + 1 || j + 1 >= n || ok(order[i + 1], order[j + 1]))
            });
            match found {
                Some(j) => order.swap(i + 1, j),
                None => {
                    stuck = true;
                    break;
                }
            }
        }
        let closes = ok(order[n - 1], order[0]);
        let all_ok = (0..n - 1).all(|i| ok(order[i], order[i + 1]));
        if !stuck && closes && all_ok {
            return Some(order);
        }
    }
    None
}

fn index_of(members: &[JoinedNode], rank: u32) -> Option<usize> {
    members.iter().position(|m| m.rank == rank && m.alive)
}

/// Notes the failure of every node `gather` gave up on.
fn fail_lost(res: &mut CollectiveResult, members: &[JoinedNode], lost: &[usize], what: &str) {
    for &i in lost {
        fail(res, members[i].rank, what);
    }
}

/// Notes a node's failure on the result.
fn fail(res: &mut CollectiveResult, rank: u32, what: &str) {
    if !res.failed_ranks.contains(&rank) {
        res.failed_ranks.push(rank);
    }
    let line = format!("rank {rank}: {what}");
    res.error = Some(match res.error.take() {
        Some(prev) => format!("{prev}; {line}"),
        None => line,
    });
}

/// The TCP ring: every node opens a listener on its chosen address, then connects to its right neighbour.
fn tcp_ring(
    members: &mut [JoinedNode],
    mut res: CollectiveResult,
    plan: &AllreducePlan,
    events: &Events,
) -> CollectiveResult {
    let order = res.order.clone();
    let n = order.len();
    if n == 0 {
        res.error = Some("no node is on the chosen network".into());
        return res;
    }
    // 1. Listeners.
    let addr_of = |r: u32| res.addresses.get(&r.to_string()).cloned();
    let addresses: BTreeMap<u32, String> = order
        .iter()
        .filter_map(|r| Some((*r, addr_of(*r)?)))
        .collect();
    let asked = send_orders(members, "the all-reduce", |m| {
        addresses
            .get(&m.rank)
            .map(|a| Msg::RingListen { address: a.clone() })
    });
    let mut ports: BTreeMap<u32, u16> = BTreeMap::new();
    let lost = gather(
        members,
        &asked,
        "the all-reduce",
        Wait::within(plan.step_timeout),
        |m| matches!(m, Msg::RingReady { .. } | Msg::Failed { .. }),
        |m, msg| match msg {
            Msg::RingReady { port } => {
                ports.insert(m.rank, port);
                Step::Done
            }
            Msg::Failed { error } => {
                fail(&mut res, m.rank, &error);
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    fail_lost(
        &mut res,
        members,
        &lost,
        "stopped answering before the ring started",
    );
    if ports.len() != n {
        for r in &order {
            if !ports.contains_key(r) && !res.failed_ranks.contains(r) {
                fail(&mut res, *r, "could not open a ring listener");
            }
        }
        return res;
    }
    // 2. The ring itself.
    let orders: BTreeMap<u32, RingOrder> = order
        .iter()
        .enumerate()
        .map(|(pos, r)| {
            let right = order[(pos + 1) % n];
            let left = order[(pos + n - 1) % n];
            (
                *r,
                RingOrder {
                    pos: pos as u32,
                    n: n as u32,
                    left_rank: left,
                    right_rank: right,
                    right_address: addresses.get(&right).cloned().unwrap_or_default(),
                    right_port: ports.get(&right).copied().unwrap_or(0),
                    sizes: plan.sizes.clone(),
                    streams: plan.streams,
                    warmup: plan.warmup,
                    iters: plan.iters,
                    timeout_ms: plan.step_timeout.as_millis() as u64,
                },
            )
        })
        .collect();
    let asked = send_orders(members, "the all-reduce", |m| {
        orders.get(&m.rank).map(|o| Msg::Ring { order: o.clone() })
    });
    // Rows arrive per size as each node finishes it, so a node lost midway keeps the sizes
    // every node finished before.
    let pacer = asked.first().map(|&i| members[i].rank);
    let mut per_rank: BTreeMap<u32, Vec<RankRow>> = BTreeMap::new();
    let lost = gather(
        members,
        &asked,
        "the all-reduce",
        Wait {
            limit: plan.limit(),
            silence: plan.silence,
        },
        |m| matches!(m, Msg::RingDone { .. }),
        |m, msg| match msg {
            Msg::RingRow { row } => {
                per_rank.entry(m.rank).or_default().push(row);
                if pacer == Some(m.rank) {
                    events.step();
                }
                Step::More
            }
            Msg::RingDone { rows, error } => {
                if let Some(e) = error {
                    fail(&mut res, m.rank, &e);
                }
                per_rank.insert(m.rank, rows);
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    fail_lost(
        &mut res,
        members,
        &lost,
        "stopped answering during the ring",
    );
    merge_rows(&mut res, &order, &per_rank, n as u32);
    res.streams = Some(plan.streams);
    res
}

/// Per size: the slowest node's time, every node's wrong values; only sizes every node finished.
fn merge_rows(
    res: &mut CollectiveResult,
    order: &[u32],
    per_rank: &BTreeMap<u32, Vec<RankRow>>,
    bus_ranks: u32,
) {
    let done = order
        .iter()
        .map(|r| per_rank.get(r).map_or(0, Vec::len))
        .min()
        .unwrap_or(0);
    for i in 0..done {
        let rows: Vec<(u32, &RankRow)> = order
            .iter()
            .filter_map(|r| Some((*r, per_rank.get(r)?.get(i)?)))
            .collect();
        let Some((_, first)) = rows.first() else {
            continue;
        };
        let time_us = rows.iter().map(|(_, r)| r.time_us).fold(0.0, f64::max);
        let wrong: u64 = rows.iter().map(|(_, r)| r.wrong).sum();
        for (rank, r) in &rows {
            if r.wrong > 0 && !res.failed_ranks.contains(rank) {
                res.failed_ranks.push(*rank);
            }
        }
        res.rows.push(row(first.bytes, time_us, bus_ranks, wrong));
    }
    res.failed_ranks.sort_unstable();
}

/// One nccl-tests row: algbw = bytes / time, busbw = algbw * 2(n-1)/n (GB/s = 1e9 B/s).
pub fn row(bytes: u64, time_us: f64, n: u32, wrong: u64) -> CollectiveRow {
    use preflight_checks::collective::{algbw_gb_s, busbw_gb_s};
    CollectiveRow {
        bytes,
        time_us: (time_us * 100.0).round() / 100.0,
        algbw_gb_s: round_sig(algbw_gb_s(bytes, time_us)),
        busbw_gb_s: round_sig(busbw_gb_s(bytes, time_us, n as usize)),
        wrong,
    }
}

/// Four significant digits: readable JSON that still keeps the bandwidth of a slow small message
/// (0.0004 GB/s), which a fixed number of decimals would round to 0.
fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// NCCL: one child per node drives its GPUs; the node hosting NCCL rank 0 makes the unique id,
/// the coordinator hands it to every node.
fn nccl_run(
    members: &mut [JoinedNode],
    rec: &Recommendation,
    overrides: &BTreeMap<String, String>,
    mut res: CollectiveResult,
    plan: &AllreducePlan,
    events: &Events,
) -> CollectiveResult {
    let order = res.order.clone();
    let mut orders: BTreeMap<u32, NcclOrder> = BTreeMap::new();
    let mut next = 0u32;
    for r in &order {
        let Some(i) = index_of(members, *r) else {
            continue;
        };
        if let Some(why) = crate::measure::nccl::unready(&members[i].facts) {
            fail(&mut res, *r, &format!("cannot run NCCL: {why}"));
            continue;
        }
        let gpus = preflight_checks::visible_devices::visible_gpu_count(&members[i].facts);
        orders.insert(
            *r,
            NcclOrder {
                nranks: 0,
                first_rank: next,
                gpus,
                sizes: plan.sizes.clone(),
                warmup: plan.warmup,
                iters: plan.iters,
                env: merged_env(&rec.env, rec.node_env.get(&r.to_string()), overrides),
                timeout_ms: plan.limit().as_millis() as u64,
            },
        );
        next += gpus;
    }
    if res.error.is_some() {
        return res;
    }
    for o in orders.values_mut() {
        o.nranks = next;
    }
    res.ranks = next;
    // 1. The unique id from the node hosting NCCL rank 0.
    let Some(first) = order.first().copied() else {
        res.error = Some("no node to run on".into());
        return res;
    };
    let asked = send_orders(members, "the NCCL all-reduce", |m| {
        (m.rank == first).then(|| Msg::NcclStart {
            order: orders[&first].clone(),
        })
    });
    let mut id = None;
    let lost = gather(
        members,
        &asked,
        "the NCCL all-reduce",
        Wait::within(plan.step_timeout),
        |m| matches!(m, Msg::NcclId { .. } | Msg::Failed { .. }),
        |m, msg| match msg {
            Msg::NcclId { id: got } => {
                id = Some(got);
                Step::Done
            }
            Msg::Failed { error } => {
                fail(&mut res, m.rank, &error);
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    fail_lost(
        &mut res,
        members,
        &lost,
        "stopped answering while starting NCCL",
    );
    let Some(id) = id else {
        if res.error.is_none() {
            fail(&mut res, first, "did not send NCCL's unique id");
        }
        return res;
    };
    // 2. Every node joins with the id and runs the sizes.
    let asked = send_orders(members, "the NCCL all-reduce", |m| {
        orders.get(&m.rank).map(|o| Msg::NcclRun {
            order: o.clone(),
            id: id.clone(),
        })
    });
    let mut per_rank: BTreeMap<u32, Vec<RankRow>> = BTreeMap::new();
    let lost = gather(
        members,
        &asked,
        "the NCCL all-reduce",
        Wait {
            limit: plan.limit(),
            silence: plan.limit(),
        },
        |m| matches!(m, Msg::NcclDone { .. } | Msg::Failed { .. }),
        |m, msg| match msg {
            Msg::NcclDone {
                rows,
                net,
                net_mismatch,
                error,
            } => {
                if let Some(e) = error {
                    fail(&mut res, m.rank, &e);
                }
                if res.net.is_none() {
                    res.net = net;
                }
                if res.net_mismatch.is_none() {
                    res.net_mismatch = net_mismatch.map(|w| format!("rank {}: {w}", m.rank));
                }
                per_rank.insert(m.rank, rows);
                events.step();
                Step::Done
            }
            Msg::Failed { error } => {
                fail(&mut res, m.rank, &error);
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    fail_lost(
        &mut res,
        members,
        &lost,
        "stopped answering during the NCCL all-reduce",
    );
    let nranks = res.ranks;
    merge_rows(&mut res, &order, &per_rank, nranks);
    res
}

/// With `--compare-env`: when the compared setting was faster at the largest common size,
/// returns its overrides and a reason citing both numbers.
pub fn preferred_overrides(
    results: &[CollectiveResult],
    compare_env: &BTreeMap<String, String>,
) -> (Option<BTreeMap<String, String>>, Option<String>) {
    let find = |c: &str| results.iter().find(|r| r.config == c && r.error.is_none());
    let (Some(advice), Some(compare)) = (find("advice"), find("compare")) else {
        return (None, None);
    };
    let biggest = |r: &CollectiveResult| {
        preflight_checks::collective::large_row(r).map(|x| (x.bytes, x.busbw_gb_s))
    };
    let (Some((ab, abw)), Some((cb, cbw))) = (biggest(advice), biggest(compare)) else {
        return (None, None);
    };
    if ab != cb {
        return (None, None);
    }
    let changed = compare_env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let size = preflight_checks::collective::human_bytes(ab);
    if cbw > abw * 1.05 && compare.rows.iter().all(|r| r.wrong == 0) {
        (
            Some(compare_env.clone()),
            Some(format!(
                "{changed}: the {} all-reduce measured {cbw:.3} GB/s busbw at {size} with it against {abw:.3} GB/s with the first advice, so the advice uses it",
                compare.transport
            )),
        )
    } else {
        (
            None,
            Some(format!(
                "kept the advice: the {} all-reduce measured {abw:.3} GB/s busbw at {size} with it against {cbw:.3} GB/s with {changed} (--compare-env)",
                advice.transport
            )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_goes_around_failed_hops() {
        let ranks: Vec<u32> = (0..64).collect();
        let hop_ok = |order: &[u32], bad: &std::collections::HashSet<(u32, u32)>| {
            (0..order.len()).all(|i| !bad.contains(&(order[i], order[(i + 1) % order.len()])))
        };
        let none = std::collections::HashSet::new();
        assert_eq!(ring_avoiding(&ranks, &none).unwrap(), ranks);
        let bad: std::collections::HashSet<(u32, u32)> =
            [(3, 4), (10, 11), (63, 0), (20, 21), (21, 22)]
                .into_iter()
                .collect();
        let ring = ring_avoiding(&ranks, &bad).expect("a ring exists");
        assert!(hop_ok(&ring, &bad), "{ring:?}");
        let mut sorted = ring.clone();
        sorted.sort();
        assert_eq!(sorted, ranks, "every rank once");
        // A node nobody can reach: no ring.
        let dead: std::collections::HashSet<(u32, u32)> =
            (0..8).filter(|r| *r != 5).map(|r| (r, 5)).collect();
        assert!(ring_avoiding(&(0..8).collect::<Vec<_>>(), &dead).is_none());
        // Small rings with a node nobody reaches: no ring, and no panic whatever the size.
        for n in 2..6u32 {
            let dead: std::collections::HashSet<(u32, u32)> =
                (0..n - 1).map(|r| (r, n - 1)).collect();
            assert!(ring_avoiding(&(0..n).collect::<Vec<_>>(), &dead).is_none());
        }
    }

    #[test]
    fn rows_follow_nccl_tests_definitions() {
        // 64 MiB in 50 ms on 4 ranks: algbw 1.342 GB/s, busbw 1.5x that.
        let r = row(64 << 20, 50_000.0, 4, 0);
        assert_eq!(r.algbw_gb_s, 1.342);
        assert_eq!(r.busbw_gb_s, 2.013);
        assert_eq!(row(1 << 20, 0.0, 2, 0).algbw_gb_s, 0.0);
        assert_eq!(row(1 << 20, 10.0, 1, 0).busbw_gb_s, 0.0);
        // 12 KiB in 40 ms: far below a thousandth of a GB/s, and still not 0.
        let slow = row(12 << 10, 40_000.0, 8, 0);
        assert_eq!(slow.algbw_gb_s, 0.0003072);
        assert!(slow.busbw_gb_s > 0.0);
    }

    #[test]
    fn merge_takes_the_slowest_node_and_sums_wrong_values() {
        let mut res = CollectiveResult::default();
        let per_rank = BTreeMap::from([
            (
                0,
                vec![
                    RankRow {
                        bytes: 1024,
                        time_us: 10.0,
                        wrong: 0,
                    },
                    RankRow {
                        bytes: 2048,
                        time_us: 20.0,
                        wrong: 0,
                    },
                ],
            ),
            (
                1,
                vec![RankRow {
                    bytes: 1024,
                    time_us: 30.0,
                    wrong: 3,
                }],
            ),
        ]);
        merge_rows(&mut res, &[0, 1], &per_rank, 2);
        assert_eq!(res.rows.len(), 1, "only sizes every node finished");
        assert_eq!(res.rows[0].time_us, 30.0);
        assert_eq!(res.rows[0].wrong, 3);
        assert_eq!(res.failed_ranks, vec![1]);
    }

    #[test]
    fn auto_picks_nccl_only_when_every_node_can() {
        let mut gpu = NodeFacts::default();
        gpu.gpu.gpus.push(Default::default());
        gpu.nccl.library = Some("/usr/lib/libnccl.so.2".into());
        let cpu = NodeFacts::default();
        assert_eq!(
            transport(AllreduceMode::Auto, &[(0, &gpu), (1, &gpu)]),
            Ok("nccl")
        );
        assert_eq!(
            transport(AllreduceMode::Auto, &[(0, &gpu), (1, &cpu)]),
            Ok("tcp")
        );
        assert_eq!(transport(AllreduceMode::Tcp, &[(0, &gpu)]), Ok("tcp"));
        assert!(transport(AllreduceMode::Off, &[(0, &gpu)]).is_err());
    }

    fn result(config: &str, busbw_time_us: f64) -> CollectiveResult {
        CollectiveResult {
            transport: "nccl".into(),
            config: config.into(),
            ranks: 2,
            rows: vec![row(256 << 20, busbw_time_us, 2, 0)],
            ..Default::default()
        }
    }

    #[test]
    fn compare_env_wins_only_when_faster_and_both_numbers_are_cited() {
        let cmp = BTreeMap::from([("NCCL_IB_DISABLE".to_string(), "1".to_string())]);
        let (over, why) = preferred_overrides(
            &[result("advice", 100_000.0), result("compare", 50_000.0)],
            &cmp,
        );
        assert_eq!(over, Some(cmp.clone()));
        let why = why.unwrap();
        assert!(why.contains("5.369") && why.contains("2.684"), "{why}");
        let (over, why) = preferred_overrides(
            &[result("advice", 50_000.0), result("compare", 100_000.0)],
            &cmp,
        );
        assert_eq!(over, None);
        assert!(why.unwrap().starts_with("kept the advice"));
        assert_eq!(
            preferred_overrides(&[result("advice", 1.0)], &cmp),
            (None, None)
        );
    }
}
