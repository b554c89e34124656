//! torchrun's c10d rendezvous without node ranks, in network namespaces: every node runs the same
//! command (`--rdzv-backend=c10d --rdzv-endpoint=<node0>:29500`, no `--node-rank`); the node that
//! owns the endpoint is rank 0 and the others are assigned 1, 2 in join order, as torchrun does.
//! Expected run time (2 cores): the healthy runs 3-8 s each, the missing owner about `--timeout`.

use crate::netns::{Cluster, Host, MASTER_PORT, Net, NodeRun, PreflightRun, SLACK};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `--timeout` for runs expected to succeed (an upper bound; they finish sooner).
const HEALTHY_TIMEOUT: u64 = 15;
/// `--timeout` for the run with no endpoint owner: the time the nodes must give up within.
const FAULT_TIMEOUT: u64 = 4;
const RDZV_ID: &str = "c10d-job-7";

fn endpoint(c: &Cluster) -> String {
    format!("{}:{MASTER_PORT}", c.addr(0, "data"))
}

/// `preflight cluster` on every node for three nodes joining the c10d endpoint (no `--node-rank`),
/// `more` flags after `--rdzv-endpoint`, then the token and `--timeout=timeout`.
fn c10d_cluster<'a>(c: &'a Cluster, timeout: u64, more: &[&str]) -> PreflightRun<'a> {
    let ep = format!("--rdzv-endpoint={}", endpoint(c));
    let token = format!("--token={}", c.token());
    let timeout = format!("--timeout={timeout}");
    let mut words = vec!["cluster", "--nnodes=3", "--rdzv-backend=c10d", &ep];
    words.extend_from_slice(more);
    words.extend([token.as_str(), &timeout, "--quick", "--format=json"]);
    c.preflight().command(&words)
}

/// Finished in time and was not refused as a usage error (exit 2); findings may fail.
fn assert_ran(run: &NodeRun) {
    assert!(
        !run.timed_out && run.exit_code != Some(2),
        "{}",
        run.describe()
    );
}

/// A healthy run finishes well before its `--timeout`.
fn assert_within_healthy_timeout(run: &NodeRun) {
    assert!(
        run.elapsed < Duration::from_secs(HEALTHY_TIMEOUT),
        "took {:?}:\n{}",
        run.elapsed,
        run.describe()
    );
}

fn assert_ok(run: &NodeRun) {
    assert!(
        !run.timed_out,
        "hung past the deadline:\n{}",
        run.describe()
    );
    assert_eq!(run.exit_code, Some(0), "exit code:\n{}", run.describe());
}

