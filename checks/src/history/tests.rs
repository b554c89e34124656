//! Planted histories for the lemon rules.

use super::*;

fn run(run: usize, node: &str, healthy: Option<bool>, findings: Vec<FindingRec>) -> NodeRun {
    NodeRun {
        run: format!("r{run}"),
        time: run as i64 * 600,
        node: node.into(),
        healthy,
        findings,
    }
}

fn f(id: &str) -> FindingRec {
    FindingRec {
        id: id.into(),
        partner: None,
        gpu: None,
        xid: None,
    }
}

fn link(partner: &str) -> FindingRec {
    FindingRec {
        id: "link.slow".into(),
        partner: Some(partner.into()),
        gpu: None,
        xid: None,
    }
}

#[test]
fn intermittent_node_among_64_over_30_runs_is_named() {
    let mut runs = Vec::new();
    for r in 0..30 {
        for n in 0..64 {
            let bad = n == 17 && r % 3 == 0;
            runs.push(run(
                r,
                &format!("n{n:02}"),
                Some(!bad),
                if bad { vec![f("gpu.ecc")] } else { vec![] },
            ));
        }
    }
    let l = lemons(&runs);
    assert!(
        l.contains(&Lemon::Repeat {
            node: "n17".into(),
            finding: "gpu.ecc".into(),
            runs: 3
        }),
        "{l:?}"
    );
    assert!(l.iter().all(|x| matches!(x, Lemon::Repeat { node, .. } | Lemon::LeftOut { node, .. } if node == "n17")), "{l:?}");
}

#[test]
fn node_that_failed_once_is_not_named() {
    let mut runs = Vec::new();
    for r in 0..10 {
        for n in ["a", "b", "c"] {
            let bad = n == "b" && r == 4;
            runs.push(run(
                r,
                n,
                Some(!bad),
                if bad { vec![f("gpu.ecc")] } else { vec![] },
            ));
        }
    }
    assert_eq!(lemons(&runs), vec![]);
}

#[test]
fn finding_every_node_has_is_not_a_lemon() {
    let mut runs = Vec::new();
    for r in 0..5 {
        for n in ["a", "b"] {
            runs.push(run(r, n, None, vec![f("env.nccl")]));
        }
    }
    assert_eq!(lemons(&runs), vec![]);
}

#[test]
fn pair_fault_is_not_blamed_on_either_node() {
    let mut runs = Vec::new();
    for r in 0..6 {
        runs.push(run(
            r,
            "a",
            None,
            if r % 2 == 0 { vec![link("b")] } else { vec![] },
        ));
        runs.push(run(
            r,
            "b",
            None,
            if r % 2 == 0 { vec![link("a")] } else { vec![] },
        ));
        runs.push(run(r, "c", None, vec![]));
    }
    assert_eq!(
        lemons(&runs),
        vec![Lemon::Pair {
            a: "a".into(),
            b: "b".into(),
            runs: 3
        }]
    );
}

#[test]
fn link_fault_that_moves_with_the_node_names_the_node() {
    let runs = vec![
        run(0, "x", None, vec![link("a")]),
        run(0, "a", None, vec![link("x")]),
        run(1, "x", None, vec![link("b")]),
        run(1, "b", None, vec![]),
    ];
    assert_eq!(
        lemons(&runs),
        vec![Lemon::LinkMoves {
            node: "x".into(),
            partners: vec!["a".into(), "b".into()]
        }]
    );
}

#[test]
fn xid_bursts_counted_as_nvsentinel() {
    // Two events 100 s apart are one burst; bursts 1 h apart: 5 within 24 h.
    let t: Vec<i64> = (0..5).flat_map(|b| [b * 3600, b * 3600 + 100]).collect();
    assert_eq!(max_bursts_24h(&t), 5);
    let spread: Vec<i64> = (0..5).map(|b| b * 7 * 3600).collect();
    assert_eq!(max_bursts_24h(&spread), 4);
    let x = |t: i64| NodeRun {
        run: format!("r{t}"),
        time: t,
        node: "g".into(),
        healthy: None,
        findings: vec![FindingRec {
            id: "gpu.xid".into(),
            partner: None,
            gpu: Some(3),
            xid: Some(79),
        }],
    };
    let runs: Vec<NodeRun> = t.iter().map(|t| x(*t)).collect();
    assert_eq!(
        lemons(&runs),
        vec![Lemon::XidBursts {
            node: "g".into(),
            gpu: 3,
            xid: 79,
            bursts: 5
        }]
    );
}

#[test]
fn left_out_of_healthy_set_over_a_third() {
    let runs: Vec<NodeRun> = (0..6).map(|r| run(r, "a", Some(r >= 3), vec![])).collect();
    assert_eq!(
        lemons(&runs),
        vec![Lemon::LeftOut {
            node: "a".into(),
            out: 3,
            runs: 6
        }]
    );
    let ok: Vec<NodeRun> = (0..6).map(|r| run(r, "a", Some(r >= 2), vec![])).collect();
    assert_eq!(lemons(&ok), vec![]);
}
