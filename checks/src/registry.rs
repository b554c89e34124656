//! The registry: every concern once, with its catalog entries, its node check and its cluster
//! check. [`check_node`] and [`check_cluster`] run them in order, time each, and turn a concern
//! that panics or overruns its budget into a finding instead of a crash (as node_exporter runs
//! its collectors).

use crate::core::{
    Action, CheckContext, ClusterInput, Entry, Finding, Fix, NodeFacts, Remedy, Status,
};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// A node check: one node's facts and the job, to findings.
pub type NodeCheck = fn(&NodeFacts, &CheckContext) -> Vec<Finding>;
/// A cluster check: every node's facts and the measured links, to findings.
pub type ClusterCheck = fn(&ClusterInput) -> Vec<Finding>;

/// One concern: its name, the ids it emits (with their texts), and its checks.
pub struct Concern {
    pub name: &'static str,
    pub entries: &'static [Entry],
    pub node: Option<NodeCheck>,
    pub cluster: Option<ClusterCheck>,
}

/// Every concern, in the order their findings appear in a report. A concern with no node or
/// cluster check here is judged by the caller with inputs of its own (the launch line, the
/// all-reduce rows, the healthy set over a whole report).
pub static CONCERNS: &[Concern] = &[
    Concern {
        name: "rendezvous",
        entries: crate::rendezvous::catalog::ENTRIES,
        node: None,
        cluster: Some(crate::rendezvous::check_cluster),
    },
    Concern {
        name: "net",
        entries: crate::net::catalog::ENTRIES,
        node: Some(crate::net::check),
        cluster: None,
    },
    Concern {
        name: "rdma",
        entries: crate::rdma::catalog::ENTRIES,
        node: Some(crate::rdma::check_node),
        cluster: Some(crate::rdma::check_cluster),
    },
    Concern {
        name: "gpu",
        entries: crate::gpu::catalog::ENTRIES,
        node: Some(crate::gpu::check_node),
        cluster: Some(crate::gpu::check_cluster),
    },
    Concern {
        name: "nccl",
        entries: crate::nccl::catalog::ENTRIES,
        node: Some(crate::nccl::check),
        cluster: None,
    },
    Concern {
        name: "ports",
        entries: crate::ports::catalog::ENTRIES,
        node: Some(crate::ports::check),
        cluster: None,
    },
    Concern {
        name: "firewall",
        entries: crate::firewall::catalog::ENTRIES,
        node: Some(crate::firewall::check),
        cluster: None,
    },
    Concern {
        name: "sys",
        entries: crate::sys::catalog::ENTRIES,
        node: Some(crate::sys::check),
        cluster: None,
    },
    Concern {
        name: "env",
        entries: crate::env::catalog::ENTRIES,
        node: Some(crate::env::check),
        cluster: None,
    },
    Concern {
        name: "scale",
        entries: crate::sys::scale::catalog::ENTRIES,
        node: Some(crate::sys::scale::check),
        cluster: None,
    },
    Concern {
        name: "link",
        entries: crate::link::catalog::ENTRIES,
        node: None,
        cluster: Some(crate::link::check_cluster),
    },
    Concern {
        name: "collective",
        entries: crate::collective::catalog::ENTRIES,
        node: None,
        cluster: None,
    },
    Concern {
        name: "launch",
        entries: crate::launch::catalog::ENTRIES,
        node: None,
        cluster: None,
    },
    Concern {
        name: "healthy_set",
        entries: crate::healthy_set::catalog::ENTRIES,
        node: None,
        cluster: None,
    },
    Concern {
        name: "history",
        entries: crate::history::catalog::ENTRIES,
        node: Some(crate::history::check_node),
        cluster: None,
    },
];

/// A node concern that takes longer than this is reported (its findings are kept).
pub const NODE_BUDGET: Duration = Duration::from_secs(5);
/// A cluster concern's budget: its judgment is linear in the nodes and their links, so a
/// 4096-node cluster stays well inside it.
pub const CLUSTER_BUDGET: Duration = Duration::from_secs(120);

/// Runs every single-node check over one node's facts. Never panics; a check that cannot judge
/// reports `error`.
pub fn check_node(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in CONCERNS {
        if let Some(check) = c.node {
            out.extend(run(c, NODE_BUDGET, || check(facts, ctx)));
        }
    }
    for f in &mut out {
        if f.node.is_none() {
            f.node = ctx.rank;
        }
    }
    out
}

