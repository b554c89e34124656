//! Admitting nodes on the master port: the handshake, the join message, one node per rank,
//! until all joined or the join timeout ends. Who was turned away, and why, is kept.

pub mod assign;
pub mod node;

use super::ctx::{Lap, Phase, PhaseCtx};
use crate::runtime::members::JoinedNode;
use crate::runtime::members::limits::{
    ADDRESSES_PER_NODE, JOIN_READ, JoinSlots, MIN_TOTAL_ADDRESSES, NoSlot, Until, address_count,
    check_join, check_listeners, stray_listeners, total_addresses,
};
use crate::runtime::rendezvous::Rendezvous;
use crate::transport::auth::{self, AuthError};
use crate::transport::gate::{Gate, Pass, Turned, canonical};
use crate::transport::wire::{JOIN, Listener, Msg, UNASSIGNED_RANK, read_msg_budget, write_msg};
use preflight_checks::cluster::{Refusal, RefusalKind};
use preflight_checks::model::NodeFacts;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The join on rank 0: admits authenticated nodes on the coordinator's listener until every
/// rank joined or the join window ends; the measured phases begin after it.
pub struct Join {
    listener: Option<TcpListener>,
}

impl Join {
    pub fn new(listener: TcpListener) -> Join {
        Join {
            listener: Some(listener),
        }
    }
}

impl Phase for Join {
    fn name(&self) -> &'static str {
        "join"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        let Some(listener) = self.listener.take() else {
            return Lap::Untimed;
        };
        let run = ctx.run;
        let events = &run.events;
        let gate = Gate::open().sized_for(run.nnodes());
        match known_addresses(run.expected_hosts(), &run.own_addrs) {
            Ok(addrs) => gate.allow(addrs),
            Err(why) if !run.expected_hosts().is_empty() => events.log(format!(
                "coordinator: admitting any address that knows the secret: {why}"
            )),
            Err(_) => {}
        }
        let admitted = admit(listener, run, &gate);
        ctx.refused = admitted.refused;
        ctx.members = admitted.members;
        let ranks: Vec<u32> = ctx.members.iter().map(|m| m.rank).collect();
        events.log(format!(
            "coordinator: {} of {} nodes joined (ranks {:?})",
            ranks.len(),
            run.nnodes(),
            ranks
        ));
        Lap::Begin
    }
}

/// Refusals kept for the report; more are counted.
const REFUSALS_KEPT: usize = 64;

/// Ranks handed out at join to nodes that have none (torchrun's c10d rendezvous without a node
/// rank): the lowest free rank from 1 (rank 0 owns the endpoint and hosts this coordinator), in
/// the order nodes finish the handshake. A rank whose node then fails to join is free again;
/// ranks claimed explicitly are taken too, and their rank-taken rule is unchanged.
#[derive(Debug)]
pub(super) struct RankBook {
    nnodes: u32,
    taken: BTreeSet<u32>,
}

impl RankBook {
    pub(super) fn new(nnodes: u32) -> RankBook {
        RankBook {
            nnodes,
            taken: BTreeSet::new(),
        }
    }

    /// The next free rank from 1, now taken; `None` when every rank 1..nnodes-1 is.
    pub(super) fn assign(&mut self) -> Option<u32> {
        let r = (1..self.nnodes).find(|r| !self.taken.contains(r))?;
        self.taken.insert(r);
        Some(r)
    }

    /// A rank claimed explicitly, now joined.
    pub(super) fn take(&mut self, rank: u32) {
        self.taken.insert(rank);
    }

    /// An assigned rank whose node did not join after all.
    pub(super) fn release(&mut self, rank: u32) {
        self.taken.remove(&rank);
    }
}

type Book = Arc<Mutex<RankBook>>;

fn with_book<T>(book: &Book, f: impl FnOnce(&mut RankBook) -> T) -> T {
    let mut guard = book.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut guard)
}

