//! How the nodes' answers become the all-reduce's result: a node's failure noted once, every
//! step's wait for its nodes in one place ([`Ask`]), the rows merged nccl-tests style.

use crate::runtime::members::{JoinedNode, Step, Wait, gather};
use crate::transport::wire::{Msg, RankRow};
use preflight_checks::model::{CollectiveResult, CollectiveRow};
use std::collections::BTreeMap;

/// One step's wait for its nodes: the phase's name in losses, the bounds, the answer that ends
/// a node's part, and what a node given up on is noted as.
pub(super) struct Ask<'a> {
    pub phase: &'a str,
    pub wait: Wait,
    pub is_final: fn(&Msg) -> bool,
    /// Noted on the result for every node lost here ("stopped answering during ...").
    pub lost: &'a str,
}

impl Ask<'_> {
    /// Reads the `asked` nodes' answers into `handle` (see `members::gather`), then notes every
    /// node lost on the way as failed.
    pub(super) fn gather(
        &self,
        members: &mut [JoinedNode],
        asked: &[usize],
        res: &mut CollectiveResult,
        mut handle: impl FnMut(&mut JoinedNode, Msg, &mut CollectiveResult) -> Step,
    ) {
        let lost = gather(
            members,
            asked,
            self.phase,
            self.wait,
            self.is_final,
            |m, msg| handle(m, msg, res),
        );
        for &i in &lost {
            fail(res, members[i].rank, self.lost);
        }
    }
}

pub(super) fn index_of(members: &[JoinedNode], rank: u32) -> Option<usize> {
    members.iter().position(|m| m.rank == rank && m.alive)
}

/// Notes a node's failure on the result.
pub(super) fn fail(res: &mut CollectiveResult, rank: u32, what: &str) {
    if !res.failed_ranks.contains(&rank) {
        res.failed_ranks.push(rank);
    }
    let line = format!("rank {rank}: {what}");
    res.error = Some(match res.error.take() {
        Some(prev) => format!("{prev}; {line}"),
        None => line,
    });
}

/// Per size: the slowest node's time, every node's wrong values; only sizes every node finished.
pub(super) fn merge_rows(
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

/// The environment a node runs with: the advice, its own values, then the overrides.
pub(super) fn merged_env(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
