//! Faults and slips in network namespaces: a rank claimed by two hosts, a node stopped or
//! killed during the TCP ring. Each asserts who is named and the time bound the others keep.

use crate::netns::{Cluster, NodeRun};
use serde_json::Value;
use std::time::{Duration, Instant};

fn findings<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a Value> {
    run.findings(id)
}

fn tcp_result(run: &NodeRun) -> Value {
    run.report()["collectives"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["transport"] == "tcp").cloned())
        .unwrap_or(Value::Null)
}

/// Host 3 starts with host 1's rank. Rank 0 refuses it, names both hosts, and host 1 keeps
/// its place; host 3's own report says why it was turned away.
#[test]
fn a_rank_claimed_by_two_hosts_is_refused_and_both_are_named() {
    let Some(c) = Cluster::flat("dupr", 4, "eth0").build() else {
        return;
    };
    let runs = c
        .preflight()
        .nnodes(3)
        .claim(3, 1)
        .late(3, Duration::from_millis(800))
        .late(2, Duration::from_millis(2500))
        .timeout(10)
        .run();
    let by_host = |h: usize| runs.iter().find(|r| r.rank == h).expect("ran");
    let rank0 = by_host(0);
    let refused = findings(rank0, "cluster.refused");
    let dup = refused
        .iter()
        .find(|f| f["evidence"]["kind"] == "rank-taken")
        .unwrap_or_else(|| panic!("no rank-taken refusal:\n{}", rank0.describe()));
    assert_eq!(dup["status"], "fail");
    assert_eq!(dup["evidence"]["claimed_rank"], 1);
    assert_eq!(dup["evidence"]["address"], c.addr(3, "data").as_str());
    assert_eq!(dup["evidence"]["hostname"], c.hostname(3));
    let holder = dup["evidence"]["holder"].as_str().unwrap_or_default();
    assert!(holder.contains(c.hostname(1)), "{holder}");
    // Host 1 keeps rank 1: rank 0's report lists it, and every joined node gets that report
    // (failing, since a node was refused).
    let rank1 = rank0.report()["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|x| x["rank"] == 1))
        .map(|x| x["hostname"].clone());
    assert_eq!(rank1, Some(Value::from(c.hostname(1))));
    for h in [1, 2] {
        let r = by_host(h);
        assert_eq!(r.exit_code, Some(1), "{}", r.describe());
        assert_eq!(r.report()["nodes"].as_array().map(Vec::len), Some(3));
        assert!(!findings(r, "cluster.refused").is_empty());
    }
    let own = serde_json::to_string(&findings(by_host(3), "cluster.refused")).unwrap();
    assert!(
        own.contains("already joined"),
        "{own}\n{}",
        by_host(3).describe()
    );
    assert_eq!(by_host(3).exit_code, Some(1));
}

/// No secret source, as in a quick check: a third host computes the key and claims rank 1
/// first. Where the hosts are known (`--hosts`), it is not admitted; the real rank 1 joins, and
/// every report warns that the run had no secret.
#[test]
fn without_a_secret_a_host_outside_the_list_is_not_admitted() {
    let Some(c) = Cluster::flat("intr", 3, "eth0").build() else {
        return;
    };
    let hosts = format!("--hosts={},{}", c.hostname(0), c.hostname(1));
    let runs = c
        .preflight()
        .no_token()
        .nnodes(2)
        .claim(2, 1)
        .late(1, Duration::from_millis(1500))
        .args(&[&hosts])
        .timeout(8)
        .run();
    let by_host = |h: usize| runs.iter().find(|r| r.rank == h).expect("ran");
    let rank0 = by_host(0);
    let refused = findings(rank0, "cluster.refused");
    let intruder = refused
        .iter()
        .find(|f| f["evidence"]["kind"] == "not-admitted")
        .unwrap_or_else(|| panic!("intruder not refused:\n{}", rank0.describe()));
    assert_eq!(intruder["evidence"]["address"], c.addr(2, "data").as_str());
    let nodes = rank0.report()["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rank1 = nodes
        .iter()
        .find(|n| n["rank"] == 1)
        .map(|n| n["hostname"].clone());
    assert_eq!(
        rank1,
        Some(Value::from(c.hostname(1))),
        "{}",
        rank0.describe()
    );
    for h in [0, 1] {
        let auth = findings(by_host(h), "cluster.auth");
        assert_eq!(auth.len(), 1, "{}", by_host(h).describe());
        assert_eq!(auth[0]["status"], "warn");
    }
    assert_ne!(by_host(2).exit_code, Some(0));
}

/// Stops (SIGSTOP) or kills (SIGKILL) rank 2 while the TCP ring runs. The others finish
/// within `--timeout` + 15 s of the fault with a report naming rank 2, keeping the sizes
/// measured before it.
fn ring_fault(tag: &str, sig: i32) {
    let Some(c) = Cluster::flat(tag, 3, "eth0").build() else {
        return;
    };
    let timeout = 8;
    let mut running = c
        .preflight()
        .timeout(timeout)
        .args(&["--allreduce=tcp", "--sizes=1M:1G"])
        .deadline(Duration::from_secs(90))
        .start();
    assert!(
        running.wait_stderr(0, "all-reduce (advice) starts", Duration::from_secs(30)),
        "the ring never started"
    );
    std::thread::sleep(Duration::from_millis(1500));
    running.signal(2, sig);
    let fault = Instant::now();
    let runs = running.finish_ranks(&[0, 1]);
    let bound = Duration::from_secs(timeout + 15);
    for r in &runs {
        let ended = r.ended_after_start_of(fault);
        assert!(
            ended < bound,
            "rank {} ended {ended:?} after the fault",
            r.rank
        );
        assert!(r.exit_code.is_some(), "{}", r.describe());
        let tcp = tcp_result(r);
        assert!(
            !tcp.is_null(),
            "rank {} got no all-reduce:\n{}",
            r.rank,
            r.describe()
        );
        let rows = tcp["rows"].as_array().map_or(0, Vec::len);
        assert!(rows >= 1, "no size kept:\n{}", r.describe());
        assert!(
            rows < 11,
            "the ring finished before the fault; {rows} sizes"
        );
        let failed: Vec<u64> = tcp["failed_ranks"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        assert!(failed.contains(&2), "{tcp}");
        eprintln!(
            "{tag}: rank {} exit {:?} {ended:.1?} after the fault, {rows} sizes kept",
            r.rank, r.exit_code
        );
    }
}

#[test]
fn a_node_stopped_during_the_ring_is_named_and_the_others_finish_in_time() {
    ring_fault("rstop", libc::SIGSTOP);
}

#[test]
fn a_node_killed_during_the_ring_keeps_the_sizes_measured_before() {
    ring_fault("rkill", libc::SIGKILL);
}
