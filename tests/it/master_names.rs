//! Issue 33, points 4, 5 and 7 in network namespaces with real processes: a master name that
//! leads a node to another network of rank 0 (rejected there, while the data address works), a
//! name that appears only after a while or never, and the launcher's own MASTER_ADDR under Slurm
//! variables (on the second node, or empty).
//!
//! Expected run time per test (2 cores): 5-15 s.

use crate::netns::{Cluster, Host, MASTER_PORT, Net, NodeRun, node};
use serde_json::Value;
use std::time::Duration;

const TIMEOUT: u64 = 15;

/// With `PREFLIGHT_SAVE_REPORTS=DIR`, a node's report goes to `DIR/<what>.json` (the notes'
/// samples are rendered from these with `preflight render`).
fn save(run: &NodeRun, what: &str) {
    if let Some(dir) = std::env::var_os("PREFLIGHT_SAVE_REPORTS") {
        let path = std::path::Path::new(&dir).join(format!("{what}.json"));
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(path, serde_json::to_vec(run.report()).unwrap_or_default());
    }
}

fn findings<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a Value> {
    run.findings(id)
}

fn one<'a>(run: &'a NodeRun, id: &str) -> &'a Value {
    let v = findings(run, id);
    assert_eq!(v.len(), 1, "expected one {id}:\n{}", run.describe());
    v[0]
}

fn summary(f: &Value) -> &str {
    f["summary"].as_str().unwrap_or_default()
}

fn two_networks(tag: &str) -> Option<Cluster> {
    Cluster::new(tag)
        .network(Net::new("data", 1))
        .network(Net::new("admin", 2))
        .host(Host::new("node0").on("data", "eth0").on("admin", "eth1"))
        .host(Host::new("node1").on("data", "eth0").on("admin", "eth1"))
        .build()
}

/// node0 rejects the master port on its admin network; on node1 the short name `node0` leads
/// there (its /etc/hosts), while `node0.data` leads to the data address. node1 joins through the
/// data address and the report names both addresses, what each gave, and the fix.
#[test]
fn a_short_name_leading_to_a_rejecting_network_is_named_with_both_addresses() {
    let Some(c) = two_networks("mnelse") else {
        return;
    };
    let (data0, admin0) = (c.addr(0, "data"), c.addr(0, "admin"));
    let port = MASTER_PORT.to_string();
    c.iptables(
        0,
        &[
            "-A",
            "INPUT",
            "-i",
            "eth1",
            "-p",
            "tcp",
            "--dport",
            &port,
            "-j",
            "REJECT",
            "--reject-with",
            "tcp-reset",
        ],
    );
    // Healthy control: the name leads to the data address everywhere.
    let runs = c.preflight().master_host("node0").timeout(TIMEOUT).run();
    let r0 = node(&runs, 0);
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    assert_eq!(one(r0, "cluster.master-elsewhere")["status"], "pass");

    c.map_host(1, "node0", &admin0);
    c.name_host(1, &data0, &["node0.data"]);
    let runs = c.preflight().master_host("node0").timeout(TIMEOUT).run();
    let r0 = node(&runs, 0);
    assert!(!r0.timed_out, "{}", r0.describe());
    save(r0, "elsewhere-rank0");
    save(node(&runs, 1), "elsewhere-rank1");
    let f = one(r0, "cluster.master-elsewhere");
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "fail", "{f:#}");
    assert_eq!(f["node"], 1);
    assert!(
        summary(f).contains(&format!(
            "the master address node0 leads to {admin0}:{MASTER_PORT} (refused), while rank 0's host answers at {data0}:{MASTER_PORT}, which node0.data resolves to"
        )),
        "{}",
        summary(f)
    );
    assert_eq!(f["evidence"]["failed"][0]["address"], admin0.as_str());
    assert_eq!(f["evidence"]["failed"][0]["result"], "refused");
    assert_eq!(
        f["fix"]["commands"][0],
        format!("export MASTER_ADDR={data0}")
    );
    // Not "no route" or a stale entry: the cause is named. The advice names rank 0 by the
    // address every node joined through, not by its admin address where the port is refused,
    // so rank 1 stays in the healthy set.
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());
    let r1 = node(&runs, 1);
    assert_eq!(one(r1, "cluster.master-elsewhere")["status"], "fail");
    let rec = r0.recommendation();
    assert_eq!(rec["master_addr"], data0.as_str(), "{rec:#}");
    let launch = rec["launch"].to_string();
    assert!(
        launch.contains(&format!("--master-addr={data0}")),
        "{launch}"
    );
    assert!(
        !launch.contains(&format!("--master-addr={admin0}")),
        "{launch}"
    );
    let excluded = rec["healthy_set"]["excluded"].to_string();
    assert!(!excluded.contains("cluster.master-elsewhere"), "{rec:#}");
}

