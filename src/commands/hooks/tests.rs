//! The hook over a Slurm held in memory: what it drains, resumes and leaves, and its exit codes.

use super::*;
use preflight_checks::model::{Mode, NodeFacts};
use std::cell::RefCell;

struct FakeSlurm {
    state: RefCell<Result<NodeState, String>>,
    calls: RefCell<Vec<Vec<String>>>,
}

impl FakeSlurm {
    fn new(state: &str, reason: Option<&str>) -> Self {
        FakeSlurm {
            state: RefCell::new(Ok(NodeState {
                state: state.into(),
                reason: reason.map(Into::into),
            })),
            calls: RefCell::new(Vec::new()),
        }
    }
}

impl Slurm for FakeSlurm {
    fn node(&self, name: &str) -> Result<NodeState, String> {
        assert_eq!(name, "node7");
        self.state.borrow().clone()
    }
    fn scontrol(&self, args: &[String]) -> Result<(), String> {
        self.calls.borrow_mut().push(args.to_vec());
        Ok(())
    }
}

fn report(findings: Vec<Finding>) -> Report {
    crate::report::ReportBuilder::single(
        Mode::Node,
        0,
        NodeFacts {
            hostname: "node7.cluster.example".into(),
            ..Default::default()
        },
    )
    .findings(findings)
    .build()
}

fn hook(mode: SlurmMode, drain: bool, dry_run: bool) -> SlurmHook {
    SlurmHook {
        mode,
        drain,
        dry_run,
        node: None,
        strict: false,
        drain_lemons: false,
    }
}

fn held() -> Finding {
    Finding::new(
        preflight_checks::core::FindingId::new("port.in-use"),
        Status::Fail,
        "29500",
        "master port 29500 is already in use by pid 42 (python3); torchrun will fail",
    )
}

#[test]
fn without_drain_only_the_exit_code_speaks() {
    let s = FakeSlurm::new("idle", None);
    let r = run(
        &hook(SlurmMode::Health, false, false),
        &report(vec![held()]),
        &s,
    );
    assert_eq!(r.code, 1);
    assert!(s.calls.borrow().is_empty());
    assert!(
        r.lines[0].starts_with(
            "preflight: node7: fail port.in-use [node_problem] restart-job: master port 29500"
        ),
        "{r:?}"
    );
    let ok = run(&hook(SlurmMode::Health, false, false), &report(vec![]), &s);
    assert_eq!(ok.code, 0);
}

#[test]
fn drain_sets_preflights_reason_and_dry_run_only_prints_it() {
    let s = FakeSlurm::new("idle", None);
    let r = run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![held()]),
        &s,
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        *s.calls.borrow(),
        vec![vec![
            "update".to_string(),
            "NodeName=node7".into(),
            "State=DRAIN".into(),
            "Reason=preflight: [node_problem] restart-job: port.in-use: master port 29500 is already in use by pid 42 (python3)".into()
        ]]
    );
    let s = FakeSlurm::new("idle", None);
    let r = run(
        &hook(SlurmMode::Health, true, true),
        &report(vec![held()]),
        &s,
    );
    assert!(s.calls.borrow().is_empty());
    assert_eq!(
        r.lines.last().unwrap(),
        "scontrol update NodeName=node7 State=DRAIN Reason=\"preflight: [node_problem] restart-job: port.in-use: master port 29500 is already in use by pid 42 (python3)\""
    );
}

#[test]
fn resumes_its_own_drain_only_in_the_health_check() {
    let ours = "preflight: port.in-use: master port 29500 is already in use";
    let s = FakeSlurm::new("drained", Some(ours));
    let r = run(&hook(SlurmMode::Health, true, false), &report(vec![]), &s);
    assert_eq!(r.code, 0);
    assert_eq!(
        *s.calls.borrow(),
        vec![vec![
            "update".to_string(),
            "NodeName=node7".into(),
            "State=RESUME".into()
        ]]
    );
    let s = FakeSlurm::new("drained", Some(ours));
    run(&hook(SlurmMode::Prolog, true, false), &report(vec![]), &s);
    assert!(s.calls.borrow().is_empty());
    let s = FakeSlurm::new("drained", Some("bad DIMM"));
    let r = run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![held()]),
        &s,
    );
    assert!(s.calls.borrow().is_empty());
    assert!(r.lines.last().unwrap().contains("bad DIMM"), "{r:?}");
}

#[test]
fn a_broken_slurm_is_exit_2_in_the_health_check_and_the_verdict_in_the_prolog() {
    let s = FakeSlurm::new("idle", None);
    *s.state.borrow_mut() = Err("sinfo timed out".into());
    assert_eq!(
        run(
            &hook(SlurmMode::Health, true, false),
            &report(vec![held()]),
            &s
        )
        .code,
        2
    );
    assert_eq!(
        run(
            &hook(SlurmMode::Prolog, true, false),
            &report(vec![held()]),
            &s
        )
        .code,
        1
    );
    assert_eq!(
        run(&hook(SlurmMode::Prolog, true, false), &report(vec![]), &s).code,
        0
    );
    // A dry run still shows the line.
    let r = run(
        &hook(SlurmMode::Health, true, true),
        &report(vec![held()]),
        &s,
    );
    assert!(
        r.lines
            .last()
            .unwrap()
            .starts_with("scontrol update NodeName=node7 State=DRAIN")
    );
}

