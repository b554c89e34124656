//! The binary on this machine and on fixtures: snapshots, exit codes, round trips, hostile input.

use serde_json::Value;
use std::process::Stdio;

use crate::common::{bin, fixture, json_of};

fn findings<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == id)
        .collect()
}

/// The JSON report with the tool version blanked, for stable snapshots.
fn stable_json(out: &[u8]) -> String {
    let mut v = json_of(out);
    v["tool"]["version"] = Value::String("[version]".into());
    serde_json::to_string_pretty(&v).unwrap()
}

const SNAPSHOT_NODES: [&str; 3] = ["ib-node", "docker-bond-host", "k8s-pod"];

#[test]
fn snapshots_of_json_reports_from_saved_facts() {
    for node in SNAPSHOT_NODES {
        let out = bin()
            .args(["check", "--format", "json", "--facts"])
            .arg(fixture(&format!("facts/{node}.json")))
            .output()
            .unwrap();
        insta::assert_snapshot!(format!("json_{node}"), stable_json(&out.stdout));
    }
}

#[test]
fn report_contract_fields_are_present() {
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(fixture("facts/ib-node.json"))
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    assert_eq!(r["schema"], "preflight.report.v1");
    assert_eq!(r["mode"], "node");
    assert_eq!(r["nodes"][0]["rank"], 0);
    for key in [
        "tool",
        "status",
        "nodes",
        "findings",
        "links",
        "collectives",
        "recommendation",
    ] {
        assert!(r.get(key).is_some(), "missing {key}");
    }
    let rec = &r["recommendation"];
    assert_eq!(rec["env"]["NCCL_IB_DISABLE"], "0");
    assert_eq!(rec["env"]["NCCL_IB_HCA"], "mlx5_0:1");
    assert_eq!(rec["env"]["NCCL_SOCKET_IFNAME"], "ib0");
    assert_eq!(rec["master_addr"], "192.168.100.11");
    // NCCL_SOCKET_IFNAME=eth matches nothing on that node; NCCL_IB_DISABLE=1 leaves mlx5_0 unused.
    assert!(
        findings(&r, "env.socket-ifname")
            .iter()
            .any(|f| f["status"] == "fail")
    );
    assert!(
        findings(&r, "env.ib-disable")
            .iter()
            .any(|f| f["status"] == "warn")
    );
    assert_eq!(r["status"], "fail");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn docker_bond_host_gets_exact_bond_name() {
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(fixture("facts/docker-bond-host.json"))
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    assert_eq!(r["recommendation"]["env"]["NCCL_SOCKET_IFNAME"], "=bond0");
    assert_eq!(r["recommendation"]["env"]["GLOO_SOCKET_IFNAME"], "bond0");
    // Warnings only: exit 0, but --strict makes it 1.
    assert_eq!(out.status.code(), Some(0));
    bin()
        .args(["check", "--strict", "--facts"])
        .arg(fixture("facts/docker-bond-host.json"))
        .assert()
        .code(1);
}

#[test]
fn every_fixture_tree_checks_without_error() {
    for node in [
        "ib-node",
        "roce-node",
        "docker-bond-host",
        "k8s-pod",
        "plain-vm",
    ] {
        let out = bin()
            .args([
                "check",
                "--no-gpu",
                "--format",
                "json",
                "--master-port",
                "29500",
                "--root",
            ])
            .arg(fixture(node))
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "{node}: {:?}",
            out.status
        );
        let r = json_of(&out.stdout);
        let facts = &r["nodes"][0]["facts"];
        let saved: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("facts/{node}.json"))).unwrap(),
        )
        .unwrap();
        for section in ["hostname", "net", "ib", "sys"] {
            assert_eq!(
                facts[section], saved[section],
                "{node}: {section} differs from tests/fixtures/facts/{node}.json"
            );
        }
        assert!(
            r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["status"] != "error"),
            "{node} has an error finding"
        );
    }
}