/// node1's /etc/hosts gets the master's line 4 s after the start (a headless Service that
/// publishes the record once the pod is ready): node1 joins and the report says how long the
/// name took; a name that never appears is named with the whole timeout.
#[test]
fn a_master_name_that_appears_late_or_never_is_timed_or_named() {
    let Some(c) = Cluster::flat("mnlate", 2, "eth0").build() else {
        return;
    };
    let data0 = c.addr(0, "data");
    c.unname_host(1, "node0");
    let runs = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(4));
            c.map_host(1, "node0", &data0);
        });
        c.preflight().master_host("node0").timeout(TIMEOUT).run()
    });
    let r0 = node(&runs, 0);
    assert!(!r0.timed_out, "{}", r0.describe());
    save(r0, "late-rank0");
    let f = one(r0, "cluster.master-late");
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "warn", "{f:#}");
    let after = f["evidence"]["nodes"][0]["resolved_after_s"]
        .as_f64()
        .unwrap_or(0.0);
    // Rank 1 starts joining after its probes (slower on a loaded machine): the name appeared
    // some time into its join, within its timeout.
    assert!((0.3..TIMEOUT as f64).contains(&after), "{f:#}");
    assert_eq!(f["evidence"]["nodes"][0]["rank"], 1);
    assert!(
        summary(f).contains("did not resolve at first"),
        "{}",
        summary(f)
    );
    assert!(
        f["fix"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("publishNotReadyAddresses: true"),
        "{f:#}"
    );
    // Healthy control: now it resolves at once.
    let runs = c.preflight().master_host("node0").timeout(TIMEOUT).run();
    let r0 = node(&runs, 0);
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    assert_eq!(one(r0, "cluster.master-late")["status"], "pass");

    // Never: rank 1 alone, the name absent for its whole 4 s timeout.
    c.unname_host(1, "node0");
    let runs = c
        .preflight()
        .ranks(&[1])
        .master_host("node0")
        .timeout(4)
        .run();
    let r1 = node(&runs, 1);
    assert_eq!(r1.exit_code, Some(1), "{}", r1.describe());
    save(r1, "never-rank1");
    let f = one(r1, "cluster.master-late");
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "fail", "{f:#}");
    assert!(
        summary(f).contains(
            "the master address node0 did not resolve on this node for the whole join timeout (4 s"
        ),
        "{}",
        summary(f)
    );
    assert!(
        findings(r1, "cluster.rendezvous").is_empty(),
        "{}",
        r1.describe()
    );
}

