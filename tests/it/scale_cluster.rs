//! Clusters of real processes beyond the sizes of the other tests: 64 healthy agents pass and
//! read in one screen; among 48, a dead node and a firewalled node are named as nodes (the
//! second pass in the report) and a single bad link as a link, and the all-reduce still runs.
//! The larger sizes are in `bench/scale.sh` (real) and `preflight simulate` (modelled).

use crate::common::bin;
use crate::netns::{Cluster, NodeRun, Verdict, node};
use serde_json::Value;
use std::time::{Duration, Instant};

const MASTER_PORT: u16 = 29500;

fn fails(report: &Value) -> Vec<&Value> {
    report["findings"]
        .as_array()
        .map(|all| all.iter().filter(|f| f["status"] == "fail").collect())
        .unwrap_or_default()
}

/// The table `preflight render` prints for a saved report at 80 columns.
fn table_lines(run: &NodeRun) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("pf-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rank0.json");
    std::fs::write(&path, serde_json::to_vec(run.report()).unwrap()).unwrap();
    let out = bin()
        .args(["render", "--format", "table"])
        .arg(&path)
        .env("COLUMNS", "80")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn sixty_four_healthy_agents_pass_and_the_report_fits_one_screen() {
    let Some(c) = Cluster::flat("s64", 64, "eth0").build() else {
        return;
    };
    let _quiet = crate::common::measured_speed();
    let started = Instant::now();
    let runs = c.run_preflight_all(120, &[]);
    let wall = started.elapsed();
    let r0 = node(&runs, 0);
    let report = r0.report();
    println!(
        "64 agents: every report after {wall:.1?}; measurement {}",
        report["measurement"]
    );
    assert!(fails(report).is_empty(), "{:#?}", fails(report));
    for run in &runs {
        assert!(
            matches!(run.exit_code, Some(0)),
            "every rank passes:\n{}",
            run.describe()
        );
    }
    let m = &report["measurement"];
    assert_eq!(m["links_total"], 64 * 63, "{m}");
    assert!(m["links_retried"].is_u64(), "{m}");
    assert_eq!(m["throughput_schedule"], "ring + 1 random matchings", "{m}");
    assert_eq!(
        report["collectives"][0]["ranks"], 64,
        "the all-reduce ran on all"
    );
    // Noise is no finding: on these shared cores a pair measured slow once is measured again
    // with few flows at once before it is named, and no node or group is accused.
    let accused: Vec<&Value> = r0
        .findings("link.slow")
        .into_iter()
        .filter(|f| f["status"] == "warn")
        .filter(|f| f["evidence"]["kind"] == "node" || f["evidence"]["kind"] == "cut")
        .collect();
    assert!(accused.is_empty(), "{accused:#?}");
    let lines = table_lines(r0);
    // Here 64 agents share 2 cores, so a few pairs or the ring measure slower than the links
    // allow whatever the links (a real cluster has cores per agent): the lines the speed
    // warnings take (`link.slow` with its "slowest links" list, `collective.busbw`) are
    // counted apart. Everything else a person reads must fit one 60-line screen.
    let slow = speed_lines(&lines);
    println!(
        "{} lines at 80 columns, {slow} of them speed warnings from the shared cores",
        lines.len()
    );
    assert!(
        lines.len() - slow <= 60,
        "{} lines at 80 columns ({slow} speed warnings):\n{}",
        lines.len(),
        lines.join("\n")
    );
    // Within 80 columns, but the commands printed whole to be pasted.
    crate::render_scale::fits(&lines.join("\n"), 80);
}

/// Lines of the "slowest links" list and of the `link.slow`, `link.latency` and
/// `collective.busbw` warning blocks: timing the two shared cores of a test machine move
/// (rank 0, the coordinator, answers slowest under 48 agents).
fn speed_lines(lines: &[String]) -> usize {
    let mut n = 0;
    let mut inside = false;
    for l in lines {
        if l.starts_with("  slowest links")
            || l.starts_with("! warning link.slow")
            || l.starts_with("! warning link.latency")
            || l.starts_with("! warning collective.busbw")
        {
            inside = true;
        } else if inside && (l.trim().is_empty() || !l.starts_with(' ')) {
            inside = false;
        }
        if inside {
            n += 1;
        }
    }
    n
}

