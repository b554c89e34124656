//! Hostile peers. On loopback: an empty secret, no secret source, another secret. In network
//! namespaces, against real honest `preflight cluster` nodes: a flood of unauthenticated
//! connections, joins over their budget, deflate bombs and lies after the handshake, a 31 MiB
//! answer, a peer aiming the cluster at another host. The hostile peer knows the token and is
//! this test's own code on a thread inside a host namespace of its own ([`Cluster::enter`]), so
//! its traffic crosses the veths and the bridge. Each attack asserts its bound on every honest
//! process (peak `VmHWM` under 256 MiB, a verdict within `--timeout` + 15 s), not only that
//! something happened.

use crate::common::{INHERITED_ENV_TO_CLEAR, bin, json_of};
use crate::netns::{Cluster, MASTER_PORT, NodeRun, Running, node as run_of};
use preflight::transport::auth::{self, Secret};
use preflight::transport::wire::{Listener, Msg, Peer, encode_msg, read_msg, write_msg};
use preflight_checks::model::{Interface, LinkOutcome, LinkResult, NetFacts, NodeFacts};
use preflight_checks::net::host_port;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

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
    let o = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = thread::spawn(move || {
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
        thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    (code, o.join().unwrap(), e.join().unwrap(), took)
}

/// Connects to `addr` ("host:port"), retrying while the node there starts.
fn connect(addr: &str) -> TcpStream {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if Instant::now() > until => panic!("nothing listened at {addr}: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(50)),
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

/// A node with another secret is refused and named as refused in rank 0's report, and its own
/// report says the secret differs.
#[test]
fn a_node_with_another_secret_is_refused_not_missing() {
    let port = free_port();
    let rank0 = node(0, 2, port, 6, &["--token", TOKEN]);
    let _ = connect(&format!("127.0.0.1:{port}"));
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

// ----- attacks on honest nodes in network namespaces (issue 19) -----

/// The host the hostile peer runs on; hosts 0 and 1 are honest nodes.
const HOSTILE: usize = 2;
/// Every honest process's peak memory (`VmHWM`) stays under this, whatever the attack.
const RSS_BOUND_MIB: f64 = 256.0;
/// Every honest verdict arrives within `--timeout` + this.
const VERDICT_SLACK: Duration = Duration::from_secs(15);

/// Two honest hosts and the hostile one on 10.200.1.0/24; None when namespaces cannot be made.
fn cluster(tag: &str) -> Option<Cluster> {
    Cluster::flat(tag, 3, "eth0").build()
}

/// Honest `ranks` of `nnodes` as `preflight cluster` processes in their own namespaces, their
/// peak memory watched.
fn honest<'a>(c: &'a Cluster, nnodes: usize, ranks: &[usize], timeout_s: u64) -> Running<'a> {
    c.preflight()
        .nnodes(nnodes)
        .ranks(ranks)
        .timeout(timeout_s)
        .args(&["--allreduce=off"])
        .watch_memory()
        .start()
}

/// Rank 0's master port, where the coordinator listens.
fn master(c: &Cluster) -> String {
    host_port(&c.addr(0, "data"), MASTER_PORT)
}

/// The bounds every honest process keeps under `attack`: a report within `timeout_s` + 15 s of
/// its start and a peak `VmHWM` under 256 MiB. Prints both for each.
fn assert_bounded(attack: &str, runs: &[NodeRun], timeout_s: u64) {
    let limit = Duration::from_secs(timeout_s) + VERDICT_SLACK;
    for r in runs {
        let peak = r.peak_rss_mib.unwrap_or_default();
        eprintln!(
            "{attack}: rank {} peak VmHWM {peak:.1} MiB, verdict after {:.1?}",
            r.rank, r.elapsed
        );
        assert!(
            peak > 0.0 && peak < RSS_BOUND_MIB,
            "{attack}: rank {} peaked at {peak:.1} MiB\n{}",
            r.rank,
            r.describe()
        );
        assert!(
            !r.timed_out && r.elapsed < limit,
            "{attack}: no verdict within {limit:?}\n{}",
            r.describe()
        );
        assert!(r.report().is_object());
    }
}

/// Connects to `addr` and proves the job's secret as `rank` of `nnodes` to the node of rank
/// `server` there.
fn authenticated(addr: &str, token: &str, rank: u32, nnodes: u32, server: u32) -> TcpStream {
    let mut s = connect(addr);
    auth::connect(&mut s, &Secret::token(token), rank, nnodes, Some(server)).expect("handshake");
    s
}

/// Sends `frame` to rank 0 as the join of rank 1 of 2, after a good handshake; returns rank 0's
/// answer: the kind and reason of its refusal, or what came instead.
fn join_answer(c: &Cluster, frame: &[u8]) -> String {
    let mut s = authenticated(&master(c), c.token(), 1, 2, 0);
    s.set_write_timeout(Some(Duration::from_secs(20))).ok();
    let _ = s.write_all(frame);
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    match read_msg::<_, Msg>(&mut s) {
        Ok(Msg::Reject { reason, kind }) => format!("{kind:?}: {reason}"),
        other => format!("{other:?}"),
    }
}

/// A join of `facts` offering `listeners`, framed as an honest node frames it (deflated when large).
fn join_frame(facts: NodeFacts, listeners: Vec<Listener>) -> Vec<u8> {
    let join = Msg::Join {
        facts: Box::new(facts),
        listeners,
        whole_report: false,
    };
    encode_msg(&join).expect("a frame")
}

/// One frame as a hostile peer builds it, deflated when `deflate`, whatever its size.
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

/// One connection that never authenticates: it declares a frame of `declared` bytes, then
/// trickles a byte a second until the node closes it. Returns how long it was held.
fn hold_unauthenticated(addr: &str, declared: u32) -> Duration {
    let mut s = connect(addr);
    s.set_read_timeout(Some(Duration::from_millis(200))).ok();
    let opened = Instant::now();
    let _ = s.write_all(&declared.to_be_bytes());
    let mut buf = [0u8; 4096];
    while opened.elapsed() < Duration::from_secs(30) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
        if s.write_all(b"x").is_err() {
            break;
        }
        thread::sleep(Duration::from_millis(800));
    }
    opened.elapsed()
}

/// 100 connections from the hostile host that never authenticate: half declare a 32 MiB frame,
/// half trickle a small one a byte a second. Rank 0 handshakes at most its cluster-sized
/// capacity (2 nodes + 32) at once and drops each within the handshake's 5 s, so the flood is
/// gone after ceil(100 / 34) = 3 waves; then the real rank 1 still joins. Both stay bounded.
#[test]
fn a_flood_of_unauthenticated_connections_is_bounded() {
    let Some(c) = cluster("hflood") else {
        return;
    };
    let timeout = 20;
    let rank0 = honest(&c, 2, &[0], timeout);
    let master = master(&c);
    let held: Vec<Duration> = c.enter(HOSTILE, || {
        drop(connect(&master));
        thread::scope(|s| {
            let flood: Vec<_> = (0..100u32)
                .map(|i| {
                    let (master, declared) = (&master, if i % 2 == 0 { 32 << 20 } else { 4000 });
                    s.spawn(move || hold_unauthenticated(master, declared))
                })
                .collect();
            flood.into_iter().map(|t| t.join().unwrap()).collect()
        })
    });
    let longest = held.iter().max().copied().unwrap_or_default();
    eprintln!("flood: longest of 100 hostile connections {longest:?}");
    let waves = 100u32.div_ceil(2 + preflight::transport::gate::HANDSHAKE_MARGIN as u32);
    let bound = auth::HANDSHAKE_TIMEOUT * waves + Duration::from_secs(2);
    assert!(
        longest < bound,
        "a connection lived {longest:?} (bound {bound:?}: {waves} waves of the handshake deadline)"
    );
    let runs = rank0.with(honest(&c, 2, &[1], timeout)).finish();
    assert_bounded("flood", &runs, timeout);
    let r0 = run_of(&runs, 0);
    assert!(r0.stderr.contains("rank 1 joined"), "{}", r0.describe());
    assert_eq!(
        r0.findings("cluster.rendezvous")[0]["status"],
        "pass",
        "{}",
        r0.describe()
    );
}

/// A peer that knows the secret sends 10,000 interfaces, then a 20 MiB hostname (deflated, as an
/// honest node's encoder sends them): each is refused with the reason, named in rank 0's
/// report, and rank 0 stays bounded and ends on time.
#[test]
fn forged_facts_over_the_limits_are_refused_and_reported() {
    let Some(c) = cluster("hforge") else {
        return;
    };
    let timeout = 12;
    let many = NodeFacts {
        hostname: "forger".into(),
        net: NetFacts {
            interfaces: vec![Interface::default(); 10_000],
            error: None,
        },
        ..Default::default()
    };
    let huge = NodeFacts {
        hostname: "h".repeat(20 << 20),
        ..Default::default()
    };
    let frames = [join_frame(many, vec![]), join_frame(huge, vec![])];
    let rank0 = honest(&c, 2, &[0], timeout);
    let started = Instant::now();
    let answers: Vec<String> = c.enter(HOSTILE, || {
        frames.iter().map(|f| join_answer(&c, f)).collect()
    });
    let refused_in = started.elapsed();
    eprintln!("forged facts: both refused within {refused_in:?}");
    assert!(
        answers[0].contains("more than 256 items at facts.net.interfaces"),
        "{answers:?}"
    );
    assert!(
        answers[1].contains("a string longer than 65536 bytes at facts.hostname"),
        "{answers:?}"
    );
    assert!(refused_in < Duration::from_secs(10), "{refused_in:?}");
    let runs = rank0.finish();
    assert_bounded("forged facts", &runs, timeout);
    let r0 = run_of(&runs, 0);
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());
    let text = serde_json::to_string(&r0.findings("cluster.refused")).unwrap();
    assert!(text.contains("facts.net.interfaces"), "{text}");
    assert!(text.contains("\"kind\":\"limits\""), "{text}");
    let rdzv = r0.findings("cluster.rendezvous")[0]["summary"].to_string();
    assert!(rdzv.contains("refused"), "{rdzv}");
    assert!(
        r0.stdout.len() < 1 << 20,
        "report of {} bytes",
        r0.stdout.len()
    );
}

