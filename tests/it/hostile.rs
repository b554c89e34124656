//! Hostile peers against a real rank 0 on loopback: floods of unauthenticated connections,
//! a slow handshake, forged join messages, an empty secret. Each test asserts the bound
//! (seconds, MiB, counts), not only that something happened.

use preflight::transport::auth::{self, Secret};
use preflight::transport::wire::{Listener, Msg, write_msg};
use preflight_checks::model::{Interface, NodeFacts};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{INHERITED_ENV_TO_CLEAR, bin, json_of};

const TOKEN: &str = "hostile-test-token";

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port")
        .port()
}

/// `preflight cluster` as `rank` of `nnodes` on loopback, JSON on stdout.
fn node(rank: u32, nnodes: u32, port: u16, timeout_s: u64, extra: &[&str]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
    cmd.args([
        "cluster",
        &format!("--nnodes={nnodes}"),
        &format!("--node-rank={rank}"),
        "--master-addr=127.0.0.1",
        &format!("--master-port={port}"),
        &format!("--timeout={timeout_s}"),
        "--quick",
        "--allreduce=off",
        "--format=json",
    ])
    .args(extra);
    for v in INHERITED_ENV_TO_CLEAR {
        cmd.env_remove(v);
    }
    cmd.env("NCCL_HOSTID", format!("hostile-{rank}-{port}"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("start preflight")
}

/// Waits for `child` at most `limit`; kills it past that. Returns (exit code, stdout, stderr, took).
fn wait(mut child: Child, limit: Duration) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let code = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    (code, o.join().unwrap(), e.join().unwrap(), took)
}

fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Connects to the master port, retrying while rank 0 starts.
fn connect(port: u16) -> TcpStream {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(e) if Instant::now() > until => panic!("rank 0 never listened: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn findings<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["id"] == id).collect())
        .unwrap_or_default()
}

#[test]
fn an_empty_secret_is_an_error_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("token");
    std::fs::write(&empty, "\n").unwrap();
    for (args, env) in [
        (vec!["--token="], None),
        (vec![], Some("")),
        (vec!["--token-file", empty.to_str().unwrap()], None),
    ] {
        let started = Instant::now();
        let mut c = bin();
        c.args([
            "cluster",
            "--nnodes=2",
            "--node-rank=1",
            "--master-addr=127.0.0.1",
        ])
        .args(&args)
        .timeout(Duration::from_secs(10));
        if let Some(v) = env {
            c.env("PREFLIGHT_TOKEN", v);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("empty"), "{args:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(3), "{args:?}");
    }
}

#[test]
fn without_a_secret_source_every_report_warns_with_the_fix() {
    let port = free_port();
    let (code, out, err, _) = wait(node(0, 1, port, 10, &[]), Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    let report = json_of(out.as_bytes());
    let auth = findings(&report, "cluster.auth");
    assert_eq!(auth.len(), 1, "{report}");
    assert_eq!(auth[0]["status"], "warn");
    let fix = auth[0]["fix"]["commands"].to_string();
    assert!(fix.contains("PREFLIGHT_TOKEN"), "{fix}");
    // With a token the same finding passes and names the source.
    let (code, out, _, _) = wait(
        node(0, 1, free_port(), 10, &["--token", TOKEN]),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0));
    let report = json_of(out.as_bytes());
    assert_eq!(findings(&report, "cluster.auth")[0]["status"], "pass");
}

/// 100 connections that never authenticate: half declare a 32 MiB frame, half trickle a
/// small one a byte a second. Rank 0 stays small, drops each within the handshake's 5 s,
/// and the real rank 1 still joins.
#[test]
fn a_flood_of_unauthenticated_connections_is_bounded() {
    let port = free_port();
    let rank0 = node(0, 2, port, 20, &["--token", TOKEN]);
    let pid = rank0.id();
    let _ = connect(port);
    let flood_started = Instant::now();
    let attackers: Vec<_> = (0..100)
        .map(|i| {
            std::thread::spawn(move || {
                let mut s = connect(port);
                s.set_read_timeout(Some(Duration::from_millis(200))).ok();
                let opened = Instant::now();
                let declared: u32 = if i % 2 == 0 { 32 << 20 } else { 4000 };
                let _ = s.write_all(&declared.to_be_bytes());
                // Trickle a byte a second until rank 0 closes the connection.
                let mut buf = [0u8; 4096];
                while opened.elapsed() < Duration::from_secs(15) {
                    match s.read(&mut buf) {
                        Ok(0) => return opened.elapsed(),
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => return opened.elapsed(),
                    }
                    if s.write_all(b"x").is_err() {
                        return opened.elapsed();
                    }
                    std::thread::sleep(Duration::from_millis(800));
                }
                opened.elapsed()
            })
        })
        .collect();
    let mut peak = 0.0f64;
    while flood_started.elapsed() < Duration::from_secs(7) {
        if let Some(r) = rss_mib(pid) {
            peak = peak.max(r);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let held: Vec<Duration> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
    let longest = held.iter().max().copied().unwrap_or_default();
    eprintln!("flood: rank 0 peak RSS {peak:.1} MiB; longest hostile connection {longest:?}");
    assert!(
        peak > 0.0 && peak < 100.0,
        "rank 0 RSS peaked at {peak:.1} MiB"
    );
    assert!(
        longest < Duration::from_secs(7),
        "a connection lived {longest:?}"
    );
    // The real rank 1 joins after the flood.
    let (code1, _, err1, _) = wait(
        node(1, 2, port, 20, &["--token", TOKEN]),
        Duration::from_secs(40),
    );
    let (code0, out0, err0, _) = wait(rank0, Duration::from_secs(40));
    assert!(err0.contains("rank 1 joined"), "{err0}\n{err1}");
    assert!(code0.is_some() && code1.is_some(), "{err0}\n{err1}");
    let report = json_of(out0.as_bytes());
    assert_eq!(
        findings(&report, "cluster.rendezvous")[0]["status"],
        "pass",
        "{report}"
    );
}

/// Authenticates as `rank` with the job's token and sends `facts` as its join message;
/// returns what rank 0 answered.
fn forge_join(port: u16, rank: u32, facts: NodeFacts) -> String {
    let mut s = connect(port);
    auth::connect(&mut s, &Secret::token(TOKEN), rank, 2, Some(0)).expect("handshake");
    s.set_write_timeout(Some(Duration::from_secs(10))).ok();
    let _ = write_msg(
        &mut s,
        &Msg::Join {
            facts: Box::new(facts),
            listeners: vec![Listener {
                interface: "eth0".into(),
                address: "127.0.0.1".into(),
                port: 1,
            }],
        },
    );
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    match preflight::transport::wire::read_msg::<_, Msg>(&mut s) {
        Ok(Msg::Reject { reason, .. }) => reason,
        other => format!("{other:?}"),
    }
}

/// A peer that knows the secret but sends 10,000 interfaces, or a 20 MiB hostname, is refused
/// with the reason, named in rank 0's report, and rank 0 still ends on time.
#[test]
fn forged_facts_over_the_limits_are_refused_and_reported() {
    let port = free_port();
    let timeout = 12;
    let rank0 = node(0, 2, port, timeout, &["--token", TOKEN]);
    let many = NodeFacts {
        hostname: "forger".into(),
        net: preflight_checks::model::NetFacts {
            interfaces: vec![Interface::default(); 10_000],
            error: None,
        },
        ..Default::default()
    };
    let started = Instant::now();
    let answer = forge_join(port, 1, many);
    assert!(answer.contains("10000 network interfaces"), "{answer}");
    let huge = NodeFacts {
        hostname: "h".repeat(20 << 20),
        ..Default::default()
    };
    let answer = forge_join(port, 1, huge);
    assert!(answer.contains("cap"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let (code, out, err, took) = wait(rank0, Duration::from_secs(timeout + 20));
    assert_eq!(code, Some(1), "{err}");
    assert!(took < Duration::from_secs(timeout + 15), "{took:?}");
    let report = json_of(out.as_bytes());
    let refused = findings(&report, "cluster.refused");
    let text = serde_json::to_string(&refused).unwrap();
    assert!(text.contains("10000 network interfaces"), "{text}");
    assert!(text.contains("\"kind\":\"limits\""), "{text}");
    let rdzv = findings(&report, "cluster.rendezvous")[0]["summary"].to_string();
    assert!(rdzv.contains("refused"), "{rdzv}");
    assert!(out.len() < 1 << 20, "report of {} bytes", out.len());
}

/// A node with another secret is refused and named as refused in rank 0's report, and its own
/// report says the secret differs.
#[test]
fn a_node_with_another_secret_is_refused_not_missing() {
    let port = free_port();
    let rank0 = node(0, 2, port, 6, &["--token", TOKEN]);
    let _ = connect(port);
    let rank1 = node(1, 2, port, 6, &["--token", "another-token"]);
    let (_, out1, err1, _) = wait(rank1, Duration::from_secs(30));
    let (code0, out0, err0, _) = wait(rank0, Duration::from_secs(30));
    assert_eq!(code0, Some(1), "{err0}");
    let r0 = json_of(out0.as_bytes());
    let refused = findings(&r0, "cluster.refused");
    assert!(
        refused
            .iter()
            .any(|f| f["evidence"]["kind"] == "secret" && f["evidence"]["claimed_rank"] == 1),
        "{r0}"
    );
    let r1 = json_of(out1.as_bytes());
    let own = serde_json::to_string(&findings(&r1, "cluster.refused")).unwrap();
    assert!(own.contains("the secret differs"), "{own}\n{err1}");
}
