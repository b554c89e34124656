//! The judgment on hand-made matrices: the issue's own three-node case, a cut, latency.

use super::*;
use std::collections::HashSet;

fn s(from: u32, to: u32, value: f64) -> Sample {
    Sample {
        from,
        to,
        value,
        floor: 0.0,
    }
}

/// Every ordered pair among `n` with `f(from, to)`.
fn all(n: u32, f: impl Fn(u32, u32) -> f64) -> Vec<Sample> {
    (0..n)
        .flat_map(|a| (0..n).filter(move |b| *b != a).map(move |b| (a, b)))
        .map(|(a, b)| s(a, b, f(a, b)))
        .collect()
}

#[test]
fn the_reference_is_the_upper_quartile_by_nearest_rank() {
    assert_eq!(upper_quartile(&mut []), None);
    assert_eq!(upper_quartile(&mut [3.0]), Some(3.0));
    assert_eq!(upper_quartile(&mut [1.0, 9.0]), Some(9.0));
    // Four of six slow (a slow node among three): the reference is still a fast pair.
    assert_eq!(
        upper_quartile(&mut [0.01, 0.01, 0.01, 0.01, 17.0, 17.1]),
        Some(17.0)
    );
}

#[test]
fn a_slow_node_among_three_is_the_node_both_ways() {
    // The run: rank 2 shaped to 10 Mbit/s both ways, the others at 17 Gbit/s.
    let v = judge(
        &all(3, |a, b| if a == 2 || b == 2 { 0.01 } else { 17.0 }),
        throughput_rule,
    );
    assert_eq!(v.reference, Some(17.0));
    assert_eq!(v.slow_pairs, 4);
    assert_eq!(v.nodes.len(), 1, "{v:#?}");
    let n = &v.nodes[0];
    assert_eq!((n.rank, n.direction), (2, Direction::Both));
    assert_eq!((n.partners, n.slow_partners), (2, 2));
    assert_eq!(n.send_median, Some(0.01));
    assert!(v.cuts.is_empty() && v.pairs_slow.is_empty());
    assert_eq!(v.suspects().into_iter().collect::<Vec<_>>(), vec![2]);
}

#[test]
fn a_slow_pair_among_three_is_the_pair_and_says_each_end_is_fast_elsewhere() {
    let v = judge(
        &all(3, |a, b| if a + b == 1 { 0.2 } else { 9.0 }),
        throughput_rule,
    );
    assert!(v.nodes.is_empty(), "{v:#?}");
    assert_eq!(v.pairs_slow.len(), 1);
    let p = &v.pairs_slow[0];
    assert_eq!((p.a, p.b, p.one_way()), (0, 1, false));
    assert_eq!((p.a_elsewhere, p.b_elsewhere), (Some(9.0), Some(9.0)));
}

#[test]
fn a_slow_sender_is_a_node_sending() {
    let v = judge(
        &all(4, |a, _| if a == 3 { 0.5 } else { 9.0 }),
        throughput_rule,
    );
    assert_eq!(v.nodes.len(), 1);
    assert_eq!(v.nodes[0].direction, Direction::Sending);
    assert_eq!(v.nodes[0].recv_median, Some(9.0));
}

#[test]
fn a_rack_uplink_is_a_cut_with_both_groups_and_the_numbers() {
    // Two racks of 3: 9 Gbit/s inside, 0.2 across (18 of the 30 pairs).
    let rack = |r: u32| r / 3;
    let v = judge(
        &all(6, |a, b| if rack(a) == rack(b) { 9.0 } else { 0.2 }),
        throughput_rule,
    );
    assert!(v.nodes.is_empty() && v.pairs_slow.is_empty(), "{v:#?}");
    assert_eq!(v.cuts.len(), 1);
    let c = &v.cuts[0];
    assert_eq!((c.a.clone(), c.b.clone()), (vec![0, 1, 2], vec![3, 4, 5]));
    assert_eq!(c.across_pairs, 18);
    assert_eq!(c.inside_median, Some(9.0));
    assert_eq!((c.a_to_b_median, c.b_to_a_median), (Some(0.2), Some(0.2)));
}

