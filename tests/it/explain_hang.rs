//! `preflight explain --dumps/--ras`: the real binary on real Flight Recorder dumps written by
//! torch (tests/fixtures/flight-recorder, made by tests/tools/fr_scenarios.py), RAS output from
//! NCCL's source formats, a fake RAS server on 127.0.0.1, and the dumps regenerated with torch
//! when it is installed (CI has torch 2.11).

use crate::common::{bin, fixture, json_of};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;

fn explain(args: &[&str]) -> std::process::Output {
    bin()
        .env("COLUMNS", "80")
        .current_dir(fixture("..").join(".."))
        .arg("explain")
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn explain_hang_snapshots_of_real_dumps() {
    for (name, args) in [
        (
            "straggler",
            vec!["--dumps", "tests/fixtures/flight-recorder/straggler/pickle"],
        ),
        (
            "dead_with_ras",
            vec![
                "--dumps",
                "tests/fixtures/flight-recorder/dead/json",
                "--ras",
                "tests/fixtures/ras/nccl-2.29-dead.json",
            ],
        ),
        (
            "subgroup",
            vec![
                "--dumps",
                "tests/fixtures/flight-recorder/subgroup/pickle/trace_*",
            ],
        ),
        (
            "skip",
            vec!["--dumps", "tests/fixtures/flight-recorder/skip/json"],
        ),
        (
            "broken",
            vec!["--dumps", "tests/fixtures/flight-recorder/broken"],
        ),
        (
            "healthy",
            vec!["--dumps", "tests/fixtures/flight-recorder/healthy/pickle"],
        ),
        (
            "ras_ahead_listed",
            vec![
                "--ras",
                "tests/fixtures/ras/nccl-2.26-ranks-ahead-listed.txt",
            ],
        ),
        (
            "watchdog_no_dumps",
            vec![
                "--log",
                "tests/fixtures/explain-logs/c10d-watchdog-timeout.log",
                "--ras",
                "tests/fixtures/ras/nccl-2.28-straggler.txt",
            ],
        ),
    ] {
        insta::assert_snapshot!(format!("explain_hang_{name}"), text(&explain(&args)));
    }
}

#[test]
fn explain_hang_json_is_the_v1_document_with_the_hang() {
    let out = explain(&[
        "--dumps",
        "tests/fixtures/flight-recorder/straggler/json",
        "--format",
        "json",
    ]);
    let v = json_of(&text(&out).into_bytes());
    assert_eq!(v["schema"], "preflight.explain.v1");
    assert_eq!(v["hang"]["culprits"][0]["rank"], 1);
    assert_eq!(v["hang"]["culprits"][0]["kind"], "missing");
    assert_eq!(v["hang"]["verdict"]["groups"][0]["front"]["seq"], 4);
    assert_eq!(
        v["hang"]["culprits"][0]["causes"][1]["id"],
        "gpu.compute-slow"
    );
    assert_eq!(
        v["hang"]["culprits"][0]["causes"][1]["confirm"],
        "preflight check --gemm"
    );
}

#[test]
fn explain_hang_refuses_what_it_cannot_read() {
    let out = explain(&["--dumps", "tests/fixtures/flight-recorder/nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file or folder"));
    let out = explain(&["--ras", "not-a-port"]);
    assert_eq!(out.status.code(), Some(2));
    // Nothing listens on a port just released: a bounded, clear error.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = explain(&["--ras", &format!("127.0.0.1:{port}")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot query NCCL's RAS"));
}

/// A fake RAS port speaking NCCL's client protocol (src/ras/client_support.cc): protocol,
/// timeout, then the status, and the connection closed.
#[test]
fn explain_hang_queries_a_live_ras_port() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let status = std::fs::read(fixture("ras/nccl-2.28-straggler.txt")).unwrap();
    let server = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut w = s;
        let mut got = Vec::new();
        for reply in ["SERVER PROTOCOL 2\n", "OK\n", ""] {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            got.push(line.trim().to_string());
            w.write_all(reply.as_bytes()).unwrap();
        }
        w.write_all(&status).unwrap();
        got
    });
    let out = explain(&["--ras", &format!("127.0.0.1:{port}"), "--format", "json"]);
    let v = json_of(&text(&out).into_bytes());
    assert_eq!(
        server.join().unwrap(),
        ["CLIENT PROTOCOL 2", "TIMEOUT 5", "VERBOSE STATUS"]
    );
    assert_eq!(v["hang"]["culprits"][0]["rank"], 3);
    assert_eq!(v["hang"]["culprits"][0]["pid"], 52012);
    assert_eq!(v["hang"]["ras_source"], format!("127.0.0.1:{port}"));
}

/// The dumps again, written now by the installed torch: the same ranks are named. Skips
/// without torch (CI has torch 2.11; `PREFLIGHT_REQUIRE_TORCH=1` turns the skip into a failure).
#[test]
fn explain_hang_on_dumps_torch_writes_now() {
    let has_torch = std::process::Command::new("python3")
        .args(["-c", "import torch.distributed"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_torch {
        assert!(
            std::env::var_os("PREFLIGHT_REQUIRE_TORCH").is_none(),
            "torch is required"
        );
        eprintln!("skipped: no torch");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = fixture("..").join("tools/fr_scenarios.py");
    let out = std::process::Command::new("timeout")
        .args(["300", "python3"])
        .arg(&script)
        .arg(dir.path())
        .args(["dead", "skip"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (scenario, rank, kind) in [("dead", 1, "no-dump"), ("skip", 2, "mismatch")] {
        for form in ["pickle", "json"] {
            let p = dir.path().join(scenario).join(form);
            let out = explain(&["--dumps", p.to_str().unwrap(), "--format", "json"]);
            let v = json_of(&text(&out).into_bytes());
            assert_eq!(
                v["hang"]["culprits"][0]["rank"], rank,
                "{scenario} {form}: {v}"
            );
            assert_eq!(v["hang"]["culprits"][0]["kind"], kind, "{scenario} {form}");
        }
    }
}
