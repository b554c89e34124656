//! Issue 21's per-node outputs through the real CLI: node-problem-detector's plugin contract,
//! the TaskProlog lines sourced by bash, the Prometheus textfile checked by promtool and
//! written atomically under a polling reader, `explain`'s drain reason, and `--dry-run`.

use crate::common::{bin, fixture, json_of};
use preflight_checks::core::FindingId;
use preflight_checks::model::Report;
use std::path::Path;
use std::time::{Duration, Instant};

/// plain-vm's facts with one change made by `edit`, written into `dir`.
fn facts_with(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("facts/plain-vm.json")).unwrap())
            .unwrap();
    edit(&mut v);
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p.display().to_string()
}

#[test]
fn npd_plugin_prints_one_short_line_and_exits_by_the_plugin_contract() {
    let dir = tempfile::tempdir().unwrap();
    let pass = facts_with(dir.path(), "pass.json", |v| {
        v["sys"]["hostname_addrs"] = serde_json::json!(["10.0.2.15"]);
    });
    let error = facts_with(dir.path(), "error.json", |v| {
        v["sys"]["hostname_addrs"] = serde_json::json!(["10.0.2.15"]);
        v["sys"]["shm_bytes"] = serde_json::Value::Null;
        v["sys"]["shm_error"] = "statvfs /dev/shm: Permission denied".into();
    });
    let warn = fixture("facts/plain-vm.json").display().to_string();
    let fail = fixture("facts/ib-node.json").display().to_string();
    let cases: [(&str, &[&str], i32, &str); 5] = [
        ("pass", &["--facts", &pass], 0, "OK: preflight passed"),
        (
            "warn",
            &["--facts", &warn],
            0,
            "OK: 1 warn: net.hostname-loopback",
        ),
        (
            "fail",
            &["--facts", &fail],
            1,
            "fail env.socket-ifname: NCCL_SOCKET_IFNAME=\"eth\"",
        ),
        (
            "NVML missing",
            &["--facts", &warn, "--expect-gpus", "8"],
            1,
            "fail gpu.nvml: the job expects 8 GPU(s)",
        ),
        (
            "error",
            &["--facts", &error],
            2,
            "error sys.shm: cannot tell the size of /dev/shm",
        ),
    ];
    for (name, args, code, start) in cases {
        let started = Instant::now();
        let out = bin()
            .arg("check")
            .args(args)
            .args(["--format", "npd"])
            .output()
            .unwrap();
        let took = started.elapsed();
        let stdout = String::from_utf8(out.stdout).unwrap();
        println!("{name}: exit {:?}: {stdout}", out.status.code());
        assert_eq!(out.status.code(), Some(code), "{name}: {stdout}");
        assert_eq!(stdout.lines().count(), 1, "{name}: {stdout:?}");
        let line = stdout.trim_end_matches('\n');
        assert!(line.len() <= 80 && line.is_ascii(), "{name}: {line:?}");
        assert!(line.starts_with(start), "{name}: {line:?}");
        assert!(took < Duration::from_secs(4), "{name}: took {took:?}");
    }
    // A real probe of this machine stays well under NPD's 5 s timeout too.
    let started = Instant::now();
    let out = bin()
        .args(["check", "--no-gpu", "--format", "npd"])
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0..=2)));
    assert!(String::from_utf8_lossy(&out.stdout).trim_end().len() <= 80);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn task_prolog_lines_sourced_by_bash_set_the_recommended_environment() {
    for (facts, code) in [("docker-bond-host.json", 0), ("ib-node.json", 0)] {
        let f = fixture(&format!("facts/{facts}"));
        let json = bin()
            .args(["check", "--format", "json", "--facts"])
            .arg(&f)
            .output()
            .unwrap();
        let want = json_of(&json.stdout)["recommendation"]["env"].clone();
        let out = bin()
            .args(["check", "--format", "task-prolog", "--facts"])
            .arg(&f)
            .output()
            .unwrap();
        // A TaskProlog never fails the job's tasks on a failing node (only for a master port
        // another running job holds).
        assert_eq!(out.status.code(), Some(code), "{facts}");
        let all = String::from_utf8(out.stdout).unwrap();
        // slurmstepd reads `export` and `print` lines; the exports are plain shell too.
        assert!(
            all.lines()
                .all(|l| l.starts_with("export ") || l.starts_with("print preflight: ")),
            "{all}"
        );
        let lines: String = all
            .lines()
            .filter(|l| l.starts_with("export "))
            .map(|l| format!("{l}\n"))
            .collect();
        let script = format!("{lines}\nenv\n");
        let env = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &script])
            .env_clear()
            .output()
            .unwrap();
        assert!(env.status.success());
        let env = String::from_utf8(env.stdout).unwrap();
        for k in [
            "NCCL_SOCKET_IFNAME",
            "GLOO_SOCKET_IFNAME",
            "NCCL_IB_DISABLE",
        ] {
            let v = want[k]
                .as_str()
                .unwrap_or_else(|| panic!("{facts}: no {k} advised"));
            assert!(
                env.lines().any(|l| l == format!("{k}={v}")),
                "{facts}: {k}={v} not in\n{env}"
            );
        }
    }
}

