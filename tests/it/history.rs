//! The history store and the lemons (issue 44): concurrent writers, a killed writer, an
//! unwritable and a corrupt store, planted histories through `preflight history --reports`, a
//! node judged by its own history, and the Prometheus counters and alert rules under promtool.
//! Issue 53: a standing fault is no lemon and leaves the report as it was; runs count once.

use crate::common::{bin, fixture, json_of, report_of};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Rows (runs) in a store and its integrity check's answer, read with SQLite itself.
fn store_state(db: &Path) -> (i64, String) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    (n, ok)
}

#[test]
fn eight_concurrent_writers_of_a_thousand_runs_lose_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let report = fixture("reports/cluster-2-nodes.json");
    let exe = env!("CARGO_BIN_EXE_preflight");
    let start = Instant::now();
    let writers: Vec<std::process::Child> = (0..8)
        .map(|_| {
            std::process::Command::new(exe)
                .args(["history", "--import"])
                .arg(&report)
                .args(["--times", "1000", "--history"])
                .arg(&db)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for w in writers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let took = start.elapsed();
    // 8 writers x 1,000 runs x 2 nodes of the report.
    assert_eq!(store_state(&db), (16_000, "ok".to_string()));
    assert!(took < Duration::from_secs(240), "took {took:?}");
    let out = bin()
        .args(["history", "--format", "json", "--history"])
        .arg(&db)
        .output()
        .unwrap();
    let v = json_of(&out.stdout);
    // Each import run is one run of both nodes.
    assert_eq!(v["runs"], 8_000);
    assert_eq!(v["node_runs"], 16_000);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2);
}

#[test]
fn a_writer_killed_mid_run_leaves_a_sound_store_with_whole_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let report = fixture("reports/cluster-3-healthy.json");
    let mut w = std::process::Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["history", "--import"])
        .arg(&report)
        .args(["--times", "1000000", "--history"])
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once it has written some runs (bounded wait).
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        if db.exists() && std::fs::metadata(&db).map_or(0, |m| m.len()) > 64 << 10 {
            break;
        }
    }
    w.kill().unwrap();
    w.wait().unwrap();
    let (n, ok) = store_state(&db);
    assert_eq!(ok, "ok");
    assert!(n > 0, "the writer wrote nothing before it was killed");
    // Every run kept is whole: as many findings as the report gives that node.
    let out = bin()
        .args(["history", "--export", "--history"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut per_node: std::collections::BTreeMap<String, std::collections::BTreeSet<usize>> =
        Default::default();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        per_node
            .entry(r["node"].as_str().unwrap().to_string())
            .or_default()
            .insert(r["findings"].as_array().unwrap().len());
    }
    assert_eq!(text.lines().count() as i64, n);
    for (node, counts) in &per_node {
        assert_eq!(
            counts.len(),
            1,
            "{node}: runs of different sizes {counts:?}"
        );
    }
    // The next writer goes on.
    let out = bin()
        .args(["history", "--import"])
        .arg(&report)
        .args(["--history"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(store_state(&db).0, n + 3);
}

/// `check --facts` of node07 with `history` set to `runs`, as JSON; and its exit code.
fn check_with_history(history: Value, extra: &[&str]) -> (Value, i32) {
    let dir = tempfile::tempdir().unwrap();
    let mut facts: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("facts/docker-bond-host.json")).unwrap(),
    )
    .unwrap();
    facts["history"] = history;
    let path = dir.path().join("facts.json");
    std::fs::write(&path, facts.to_string()).unwrap();
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    (report_of(&out), out.status.code().unwrap_or(-1))
}

fn past_run(i: i64, findings: Value) -> Value {
    json!({"run": format!("r{i}"), "time": 1_700_000_000 + i * 3600, "node": "node07",
           "mode": "check", "nodes": 1, "findings": findings})
}

