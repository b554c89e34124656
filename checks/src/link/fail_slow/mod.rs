//! Fail-slow judgment: from measured (from, to, value) samples, a reference the slow part cannot
//! move, and the smallest parts that explain the slow pairs: a node (sending, receiving or both),
//! a cut between two groups, a pair, one direction, or every pair at once.
//!
//! Pure and independent of how the values were measured: link throughput in Gbit/s, or
//! latency as a speed (the inverse of the round-trip time), so one model serves both.
//!
//! How it works (the anchors: ClusterKit, DLRover, ROCm CVS; see `../shared/DESIGN.md`):
//! - **Reference**: the upper quartile of the ordered pairs' values (nearest rank). A slow
//!   minority of nodes, or a slow cut that holds up to three quarters of the pairs (a rack
//!   uplink that every cross-rack pair shares), leaves it among the healthy pairs.
//! - **Slow pair**: under `share` of the reference, or under its own floor (the rated speed or
//!   a user floor, carried by each sample).
//! - **Groups**: nodes joined by pairs fast in every measured direction (union-find). A
//!   node with no fast pair is alone; groups of two or more are the healthy parts.
//! - **Blame**, smallest part first: a lone node slow with at least two partners of the
//!   groups is the node; two groups whose measured pairs between them are all slow are a cut;
//!   what is left is a pair (both directions slow) or a direction (one).
//!
//! Work is O(p log p) in the number of samples p; the output holds each blamed part once.

mod groups;
mod retest;
#[cfg(test)]
mod tests;

pub use retest::{RETEST_PAIRS, RETEST_ROUNDS, retest_plan};

use crate::infra::stats::median;
use groups::Groups;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The share of the reference under which a pair is slow (throughput).
pub const SLOW_SHARE: f64 = 0.5;

/// Pairs and directions named one by one at most; the rest are counted.
pub const MAX_LISTED_PAIRS: usize = 16;

/// Pairs across a cut kept for the retest.
const CUT_SAMPLE: usize = 2;

/// Distinct pairs measured between two groups before they are called a cut.
const MIN_CUT_PAIRS: usize = 2;

/// One measured ordered pair. Higher `value` is better.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub from: u32,
    pub to: u32,
    pub value: f64,
    /// Slow under this whatever the reference (a rated speed's share, a user floor); 0 for none.
    pub floor: f64,
}

/// Which way a node is slow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Sending,
    Receiving,
    Both,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Sending => "sending",
            Direction::Receiving => "receiving",
            Direction::Both => "both",
        }
    }
}

/// A node slow with its partners from the healthy groups.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowNode {
    pub rank: u32,
    pub direction: Direction,
    /// Median of its pairs to healthy partners, each way (None when none measured that way).
    pub send_median: Option<f64>,
    pub recv_median: Option<f64>,
    /// Distinct healthy partners measured, and how many of them were slow with it.
    pub partners: usize,
    pub slow_partners: usize,
    /// The healthy partners it was slow with (sorted): what the retest measures again.
    pub slow_with: Vec<u32>,
}

/// Two groups whose every measured pair between them is slow, while each is fast inside.
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    /// The larger group first.
    pub a: Vec<u32>,
    pub b: Vec<u32>,
    /// Median of the pairs measured inside a and inside b together.
    pub inside_median: Option<f64>,
    pub a_to_b_median: Option<f64>,
    pub b_to_a_median: Option<f64>,
    /// Ordered pairs measured across.
    pub across_pairs: usize,
    /// A few of them (the slowest first): what the retest measures again.
    pub across_sample: Vec<(u32, u32)>,
}

/// A pair (both directions slow) or one direction, whose ends are fast with everyone else.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowPair {
    pub a: u32,
    pub b: u32,
    pub a_to_b: Option<f64>,
    pub b_to_a: Option<f64>,
    /// Which of the two ways are slow.
    pub a_to_b_slow: bool,
    pub b_to_a_slow: bool,
    /// Each end's median with its other partners (None when it has none).
    pub a_elsewhere: Option<f64>,
    pub b_elsewhere: Option<f64>,
}

impl SlowPair {
    /// Only one way is slow.
    pub fn one_way(&self) -> bool {
        self.a_to_b_slow != self.b_to_a_slow
    }
}