/// The rank a refusal names: none for a node that asked for one to be assigned.
fn claimed(rank: u32) -> Option<u32> {
    (rank != UNASSIGNED_RANK).then_some(rank)
}

/// A node that passed the handshake and sent its join message.
struct Joined {
    rank: u32,
    /// The coordinator assigned the rank (the node had none).
    assigned: bool,
    stream: TcpStream,
    peer: SocketAddr,
    facts: NodeFacts,
    listeners: Vec<Listener>,
    whole_report: bool,
}

/// What one connection came to.
enum Arrival {
    Joined(Box<Joined>),
    Refused(Refusal),
}

/// What bounds the wait for the nodes, in the user's flags: the join window is `--timeout`,
/// longer while a node may still be multiplying on its GPUs; each phase after it is bounded
/// by `--timeout` too, so the whole run can take several times it.
fn join_window(run: &Rendezvous) -> String {
    let timeout = run.join_timeout().as_secs();
    let grace = run.join_grace().as_secs();
    if grace == 0 {
        format!(
            "coordinator: waiting up to {timeout} s (--timeout) for {} nodes to join; each measurement after it is bounded by --timeout too",
            run.nnodes()
        )
    } else {
        format!(
            "coordinator: waiting up to {} s for {} nodes to join: --timeout {timeout} s, and {grace} s more while a node may still be testing its GPUs (--no-gemm leaves that out); each measurement after it is bounded by --timeout too",
            timeout + grace,
            run.nnodes()
        )
    }
}

/// The nodes that joined, and those turned away.
struct Admitted {
    members: Vec<JoinedNode>,
    refused: Vec<Refusal>,
}

