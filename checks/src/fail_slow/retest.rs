//! The retest before naming: suspects measured again, each against a partner known to be fast
//! and in a ring among themselves, in a number of rounds that does not grow with the cluster.

use super::Verdict;
use std::collections::{BTreeSet, HashSet};

/// Retest rounds at most, whatever the cluster's size.
pub const RETEST_ROUNDS: usize = 3;

/// Rounds of disjoint unordered pairs that measure the verdict's suspects again:
/// 1. every suspect against a known-fast partner it was not yet measured with where one is
///    left (DLRover pairs the slowest with the fastest);
/// 2. each blamed pair itself, and the suspects in a ring among themselves (even edges);
/// 3. the ring's odd edges. Suspects that are fast together are a group (one side of a cut),
///    not slow nodes.
///
/// `ranks` are the nodes on the network; `measured` holds the unordered pairs measured already.
/// A retest keeps each pair's better figure, so a busy moment clears and a slow part stays.
pub fn retest_plan(
    verdict: &Verdict,
    ranks: &[u32],
    measured: &HashSet<(u32, u32)>,
) -> Vec<Vec<(u32, u32)>> {
    let suspects: Vec<u32> = verdict.suspects().into_iter().collect();
    if suspects.is_empty() {
        return Vec::new();
    }
    let suspect: BTreeSet<u32> = suspects.iter().copied().collect();
    let fast: Vec<u32> = ranks
        .iter()
        .copied()
        .filter(|r| !suspect.contains(r))
        .collect();
    let key = |a: u32, b: u32| (a.min(b), a.max(b));
    let mut rounds = vec![with_fast_partners(&suspects, &fast, measured)];
    // The suspects' ring as two matchings; the closing edge of an odd ring is left out.
    let n = suspects.len();
    let ring = |parity: usize| -> Vec<(u32, u32)> {
        if n < 2 {
            return Vec::new();
        }
        (parity..n)
            .step_by(2)
            .filter(|i| *i + 1 < n || (n % 2 == 0 && n > 2))
            .map(|i| key(suspects[i], suspects[(i + 1) % n]))
            .collect()
    };
    let mut second: Vec<(u32, u32)> = Vec::new();
    let mut used: HashSet<u32> = HashSet::new();
    let blamed = verdict.pairs_slow.iter().map(|p| key(p.a, p.b));
    for (a, b) in blamed.chain(ring(0)) {
        if !used.contains(&a) && !used.contains(&b) && !second.contains(&(a, b)) {
            used.extend([a, b]);
            second.push((a, b));
        }
    }
    rounds.push(second);
    rounds.push(ring(1));
    rounds.retain(|r| !r.is_empty());
    rounds.truncate(RETEST_ROUNDS);
    rounds
}

/// Each suspect with a free fast partner, one not yet measured with it where one is left.
fn with_fast_partners(
    suspects: &[u32],
    fast: &[u32],
    measured: &HashSet<(u32, u32)>,
) -> Vec<(u32, u32)> {
    let key = |a: u32, b: u32| (a.min(b), a.max(b));
    let mut used: HashSet<u32> = HashSet::new();
    let mut round = Vec::new();
    let mut next = 0usize;
    for &s in suspects {
        let free = |f: &u32| !used.contains(f);
        let order = (0..fast.len()).map(|i| fast[(next + i) % fast.len()]);
        let pick = order
            .clone()
            .filter(free)
            .find(|f| !measured.contains(&key(s, *f)))
            .or_else(|| order.clone().find(free));
        let Some(f) = pick else {
            break;
        };
        used.insert(f);
        round.push(key(s, f));
        next = (fast.iter().position(|x| *x == f).unwrap_or(0) + 1) % fast.len();
    }
    round
}