/// Every measured pair is slow: nothing inside the cluster to compare with (two nodes, or a
/// network under its floor everywhere).
#[derive(Clone, Debug, PartialEq)]
pub struct Everywhere {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// The highest floor any pair was held to.
    pub floor: f64,
}

/// The judgment of one network's samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// Ordered pairs measured (the best figure of each).
    pub pairs: usize,
    /// The upper quartile of the pairs (the reference), their median and the slowest.
    pub reference: Option<f64>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    /// Ordered pairs judged slow.
    pub slow_pairs: usize,
    pub nodes: Vec<SlowNode>,
    pub cuts: Vec<Cut>,
    /// Pairs and single directions, at most [`MAX_LISTED_PAIRS`], the slowest first.
    pub pairs_slow: Vec<SlowPair>,
    /// Pairs and directions beyond those listed.
    pub unlisted_pairs: usize,
    pub everywhere: Option<Everywhere>,
    /// Parts seen slow once that the retest did not measure again (its budget was spent on
    /// the slower ones): not named, only counted. See [`Verdict::confirmed`].
    pub unconfirmed: usize,
}

impl Verdict {
    /// Nothing slow was found.
    pub fn clean(&self) -> bool {
        self.nodes.is_empty()
            && self.cuts.is_empty()
            && self.pairs_slow.is_empty()
            && self.unlisted_pairs == 0
            && self.everywhere.is_none()
    }

    /// Keeps only the parts the retest measured again (`retested`: ordered pairs); a retest
    /// keeps each pair's better figure, so a part still in this verdict was slow both times.
    /// The others are counted in `unconfirmed`. A verdict made without a retest is unchanged.
    pub fn confirmed(mut self, retested: &HashSet<(u32, u32)>) -> Verdict {
        if retested.is_empty() {
            return self;
        }
        let hit = |a: u32, b: u32| retested.contains(&(a, b)) || retested.contains(&(b, a));
        let before =
            self.nodes.len() + self.cuts.len() + self.pairs_slow.len() + self.unlisted_pairs;
        self.nodes
            .retain(|n| n.slow_with.iter().any(|p| hit(n.rank, *p)));
        self.cuts.retain(|c| {
            let (a, b): (HashSet<u32>, HashSet<u32>) =
                (c.a.iter().copied().collect(), c.b.iter().copied().collect());
            retested
                .iter()
                .any(|(x, y)| (a.contains(x) && b.contains(y)) || (b.contains(x) && a.contains(y)))
        });
        self.pairs_slow.retain(|p| hit(p.a, p.b));
        self.unlisted_pairs = 0;
        let after = self.nodes.len() + self.cuts.len() + self.pairs_slow.len();
        self.unconfirmed += before - after;
        self
    }

    /// The nodes the verdict blames as nodes.
    pub fn slow_ranks(&self) -> BTreeSet<u32> {
        self.nodes.iter().map(|n| n.rank).collect()
    }

    /// The suspects to measure again: the blamed nodes and the ends of blamed pairs, and the
    /// smaller side of each cut.
    pub fn suspects(&self) -> BTreeSet<u32> {
        let mut s = self.slow_ranks();
        for p in &self.pairs_slow {
            s.insert(p.a);
            s.insert(p.b);
        }
        for c in &self.cuts {
            s.extend(c.b.iter().copied());
        }
        s
    }
}

/// The value at the upper quartile by nearest rank (of `values`, unsorted).
fn upper_quartile(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = (values.len() * 3).div_ceil(4).max(1);
    Some(values[rank - 1])
}

/// Judges `samples` (any order; a pair measured twice keeps its better figure). A pair is slow
/// when `slow(value, reference)` says so, or when its value is under its own floor.
pub fn judge(samples: &[Sample], slow: impl Fn(f64, f64) -> bool) -> Verdict {
    judge_inner(samples, &slow, &HashSet::new())
}