/// Joins over budget, ten at once from the hostile host: 1.39 million empty interfaces in
/// 4 MiB (plain, and deflated under the frame cap), a 64 MiB deflate bomb in ~64 KiB, and 256
/// interfaces of 380 addresses (which kept rank 0 busy 50 s). Each is refused while it is read,
/// naming the limit; the honest rank 1 joins after them, and both stay bounded.
#[test]
fn joins_over_their_budget_are_refused_while_read() {
    let Some(c) = cluster("hjoins") else {
        return;
    };
    let timeout = 15;
    let empties = raw_frame(&empty_interfaces_join(1_390_000), false);
    let mut bomb_json = br#"{"type":"join","listeners":[],"facts":"#.to_vec();
    bomb_json.extend(std::iter::repeat_n(b' ', 64 << 20));
    bomb_json.extend_from_slice(br#"{}}"#);
    let bomb = raw_frame(&bomb_json, true);
    assert!(bomb.len() < 300 << 10, "{}", bomb.len());
    // Under the frame cap, plain and deflated: counted while read (and inflated).
    let small = raw_frame(&empty_interfaces_join(300_000), false);
    let packed = raw_frame(&empty_interfaces_join(1_400_000), true);
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
        raw_frame(json.as_bytes(), true)
    };
    let kinds = [empties, bomb, small, packed, busy];
    let rank0 = honest(&c, 2, &[0], timeout);
    let started = Instant::now();
    let answers: Vec<String> = c.enter(HOSTILE, || {
        thread::scope(|s| {
            let joins: Vec<_> = (0..10)
                .map(|i| {
                    let (c, frame) = (&c, &kinds[i % 5]);
                    s.spawn(move || join_answer(c, frame))
                })
                .collect();
            joins.into_iter().map(|t| t.join().unwrap()).collect()
        })
    });
    eprintln!("join bombs: refused within {:?}", started.elapsed());
    for (i, a) in answers.iter().enumerate() {
        let want = match i % 5 {
            0 => "exceeds the 1048576-byte cap",
            1 => "larger than 1048576 bytes",
            4 => "more than 64 items at facts.net.interfaces[].ipv4",
            _ => "more than 256 items at facts.net.interfaces",
        };
        assert!(a.contains(want), "attacker {i}: {a}");
    }
    let runs = rank0.with(honest(&c, 2, &[1], timeout)).finish();
    assert_bounded("join bombs", &runs, timeout);
    let r0 = run_of(&runs, 0);
    let text = serde_json::to_string(&r0.findings("cluster.refused")).unwrap();
    // One refusal per address, rank and kind: the first of the ten is kept.
    assert!(
        text.contains("1048576") || text.contains("facts.net.interfaces"),
        "{text}"
    );
    assert!(r0.stderr.contains("rank 1 joined"), "{}", r0.describe());
}