#[test]
fn a_node_is_named_a_lemon_by_its_own_history_and_its_action_escalates() {
    let ecc = json!([{"id": "gpu.ecc", "status": "fail", "with": 1}]);
    let runs: Vec<Value> = (0..10)
        .map(|i| past_run(i, if i % 3 == 0 { ecc.clone() } else { json!([]) }))
        .collect();
    let (report, _) = check_with_history(json!({"runs": runs, "total_runs": 10}), &[]);
    let lemons: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "history.lemon")
        .collect();
    assert_eq!(lemons.len(), 1, "{lemons:?}");
    let l = lemons[0];
    assert_eq!(l["status"], "warn");
    assert_eq!(l["node"], 0);
    assert_eq!(l["subject"], "gpu.ecc");
    assert_eq!(l["evidence"]["rule"], "repeat");
    // Its last 10 runs: 9 past ones (3 with gpu.ecc) and this one.
    assert_eq!(l["evidence"]["runs"], 3);
    assert_eq!(l["problem"], "node");
    // gpu.ecc's own action (reset-gpu) did not help: the lemon's is the next one.
    assert_eq!(l["action"], "reboot");
    let cmds = l["fix"]["commands"].to_string();
    assert!(
        cmds.contains("scontrol update NodeName=node07 State=DRAIN"),
        "{cmds}"
    );
    assert!(
        cmds.contains("[node_problem] reboot: lemon (repeat) gpu.ecc"),
        "{cmds}"
    );

    // Failed once, or a user problem every time: no lemon.
    let once: Vec<Value> = (0..10)
        .map(|i| past_run(i, if i == 4 { ecc.clone() } else { json!([]) }))
        .collect();
    let (report, _) = check_with_history(json!({"runs": once}), &[]);
    assert!(!report.to_string().contains("history.lemon"));
    let user = json!([{"id": "env.socket-ifname", "status": "fail", "with": 1, "user": true}]);
    let users: Vec<Value> = (0..10).map(|i| past_run(i, user.clone())).collect();
    let (report, _) = check_with_history(json!({"runs": users}), &[]);
    assert!(!report.to_string().contains("history.lemon"));
}

#[test]
fn an_unwritable_or_corrupt_store_is_a_warning_and_a_corrupt_file_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    // A folder that cannot exist (its parent is a file): root cannot write there either.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let bad = blocker.join("h.db");
    let run = |history: &Path| {
        let out = bin()
            .args(["check", "--no-gpu", "--format", "json", "--history"])
            .arg(history)
            .output()
            .unwrap();
        (report_of(&out), out.status.code())
    };
    let off = bin()
        .args(["check", "--no-gpu", "--format", "json", "--history", "off"])
        .output()
        .unwrap();
    let start = Instant::now();
    let (report, code) = run(&bad);
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(
        code,
        off.status.code(),
        "the store never changes the exit code"
    );
    let store: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "history.store")
        .collect();
    assert_eq!(store.len(), 1);
    assert_eq!(store[0]["status"], "warn");
    assert!(
        store[0]["evidence"]["problem"]
            .as_str()
            .unwrap()
            .contains("cannot create"),
        "{store:?}"
    );

    // Garbage where the store should be: set aside (kept, renamed), a new store started.
    let db = dir.path().join("h.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&db, &garbage).unwrap();
    let (report, _) = run(&db);
    let text = report.to_string();
    assert!(
        text.contains("history.store") && text.contains("set aside"),
        "{text}"
    );
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("h.db.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(aside[0].path()).unwrap(), garbage);
    assert_eq!(store_state(&db), (1, "ok".to_string()));
    let (report, _) = run(&db);
    let ids: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&"history.store"), "{ids:?}");
    assert_eq!(store_state(&db).0, 2);
}

/// A run record of `node` in run `i` of `n` nodes.
fn rec(node: &str, i: i64, n: u32, findings: Value) -> String {
    json!({"run": format!("c{i}"), "time": 1_800_000_000 + i * 600, "node": node,
           "mode": "cluster", "nodes": n, "findings": findings})
    .to_string()
}

