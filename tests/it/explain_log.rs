//! `preflight explain --log`: the real binary on the log fixtures (one per signature, under
//! `tests/fixtures/explain-logs`), snapshots of its answer, standard input, JSON, exit codes.

use crate::common::{bin, fixture, json_of};

fn explain(name: &str, extra: &[&str]) -> std::process::Output {
    let path = fixture("explain-logs").join(name);
    bin()
        .env("COLUMNS", "80")
        .args(["explain", "--log"])
        .arg(path)
        .args(extra)
        .output()
        .unwrap()
}

/// The answer with the fixture's path made relative, for stable snapshots.
fn stable(out: &[u8]) -> String {
    let root = fixture("explain-logs").display().to_string();
    String::from_utf8_lossy(out).replace(&root, "tests/fixtures/explain-logs")
}

#[test]
fn explain_log_snapshots_of_the_answer() {
    for name in [
        "nccl-no-socket-interface.log",
        "c10d-connect-timeout.log",
        "gloo-connect-full-mesh.log",
        "nccl-ib-completion-error.log",
        "no-known-error.log",
    ] {
        let out = explain(name, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            stable(&out.stderr)
        );
        insta::assert_snapshot!(format!("explain_log_{name}"), stable(&out.stdout));
    }
}

#[test]
fn explain_log_json_is_the_v1_document() {
    let out = explain("nccl-no-socket-interface.log", &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let mut v = json_of(&out.stdout);
    assert_eq!(v["schema"], "preflight.explain.v1");
    assert_eq!(v["errors"][0]["signature"], "nccl.no-socket-interface");
    assert_eq!(v["errors"][0]["decisive"], true);
    assert_eq!(v["errors"][0]["causes"][0]["id"], "env.socket-ifname");
    assert_eq!(v["errors"][0]["causes"][0]["node"], "gpu-b");
    assert_eq!(v["job"]["env"]["NCCL_SOCKET_IFNAME"], "bond0");
    v["log"] = "[log]".into();
    insta::assert_json_snapshot!("explain_log_json_nccl-no-socket-interface", v);
}

#[test]
fn explain_log_reads_standard_input() {
    let text = std::fs::read(fixture("explain-logs/c10d-address-in-use.log")).unwrap();
    let out = bin()
        .args(["explain", "--log", "-", "--format", "json"])
        .write_stdin(text)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out.stdout);
    assert_eq!(v["log"], "-");
    assert_eq!(v["errors"][0]["signature"], "c10d.address-in-use");
    assert_eq!(v["errors"][0]["causes"][0]["id"], "port.in-use");
    assert_eq!(
        v["errors"][0]["causes"][0]["confirm"],
        "preflight check --master-port 29500"
    );
}

#[test]
fn explain_log_exit_codes_and_conflicts() {
    let missing = bin()
        .args(["explain", "--log", "/nonexistent/job.log"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent/job.log"));
    let both = bin()
        .args(["explain", "port.in-use", "--log", "x.log"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    let id = bin().args(["explain", "port.in-use"]).output().unwrap();
    assert_eq!(id.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&id.stdout).starts_with("port.in-use"));
    let none = explain("no-known-error.log", &[]);
    assert_eq!(none.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&none.stdout).contains("No known error"));
}

#[test]
fn explain_coverage_lists_every_source_with_its_versions_and_counts() {
    let out = bin()
        .env("COLUMNS", "100")
        .args(["explain", "--coverage"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for source in ["nccl", "gloo", "cuda", "torch-elastic", "c10d", "errno"] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(source)),
            "{source} missing:\n{text}"
        );
    }
    for tag in ["v2.4.8-1", "v2.12.12-1", "v2.29.7-1"] {
        assert!(text.contains(tag), "{tag} missing");
    }
    assert!(text.contains("Left unmapped, and why:"));
    let conflict = bin()
        .args(["explain", "--coverage", "--log", "x.log"])
        .output()
        .unwrap();
    assert_eq!(conflict.status.code(), Some(2));
}

#[test]
fn explain_log_names_a_real_ephemeral_port_exhaustion_by_the_failing_call() {
    let out = explain(
        "real/nccl-1882-bind-in-use-ephemeral.log",
        &["--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out.stdout);
    assert_eq!(v["errors"][0]["signature"], "errno.bind-in-use-ephemeral");
    assert_eq!(v["errors"][0]["causes"][0]["id"], "sys.port-range");
}