/// hostname -> rank, from the report's nodes[].
fn ranks_by_host(report: &Value) -> BTreeMap<String, u64> {
    report["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|n| {
            (
                n["hostname"].as_str().unwrap_or_default().to_string(),
                n["rank"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect()
}

/// Three nodes, node0 owning the endpoint as rank 0, node1 and node2 ranks 1 and 2 in either order.
fn assert_assigned_at_join(run: &NodeRun, c: &Cluster) {
    let report = run.report();
    assert_eq!(report["mode"], "cluster", "{}", run.describe());
    let ranks = ranks_by_host(report);
    assert_eq!(ranks.len(), 3, "{ranks:?}\n{}", run.describe());
    assert_eq!(ranks.get(c.hostname(0)), Some(&0), "{ranks:?}");
    let mut others = vec![ranks[c.hostname(1)], ranks[c.hostname(2)]];
    others.sort_unstable();
    assert_eq!(others, [1, 2], "{ranks:?}");
    assert_eq!(report["placement"]["source"], "c10d-join", "{report:#}");
    assert_eq!(report["placement"]["endpoint"], endpoint(c), "{report:#}");
    let rec = &report["recommendation"];
    let reasons = rec["reasons"].to_string();
    assert!(
        reasons.contains("ranks were assigned at join as torchrun's c10d rendezvous does"),
        "{reasons}"
    );
    let launch = rec["launch"].as_array().cloned().unwrap_or_default();
    assert_eq!(launch.len(), 3, "{rec:#}");
    for l in &launch {
        let cmd = l["command"].as_str().unwrap_or_default();
        assert!(cmd.contains("--rdzv-backend=c10d"), "{cmd}");
        assert!(
            cmd.contains(&format!(
                "--rdzv-endpoint={}:{MASTER_PORT}",
                c.addr(0, "data")
            )),
            "{cmd}"
        );
        assert!(cmd.contains(&format!("--rdzv-id={RDZV_ID}")), "{cmd}");
        assert!(
            !cmd.contains("--node-rank") && !cmd.contains("--node_rank"),
            "{cmd}"
        );
        assert!(cmd.contains("--nnodes=3"), "{cmd}");
    }
}

#[test]
fn three_nodes_without_ranks_are_assigned_at_join_with_the_endpoint_owner_as_rank_0() {
    let Some(c) = Cluster::flat("c10d", 3, "eth0").build() else {
        return;
    };
    let started = Instant::now();
    // The owner starts last: the others wait for it and are numbered as they join.
    let runs = c10d_cluster(&c, HEALTHY_TIMEOUT, &[&format!("--rdzv-id={RDZV_ID}")])
        .late(0, Duration::from_millis(700))
        .deadline(Duration::from_secs(2 * HEALTHY_TIMEOUT + 30))
        .run();
    let wall = started.elapsed();
    assert_eq!(runs.len(), 3);
    for run in &runs {
        assert_ok(run);
        assert_within_healthy_timeout(run);
        assert_assigned_at_join(run, &c);
        // Each node learned its own rank: it says so, and it is the rank the report gives it.
        let mine = ranks_by_host(run.report())[c.hostname(run.rank)];
        let said = if mine == 0 {
            "rank 0 of 3 (this node owns the c10d endpoint".to_string()
        } else {
            format!("rank {mine} of 3 (assigned at join")
        };
        assert!(run.stderr.contains(&said), "{said}:\n{}", run.describe());
    }
    // `preflight launch` from the saved report gives back the same c10d commands.
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("report.json");
    std::fs::write(&saved, &runs[0].stdout).unwrap();
    let out = crate::common::bin()
        .args(["launch", "--report"])
        .arg(&saved)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let printed: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let own: Vec<&str> = runs[0].report()["recommendation"]["launch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["command"].as_str().unwrap())
        .collect();
    assert_eq!(printed, own, "{text}");
    eprintln!("c10d cluster run: {wall:?}");
}

#[test]
fn preflight_torchrun_with_a_c10d_line_and_no_rank_assigns_at_join_and_keeps_the_line() {
    let Some(c) = Cluster::flat("c10dtr", 3, "eth0").build() else {
        return;
    };
    let ep = endpoint(&c);
    let line = format!(
        "torchrun --nnodes=3 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint={ep} --rdzv-id={RDZV_ID} train.py --lr 3"
    );
    let token = format!("--token={}", c.token());
    let timeout = format!("--timeout={HEALTHY_TIMEOUT}");

    // --no-run: each node validates its own line; no rendezvous, nothing asks for a rank.
    let started = Instant::now();
    let runs = c
        .preflight()
        .command(&[
            "torchrun",
            "--no-run",
            "--no-gpu",
            "--format=json",
            &token,
            &line,
        ])
        .deadline(Duration::from_secs(60))
        .run();
    for run in &runs {
        assert_ran(run);
        let cmd = command_of(run.report());
        assert!(cmd.contains("--rdzv-backend=c10d"), "{cmd}");
        assert!(!cmd.contains("--node-rank"), "{cmd}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // The run: the cluster check with ranks assigned at join, then the same line back.
    let started = Instant::now();
    let runs = c
        .preflight()
        .command(&[
            "torchrun",
            "--no-gpu",
            "--quick",
            "--format=json",
            &token,
            &timeout,
            &line,
        ])
        .deadline(Duration::from_secs(2 * HEALTHY_TIMEOUT + 30))
        .run();
    let wall = started.elapsed();
    for run in &runs {
        assert_ran(run);
        assert_within_healthy_timeout(run);
        assert_assigned_at_join(run, &c);
        let rendezvous: Vec<&Value> = run.findings("cluster.rendezvous");
        assert!(
            rendezvous.iter().all(|f| f["status"] != "fail"),
            "{rendezvous:#?}"
        );
        let cmd = command_of(run.report());
        assert!(cmd.contains("--rdzv-backend=c10d"), "{cmd}");
        assert!(cmd.contains(&format!("--rdzv-endpoint={ep}")), "{cmd}");
        assert!(!cmd.contains("--node-rank"), "{cmd}");
        assert!(cmd.contains("train.py --lr 3"), "{cmd}");
    }
    eprintln!("c10d torchrun run: {wall:?}");
}

#[test]
fn without_the_endpoint_owner_the_others_give_up_at_the_timeout_saying_why() {
    let Some(c) = Cluster::flat("c10dno", 3, "eth0").build() else {
        return;
    };
    let ep = endpoint(&c);
    let started = Instant::now();
    let runs = c10d_cluster(&c, FAULT_TIMEOUT, &[])
        .ranks(&[1, 2])
        .deadline(Duration::from_secs(FAULT_TIMEOUT + 30))
        .run();
    for run in &runs {
        assert!(!run.timed_out, "hung:\n{}", run.describe());
        assert_eq!(run.exit_code, Some(1), "{}", run.describe());
        assert!(
            run.elapsed < Duration::from_secs(FAULT_TIMEOUT) + SLACK,
            "took {:?}",
            run.elapsed
        );
        let f = run.findings("cluster.rendezvous");
        let failing: Vec<&&Value> = f.iter().filter(|f| f["status"] == "fail").collect();
        assert!(!failing.is_empty(), "{}", run.describe());
        let text = failing[0].to_string();
        assert!(text.contains("c10d"), "{text}");
        assert!(text.contains(&ep), "{text}");
        assert!(
            text.contains("must run preflight") || text.contains("run preflight"),
            "{text}"
        );
        let report = run.report();
        assert_eq!(report["placement"]["source"], "c10d-join");
        assert_eq!(report["placement"]["unassigned"], true, "{report:#}");
        let ranked: Vec<&Value> = report["findings"]
            .as_array()
            .map(|a| a.iter().filter(|f| !f["node"].is_null()).collect())
            .unwrap_or_default();
        assert!(
            ranked.is_empty(),
            "a node without a rank names one: {ranked:#?}"
        );
    }
    eprintln!("c10d without owner: {:?}", started.elapsed());
}

/// The `launch.command` finding's command.
fn command_of(report: &Value) -> String {
    report["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["id"] == "launch.command"))
        .and_then(|f| f["evidence"]["command"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// `cluster.fqdn` under c10d: rank 0's canonical name (what torchrun publishes for its
/// TCPStore) is `node0.cluster` in its own /etc/hosts; node1 resolves it to node0's address,
/// node2 has no entry for it. The report names node2 alone, with `--local-addr` and the
/// hosts line as the fix; once node2 has the line, every node passes.
#[test]
fn rank_0s_fqdn_that_one_node_cannot_resolve_is_named_with_the_fix() {
    let Some(c) = Cluster::flat("c10dfq", 3, "eth0").build() else {
        return;
    };
    let addr0 = c.addr(0, "data");
    let fqdn = "node0.cluster";
    c.name_host(0, &addr0, &[fqdn, c.hostname(0)]);
    c.name_host(1, &addr0, &[fqdn, c.hostname(0)]);
    let run = |c: &Cluster| {
        c10d_cluster(c, HEALTHY_TIMEOUT, &[&format!("--rdzv-id={RDZV_ID}")])
            .deadline(Duration::from_secs(2 * HEALTHY_TIMEOUT + 30))
            .run()
    };
    let runs = run(&c);
    let r0 = runs.iter().find(|r| r.rank == 0).expect("node0's run");
    assert_ran(r0);
    let report = r0.report();
    let fq: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "cluster.fqdn")
        .collect();
    assert_eq!(fq.len(), 1, "{}", r0.describe());
    let f = fq[0];
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "warn", "{f:#}");
    assert_eq!(f["evidence"]["fqdn"], fqdn);
    assert_eq!(f["evidence"]["nodes_failing"], 1, "{f:#}");
    assert_eq!(f["evidence"]["nodes"][0]["host"], c.hostname(2), "{f:#}");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("{fqdn} does not resolve on rank")),
        "{f:#}"
    );
    let cmds: Vec<&str> = f["fix"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        cmds[0].starts_with(&format!("torchrun --local-addr={addr0} ")),
        "{cmds:?}"
    );
    assert_eq!(
        cmds[1],
        format!("echo '{addr0} {fqdn}' >> /etc/hosts   # on the nodes above")
    );
    // The fix applied on node2: every node resolves the name to rank 0.
    c.name_host(2, &addr0, &[fqdn, c.hostname(0)]);
    let runs = run(&c);
    let r0 = runs.iter().find(|r| r.rank == 0).expect("node0's run");
    assert_ok(r0);
    let f = r0.report()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "cluster.fqdn")
        .cloned()
        .expect("cluster.fqdn");
    assert_eq!(f["status"], "pass", "{f:#}");
    assert_eq!(f["evidence"]["nodes_checked"], 2, "{f:#}");
}

/// Python's `socket.getfqdn()` takes the reverse entry of the hostname's address, not the
/// hostname's own line: on node0 a stale first line for its address (`old-master.lab.example`)
/// is what torchrun publishes for its TCPStore (checked against python3 itself), and that name
/// resolves nowhere else. `cluster.fqdn` names it with `--local-addr` as the fix.
#[test]
fn a_stale_reverse_entry_for_rank_0s_address_is_the_fqdn_torchrun_publishes() {
    let Some(c) = Cluster::flat("c10drev", 3, "eth0").build() else {
        return;
    };
    let addr0 = c.addr(0, "data");
    let stale = "old-master.lab.example";
    c.prepend_host(0, &addr0, &[stale]);
    let py = c.exec(
        0,
        &["python3", "-c", "import socket; print(socket.getfqdn())"],
    );
    assert!(py.status.success(), "python3 on node0: {py:?}");
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), stale, "{py:?}");
    let runs = c10d_cluster(&c, HEALTHY_TIMEOUT, &[&format!("--rdzv-id={RDZV_ID}")])
        .deadline(Duration::from_secs(2 * HEALTHY_TIMEOUT + 30))
        .run();
    let r0 = runs.iter().find(|r| r.rank == 0).expect("node0's run");
    assert_ran(r0);
    if let Some(dir) = std::env::var_os("PREFLIGHT_SAVE_REPORTS") {
        let _ = std::fs::create_dir_all(&dir);
        let path = std::path::Path::new(&dir).join("c10d-stale-reverse-rank0.json");
        let _ = std::fs::write(path, serde_json::to_vec(r0.report()).unwrap_or_default());
    }
    let f = r0.report()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "cluster.fqdn")
        .cloned()
        .expect("cluster.fqdn");
    println!("{}", serde_json::to_string_pretty(&f).unwrap());
    assert_eq!(f["status"], "warn", "{f:#}");
    assert_eq!(f["evidence"]["fqdn"], stale, "{f:#}");
    assert_eq!(f["evidence"]["nodes_failing"], 2, "{f:#}");
    assert!(
        f["fix"]["commands"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("torchrun --local-addr={addr0} ")),
        "{f:#}"
    );
}

/// Issue 45 (pytorch#85300 as a user meets it): two nodes under c10d with the endpoint given as
/// rank 0's IP, and on every node a stale `/etc/hosts` line before rank 0's own: `<stale box>
/// fake-host`, `<rank 0> fake-host`, then the harness's `<rank 0> node0`. Rank 0's
/// `socket.getfqdn()` is `fake-host` (what torchrun's c10d publishes for the TCPStore); the
/// stale box drops everything. Hosts: node1 (the worker, 10.200.1.1), node0 (rank 0, the
/// endpoint's owner, .2), stale-box (.3): from .1, glibc's RFC 6724 sort ties .2 and .3 on
/// its longest-matching-prefix rule, so the resolver keeps the file's order (checked with
/// `getent ahosts` before the run). With `stale_first` the stale line comes first.
pub(crate) fn stale_fqdn_cluster(
    tag: &str,
    stale_first: bool,
) -> Option<(Cluster, String, String)> {
    let c = Cluster::new(tag)
        .network(Net::new("data", 1))
        .host(Host::new("node1").on("data", "eth0"))
        .host(Host::new("node0").on("data", "eth0"))
        .host(Host::new("stale-box").on("data", "eth0"))
        .build()?;
    let (rank0, stale) = (c.addr(1, "data"), c.addr(2, "data"));
    c.iptables(2, &["-A", "INPUT", "-j", "DROP"]);
    for h in 0..2 {
        let (second, first) = if stale_first {
            (&rank0, &stale)
        } else {
            (&stale, &rank0)
        };
        c.prepend_host(h, second, &["fake-host"]);
        c.prepend_host(h, first, &["fake-host"]);
    }
    let py = c.exec(
        1,
        &["python3", "-c", "import socket; print(socket.getfqdn())"],
    );
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "fake-host",
        "{py:?}"
    );
    let order = c.exec(0, &["getent", "ahosts", "fake-host"]);
    let first = String::from_utf8_lossy(&order.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let expected = if stale_first { &stale } else { &rank0 };
    assert_eq!(&first, expected, "the worker's resolver order: {order:?}");
    Some((c, rank0, stale))
}

/// Both nodes run `preflight cluster` under c10d with the endpoint as rank 0's IP (host 1,
/// node0, starts first); node0's report.
fn run_stale_fqdn(c: &Cluster, rank0: &str) -> NodeRun {
    let ep = format!("--rdzv-endpoint={rank0}:{MASTER_PORT}");
    let token = format!("--token={}", c.token());
    let timeout = format!("--timeout={HEALTHY_TIMEOUT}");
    let runs = c
        .preflight()
        .ranks(&[1, 0])
        .command(&[
            "cluster",
            "--nnodes=2",
            "--rdzv-backend=c10d",
            &ep,
            &format!("--rdzv-id={RDZV_ID}"),
            &token,
            &timeout,
            "--quick",
            "--format=json",
        ])
        .deadline(Duration::from_secs(2 * HEALTHY_TIMEOUT + 30))
        .run();
    let r0 = runs
        .iter()
        .find(|r| r.rank == 1)
        .expect("node0's run")
        .clone();
    assert_ran(&r0);
    if let Some(dir) = std::env::var_os("PREFLIGHT_SAVE_REPORTS") {
        let _ = std::fs::create_dir_all(&dir);
        let path = std::path::Path::new(&dir).join("c10d-stale-first-rank0.json");
        let _ = std::fs::write(path, serde_json::to_vec(r0.report()).unwrap_or_default());
    }
    r0
}

fn fqdn_finding(run: &NodeRun) -> Value {
    let f = run.findings("cluster.fqdn");
    assert_eq!(f.len(), 1, "{}", run.describe());
    f[0].clone()
}

#[test]
fn c10d_fqdn_whose_first_address_is_a_silent_stale_box_fails_with_the_line() {
    let Some((c, rank0, stale)) = stale_fqdn_cluster("c10dstale", true) else {
        return;
    };
    let r0 = run_stale_fqdn(&c, &rank0);
    let f = fqdn_finding(&r0);
    println!("{}", serde_json::to_string_pretty(&f).unwrap());
    assert_eq!(f["status"], "fail", "{f:#}");
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());
    assert_eq!(f["evidence"]["fqdn"], "fake-host");
    assert_eq!(f["evidence"]["first_address"], stale.as_str(), "{f:#}");
    assert_eq!(f["evidence"]["first_origin"]["file"], "/etc/hosts", "{f:#}");
    assert_eq!(f["evidence"]["first_origin"]["line"], 1, "{f:#}");
    let worker = f["evidence"]["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["host"] == "node1"))
        .cloned()
        .unwrap_or_else(|| panic!("node1 not named: {f:#}"));
    assert_eq!(worker["first_dial"]["result"], "timeout", "{f:#}");
    assert_eq!(worker["resolved"][0], stale.as_str(), "{f:#}");
    assert_eq!(worker["resolved"][1], rank0.as_str(), "{f:#}");
    let summary = f["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(&format!(
            "rank 0's FQDN fake-host resolves first to {stale} (/etc/hosts line 1: {stale} fake-host), which is not rank 0 and did not answer on port {MASTER_PORT}"
        )),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "and only after it (2nd in the list) to rank 0's {rank0} (/etc/hosts line 2)"
        )),
        "{summary}"
    );
    let cmds: Vec<&str> = f["fix"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let drop = format!(
        "t=$(mktemp) && sed '1{{/^{}[[:space:]]/d}}' /etc/hosts > \"$t\" && cat \"$t\" > /etc/hosts",
        stale.replace('.', "\\.")
    );
    assert!(cmds[0].starts_with(&drop), "{cmds:?}");
    assert!(cmds[0].contains("# on rank 1:"), "{cmds:?}");
    assert!(
        cmds.iter()
            .any(|c| c.starts_with(&format!("torchrun --local-addr={rank0} "))),
        "{cmds:?}"
    );
    assert!(
        cmds.iter().any(|c| c.starts_with(&format!(
            "torchrun --rdzv-backend=static --master-addr={rank0} "
        ))),
        "{cmds:?}"
    );
    // The fix as printed, run where it says (rank 1: node1, host 0): the name leads to rank
    // 0 first there, and passes.
    let out = c.exec(0, &["sh", "-c", cmds[0]]);
    assert!(out.status.success(), "{out:?}");
    let r0 = run_stale_fqdn(&c, &rank0);
    let f = fqdn_finding(&r0);
    assert_eq!(f["status"], "pass", "{f:#}");
}

#[test]
fn c10d_fqdn_with_the_stale_box_second_passes() {
    let Some((c, rank0, _stale)) = stale_fqdn_cluster("c10dstale2", false) else {
        return;
    };
    let r0 = run_stale_fqdn(&c, &rank0);
    let f = fqdn_finding(&r0);
    println!("{}", serde_json::to_string_pretty(&f).unwrap());
    assert_eq!(f["status"], "pass", "{f:#}");
    assert_eq!(f["evidence"]["nodes_checked"], 1, "{f:#}");
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
}