/// The judgment after a retest: `retested` (ordered pairs) were measured again with few flows
/// at once and keep their better figure in `samples`. The reference comes from the pairs
/// measured once, under the schedule's own conditions (all of them when every pair was
/// retested), so the retest's easier figures do not raise it; and only parts the retest
/// measured again are named ([`Verdict::confirmed`]).
pub fn judge_retested(
    samples: &[Sample],
    slow: impl Fn(f64, f64) -> bool,
    retested: &HashSet<(u32, u32)>,
) -> Verdict {
    judge_inner(samples, &slow, retested).confirmed(retested)
}

fn judge_inner(
    samples: &[Sample],
    slow: &dyn Fn(f64, f64) -> bool,
    retested: &HashSet<(u32, u32)>,
) -> Verdict {
    // The best figure per ordered pair, sorted.
    let mut best: Vec<Sample> = samples
        .iter()
        .filter(|s| s.value.is_finite() && s.value >= 0.0 && s.from != s.to)
        .copied()
        .collect();
    best.sort_by(|x, y| {
        (x.from, x.to)
            .cmp(&(y.from, y.to))
            .then(y.value.total_cmp(&x.value))
    });
    best.dedup_by_key(|s| (s.from, s.to));
    if best.is_empty() {
        return Verdict::default();
    }
    let mut once: Vec<f64> = best
        .iter()
        .filter(|s| !retested.contains(&(s.from, s.to)))
        .map(|s| s.value)
        .collect();
    let mut values: Vec<f64> = best.iter().map(|s| s.value).collect();
    let reference = upper_quartile(if once.is_empty() {
        &mut values
    } else {
        &mut once
    })
    .unwrap_or(0.0);
    let median_all = median(&mut values);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let is_slow: Vec<bool> = best
        .iter()
        .map(|s| s.value < s.floor || slow(s.value, reference))
        .collect();
    let index: HashMap<(u32, u32), usize> = best
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.from, s.to), i))
        .collect();
    let mut verdict = Verdict {
        pairs: best.len(),
        reference: Some(reference),
        median: median_all,
        min: Some(min),
        slow_pairs: is_slow.iter().filter(|s| **s).count(),
        ..Verdict::default()
    };
    if verdict.slow_pairs == 0 {
        return verdict;
    }
    // Unordered pairs fast every way they were measured join their ends.
    let mut groups = Groups::new(best.iter().flat_map(|s| [s.from, s.to]));
    for (i, s) in best.iter().enumerate() {
        let reverse_slow = index.get(&(s.to, s.from)).is_some_and(|j| is_slow[*j]);
        if !is_slow[i] && !reverse_slow {
            groups.join(s.from, s.to);
        }
    }
    let group_of: HashMap<u32, usize> = groups.labels();
    let size = groups.sizes();
    let healthy = |r: u32| group_of.get(&r).is_some_and(|g| size[*g] >= 2);
    // No healthy group and every pair slow: nothing inside the cluster to compare with.
    if !best.iter().any(|s| healthy(s.from)) && is_slow.iter().all(|s| *s) {
        let mut v: Vec<f64> = best.iter().map(|s| s.value).collect();
        verdict.everywhere = Some(Everywhere {
            median: median(&mut v).unwrap_or(0.0),
            min,
            max: v.iter().copied().fold(0.0, f64::max),
            floor: best.iter().map(|s| s.floor).fold(0.0, f64::max),
        });
        return verdict;
    }
    // Lone nodes with at least two healthy partners are slow nodes.
    let mut explained = vec![false; best.len()];
    let mut lone: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, s) in best.iter().enumerate() {
        for (me, other) in [(s.from, s.to), (s.to, s.from)] {
            if !healthy(me) && healthy(other) {
                lone.entry(me).or_default().push(i);
            }
        }
    }
    for (rank, idx) in lone {
        let partners: BTreeSet<u32> = idx
            .iter()
            .map(|i| {
                if best[*i].from == rank {
                    best[*i].to
                } else {
                    best[*i].from
                }
            })
            .collect();
        if partners.len() < 2 {
            continue;
        }
        let (mut send, mut recv) = (Vec::new(), Vec::new());
        let (mut send_slow, mut recv_slow) = (0usize, 0usize);
        let mut slow_partners: BTreeSet<u32> = BTreeSet::new();
        for &i in &idx {
            let s = &best[i];
            if s.from == rank {
                send.push(s.value);
                send_slow += usize::from(is_slow[i]);
            } else {
                recv.push(s.value);
                recv_slow += usize::from(is_slow[i]);
            }
            if is_slow[i] {
                slow_partners.insert(if s.from == rank { s.to } else { s.from });
            }
        }
        let half = |slow: usize, all: usize| all > 0 && 2 * slow >= all;
        let direction = match (half(send_slow, send.len()), half(recv_slow, recv.len())) {
            (true, true) => Direction::Both,
            (true, false) => Direction::Sending,
            (false, true) => Direction::Receiving,
            (false, false) => continue,
        };
        verdict.nodes.push(SlowNode {
            rank,
            direction,
            send_median: median(&mut send),
            recv_median: median(&mut recv),
            partners: partners.len(),
            slow_partners: slow_partners.len(),
            slow_with: slow_partners.into_iter().collect(),
        });
    }
    let slow_node: BTreeSet<u32> = verdict.slow_ranks();
    for (i, s) in best.iter().enumerate() {
        if slow_node.contains(&s.from) || slow_node.contains(&s.to) {
            explained[i] = true;
        }
    }
    // Cuts: healthy groups whose pairs between them were measured (all slow, or they would be one).
    type Across = (Vec<f64>, Vec<f64>, Vec<(f64, u32, u32, usize)>);
    let mut across: BTreeMap<(usize, usize), Across> = BTreeMap::new();
    for (i, s) in best.iter().enumerate() {
        if explained[i] || !healthy(s.from) || !healthy(s.to) {
            continue;
        }
        let (ga, gb) = (group_of[&s.from], group_of[&s.to]);
        if ga == gb {
            continue;
        }
        let key = (ga.min(gb), ga.max(gb));
        let e = across.entry(key).or_default();
        if ga == key.0 {
            e.0.push(s.value);
        } else {
            e.1.push(s.value);
        }
        e.2.push((s.value, s.from, s.to, i));
    }
    // One pair across is that pair, not a cut: a cut needs two pairs or more between the groups.
    across.retain(|_, (_, _, sample)| {
        let unordered: BTreeSet<(u32, u32)> = sample
            .iter()
            .map(|(_, f, t, _)| (*f.min(t), *f.max(t)))
            .collect();
        unordered.len() >= MIN_CUT_PAIRS
    });
    for (_, _, sample) in across.values() {
        for (_, _, _, i) in sample {
            explained[*i] = true;
        }
    }
    if !across.is_empty() {
        let members = groups.members();
        let mut inside: HashMap<usize, Vec<f64>> = HashMap::new();
        for s in &best {
            if healthy(s.from) && group_of[&s.from] == group_of[&s.to] {
                inside.entry(group_of[&s.from]).or_default().push(s.value);
            }
        }
        for ((ga, gb), (mut ab, mut ba, mut sample)) in across {
            sample.sort_by(|x, y| x.0.total_cmp(&y.0));
            let across_sample: Vec<(u32, u32)> = sample
                .iter()
                .take(CUT_SAMPLE)
                .map(|(_, f, t, _)| (*f, *t))
                .collect();
            let (mut a, mut b) = (members[ga].clone(), members[gb].clone());
            let swap = b.len() > a.len() || (b.len() == a.len() && b.first() < a.first());
            if swap {
                std::mem::swap(&mut a, &mut b);
                std::mem::swap(&mut ab, &mut ba);
            }
            let mut both: Vec<f64> = inside.get(&ga).cloned().unwrap_or_default();
            both.extend(inside.get(&gb).cloned().unwrap_or_default());
            verdict.cuts.push(Cut {
                across_pairs: ab.len() + ba.len(),
                across_sample,
                a,
                b,
                inside_median: median(&mut both),
                a_to_b_median: median(&mut ab),
                b_to_a_median: median(&mut ba),
            });
        }
        verdict
            .cuts
            .sort_by_key(|c| std::cmp::Reverse(c.across_pairs));
    }
    // What is left: pairs and directions.
    let elsewhere = elsewhere_medians(&best, &is_slow);
    let mut pairs: BTreeMap<(u32, u32), SlowPair> = BTreeMap::new();
    for (i, s) in best.iter().enumerate() {
        if explained[i] || !is_slow[i] {
            continue;
        }
        let (a, b) = (s.from.min(s.to), s.from.max(s.to));
        let p = pairs.entry((a, b)).or_insert_with(|| SlowPair {
            a,
            b,
            a_to_b: index.get(&(a, b)).map(|j| best[*j].value),
            b_to_a: index.get(&(b, a)).map(|j| best[*j].value),
            a_to_b_slow: false,
            b_to_a_slow: false,
            a_elsewhere: elsewhere.get(&(a, b)).copied(),
            b_elsewhere: elsewhere.get(&(b, a)).copied(),
        });
        if s.from == a {
            p.a_to_b_slow = true;
        } else {
            p.b_to_a_slow = true;
        }
    }
    let mut listed: Vec<SlowPair> = pairs.into_values().collect();
    let worst = |p: &SlowPair| {
        [p.a_to_b, p.b_to_a]
            .into_iter()
            .flatten()
            .fold(f64::INFINITY, f64::min)
    };
    listed.sort_by(|x, y| {
        worst(x)
            .total_cmp(&worst(y))
            .then((x.a, x.b).cmp(&(y.a, y.b)))
    });
    verdict.unlisted_pairs = listed.len().saturating_sub(MAX_LISTED_PAIRS);
    listed.truncate(MAX_LISTED_PAIRS);
    verdict.pairs_slow = listed;
    verdict
}

