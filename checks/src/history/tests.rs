//! Planted histories for the lemon rules.

use super::*;

fn run(run: usize, node: &str, healthy: Option<bool>, findings: Vec<FindingRec>) -> NodeRun {
    NodeRun {
        run: format!("r{run}"),
        time: run as i64 * 600,
        node: node.into(),
        nodes: 3,
        healthy,
        findings,
        ..NodeRun::default()
    }
}

fn f(id: &str) -> FindingRec {
    FindingRec {
        id: id.into(),
        status: "fail".into(),
        with: 1,
        ..FindingRec::default()
    }
}

fn link(partner: &str) -> FindingRec {
    FindingRec {
        id: "link.slow".into(),
        status: "warn".into(),
        partner: Some(partner.into()),
        with: 2,
        ..FindingRec::default()
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
            runs: 3,
            window: 10
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
        run(1, "x", None, vec![]),
        run(2, "x", None, vec![link("b")]),
        run(2, "b", None, vec![]),
    ];
    assert_eq!(
        lemons(&runs),
        vec![Lemon::LinkMoves {
            node: "x".into(),
            partners: vec!["a".into(), "b".into()],
            runs: 2,
            itself: false
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
        nodes: 1,
        findings: vec![FindingRec {
            id: "gpu.xid".into(),
            status: "fail".into(),
            gpu: Some(3),
            xid: Some(79),
            with: 1,
            ..FindingRec::default()
        }],
        ..NodeRun::default()
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
    // Out in runs 0, 2 and 4, back in between.
    let runs: Vec<NodeRun> = (0..6)
        .map(|r| run(r, "a", Some(r % 2 == 1), vec![]))
        .collect();
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
    // Left out in every run since the third: it stands (the healthy set names it each time).
    let standing: Vec<NodeRun> = (0..6).map(|r| run(r, "a", Some(r < 2), vec![])).collect();
    assert_eq!(lemons(&standing), vec![]);
}

#[test]
fn one_nodes_own_store_names_its_repeat_but_not_a_user_problem() {
    // A node's own store: one-node checks (nothing to compare) and cluster runs of 8 where it
    // alone failed count; a run where every node had it does not; a user problem never does.
    let own = |i: usize, nodes: u32, with: u32, user: bool| NodeRun {
        run: format!("r{i}"),
        time: i as i64,
        node: "n".into(),
        nodes,
        findings: vec![FindingRec {
            id: "gpu.ecc".into(),
            status: "fail".into(),
            with,
            user,
            ..FindingRec::default()
        }],
        ..NodeRun::default()
    };
    let clean = |i: usize| NodeRun {
        run: format!("r{i}"),
        time: i as i64,
        node: "n".into(),
        nodes: 1,
        ..NodeRun::default()
    };
    let named = vec![
        own(0, 1, 1, false),
        clean(1),
        own(2, 8, 1, false),
        clean(3),
        own(4, 8, 2, false),
    ];
    assert_eq!(
        lemons(&named),
        vec![Lemon::Repeat {
            node: "n".into(),
            finding: "gpu.ecc".into(),
            runs: 3,
            window: 5
        }]
    );
    let shared = vec![
        own(0, 1, 1, false),
        clean(1),
        own(2, 8, 8, false),
        clean(3),
        own(4, 8, 1, false),
    ];
    assert_eq!(lemons(&shared), vec![]);
    let user = vec![
        own(0, 1, 1, true),
        clean(1),
        own(2, 1, 1, true),
        clean(3),
        own(4, 1, 1, true),
    ];
    assert_eq!(lemons(&user), vec![]);
    // The same fault in every one of ten runs since it appeared stands: not a lemon.
    let standing: Vec<NodeRun> = (0..10).map(|i| own(i, 1, 1, false)).collect();
    assert_eq!(lemons(&standing), vec![]);
    let fixed_then_back: Vec<NodeRun> = (0..10)
        .map(|i| {
            if i == 5 {
                clean(i)
            } else {
                own(i, 1, 1, false)
            }
        })
        .collect();
    assert_eq!(
        lemons(&fixed_then_back).len(),
        1,
        "it came back after a run without it"
    );
}

#[test]
fn slow_node_named_by_itself_in_two_runs_moves_with_it() {
    let slow = |i: usize| NodeRun {
        run: format!("r{i}"),
        time: i as i64,
        node: "s".into(),
        nodes: 6,
        findings: vec![FindingRec {
            id: "link.slow".into(),
            status: "warn".into(),
            with: 1,
            ..FindingRec::default()
        }],
        ..NodeRun::default()
    };
    let fine = NodeRun {
        run: "r1".into(),
        time: 1,
        node: "s".into(),
        nodes: 6,
        ..NodeRun::default()
    };
    assert_eq!(lemons(&[slow(0)]), vec![]);
    assert_eq!(
        lemons(&[slow(0), slow(3)]),
        vec![],
        "slow in every run: it stands"
    );
    assert_eq!(
        lemons(&[slow(0), fine, slow(3)]),
        vec![Lemon::LinkMoves {
            node: "s".into(),
            partners: vec![],
            runs: 2,
            itself: true
        }]
    );
}

#[test]
fn a_node_that_alone_has_a_fault_in_every_cluster_run_is_not_a_lemon() {
    // 4-node runs: "d" holds the port in all 6 while the others pass: it stands.
    let mut runs = Vec::new();
    for r in 0..6 {
        for n in ["a", "b", "c", "d"] {
            let has = n == "d";
            runs.push(run(
                r,
                n,
                None,
                if has { vec![f("port.in-use")] } else { vec![] },
            ));
        }
    }
    assert_eq!(lemons(&runs), vec![]);
}

#[test]
fn a_run_in_every_nodes_report_counts_once() {
    // Each of 4 nodes wrote the whole cluster's report of the same 6 runs: 96 records, 24 runs.
    let mut runs = Vec::new();
    for _copy in 0..4 {
        for r in 0..6 {
            for n in ["a", "b", "c", "d"] {
                let bad = n == "b" && r % 2 == 0;
                runs.push(run(
                    r,
                    n,
                    None,
                    if bad { vec![f("gpu.ecc")] } else { vec![] },
                ));
            }
        }
    }
    assert_eq!(
        lemons(&runs),
        vec![Lemon::Repeat {
            node: "b".into(),
            finding: "gpu.ecc".into(),
            runs: 3,
            window: 6
        }]
    );
    let v = view(&runs, &|_| None);
    assert_eq!((v.records, v.node_runs, v.runs), (96, 24, 6));
    let b = v.nodes.iter().find(|n| n.node == "b").unwrap();
    assert_eq!((b.runs, b.failed_runs, b.flaps), (6, 3, 5));
    assert_eq!(b.findings[0].runs, 3);
}

#[test]
fn escalation_follows_the_kind_of_fault() {
    // The same three-in-ten pattern for a process, a file, a firewall and a GPU's memory.
    let pattern = |id: &str| -> Vec<NodeRun> {
        (0..10)
            .map(|r| {
                let bad = r % 3 == 0;
                run(r, "n", None, if bad { vec![f(id)] } else { vec![] })
            })
            .collect()
    };
    let lemon = |id: &str| {
        let got = describe(&pattern(id), &crate::registry::entry);
        assert_eq!(got.len(), 1, "{id}: {got:?}");
        got.into_iter().next().unwrap()
    };
    for (id, action, fault) in [
        ("port.in-use", "reboot", "config"),
        ("net.hostname-loopback", "fix-config", "config"),
        ("firewall.rules", "fix-config", "config"),
        ("gpu.ecc", "reboot", "hardware"),
        ("gpu.pcie-link", "replace", "hardware"),
    ] {
        let l = lemon(id);
        assert_eq!(l.action.map(|a| a.as_str()), Some(action), "{id}");
        assert_eq!(l.evidence["fault"], fault, "{id}");
        let fix = l.fix.unwrap();
        let drains = fix.commands.iter().any(|c| c.contains("State=DRAIN"));
        assert_eq!(drains, fault == "hardware", "{id}: {fix:?}");
        if fault == "config" {
            assert!(fix.hint.contains("the fix did not hold"), "{}", fix.hint);
            assert!(!fix.hint.contains("replace"), "{}", fix.hint);
        }
    }
}
