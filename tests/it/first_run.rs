//! What a newcomer runs on one machine and reads (issue 55): each command as typed, and the
//! words that must be true of this node.

use crate::common::{bin, json_of};
use serde_json::Value;

fn finding<'a>(report: &'a Value, id: &str, subject: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id && f["subject"] == subject)
        .unwrap_or_else(|| panic!("no {id} on {subject}: {report:#}"))
}

fn check(env: &[(&str, &str)], args: &[&str]) -> Value {
    let mut c = bin();
    c.env_remove("NCCL_SOCKET_IFNAME")
        .env_remove("GLOO_SOCKET_IFNAME")
        .args(["check", "--no-gpu", "--format", "json"])
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    json_of(&c.output().unwrap().stdout)
}

/// `NCCL_SOCKET_IFNAME=lo preflight check`: lo is up with 127.0.0.1; what is wrong is that it
/// is loopback, not that it is down.
#[test]
fn socket_ifname_lo_is_named_loopback_not_down() {
    let report = check(&[("NCCL_SOCKET_IFNAME", "lo")], &[]);
    let f = finding(&report, "env.socket-ifname", "NCCL_SOCKET_IFNAME");
    assert_eq!(f["status"], "fail");
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary
            .starts_with("NCCL_SOCKET_IFNAME=\"lo\" matches only lo, which is loopback (127.0.0.1"),
        "{summary}"
    );
    assert!(
        summary.contains("the other nodes cannot reach this node there"),
        "{summary}"
    );
    assert!(!summary.contains("down"), "{summary}");
}

