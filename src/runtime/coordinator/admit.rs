//! Admitting nodes on the master port: the handshake, the join message, one node per rank,
//! until all joined or the join timeout ends. Who was turned away, and why, is kept.

use super::limits::check_join;
use super::{CoordConfig, JoinedNode};
use crate::transport::auth::{self, AuthError};
use crate::transport::gate::{Gate, Pass, Turned, canonical};
use crate::transport::wire::{Listener, Msg, read_msg_capped, write_msg};
use preflight_checks::cluster::{Refusal, RefusalKind};
use preflight_checks::model::NodeFacts;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Largest join message (a node's facts and listeners; a big node's are ~100 KiB).
pub(super) const JOIN_MESSAGE_CAP: usize = 4 << 20;
/// Refusals kept for the report; more are counted.
const REFUSALS_KEPT: usize = 64;

/// A node that passed the handshake and sent its join message.
struct Joined {
    rank: u32,
    stream: TcpStream,
    peer: SocketAddr,
    facts: NodeFacts,
    listeners: Vec<Listener>,
}

/// What one connection came to.
enum Arrival {
    Joined(Box<Joined>),
    Refused(Refusal),
}

/// The nodes that joined, and those turned away.
pub(super) struct Admitted {
    pub(super) members: Vec<JoinedNode>,
    pub(super) refused: Vec<Refusal>,
}