/// The Prometheus families of a report, parsed by promtool (`check metrics` lints too).
fn promtool(text: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package) is installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn prom_file_passes_promtool_and_is_replaced_atomically_under_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("preflight.prom");
    let run = || {
        bin()
            .args(["check", "--format", "json", "--prom-file"])
            .arg(&prom)
            .arg("--facts")
            .arg(fixture("facts/ib-node.json"))
            .output()
            .unwrap()
    };
    assert_eq!(run().status.code(), Some(1));
    let first = std::fs::read_to_string(&prom).unwrap();
    let o = promtool(&first);
    assert!(
        o.status.success(),
        "promtool: {}{}\n{first}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for want in [
        "# TYPE preflight_last_run_timestamp_seconds gauge",
        "preflight_last_run_duration_seconds ",
        "preflight_status{mode=\"node\",status=\"fail\"} 1",
        "preflight_finding_status{id=\"env.socket-ifname\",node=\"gpu-ib-01\"} 2",
    ] {
        assert!(first.contains(want), "{want} missing:\n{first}");
    }
    // A reader polls the file while it is rewritten: it sees a whole file every time.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, prom) = (stop.clone(), prom.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = std::fs::read_to_string(&prom).expect("the file is always there");
                assert!(
                    t.ends_with('\n') && t.contains("preflight_nodes 1\n"),
                    "a torn read:\n{t}"
                );
                reads += 1;
            }
            reads
        })
    };
    for _ in 0..15 {
        run();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().expect("reader saw only whole files");
    assert!(reads > 15, "only {reads} reads");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("preflight.prom")],
        "temp files left"
    );
}

#[test]
fn prom_text_of_cluster_reports_passes_promtool_with_bounded_labels() {
    for name in [
        "cluster-3-healthy.json",
        "cluster-8-nodes.json",
        "cluster-3-filtered-slow.json",
    ] {
        let r: Report = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("reports/{name}"))).unwrap(),
        )
        .unwrap();
        let t = preflight::render::prom::render(
            &r,
            preflight::render::prom::RunTime {
                started_unix_s: 1.7e9,
                duration_s: 4.5,
            },
        );
        let o = promtool(&t);
        assert!(
            o.status.success(),
            "{name}: {}{}\n{t}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        // Series grow with nodes and ids, never with links.
        let samples = t.lines().filter(|l| !l.starts_with('#')).count();
        let ids: std::collections::BTreeSet<&str> =
            r.findings.iter().map(|f| f.id.as_str()).collect();
        assert!(
            samples <= 16 + ids.len() * (r.nodes.len() + 1) + 2 * r.nodes.len(),
            "{name}: {samples}\n{t}"
        );
        if !r.collectives.is_empty() {
            assert!(t.contains("preflight_allreduce_busbw_bytes_per_second{transport=\"tcp\",config=\"advice\"}"), "{t}");
            assert!(
                t.contains("preflight_node_link_throughput_median_bytes_per_second{node="),
                "{t}"
            );
        }
        if name == "cluster-8-nodes.json" {
            println!("{t}");
        }
    }
}

