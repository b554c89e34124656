//! The agent: what every node runs. Probes itself, joins the coordinator on the master port
//! (rank 0 hosts it), serves and runs the measurements it is asked for, and returns the report it
//! gets back.

mod data;
mod orders;

use super::coordinator;
use super::node::{measure_gpu_bandwidth, node_findings, probe_facts};
use super::phases::join::{assign, node as join};
use super::phases::state::NodeState;
use super::rendezvous::{Rendezvous, auth_finding, placement_info};
use crate::placement::{self, LocalIdentity, Placement};
use crate::report::ReportBuilder;
use crate::runtime::job::ClusterJob;
use crate::transport::auth::{Secret, SecretSource};
use crate::transport::events::Events;
use crate::transport::wire::{Listener, UNASSIGNED_RANK, WireError};
use preflight_checks::cluster::{MasterIsSelf, ThisNode, master_unreachable, refused_here};
use preflight_checks::model::{self, Finding, MasterResolution, Mode, NodeFacts, Report};
use preflight_checks::probe;
use preflight_checks::root::Root;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a node whose master address is its own waits for a rank 0 on this same machine
/// (ranks sharing a host, as in tests) before saying its master address is itself.
const MASTER_IS_SELF_GRACE: Duration = Duration::from_secs(3);

// A node without a rank says hello with the wire's unassigned rank.
const _: () = assert!(placement::RANK_AT_JOIN == UNASSIGNED_RANK);

/// What this node ends with: the report to show and its own rank.
#[derive(Debug)]
pub struct NodeDone {
    pub report: Report,
    pub rank: u32,
}

/// What this node knows before the rendezvous: where it is, its placement, its secret, its facts.
struct Start {
    root: Root,
    me: LocalIdentity,
    /// The placement the rendezvous uses (its master port is the coordinator's).
    placement: Placement,
    /// The job's own master port (the advice and the port checks keep it).
    job_master_port: u16,
    secret: Secret,
    source: SecretSource,
    facts: NodeFacts,
}

/// Runs this node's part of `preflight cluster`.
pub fn run_node(job: &ClusterJob, events: &Events) -> anyhow::Result<NodeDone> {
    let mut start = prepare(job, events)?;
    // Rank 0 hosts the coordinator on the master port itself: joining proves that port is open.
    let coordinator = if start.placement.rank == 0 {
        match host_coordinator(job, &start, events) {
            Ok(h) => Some(h),
            Err(e) => {
                events.log(format!(
                    "cannot host the coordinator on port {}: {e}",
                    start.placement.master_port
                ));
                let report = solo_report(&start, job, Vec::new());
                return Ok(NodeDone {
                    report,
                    rank: start.placement.rank,
                });
            }
        }
    } else {
        None
    };
    // Join first: a node of a c10d rendezvous learns its rank from the coordinator here, before
    // anything that depends on it (the node state, the data listeners, the report) starts.
    let joined = join_coordinator(job, &mut start, events);
    let (report, servers) = match joined {
        Ok((stream, resolution)) => take_part(job, &start, stream, resolution, events),
        Err(f) => (solo_report(&start, job, vec![*f]), Vec::new()),
    };
    let report = match coordinator {
        // Rank 0 shows what the coordinator decided (it is the same report it sent to everyone).
        Some(h) => h.join().unwrap_or(report),
        None => report,
    };
    drop(servers);
    Ok(NodeDone {
        report,
        rank: start.placement.rank,
    })
}

