//! The agent: what every node runs. Probes itself, joins the coordinator on the master port,
//! serves and runs the measurements it is asked for, and prints the report it gets back.

use super::allreduce_node::{self, NodeState};
use super::auth::{self, AuthError, Secret};
use super::coordinator::{self, CoordConfig};
use super::launcher::{self, LocalIdentity, Placement};
use super::wire::{Listener, Msg, Peer, Target, WireError, read_msg, write_msg};
use super::{Timing, allreduce, log};
use crate::cli::ClusterArgs;
use crate::measure::{mtu, tcp};
use crate::node::probe_facts;
use preflight_checks::cluster::master_unreachable;
use preflight_checks::model::{
    self, Finding, LinkOutcome, LinkResult, Mode, NodeEntry, NodeFacts, Report, SCHEMA,
};
use preflight_checks::probe;
use preflight_checks::root::Root;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Runs this node's part of `preflight cluster`; returns the exit code.
pub fn run(args: ClusterArgs) -> anyhow::Result<u8> {
    run_with(args, Vec::new(), None)
}

/// Made from the report this node is about to print: findings to add to it, and text to print
/// after the table (never in JSON, which stays one object).
pub type Addendum<'a> = &'a dyn Fn(&Report) -> (Vec<Finding>, Option<String>);

/// [`run`], with `extra` findings (this node's) added to the report it prints, and an
/// [`Addendum`] made from that final report; the status is recomputed over everything.
pub fn run_with(
    args: ClusterArgs,
    extra: Vec<Finding>,
    addendum: Option<Addendum>,
) -> anyhow::Result<u8> {
    let finish = |report: &Report, args: &ClusterArgs, rank: u32| {
        finish(report, args, rank, &extra, addendum)
    };
    let root = Root::at(&args.probe.root);
    let env = probe::env::all();
    let net = probe::net::probe(&root);
    let (hostname, _, _) = probe::env::identity(&root);
    let me = LocalIdentity {
        hostname,
        addrs: net
            .interfaces
            .iter()
            .flat_map(|i| i.usable_addrs())
            .map(|a| a.addr)
            .collect(),
    };
    let placement = launcher::resolve(&args, &env, &me).map_err(|e| anyhow::anyhow!("{e}"))?;
    // The rendezvous (bind, join, the port probed here) uses the coordinator's port; the
    // advice and the port checks keep the job's own master port (they differ under torchrun).
    let job_master_port = placement.master_port;
    let coordinator_note = placement.coordinator_note.clone();
    if let Some(note) = &coordinator_note {
        log(note);
    }
    let placement = placement.for_rendezvous();
    let timing = Timing::from_args(&args);
    let plan = allreduce_plan(&args).map_err(|e| anyhow::anyhow!("{e}"))?;
    let secret = Secret::derive(
        args.token.as_deref(),
        placement.job_id.as_deref(),
        &placement.master_addr,
        placement.master_port,
    );
    log(&format!(
        "rank {} of {} (from {}), master {}:{}",
        placement.rank,
        placement.nnodes,
        placement.source,
        placement.master_addr,
        placement.master_port
    ));
    let facts = probe_facts(&root, placement.master_port, args.probe.no_gpu);

    // Rank 0 hosts the coordinator on the master port itself: joining proves that port is open.
    let coordinator = if placement.rank == 0 {
        match bind_master(placement.master_port) {
            Ok(listener) => {
                let cfg = CoordConfig {
                    nnodes: placement.nnodes,
                    master_port: job_master_port,
                    join_timeout: Duration::from_secs(args.timeout),
                    timing,
                    expected_hosts: placement.expected_hosts.clone(),
                    secret: secret.clone(),
                    nproc_per_node: args.job.nproc_per_node,
                    expect_gpus: args.job.expect_gpus,
                    script: args.script.clone(),
                    allreduce: plan.clone(),
                    min_busbw: args.min_busbw,
                    progress: args.job.format == crate::cli::Format::Table,
                    coordinator_note,
                };
                Some(
                    std::thread::Builder::new()
                        .name("coordinator".into())
                        .spawn(move || coordinator::run(listener, cfg))?,
                )
            }
            Err(e) => {
                log(&format!(
                    "cannot host the coordinator on port {}: {e}",
                    placement.master_port
                ));
                let report = solo_report(&placement, facts, &args, Vec::new());
                return finish(&report, &args, placement.rank);
            }
        }
    } else {
        None
    };

    // Data listeners: a random high port per candidate address, as NCCL does.
    let servers = start_data_servers(&facts, &secret, placement.rank);
    let listeners: Vec<Listener> = servers.iter().map(|s| s.listener.clone()).collect();

    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut node = NodeState::new(
        placement.rank,
        placement.nnodes,
        secret.clone(),
        facts.clone(),
    );
    let report = match join(&placement, &secret, deadline, timing) {
        Ok(mut stream) => {
            match serve_orders(&mut stream, &placement, &mut node, listeners, &args) {
                Ok(report) => report,
                Err(e) => {
                    let f = lost_coordinator(&placement, &e);
                    solo_report(&placement, facts, &args, vec![f])
                }
            }
        }
        Err((outcome, error)) => {
            let waited = Duration::from_secs(args.timeout).as_secs_f64();
            let f = master_unreachable(
                placement.rank,
                &placement.master_addr,
                placement.master_port,
                outcome,
                waited,
                &error,
            )
            .on_node(Some(placement.rank));
            solo_report(&placement, facts, &args, vec![f])
        }
    };
    let report = match coordinator {
        // Rank 0 prints what the coordinator decided (it is the same report it sent to everyone).
        Some(h) => h.join().unwrap_or(report),
        None => report,
    };
    drop(servers);
    finish(&report, &args, placement.rank)
}