/// A link result full of lies, as the hostile rank 2 sends it about its link to `to`.
fn lies(to: &Peer) -> Vec<LinkResult> {
    let at = &to.listeners[0];
    let base = LinkResult {
        from: HOSTILE as u32,
        to: to.rank,
        interface: at.interface.as_str().into(),
        address: at.address.as_str().into(),
        port: at.port,
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
            rtt_p99_us: Some(f32::MAX),
            ..base.clone()
        },
        LinkResult {
            rtt_us: Some(10.0),
            mtu: Some(u32::MAX),
            ..base
        },
    ]
}

/// Four 64 MiB deflate bombs (about 64 KiB on the wire) to every data listener of the honest
/// `peers`, each after a good handshake as rank 2 of 3, from threads the caller joins later:
/// each says whether its bomb was written.
fn bomb_listeners(peers: &[Peer], token: &str) -> Vec<thread::JoinHandle<bool>> {
    let bomb = Arc::new(raw_frame(&vec![b' '; 64 << 20], true));
    let honest = peers.iter().filter(|p| p.rank != HOSTILE as u32);
    let aims = honest.flat_map(|p| {
        p.listeners
            .iter()
            .map(|l| (p.rank, host_port(&l.address, l.port)))
    });
    aims.flat_map(|aim| std::iter::repeat_n(aim, 4))
        .map(|(rank, at)| {
            let (bomb, token) = (bomb.clone(), token.to_string());
            thread::spawn(move || {
                let Ok(mut d) = TcpStream::connect(&at) else {
                    return false;
                };
                let secret = Secret::token(&token);
                if auth::connect(&mut d, &secret, HOSTILE as u32, 3, Some(rank)).is_err() {
                    return false;
                }
                let sent = d.write_all(&bomb).is_ok();
                d.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let _ = d.read(&mut [0u8; 1]);
                sent
            })
        })
        .collect()
}

