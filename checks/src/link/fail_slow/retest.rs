//! The retest before naming: each suspect part measured again with few flows at once, in a
//! number of rounds and pairs that does not grow with the cluster.

use super::Verdict;
use std::collections::{BTreeSet, HashSet};

/// Retest rounds at most, whatever the cluster's size.
pub const RETEST_ROUNDS: usize = 6;
/// Pairs in one retest round at most: few flows at once, so a pair slowed by contention (many
/// flows through one switch, or many agents on one host's cores) measures its own speed.
pub const RETEST_PAIRS: usize = 8;

/// Rounds of disjoint unordered pairs that measure the verdict's suspects again, at most
/// [`RETEST_ROUNDS`] of at most [`RETEST_PAIRS`] each, the most telling first:
/// 1. each slow node's slow pairs, then the node against a known-fast partner it was not yet
///    measured with (DLRover pairs the slowest with the fastest);
/// 2. each named pair and direction, the slowest first, then each of its ends against a
///    fresh fast partner;
/// 3. a few pairs across each cut.
///
/// A retest keeps each pair's better figure, so a busy moment clears and a slow part stays
/// slow; parts the budget does not reach are not named ([`Verdict::confirmed`]).
/// `ranks` are the nodes on the network; `measured` holds the unordered pairs measured already.
pub fn retest_plan(
    verdict: &Verdict,
    ranks: &[u32],
    measured: &HashSet<(u32, u32)>,
) -> Vec<Vec<(u32, u32)>> {
    let key = |a: u32, b: u32| (a.min(b), a.max(b));
    let suspects: BTreeSet<u32> = verdict.suspects();
    let fast: Vec<u32> = ranks
        .iter()
        .copied()
        .filter(|r| !suspects.contains(r))
        .collect();
    // A fresh fast partner for a suspect, spread over the fast nodes.
    let fresh = |i: usize, r: u32| {
        (0..fast.len())
            .map(|j| fast[(i * 7 + j) % fast.len()])
            .find(|f| !measured.contains(&key(r, *f)))
            .map(|f| key(r, f))
    };
    let mut wanted: Vec<(u32, u32)> = Vec::new();
    for n in &verdict.nodes {
        wanted.extend(n.slow_with.iter().map(|p| key(n.rank, *p)));
    }
    wanted.extend(
        verdict
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| fresh(i, n.rank)),
    );
    wanted.extend(verdict.pairs_slow.iter().map(|p| key(p.a, p.b)));
    // Each end of a pair against a fresh partner: an end slow with it too is a slow node whose
    // other partners were too few to tell.
    let ends = verdict.pairs_slow.iter().flat_map(|p| [p.a, p.b]);
    wanted.extend(
        ends.enumerate()
            .filter_map(|(i, r)| fresh(i + verdict.nodes.len(), r)),
    );
    for c in &verdict.cuts {
        wanted.extend(c.across_sample.iter().map(|(a, b)| key(*a, *b)));
    }
    let mut seen = HashSet::new();
    wanted.retain(|p| seen.insert(*p));
    // First fit into rounds of disjoint pairs, each under the cap.
    // Each round: the nodes it already uses, and its pairs.
    type Round = (HashSet<u32>, Vec<(u32, u32)>);
    let mut rounds: Vec<Round> = Vec::new();
    for (a, b) in wanted {
        let fit = rounds.iter().position(|(used, pairs)| {
            pairs.len() < RETEST_PAIRS && !used.contains(&a) && !used.contains(&b)
        });
        match fit {
            Some(i) => {
                rounds[i].0.extend([a, b]);
                rounds[i].1.push((a, b));
            }
            None if rounds.len() < RETEST_ROUNDS => {
                rounds.push((HashSet::from([a, b]), vec![(a, b)]));
            }
            None => {}
        }
    }
    rounds.into_iter().map(|(_, pairs)| pairs).collect()
}