#[test]
fn a_floor_names_a_network_slow_everywhere_once() {
    let mut v: Vec<Sample> = all(2, |_, _| 1.0);
    for x in &mut v {
        x.floor = 5.0;
    }
    let verdict = judge(&v, throughput_rule);
    assert_eq!(
        verdict.everywhere,
        Some(Everywhere {
            median: 1.0,
            min: 1.0,
            max: 1.0,
            floor: 5.0
        })
    );
    assert!(verdict.nodes.is_empty() && verdict.pairs_slow.is_empty());
}

#[test]
fn many_scattered_slow_pairs_are_listed_up_to_a_bound_and_counted() {
    // 40 nodes, every pair (i, i+20) slow: 20 pairs, 16 listed.
    let v = judge(
        &all(40, |a, b| if a.abs_diff(b) == 20 { 0.1 } else { 5.0 }),
        throughput_rule,
    );
    assert_eq!(v.pairs_slow.len(), MAX_LISTED_PAIRS);
    assert_eq!(v.unlisted_pairs, 20 - MAX_LISTED_PAIRS);
    assert!(v.nodes.is_empty() && v.cuts.is_empty());
}

#[test]
fn latency_needs_a_factor_and_an_absolute_excess() {
    // 40 us against 10 us: four times, but 30 us is scheduling noise, not a finding.
    assert!(!latency_rule(rtt_speed(40.0), rtt_speed(10.0)));
    // 2.5 ms against 100 us: high.
    assert!(latency_rule(rtt_speed(2500.0), rtt_speed(100.0)));
    // 1.5 ms against 1 ms: over the excess, under the factor.
    assert!(!latency_rule(rtt_speed(2500.0), rtt_speed(1500.0)));
    let v = judge(
        &all(5, |a, b| {
            rtt_speed(if a == 4 || b == 4 { 5000.0 } else { 80.0 })
        }),
        latency_rule,
    );
    assert_eq!(v.slow_ranks().into_iter().collect::<Vec<_>>(), vec![4]);
}

#[test]
fn the_retest_measures_each_slow_nodes_pairs_and_a_fresh_partner_then_confirms() {
    let slow = [2u32, 5];
    let v = judge(
        &all(8, |a, b| {
            if slow.contains(&a) || slow.contains(&b) {
                0.1
            } else {
                9.0
            }
        }),
        throughput_rule,
    );
    assert_eq!(v.slow_ranks().into_iter().collect::<Vec<_>>(), vec![2, 5]);
    assert_eq!(v.nodes[0].slow_with, vec![0, 1, 3, 4, 6, 7]);
    let ranks: Vec<u32> = (0..8).collect();
    let measured: HashSet<(u32, u32)> = (0..8u32)
        .flat_map(|a| (a + 1..8).map(move |b| (a, b)))
        .collect();
    let plan = retest_plan(&v, &ranks, &measured);
    let pairs: Vec<(u32, u32)> = plan.iter().flatten().copied().collect();
    assert_eq!(pairs.len(), 12, "{plan:?}");
    for round in &plan {
        assert!(round.len() <= RETEST_PAIRS);
        let mut ends: Vec<u32> = round.iter().flat_map(|(a, b)| [*a, *b]).collect();
        ends.sort();
        ends.dedup();
        assert_eq!(ends.len(), 2 * round.len(), "disjoint: {round:?}");
    }
    // Confirmation: a node whose pairs were measured again stays; without a retest, all stay.
    let retested: HashSet<(u32, u32)> = [(2, 0)].into_iter().collect();
    let c = v.clone().confirmed(&retested);
    assert_eq!(c.slow_ranks().into_iter().collect::<Vec<_>>(), vec![2]);
    assert_eq!(c.unconfirmed, 1);
    assert_eq!(v.clone().confirmed(&HashSet::new()), v);
    assert!(retest_plan(&Verdict::default(), &ranks, &HashSet::new()).is_empty());
}

#[test]
fn the_retest_budget_does_not_grow_with_the_suspects() {
    // 40 nodes, every pair (i, i+20) slow: 20 pairs, 16 listed; the plan stays in its budget.
    let v = judge(
        &all(40, |a, b| if a.abs_diff(b) == 20 { 0.1 } else { 5.0 }),
        throughput_rule,
    );
    let plan = retest_plan(&v, &(0..40).collect::<Vec<_>>(), &HashSet::new());
    assert!(plan.len() <= RETEST_ROUNDS);
    assert!(plan.iter().all(|r| r.len() <= RETEST_PAIRS));
}