/// Accepts nodes until all `nnodes` joined or the join timeout ends. Connections that do not
/// speak preflight are dropped (logged); nodes that do but differ are refused and kept.
pub(super) fn admit(listener: TcpListener, cfg: &CoordConfig, gate: &Gate) -> Admitted {
    let deadline = Instant::now() + cfg.join_timeout;
    let (tx, rx) = mpsc::channel::<Arrival>();
    listener.set_nonblocking(true).ok();
    let mut joined: BTreeMap<u32, JoinedNode> = BTreeMap::new();
    let mut refused: Vec<Refusal> = Vec::new();
    let mut turned_away = 0usize;
    while Instant::now() < deadline && (joined.len() as u32) < cfg.nnodes {
        match listener.accept() {
            Ok((stream, peer)) => match gate.enter(peer.ip()) {
                Ok(pass) => {
                    let tx = tx.clone();
                    let cfg = cfg.clone();
                    let _ = std::thread::Builder::new()
                        .name("join".into())
                        .spawn(move || {
                            if let Some(a) = handshake_and_join(stream, peer, &cfg, pass) {
                                let _ = tx.send(a);
                            }
                        });
                }
                Err(why) => {
                    drop(stream);
                    turned_away += 1;
                    if let Turned::NotAdmitted(ip) = why {
                        refused.push(Refusal {
                            address: ip.to_string(),
                            claimed_rank: None,
                            hostname: None,
                            kind: RefusalKind::NotAdmitted,
                            reason: format!(
                                "{ip} is not an address of the hosts given ({})",
                                cfg.expected_hosts.join(",")
                            ),
                            holder: None,
                        });
                    }
                    if turned_away.is_power_of_two() {
                        cfg.events.log(format!(
                            "coordinator: turned away {turned_away} connection(s) so far; latest from {peer}: {why}"
                        ));
                    }
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => cfg.events.log(format!("coordinator: accept failed: {e}")),
        }
        while let Ok(a) = rx.try_recv() {
            match a {
                Arrival::Refused(r) => {
                    cfg.events.log(format!(
                        "coordinator: refused {}{}: {}",
                        r.who(),
                        r.claimed_rank
                            .map_or(String::new(), |n| format!(" claiming rank {n}")),
                        r.reason
                    ));
                    refused.push(r)
                }
                Arrival::Joined(j) => take_place(*j, &mut joined, &mut refused, cfg),
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The master port is released here (listener dropped), so torchrun can use it next.
    let total = refused.len();
    dedup_refusals(&mut refused);
    if total > REFUSALS_KEPT {
        refused.truncate(REFUSALS_KEPT);
        cfg.events.log(format!(
            "coordinator: {total} refusals; the report lists the first {REFUSALS_KEPT}"
        ));
    }
    Admitted {
        members: joined.into_values().collect(),
        refused,
    }
}

/// The first node with a rank keeps it; a second claimant is refused, naming both.
fn take_place(
    j: Joined,
    joined: &mut BTreeMap<u32, JoinedNode>,
    refused: &mut Vec<Refusal>,
    cfg: &CoordConfig,
) {
    if let Some(first) = joined.get(&j.rank) {
        let holder = format!("{} ({})", canonical(first.peer.ip()), first.facts.hostname);
        let reason = format!(
            "rank {} already joined from {holder}; every node needs its own rank",
            j.rank
        );
        let mut s = j.stream;
        let _ = write_msg(
            &mut s,
            &Msg::Reject {
                reason: reason.clone(),
                kind: Some(RefusalKind::RankTaken),
            },
        );
        cfg.events.log(format!(
            "coordinator: refused {} ({}) claiming rank {}: {reason}",
            j.peer.ip(),
            j.facts.hostname,
            j.rank
        ));
        refused.push(Refusal {
            address: canonical(j.peer.ip()).to_string(),
            claimed_rank: Some(j.rank),
            hostname: Some(j.facts.hostname.clone()),
            kind: RefusalKind::RankTaken,
            reason,
            holder: Some(holder),
        });
        return;
    }
    cfg.events.log(format!(
        "coordinator: rank {} joined ({})",
        j.rank, j.facts.hostname
    ));
    joined.insert(
        j.rank,
        JoinedNode {
            rank: j.rank,
            stream: j.stream,
            peer: j.peer,
            facts: j.facts,
            listeners: j.listeners,
            alive: true,
            lost: None,
        },
    );
}

/// A node that retries after a refusal is one refusal, not one per attempt.
fn dedup_refusals(refused: &mut Vec<Refusal>) {
    let mut seen = std::collections::BTreeSet::new();
    refused.retain(|r| seen.insert((r.address.clone(), r.claimed_rank, r.kind)));
}

fn refuse(
    stream: &mut TcpStream,
    peer: SocketAddr,
    rank: Option<u32>,
    kind: RefusalKind,
    reason: String,
) -> Arrival {
    let _ = write_msg(
        stream,
        &Msg::Reject {
            reason: reason.clone(),
            kind: Some(kind),
        },
    );
    Arrival::Refused(Refusal {
        address: canonical(peer.ip()).to_string(),
        claimed_rank: rank,
        hostname: None,
        kind,
        reason,
        holder: None,
    })
}

/// Runs one connection's handshake and join; `None` when it was not preflight at all.
fn handshake_and_join(
    mut stream: TcpStream,
    peer: SocketAddr,
    cfg: &CoordConfig,
    pass: Pass,
) -> Option<Arrival> {
    stream.set_nonblocking(false).ok()?;
    stream.set_nodelay(true).ok();
    let info = match auth::accept(&mut stream, &cfg.secret, 0) {
        Ok(info) => info,
        Err(AuthError::ClientBadProof { rank, .. }) => {
            return Some(Arrival::Refused(Refusal {
                address: canonical(peer.ip()).to_string(),
                claimed_rank: Some(rank),
                hostname: None,
                kind: RefusalKind::Secret,
                reason: "it does not know the job's secret (another --token, --token-file, --rdzv-id or job id than rank 0)".into(),
                holder: None,
            }));
        }
        Err(AuthError::Version { theirs, rank }) => {
            return Some(Arrival::Refused(Refusal {
                address: canonical(peer.ip()).to_string(),
                claimed_rank: rank,
                hostname: None,
                kind: RefusalKind::Version,
                reason: format!(
                    "it speaks preflight protocol {theirs}, rank 0 speaks {}",
                    crate::transport::wire::PROTO
                ),
                holder: None,
            }));
        }
        Err(e) => {
            cfg.events
                .log(format!("coordinator: dropped connection from {peer}: {e}"));
            return None;
        }
    };
    // Authenticated: the handshake slot is free again.
    drop(pass);
    if info.nnodes != cfg.nnodes || info.rank >= cfg.nnodes {
        let reason = if info.nnodes != cfg.nnodes {
            format!(
                "rank 0 expects {} nodes; rank {} was started with --nnodes={}",
                cfg.nnodes, info.rank, info.nnodes
            )
        } else {
            format!(
                "rank 0 expects {} nodes (ranks 0 to {}); this node said rank {}",
                cfg.nnodes,
                cfg.nnodes.saturating_sub(1),
                info.rank
            )
        };
        return Some(refuse(
            &mut stream,
            peer,
            Some(info.rank),
            RefusalKind::Nnodes,
            reason,
        ));
    }
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    match read_msg_capped::<_, Msg>(&mut stream, JOIN_MESSAGE_CAP) {
        Ok(Msg::Join { facts, listeners }) => {
            if let Err(why) = check_join(&facts, &listeners) {
                let mut arrival =
                    refuse(&mut stream, peer, Some(info.rank), RefusalKind::Limits, why);
                if let Arrival::Refused(r) = &mut arrival {
                    r.hostname = Some(facts.hostname.chars().take(64).collect());
                }
                return Some(arrival);
            }
            Some(Arrival::Joined(Box::new(Joined {
                rank: info.rank,
                stream,
                peer,
                facts: *facts,
                listeners,
            })))
        }
        Ok(other) => {
            cfg.events.log(format!(
                "coordinator: rank {} from {peer} sent {} instead of joining",
                info.rank,
                kind(&other)
            ));
            None
        }
        Err(e) => {
            let reason = format!("its join message could not be read: {e}");
            Some(refuse(
                &mut stream,
                peer,
                Some(info.rank),
                RefusalKind::Limits,
                reason,
            ))
        }
    }
}

pub(super) fn kind(m: &Msg) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
        .unwrap_or_else(|| "?".into())
}

/// The addresses allowed to join when the hosts are known: every address their names
/// resolve to, and this node's own. `None` (anyone may try) when the hosts are not known or a
/// name does not resolve within the bound.
pub(super) fn known_addresses(hosts: &[String], own: &[IpAddr]) -> Result<Vec<IpAddr>, String> {
    if hosts.is_empty() {
        return Err("no host list".into());
    }
    let mut out: Vec<IpAddr> = own.to_vec();
    for h in hosts {
        let r = crate::placement::resolve_host(h);
        if r.addrs.is_empty() {
            return Err(format!(
                "{h} does not resolve here ({})",
                r.error.unwrap_or_default()
            ));
        }
        out.extend(r.addrs);
    }
    Ok(out)
}
