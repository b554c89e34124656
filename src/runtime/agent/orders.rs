//! After joining: answer the coordinator's orders (connect and ping every peer, bulk throughput, path MTU, the all-reduce) until the report arrives.

use super::super::allreduce_node::{self, NodeState};
use crate::measure::{mtu, tcp};
use crate::placement::Placement;
use crate::transport::auth::{self, AuthError, Secret};
use crate::transport::events::Events;
use crate::transport::wire::{Listener, Msg, Peer, Target, WireError, read_msg, write_msg};
use preflight_checks::model::{LinkOutcome, LinkResult, Report};
use preflight_checks::stats::percentile;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

/// After joining: send facts, then answer orders until the report arrives.
pub(super) fn serve_orders(
    stream: &mut TcpStream,
    p: &Placement,
    node: &mut NodeState,
    listeners: Vec<Listener>,
    timeout: Duration,
    events: &Events,
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
    events.log("joined; waiting for the other nodes and the measurements");
    // The coordinator may wait up to the join timeout for others; every phase after that ends
    // within --timeout + 5 s. Past --timeout + 10 s of silence rank 0 is gone or stopped.
    let idle_limit = timeout + Duration::from_secs(10);
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
                admitted,
            } => {
                node.admitted
                    .allow(admitted.iter().filter_map(|a| a.parse().ok()));
                Msg::ProbeDone {
                    links: probe_peers(
                        p.rank,
                        p.nnodes,
                        &peers,
                        pings,
                        Duration::from_millis(connect_timeout_ms),
                        secret,
                    ),
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
            Msg::Mtu { targets, max_mtu } => Msg::MtuDone {
                links: mtu_targets(p.rank, &targets, max_mtu, secret),
            },
            Msg::Report { report } => return Ok(*report),
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

/// Threads one node runs at once to measure its peers.
const MAX_THREADS: usize = 256;

/// Runs `f` for every item, [`MAX_THREADS`] at a time, preserving order: every item is
/// measured (thousands of peers take a few waves), none is dropped.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let mut out = Vec::with_capacity(items.len());
    for wave in items.chunks(MAX_THREADS) {
        std::thread::scope(|s| {
            let handles: Vec<_> = wave.iter().map(|it| s.spawn(|| f(it))).collect();
            out.extend(handles.into_iter().filter_map(|h| h.join().ok()));
        });
    }
    out
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
            Ok(mut s) => match tcp::bulk(&mut s, dur, STALL.min(dur + Duration::from_secs(10))) {
                Ok(gbit) => {
                    link.result = LinkOutcome::Ok;
                    link.throughput_gbit_s = Some((gbit * 1000.0).round() / 1000.0);
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
                    ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_run_in_order_past_one_wave() {
        let items: Vec<usize> = (0..(MAX_THREADS * 2 + 7)).collect();
        assert_eq!(
            parallel(&items, |i| i * 2),
            items.iter().map(|i| i * 2).collect::<Vec<_>>()
        );
    }
}