/// Resolves this node's placement, derives the secret, says who it is, and probes and measures
/// itself (the GPUs' copy bandwidth and matrix multiplies) before the rendezvous.
fn prepare(job: &ClusterJob, events: &Events) -> anyhow::Result<Start> {
    let root = Root::at(&job.probe.root);
    let net = probe::net::probe(&root);
    let (hostname, _, _) = probe::env::identity(&root);
    let me = LocalIdentity::of(hostname, &net);
    let resolved =
        placement::resolve(&job.placement, &job.env, &me).map_err(|e| anyhow::anyhow!("{e}"))?;
    // The rendezvous (bind, join, the port probed here) uses the coordinator's port; the
    // advice and the port checks keep the job's own master port (they differ under torchrun).
    let job_master_port = resolved.master_port;
    if let Some(note) = &resolved.coordinator_note {
        events.log(note.clone());
    }
    let placement = resolved.for_rendezvous();
    if let Err(why) = crate::runtime::fds::ensure(crate::runtime::fds::needed(
        placement.nnodes,
        placement.rank == 0,
        4,
    )) {
        events.log(why);
    }
    let (secret, source) = Secret::derive(
        job.token
            .as_ref()
            .map(|t| (t.value.as_str(), t.from.as_str())),
        placement.job_id.as_deref().zip(placement.job_id_source),
        &placement.master_addr,
        placement.master_port,
    );
    if !source.is_secret() {
        events.log(
            "no secret source (no --token, PREFLIGHT_TOKEN, --token-file or job id): anyone who can reach the master port could join; see cluster.auth",
        );
    }
    log_placement(&placement, events);
    let mut facts = probe_facts(
        &root,
        placement.master_port,
        job.probe.no_gpu,
        job.probe.seams.as_ref(),
    );
    // The GPUs' copy bandwidth, compared across the nodes (cluster.gpu-health): bounded per GPU.
    measure_gpu_bandwidth(&root, &mut facts);
    // Matrix-multiply speed and exactness, compared across the nodes (gpu.compute-*), cut off
    // at the join grace so a hung GPU is named instead of its node missing the join.
    let join_grace = job.gemm.join_grace(job.timeout);
    crate::runtime::phases::gemm::measure_gpu_compute(
        &root,
        &mut facts,
        job.gemm,
        Some(join_grace),
    );
    job.probe.overlay(&mut facts.env);
    // This node's own past runs, for rank 0's lemon rules (bounded; None with --history off).
    facts.history = crate::history::summary(&job.probe.history, &facts.hostname);
    Ok(Start {
        root,
        me,
        placement,
        job_master_port,
        secret,
        source,
        facts,
    })
}

/// Says which rank this node is and how it knows.
fn log_placement(placement: &Placement, events: &Events) {
    match &placement.c10d {
        Some(j) if !j.owner => events.log(format!(
            "rank to be assigned at join by rank 0, the node owning the c10d endpoint {}:{} ({} resolves to {}; none is an address of this node); {} nodes",
            j.endpoint,
            placement.master_port,
            j.endpoint,
            shown_addrs(&j.endpoint_addrs),
            placement.nnodes
        )),
        Some(j) => events.log(format!(
            "rank 0 of {} (this node owns the c10d endpoint {}:{}: {} is one of its addresses); hosting the coordinator, which assigns the other ranks in join order",
            placement.nnodes,
            j.endpoint,
            placement.master_port,
            shown_addrs(&j.endpoint_addrs),
        )),
        None => events.log(format!(
            "rank {} of {} (from {}), master {}:{}",
            placement.rank,
            placement.nnodes,
            placement.source,
            placement.master_addr,
            placement.master_port
        )),
    }
}

/// Binds the master port and starts the coordinator on its own thread, with the job as it is.
fn host_coordinator(
    job: &ClusterJob,
    start: &Start,
    events: &Events,
) -> std::io::Result<JoinHandle<Report>> {
    let listener = bind_master(start.placement.master_port, start.placement.nnodes)?;
    let run = Rendezvous {
        job: Arc::new(job.clone()),
        placement: start.placement.clone(),
        job_master_port: start.job_master_port,
        secret: start.secret.clone(),
        secret_source: start.source.clone(),
        own_addrs: start.me.addrs.clone(),
        events: events.clone(),
    };
    std::thread::Builder::new()
        .name("coordinator".into())
        .spawn(move || coordinator::coordinate(listener, run))
}