/// Accepts nodes until all `nnodes` joined or the join timeout ends. Connections that do not
/// speak preflight are dropped (logged); nodes that do but differ are refused and kept.
fn admit(listener: TcpListener, run: &Rendezvous, gate: &Gate) -> Admitted {
    let deadline = Instant::now() + run.join_timeout() + run.join_grace();
    run.events.log(join_window(run));
    let (tx, rx) = mpsc::channel::<Arrival>();
    listener.set_nonblocking(true).ok();
    let mut joined: BTreeMap<u32, JoinedNode> = BTreeMap::new();
    let mut refused: Vec<Refusal> = Vec::new();
    let mut turned_away = 0usize;
    let book: Book = Arc::new(Mutex::new(RankBook::new(run.nnodes())));
    let shared = Arc::new(run.clone());
    // Every node has one connection in flight after its handshake; a few more for retries.
    let slots = JoinSlots::new(run.nnodes() as usize + 32);
    // Ports no data listener may be on: the master port and the one this coordinator holds.
    let forbidden = [
        run.master_port(),
        listener
            .local_addr()
            .map_or(run.master_port(), |a| a.port()),
    ];
    while Instant::now() < deadline && (joined.len() as u32) < run.nnodes() {
        // At capacity the next node waits in the backlog until a handshake ends.
        let accepted = if gate.has_room() {
            listener.accept()
        } else {
            Err(std::io::ErrorKind::WouldBlock.into())
        };
        let got = accepted.is_ok();
        match accepted {
            Ok((stream, peer)) => match gate.enter(peer.ip()) {
                Ok(pass) => {
                    let tx = tx.clone();
                    let run = shared.clone();
                    let book = book.clone();
                    let slots = slots.clone();
                    // At most `MAX_SERVED` join threads at once; the rest wait in the backlog.
                    let served = gate.serve();
                    let _ = std::thread::Builder::new()
                        .name("join".into())
                        .spawn(move || {
                            let _served = served;
                            let at = Gates {
                                book: &book,
                                slots: &slots,
                                forbidden,
                                deadline,
                            };
                            if let Some(a) = handshake_and_join(stream, peer, &run, pass, at) {
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
                                run.expected_hosts().join(",")
                            ),
                            holder: None,
                        });
                    }
                    if turned_away.is_power_of_two() {
                        run.events.log(format!(
                            "coordinator: turned away {turned_away} connection(s) so far; latest from {peer}: {why}"
                        ));
                    }
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => run.events.log(format!("coordinator: accept failed: {e}")),
        }
        while let Ok(a) = rx.try_recv() {
            match a {
                Arrival::Refused(r) => {
                    run.events.log(format!(
                        "coordinator: refused {}{}: {}",
                        r.who(),
                        r.claimed_rank
                            .map_or(String::new(), |n| format!(" claiming rank {n}")),
                        r.reason
                    ));
                    refused.push(r)
                }
                Arrival::Joined(j) => take_place(*j, &mut joined, &mut refused, run, &book),
            }
        }
        // Accept as fast as nodes arrive; idle only when nothing is waiting.
        if !got {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // The master port is released here (listener dropped), so torchrun can use it next.
    drop_stray_listeners(&mut joined, &mut refused, run);
    let total = refused.len();
    dedup_refusals(&mut refused);
    if total > REFUSALS_KEPT {
        refused.truncate(REFUSALS_KEPT);
        run.events.log(format!(
            "coordinator: {total} refusals; the report lists the first {REFUSALS_KEPT}"
        ));
    }
    Admitted {
        members: joined.into_values().collect(),
        refused,
    }
}

/// Listeners on the address another node connected from are dropped (no node is sent there)
/// and named in `cluster.refused`; the node itself stays joined.
fn drop_stray_listeners(
    joined: &mut BTreeMap<u32, JoinedNode>,
    refused: &mut Vec<Refusal>,
    run: &Rendezvous,
) {
    let mut strays: Vec<(u32, Vec<(Listener, String)>)> = Vec::new();
    for (rank, me) in joined.iter() {
        let others: Vec<&JoinedNode> = joined.values().filter(|o| o.rank != *rank).collect();
        let found = stray_listeners(me, &others);
        if !found.is_empty() {
            strays.push((*rank, found));
        }
    }
    for (rank, found) in strays {
        let Some(me) = joined.get_mut(&rank) else {
            continue;
        };
        for (l, reason) in found {
            me.listeners.retain(|x| x != &l);
            run.events.log(format!(
                "coordinator: dropped a data listener of rank {rank} ({}): {reason}",
                me.facts.hostname
            ));
            refused.push(Refusal {
                address: canonical(me.peer.ip()).to_string(),
                claimed_rank: Some(rank),
                hostname: Some(me.facts.hostname.chars().take(64).collect()),
                kind: RefusalKind::Listener,
                reason,
                holder: None,
            });
        }
    }
}

/// What a join thread shares with the others: the rank book, the slots for joins being read,
/// the ports no listener may use, and the end of admission.
#[derive(Clone, Copy)]
struct Gates<'a> {
    book: &'a Book,
    slots: &'a JoinSlots,
    forbidden: [u16; 2],
    deadline: Instant,
}

/// A node that joined and is then refused ([`refuse`]), logged, with its host (and the holder
/// of its rank) on the refusal the report names.
fn refuse_joined(
    mut j: Joined,
    run: &Rendezvous,
    kind: RefusalKind,
    reason: String,
    hostname: String,
    holder: Option<String>,
) -> Option<Refusal> {
    run.events.log(format!(
        "coordinator: refused {} ({}) claiming rank {}: {reason}",
        j.peer.ip(),
        j.facts.hostname,
        j.rank
    ));
    match refuse(&mut j.stream, j.peer, Some(j.rank), kind, reason) {
        Arrival::Refused(r) => Some(Refusal {
            hostname: Some(hostname),
            holder,
            ..r
        }),
        _ => None,
    }
}

/// The first node with a rank keeps it; a second claimant is refused, naming both.
fn take_place(
    mut j: Joined,
    joined: &mut BTreeMap<u32, JoinedNode>,
    refused: &mut Vec<Refusal>,
    run: &Rendezvous,
    book: &Book,
) {
    if let Some(first) = joined.get(&j.rank) {
        let holder = format!("{} ({})", canonical(first.peer.ip()), first.facts.hostname);
        let reason = format!(
            "rank {} already joined from {holder}; every node needs its own rank",
            j.rank
        );
        let hostname = j.facts.hostname.clone();
        refused.extend(refuse_joined(
            j,
            run,
            RefusalKind::RankTaken,
            reason,
            hostname,
            Some(holder),
        ));
        return;
    }
    let total: usize = joined.values().map(|m| address_count(&m.facts)).sum();
    let cap = total_addresses(run.nnodes());
    let mine = address_count(&j.facts);
    if total + mine > cap {
        let reason = format!(
            "it reports {mine} addresses and the nodes that joined before it {total}: more than the cluster's {cap} ({ADDRESSES_PER_NODE} per node, {MIN_TOTAL_ADDRESSES} at least), which bounds the work of finding the candidate networks"
        );
        if let Some(a) = j.assigned.then_some(j.rank) {
            with_book(book, |b| b.release(a));
        }
        let hostname = j.facts.hostname.chars().take(64).collect();
        refused.extend(refuse_joined(
            j,
            run,
            RefusalKind::Limits,
            reason,
            hostname,
            None,
        ));
        return;
    }
    with_book(book, |b| b.take(j.rank));
    // What the node's own facts cannot say: the address its connection arrived from.
    j.facts.joined_from = Some(canonical(j.peer.ip()).to_string());
    run.events.log(format!(
        "coordinator: rank {}{} joined ({})",
        j.rank,
        if j.assigned {
            " (assigned at join)"
        } else {
            ""
        },
        j.facts.hostname
    ));
    joined.insert(
        j.rank,
        JoinedNode {
            rank: j.rank,
            stream: j.stream,
            peer: j.peer,
            facts: j.facts,
            listeners: j.listeners,
            whole_report: j.whole_report,
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

/// Why a node started for another cluster size, or claiming a rank past it, is refused.
fn nnodes_mismatch(theirs: u32, rank: u32, nnodes: u32) -> Option<String> {
    let asks = rank == UNASSIGNED_RANK;
    if theirs == nnodes && (asks || rank < nnodes) {
        return None;
    }
    let claim = if asks {
        "a node waiting for its rank (c10d)".to_string()
    } else {
        format!("rank {rank}")
    };
    Some(if theirs != nnodes {
        format!("rank 0 expects {nnodes} nodes; {claim} was started with --nnodes={theirs}")
    } else {
        format!(
            "rank 0 expects {nnodes} nodes (ranks 0 to {}); this node said rank {rank}",
            nnodes.saturating_sub(1)
        )
    })
}

/// A rank for a node that has none (c10d), told to it: the rank, or what becomes of the
/// connection (a refusal when every rank is taken; nothing when it cannot be told).
fn assign(
    stream: &mut TcpStream,
    peer: SocketAddr,
    run: &Rendezvous,
    book: &Book,
) -> Result<u32, Option<Arrival>> {
    let Some(rank) = with_book(book, RankBook::assign) else {
        let last = run.nnodes().saturating_sub(1);
        let reason = format!(
            "more nodes joined than --nnodes={}: every rank 1..{last} was already assigned at join (c10d), so this one is left out; run preflight on exactly {} nodes, or raise --nnodes on every node",
            run.nnodes(),
            run.nnodes()
        );
        return Err(Some(refuse(
            stream,
            peer,
            None,
            RefusalKind::Nnodes,
            reason,
        )));
    };
    stream.set_write_timeout(Some(Duration::from_secs(5))).ok();
    if let Err(e) = write_msg(stream, &Msg::Assigned { rank }) {
        with_book(book, |b| b.release(rank));
        run.events.log(format!(
            "coordinator: could not tell {peer} its assigned rank {rank}: {e}"
        ));
        return Err(None);
    }
    run.events.log(format!(
        "coordinator: assigned rank {rank} to {peer} (c10d)"
    ));
    Ok(rank)
}

/// Runs one connection's handshake and join; `None` when it was not preflight at all.
fn handshake_and_join(
    mut stream: TcpStream,
    peer: SocketAddr,
    run: &Rendezvous,
    pass: Pass,
    at: Gates,
) -> Option<Arrival> {
    let book = at.book;
    stream.set_nonblocking(false).ok()?;
    stream.set_nodelay(true).ok();
    let info = match auth::accept(&mut stream, &run.secret, 0) {
        Ok(info) => info,
        Err(AuthError::ClientBadProof { rank, .. }) => {
            return Some(Arrival::Refused(Refusal {
                address: canonical(peer.ip()).to_string(),
                claimed_rank: claimed(rank),
                hostname: None,
                kind: RefusalKind::Secret,
                reason: "it does not know the job's secret (another --token, --token-file, --rdzv-id or job id than rank 0)".into(),
                holder: None,
            }));
        }
        Err(AuthError::Version { theirs, rank }) => {
            return Some(Arrival::Refused(Refusal {
                address: canonical(peer.ip()).to_string(),
                claimed_rank: rank.and_then(claimed),
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
            run.events
                .log(format!("coordinator: dropped connection from {peer}: {e}"));
            return None;
        }
    };
    // Authenticated: the handshake slot is free again, and a join slot is taken (joins read
    // at once are counted after the handshake too). A node that waits past the admission
    // deadline for one is refused.
    drop(pass);
    let _reading = match at.slots.take(at.deadline) {
        Ok(slot) => slot,
        Err(why) => {
            let reason = match why {
                NoSlot::Full(cap) => format!(
                    "{cap} authenticated connections were already joining (--nnodes={} and 32 more)",
                    run.nnodes()
                ),
                NoSlot::Late => format!(
                    "{} other joins were being read until the join timeout ended",
                    crate::runtime::members::limits::JOINS_IN_FLIGHT
                ),
            };
            return Some(refuse(
                &mut stream,
                peer,
                claimed(info.rank),
                RefusalKind::Limits,
                reason,
            ));
        }
    };
    let asks = info.rank == UNASSIGNED_RANK;
    if let Some(reason) = nnodes_mismatch(info.nnodes, info.rank, run.nnodes()) {
        return Some(refuse(
            &mut stream,
            peer,
            claimed(info.rank),
            RefusalKind::Nnodes,
            reason,
        ));
    }
    let rank = if asks {
        match assign(&mut stream, peer, run, book) {
            Ok(rank) => rank,
            Err(refused) => return refused,
        }
    } else {
        info.rank
    };
    let arrival = read_join(stream, peer, run, rank, asks, &at.forbidden);
    if asks && !matches!(arrival, Some(Arrival::Joined(_))) {
        with_book(book, |b| b.release(rank));
    }
    arrival
}

/// Reads the join message of an authenticated node holding `rank`.
fn read_join(
    mut stream: TcpStream,
    peer: SocketAddr,
    run: &Rendezvous,
    rank: u32,
    assigned: bool,
    forbidden: &[u16],
) -> Option<Arrival> {
    // The whole join within JOIN_READ, and within its budget while it is read.
    let read = read_msg_budget::<_, Msg>(
        &mut Until {
            stream: &stream,
            until: Instant::now() + JOIN_READ,
        },
        &JOIN,
    );
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    match read {
        Ok(Msg::Join {
            facts,
            listeners,
            whole_report,
        }) => {
            let checked = check_join(&facts, &listeners)
                .map_err(|why| (RefusalKind::Limits, why))
                .and_then(|()| {
                    check_listeners(&facts, &listeners, peer.ip(), forbidden)
                        .map_err(|why| (RefusalKind::Listener, why))
                });
            if let Err((kind, why)) = checked {
                let mut arrival = refuse(&mut stream, peer, Some(rank), kind, why);
                if let Arrival::Refused(r) = &mut arrival {
                    r.hostname = Some(facts.hostname.chars().take(64).collect());
                }
                return Some(arrival);
            }
            Some(Arrival::Joined(Box::new(Joined {
                rank,
                assigned,
                stream,
                peer,
                facts: *facts,
                listeners,
                whole_report,
            })))
        }
        Ok(other) => {
            run.events.log(format!(
                "coordinator: rank {rank} from {peer} sent {} instead of joining",
                kind(&other)
            ));
            None
        }
        Err(e) => {
            let reason = format!("its join message could not be read: {e}");
            Some(refuse(
                &mut stream,
                peer,
                Some(rank),
                RefusalKind::Limits,
                reason,
            ))
        }
    }
}

fn kind(m: &Msg) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
        .unwrap_or_else(|| "?".into())
}

/// The addresses allowed to join when the hosts are known: every address their names
/// resolve to, and this node's own. `None` (anyone may try) when the hosts are not known or a
/// name does not resolve within the bound.
fn known_addresses(hosts: &[String], own: &[IpAddr]) -> Result<Vec<IpAddr>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::job::{ClusterJob, Timing};
    use crate::transport::auth::{Secret, SecretSource};
    use crate::transport::wire::read_msg;
    use std::time::Instant;

    #[test]
    fn the_book_assigns_from_1_in_order_skips_taken_ranks_and_reuses_released_ones() {
        let mut b = RankBook::new(4);
        b.take(0);
        assert_eq!(b.assign(), Some(1));
        b.take(2); // claimed explicitly
        assert_eq!(b.assign(), Some(3));
        assert_eq!(b.assign(), None, "every rank 1..3 is taken");
        b.release(1);
        assert_eq!(b.assign(), Some(1));
        assert_eq!(
            RankBook::new(1).assign(),
            None,
            "one node: nothing to assign"
        );
    }

    fn cfg(nnodes: u32, join_timeout: Duration) -> Rendezvous {
        let mut job = ClusterJob::standalone(
            Timing {
                connect_timeout: Duration::from_secs(1),
                pings: 1,
                matchings: 1,
                bulk: Duration::from_millis(10),
            },
            crate::config::allreduce_plan(
                crate::cli::Allreduce::Off,
                None,
                None,
                true,
                false,
                Duration::from_secs(5),
            )
            .unwrap(),
        );
        job.timeout = join_timeout;
        Rendezvous::standalone(
            job,
            nnodes,
            "127.0.0.1",
            "flags",
            Secret::token("t"),
            SecretSource::Token("test".into()),
        )
    }

    /// Joins as a node: `rank` claimed (or [`UNASSIGNED_RANK`]); returns the stream and the
    /// rank it holds, or the coordinator's refusal.
    fn node(addr: SocketAddr, rank: u32, nnodes: u32) -> Result<(TcpStream, u32), String> {
        let mut s = TcpStream::connect(addr).unwrap();
        auth::connect(&mut s, &Secret::token("t"), rank, nnodes, Some(0)).unwrap();
        let rank = if rank == UNASSIGNED_RANK {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            match read_msg(&mut s).unwrap() {
                Msg::Assigned { rank } => rank,
                Msg::Reject { reason, .. } => return Err(reason),
                other => panic!("unexpected {other:?}"),
            }
        } else {
            rank
        };
        write_msg(
            &mut s,
            &Msg::Join {
                facts: Box::default(),
                listeners: Vec::new(),
                whole_report: false,
            },
        )
        .unwrap();
        Ok((s, rank))
    }

    fn start(cfg: Rendezvous) -> (SocketAddr, std::thread::JoinHandle<Admitted>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || admit(l, &cfg, &Gate::open()));
        (addr, h)
    }

    #[test]
    fn nodes_without_a_rank_get_1_and_2_in_join_order_while_the_owner_keeps_0() {
        let t = Instant::now();
        let (addr, h) = start(cfg(3, Duration::from_secs(10)));
        let (_a, ra) = node(addr, UNASSIGNED_RANK, 3).unwrap();
        let (_o, ro) = node(addr, 0, 3).unwrap();
        let (_b, rb) = node(addr, UNASSIGNED_RANK, 3).unwrap();
        assert_eq!((ra, ro, rb), (1, 0, 2));
        let admitted = h.join().unwrap();
        let ranks: Vec<u32> = admitted.members.iter().map(|m| m.rank).collect();
        assert_eq!(ranks, [0, 1, 2]);
        assert!(admitted.refused.is_empty(), "{:?}", admitted.refused);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn more_joiners_than_nnodes_are_refused_with_the_reason() {
        let (addr, h) = start(cfg(2, Duration::from_secs(2)));
        let (_a, ra) = node(addr, UNASSIGNED_RANK, 2).unwrap();
        assert_eq!(ra, 1);
        let why = node(addr, UNASSIGNED_RANK, 2).expect_err("no rank left");
        assert!(why.contains("more nodes joined than --nnodes=2"), "{why}");
        // An explicit claim of an assigned rank is still refused as taken.
        let (_c, _) = node(addr, 1, 2).unwrap();
        let admitted = h.join().unwrap();
        assert_eq!(admitted.members.len(), 1);
        let kinds: Vec<(RefusalKind, Option<u32>)> = admitted
            .refused
            .iter()
            .map(|r| (r.kind, r.claimed_rank))
            .collect();
        assert!(kinds.contains(&(RefusalKind::Nnodes, None)), "{kinds:?}");
        assert!(
            kinds.contains(&(RefusalKind::RankTaken, Some(1))),
            "{kinds:?}"
        );
        // A node with another --nnodes is refused as before, naming no rank.
        let (addr, h) = start(cfg(3, Duration::from_secs(1)));
        let why = node(addr, UNASSIGNED_RANK, 2).expect_err("nnodes differ");
        assert!(
            why.contains("rank 0 expects 3 nodes; a node waiting for its rank (c10d) was started with --nnodes=2"),
            "{why}"
        );
        assert!(h.join().unwrap().members.is_empty());
    }

    /// The cluster's address budget is shared: 16 nodes at the per-node cap fill the 4096 of a
    /// small cluster, and a 17th node is refused naming the totals.
    #[test]
    fn the_cluster_address_budget_refuses_the_join_that_would_pass_it() {
        use preflight_checks::model::{IfAddr, Interface};
        let (addr, h) = start(cfg(18, Duration::from_secs(4)));
        let full = |r: u32| {
            let mut f = NodeFacts::default();
            f.net.interfaces = vec![
                Interface {
                    name: "e".into(),
                    ipv4: (0..64)
                        .map(|i| IfAddr {
                            addr: std::net::Ipv4Addr::new(10, r as u8, i, 1).into(),
                            prefix: 24,
                        })
                        .collect(),
                    ..Default::default()
                };
                4
            ];
            f
        };
        let mut held = Vec::new();
        for r in 1..=17u32 {
            let mut s = TcpStream::connect(addr).unwrap();
            auth::connect(&mut s, &Secret::token("t"), r, 18, Some(0)).unwrap();
            write_msg(
                &mut s,
                &Msg::Join {
                    facts: Box::new(full(r)),
                    listeners: Vec::new(),
                    whole_report: false,
                },
            )
            .unwrap();
            held.push(s);
            std::thread::sleep(Duration::from_millis(50));
        }
        let admitted = h.join().unwrap();
        assert_eq!(admitted.members.len(), 16);
        // Whichever joined last (threads may reorder them) is the one refused.
        assert_eq!(admitted.refused.len(), 1, "{:?}", admitted.refused);
        let r = &admitted.refused[0];
        assert_eq!(r.kind, RefusalKind::Limits);
        assert!(
            r.reason
                .contains("it reports 256 addresses and the nodes that joined before it 4096"),
            "{}",
            r.reason
        );
    }
}
