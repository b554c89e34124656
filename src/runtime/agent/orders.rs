//! After joining: answer the coordinator's orders (connect and ping every peer, bulk throughput, path MTU, the all-reduce) until the report arrives.

use super::super::allreduce_node::{self, NodeState};
use super::dial::{self, paced};
use super::idle::Holding;
use crate::measure::{mtu, tcp};
use crate::placement::Placement;
use crate::transport::auth::Secret;
use crate::transport::events::Events;
use crate::transport::wire::{
    Listener, Msg, Peer, Target, WireError, order_budget, read_msg_budget, write_msg,
};
use preflight_checks::model::{LinkOutcome, LinkResult, NodeFacts, Report};
use preflight_checks::stats::percentile;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// After joining: send facts, then answer orders until the report arrives.
pub(super) fn serve_orders(
    stream: &mut TcpStream,
    p: &Placement,
    node: &mut NodeState,
    listeners: Vec<Listener>,
    whole_report: bool,
    timeout: Duration,
    events: &Events,
) -> Result<Report, WireError> {
    let secret = &node.secret.clone();
    stream.set_write_timeout(Some(Duration::from_secs(30))).ok();
    // The control connection is silent for whole phases (and the idle test's wait): keepalives
    // keep a firewall or NAT between this node and rank 0 from forgetting it meanwhile.
    keep_alive(stream);
    write_msg(
        stream,
        &Msg::Join {
            facts: Box::new(node.facts.clone()),
            listeners,
            whole_report,
        },
    )?;
    events.log("joined; waiting for the other nodes and the measurements");
    // The coordinator may wait up to the join timeout for others; every phase after that ends
    // within --timeout + 5 s. Past --timeout + 10 s of silence rank 0 is gone or stopped.
    let timeout_idle = timeout + Duration::from_secs(10);
    let mut idle_limit = timeout_idle;
    // The connections the idle test holds silent between its two orders.
    let mut holding = Holding::default();
    loop {
        stream.set_read_timeout(Some(idle_limit)).ok();
        let msg: Msg = read_msg_budget(stream, &order_budget(p.nnodes))?;
        if let Some(reply) = allreduce_node::handle(node, &msg, stream) {
            write_msg(stream, &reply?)?;
            continue;
        }
        let reply = match msg {
            Msg::Probe {
                peers,
                pings,
                connect_timeout_ms,
                admitted,
                resolve,
                deadline_ms,
            } => {
                // A later probe (the second pass) names no one new: the list stands.
                if !admitted.is_empty() {
                    node.admitted
                        .allow(admitted.iter().filter_map(|a| a.parse().ok()));
                }
                let timeout = Duration::from_millis(connect_timeout_ms);
                let rank0 = super::fqdn::known_rank0(
                    peers
                        .iter()
                        .filter(|x| x.rank == 0)
                        .flat_map(|x| x.listeners.iter().filter_map(|l| l.address.parse().ok())),
                    node.facts
                        .master_resolution
                        .as_ref()
                        .and_then(|m| m.joined_via.as_deref()),
                    (p.rank == 0)
                        .then(|| super::fqdn::own_addrs(&node.facts))
                        .as_deref(),
                );
                // The order lists every node, this one too (one order for all): skip ourselves.
                let peers: Vec<Peer> = peers.into_iter().filter(|x| x.rank != p.rank).collect();
                let targets = peers.iter().map(|p| p.listeners.len()).sum();
                let budget = deadline_ms
                    .map(Duration::from_millis)
                    .unwrap_or_else(|| crate::runtime::probe_budget(timeout, pings, targets));
                // Waiting for the next order may now take as long as the slowest node's probe.
                idle_limit = idle_limit.max(timeout_idle + budget);
                // Rank 0's FQDN as this node's resolver gives it (bounded: 2 s), traced to its
                // sources, and its first address dialled when it is not rank 0's (bounded by
                // the connect timeout), beside the connects, so a c10d job's TCPStore name is
                // judged in the order its workers dial it, where they run.
                let (root, rank, port) = (node.root.clone(), p.rank, p.master_port);
                let resolved = resolve
                    .filter(|n| !n.is_empty() && n.len() <= 255)
                    .map(|n| {
                        std::thread::spawn(move || {
                            super::fqdn::lookup(&root, &n, &rank0, rank, port, timeout)
                        })
                    });
                let links = with_progress(stream, |done| {
                    probe_peers(
                        p.rank,
                        p.nnodes,
                        &peers,
                        pings,
                        timeout,
                        secret,
                        Instant::now() + budget,
                        done,
                    )
                });
                Msg::ProbeDone {
                    links,
                    resolved: resolved.and_then(|h| h.join().ok()),
                }
            }
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
            // Like the probe, the MTU test reports progress: its length grows with the peers.
            Msg::Mtu { targets, max_mtu } => Msg::MtuDone {
                links: with_progress(stream, |done| {
                    mtu_targets(p.rank, p.nnodes, targets, max_mtu, secret, done)
                }),
            },
            Msg::IdleOpen {
                targets,
                streams,
                idle_ms,
            } => {
                let idle = Duration::from_millis(idle_ms).min(crate::measure::idle::MAX_IDLE);
                // The check comes once the silence is over: the next order may take that long.
                idle_limit = idle_limit.max(timeout_idle + idle);
                let targets: Vec<Target> =
                    targets.into_iter().filter(|t| t.rank != p.rank).collect();
                holding = Holding::open(p.rank, p.nnodes, &targets, streams, idle, secret);
                if !targets.is_empty() {
                    events.log(format!(
                        "idle test: holding {} connections to rank(s) {} silent for {} s",
                        holding.count(),
                        targets
                            .iter()
                            .map(|t| t.rank.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        idle.as_secs()
                    ));
                }
                Msg::IdleHeld {
                    held: holding.count(),
                }
            }
            Msg::IdleCheck { answer_ms } => Msg::IdleDone {
                test: std::mem::take(&mut holding).check(p.rank, Duration::from_millis(answer_ms)),
            },
            Msg::Report { report } => return Ok(own_facts_back(*report, p.rank, &node.facts)),
            Msg::Reject { reason, kind } => {
                return Err(WireError::Rejected { reason, kind });
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

/// TCP keepalives on a control connection: a probe after [`KEEPALIVE_IDLE`] of silence, then
/// every [`KEEPALIVE_IDLE`]; the kernel gives the connection up only after
/// [`KEEPALIVE_PROBES`] unanswered probes (minutes), longer than any phase waits anyway.
fn keep_alive(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let ka = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_IDLE);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&ka);
    let probes = KEEPALIVE_PROBES as libc::c_int;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the stated size.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            &probes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Silence before a control connection's first keepalive probe, and between probes: shorter
/// than any firewall's or NAT's established timeout worth the name.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(2);
/// Unanswered keepalive probes before the kernel drops a control connection (2 minutes).
const KEEPALIVE_PROBES: u32 = 60;

/// A copy of the report without the other nodes' facts (above 64 nodes, see
/// `coordinator::delivery::shared_copy`) gets this node's own facts back: the ones it sent.
fn own_facts_back(mut report: Report, rank: u32, facts: &NodeFacts) -> Report {
    if let Some(trimmed) = &mut report.trimmed
        && let Some(own) = report.nodes.iter_mut().find(|n| n.rank == rank)
        && own.facts.net.interfaces.is_empty()
        && !facts.net.interfaces.is_empty()
    {
        own.facts = facts.clone();
        trimmed.facts_omitted = trimmed.facts_omitted.saturating_sub(1);
    }
    report
}

fn base_link(from: u32, target_rank: u32, l: &Listener) -> LinkResult {
    LinkResult {
        from,
        to: target_rank,
        interface: l.interface.as_str().into(),
        address: l.address.as_str().into(),
        port: l.port,
        ..Default::default()
    }
}

/// Runs `work` while a thread tells the coordinator, every [`PROBE_PROGRESS_EVERY`], how many
/// links have a result (`work` counts them in the counter it is given); the thread ends before
/// this returns, so the caller's next frame never interleaves with a progress frame.
///
/// [`PROBE_PROGRESS_EVERY`]: crate::runtime::PROBE_PROGRESS_EVERY
fn with_progress<R>(stream: &TcpStream, work: impl FnOnce(&AtomicU32) -> R) -> R {
    let done = AtomicU32::new(0);
    let mut out = stream.try_clone().ok();
    // Dropping the sender when the work is over wakes the reporter at once.
    let (over, stop) = std::sync::mpsc::channel::<()>();
    let counted = &done;
    std::thread::scope(|s| {
        s.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) =
                stop.recv_timeout(crate::runtime::PROBE_PROGRESS_EVERY)
            {
                let progress = Msg::ProbeProgress {
                    done: counted.load(Ordering::SeqCst),
                };
                // A failed write ends the reports; the answer itself tells the rest.
                if out
                    .as_mut()
                    .is_none_or(|o| write_msg(o, &progress).is_err())
                {
                    break;
                }
            }
        });
        let r = work(&done);
        drop(over);
        r
    })
}

/// Probes every peer's listeners: [`dial::CONNECT_WINDOW`] at a time, in ring order from this
/// node, each connect retried before it counts as failed; targets not reached before `until`
/// (the phase's deadline) are reported as not tried, so the answer always comes in time.
/// `done` counts the links with a result.
#[allow(clippy::too_many_arguments)]
fn probe_peers(
    me: u32,
    nnodes: u32,
    peers: &[Peer],
    pings: u32,
    timeout: Duration,
    secret: &Secret,
    until: Instant,
    done: &AtomicU32,
) -> Vec<LinkResult> {
    let mut work: Vec<(u32, Listener)> = peers
        .iter()
        .flat_map(|p| p.listeners.iter().map(move |l| (p.rank, l.clone())))
        .collect();
    work.sort_by_key(|(rank, l)| (dial::ring_offset(me, *rank, nnodes), l.address.clone()));
    let total = work.len();
    let pacer = dial::Pacer::default();
    paced(&work, dial::CONNECT_WINDOW, |(rank, l)| {
        let mut link = base_link(me, *rank, l);
        let _counted = Counted(done);
        // The whole link (connect, handshake, pings) holds a place in the adaptive window.
        let mut slot = pacer.enter();
        if Instant::now() + timeout > until {
            link.result = LinkOutcome::Error;
            link.error = Some(format!(
                "not tried: the connectivity phase's time ran out before this node reached it ({total} links to test from this node)"
            ).into());
            return link;
        }
        let started = Instant::now();
        let (opened, retries) = dial::open(me, nnodes, *rank, l, timeout, secret, until);
        slot.after(started.elapsed(), &opened, retries);
        link.retries = retries;
        match opened {
            Ok(mut s) => match tcp::ping(&mut s, pings, Duration::from_secs(5)) {
                Ok(mut rtts) => {
                    link.result = LinkOutcome::Ok;
                    rtts.sort_by(f64::total_cmp);
                    link.rtt_us = percentile(&rtts, 0.50).map(|v| v as f32);
                    link.rtt_p99_us = percentile(&rtts, 0.99).map(|v| v as f32);
                }
                // Connected and authenticated: the pair works; only its RTT is unknown.
                Err(e) => {
                    link.result = LinkOutcome::Ok;
                    link.error = Some(format!(
                        "connected and authenticated, but the pings got no answer in time (a loaded node?): {e}"
                    ).into());
                }
            },
            Err(f) => {
                link.result = f.outcome;
                link.handshake = f.handshake;
                link.error = Some(f.error.into());
            }
        }
        link
    })
}

/// Counts one link as having its result when dropped (every way out of the closure).
struct Counted<'a>(&'a AtomicU32);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn bulk_targets(
    me: u32,
    nnodes: u32,
    targets: &[Target],
    dur: Duration,
    secret: &Secret,
) -> Vec<LinkResult> {
    let until = Instant::now() + Duration::from_secs(8);
    paced(targets, dial::CONNECT_WINDOW, |t| {
        let mut link = base_link(me, t.rank, &t.listener);
        let (opened, retries) = dial::open(
            me,
            nnodes,
            t.rank,
            &t.listener,
            Duration::from_secs(3),
            secret,
            until,
        );
        link.retries = retries;
        match opened {
            Ok(mut s) => match tcp::bulk(&mut s, dur, STALL.min(dur + Duration::from_secs(10))) {
                Ok(gbit) => {
                    link.result = LinkOutcome::Ok;
                    link.throughput_gbit_s = Some(((gbit * 1000.0).round() / 1000.0) as f32);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    // Connected, authenticated, and then a large write made no progress:
                    // probe the path MTU (DF datagrams, bounded) before calling it lost.
                    link.result = LinkOutcome::Error;
                    link.stalled = true;
                    link.mtu = stalled_path_mtu(&t.listener, secret);
                    link.error = Some(format!(
                        "throughput test stalled: the connection was established but a large transfer made no progress for {} s; {}",
                        STALL.as_secs(),
                        if link.mtu.is_some() {
                            "the path MTU from don't-fragment probes is in `mtu`"
                        } else {
                            "no don't-fragment probe was answered"
                        }
                    ).into());
                }
                Err(e) => {
                    link.result = LinkOutcome::Error;
                    link.error = Some(format!("throughput test failed: {e}").into());
                }
            },
            Err(f) => {
                link.result = f.outcome;
                link.handshake = f.handshake;
                link.error = Some(f.error.into());
            }
        }
        link
    })
}