/// Joins rank 0's coordinator (and, under c10d, learns this node's rank from it): the control
/// stream and how the master's name resolved, or the finding that says why no join happened.
fn join_coordinator(
    job: &ClusterJob,
    start: &mut Start,
    events: &Events,
) -> Result<(TcpStream, MasterResolution), Box<Finding>> {
    let placement = &start.placement;
    // Rank 0 may still multiply up to the grace before it listens.
    let deadline = Instant::now() + job.timeout + job.gemm.join_grace(job.timeout);
    // A rank other than 0 whose master address is itself would wait for itself: give a rank 0
    // on this very machine a moment to answer, then say so instead of waiting out the timeout.
    let master_is_self = if placement.rank_pending() {
        None
    } else {
        master_is_self(placement, &start.me.addrs)
    };
    let join_deadline = match &master_is_self {
        Some(_) => deadline.min(Instant::now() + MASTER_IS_SELF_GRACE),
        None => deadline,
    };
    // A master address that is this node itself is its own cause: no other name is tried then.
    let other_names = if master_is_self.is_some() {
        Vec::new()
    } else {
        placement::other_names(
            &start.root,
            &placement.master_addr,
            placement.expected_hosts.first().map(String::as_str),
        )
    };
    let joined = join::join(
        placement,
        &start.secret,
        join_deadline,
        job.timing,
        events,
        &other_names,
    );
    let joined = match joined {
        Ok(joined) => joined,
        Err(failed) => {
            let f = join_failure(job, start, *failed, master_is_self);
            events.log(f.summary.clone());
            return Err(Box::new(f));
        }
    };
    let resolution = MasterResolution {
        name: placement.master_addr.clone(),
        addrs: joined.dialed.resolved.clone(),
        joined_via: Some(joined.via.to_string()),
        resolved_after_s: joined.late.as_ref().map(|(s, _)| *s),
        resolve_error: joined.late.map(|(_, e)| e),
        failed: joined.failed,
        worked_name: joined.worked_name,
        origins: traced_origins(&start.root, &placement.master_addr, &joined.dialed.resolved),
        passed_over: joined.passed_over,
    };
    let mut stream = joined.stream;
    if start.placement.rank_pending() {
        match assign::receive(&mut stream, &start.placement) {
            Ok(rank) => {
                start.placement.rank = rank;
                events.log(format!(
                    "rank {rank} of {} (assigned at join by rank 0, as torchrun's c10d rendezvous does)",
                    start.placement.nnodes
                ));
            }
            Err(why) => {
                events.log(format!("no rank assigned: {why}"));
                return Err(Box::new(assign::no_rank_finding(&start.placement, &why)));
            }
        }
    }
    Ok((stream, resolution))
}

/// Why the join failed, as a finding: a rank 0 that answered and refused is the cause, even on
/// this very machine; then a master address that never resolved, or is this node itself; else
/// the master was unreachable.
fn join_failure(
    job: &ClusterJob,
    start: &Start,
    failed: join::JoinFailed,
    master_is_self: Option<Finding>,
) -> Finding {
    let placement = &start.placement;
    let secret_from = secret_from(&start.source, placement);
    let this_node = ThisNode {
        rank: placement.rank,
        nnodes: placement.nnodes,
        secret_from: &secret_from,
    };
    match (failed.refusal, master_is_self) {
        (None, None) if failed.never_resolved_s.is_some() => {
            preflight_checks::cluster::master_never_resolved(
                placement.rank,
                &placement.master_addr,
                placement.master_port,
                failed.never_resolved_s.unwrap_or_default(),
                failed
                    .dialed
                    .resolve_error
                    .as_deref()
                    .unwrap_or("no answer"),
            )
        }
        (Some((kind, reason)), _) => refused_here(
            &this_node,
            &placement.master_addr,
            placement.master_port,
            kind,
            &reason,
        ),
        (None, Some(f)) => f
            .with("tried", &failed.dialed.tried)
            .with("waited_s", MASTER_IS_SELF_GRACE.as_secs_f64())
            .with("error", &failed.error),
        (None, None) => c10d_unreachable(
            preflight_checks::cluster::with_reverse_name(
                master_unreachable(
                    placement.rank,
                    &placement.master_addr,
                    placement.master_port,
                    failed.outcome,
                    job.timeout.as_secs_f64(),
                    &failed.error,
                    &failed.dialed,
                ),
                &placement.master_addr,
                probe::sys::reverse_name(&placement.master_addr).as_deref(),
            ),
            placement,
        ),
    }
}