#[test]
fn planted_histories_name_the_intermittent_node_and_the_pair_and_no_one_else() {
    let dir = tempfile::tempdir().unwrap();
    // 64 nodes, 30 runs: n17 fails gpu.ecc in every third run; the link n05-n06 is slow in
    // runs 3, 9 and 15 (both ends record it); n40 failed once.
    for n in 0..64 {
        let node = format!("n{n:02}");
        let mut lines = String::new();
        for i in 0..30 {
            let mut f = Vec::new();
            if n == 17 && i % 3 == 0 {
                f.push(json!({"id": "gpu.ecc", "status": "fail", "with": 1}));
            }
            if n == 40 && i == 12 {
                f.push(json!({"id": "gpu.row-remap", "status": "fail", "with": 1}));
            }
            if (n == 5 || n == 6) && [3, 9, 15].contains(&i) {
                let partner = if n == 5 { "n06" } else { "n05" };
                f.push(json!({"id": "link.slow", "status": "warn", "partner": partner, "with": 2}));
            }
            lines.push_str(&rec(&node, i, 64, Value::Array(f)));
            lines.push('\n');
        }
        std::fs::write(dir.path().join(format!("{node}.jsonl")), lines).unwrap();
    }
    std::fs::write(dir.path().join("notes.json"), "{\"not\": \"a report\"}").unwrap();
    let out = bin()
        .args(["history", "--format", "json", "--reports"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a lemon exits 1");
    let v = json_of(&out.stdout);
    // 30 runs of 64 nodes each: 1920 node-runs.
    assert_eq!(v["runs"], 30);
    assert_eq!(v["node_runs"], 64 * 30);
    let lemons: Vec<(String, String)> = v["lemons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["evidence"]["rule"].as_str().unwrap().to_string(),
                l["subject"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        lemons,
        vec![
            ("repeat".to_string(), "gpu.ecc".to_string()),
            ("pair".to_string(), "n05<->n06".to_string()),
        ]
    );
    assert_eq!(v["lemons"][0]["evidence"]["hostname"], "n17");
    assert!(v["notes"].to_string().contains("notes.json skipped"));
    // The busiest failing node first, with its flaps.
    assert_eq!(v["nodes"][0]["node"], "n17");
    assert_eq!(v["nodes"][0]["failed_runs"], 10);
    assert_eq!(v["nodes"][0]["flaps"], 19);

    let table = bin()
        .args(["history", "--reports"])
        .arg(dir.path())
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains("[repeat] gpu.ecc") && text.contains("[pair] n05<->n06"),
        "{text}"
    );
    assert!(text.contains("... and 44 more node(s)"), "{text}");
    assert!(text.lines().count() < 120, "{} lines", text.lines().count());
}

#[test]
fn prom_counters_and_the_lemon_gauge_pass_promtool_and_the_alert_rules_test() {
    let dir = tempfile::tempdir().unwrap();
    let ecc = json!([{"id": "gpu.ecc", "status": "fail", "with": 1}]);
    // gpu.ecc comes and goes: in runs 0, 2 and 4.
    let runs: Vec<Value> = (0..6)
        .map(|i| past_run(i, if i % 2 == 0 { ecc.clone() } else { json!([]) }))
        .collect();
    let prom = dir.path().join("p.prom");
    let history = json!({"runs": runs, "total_runs": 40,
        "totals": [{"id": "gpu.ecc", "status": "fail", "runs": 6}]});
    let (_, _) = check_with_history(history, &["--prom-file", prom.to_str().unwrap()]);
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("# TYPE preflight_history_finding_runs_total counter"),
        "{text}"
    );
    assert!(text.contains(
        "preflight_history_finding_runs_total{node=\"node07\",id=\"gpu.ecc\",status=\"fail\"} 6"
    ));
    assert!(text.contains("preflight_history_runs_total{node=\"node07\"} 40"));
    assert!(
        text.contains("preflight_lemon{node=\"node07\",rule=\"repeat\",subject=\"gpu.ecc\"} 1")
    );
    let check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&prom).unwrap())
        .output()
        .expect("promtool (Debian's prometheus package) is installed");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let rules = std::process::Command::new("promtool")
        .args(["test", "rules", "lemons.test.yml"])
        .current_dir(fixture("prometheus"))
        .output()
        .unwrap();
    assert!(
        rules.status.success(),
        "{}{}",
        String::from_utf8_lossy(&rules.stdout),
        String::from_utf8_lossy(&rules.stderr)
    );
}

