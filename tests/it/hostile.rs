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
use std::sync::Arc;
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
/// small one a byte a second. Rank 0 stays small, handshakes at most its cluster-sized
/// capacity (2 nodes + 32) at once and drops each within the handshake's 5 s, so the flood is
/// gone after ceil(100 / 34) = 3 waves (members wait in the backlog, never turned away), and
/// the real rank 1 still joins.
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
                while opened.elapsed() < Duration::from_secs(30) {
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
    while flood_started.elapsed() < Duration::from_secs(16) {
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
    let waves = 100u32.div_ceil(2 + preflight::transport::gate::HANDSHAKE_MARGIN as u32);
    let bound = preflight::transport::auth::HANDSHAKE_TIMEOUT * waves + Duration::from_secs(2);
    assert!(
        longest < bound,
        "a connection lived {longest:?} (bound {bound:?}: {waves} waves of the handshake deadline)"
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
    assert!(
        answer.contains("more than 256 items at facts.net.interfaces"),
        "{answer}"
    );
    let huge = NodeFacts {
        hostname: "h".repeat(20 << 20),
        ..Default::default()
    };
    let answer = forge_join(port, 1, huge);
    assert!(
        answer.contains("a string longer than 65536 bytes at facts.hostname"),
        "{answer}"
    );
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
    assert!(text.contains("facts.net.interfaces"), "{text}");
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

// ----- budgets (issue 19): every byte a peer sends has a budget before it is parsed -----

/// Python that runs its arguments as its own child and, when it ends, appends the child's
/// peak RSS (the kernel's `ru_maxrss` from `wait4`) to stderr. A child forked from this small
/// interpreter starts from its few MiB, not from the test binary's RSS (which a child of the
/// test would inherit as its high-water mark until exec).
const MEASURE: &str = r#"
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
signal.signal(signal.SIGALRM, lambda *a: os.kill(pid, signal.SIGKILL))
signal.alarm(int(sys.argv[1]))
while True:
    try:
        _, status, ru = os.wait4(pid, 0)
        break
    except InterruptedError:
        pass
sys.stderr.write("\npreflight-test-peak-rss-kib=%d\n" % ru.ru_maxrss)
sys.stderr.flush()
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// Where the measured peak lands in stderr.
pub(crate) fn peak_rss_mib(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("preflight-test-peak-rss-kib="))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
}

/// `preflight` with `args`, run under [`MEASURE`] (killed after `limit_s`).
pub(crate) fn measured(args: &[String], limit_s: u64) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(MEASURE)
        .arg(limit_s.to_string())
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args(args);
    for v in INHERITED_ENV_TO_CLEAR {
        cmd.env_remove(v);
    }
    cmd.env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// [`node`], measured.
fn measured_node(rank: u32, nnodes: u32, port: u16, timeout_s: u64) -> Child {
    let args: Vec<String> = vec![
        "cluster".into(),
        format!("--nnodes={nnodes}"),
        format!("--node-rank={rank}"),
        "--master-addr=127.0.0.1".into(),
        format!("--master-port={port}"),
        format!("--timeout={timeout_s}"),
        "--quick".into(),
        "--allreduce=off".into(),
        "--format=json".into(),
        "--token".into(),
        TOKEN.into(),
    ];
    let mut cmd = measured(&args, timeout_s + 60);
    cmd.env("NCCL_HOSTID", format!("honest-{rank}-{port}"));
    cmd.spawn().expect("start preflight")
}

/// One length-prefixed frame as a hostile peer builds it, deflated when `deflate`.
fn raw_frame(json: &[u8], deflate: bool) -> Vec<u8> {
    let (body, flag) = if deflate {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(json).unwrap();
        (z.finish().unwrap(), 1u32 << 31)
    } else {
        (json.to_vec(), 0)
    };
    let mut out = (body.len() as u32 | flag).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// A join of `n` empty interfaces: a few bytes each, hundreds of bytes each once parsed.
fn empty_interfaces_join(n: usize) -> Vec<u8> {
    let mut j =
        br#"{"type":"join","listeners":[],"facts":{"hostname":"bomb","net":{"interfaces":["#
            .to_vec();
    for i in 0..n {
        j.extend_from_slice(if i == 0 { b"{}" } else { b",{}" });
    }
    j.extend_from_slice(b"]}}}");
    j
}

/// Authenticates as `rank` of 2 and sends `frame` raw; returns rank 0's answer.
fn send_raw_join(port: u16, rank: u32, frame: &[u8]) -> String {
    let mut s = connect(port);
    auth::connect(&mut s, &Secret::token(TOKEN), rank, 2, Some(0)).expect("handshake");
    s.set_write_timeout(Some(Duration::from_secs(20))).ok();
    let _ = s.write_all(frame);
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    match preflight::transport::wire::read_msg::<_, Msg>(&mut s) {
        Ok(Msg::Reject { reason, .. }) => reason,
        other => format!("{other:?}"),
    }
}

/// Joins over budget, ten at once: 1.39 million empty interfaces in 4 MiB (plain, and deflated
/// under the frame cap), a 64 MiB deflate bomb in ~64 KiB, and 256 interfaces of 380 addresses
/// (which kept rank 0 busy 50 s). Each is refused while it is read, naming the limit; rank 0 stays
/// under 256 MiB, the honest rank 1 joins, and the verdict comes within timeout + 15 s.
#[test]
fn joins_over_their_budget_are_refused_while_read() {
    let port = free_port();
    let timeout = 15;
    let began = Instant::now();
    let rank0 = measured_node(0, 2, port, timeout);
    let _ = connect(port);
    let started = Instant::now();
    let empties = Arc::new(raw_frame(&empty_interfaces_join(1_390_000), false));
    let mut bomb_json = br#"{"type":"join","listeners":[],"facts":"#.to_vec();
    bomb_json.extend(std::iter::repeat_n(b' ', 64 << 20));
    bomb_json.extend_from_slice(br#"{}}"#);
    let bomb = Arc::new(raw_frame(&bomb_json, true));
    assert!(bomb.len() < 300 << 10, "{}", bomb.len());
    // Under the frame cap, plain and deflated: counted while read (and inflated).
    let small = Arc::new(raw_frame(&empty_interfaces_join(300_000), false));
    let packed = Arc::new(raw_frame(&empty_interfaces_join(1_400_000), true));
    // Within the old limits but hours of work: 256 interfaces of 380 addresses each.
    let busy = {
        let addrs: Vec<String> = (0..380)
            .map(|i| format!(r#"{{"addr":"10.{}.{}.1","prefix":24}}"#, i / 256, i % 256))
            .collect();
        let iface = format!(r#"{{"name":"e","up":true,"ipv4":[{}]}}"#, addrs.join(","));
        let json = format!(
            r#"{{"type":"join","listeners":[],"facts":{{"hostname":"busy","net":{{"interfaces":[{}]}}}}}}"#,
            vec![iface; 256].join(",")
        );
        Arc::new(raw_frame(json.as_bytes(), true))
    };
    let kinds = [empties, bomb, small, packed, busy];
    let attackers: Vec<_> = (0..10)
        .map(|i| {
            let frame = kinds[i % 5].clone();
            std::thread::spawn(move || send_raw_join(port, 1, &frame))
        })
        .collect();
    let answers: Vec<String> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
    let refused_in = started.elapsed();
    let (code1, _, err1, _) = wait(
        node(1, 2, port, timeout, &["--token", TOKEN]),
        Duration::from_secs(timeout + 40),
    );
    let (code0, out0, err0, _) = wait(rank0, Duration::from_secs(timeout + 60));
    let took = began.elapsed();
    let peak = peak_rss_mib(&err0).expect("peak");
    eprintln!(
        "join bombs: refused within {refused_in:?}; rank 0 peak RSS {peak:.1} MiB, verdict after {took:?}"
    );
    assert!(code0.is_some() && code1.is_some(), "{err0}\n{err1}");
    for (i, a) in answers.iter().enumerate() {
        let want = match i % 5 {
            0 => "exceeds the 1048576-byte cap",
            1 => "larger than 1048576 bytes",
            4 => "more than 64 items at facts.net.interfaces[].ipv4",
            _ => "more than 256 items at facts.net.interfaces",
        };
        assert!(a.contains(want), "attacker {i}: {a}");
    }
    assert!(peak < 256.0, "rank 0 peaked at {peak:.1} MiB");
    assert!(took < Duration::from_secs(timeout + 15), "{took:?}");
    let report = json_of(out0.as_bytes());
    let text = serde_json::to_string(&findings(&report, "cluster.refused")).unwrap();
    // One refusal per address, rank and kind: the first of the eight is kept.
    assert!(
        text.contains("1048576") || text.contains("facts.net.interfaces"),
        "{text}"
    );
    assert!(err0.contains("rank 1 joined"), "{err0}");
}

/// A link result full of lies, as a hostile rank 1 would send it.
fn lies(address: &str, port: u16) -> Vec<preflight_checks::model::LinkResult> {
    use preflight_checks::model::{LinkOutcome, LinkResult};
    let base = LinkResult {
        from: 1,
        to: 0,
        interface: "lo".into(),
        address: address.into(),
        port,
        result: LinkOutcome::Ok,
        ..Default::default()
    };
    vec![
        LinkResult {
            rtt_us: Some(-5.0),
            throughput_gbit_s: Some(-3.0),
            ..base.clone()
        },
        LinkResult {
            rtt_us: Some(10.0),
            rtt_p99_us: Some(1e308),
            ..base.clone()
        },
        LinkResult {
            rtt_us: Some(10.0),
            mtu: Some(u32::MAX),
            ..base
        },
    ]
}

/// A hostile rank 1 with the token: it joins with a listener of its own, then, told to probe,
/// sends four 64 MiB deflate bombs to rank 0's data listeners at once and answers
/// with impossible measurements, or (`big`) with 31 MiB of links. Returns rank 0's report,
/// stderr, peak RSS (MiB) and time to its verdict, and how many bombs went out.
fn hostile_peer(big: bool) -> (Value, String, f64, Duration, usize) {
    let port = free_port();
    let started = Instant::now();
    let timeout = 12;
    let rank0 = measured_node(0, 2, port, timeout);
    let mut s = connect(port);
    auth::connect(&mut s, &Secret::token(TOKEN), 1, 2, Some(0)).expect("handshake");
    let own = TcpListener::bind("127.0.0.1:0").unwrap();
    let own_port = own.local_addr().unwrap().port();
    let facts = NodeFacts {
        hostname: "liar".into(),
        host_id: "liar-host".into(),
        ..Default::default()
    };
    write_msg(
        &mut s,
        &Msg::Join {
            facts: Box::new(facts),
            listeners: vec![Listener {
                interface: "lo".into(),
                address: "127.0.0.1".into(),
                port: own_port,
            }],
        },
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(timeout + 20)))
        .ok();
    let mut bombs_sent = 0;
    let mut answered = Vec::new();
    while let Ok(msg) = preflight::transport::wire::read_msg::<_, Msg>(&mut s) {
        let reply = match msg {
            Msg::Probe { peers, .. } => {
                let bomb = Arc::new(raw_frame(&vec![b' '; 64 << 20], true));
                let targets: Vec<String> = peers
                    .iter()
                    .flat_map(|p| p.listeners.iter())
                    .map(|l| preflight_checks::net::host_port(&l.address, l.port))
                    .collect();
                let threads: Vec<_> = targets
                    .iter()
                    .flat_map(|t| std::iter::repeat_n(t.clone(), 4))
                    .take(4)
                    .map(|t| {
                        let bomb = bomb.clone();
                        std::thread::spawn(move || {
                            let Ok(mut d) = TcpStream::connect(&t) else {
                                return false;
                            };
                            if auth::connect(&mut d, &Secret::token(TOKEN), 1, 2, Some(0)).is_err()
                            {
                                return false;
                            }
                            let _ = d.write_all(&bomb);
                            let mut b = [0u8; 1];
                            d.set_read_timeout(Some(Duration::from_secs(10))).ok();
                            let _ = d.read(&mut b);
                            true
                        })
                    })
                    .collect();
                bombs_sent = threads.len();
                drop(threads);
                if big {
                    // 31 MiB of links: under the old 32 MiB cap, far over the answer budget
                    // of 2 nodes.
                    let link = preflight_checks::model::LinkResult {
                        from: 1,
                        address: "x".repeat(1 << 10),
                        ..Default::default()
                    };
                    Msg::ProbeDone {
                        links: vec![link; 31 << 10],
                        resolved: None,
                    }
                } else {
                    Msg::ProbeDone {
                        links: lies("127.0.0.1", own_port),
                        resolved: None,
                    }
                }
            }
            Msg::Bulk { .. } => Msg::BulkDone { links: vec![] },
            Msg::Mtu { .. } => Msg::MtuDone { links: vec![] },
            Msg::Report { .. } => break,
            other => {
                answered.push(format!("{other:?}").chars().take(40).collect::<String>());
                continue;
            }
        };
        if write_msg(&mut s, &reply).is_err() {
            break;
        }
    }
    let (code0, out0, err0, _) = wait(rank0, Duration::from_secs(timeout + 60));
    let took = started.elapsed();
    assert!(code0.is_some(), "{err0}");
    let peak = peak_rss_mib(&err0).expect("peak");
    assert!(bombs_sent > 0, "rank 0 never sent a probe order: {err0}");
    (json_of(out0.as_bytes()), err0, peak, took, bombs_sent)
}

/// Lies after the handshake: rank 0 stays under 256 MiB through the data-listener bombs, marks
/// the impossible measurements `invalid` naming rank 1, never `ok`, and ends in time.
#[test]
fn a_hostile_peer_after_the_handshake_is_bounded_and_its_lies_invalid() {
    let (report, err0, peak, took, bombs) = hostile_peer(false);
    eprintln!(
        "lies + {bombs} data-listener bombs: rank 0 peak RSS {peak:.1} MiB, verdict after {took:?}"
    );
    assert!(peak < 256.0, "rank 0 peaked at {peak:.1} MiB");
    assert!(took < Duration::from_secs(12 + 15), "{took:?}");
    let links = report["links"].as_array().unwrap();
    let from1: Vec<&Value> = links.iter().filter(|l| l["from"] == 1).collect();
    assert!(!from1.is_empty(), "{report}\n{err0}");
    for l in &from1 {
        assert_eq!(l["result"], "invalid", "{l}");
        let e = l["error"].as_str().unwrap();
        assert!(e.starts_with("rank 1 (liar) reported"), "{e}");
        assert!(
            l["rtt_us"].is_null() && l["rtt_p99_us"].is_null() && l["mtu"].is_null(),
            "{l}"
        );
    }
    // The lies are named as evidence, and kept out of every number.
    let errors: Vec<&str> = from1.iter().filter_map(|l| l["error"].as_str()).collect();
    assert!(
        errors.iter().any(|e| e.contains("an MTU of 4294967295")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("a round trip of -5")),
        "{errors:?}"
    );
}

/// A 31 MiB answer (under the old 32 MiB cap) costs rank 0 its budget of a 2-node answer, not
/// hundreds of MiB: rank 1 is lost for that phase, rank 0 stays small and ends in time.
#[test]
fn a_31_mib_answer_is_refused_at_its_budget() {
    let (report, err0, peak, took, bombs) = hostile_peer(true);
    eprintln!(
        "31 MiB answer + {bombs} data-listener bombs: rank 0 peak RSS {peak:.1} MiB, verdict after {took:?}"
    );
    assert!(peak < 256.0, "rank 0 peaked at {peak:.1} MiB");
    assert!(took < Duration::from_secs(12 + 15), "{took:?}");
    assert!(
        err0.contains("lost rank 1 during the connectivity test: a frame of"),
        "{err0}"
    );
    assert!(
        report["links"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["from"] != 1 || l["address"].as_str().unwrap().len() < 64)
    );
}

/// A peer that advertises a data listener on a host that did not join (or on the master
/// port) is refused at join, named in `cluster.refused` with kind `listener`; nobody connects.
#[test]
fn a_peer_cannot_aim_the_cluster_at_another_host() {
    let port = free_port();
    let timeout = 8;
    let rank0 = node(0, 2, port, timeout, &["--token", TOKEN]);
    let _ = connect(port);
    let mut answers = Vec::new();
    for (address, lport) in [("192.0.2.7", 22u16), ("127.0.0.1", port), ("127.0.0.1", 0)] {
        let mut s = connect(port);
        auth::connect(&mut s, &Secret::token(TOKEN), 1, 2, Some(0)).expect("handshake");
        write_msg(
            &mut s,
            &Msg::Join {
                facts: Box::new(NodeFacts {
                    hostname: "scanner".into(),
                    ..Default::default()
                }),
                listeners: vec![Listener {
                    interface: "eth0".into(),
                    address: address.into(),
                    port: lport,
                }],
            },
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        answers.push(
            match preflight::transport::wire::read_msg::<_, Msg>(&mut s) {
                Ok(Msg::Reject { reason, kind }) => format!("{kind:?}: {reason}"),
                other => format!("{other:?}"),
            },
        );
    }
    assert!(
        answers[0].contains("Listener") && answers[0].contains("192.0.2.7:22"),
        "{answers:?}"
    );
    assert!(
        answers[0].contains("neither the one it connected from"),
        "{answers:?}"
    );
    assert!(answers[1].contains(&format!("port {port}")), "{answers:?}");
    assert!(answers[2].contains("port 0"), "{answers:?}");
    let (_, out0, err0, took) = wait(rank0, Duration::from_secs(timeout + 40));
    assert!(took < Duration::from_secs(timeout + 15), "{took:?}");
    let report = json_of(out0.as_bytes());
    let refused = findings(&report, "cluster.refused");
    assert!(
        refused.iter().any(|f| f["evidence"]["kind"] == "listener"
            && f["summary"].as_str().unwrap().contains("192.0.2.7:22")),
        "{refused:?}\n{err0}"
    );
    assert!(
        !out0.contains("\"address\":\"192.0.2.7\""),
        "a link to the stranger: {out0}"
    );
}