/// After the join: this node's state and data listeners, then the coordinator's orders until
/// the report arrives (this node's own report with the reason when rank 0 refused it or went
/// away). The data servers are returned to live as long as the caller needs them.
fn take_part(
    job: &ClusterJob,
    start: &Start,
    mut stream: TcpStream,
    resolution: MasterResolution,
    events: &Events,
) -> (Report, Vec<data::Served>) {
    let placement = &start.placement;
    let mut node = NodeState::new(
        placement.rank,
        placement.nnodes,
        start.secret.clone(),
        start.facts.clone(),
        events.clone(),
        job.probe.seams.clone(),
    );
    node.facts.master_resolution = Some(resolution);
    node.root = start.root.clone();
    node.master_port = placement.master_port;
    let servers = data::start_data_servers(
        &start.facts,
        &start.secret,
        placement.rank,
        events,
        &node.admitted,
    );
    let listeners: Vec<Listener> = servers.iter().map(|s| s.listener.clone()).collect();
    let served = orders::serve_orders(
        &mut stream,
        placement,
        &mut node,
        listeners,
        job.whole_report,
        job.timeout,
    );
    let report = match served {
        Ok(report) => report,
        Err(WireError::Rejected { reason, kind }) => {
            let secret_from = secret_from(&start.source, placement);
            let this_node = ThisNode {
                rank: placement.rank,
                nnodes: placement.nnodes,
                secret_from: &secret_from,
            };
            let f = refused_here(
                &this_node,
                &placement.master_addr,
                placement.master_port,
                kind,
                &reason,
            );
            solo_report(start, job, vec![f])
        }
        Err(e) => solo_report(start, job, vec![lost_coordinator(placement, &e)]),
    };
    (report, servers)
}

/// Where each address the master's name resolved to came from here (its `/etc/hosts` line, or
/// DNS); nothing for an IP address.
fn traced_origins(root: &Root, name: &str, addrs: &[String]) -> Vec<model::AddressOrigin> {
    let bare = name.trim_matches(|c| c == '[' || c == ']');
    if bare.parse::<IpAddr>().is_ok() {
        return Vec::new();
    }
    let ips: Vec<IpAddr> = addrs.iter().filter_map(|a| a.parse().ok()).collect();
    probe::name_origin::origins(root, bare, &ips)
}

/// `cluster.rendezvous` FAIL when this node is not rank 0 and its master address is one of its
/// own; rank 0's address comes from the host list when there is one.
fn master_is_self(p: &Placement, own: &[IpAddr]) -> Option<Finding> {
    if p.rank == 0 {
        return None;
    }
    let resolved = placement::resolve_host(&p.master_addr);
    let rank0_host = p.expected_hosts.first().map(String::as_str);
    let check = |rank0: Option<(&str, &[IpAddr])>| {
        MasterIsSelf {
            id: preflight_checks::rendezvous::ids::RENDEZVOUS,
            rank: p.rank,
            master: &p.master_addr,
            port: p.master_port,
            given_as: "--master-addr",
            resolved: &resolved.addrs,
            own,
            rank0,
        }
        .judge()
    };
    // Resolve rank 0's host only when the rule fires.
    check(None)?;
    let rank0_addrs = rank0_host.map(|h| placement::resolve_host(h).addrs);
    check(rank0_host.zip(rank0_addrs.as_deref()))
}