/// The all-reduce plan from `--allreduce`, `--sizes`, `--compare-env` and the timing flags.
fn allreduce_plan(args: &ClusterArgs) -> Result<allreduce::Plan, String> {
    let (default_sizes, warmup, iters) = if args.quick {
        ("1M:16M", 1, 2)
    } else if args.thorough {
        ("1M:1G", 2, 20)
    } else {
        ("1M:256M", 1, 5)
    };
    let spec = args.sizes.as_deref().unwrap_or(default_sizes);
    let sizes =
        crate::measure::sizes::parse_sizes(spec).map_err(|e| format!("--sizes {spec}: {e}"))?;
    Ok(allreduce::Plan {
        mode: args.allreduce,
        sizes,
        compare_env: args.compare_env.clone().unwrap_or_default().0,
        streams: 4,
        warmup,
        iters,
        step_timeout: Duration::from_secs(30),
    })
}

/// Binds the master port on every address, dual stack, as torchrun does.
fn bind_master(port: u16) -> std::io::Result<TcpListener> {
    let sock = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None);
    let v6 = sock.and_then(|s| {
        s.set_only_v6(false)?;
        s.set_reuse_address(true)?;
        s.bind(&SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)).into())?;
        s.listen(128)?;
        Ok(TcpListener::from(s))
    });
    match v6 {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(e),
        Err(_) => TcpListener::bind(("0.0.0.0", port)),
    }
}

/// A data server and the listener entry peers are told about.
struct Served {
    listener: Listener,
    _tcp: tcp::DataServer,
    _udp: Option<mtu::EchoServer>,
}