#[test]
fn explain_gives_the_drain_reason_and_dry_run_prints_the_scontrol_line() {
    let out = bin().args(["explain", "port.in-use"]).output().unwrap();
    let t = unstamped(&String::from_utf8(out.stdout).unwrap());
    assert!(t.contains("Slurm drain reason"), "{t}");
    let words = t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "Reason=\"preflight: [node_problem] restart-job: port.in-use: <the finding's summary"
        ),
        "{t}"
    );
    // No Slurm on PATH here: the dry run still shows the line it would run.
    let out = bin()
        .args([
            "check",
            "--slurm-health",
            "--drain",
            "--dry-run",
            "--slurm-node",
            "gpu07",
            "--facts",
        ])
        .arg(fixture("facts/ib-node.json"))
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let t = unstamped(&String::from_utf8(out.stdout).unwrap());
    println!("{t}");
    assert_eq!(out.status.code(), Some(1), "{t}");
    // ib-node fails for a user problem only (NCCL_SOCKET_IFNAME naming no interface): the
    // health check fails but does not drain; the prolog passes.
    assert!(
        t.contains("fail env.socket-ifname [user_problem] fix-config: "),
        "{t}"
    );
    assert!(t.contains("not drained: only user problems"), "{t}");
    assert!(
        t.contains("left alone: gpu07 has user problems only (idle)"),
        "{t}"
    );
    assert!(!t.contains("State=DRAIN"), "{t}");
    let out = bin()
        .args([
            "check",
            "--slurm-prolog",
            "--drain",
            "--dry-run",
            "--slurm-node",
            "gpu07",
            "--facts",
        ])
        .arg(fixture("facts/ib-node.json"))
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let t = unstamped(&String::from_utf8(out.stdout).unwrap());
    // A user problem passes the prolog (a failing prolog drains the node): nothing to drain.
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(!t.contains("State=DRAIN"), "{t}");
    assert!(
        t.contains("not drained: only user problems") && t.contains("the prolog passes"),
        "{t}"
    );
    let out = bin().args(["check", "--drain"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --slurm-health"));
}

/// The YAML documents of a manifest, through python3's yaml (None: no yaml module here).
fn yaml_docs(path: &Path) -> Option<Vec<serde_json::Value>> {
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import json,sys,yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(path)
        .output()
        .expect("python3");
    if String::from_utf8_lossy(&o.stderr).contains("No module named") {
        eprintln!("skipped: python3 has no yaml module to parse {path:?}");
        return None;
    }
    assert!(
        o.status.success(),
        "{path:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn kubernetes_examples_gate_training_on_preflight_with_the_secrets_token() {
    use preflight::placement::ENV_VARS;
    let dir = crate::common::repo("examples/kubernetes");
    for (file, kind) in [("pytorchjob.yaml", "PyTorchJob"), ("jobset.yaml", "JobSet")] {
        let Some(docs) = yaml_docs(&dir.join(file)) else {
            return;
        };
        let secret = docs
            .iter()
            .find(|d| d["kind"] == "Secret")
            .expect("a Secret");
        let job = docs.iter().find(|d| d["kind"] == kind).expect(kind);
        let text = job.to_string();
        // Every container's command runs the gang preflight before torchrun.
        let containers: Vec<&serde_json::Value> = if kind == "PyTorchJob" {
            ["Master", "Worker"]
                .iter()
                .map(|r| {
                    &job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"]["containers"][0]
                })
                .collect()
        } else {
            vec![
                &job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
                    [0],
            ]
        };
        for c in containers {
            let cmd = c["args"][0].as_str().unwrap_or_default();
            assert!(
                cmd.starts_with("preflight cluster") && cmd.contains("&& exec torchrun"),
                "{file}: {cmd}"
            );
            let pre = cmd.split("&&").next().unwrap_or_default();
            assert!(
                !["--nnodes", "--node-rank", "--master-addr", "--hosts"]
                    .iter()
                    .any(|f| pre.contains(f)),
                "{file}: preflight takes no placement flags: {pre}"
            );
            for e in c["env"].as_array().unwrap() {
                let name = e["name"].as_str().unwrap();
                assert!(
                    ENV_VARS.contains(&name) || name == "PREFLIGHT_TOKEN",
                    "{file}: {name} is not read by preflight"
                );
                if name == "PREFLIGHT_TOKEN" {
                    assert_eq!(
                        e["valueFrom"]["secretKeyRef"]["name"], secret["metadata"]["name"],
                        "{file}"
                    );
                    assert!(
                        secret["stringData"]
                            [e["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap()]
                        .is_string()
                    );
                }
            }
        }
        assert!(text.contains("/dev/shm"), "{file}");
    }
    // node-problem-detector's plugin config: the NPD mode, its 80 characters and 5 s.
    let npd: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("npd-preflight-config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(npd["plugin"], "custom");
    assert_eq!(npd["pluginConfig"]["max_output_length"], 80);
    let cond = npd["conditions"][0]["type"].as_str().unwrap();
    let rules = npd["rules"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|r| r["type"] == "permanent" && r["condition"] == cond)
    );
    for r in rules {
        let args: Vec<&str> = r["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "check");
        assert!(
            args.windows(2).any(|w| w == ["--format", "npd"]),
            "{args:?}"
        );
        assert_eq!(r["timeout"], "5s");
    }
}

/// What a person reads from each hook, pinned: the metrics of a saved cluster report, the
/// TaskProlog lines, and the health check's dry run on a failing node.
#[test]
fn snapshots_of_the_hook_outputs() {
    let r: Report = serde_json::from_str(
        &std::fs::read_to_string(fixture("reports/cluster-3-filtered-slow.json")).unwrap(),
    )
    .unwrap();
    let t = preflight::render::prom::render(
        &r,
        preflight::render::prom::RunTime {
            started_unix_s: 1_764_000_000.0,
            duration_s: 12.5,
        },
    );
    insta::assert_snapshot!("prom_cluster-3-filtered-slow", t);
    let out = bin()
        .args(["check", "--format", "task-prolog", "--facts"])
        .arg(fixture("facts/docker-bond-host.json"))
        .output()
        .unwrap();
    insta::assert_snapshot!(
        "task-prolog_docker-bond-host",
        String::from_utf8(out.stdout).unwrap()
    );
    let out = bin()
        .args([
            "check",
            "--slurm-prolog",
            "--drain",
            "--dry-run",
            "--slurm-node",
            "gpu-ib-01",
            "--facts",
        ])
        .arg(fixture("facts/ib-node.json"))
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    // The line about sinfo depends on this machine's Slurm (absent, or without a config).
    let text: String = unstamped(&String::from_utf8(out.stdout).unwrap())
        .lines()
        .filter(|l| !l.starts_with("node state unknown"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("slurm-prolog-dry-run_ib-node", text);
}

/// At 1024 nodes the metrics grow with nodes and ids, not with links, and promtool takes them.
#[test]
fn prom_at_1024_nodes_stays_bounded() {
    use preflight_checks::model::{Finding, LinkOutcome, LinkResult, Mode, NodeFacts, Status};
    let n = 1024u32;
    let ids = [
        "net.no-interface",
        "port.in-use",
        "gpu.count",
        "link.unreachable",
        "link.slow",
    ];
    let mut b = preflight::report::ReportBuilder::new(Mode::Cluster);
    let mut findings = Vec::new();
    for r in 0..n {
        b = b.node(
            r,
            NodeFacts {
                hostname: format!("gpu{r:04}"),
                ..Default::default()
            },
        );
        for (i, id) in ids.iter().enumerate() {
            let s = if (r as usize + i) % 97 == 0 {
                Status::Fail
            } else {
                Status::Pass
            };
            findings.push(Finding::new(FindingId::new(id), s, "x", "y").on_node(Some(r)));
        }
    }
    let links: Vec<LinkResult> = (0..n)
        .flat_map(|r| {
            [1, 2].map(|d| LinkResult {
                from: r,
                to: (r + d) % n,
                result: LinkOutcome::Ok,
                throughput_gbit_s: Some(10.0 + (r % 7) as f32),
                ..Default::default()
            })
        })
        .collect();
    let r = b.findings(findings).links(links).build();
    let t = preflight::render::prom::render(
        &r,
        preflight::render::prom::RunTime {
            started_unix_s: 1.7e9,
            duration_s: 30.0,
        },
    );
    let samples = t.lines().filter(|l| !l.starts_with('#')).count();
    let bound = ids.len() * n as usize + 2 * n as usize + 16;
    assert!(
        samples <= bound,
        "{samples} series for 1024 nodes (bound {bound})"
    );
    assert!(
        !t.contains("from=") && !t.contains("to="),
        "a label per link"
    );
    let o = promtool(&t);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

/// A hook's output without the time and job id each line starts with
/// (`2026-12-07T23:41:07Z job 42 `), for comparing it.
fn unstamped(text: &str) -> String {
    text.lines()
        .map(|l| {
            let b = l.as_bytes();
            let stamped = b.len() > 21 && b[10] == b'T' && b[19] == b'Z' && b[20] == b' ';
            let rest = if stamped { &l[21..] } else { l };
            let rest = match rest.strip_prefix("job ") {
                Some(r) => r.split_once(' ').map_or(r, |(_, r)| r),
                None => rest,
            };
            format!("{rest}\n")
        })
        .collect()
}