#[test]
fn among_48_a_dead_and_a_firewalled_node_are_nodes_and_one_bad_link_is_a_link() {
    let Some(c) = Cluster::flat("s48", 48, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    let (dead, walled, bad_from, bad_to) = (47usize, 5usize, 12usize, 7usize);
    c.block_high_ports(walled, MASTER_PORT, Verdict::Drop);
    let from = c.addr(bad_from, "data");
    c.iptables(
        bad_to,
        &[
            "-A", "INPUT", "-s", &from, "-p", "tcp", "--dport", "29500", "-j", "ACCEPT",
        ],
    );
    c.iptables(
        bad_to,
        &[
            "-A",
            "INPUT",
            "-s",
            &from,
            "-p",
            "tcp",
            "--syn",
            "--dport",
            "1024:65535",
            "-j",
            "DROP",
        ],
    );
    let _quiet = crate::common::measured_speed();
    let started = Instant::now();
    let alive: Vec<usize> = (0..48).filter(|r| *r != dead).collect();
    let runs = c.preflight().ranks(&alive).timeout(15).run();
    let wall = started.elapsed();
    let r0 = node(&runs, 0);
    let report = r0.report();
    println!(
        "48 agents with faults: {wall:.1?}; {}",
        report["measurement"]
    );
    assert!(wall < Duration::from_secs(15 + 90), "took {wall:?}");
    let f = fails(report);
    // The dead node: one rendezvous finding naming it.
    let rdv: Vec<_> = f
        .iter()
        .filter(|x| x["id"] == "cluster.rendezvous")
        .collect();
    assert_eq!(rdv.len(), 1, "{rdv:#?}");
    assert!(text(rdv[0]).contains("47"), "{}", rdv[0]);
    // The firewalled node: one finding on that node, not 46 links; the second pass says node.
    let unreach: Vec<_> = f.iter().filter(|x| x["id"] == "link.unreachable").collect();
    let on_walled: Vec<_> = unreach
        .iter()
        .filter(|x| x["node"] == walled as u64)
        .collect();
    assert_eq!(on_walled.len(), 1, "{unreach:#?}");
    let second = report["measurement"]["second_pass"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let pass = second
        .iter()
        .find(|p| p["node"] == walled as u64)
        .unwrap_or_else(|| panic!("no second pass for rank {walled}: {second:#?}"));
    assert_eq!(pass["verdict"], "node", "{pass}");
    // The bad link: named as the pair, and its ends are not called bad nodes.
    let pair = format!("{bad_from}->{bad_to}");
    assert!(
        unreach.iter().any(|x| text(x).contains(&pair)),
        "no finding names {pair}: {unreach:#?}"
    );
    assert!(
        !second.iter().any(
            |p| (p["node"] == bad_from as u64 || p["node"] == bad_to as u64)
                && p["verdict"] == "node"
        ),
        "{second:#?}"
    );
    assert!(
        unreach.len() <= 3,
        "one finding per cause, not per link: {unreach:#?}"
    );
    // Three faults among 48 (a node that never joined, a filtered node, one link) take at most
    // a screen and a half (87 lines when written), the speed warnings the shared cores cause
    // apart (see the 64-agent test); one fault among 96 takes one screen (the test below).
    let lines = table_lines(r0);
    let slow = speed_lines(&lines);
    println!(
        "{} lines at 80 columns, {slow} of them speed warnings from the shared cores",
        lines.len()
    );
    assert!(
        lines.len() - slow <= 90,
        "{} lines at 80 columns ({slow} speed warnings):\n{}",
        lines.len(),
        lines.join("\n")
    );
    crate::render_scale::fits(&lines.join("\n"), 80);
}

fn text(v: &Value) -> String {
    format!("{} {} {}", v["subject"], v["summary"], v["evidence"])
}

#[test]
fn among_96_one_filtered_node_is_one_finding_and_the_report_fits_one_screen() {
    let Some(c) = Cluster::flat("s96", 96, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    let walled = 61usize;
    c.block_high_ports(walled, MASTER_PORT, Verdict::Drop);
    let _quiet = crate::common::measured_speed();
    let started = Instant::now();
    let runs = c.run_preflight_all(30, &[]);
    let wall = started.elapsed();
    let r0 = node(&runs, 0);
    let report = r0.report();
    println!(
        "96 agents, one filtered: {wall:.1?}; {}",
        report["measurement"]
    );
    let unreach: Vec<&Value> = fails(report)
        .into_iter()
        .filter(|x| x["id"] == "link.unreachable")
        .collect();
    assert_eq!(unreach.len(), 1, "one finding for the node: {unreach:#?}");
    assert_eq!(unreach[0]["node"], walled as u64, "{:#}", unreach[0]);
    // One fault among 96: one screen at 80 columns (issue 37), but the speed warnings the
    // shared cores cause, as in the 64-agent test.
    let lines = table_lines(r0);
    let slow = speed_lines(&lines);
    println!(
        "{} lines at 80 columns, {slow} of them speed warnings from the shared cores",
        lines.len()
    );
    assert!(
        lines.len() - slow <= 60,
        "{} lines at 80 columns ({slow} speed warnings):\n{}",
        lines.len(),
        lines.join("\n")
    );
    crate::render_scale::fits(&lines.join("\n"), 80);
}