/// Where this node's secret came from, with the value that matters, for a refused node's report.
fn secret_from(source: &SecretSource, p: &Placement) -> String {
    let endpoint = preflight_checks::net::host_port(&p.master_addr, p.master_port);
    match source {
        SecretSource::Token(from) => format!("the token from {from}"),
        SecretSource::JobId(from) => format!(
            "{from}={} with the master endpoint {endpoint}",
            p.job_id.as_deref().unwrap_or_default()
        ),
        SecretSource::EndpointOnly => {
            format!("the master endpoint {endpoint} alone (no --token or job id)")
        }
    }
}

/// Binds the master port on every address, dual stack, as torchrun does.
fn bind_master(port: u16, nnodes: u32) -> std::io::Result<TcpListener> {
    let sock = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None);
    let v6 = sock.and_then(|s| {
        s.set_only_v6(false)?;
        s.set_reuse_address(true)?;
        // Joins and the report fit a 1280-byte path even behind an MTU black hole.
        let _ = crate::measure::tcp::clamp_mss(&s, crate::measure::tcp::CONTROL_MSS);
        s.bind(&SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)).into())?;
        s.listen(crate::transport::gate::backlog_for(nnodes))?;
        Ok(TcpListener::from(s))
    });
    match v6 {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(e),
        Err(_) => {
            let l = TcpListener::bind(("0.0.0.0", port))?;
            let _ = crate::measure::tcp::clamp_mss(&l, crate::measure::tcp::CONTROL_MSS);
            Ok(l)
        }
    }
}

/// The addresses, comma-separated ("none" when empty).
fn shown_addrs(addrs: &[std::net::IpAddr]) -> String {
    if addrs.is_empty() {
        return "no address".into();
    }
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The join failure, on this node's rank; for a node waiting for a c10d rank, with why no
/// rank 0 answered: ranks come from c10d and the endpoint's host must run preflight too.
fn c10d_unreachable(f: Finding, p: &Placement) -> Finding {
    let Some(j) = p.c10d.as_ref().filter(|_| p.rank_pending()) else {
        return f.on_node(Some(p.rank));
    };
    let endpoint = preflight_checks::net::host_port(&j.endpoint, p.master_port);
    let mut f = f
        .on_node(None)
        .with("rank_source", placement::C10D_JOIN)
        .with("endpoint", &endpoint)
        .with("endpoint_addresses", shown_addrs(&j.endpoint_addrs));
    f.summary = format!(
        "{}; this node has no rank yet: ranks come from torchrun's c10d rendezvous (--rdzv-backend=c10d without --node-rank), and rank 0 is the node owning the endpoint {endpoint} ({} resolves to {}), which hosts preflight's coordinator; none answered, so that host is not running preflight, or not reachable.",
        f.summary,
        j.endpoint,
        shown_addrs(&j.endpoint_addrs)
    );
    let hint = format!(
        "run preflight with the same flags on the host that owns {endpoint} too (it becomes rank 0), or give every node --node-rank R",
    );
    f.fix = Some(match f.fix.take() {
        Some(mut fix) => {
            fix.hint = format!("{hint}; {}", fix.hint);
            fix
        }
        None => model::Fix::new(hint),
    });
    f
}

fn lost_coordinator(p: &Placement, e: &WireError) -> Finding {
    Finding::new(
        preflight_checks::rendezvous::ids::RENDEZVOUS,
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
fn solo_report(start: &Start, job: &ClusterJob, extra: Vec<Finding>) -> Report {
    let (p, source) = (&start.placement, &start.source);
    let facts = start.facts.clone();
    let mut findings = node_findings(
        p.rank,
        &facts,
        p.master_port,
        job.shape.with_nnodes(p.nnodes),
    );
    if p.rank_pending() {
        // No rank was ever assigned: this node's findings name no rank (see placement.unassigned).
        for f in &mut findings {
            f.node = None;
        }
    }
    ReportBuilder::single(Mode::Cluster, p.rank, facts)
        .placement(Some(placement_info(p)))
        .findings(findings)
        .findings([auth_finding(source, &p.master_addr, p.master_port)])
        .findings(extra)
        .build()
}