/// The hostile rank 2, inside its namespace: it joins with a listener of its own, then, told to
/// probe, sends deflate bombs to both honest nodes' data listeners and answers with impossible
/// measurements, or (`big`) with 31 MiB of links; a second-pass probe gets the same. Returns how
/// many bombs went through a handshake and were written.
fn lie_after_the_handshake(c: &Cluster, big: bool, timeout_s: u64) -> usize {
    let me = c.addr(HOSTILE, "data");
    let own = TcpListener::bind((me.as_str(), 0)).expect("a listener of its own");
    let mut s = authenticated(&master(c), c.token(), HOSTILE as u32, 3, 0);
    let facts = NodeFacts {
        hostname: "liar".into(),
        host_id: "liar-host".into(),
        ..Default::default()
    };
    let listener = Listener {
        interface: "eth0".into(),
        address: me.clone(),
        port: own.local_addr().unwrap().port(),
    };
    s.write_all(&join_frame(facts, vec![listener])).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(timeout_s + 20)))
        .ok();
    let mut bombs = Vec::new();
    while let Ok(msg) = read_msg::<_, Msg>(&mut s) {
        let reply = match msg {
            Msg::Probe { peers, .. } => {
                bombs.extend(bomb_listeners(&peers, c.token()));
                let rank0 = peers.iter().find(|p| p.rank == 0).expect("rank 0 to probe");
                if big {
                    // 31 MiB of links: under the old 32 MiB cap, far over the answer budget
                    // of 3 nodes.
                    let link = LinkResult {
                        from: HOSTILE as u32,
                        address: "x".repeat(1 << 10).into(),
                        ..Default::default()
                    };
                    Msg::ProbeDone {
                        links: vec![link; 31 << 10],
                        resolved: None,
                    }
                } else {
                    Msg::ProbeDone {
                        links: lies(rank0),
                        resolved: None,
                    }
                }
            }
            Msg::Bulk { .. } => Msg::BulkDone { links: vec![] },
            Msg::Mtu { .. } => Msg::MtuDone { links: vec![] },
            Msg::Report { .. } => break,
            _ => continue,
        };
        if write_msg(&mut s, &reply).is_err() {
            break;
        }
    }
    bombs
        .into_iter()
        .filter_map(|b| b.join().ok())
        .filter(|&sent| sent)
        .count()
}

/// Honest ranks 0 and 1 of 3 and the hostile rank 2 after the handshake (see
/// [`lie_after_the_handshake`]): both honest nodes refuse the bombs at their data listeners and
/// stay bounded. Returns their runs.
fn hostile_peer(tag: &str, big: bool) -> Option<Vec<NodeRun>> {
    let c = cluster(tag)?;
    let timeout = 12;
    let running = honest(&c, 3, &[0, 1], timeout);
    let bombs = c.enter(HOSTILE, || lie_after_the_handshake(&c, big, timeout));
    let runs = running.finish();
    let attack = if big { "31 MiB answer" } else { "lies" };
    eprintln!("{attack}: {bombs} bombs written after a good handshake");
    assert!(
        bombs >= 8,
        "{bombs} bombs:\n{}",
        run_of(&runs, 0).describe()
    );
    for r in &runs {
        let refused = "a frame of 65194 bytes exceeds the 512-byte cap";
        assert!(r.stderr.contains(refused), "{}", r.describe());
    }
    assert_bounded(&format!("{attack} + bombs"), &runs, timeout);
    Some(runs)
}