#[test]
fn facts_round_trip_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("facts.json");
    bin()
        .args(["facts", "--no-gpu", "-o"])
        .arg(&path)
        .assert()
        .success();
    let mut written: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // The document names its schema; the facts in a report are the rest.
    let schema = written.as_object_mut().unwrap().remove("schema");
    assert_eq!(schema, Some("preflight.facts.v1".into()));
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(&path)
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    assert_eq!(r["nodes"][0]["facts"], written);
}

#[test]
fn bad_input_exits_2_with_a_message() {
    bin()
        .args(["check", "--master-port", "banana"])
        .assert()
        .code(2);
    bin().args(["check", "--format", "xml"]).assert().code(2);
    bin().args(["frobnicate"]).assert().code(2);
    let out = bin()
        .args(["check", "--facts", "/nonexistent/facts.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read facts file"));
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("g.json");
    std::fs::write(&garbage, b"\x00\xffnot json").unwrap();
    let out = bin()
        .args(["check", "--facts"])
        .arg(&garbage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a preflight facts file"));
}

#[test]
fn closed_pipe_is_not_a_panic() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["check", "--no-gpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe as `| head -1` does.
    {
        use std::io::BufRead;
        let mut line = String::new();
        let mut r = std::io::BufReader::new(child.stdout.take().unwrap());
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("preflight"));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{:?}",
        out.status
    );
}

#[test]
fn garbage_in_every_variable_gives_findings_not_a_crash() {
    use std::os::unix::ffi::OsStrExt;
    let garbage = std::ffi::OsStr::from_bytes(b"\xff\xfe\x01 ,,=^");
    let vars = [
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "NCCL_IB_DISABLE",
        "CUDA_VISIBLE_DEVICES",
        "MASTER_ADDR",
        "MASTER_PORT",
        "NCCL_HOSTID",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PATH",
        "HOME",
    ];
    let mut cmd = bin();
    for v in vars {
        cmd.env(v, garbage);
    }
    let out = cmd
        .args(["check", "--no-gpu", "--format", "json"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let r = json_of(&out.stdout);
    for id in [
        "env.socket-ifname",
        "gpu.visible-devices",
        "env.ib-disable",
        "env.master",
    ] {
        assert!(
            findings(&r, id)
                .iter()
                .any(|f| f["status"] == "fail" || f["status"] == "warn"),
            "{id} did not flag garbage: {:?}",
            findings(&r, id)
        );
    }
}

#[test]
fn held_master_port_names_the_holder_pid() {
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipped: python3 not installed");
        return;
    }
    // A child process holds a free port, as a crashed torchrun would.
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import socket,sys,time\ns=socket.socket(socket.AF_INET6)\ns.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\ns.bind(('::',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let port = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim().to_string()
    };
    let out = bin()
        .args([
            "check",
            "--no-gpu",
            "--format",
            "json",
            "--master-port",
            &port,
        ])
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let r = json_of(&out.stdout);
    let f = findings(&r, "port.in-use");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["status"], "fail");
    let pids: Vec<u64> = f[0]["evidence"]["holders"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["pid"].as_u64())
        .collect();
    assert!(
        pids.contains(&(child.id() as u64)),
        "holders {pids:?} lack child {}",
        child.id()
    );
    let cmds = serde_json::to_string(&f[0]["fix"]["commands"]).unwrap();
    assert!(cmds.contains(&format!("kill {}", child.id())), "{cmds}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn each_subcommands_help_shows_only_what_applies_to_it() {
    let help = |cmd: &str| {
        let out = bin().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    for cmd in ["facts", "launch"] {
        let text = help(cmd);
        for absent in [
            "--strict",
            "--facts file",
            "--format junit",
            "-v also shows",
        ] {
            assert!(
                !text.contains(absent),
                "`{cmd} --help` mentions {absent}:\n{text}"
            );
        }
        assert!(text.contains("Exit codes:"), "{text}");
    }
    for cmd in ["check", "cluster"] {
        let text = help(cmd);
        assert!(
            text.contains("--verbose") && text.contains("--strict"),
            "{text}"
        );
    }
}