/// `srun preflight cluster` as Slurm would start it: only Slurm's variables, and the job script's
/// MASTER_ADDR. On the second node it is named with both nodes and SLURM_NODEID; empty, it is
/// named as empty; on the first node it passes.
#[test]
fn slurm_variables_with_master_addr_on_the_second_node_or_empty_are_named() {
    let Some(c) = Cluster::flat("mnslurm", 2, "eth0").build() else {
        return;
    };
    let list = format!("{},{}", c.hostname(0), c.hostname(1));
    let token = format!("--token={}", c.token());
    let timeout = format!("--timeout={TIMEOUT}");
    let run = |master: &str| {
        let mut p =
            c.preflight()
                .command(&["cluster", &token, &timeout, "--quick", "--format=json"]);
        for r in 0..2 {
            p = p
                .env_on(r, "SLURM_JOB_NODELIST", &list)
                .env_on(r, "SLURM_NNODES", "2")
                .env_on(r, "SLURM_NODEID", &r.to_string())
                .env_on(r, "SLURM_JOB_ID", "4242")
                .env_on(r, "MASTER_ADDR", master);
        }
        p.run()
    };
    let runs = run(c.hostname(1));
    let r0 = node(&runs, 0);
    save(r0, "slurm-second-rank0");
    assert!(!r0.timed_out, "{}", r0.describe());
    let f = one(r0, "cluster.launcher-master");
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "fail", "{f:#}");
    assert!(
        summary(f).contains(
            "MASTER_ADDR=node1 (on ranks 0, 1) is node1, the node with SLURM_NODEID=1, not node0, the node with SLURM_NODEID=0"
        ),
        "{}",
        summary(f)
    );
    assert_eq!(f["evidence"]["SLURM_JOB_NODELIST"], list.as_str());
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());

    let runs = run("");
    let r0 = node(&runs, 0);
    save(r0, "slurm-empty-rank0");
    let f = one(r0, "cluster.launcher-master");
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "fail", "{f:#}");
    assert!(
        summary(f).contains("MASTER_ADDR is set but empty (MASTER_ADDR='') on ranks 0, 1"),
        "{}",
        summary(f)
    );

    let runs = run(c.hostname(0));
    let r0 = node(&runs, 0);
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    assert_eq!(one(r0, "cluster.launcher-master")["status"], "pass");
}

/// The flags say everything while Slurm's node list is set: rank 1, given its own name as the
/// master, names rank 0's host from the list (not "no Slurm node list"), and rank 0's report
/// names node0, not a literal MASTER.
#[test]
fn with_flags_under_slurm_the_node_list_still_names_rank_0() {
    let Some(c) = Cluster::flat("mnflags", 2, "eth0").build() else {
        return;
    };
    let list = format!("{},{}", c.hostname(0), c.hostname(1));
    let mut p = c.preflight().master_host("node1").timeout(5);
    for r in 0..2 {
        p = p
            .env_on(r, "SLURM_JOB_NODELIST", &list)
            .env_on(r, "SLURM_NODEID", &r.to_string());
    }
    let runs = p.run();
    let r1 = node(&runs, 1);
    let f = runs_finding(r1, "cluster.rendezvous");
    assert!(
        summary(f).contains(&format!(
            "rank 0's address is {} (node0)",
            c.addr(0, "data")
        )),
        "{}",
        summary(f)
    );
    assert!(
        !summary(f).contains("no --hosts or Slurm node list"),
        "{}",
        summary(f)
    );
    let r0 = node(&runs, 0);
    assert!(!r0.stdout.contains("MASTER:"), "{}", r0.describe());
}

fn runs_finding<'a>(run: &'a NodeRun, id: &str) -> &'a Value {
    findings(run, id)
        .into_iter()
        .find(|f| f["status"] == "fail")
        .unwrap_or_else(|| panic!("no failing {id}:\n{}", run.describe()))
}

/// Empty MASTER_ADDR with the rank and count given: cluster mode says empty, not unknown.
#[test]
fn an_empty_master_addr_is_said_empty() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["cluster", "--nnodes=2", "--node-rank=1", "--timeout=1"])
        .env("MASTER_ADDR", "")
        .env_remove("SLURM_JOB_NODELIST")
        .env_remove("PET_MASTER_ADDR")
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the master address is empty: MASTER_ADDR is set but empty (MASTER_ADDR='')"),
        "{err}"
    );
    assert!(!err.contains("unknown"), "{err}");
}