/// A real cluster of six in network namespaces, run six times in a row with one node slow in
/// runs 2, 4 and 6 (tc on its link), each node keeping its own store: the sixth report names it
/// a lemon (its link fault moves with it) and no one else, and so does `preflight history` on it.
#[test]
fn a_node_slow_in_three_of_six_runs_is_named_a_lemon_by_the_sixth() {
    use crate::netns::Cluster;
    let Some(c) = Cluster::flat("lemon", 6, "eth0").build() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = |rank: usize| dir.path().join(format!("node{rank}.db"));
    let started = Instant::now();
    let mut last = None;
    for run in 1..=6 {
        let slow = run % 2 == 0;
        if slow {
            c.shape_host(3, "data", "100mbit");
        }
        let _quiet = crate::common::measured_speed();
        let mut p = c
            .preflight()
            .default_timing()
            .args(&["--sizes=1M:4M:4"])
            .timeout(40);
        for rank in 0..6 {
            p = p.env_on(rank, "PREFLIGHT_HISTORY", db(rank).to_str().unwrap());
        }
        let mut runs = p.run();
        drop(_quiet);
        if slow {
            c.unshape_host(3, "data");
        }
        let i = runs.iter().position(|r| r.rank == 0).expect("rank 0 ran");
        let r0 = runs.swap_remove(i);
        let slow_nodes: Vec<&Value> = r0
            .findings("link.slow")
            .into_iter()
            .filter(|f| f["status"] == "warn")
            .collect();
        println!(
            "run {run}: link.slow {:?}, lemons {:?}",
            slow_nodes.iter().map(|f| &f["node"]).collect::<Vec<_>>(),
            r0.findings("history.lemon")
                .iter()
                .map(|f| (&f["node"], &f["summary"]))
                .collect::<Vec<_>>()
        );
        if slow {
            assert!(
                slow_nodes.iter().any(|f| f["node"] == 3),
                "run {run}: node 3 not named slow: {}",
                r0.describe()
            );
        }
        last = Some(r0);
    }
    let r0 = last.unwrap();
    crate::fail_slow::save(&r0, "lemon after six runs");
    let lemons = r0.findings("history.lemon");
    assert_eq!(lemons.len(), 1, "{}", r0.describe());
    assert_eq!(lemons[0]["node"], 3);
    assert_eq!(lemons[0]["evidence"]["rule"], "link-moves");
    // Its three slow runs (a loaded machine may add a slow pair of its in another run).
    assert!(
        lemons[0]["evidence"]["runs"].as_u64().unwrap_or(0) >= 3,
        "{}",
        lemons[0]
    );
    assert_eq!(lemons[0]["problem"], "node");
    assert!(started.elapsed() < Duration::from_secs(360));
    // Every node kept its six runs; the slow one's store names it too.
    for rank in 0..6 {
        assert_eq!(store_state(&db(rank)), (6, "ok".to_string()), "node {rank}");
    }
    let out = bin()
        .args(["history", "--history"])
        .arg(db(3))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("[link-moves] links"), "{text}");
    assert!(text.contains(c.hostname(3)), "{text}");
    let out = bin()
        .args(["history", "--history"])
        .arg(db(1))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_hostile_reports_folder_is_read_within_its_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 10,000 files that are not reports, a garbage report, a 2 GiB sparse export, a line over
    // 1 MiB, and one good export with a lemon in it.
    for i in 0..10_000 {
        std::fs::write(d.join(format!("x{i:05}.json")), "{\"schema\": 1}").unwrap();
    }
    std::fs::write(d.join("garbage.json"), [0xffu8, 0xfe, 0x00, 0x12]).unwrap();
    let sparse = std::fs::File::create(d.join("huge.jsonl")).unwrap();
    sparse.set_len(2 << 30).unwrap();
    std::fs::write(d.join("long.jsonl"), "x".repeat(2 << 20)).unwrap();
    let mut good = String::new();
    for i in 0..6 {
        let f = if i % 2 == 0 {
            json!([{"id": "gpu.ecc", "status": "fail", "with": 1}])
        } else {
            json!([])
        };
        good.push_str(&rec("g1", i, 1, f));
        good.push('\n');
    }
    std::fs::write(d.join("good.jsonl"), good).unwrap();
    let start = Instant::now();
    let out = bin()
        .args(["history", "--format", "json", "--reports"])
        .arg(d)
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out.stdout);
    assert_eq!(v["runs"], 6);
    assert_eq!(v["lemons"][0]["evidence"]["hostname"], "g1");
    let notes = v["notes"].as_array().unwrap();
    assert!(notes.len() <= 11, "{notes:?}");
    assert!(
        v["notes"].to_string().contains("file(s) skipped in all"),
        "{notes:?}"
    );
}