/// For each slow ordered pair (a, b): the median of a's other pairs (either way, without b).
/// Keyed (me, other); computed only for the ends of slow pairs, so it stays linear.
fn elsewhere_medians(best: &[Sample], is_slow: &[bool]) -> HashMap<(u32, u32), f64> {
    let mut wanted: BTreeSet<(u32, u32)> = BTreeSet::new();
    for (i, s) in best.iter().enumerate() {
        if is_slow[i] {
            wanted.insert((s.from, s.to));
            wanted.insert((s.to, s.from));
        }
    }
    let ends: BTreeSet<u32> = wanted.iter().map(|(me, _)| *me).collect();
    let mut per: HashMap<u32, Vec<(u32, f64)>> = HashMap::new();
    for s in best {
        for (me, other) in [(s.from, s.to), (s.to, s.from)] {
            if ends.contains(&me) {
                per.entry(me).or_default().push((other, s.value));
            }
        }
    }
    wanted
        .into_iter()
        .filter_map(|(me, other)| {
            let mut v: Vec<f64> = per
                .get(&me)?
                .iter()
                .filter(|(o, _)| *o != other)
                .map(|(_, v)| *v)
                .collect();
            median(&mut v).map(|m| ((me, other), m))
        })
        .collect()
}

/// The throughput rule: slow under [`SLOW_SHARE`] of the reference.
pub fn throughput_rule(value: f64, reference: f64) -> bool {
    value < SLOW_SHARE * reference
}

/// Latency is judged as a speed (1000 / RTT in microseconds): slow when the RTT is above
/// [`LATENCY_FACTOR`] times the reference RTT and at least [`LATENCY_MIN_EXCESS_US`] above it.
pub const LATENCY_FACTOR: f64 = 2.1;
/// Microseconds an RTT must stand above the reference before it is called high: scheduling on
/// a loaded host moves a TCP RTT by hundreds of microseconds, a wrong path by more.
pub const LATENCY_MIN_EXCESS_US: f64 = 1000.0;

/// An RTT in microseconds as the speed [`judge`] compares.
pub fn rtt_speed(rtt_us: f64) -> f64 {
    1000.0 / rtt_us.max(1e-3)
}

/// The RTT in microseconds of a speed from [`rtt_speed`].
pub fn speed_rtt(speed: f64) -> f64 {
    1000.0 / speed.max(1e-9)
}

/// The latency rule over speeds from [`rtt_speed`].
pub fn latency_rule(value: f64, reference: f64) -> bool {
    let (rtt, ref_rtt) = (speed_rtt(value), speed_rtt(reference));
    rtt > LATENCY_FACTOR * ref_rtt && rtt - ref_rtt > LATENCY_MIN_EXCESS_US
}