/// Lies after the handshake: both honest nodes stay bounded through the bombs at their data
/// listeners, and rank 0 marks the impossible measurements `invalid` naming rank 2, never `ok`.
#[test]
fn a_hostile_peer_after_the_handshake_is_bounded_and_its_lies_invalid() {
    let Some(runs) = hostile_peer("hlies", false) else {
        return;
    };
    let r0 = run_of(&runs, 0);
    let from2: Vec<&Value> = r0.links().into_iter().filter(|l| l["from"] == 2).collect();
    assert!(!from2.is_empty(), "{}", r0.describe());
    for l in &from2 {
        assert_eq!(l["result"], "invalid", "{l}");
        let e = l["error"].as_str().unwrap();
        assert!(e.starts_with("rank 2 (liar) reported"), "{e}");
        assert!(
            l["rtt_us"].is_null() && l["rtt_p99_us"].is_null() && l["mtu"].is_null(),
            "{l}"
        );
    }
    // The lies are named as evidence, and kept out of every number.
    let errors: Vec<&str> = from2.iter().filter_map(|l| l["error"].as_str()).collect();
    assert!(
        errors.iter().any(|e| e.contains("an MTU of 4294967295")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("a round trip of -5")),
        "{errors:?}"
    );
}

/// A 31 MiB answer (under the old 32 MiB cap) costs rank 0 the budget of a 3-node answer, not
/// hundreds of MiB: rank 2 is lost for that phase, and both honest nodes stay bounded.
#[test]
fn a_31_mib_answer_is_refused_at_its_budget() {
    let Some(runs) = hostile_peer("hbig", true) else {
        return;
    };
    let r0 = run_of(&runs, 0);
    assert!(
        r0.stderr
            .contains("lost rank 2 during the connectivity test: a frame of"),
        "{}",
        r0.describe()
    );
    assert!(
        r0.links()
            .iter()
            .all(|l| l["from"] != 2 || l["address"].as_str().unwrap().len() < 64)
    );
}

/// A peer that advertises a data listener on a host that did not join (192.0.2.7, which has no
/// route from any namespace), on the master port or on port 0 is refused at join, named in
/// `cluster.refused` with kind `listener`; the honest rank 1 joins after it and nobody
/// connects there.
#[test]
fn a_peer_cannot_aim_the_cluster_at_another_host() {
    let Some(c) = cluster("hscan") else {
        return;
    };
    let timeout = 8;
    let me = c.addr(HOSTILE, "data");
    let frames: Vec<Vec<u8>> = [
        ("192.0.2.7", 22u16),
        (me.as_str(), MASTER_PORT),
        (me.as_str(), 0),
    ]
    .into_iter()
    .map(|(address, port)| {
        let facts = NodeFacts {
            hostname: "scanner".into(),
            ..Default::default()
        };
        let listener = Listener {
            interface: "eth0".into(),
            address: address.into(),
            port,
        };
        join_frame(facts, vec![listener])
    })
    .collect();
    let rank0 = honest(&c, 2, &[0], timeout);
    let answers: Vec<String> = c.enter(HOSTILE, || {
        frames.iter().map(|f| join_answer(&c, f)).collect()
    });
    assert!(
        answers[0].contains("Listener") && answers[0].contains("192.0.2.7:22"),
        "{answers:?}"
    );
    // The address it connected from is the hostile host's: its traffic crossed the bridge.
    let from = answers[0]
        .split("connected from (")
        .nth(1)
        .unwrap_or_default();
    assert!(
        from.starts_with(&me) || from.starts_with(&format!("::ffff:{me})")),
        "{answers:?}"
    );
    assert!(
        answers[1].contains(&format!("port {MASTER_PORT}")),
        "{answers:?}"
    );
    assert!(answers[2].contains("port 0"), "{answers:?}");
    let runs = rank0.with(honest(&c, 2, &[1], timeout)).finish();
    assert_bounded("port scan", &runs, timeout);
    let r0 = run_of(&runs, 0);
    let refused = r0.findings("cluster.refused");
    assert!(
        refused.iter().any(|f| f["evidence"]["kind"] == "listener"
            && f["summary"].as_str().unwrap().contains("192.0.2.7:22")),
        "{refused:?}\n{}",
        r0.describe()
    );
    for r in &runs {
        assert!(
            !r.stdout.contains("\"address\":\"192.0.2.7\""),
            "a link to the stranger: {}",
            r.describe()
        );
    }
}
