//! The localisation on synthetic per-rail matrices: 2, 3, 4 and 4096 nodes, a bad rail on one
//! node, a bad node, the same rail bad across many nodes, a bad pair, and a transient failure
//! the retest clears.

use super::localise::*;
use std::collections::BTreeSet;

const GOOD: f64 = 380.0;

/// Ring plus two matchings, every rail of each pair; `fault` gives a pair's result on a rail
/// (None: healthy).
fn matrix(
    n: u32,
    rails: u32,
    fault: impl Fn(u32, u32, u32) -> Option<Option<f64>>,
) -> Vec<RailResult> {
    let mut pairs = BTreeSet::new();
    for i in 0..n {
        for off in [1, n / 2, n / 3] {
            let j = (i + off) % n;
            if off > 0 && i != j {
                pairs.insert((i.min(j), i.max(j)));
            }
        }
    }
    let mut out = Vec::new();
    for (a, b) in pairs {
        for rail in 0..rails {
            let gbps = fault(a, b, rail).unwrap_or(Some(GOOD));
            out.push(RailResult {
                a,
                b,
                rail,
                gbps,
                error: gbps
                    .is_none()
                    .then(|| format!("NET/IB : Got completion from peer {b} with status=12")),
                round: 0,
            });
        }
    }
    out
}

fn touches(a: u32, b: u32, n: u32) -> bool {
    a == n || b == n
}

#[test]
fn healthy_matrices_blame_nothing_at_any_size() {
    for n in [2, 3, 4, 64, 4096] {
        let v = localise(&matrix(n, 8, |_, _, _| None));
        assert!(v.clean(), "{n}: {v:?}");
        assert_eq!(v.reference_gbps, Some(GOOD));
        assert_eq!(v.bad, 0);
    }
}

#[test]
fn a_bad_rail_on_one_node_is_that_nodes_rail() {
    for n in [3, 4, 4096] {
        let results = matrix(n, 8, |a, b, rail| {
            (touches(a, b, 1) && rail == 5).then_some(Some(90.0))
        });
        let v = localise(&results);
        assert_eq!(v.blames.len(), 1, "{n}: {v:?}");
        match &v.blames[0] {
            Blame::NodeRail {
                node,
                rail,
                bad_with,
                median_gbps,
                ..
            } => {
                assert_eq!((*node, *rail), (1, 5));
                assert!(bad_with.len() >= 2);
                assert_eq!(*median_gbps, Some(90.0));
            }
            other => panic!("{n}: {other:?}"),
        }
    }
}

#[test]
fn most_rails_bad_is_the_node() {
    let results = matrix(16, 8, |a, b, rail| {
        (touches(a, b, 7) && rail != 2).then_some(None)
    });
    let v = localise(&results);
    assert_eq!(v.blames.len(), 1, "{v:?}");
    assert_eq!(
        v.blames[0],
        Blame::Node {
            node: 7,
            rails: vec![0, 1, 3, 4, 5, 6, 7]
        }
    );
}

#[test]
fn the_same_rail_bad_across_many_nodes_is_its_switch() {
    // Rail 3's leaf switch serves nodes 0..32 of 4096: every pair touching them fails on rail 3.
    let results = matrix(4096, 8, |a, b, rail| {
        (rail == 3 && (a < 32 || b < 32)).then_some(None)
    });
    let v = localise(&results);
    assert_eq!(
        v.blames.len(),
        1,
        "{:?}",
        &v.blames[..v.blames.len().min(3)]
    );
    match &v.blames[0] {
        Blame::RailSwitch { rail, nodes } => {
            assert_eq!(*rail, 3);
            assert_eq!(nodes, &(0..32).collect::<Vec<u32>>());
        }
        other => panic!("{other:?}"),
    }
    // A dead rail everywhere on four nodes: no partner passes, still the switch.
    let v = localise(&matrix(4, 8, |_, _, rail| (rail == 0).then_some(None)));
    assert_eq!(
        v.blames,
        vec![Blame::RailSwitch {
            rail: 0,
            nodes: vec![0, 1, 2, 3]
        }]
    );
}