fn wrong_ifname() -> Finding {
    Finding::new(
        preflight_checks::core::FindingId::new("env.socket-ifname"),
        Status::Fail,
        "NCCL_SOCKET_IFNAME",
        "NCCL_SOCKET_IFNAME=nosuch0 matches no interface",
    )
}

#[test]
fn the_health_check_drains_for_node_problems_only_and_the_prolog_tags_whose() {
    // A user problem alone: the health check fails but neither drains nor keeps its old drain.
    let ours =
        "preflight: [user_problem] fix-config: env.socket-ifname: NCCL_SOCKET_IFNAME=nosuch0";
    let s = FakeSlurm::new("drained", Some(ours));
    let r = run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![wrong_ifname()]),
        &s,
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        *s.calls.borrow(),
        vec![vec![
            "update".to_string(),
            "NodeName=node7".into(),
            "State=RESUME".into()
        ]]
    );
    assert!(
        r.lines[0].contains("fail env.socket-ifname [user_problem] fix-config: "),
        "{r:?}"
    );
    assert!(
        r.lines
            .iter()
            .any(|l| l.contains("not drained: only user problems")),
        "{r:?}"
    );
    assert!(
        r.lines
            .last()
            .unwrap()
            .starts_with("resumed node7 (user problems only, which do not keep a node drained"),
        "{r:?}"
    );
    // With a node problem too, the node problem is the reason, the user one counted.
    let s = FakeSlurm::new("idle", None);
    run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![wrong_ifname(), held()]),
        &s,
    );
    let calls = s.calls.borrow();
    assert!(
        calls[0][3].starts_with("Reason=preflight: [node_problem] restart-job: port.in-use: "),
        "{calls:?}"
    );
    assert!(!calls[0][3].contains("(+1 more)"), "{calls:?}");
    // The prolog passes a user problem (a failing prolog would drain the node): the job's
    // TaskProlog says it in the task's output instead.
    let s = FakeSlurm::new("idle", None);
    let r = run(
        &hook(SlurmMode::Prolog, true, false),
        &report(vec![wrong_ifname()]),
        &s,
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(s.calls.borrow().is_empty(), "{:?}", s.calls.borrow());
    assert!(
        r.lines.iter().any(|l| l.contains("the prolog passes")),
        "{r:?}"
    );
}

fn lemon() -> Finding {
    Finding::new(
        preflight_checks::history::ids::LEMON,
        Status::Warn,
        "port.in-use",
        "node7 had port.in-use in 3 of its last 10 runs, and it went away in between",
    )
    .remedy(preflight_checks::model::Remedy::node(ModelAction::Reboot))
}

#[test]
fn a_lemon_that_passes_now_is_said_not_drained_and_a_drained_one_resumes() {
    let ours = "preflight: [node_problem] reboot: history.lemon: node7 had port.in-use";
    let s = FakeSlurm::new("drained", Some(ours));
    let r = run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![lemon()]),
        &s,
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(s.calls.borrow()[0][2], "State=RESUME", "{r:?}");
    assert!(
        r.lines.iter().any(|l| l.contains("lemon, not drained for")),
        "{r:?}"
    );
    // With a failure now, the lemon is named in the reason after it.
    let s = FakeSlurm::new("idle", None);
    run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![held(), lemon()]),
        &s,
    );
    let reason = s.calls.borrow()[0][3].clone();
    assert!(
        reason.starts_with("Reason=preflight: [node_problem] restart-job: port.in-use: ")
            && reason.contains(" | [node_problem] reboot: history.lemon: "),
        "{reason}"
    );
    // --drain-lemons: drained for the lemon alone.
    let mut h = hook(SlurmMode::Health, true, false);
    h.drain_lemons = true;
    let s = FakeSlurm::new("idle", None);
    let r = run(&h, &report(vec![lemon()]), &s);
    assert_eq!(r.code, 1);
    assert!(s.calls.borrow()[0][3].contains("history.lemon"));
}

#[test]
fn a_warning_never_drains_and_a_fixed_node_is_resumed() {
    let warn = Finding::new(
        preflight_checks::firewall::ids::RULES,
        Status::Warn,
        "INPUT",
        "the firewall filters input",
    );
    let s = FakeSlurm::new("idle", None);
    let r = run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![warn.clone()]),
        &s,
    );
    assert_eq!(r.code, 0);
    assert!(s.calls.borrow().is_empty());
    let ours = "preflight: [node_problem] restart-job: port.in-use: master port 29500";
    let s = FakeSlurm::new("drained", Some(ours));
    run(
        &hook(SlurmMode::Health, true, false),
        &report(vec![warn]),
        &s,
    );
    assert_eq!(s.calls.borrow()[0][2], "State=RESUME");
}