/// An IP master address with a reverse entry on the node: torchrun's errors will print that name
/// (pytorch#85300), so the failed join says it is the same address.
#[test]
fn an_ip_masters_reverse_name_is_said_on_a_failed_join() {
    let Some(c) = Cluster::flat("mnrev", 2, "eth0").build() else {
        return;
    };
    let ghost = "10.200.1.9";
    c.name_host(1, ghost, &["fake-host"]);
    let runs = c
        .preflight()
        .ranks(&[1])
        .master_host(ghost)
        .timeout(3)
        .run();
    let r1 = node(&runs, 1);
    let f = findings(r1, "cluster.rendezvous")
        .into_iter()
        .find(|f| f["status"] == "fail")
        .unwrap_or_else(|| panic!("{}", r1.describe()));
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert!(
        summary(f).contains(&format!(
            "torchrun's own errors will name {ghost} as fake-host (the reverse entry of the address here, pytorch#85300)"
        )),
        "{}",
        summary(f)
    );
    assert_eq!(f["evidence"]["reverse_name"], "fake-host");
}

/// Issue 45 under the static rendezvous: `--master-addr=fake-host` where every node's
/// /etc/hosts puts a stale box that drops everything first (see
/// `c10d::stale_fqdn_cluster`). The worker joins through rank 0's address, second in the
/// list, after the first timed out; the job's store client would wait on the first for its
/// whole timeout, so `cluster.master-elsewhere` fails on the worker with the line. With the
/// stale line second it passes.
#[test]
fn a_master_name_whose_first_address_is_a_silent_stale_box_fails_with_the_line() {
    let Some((c, rank0, stale)) = crate::c10d::stale_fqdn_cluster("mnstale", true) else {
        return;
    };
    let run = |c: &Cluster| {
        let runs = c
            .preflight()
            .ranks(&[1, 0])
            .nnodes(2)
            .claim(1, 0)
            .claim(0, 1)
            .master_host("fake-host")
            .timeout(TIMEOUT)
            .run();
        runs.iter()
            .find(|r| r.rank == 1)
            .expect("node0's run")
            .clone()
    };
    let r0 = run(&c);
    assert!(!r0.timed_out, "{}", r0.describe());
    save(&r0, "stale-first-rank0");
    let f = one(&r0, "cluster.master-elsewhere");
    println!("{}", serde_json::to_string_pretty(f).unwrap());
    assert_eq!(f["status"], "fail", "{f:#}");
    assert_eq!(f["node"], 1, "{f:#}");
    assert_eq!(f["evidence"]["cause"], "stale-first-address", "{f:#}");
    assert_eq!(f["evidence"]["first_address"], stale.as_str(), "{f:#}");
    assert_eq!(f["evidence"]["first_origin"]["line"], 1, "{f:#}");
    assert!(
        summary(f).contains(&format!(
            "on rank 1 the master address fake-host resolves first to {stale} (/etc/hosts line 1), which did not answer on port {MASTER_PORT}"
        )),
        "{}",
        summary(f)
    );
    assert!(
        summary(f).contains(&format!(
            "and only after it to {rank0}:{MASTER_PORT}, where rank 0 answers"
        )),
        "{}",
        summary(f)
    );
    assert!(
        f["fix"]["commands"][1] == format!("export MASTER_ADDR={rank0}").as_str(),
        "{f:#}"
    );
    // The two nodes' answers hold the same addresses in another order.
    assert_eq!(one(&r0, "cluster.master-resolution")["status"], "warn");
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());

    // The twin: the stale line second on every node.
    for h in 0..2 {
        c.unname_host(h, "fake-host");
        c.prepend_host(h, &stale, &["fake-host"]);
        c.prepend_host(h, &rank0, &["fake-host"]);
    }
    let r0 = run(&c);
    assert_eq!(one(&r0, "cluster.master-elsewhere")["status"], "pass");
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
}