fn start_data_servers(facts: &NodeFacts, secret: &Secret, rank: u32) -> Vec<Served> {
    let mut out = Vec::new();
    for iface in facts.net.interfaces.iter().filter(|i| i.up) {
        for a in iface
            .ipv4
            .iter()
            .filter(|a| preflight_checks::net::is_usable_addr(&a.addr))
        {
            match tcp::DataServer::start(a.addr, secret.clone(), rank) {
                Ok(server) => {
                    let port = server.addr.port();
                    let udp = mtu::EchoServer::start(a.addr, port, secret).ok();
                    out.push(Served {
                        listener: Listener {
                            interface: iface.name.clone(),
                            address: a.addr.to_string(),
                            port,
                        },
                        _tcp: server,
                        _udp: udp,
                    });
                }
                Err(e) => log(&format!(
                    "cannot listen on {} ({}): {e}",
                    a.addr, iface.name
                )),
            }
        }
    }
    out
}

/// Connects to the coordinator, retrying until `deadline`; tells timeout, refused and unreachable apart.
fn join(
    p: &Placement,
    secret: &Secret,
    deadline: Instant,
    timing: Timing,
) -> Result<TcpStream, (LinkOutcome, String)> {
    let mut last = (LinkOutcome::Timeout, "no attempt finished".to_string());
    let mut attempts = 0u32;
    while Instant::now() < deadline {
        attempts += 1;
        let addrs: Vec<SocketAddr> = match (p.master_addr.as_str(), p.master_port).to_socket_addrs()
        {
            Ok(a) => a.collect(),
            Err(e) => {
                last = (
                    LinkOutcome::Unreachable,
                    format!("cannot resolve {}: {e}", p.master_addr),
                );
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        let Some(addr) = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
        else {
            last = (
                LinkOutcome::Unreachable,
                format!("{} resolves to no address", p.master_addr),
            );
            break;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt_timeout = timing.connect_timeout.max(Duration::from_secs(2)).min(left);
        if attempt_timeout.is_zero() {
            break;
        }
        match tcp::connect(addr, attempt_timeout) {
            Ok(mut s) => match auth::connect(&mut s, secret, p.rank, p.nnodes, Some(0)) {
                Ok(_) => return Ok(s),
                Err(
                    e @ (AuthError::NotPreflight(_)
                    | AuthError::BadProof
                    | AuthError::Version { .. }
                    | AuthError::Rejected(_)),
                ) => {
                    let what = match e {
                        AuthError::NotPreflight(_) => format!(
                            "{}:{} answered but is not preflight ({e}); something else holds the master port there, e.g. a leftover torchrun",
                            p.master_addr, p.master_port
                        ),
                        _ => e.to_string(),
                    };
                    return Err((LinkOutcome::Error, what));
                }
                Err(e) => last = (LinkOutcome::Error, e.to_string()),
            },
            Err((outcome, msg)) => {
                last = (outcome, msg);
                // Rank 0 may simply not be up yet: wait a little and try again.
                if outcome != LinkOutcome::Timeout {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
    log(&format!(
        "could not join {}:{} after {attempts} attempts: {}",
        p.master_addr, p.master_port, last.1
    ));
    Err(last)
}

/// After joining: send facts, then answer orders until the report arrives.
fn serve_orders(
    stream: &mut TcpStream,
    p: &Placement,
    node: &mut NodeState,
    listeners: Vec<Listener>,
    args: &ClusterArgs,
) -> Result<Report, WireError> {
    let secret = &node.secret.clone();
    stream.set_write_timeout(Some(Duration::from_secs(30))).ok();
    write_msg(
        stream,
        &Msg::Join {
            facts: Box::new(node.facts.clone()),
            listeners,
        },
    )?;
    log("joined; waiting for the other nodes and the measurements");
    // The coordinator may wait up to the join timeout for others, then run the phases.
    let idle_limit = Duration::from_secs(args.timeout) + Duration::from_secs(60);
    loop {
        stream.set_read_timeout(Some(idle_limit)).ok();
        let msg: Msg = read_msg(stream)?;
        if let Some(reply) = allreduce_node::handle(node, &msg, stream) {
            write_msg(stream, &reply?)?;
            continue;
        }
        let reply = match msg {
            Msg::Probe {
                peers,
                pings,
                connect_timeout_ms,
            } => Msg::ProbeDone {
                links: probe_peers(
                    p.rank,
                    p.nnodes,
                    &peers,
                    pings,
                    Duration::from_millis(connect_timeout_ms),
                    secret,
                ),
            },
            Msg::Bulk {
                targets,
                duration_ms,
            } => Msg::BulkDone {
                links: bulk_targets(
                    p.rank,
                    p.nnodes,
                    &targets,
                    Duration::from_millis(duration_ms),
                    secret,
                ),
            },
            Msg::Mtu { targets, max_mtu } => Msg::MtuDone {
                links: mtu_targets(p.rank, &targets, max_mtu, secret),
            },
            Msg::Report { report } => return Ok(*report),
            Msg::Reject { reason } => {
                return Err(WireError::Malformed(format!(
                    "rejected by the coordinator: {reason}"
                )));
            }
            other => {
                return Err(WireError::Malformed(format!(
                    "unexpected message {other:?}"
                )));
            }
        };
        write_msg(stream, &reply)?;
    }
}

fn base_link(from: u32, target_rank: u32, l: &Listener) -> LinkResult {
    LinkResult {
        from,
        to: target_rank,
        interface: l.interface.clone(),
        address: l.address.clone(),
        port: l.port,
        ..Default::default()
    }
}

/// Connects and authenticates to a peer's listener; the outcome says what went wrong.
fn open(
    my_rank: u32,
    nnodes: u32,
    rank: u32,
    l: &Listener,
    timeout: Duration,
    secret: &Secret,
) -> Result<TcpStream, (LinkOutcome, String)> {
    let ip: IpAddr = l
        .address
        .parse()
        .map_err(|_| (LinkOutcome::Error, format!("bad address {}", l.address)))?;
    let mut s = tcp::connect(SocketAddr::new(ip, l.port), timeout)?;
    match auth::connect(&mut s, secret, my_rank, nnodes, Some(rank)) {
        Ok(_) => Ok(s),
        Err(AuthError::WrongPeer { got, .. }) if got == my_rank => Err((
            LinkOutcome::Error,
            format!(
                "{} is also an address of this node: the connection reached this node itself, not rank {rank}",
                l.address
            ),
        )),
        Err(e) => Err((LinkOutcome::Error, e.to_string())),
    }
}

/// Runs `f` for every item on its own thread (bounded count), preserving order.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = items.iter().take(512).map(|it| s.spawn(|| f(it))).collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

fn probe_peers(
    me: u32,
    nnodes: u32,
    peers: &[Peer],
    pings: u32,
    timeout: Duration,
    secret: &Secret,
) -> Vec<LinkResult> {
    let work: Vec<(u32, Listener)> = peers
        .iter()
        .flat_map(|p| p.listeners.iter().map(move |l| (p.rank, l.clone())))
        .collect();
    parallel(&work, |(rank, l)| {
        let mut link = base_link(me, *rank, l);
        match open(me, nnodes, *rank, l, timeout, secret) {
            Ok(mut s) => match tcp::ping(&mut s, pings, Duration::from_secs(5)) {
                Ok(mut rtts) => {
                    link.result = LinkOutcome::Ok;
                    rtts.sort_by(f64::total_cmp);
                    link.rtt_us = percentile(&rtts, 0.50);
                    link.rtt_p99_us = percentile(&rtts, 0.99);
                }
                Err(e) => {
                    link.result = LinkOutcome::Error;
                    link.error = Some(format!("ping failed: {e}"));
                }
            },
            Err((outcome, e)) => {
                link.result = outcome;
                link.error = Some(e);
            }
        }
        link
    })
}

fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).map(|v| (v * 10.0).round() / 10.0)
}

fn bulk_targets(
    me: u32,
    nnodes: u32,
    targets: &[Target],
    dur: Duration,
    secret: &Secret,
) -> Vec<LinkResult> {
    parallel(targets, |t| {
        let mut link = base_link(me, t.rank, &t.listener);
        match open(
            me,
            nnodes,
            t.rank,
            &t.listener,
            Duration::from_secs(3),
            secret,
        ) {
            Ok(mut s) => match tcp::bulk(&mut s, dur, dur + Duration::from_secs(10)) {
                Ok(gbit) => {
                    link.result = LinkOutcome::Ok;
                    link.throughput_gbit_s = Some((gbit * 1000.0).round() / 1000.0);
                }
                Err(e) => {
                    link.result = LinkOutcome::Error;
                    link.error = Some(format!("throughput test failed: {e}"));
                }
            },
            Err((outcome, e)) => {
                link.result = outcome;
                link.error = Some(e);
            }
        }
        link
    })
}

fn mtu_targets(me: u32, targets: &[Target], max_mtu: u32, secret: &Secret) -> Vec<LinkResult> {
    parallel(targets, |t| {
        let mut link = base_link(me, t.rank, &t.listener);
        let peer = t
            .listener
            .address
            .parse::<IpAddr>()
            .map(|ip| SocketAddr::new(ip, t.listener.port));
        match peer {
            Ok(peer) => match mtu::path_mtu(
                IpAddr::from([0, 0, 0, 0]),
                peer,
                max_mtu.clamp(576, 65535),
                secret,
            ) {
                Ok(m) => {
                    link.result = LinkOutcome::Ok;
                    link.mtu = m;
                }
                Err(e) => link.error = Some(format!("path MTU probe failed: {e}")),
            },
            Err(_) => link.error = Some(format!("bad address {}", t.listener.address)),
        }
        link
    })
}

fn lost_coordinator(p: &Placement, e: &WireError) -> Finding {
    Finding::new(
        "cluster.rendezvous",
        model::Status::Fail,
        format!("{}:{}", p.master_addr, p.master_port),
        format!(
            "rank {} lost the coordinator on {}:{} before the report arrived: {e}",
            p.rank, p.master_addr, p.master_port
        ),
    )
    .with("rank", p.rank)
    .with("error", e.to_string())
    .on_node(Some(p.rank))
    .fix(model::Fix::new(
        "rank 0 stopped or became unreachable during the run; check that preflight on rank 0 is running and rerun on every node",
    ))
}

/// A report with only this node's facts and findings, for when there is no cluster report.
fn solo_report(p: &Placement, facts: NodeFacts, args: &ClusterArgs, extra: Vec<Finding>) -> Report {
    let mut findings = super::node_findings(
        p.rank,
        &facts,
        p.master_port,
        args.job.nproc_per_node,
        args.job.expect_gpus,
    );
    findings.extend(extra);
    Report {
        schema: SCHEMA.into(),
        tool: crate::node::tool(),
        mode: Mode::Cluster,
        status: model::overall_status(&findings),
        nodes: vec![NodeEntry {
            rank: p.rank,
            hostname: facts.hostname.clone(),
            facts,
        }],
        findings,
        links: Vec::new(),
        collectives: Vec::new(),
        recommendation: None,
    }
}

fn finish(
    report: &Report,
    args: &ClusterArgs,
    rank: u32,
    extra: &[Finding],
    addendum: Option<Addendum>,
) -> anyhow::Result<u8> {
    let mut report = report.clone();
    report.findings.extend(extra.iter().cloned());
    let epilogue = addendum.and_then(|make| {
        let (findings, text) = make(&report);
        report.findings.extend(findings);
        text
    });
    report.status = model::overall_status(&report.findings);
    crate::app::emit_cluster(&report, args.job.format, args.job.output.as_deref(), rank)?;
    if let (Some(text), crate::cli::Format::Table) = (epilogue, args.job.format) {
        crate::output::stdout(&text)?;
    }
    Ok(crate::app::exit_code(&report, args.job.strict))
}