/// A node checked ten times with the same three standing problems (a held master port, an
/// `NCCL_SOCKET_IFNAME` that matches nothing, its hostname on loopback) prints the first
/// report every time, apart from each finding's standing clause, and is never named a lemon.
#[test]
fn a_node_checked_ten_times_with_standing_problems_prints_the_same_report_and_no_lemon() {
    use crate::netns::Cluster;
    let Some(c) = Cluster::flat("standing", 1, "eth0").build() else {
        return;
    };
    c.name_loopback(0);
    c.hold_port(0, 29500);
    let db = c.host_tmp(0).join("history.db");
    let db = db.to_str().unwrap();
    let check = |format: &str| {
        c.exec(
            0,
            &[
                "env",
                "COLUMNS=80",
                "NCCL_SOCKET_IFNAME=eth9",
                env!("CARGO_BIN_EXE_preflight"),
                "check",
                "--no-gpu",
                "--history",
                db,
                "--format",
                format,
            ],
        )
    };
    // A heading without its standing clause (` · since 12-07 23:10 (4 runs)`), and whether it
    // had one.
    let strip = |l: &str| -> (String, bool) {
        if let Some(i) = l.rfind(" · ") {
            let tail = &l[i + " · ".len()..];
            if (tail.starts_with("standing since ") || tail.starts_with("since "))
                && tail.ends_with(" runs)")
            {
                return (l[..i].to_string(), true);
            }
        }
        (l.to_string(), false)
    };
    let plain = |out: &std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| strip(l).0)
            .collect()
    };
    let first = check("table");
    assert_eq!(first.status.code(), Some(1));
    let first_text = String::from_utf8_lossy(&first.stdout).into_owned();
    for id in ["port.in-use", "env.socket-ifname", "net.hostname-loopback"] {
        assert!(first_text.contains(id), "{id} missing:\n{first_text}");
    }
    for run in 2..=10 {
        let out = check("table");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(!text.contains("history.lemon"), "run {run}:\n{text}");
        assert!(!text.contains("replace"), "run {run}:\n{text}");
        assert_eq!(
            plain(&out),
            plain(&first),
            "run {run} differs from the first beyond the standing clause:\n{text}"
        );
        assert_eq!(text.lines().count(), first_text.lines().count());
        assert_eq!(
            text.lines().filter(|l| strip(l).1).count(),
            3,
            "run {run}: each of the three says it stands:\n{text}"
        );
    }
    let report = report_of(&check("json"));
    let findings = report["findings"].as_array().unwrap();
    assert!(findings.iter().all(|f| f["id"] != "history.lemon"));
    for id in ["port.in-use", "env.socket-ifname", "net.hostname-loopback"] {
        let f = findings.iter().find(|f| f["id"] == id).unwrap();
        assert_eq!(f["evidence"]["standing_runs"], 11, "{f}");
        assert!(
            f["summary"].as_str().unwrap().contains("; standing since "),
            "{f}"
        );
    }
    let o = c.exec(
        0,
        &[env!("CARGO_BIN_EXE_preflight"), "history", "--history", db],
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "no lemon: {text}");
    assert!(text.starts_with("11 run(s) of 1 node(s)"), "{text}");
    assert_eq!(text.matches("  standing").count(), 3, "{text}");
}

/// Six runs of a 4-node cluster whose every node wrote the whole report (as the hooks do):
/// 24 files, 96 records, and `preflight history --reports` counts 6 runs, 24 node-runs.
#[test]
fn reports_of_one_run_from_every_node_count_as_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut report: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("reports/cluster-3-healthy.json")).unwrap(),
    )
    .unwrap();
    report["findings"] = json!([]);
    for run in 0..6 {
        report["run_id"] = json!(format!("run-{run}"));
        for node in 0..4 {
            let path = dir.path().join(format!("node{node}-run{run}.json"));
            std::fs::write(&path, report.to_string()).unwrap();
        }
    }
    let out = bin()
        .args(["history", "--format", "json", "--reports"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out.stdout);
    let nodes = report["nodes"].as_array().unwrap().len();
    assert_eq!(v["reports"], 24, "{v}");
    assert_eq!(v["records"], 24 * nodes, "{v}");
    assert_eq!(v["runs"], 6, "{v}");
    assert_eq!(v["node_runs"], 6 * nodes, "{v}");
    assert!(
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["runs"] == 6),
        "{v}"
    );
    let table = bin()
        .args(["history", "--reports"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        text.starts_with(&format!(
            "24 report(s) read: 6 run(s) of {nodes} node(s), {} node-run(s) from {} record(s)",
            6 * nodes,
            24 * nodes
        )),
        "{text}"
    );
}