/// `GLOO_SOCKET_IFNAME=eth9 preflight check` predicts gloo's own words, and `explain --log`
/// reads them back with their node cause.
#[test]
fn a_missing_gloo_interface_is_predicted_and_read_back_in_gloos_words() {
    let report = check(&[("GLOO_SOCKET_IFNAME", "eth9")], &[]);
    let f = finding(&report, "env.socket-ifname", "GLOO_SOCKET_IFNAME");
    assert_eq!(f["status"], "fail");
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.ends_with("the job will fail with gloo's \"Unable to find address for: eth9\""),
        "{summary}"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("job.log");
    std::fs::write(
        &log,
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9\n",
    )
    .unwrap();
    let out = bin()
        .args(["explain", "--format", "json", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    let v = json_of(&out.stdout);
    let text = v.to_string();
    assert!(text.contains("\"gloo.no-interface\""), "{v:#}");
    assert!(text.contains("env.socket-ifname"), "{v:#}");
    assert!(text.contains("\"interface\":\"eth9\""), "{v:#}");
}

/// Every finding of every report a command builds carries its `action` and `problem`, the ones
/// added after the report was put together (`check --thorough`'s collective findings, the
/// launch line's, a one-node cluster's) included.
#[test]
fn every_finding_of_every_command_carries_action_and_problem() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let fixture = |f: &str| crate::common::fixture(&format!("facts/{f}"));
    let mut runs: Vec<(String, Vec<String>)> = vec![
        (
            "check --thorough".into(),
            vec!["check".into(), "--thorough".into()],
        ),
        (
            "check --no-gpu".into(),
            vec!["check".into(), "--no-gpu".into()],
        ),
        (
            "torchrun --no-run".into(),
            vec![
                "torchrun".into(),
                "--no-run".into(),
                "torchrun --standalone --nproc-per=1 ok.py".into(),
            ],
        ),
        (
            "cluster --nnodes=1".into(),
            [
                "cluster",
                "--nnodes=1",
                "--quick",
                "--no-gpu",
                "--timeout=20",
                "--master-addr=127.0.0.1",
                "--master-port",
                &port,
            ]
            .map(String::from)
            .to_vec(),
        ),
    ];
    for f in ["ib-node.json", "three-problems.json", "gpu-hgx-faults.json"] {
        runs.push((
            format!("check --facts {f}"),
            vec![
                "check".into(),
                "--facts".into(),
                fixture(f).display().to_string(),
            ],
        ));
    }
    for (what, args) in runs {
        let out = bin()
            .args(&args)
            .args(["--format", "json"])
            .output()
            .unwrap();
        let report = json_of(&out.stdout);
        let findings = report["findings"].as_array().unwrap();
        assert!(!findings.is_empty(), "{what}");
        for f in findings {
            assert!(
                f["action"].is_string() && f["problem"].is_string(),
                "{what}: {} has no action or problem: {f:#}",
                f["id"]
            );
        }
        if what == "check --thorough" {
            assert!(
                findings.iter().any(|f| f["id"] == "collective.busbw"),
                "{what}: no collective finding"
            );
        }
    }
}

/// `preflight check --nnodes 4`: the launch line says 4 nodes, and asks to set nothing.
#[test]
fn check_nnodes_is_used_in_the_launch_line() {
    let report = check(&[], &["--nnodes", "4"]);
    let command = report["recommendation"]["launch"][0]["command"]
        .as_str()
        .unwrap();
    assert!(command.contains(" --nnodes=4 "), "{command}");
    let out = bin()
        .args(["check", "--no-gpu", "--nnodes", "4"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("NNODES"), "{text}");
    assert!(text.contains("torchrun --nnodes=4 "), "{text}");
}

/// The printed hosts fix, run on a copy of a cloud VM's /etc/hosts (`127.0.0.1 localhost vm`)
/// and of a line that holds only the name: neither leaves a bare `127.0.0.1`, and the name no
/// longer resolves to loopback there. `explain net.hostname-loopback` names this host's line.
#[test]
fn the_hosts_fix_leaves_localhost_and_explain_names_this_hosts_line() {
    let root = crate::common::fixture("plain-vm");
    let out = bin()
        .env("PREFLIGHT_ROOT", &root)
        .args(["check", "--no-gpu", "--format", "json"])
        .output()
        .unwrap();
    let report = json_of(&out.stdout);
    let f = finding(&report, "net.hostname-loopback", "vm");
    let sed = f["fix"]["commands"][0].as_str().unwrap().to_string();
    assert!(sed.starts_with("sed -i -E "), "{sed}");
    let dir = tempfile::tempdir().unwrap();
    for (given, want) in [
        (
            "127.0.0.1 localhost vm\n::1 ip6-localhost\n",
            "127.0.0.1 localhost\n::1 ip6-localhost\n",
        ),
        ("127.0.0.1 vm\n", "127.0.0.1 localhost\n"),
        (
            "127.0.0.1\tvm  # the VM\n",
            "127.0.0.1 localhost # the VM\n",
        ),
    ] {
        let hosts = dir.path().join("hosts");
        std::fs::write(&hosts, given).unwrap();
        let cmd = sed.replace("/etc/hosts", &hosts.display().to_string());
        let ran = std::process::Command::new("sh")
            .args(["-c", &cmd])
            .status()
            .unwrap();
        assert!(ran.success(), "{cmd}");
        assert_eq!(std::fs::read_to_string(&hosts).unwrap(), want, "{given:?}");
    }
    let explained = bin()
        .env("PREFLIGHT_ROOT", crate::common::fixture("plain-vm"))
        .args(["explain", "net.hostname-loopback"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explained.stdout);
    let here = text
        .split_once("On this host")
        .map(|x| x.1)
        .unwrap_or_default();
    assert!(
        here.contains("hostname vm resolves to loopback 127.0.0.1"),
        "{text}"
    );
    assert!(here.contains(&sed), "{text}");
    assert!(!here.contains("127.0.1.1"), "{text}");
}

/// `/dev/shm` sizes read in GiB as the rest of the report does (`23.5 GiB (24683652 KiB)`),
/// and the HTML report of one node names it once.
#[test]
fn shm_reads_in_gib_and_the_html_names_a_node_once() {
    let report = check(&[], &[]);
    let shm = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sys.shm")
        .unwrap();
    let summary = shm["summary"].as_str().unwrap();
    assert!(
        !summary.contains(" KiB,") && !summary.ends_with(" KiB"),
        "{summary}"
    );
    let html = bin()
        .args(["check", "--no-gpu", "--format", "html"])
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&html.stdout);
    let host = report["nodes"][0]["hostname"].as_str().unwrap();
    assert!(page.contains(&format!("<p>node {host}</p>")), "{page}");
}

/// `preflight cluster --timeout 2` with no second node: rank 0 says up front how long it
/// waits for the nodes and why it may be longer than --timeout, and keeps to what it said
/// (the join window, then the measurements, each bounded by --timeout).
#[test]
fn a_cluster_missing_a_node_says_what_bounds_its_wait_and_keeps_to_it() {
    for (gemm, window) in [(true, 4u64), (false, 2)] {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let mut c = bin();
        c.args([
            "cluster",
            "--nnodes=2",
            "--node-rank=0",
            "--master-addr=127.0.0.1",
            "--master-port",
            &port,
            "--timeout=2",
            "--format=json",
        ]);
        if !gemm {
            c.arg("--no-gemm");
        }
        let started = std::time::Instant::now();
        let out = c.output().unwrap();
        let took = started.elapsed().as_secs_f64();
        let err = String::from_utf8_lossy(&out.stderr);
        let said = if gemm {
            "waiting up to 4 s for 2 nodes to join: --timeout 2 s, and 2 s more while a node may still be testing its GPUs (--no-gemm leaves that out)".to_string()
        } else {
            "waiting up to 2 s (--timeout) for 2 nodes to join".to_string()
        };
        assert!(err.contains(&said), "{err}");
        assert!(took >= window as f64, "{took} s < the {window} s window");
        // The window, then each phase within --timeout: never the old 15 minutes of torchrun.
        assert!(took < window as f64 + 15.0, "{took} s");
        let report = json_of(&out.stdout);
        assert_eq!(report["status"], "fail");
    }
}

/// `preflight explain --coverage` points to a list a binary's user has: `--format json`
/// prints every format string with its mapping; no path of a checkout that does not exist.
#[test]
fn explain_coverage_points_to_a_list_the_user_has() {
    let out = bin().args(["explain", "--coverage"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    assert!(!text.contains("explain_log/"), "{text}");
    assert!(
        text.contains("`preflight explain --coverage --format json`"),
        "{text}"
    );
    assert!(
        text.contains("checks/src/explain/log/sources/inventory.tsv"),
        "{text}"
    );
    assert!(crate::common::repo("checks/src/explain/log/sources/inventory.tsv").exists());
    let json = bin()
        .args(["explain", "--coverage", "--format", "json"])
        .output()
        .unwrap();
    let v = json_of(&json.stdout);
    let formats = v["formats"].as_array().unwrap();
    let counted: u64 = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["formats"].as_u64().unwrap())
        .sum();
    assert_eq!(formats.len() as u64, counted);
    assert!(
        formats
            .iter()
            .any(|f| f["mapping"] == "sig:gloo.no-interface")
    );
}