/// Runs every cluster-wide check. Each id appears at least once, with `pass` or `skip` when
/// nothing is wrong.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in CONCERNS {
        if let Some(check) = c.cluster {
            out.extend(run(c, CLUSTER_BUDGET, || check(input)));
        }
    }
    out
}

/// One concern's check, timed; a panic becomes an `error` finding on the concern's first id,
/// and an overrun adds one (the findings made are kept).
fn run(c: &Concern, budget: Duration, check: impl FnOnce() -> Vec<Finding>) -> Vec<Finding> {
    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(check));
    let took = start.elapsed();
    let mut out = match result {
        Ok(found) => found,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            vec![concern_error(
                c,
                format!(
                    "the {} checks stopped on an internal error ({why}); the other checks ran",
                    c.name
                ),
            )]
        }
    };
    if took > budget {
        out.push(concern_error(
            c,
            format!(
                "the {} checks took {:.1} s, over their budget of {} s; their findings are kept",
                c.name,
                took.as_secs_f64(),
                budget.as_secs()
            ),
        ));
    }
    out
}

/// The catalog entry of `id`; None for an id no concern registers.
pub fn entry(id: &str) -> Option<Entry> {
    CONCERNS
        .iter()
        .flat_map(|c| c.entries)
        .find(|e| e.id.as_str() == id)
        .copied()
}

/// What its catalog entry says to do when `id` fires; None for an id no concern registers.
pub fn remedy(id: &str) -> Option<Remedy> {
    entry(id).and_then(|e| e.remedy)
}

/// Adds findings to a built report: each gets its action (see [`assign_remedies`]) and the
/// status is recomputed over every finding. The one way to add to a report once built.
pub fn add_findings(report: &mut crate::core::Report, findings: impl IntoIterator<Item = Finding>) {
    report.findings.extend(findings);
    assign_remedies(&mut report.findings);
    report.status = crate::core::overall_status(&report.findings);
}

/// Gives every finding its `action` and `problem` where its check set none: `none` when it
/// passes or skips, else its catalog entry's; an id no concern registers is the node's to
/// repair. Never changes what a check set (`gpu.xid` sets it per XID).
pub fn assign_remedies(findings: &mut [Finding]) {
    for f in findings.iter_mut().filter(|f| f.action.is_none()) {
        let catalog = remedy(&f.id).unwrap_or(Remedy::node(Action::DrainAndRepair));
        let r = match f.status {
            Status::Pass | Status::Skip => Remedy {
                action: Action::None,
                problem: catalog.problem,
            },
            Status::Warn | Status::Fail | Status::Error => catalog,
        };
        f.action = Some(r.action);
        f.problem = Some(r.problem);
    }
}