#[test]
fn a_bad_pair_with_both_ends_fine_elsewhere_is_the_path() {
    let results = matrix(8, 8, |a, b, rail| {
        ((a, b, rail) == (2, 3, 6)).then_some(None)
    });
    let v = localise(&results);
    assert_eq!(v.blames.len(), 1, "{v:?}");
    match &v.blames[0] {
        Blame::Pair {
            a,
            b,
            rail,
            gbps,
            ends_pass_elsewhere,
            error,
        } => {
            assert_eq!((*a, *b, *rail, *gbps), (2, 3, 6, None));
            assert!(*ends_pass_elsewhere);
            assert!(error.as_deref().unwrap().contains("status=12"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn two_nodes_can_only_name_the_pair() {
    let v = localise(&matrix(2, 8, |_, _, rail| {
        (rail == 4).then_some(Some(100.0))
    }));
    assert_eq!(v.blames.len(), 1, "{v:?}");
    assert!(matches!(
        v.blames[0],
        Blame::Pair {
            a: 0,
            b: 1,
            rail: 4,
            ends_pass_elsewhere: false,
            ..
        }
    ));
}

#[test]
fn a_transient_failure_is_cleared_by_the_retest() {
    let mut results = matrix(3, 8, |a, b, rail| {
        (touches(a, b, 0) && rail == 1).then_some(None)
    });
    let first = localise(&results);
    assert!(
        matches!(
            first.blames[..],
            [Blame::NodeRail {
                node: 0,
                rail: 1,
                ..
            }]
        ),
        "{first:?}"
    );
    let plan = retest_plan(&results, &first);
    assert!(
        plan.contains(&(0, 1, 1)) && plan.contains(&(0, 2, 1)),
        "{plan:?}"
    );
    for r in rounds(&plan) {
        let mut busy = BTreeSet::new();
        for (a, b, rail) in &r {
            assert!(
                busy.insert((*a, *rail)) && busy.insert((*b, *rail)),
                "{r:?}"
            );
        }
    }
    // The retest passes: the failure was transient.
    results.extend(plan.iter().map(|(a, b, rail)| RailResult {
        a: *a,
        b: *b,
        rail: *rail,
        gbps: Some(GOOD),
        error: None,
        round: 1,
    }));
    let second = localise(&results);
    assert!(second.clean(), "{second:?}");
    assert!(second.retested);
    // A broken rail stays broken through the retest.
    let mut broken = matrix(3, 8, |a, b, rail| {
        (touches(a, b, 0) && rail == 1).then_some(None)
    });
    let plan = retest_plan(&broken, &localise(&broken));
    broken.extend(plan.iter().map(|(a, b, rail)| RailResult {
        a: *a,
        b: *b,
        rail: *rail,
        gbps: None,
        error: Some("watchdog".into()),
        round: 1,
    }));
    assert!(matches!(
        localise(&broken).blames[..],
        [Blame::NodeRail {
            node: 0,
            rail: 1,
            ..
        }]
    ));
}

#[test]
fn garbage_results_never_panic() {
    let odd = vec![
        RailResult {
            a: 0,
            b: 0,
            rail: 0,
            gbps: Some(f64::NAN),
            error: None,
            round: 0,
        },
        RailResult {
            a: 1,
            b: 2,
            rail: u32::MAX,
            gbps: Some(f64::INFINITY),
            error: None,
            round: 9,
        },
        RailResult {
            a: 1,
            b: 2,
            rail: 0,
            gbps: Some(-5.0),
            error: None,
            round: 0,
        },
    ];
    let v = localise(&odd);
    let _ = retest_plan(&odd, &v);
    assert!(localise(&[]).clean());
}
