//! The TCP all-reduce on the coordinator: a ring of the nodes on the chosen network (around
//! failed hops when no network connects every pair); every node opens a listener on its address,
//! then connects to its right neighbour and runs the sizes (`measure::ring`).

use super::rows::{Ask, fail, merge_rows};
use crate::runtime::job::AllreducePlan;
use crate::runtime::members::{JoinedNode, Step, Wait, send_orders};
use crate::transport::events::Events;
use crate::transport::wire::{Msg, RankRow, RingOrder};
use preflight_checks::model::CollectiveResult;
use preflight_checks::networks::NetworkEval;
use std::collections::BTreeMap;

/// The TCP ring: every node opens a listener on its chosen address, then connects to its right neighbour.
pub(super) fn tcp_ring(
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
    let addr_of = |r: u32| res.addresses.get(&r.to_string()).cloned();
    let addresses: BTreeMap<u32, String> = order
        .iter()
        .filter_map(|r| Some((*r, addr_of(*r)?)))
        .collect();
    let Some(ports) = open_listeners(members, &mut res, &addresses, plan) else {
        return res;
    };
    let orders = ring_orders(&order, &addresses, &ports, plan);
    let asked = send_orders(members, "the all-reduce", |m| {
        orders.get(&m.rank).map(|o| Msg::Ring { order: o.clone() })
    });
    // Rows arrive per size as each node finishes it, so a node lost midway keeps the sizes
    // every node finished before.
    let pacer = asked.first().map(|&i| members[i].rank);
    let mut per_rank: BTreeMap<u32, Vec<RankRow>> = BTreeMap::new();
    let ask = Ask {
        phase: "the all-reduce",
        wait: Wait {
            limit: plan.limit(),
            silence: plan.silence,
        },
        is_final: |m| matches!(m, Msg::RingDone { .. }),
        lost: "stopped answering during the ring",
    };
    ask.gather(members, &asked, &mut res, |m, msg, res| match msg {
        Msg::RingRow { row } => {
            per_rank.entry(m.rank).or_default().push(row);
            if pacer == Some(m.rank) {
                events.step();
            }
            Step::More
        }
        Msg::RingDone { rows, error } => {
            if let Some(e) = error {
                fail(res, m.rank, &e);
            }
            per_rank.insert(m.rank, rows);
            Step::Done
        }
        _ => Step::Unexpected,
    });
    merge_rows(&mut res, &order, &per_rank, n as u32);
    res.streams = Some(plan.streams);
    res
}

/// Every ring node's listener on its address: the ports by rank, or `None` (noted on `res`)
/// when a node could not open one.
fn open_listeners(
    members: &mut [JoinedNode],
    res: &mut CollectiveResult,
    addresses: &BTreeMap<u32, String>,
    plan: &AllreducePlan,
) -> Option<BTreeMap<u32, u16>> {
    let asked = send_orders(members, "the all-reduce", |m| {
        addresses
            .get(&m.rank)
            .map(|a| Msg::RingListen { address: a.clone() })
    });
    let mut ports: BTreeMap<u32, u16> = BTreeMap::new();
    let ask = Ask {
        phase: "the all-reduce",
        wait: Wait::within(plan.step_timeout),
        is_final: |m| matches!(m, Msg::RingReady { .. } | Msg::Failed { .. }),
        lost: "stopped answering before the ring started",
    };
    ask.gather(members, &asked, res, |m, msg, res| match msg {
        Msg::RingReady { port } => {
            ports.insert(m.rank, port);
            Step::Done
        }
        Msg::Failed { error } => {
            fail(res, m.rank, &error);
            Step::Done
        }
        _ => Step::Unexpected,
    });
    if ports.len() == res.order.len() {
        return Some(ports);
    }
    for r in res.order.clone() {
        if !ports.contains_key(&r) && !res.failed_ranks.contains(&r) {
            fail(res, r, "could not open a ring listener");
        }
    }
    None
}

/// Each ring node's order: its place, its neighbours, and its right neighbour's listener.
fn ring_orders(
    order: &[u32],
    addresses: &BTreeMap<u32, String>,
    ports: &BTreeMap<u32, u16>,
    plan: &AllreducePlan,
) -> BTreeMap<u32, RingOrder> {
    let n = order.len();
    order
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
        .collect()
}

/// A ring through every rank in `ranks` whose every hop (a node to the next, as the TCP ring
/// connects) is a link the probe connected on `net`; rank order where it works, otherwise a
/// neighbour swapped in around each failed hop. `None` when no such ring is found.
pub fn working_ring(net: &NetworkEval, ranks: &[u32]) -> Option<Vec<u32>> {
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
}
