//! Fail-slow in network namespaces with real `tc` shaping: a slow node among three, a slow pair
//! among three, two racks behind a shaped router uplink, a slow node among 48, and one among
//! eight that the faster set leaves out (issue 46). Each slow part is named as its kind, and
//! no innocent node or pair is accused.

use crate::netns::{Cluster, Host, Net, NodeRun, node};
use serde_json::Value;
use std::time::Instant;

/// The `link.slow` warnings of rank 0's report.
fn slow(run: &NodeRun) -> Vec<&Value> {
    run.findings("link.slow")
        .into_iter()
        .filter(|f| f["status"] == "warn")
        .collect()
}

fn kinds(found: &[&Value]) -> Vec<String> {
    found
        .iter()
        .map(|f| f["evidence"]["kind"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// With `PREFLIGHT_SAVE_REPORTS=DIR`, rank 0's report goes to `DIR/<what>.json` (the guide's
/// samples are rendered from these with `preflight render`).
pub(crate) fn save(r0: &NodeRun, what: &str) {
    if let Some(dir) = std::env::var_os("PREFLIGHT_SAVE_REPORTS") {
        let name: String = what
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = std::path::Path::new(&dir).join(format!("{name}.json"));
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(path, serde_json::to_vec(r0.report()).unwrap_or_default());
    }
}

/// Runs every node of `c` and returns rank 0's run, printing what it said. The default timing
/// (1 s per throughput round; the all-reduce kept small) rather than `--quick`: these tests
/// share the machine's cores with the others, and a 0.2 s measurement is at the mercy of one
/// busy moment where a real node's would not be.
fn run(c: &Cluster, timeout: u64, what: &str) -> NodeRun {
    let _quiet = crate::common::measured_speed();
    let started = Instant::now();
    let mut runs = c
        .preflight()
        .default_timing()
        .args(&["--sizes=1M:4M:4"])
        .timeout(timeout)
        .run();
    let wall = started.elapsed();
    let i = runs.iter().position(|r| r.rank == 0).expect("rank 0 ran");
    let r0 = runs.swap_remove(i);
    save(&r0, what);
    for f in slow(&r0) {
        println!("{what}: {} {}\n  {}", f["id"], f["subject"], f["summary"]);
    }
    if let Some(b) = r0.findings("collective.busbw").first() {
        println!("{what}: collective.busbw {}: {}", b["status"], b["summary"]);
    }
    println!("{what}: every report after {wall:.1?}");
    r0
}

#[test]
fn a_slow_node_among_three_is_named_as_the_node_both_ways() {
    let Some(c) = Cluster::flat("fsnode", 3, "eth0").build() else {
        return;
    };
    c.shape_host(2, "data", "100mbit");
    let r0 = run(&c, 30, "slow node of 3");
    let found = slow(&r0);
    assert_eq!(kinds(&found), vec!["node"], "{}", r0.describe());
    let f = found[0];
    assert_eq!(f["node"], 2, "{f}");
    assert_eq!(f["evidence"]["direction"], "both", "{f}");
    assert!(
        f["evidence"]["share_of_reference"].as_f64().unwrap_or(1.0) < 0.1,
        "{f}"
    );
    assert!(
        f["summary"]
            .as_str()
            .unwrap_or_default()
            .contains(c.hostname(2)),
        "{f}"
    );
    assert_eq!(r0.report()["status"], "warn", "{}", r0.describe());
    // At 100 Mbit/s against the others' Gbit/s it costs more than its third of the work: the
    // two others are offered (issue 46).
    let faster = &r0.recommendation()["faster_set"];
    assert_eq!(faster["slow"], serde_json::json!([2]), "{faster:#}");
    assert_eq!(
        faster["set"]["ranks"],
        serde_json::json!([0, 1]),
        "{faster:#}"
    );
    // The all-reduce's finding names the slow node when it is slow because of it.
    let busbw = r0.findings("collective.busbw");
    if busbw.iter().any(|b| b["status"] != "pass") {
        let text = busbw[0]["summary"].as_str().unwrap_or_default();
        assert!(text.contains("rank 2"), "{text}");
    }
}

#[test]
fn a_slow_pair_among_three_is_named_as_the_pair_with_its_path() {
    let Some(c) = Cluster::flat("fspair", 3, "eth0").needs(&["tc"]).build() else {
        return;
    };
    c.shape_pair(0, 1, "data", "100mbit", false);
    let r0 = run(&c, 30, "slow pair of 3");
    let found = slow(&r0);
    assert_eq!(kinds(&found), vec!["pair"], "{}", r0.describe());
    let f = found[0];
    assert_eq!(
        (f["evidence"]["from"].clone(), f["evidence"]["to"].clone()),
        (0.into(), 1.into())
    );
    assert!(f["node"].is_null(), "a pair is no node's: {f}");
    let path = f["evidence"]["path"].as_str().unwrap_or_default();
    assert!(
        path.contains(&c.addr(0, "data")) && path.contains(&c.addr(1, "data")),
        "{path}"
    );
}

#[test]
fn one_slow_direction_among_three_is_named_as_that_direction() {
    let Some(c) = Cluster::flat("fsdir", 3, "eth0").needs(&["tc"]).build() else {
        return;
    };
    c.shape_pair(2, 0, "data", "100mbit", true);
    let r0 = run(&c, 30, "slow direction of 3");
    let found = slow(&r0);
    assert_eq!(kinds(&found), vec!["direction"], "{}", r0.describe());
    assert_eq!(found[0]["subject"], "2->0 eth0", "{}", found[0]);
}

#[test]
fn two_racks_behind_a_slow_uplink_are_a_cut_with_both_groups() {
    let Some(c) = Cluster::new("fscut")
        .network(Net::new("rackA", 30))
        .network(Net::new("rackB", 31))
        .router(&["rackA", "rackB"])
        .host(Host::new("a0").on("rackA", "eth1"))
        .host(Host::new("a1").on("rackA", "eth1"))
        .host(Host::new("a2").on("rackA", "eth1"))
        .host(Host::new("b0").on("rackB", "eth1"))
        .host(Host::new("b1").on("rackB", "eth1"))
        .host(Host::new("b2").on("rackB", "eth1"))
        .needs(&["sysctl", "tc"])
        .build()
    else {
        return;
    };
    c.shape_router(0, "200mbit");
    let r0 = run(&c, 40, "two racks, 200 Mbit/s uplink");
    let found = slow(&r0);
    assert_eq!(kinds(&found), vec!["cut"], "{}", r0.describe());
    let e = &found[0]["evidence"];
    let group = |k: &str| -> Vec<u64> {
        e[k].as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect()
    };
    let mut groups = [group("group_a"), group("group_b")];
    groups.sort();
    assert_eq!(groups, [vec![0, 1, 2], vec![3, 4, 5]], "{e}");
    let across = e["a_to_b_median_gbit_s"].as_f64().unwrap_or(f64::NAN);
    let inside = e["inside_median_gbit_s"].as_f64().unwrap_or(f64::NAN);
    assert!(
        across < 0.3 && inside > 1.0,
        "across {across}, inside {inside}"
    );
    let summary = found[0]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("10.200.30.0/24") && summary.contains("10.200.31.0/24"),
        "{summary}"
    );
}

#[test]
fn a_slow_node_among_48_is_the_node_and_no_one_else() {
    let Some(c) = Cluster::flat("fs48", 48, "eth0").build() else {
        return;
    };
    c.shape_host(29, "data", "100mbit");
    let _quiet = crate::common::measured_speed();
    let started = Instant::now();
    let runs = c.run_preflight_all(60, &[]);
    let r0 = node(&runs, 0);
    save(r0, "48 nodes one slow");
    let found = slow(r0);
    for f in &found {
        println!("48 nodes: {} {}\n  {}", f["id"], f["subject"], f["summary"]);
    }
    println!(
        "48 nodes, one slow: every report after {:.1?}",
        started.elapsed()
    );
    let nodes: Vec<u64> = found
        .iter()
        .filter(|f| f["evidence"]["kind"] == "node")
        .filter_map(|f| f["node"].as_u64())
        .collect();
    assert_eq!(nodes, vec![29], "{found:#?}");
    // On two shared cores a busy moment may still slow a pair the retest could not clear; it
    // is a pair or a direction of its own then, never another node or a cut.
    assert!(
        found.iter().all(|f| f["evidence"]["kind"] != "cut"),
        "{found:#?}"
    );
}

/// Issue 46: one node of eight at 50 Mbit/s slows every all-reduce. The report stays "ready to
/// launch" on all eight, and offers the seven others with the predicted gain and their launch;
/// `preflight launch --healthy-set --exclude-slow` on the saved report leaves out that node only.
#[test]
fn a_slow_node_among_eight_is_left_out_of_the_faster_set_only() {
    let Some(c) = Cluster::flat("fsfast", 8, "eth0").build() else {
        return;
    };
    c.shape_host(5, "data", "50mbit");
    let r0 = run(&c, 60, "slow node of 8");
    let report = r0.report();
    assert_eq!(report["status"], "warn", "{}", r0.describe());
    let f = &r0.recommendation()["faster_set"];
    println!("8 nodes, one slow: {}", f["summary"]);
    assert_eq!(f["slow"], serde_json::json!([5]), "{f:#}");
    assert_eq!(f["slow_hosts"], c.hostname(5), "{f:#}");
    assert_eq!(
        (f["nodes_with"].as_u64(), f["nodes_without"].as_u64()),
        (Some(8), Some(7))
    );
    assert!(f["speedup"].as_f64().unwrap_or(0.0) > 8.0 / 7.0, "{f:#}");
    let launch = f["set"]["launch"].as_array().cloned().unwrap_or_default();
    let hosts: Vec<&str> = launch
        .iter()
        .filter_map(|l| l["hostname"].as_str())
        .collect();
    let others: Vec<&str> = (0..8).filter(|r| *r != 5).map(|r| c.hostname(r)).collect();
    let mut sorted = hosts.clone();
    sorted.sort_unstable();
    let mut expected = others.clone();
    expected.sort_unstable();
    assert_eq!(
        sorted, expected,
        "the offer names the slow node and no other: {f:#}"
    );
    assert!(
        launch
            .iter()
            .all(|l| l["command"].as_str().unwrap_or("").contains("--nnodes=7")),
        "{f:#}"
    );
    // The full launch on all eight stays.
    assert_eq!(
        r0.recommendation()["launch"].as_array().map(Vec::len),
        Some(8)
    );
    // What a person reads, and the launch taken from the saved report.
    let saved = c.host_tmp(0).join("faster-set-report.json");
    std::fs::write(&saved, &r0.stdout).expect("save the report");
    let out = crate::common::bin()
        .args(["render", "--format", "table"])
        .arg(&saved)
        .env("COLUMNS", "200")
        .output()
        .expect("preflight render");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("✓ ready to launch"), "{table}");
    assert!(
        table.contains(&format!("Faster without {}: ~", c.hostname(5)))
            && table.contains("on 7 of 8 nodes"),
        "{table}"
    );
    let out = crate::common::bin()
        .args(["launch", "--report"])
        .arg(&saved)
        .args(["--healthy-set", "--exclude-slow", "--format", "exclude"])
        .output()
        .expect("preflight launch");
    let exclude = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        exclude.trim(),
        c.hostname(5),
        "{exclude}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