fn concern_error(c: &Concern, summary: String) -> Finding {
    let id = c
        .entries
        .first()
        .map(|e| e.id)
        .unwrap_or(crate::net::ids::NO_INTERFACE);
    Finding::new(id, Status::Error, format!("{} checks", c.name), summary)
        .with("concern", c.name)
        .fix(
            Fix::new(
                "Save this node's facts and report the error with them, so the judgment can be run again from the file; the other concerns' findings stand",
            )
            .command("preflight facts > facts.json")
            .command("preflight check --facts facts.json --format json"),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Status;
    use crate::testkit::*;
    use serde_json::json;

    static FAKE: Concern = Concern {
        name: "fake",
        entries: crate::net::catalog::ENTRIES,
        node: None,
        cluster: None,
    };

    #[test]
    fn a_concern_that_panics_is_an_error_finding_and_the_others_still_run() {
        let out = run(&FAKE, NODE_BUDGET, || panic!("index out of bounds"));
        assert_eq!(out.len(), 1, "{out:#?}");
        assert_eq!(out[0].status, Status::Error);
        assert_eq!(out[0].id, crate::net::ids::NO_INTERFACE);
        assert!(
            out[0]
                .summary
                .contains("the fake checks stopped on an internal error (index out of bounds)"),
            "{}",
            out[0].summary
        );
        assert_eq!(out[0].evidence["concern"], json!("fake"));
        let fix = out[0].fix.as_ref().expect("a fix");
        assert_eq!(fix.commands[0], "preflight facts > facts.json");
    }

    #[test]
    fn a_concern_over_its_budget_keeps_its_findings_and_says_so() {
        let found = Finding::new(crate::net::ids::ARP_FLUX, Status::Pass, "x", "fine");
        let out = run(&FAKE, Duration::from_millis(1), || {
            std::thread::sleep(Duration::from_millis(20));
            vec![found.clone()]
        });
        assert_eq!(out.len(), 2, "{out:#?}");
        assert_eq!(out[0], found);
        assert_eq!(out[1].status, Status::Error);
        assert!(
            out[1].summary.contains("over their budget"),
            "{}",
            out[1].summary
        );
    }

    #[test]
    fn every_concern_registers_its_ids_once_and_the_catalog_orders_them_all() {
        let mut seen = std::collections::BTreeSet::new();
        for c in CONCERNS {
            for e in c.entries {
                assert!(seen.insert(e.id), "{} registered twice", e.id);
            }
        }
        let listed: std::collections::BTreeSet<_> = crate::explain::catalog::all()
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(
            listed, seen,
            "README's order lists every registered id once"
        );
        assert_eq!(crate::explain::catalog::all().len(), seen.len());
    }

    #[test]
    fn every_registered_id_says_what_to_do_and_whose_problem_it_is() {
        for e in CONCERNS.iter().flat_map(|c| c.entries) {
            let r = e.remedy.unwrap_or_else(|| panic!("{} has no action", e.id));
            // Only an id that never fires as warn or fail may say "nothing to do".
            let fires_bad = e.fires.contains("warn") || e.fires.contains("fail");
            assert!(r.action != Action::None || !fires_bad, "{}", e.id);
        }
        assert_eq!(remedy("gpu.count"), Some(Remedy::user(Action::FixConfig)));
        assert_eq!(remedy("no.such-id"), None);
    }

    #[test]
    fn remedies_follow_the_status_and_keep_what_a_check_set() {
        let mut fs = vec![
            Finding::new(crate::link::ids::SLOW, Status::Warn, "n", "slow"),
            Finding::new(crate::link::ids::SLOW, Status::Pass, "n", "fine"),
            Finding::new(crate::gpu::ids::XID, Status::Fail, "g", "79")
                .remedy(Remedy::node(Action::Reboot)),
            Finding::new(
                crate::core::FindingId::new("x.unknown"),
                Status::Fail,
                "s",
                "?",
            ),
        ];
        assign_remedies(&mut fs);
        let got: Vec<_> = fs.iter().map(|f| f.remedy_of().unwrap()).collect();
        assert_eq!(
            got,
            vec![
                Remedy::node(Action::DrainAndRepair),
                Remedy::node(Action::None),
                Remedy::node(Action::Reboot),
                Remedy::node(Action::DrainAndRepair),
            ]
        );
    }

    #[test]
    fn healthy_cluster_passes_every_check_once() {
        let fs = Cluster::healthy(3).findings();
        for id in IDS {
            let f = only(&fs, *id);
            let expected = if *id == crate::rdma::ids::PARTIAL {
                Status::Skip
            } else {
                Status::Pass
            };
            assert_eq!(f.status, expected, "{f:#?}");
            assert!(f.fix.is_none(), "no fix on {id}");
        }
        let link = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(link.evidence["pairs_ok"], json!(6));
        assert_eq!(link.evidence["network"], json!("10.0.0.0/24"));
        // docker0's failures are no finding, only evidence.
        assert_eq!(
            link.evidence["other_networks"],
            json!([{"network": "172.17.0.0/24", "ok": 0, "total": 6}])
        );
    }

    #[test]
    fn a_single_node_skips_the_link_checks_and_never_panics_on_empty_input() {
        let c = Cluster::healthy(1);
        let fs = c.findings();
        assert_eq!(
            only(&fs, crate::link::ids::UNREACHABLE).status,
            Status::Skip
        );
        let empty = check_cluster(&ClusterInput::of_nodes(&[], 0));
        for id in IDS {
            assert!(!with_id(&empty, *id).is_empty(), "{id} missing");
        }
    }
}
