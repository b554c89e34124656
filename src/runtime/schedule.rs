//! Which pairs measure throughput, in rounds of disjoint pairs (each round runs both directions
//! of its pairs at once): every pair for a small cluster; above that the ring neighbours (the
//! pairs a ring all-reduce uses) plus `k` random perfect matchings, so the number of rounds
//! does not depend on the cluster's size and every node is measured at least `k + 1` times.

/// Up to this many nodes every pair is measured (n - 1 rounds at most).
pub const ALL_PAIRS_UP_TO: usize = 8;

/// The rounds for `ranks` with `k` random matchings drawn from `seed`.
pub fn schedule(ranks: &[u32], k: u32, seed: u64) -> Vec<Vec<(u32, u32)>> {
    if ranks.len() <= ALL_PAIRS_UP_TO {
        return all_pairs(ranks);
    }
    let mut out = ring_rounds(ranks);
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    for j in 0..k as usize {
        out.push(random_matching(ranks, j, &mut rng));
    }
    out
}

/// How `schedule` names itself in the report.
pub fn describe(n: usize, k: u32) -> String {
    if n <= ALL_PAIRS_UP_TO {
        "all pairs".into()
    } else {
        format!("ring + {k} random matchings")
    }
}

/// Round-robin rounds of disjoint pairs (circle method): n-1 rounds for even n, n for odd.
pub fn all_pairs(ranks: &[u32]) -> Vec<Vec<(u32, u32)>> {
    let mut v: Vec<Option<u32>> = ranks.iter().map(|r| Some(*r)).collect();
    if v.len() % 2 == 1 {
        v.push(None);
    }
    let n = v.len();
    let mut out = Vec::new();
    if n < 2 {
        return out;
    }
    for _ in 0..n - 1 {
        let round: Vec<(u32, u32)> = (0..n / 2)
            .filter_map(|i| match (v[i], v[n - 1 - i]) {
                (Some(a), Some(b)) => Some((a.min(b), a.max(b))),
                _ => None,
            })
            .collect();
        out.push(round);
        let last = v.pop().expect("n >= 2");
        v.insert(1, last);
    }
    out
}

/// The ring `ranks[0] - ranks[1] - ... - ranks[n-1] - ranks[0]` as matchings: even edges, odd
/// edges, and for an odd ring the closing edge alone.
fn ring_rounds(ranks: &[u32]) -> Vec<Vec<(u32, u32)>> {
    let n = ranks.len();
    let edge = |i: usize| {
        let (a, b) = (ranks[i], ranks[(i + 1) % n]);
        (a.min(b), a.max(b))
    };
    let mut even = Vec::new();
    let mut odd = Vec::new();
    let mut closing = Vec::new();
    for i in 0..n {
        if n % 2 == 1 && i == n - 1 {
            closing.push(edge(i));
        } else if i % 2 == 0 {
            even.push(edge(i));
        } else {
            odd.push(edge(i));
        }
    }
    [even, odd, closing]
        .into_iter()
        .filter(|r| !r.is_empty())
        .collect()
}

/// A random perfect matching; with an odd count the node left out is a different one in each
/// matching `j` (so no node misses more than one).
fn random_matching(ranks: &[u32], j: usize, rng: &mut Rng) -> Vec<(u32, u32)> {
    let mut v: Vec<u32> = ranks.to_vec();
    if v.len() % 2 == 1 {
        let out = j % v.len();
        v.remove(out);
    }
    // Fisher-Yates.
    for i in (1..v.len()).rev() {
        let r = (rng.next() % (i as u64 + 1)) as usize;
        v.swap(i, r);
    }
    v.chunks_exact(2)
        .map(|p| (p[0].min(p[1]), p[0].max(p[1])))
        .collect()
}

/// xorshift64*: reproducible from a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn check_disjoint(rounds: &[Vec<(u32, u32)>]) {
        for r in rounds {
            let mut used = BTreeSet::new();
            for (a, b) in r {
                assert_ne!(a, b);
                assert!(
                    used.insert(*a) && used.insert(*b),
                    "a rank twice in a round"
                );
            }
        }
    }

    #[test]
    fn small_clusters_measure_every_pair_once() {
        for n in 2..=ALL_PAIRS_UP_TO as u32 {
            let ranks: Vec<u32> = (0..n).collect();
            let rs = schedule(&ranks, 2, 7);
            check_disjoint(&rs);
            let seen: BTreeSet<_> = rs.iter().flatten().collect();
            assert_eq!(seen.len() as u32, n * (n - 1) / 2);
        }
    }

    #[test]
    fn rounds_do_not_grow_with_the_cluster_and_every_node_is_measured_k_plus_one_times() {
        for k in [1u32, 2, 4] {
            for n in [9u32, 10, 63, 64, 1023, 1024, 4096] {
                let ranks: Vec<u32> = (0..n).collect();
                let rs = schedule(&ranks, k, n as u64);
                assert!(rs.len() as u32 <= 3 + k, "n={n}: {} rounds", rs.len());
                check_disjoint(&rs);
                let mut per: BTreeMap<u32, u32> = BTreeMap::new();
                for (a, b) in rs.iter().flatten() {
                    *per.entry(*a).or_default() += 1;
                    *per.entry(*b).or_default() += 1;
                }
                assert_eq!(per.len() as u32, n, "every node measured");
                let least = per.values().min().copied().unwrap();
                assert!(least > k, "n={n} k={k}: a node measured only {least} times");
                // The ring's pairs are all there.
                let pairs: BTreeSet<_> = rs.iter().flatten().copied().collect();
                for i in 0..n {
                    let (a, b) = (i, (i + 1) % n);
                    assert!(pairs.contains(&(a.min(b), a.max(b))), "ring pair {a}-{b}");
                }
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let ranks: Vec<u32> = (0..100).collect();
        assert_eq!(schedule(&ranks, 3, 42), schedule(&ranks, 3, 42));
        assert_ne!(schedule(&ranks, 3, 42), schedule(&ranks, 3, 43));
    }
}