/// How long a bulk write may make no progress before the transfer counts as stalled.
const STALL: Duration = Duration::from_secs(3);

/// The path MTU to a listener whose bulk transfer stalled (bounded: about 15 probes of at
/// most 300 ms; sizes the local route refuses cost nothing).
fn stalled_path_mtu(l: &Listener, secret: &Secret) -> Option<u32> {
    let ip: IpAddr = l.address.parse().ok()?;
    let local = if ip.is_ipv6() {
        IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::from([0, 0, 0, 0])
    };
    mtu::path_mtu(local, SocketAddr::new(ip, l.port), 65535, secret)
        .ok()
        .flatten()
}

/// Path MTU to every target, [`dial::CONNECT_WINDOW`] at a time, in ring order from this node
/// as the probe dials: at any moment each echo server answers about one window of peers, not
/// every node at once (an incast that overflows its socket and reads as a narrow path).
/// `done` counts the targets done.
fn mtu_targets(
    me: u32,
    nnodes: u32,
    mut targets: Vec<Target>,
    max_mtu: u32,
    secret: &Secret,
    done: &AtomicU32,
) -> Vec<LinkResult> {
    targets.sort_by_key(|t| dial::ring_offset(me, t.rank, nnodes));
    paced(&targets, dial::CONNECT_WINDOW, |t| {
        let _counted = Counted(done);
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
                Err(e) => link.error = Some(format!("path MTU probe failed: {e}").into()),
            },
            Err(_) => link.error = Some(format!("bad address {}", t.listener.address).into()),
        }
        link
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Interface, NodeEntry, Trimmed};

    fn entry(rank: u32, interfaces: usize) -> NodeEntry {
        let mut facts = NodeFacts {
            hostname: format!("node{rank}"),
            ..Default::default()
        };
        facts.net.interfaces = vec![Interface::default(); interfaces];
        NodeEntry {
            rank,
            hostname: facts.hostname.clone(),
            facts,
        }
    }

    #[test]
    fn a_shared_copy_gets_this_nodes_facts_back() {
        let mut report =
            crate::report::ReportBuilder::new(preflight_checks::model::Mode::Cluster).build();
        report.nodes = (0..3).map(|r| entry(r, 0)).collect();
        let own = entry(1, 2).facts;
        // A whole report is left as it came.
        let whole = own_facts_back(report.clone(), 1, &own);
        assert!(whole.nodes[1].facts.net.interfaces.is_empty());
        report.trimmed = Some(Trimmed {
            facts_omitted: 3,
            ..Default::default()
        });
        let back = own_facts_back(report, 1, &own);
        assert_eq!(back.nodes[1].facts, own);
        assert!(back.nodes[0].facts.net.interfaces.is_empty());
        assert_eq!(back.trimmed.unwrap().facts_omitted, 2);
    }
}
