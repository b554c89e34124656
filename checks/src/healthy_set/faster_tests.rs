//! Tests of the faster set from reports built with the cluster testkit: a slow node at 3 and 96
//! nodes is left out with its predicted gain; two nodes, and a slow node that costs less than
//! its share of the work, get no offer.

use super::*;
use crate::core::{CollectiveResult, CollectiveRow};
use crate::healthy_set::tests::report;
use crate::testkit::Cluster;

/// `n` healthy nodes at `healthy` Gbit/s, each node of `slow` at its own rate on every link it
/// takes part in (a link between two slow nodes at the lower rate).
fn cluster(n: u32, healthy: f64, slow: &[(u32, f64)]) -> Cluster {
    let mut c = Cluster::healthy(n);
    let rate = |r: u32| slow.iter().find(|(s, _)| *s == r).map(|(_, g)| *g);
    for l in &mut c.links {
        if l.throughput_gbit_s.is_some() {
            let g = [rate(l.from), rate(l.to)]
                .into_iter()
                .flatten()
                .fold(healthy, f64::min);
            l.throughput_gbit_s = Some(g as f32);
        }
    }
    c
}

fn slow_named(r: &Report) -> Vec<u32> {
    stragglers(r).into_iter().collect()
}

#[test]
fn three_nodes_one_slow_offers_the_other_two() {
    let r = report(&cluster(3, 9.0, &[(2, 1.0)]));
    assert_eq!(r.status, Status::Warn, "{:#?}", r.findings);
    assert_eq!(slow_named(&r), vec![2]);
    let f = faster_set(&r, &HealthyOptions::default()).expect("an offer");
    assert_eq!(f.slow, vec![2]);
    assert_eq!(f.set.order, vec![0, 1]);
    assert_eq!((f.nodes_with, f.nodes_without()), (3, 2));
    assert_eq!((f.ring_with_node, f.ring_with_gbit_s), (2, 1.0));
    assert_eq!(f.ring_without_gbit_s, 9.0);
    assert!((f.speedup() - 9.0).abs() < 1e-9);
    assert!((f.break_even() - 1.5).abs() < 1e-9);
    assert!((f.throughput_gain() - 6.0).abs() < 1e-9);
    // No all-reduce ran: the bound itself, in GB/s.
    assert!(!f.measured);
    assert!((f.busbw_with_gb_s - 0.125).abs() < 1e-9);
    assert!((f.busbw_without_gb_s - 1.125).abs() < 1e-9);
    // 1 GB: 2*2/3 / 0.125 s with, 2*1/2 / 1.125 s without.
    assert!((f.seconds_per_gb_with() - 32.0 / 3.0).abs() < 1e-9);
    assert!((f.seconds_per_gb_without() - 1.0 / 1.125).abs() < 1e-9);
}

#[test]
fn a_measured_allreduce_is_scaled_by_the_rings_bound() {
    let mut r = report(&cluster(3, 9.0, &[(2, 1.0)]));
    r.collectives.push(CollectiveResult {
        op: "allreduce".into(),
        transport: "tcp".into(),
        ranks: 3,
        order: vec![0, 1, 2],
        rows: vec![CollectiveRow {
            bytes: 1 << 26,
            time_us: 1000.0,
            algbw_gb_s: 0.075,
            busbw_gb_s: 0.1,
            wrong: 0,
        }],
        ..Default::default()
    });
    let f = faster_set(&r, &HealthyOptions::default()).expect("an offer");
    assert!(f.measured);
    assert!((f.busbw_with_gb_s - 0.1).abs() < 1e-9);
    assert!((f.busbw_without_gb_s - 0.9).abs() < 1e-9);
}

#[test]
fn ninety_six_nodes_one_at_a_tenth_names_only_it() {
    let r = report(&cluster(96, 9.0, &[(50, 0.9)]));
    assert_eq!(
        slow_named(&r),
        vec![50],
        "{:#?}",
        crate::testkit::with_id(&r.findings, crate::link::ids::SLOW)
    );
    let f = faster_set(&r, &HealthyOptions::default()).expect("an offer");
    assert_eq!(f.slow, vec![50]);
    assert_eq!(f.set.count(), 95);
    assert!(!f.set.order.contains(&50));
    assert_eq!(f.set.excluded.len(), 1);
    assert_eq!(
        f.set.excluded[0].reasons,
        vec![crate::link::ids::SLOW.to_string()]
    );
    assert!((f.speedup() - 10.0).abs() < 1e-3, "{}", f.speedup());
    assert!(f.throughput_gain() > 9.8);
}

#[test]
fn two_nodes_get_no_offer() {
    // One node left is no cluster, and two nodes give link.slow no reference to name one.
    let r = report(&cluster(2, 9.0, &[(1, 1.0)]));
    assert!(faster_set(&r, &HealthyOptions::default()).is_none());
    let healthy = report(&cluster(2, 9.0, &[]));
    assert!(faster_set(&healthy, &HealthyOptions::default()).is_none());
}

#[test]
fn a_slow_node_that_costs_less_than_its_share_gets_no_offer() {
    // Five nodes: rank 4 is named slow at 4.5 Gbit/s, but rank 3 runs at 5.5 without being
    // named: leaving rank 4 out raises the ring's bound 1.22x, less than the 5/4 its work is worth.
    let r = report(&cluster(5, 9.0, &[(4, 4.5), (3, 5.5)]));
    assert_eq!(
        slow_named(&r),
        vec![4],
        "{:#?}",
        crate::testkit::with_id(&r.findings, crate::link::ids::SLOW)
    );
    assert!(faster_set(&r, &HealthyOptions::default()).is_none());
    // The same node at 2 Gbit/s costs more than its share: offered.
    let r = report(&cluster(5, 9.0, &[(4, 2.0), (3, 5.5)]));
    let f = faster_set(&r, &HealthyOptions::default()).expect("an offer");
    assert_eq!((f.slow.clone(), f.ring_without_node), (vec![4], 3));
    assert!((f.speedup() - 2.75).abs() < 1e-9);
}

#[test]
fn a_failing_cluster_compares_with_its_healthy_set() {
    let mut c = cluster(6, 9.0, &[(4, 1.0)]);
    c.set(0, 1, LinkOutcome::Timeout);
    c.set(1, 0, LinkOutcome::Timeout);
    let r = report(&c);
    assert_eq!(r.status, Status::Fail);
    let f = faster_set(&r, &HealthyOptions::default()).expect("an offer");
    // The healthy set drops one end of the broken pair; the faster set drops rank 4 as well.
    assert_eq!(f.nodes_with, 5);
    assert_eq!(f.slow, vec![4]);
    assert_eq!(f.set.count(), 4);
}
