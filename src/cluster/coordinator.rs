//! The coordinator: runs inside rank 0 on the master port; admits authenticated nodes, schedules the
//! measurements, judges the cluster and sends every node the same report.

use super::auth::{self, Secret};
use super::wire::{Listener, Msg, Peer, Target, WireError, read_msg, write_msg};
use super::{Timing, allreduce, log};
use crate::advise::{ClusterAdviceInput, advise_cluster};
use crate::progress::Progress;
use preflight_checks::cluster::{ClusterInput, check_cluster};
use preflight_checks::collective::{CollectiveInput, check_collectives};
use preflight_checks::model::{self, LinkResult, Mode, NodeEntry, NodeFacts, Report, SCHEMA};
use preflight_checks::networks;
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the coordinator needs to know about the job.
#[derive(Clone, Debug)]
pub struct CoordConfig {
    pub nnodes: u32,
    pub master_port: u16,
    pub join_timeout: Duration,
    pub timing: Timing,
    pub expected_hosts: Vec<String>,
    pub secret: Secret,
    pub nproc_per_node: Option<u32>,
    pub expect_gpus: Option<u32>,
    pub script: Vec<String>,
    pub allreduce: super::allreduce::Plan,
    pub min_busbw: Option<f64>,
    /// Draw a progress bar on stderr (a terminal, not JSON mode).
    pub progress: bool,
    /// Why the coordinator listened on another port than the master port (under torchrun).
    pub coordinator_note: Option<String>,
}

/// A node that joined.
pub(super) struct Member {
    pub(super) rank: u32,
    pub(super) stream: TcpStream,
    pub(super) facts: NodeFacts,
    pub(super) listeners: Vec<Listener>,
    pub(super) alive: bool,
}

struct Joined {
    rank: u32,
    stream: TcpStream,
    facts: NodeFacts,
    listeners: Vec<Listener>,
}

/// Runs the whole coordination on the calling thread and returns the report it sent.
pub fn run(listener: TcpListener, cfg: CoordConfig) -> Report {
    let mut members = admit(listener, &cfg);
    let ranks: Vec<u32> = members.iter().map(|m| m.rank).collect();
    log(&format!(
        "coordinator: {} of {} nodes joined (ranks {:?})",
        ranks.len(),
        cfg.nnodes,
        ranks
    ));
    let sizes = cfg.allreduce.sizes.len() as u64;
    let configs = if cfg.allreduce.compare_env.is_empty() {
        1
    } else {
        2
    };
    let progress = Progress::new(cfg.progress, 3 + sizes * configs);
    progress.phase("connectivity");
    let mut links = probe_phase(&mut members, &cfg);
    progress.inc();
    progress.phase("throughput");
    bulk_phase(&mut members, &cfg, &mut links);
    progress.inc();
    progress.phase("path MTU");
    mtu_phase(&mut members, &mut links);
    progress.inc();
    let mut recommendation = advise(&members, &links, &cfg, BTreeMap::new());
    let evals = {
        let nodes = alive_or_joined(&members);
        let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
        networks::evaluate(&networks::discover(&nodes), &links, &ranks)
    };
    let outcome = allreduce::run(
        &mut members,
        &evals,
        &recommendation,
        &cfg.allreduce,
        &progress,
    );
    let (over, why) = allreduce::preferred_overrides(&outcome.results, &cfg.allreduce.compare_env);
    if let Some(over) = over {
        recommendation = advise(&members, &links, &cfg, over);
    }
    recommendation.reasons.extend(why);
    recommendation.reasons.extend(outcome.notes.iter().cloned());
    drop(progress);
    let report = build_report(&members, &links, &cfg, recommendation, outcome);
    for m in members.iter_mut().filter(|m| m.alive) {
        m.stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .ok();
        if let Err(e) = write_msg(
            &mut m.stream,
            &Msg::Report {
                report: Box::new(report.clone()),
            },
        ) {
            log(&format!(
                "coordinator: could not send the report to rank {}: {e}",
                m.rank
            ));
        }
    }
    report
}

/// Accepts nodes until all `nnodes` joined or the join timeout ends. Garbage and unauthenticated peers are dropped.
fn admit(listener: TcpListener, cfg: &CoordConfig) -> Vec<Member> {
    let deadline = Instant::now() + cfg.join_timeout;
    let (tx, rx) = mpsc::channel::<Joined>();
    listener.set_nonblocking(true).ok();
    let mut joined: BTreeMap<u32, Member> = BTreeMap::new();
    while Instant::now() < deadline && (joined.len() as u32) < cfg.nnodes {
        match listener.accept() {
            Ok((stream, peer)) => {
                let tx = tx.clone();
                let cfg = cfg.clone();
                let _ = std::thread::Builder::new()
                    .name("join".into())
                    .spawn(move || match handshake_and_join(stream, &cfg) {
                        Ok(j) => {
                            let _ = tx.send(j);
                        }
                        Err(e) => log(&format!("coordinator: dropped connection from {peer}: {e}")),
                    });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => log(&format!("coordinator: accept failed: {e}")),
        }
        while let Ok(j) = rx.try_recv() {
            if joined.contains_key(&j.rank) {
                let mut s = j.stream;
                let _ = write_msg(
                    &mut s,
                    &Msg::Reject {
                        reason: format!("rank {} already joined", j.rank),
                    },
                );
                log(&format!("coordinator: rejected a second rank {}", j.rank));
                continue;
            }
            log(&format!(
                "coordinator: rank {} joined ({})",
                j.rank, j.facts.hostname
            ));
            joined.insert(
                j.rank,
                Member {
                    rank: j.rank,
                    stream: j.stream,
                    facts: j.facts,
                    listeners: j.listeners,
                    alive: true,
                },
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The master port is released here (listener dropped), so torchrun can use it next.
    joined.into_values().collect()
}

fn handshake_and_join(mut stream: TcpStream, cfg: &CoordConfig) -> Result<Joined, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).ok();
    let info = auth::accept(&mut stream, &cfg.secret, 0).map_err(|e| e.to_string())?;
    if info.nnodes != cfg.nnodes || info.rank >= cfg.nnodes {
        let reason = format!(
            "this node says rank {} of --nnodes={}, rank 0 expects --nnodes={}",
            info.rank, info.nnodes, cfg.nnodes
        );
        let _ = write_msg(
            &mut stream,
            &Msg::Reject {
                reason: reason.clone(),
            },
        );
        return Err(reason);
    }
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    match read_msg::<_, Msg>(&mut stream).map_err(|e| e.to_string())? {
        Msg::Join { facts, listeners } => Ok(Joined {
            rank: info.rank,
            stream,
            facts: *facts,
            listeners,
        }),
        other => Err(format!("expected join, got {}", kind(&other))),
    }
}

fn kind(m: &Msg) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
        .unwrap_or_else(|| "?".into())
}

/// Sends each alive member its order (None: nothing for it); returns the indices of the members asked.
pub(super) fn send_orders(
    members: &mut [Member],
    phase: &str,
    order: impl Fn(&Member) -> Option<Msg>,
) -> Vec<usize> {
    let mut asked = Vec::new();
    for (i, m) in members.iter_mut().enumerate().filter(|(_, m)| m.alive) {
        let Some(msg) = order(m) else { continue };
        m.stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .ok();
        match write_msg(&mut m.stream, &msg) {
            Ok(()) => asked.push(i),
            Err(e) => lose(m, phase, &e),
        }
    }
    asked
}

/// Reads the next message from a member, waiting until `deadline` at most; a lost member is marked dead.
pub(super) fn read_reply(m: &mut Member, deadline: Instant, phase: &str) -> Option<Msg> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    m.stream.set_read_timeout(Some(left)).ok();
    match read_msg::<_, Msg>(&mut m.stream) {
        Ok(msg) => Some(msg),
        Err(e) => {
            lose(m, phase, &e);
            None
        }
    }
}

/// Sends each alive member its order (None: nothing for it) and collects the links it answers, within `limit`.
fn exchange(
    members: &mut [Member],
    limit: Duration,
    phase: &str,
    order: impl Fn(&Member) -> Option<Msg>,
) -> Vec<LinkResult> {
    let deadline = Instant::now() + limit;
    let asked = send_orders(members, phase, order);
    let mut links = Vec::new();
    for i in asked {
        let m = &mut members[i];
        match read_reply(m, deadline, phase) {
            None => {}
            Some(Msg::ProbeDone { links: l })
            | Some(Msg::BulkDone { links: l })
            | Some(Msg::MtuDone { links: l }) => {
                links.extend(l.into_iter().filter(|x| x.from == m.rank))
            }
            Some(other) => unexpected(m, phase, &other),
        }
    }
    links
}

/// A member answered out of protocol: it is dropped from the rest of the run.
pub(super) fn unexpected(m: &mut Member, phase: &str, msg: &Msg) {
    lose(
        m,
        phase,
        &WireError::Malformed(format!("unexpected {}", kind(msg))),
    );
}

fn lose(m: &mut Member, phase: &str, e: &WireError) {
    log(&format!(
        "coordinator: lost rank {} during {phase}: {e}",
        m.rank
    ));
    m.alive = false;
}

fn probe_phase(members: &mut [Member], cfg: &CoordConfig) -> Vec<LinkResult> {
    let peers: Vec<Peer> = members
        .iter()
        .map(|m| Peer {
            rank: m.rank,
            listeners: m.listeners.clone(),
        })
        .collect();
    let t = cfg.timing;
    let limit = t.connect_timeout * 2 + auth::HANDSHAKE_TIMEOUT * 2 + Duration::from_secs(10);
    exchange(members, limit, "the connectivity test", |m| {
        Some(Msg::Probe {
            peers: peers.iter().filter(|p| p.rank != m.rank).cloned().collect(),
            pings: t.pings,
            connect_timeout_ms: t.connect_timeout.as_millis() as u64,
        })
    })
}

/// Round-robin rounds of disjoint pairs (circle method): n-1 rounds for even n, n for odd.
pub fn rounds(ranks: &[u32]) -> Vec<Vec<(u32, u32)>> {
    let mut v: Vec<Option<u32>> = ranks.iter().map(|r| Some(*r)).collect();
    if v.len() % 2 == 1 {
        v.push(None);
    }
    let n = v.len();
    let mut out = Vec::new();
    if n < 2 {
        return out;
    }
    for _ in 0..n - 1 {
        let round: Vec<(u32, u32)> = (0..n / 2)
            .filter_map(|i| match (v[i], v[n - 1 - i]) {
                (Some(a), Some(b)) => Some((a.min(b), a.max(b))),
                _ => None,
            })
            .collect();
        out.push(round);
        let last = v.pop().expect("n >= 2");
        v.insert(1, last);
    }
    out
}

fn alive_facts(members: &[Member]) -> Vec<(u32, &NodeFacts)> {
    members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, &m.facts))
        .collect()
}

fn listener_for(m: &Member, address: &str) -> Option<Listener> {
    m.listeners.iter().find(|l| l.address == address).cloned()
}

/// Throughput on every fully connected network, in rounds of disjoint pairs (both directions at once).
fn bulk_phase(members: &mut [Member], cfg: &CoordConfig, links: &mut [LinkResult]) {
    let nodes: Vec<(u32, NodeFacts)> = members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, m.facts.clone()))
        .collect();
    let refs: Vec<(u32, &NodeFacts)> = nodes.iter().map(|(r, f)| (*r, f)).collect();
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&refs), links, &ranks);
    let dur = cfg.timing.bulk;
    for net in evals.iter().filter(|e| e.fully_connected) {
        for round in rounds(&ranks) {
            let mut orders: BTreeMap<u32, Vec<Target>> = BTreeMap::new();
            for (a, b) in round {
                for (from, to) in [(a, b), (b, a)] {
                    let Some(m_to) = members.iter().find(|m| m.rank == to && m.alive) else {
                        continue;
                    };
                    let Some(addr) = net.network.members.get(&to).map(|x| x.address.to_string())
                    else {
                        continue;
                    };
                    if let Some(l) = listener_for(m_to, &addr) {
                        orders.entry(from).or_default().push(Target {
                            rank: to,
                            listener: l,
                        });
                    }
                }
            }
            let limit = dur
                + cfg.timing.connect_timeout
                + auth::HANDSHAKE_TIMEOUT
                + Duration::from_secs(10);
            let got = exchange(members, limit, "the throughput test", |m| {
                orders.get(&m.rank).map(|t| Msg::Bulk {
                    targets: t.clone(),
                    duration_ms: dur.as_millis() as u64,
                })
            });
            merge(links, &got, |dst, src| {
                dst.throughput_gbit_s = src.throughput_gbit_s;
                if src.error.is_some() {
                    dst.error = src.error.clone();
                }
            });
        }
    }
}

/// Path MTU from every node to every other on the chosen network.
fn mtu_phase(members: &mut [Member], links: &mut [LinkResult]) {
    let refs = alive_facts(members);
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&refs), links, &ranks);
    let Some(chosen) = networks::choose(&evals).cloned() else {
        return;
    };
    let orders: BTreeMap<u32, (Vec<Target>, u32)> = chosen
        .network
        .members
        .iter()
        .map(|(rank, own)| {
            let targets = chosen
                .network
                .members
                .iter()
                .filter(|(r, _)| *r != rank)
                .filter_map(|(r, peer)| {
                    let m = members.iter().find(|m| m.rank == *r)?;
                    Some(Target {
                        rank: *r,
                        listener: listener_for(m, &peer.address.to_string())?,
                    })
                })
                .collect();
            (*rank, (targets, own.mtu.unwrap_or(1500)))
        })
        .collect();
    let got = exchange(members, Duration::from_secs(20), "the MTU test", |m| {
        orders.get(&m.rank).map(|(t, mtu)| Msg::Mtu {
            targets: t.clone(),
            max_mtu: *mtu,
        })
    });
    merge(links, &got, |dst, src| dst.mtu = src.mtu);
}

/// Copies fields from `got` into the matching (from, to, address) links.
fn merge(links: &mut [LinkResult], got: &[LinkResult], f: impl Fn(&mut LinkResult, &LinkResult)) {
    for g in got {
        if let Some(l) = links
            .iter_mut()
            .find(|l| l.from == g.from && l.to == g.to && l.address == g.address)
        {
            f(l, g);
        }
    }
}

/// The advice from every joined node's facts and the links, with `env_override` set on top.
fn advise(
    members: &[Member],
    links: &[LinkResult],
    cfg: &CoordConfig,
    env_override: BTreeMap<String, String>,
) -> model::Recommendation {
    let nodes = alive_or_joined(members);
    let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&nodes), links, &ranks);
    advise_cluster(
        &nodes,
        &evals,
        &ClusterAdviceInput {
            nnodes: cfg.nnodes,
            master_port: cfg.master_port,
            nproc_per_node: cfg.nproc_per_node,
            script: cfg.script.clone(),
            env_override,
            coordinator_note: cfg.coordinator_note.clone(),
        },
    )
}

fn build_report(
    members: &[Member],
    links: &[LinkResult],
    cfg: &CoordConfig,
    recommendation: model::Recommendation,
    outcome: allreduce::Outcome,
) -> Report {
    let nodes = alive_or_joined(members);
    let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&nodes), links, &ranks);
    let chosen = networks::choose(&evals);
    let mut findings = Vec::new();
    for (rank, facts) in &nodes {
        findings.extend(super::node_findings(
            *rank,
            facts,
            cfg.master_port,
            cfg.nproc_per_node,
            cfg.expect_gpus,
        ));
    }
    for m in members.iter().filter(|m| !m.alive) {
        findings.push(
            model::Finding::new(
                "cluster.rendezvous",
                model::Status::Fail,
                format!("rank {}", m.rank),
                format!(
                    "rank {} ({}) joined but stopped answering during the measurements; its results are incomplete",
                    m.rank, m.facts.hostname
                ),
            )
            .with("rank", m.rank)
            .with("hostname", &m.facts.hostname)
            .on_node(Some(m.rank))
            .fix(model::Fix::new("check that preflight is still running on that node and that it was not killed (dmesg, the scheduler's log)")),
        );
    }
    findings.extend(check_cluster(&ClusterInput {
        nodes: &nodes,
        nnodes: cfg.nnodes,
        expected_hosts: &cfg.expected_hosts,
        links,
        evals: &evals,
        chosen,
        master_port: cfg.master_port,
    }));
    findings.extend(check_collectives(&CollectiveInput {
        results: &outcome.results,
        links,
        min_busbw_gb_s: cfg.min_busbw,
        not_run: outcome.not_run.clone(),
    }));
    Report {
        schema: SCHEMA.to_string(),
        tool: crate::node::tool(),
        mode: Mode::Cluster,
        status: model::overall_status(&findings),
        nodes: members
            .iter()
            .map(|m| NodeEntry {
                rank: m.rank,
                hostname: m.facts.hostname.clone(),
                facts: m.facts.clone(),
            })
            .collect(),
        findings,
        links: links.to_vec(),
        collectives: outcome.results,
        recommendation: Some(recommendation),
    }
}

/// Every joined node (dead ones included: their facts still count for the checks).
fn alive_or_joined(members: &[Member]) -> Vec<(u32, &NodeFacts)> {
    members.iter().map(|m| (m.rank, &m.facts)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_cover_every_pair_once_with_disjoint_pairs() {
        for n in 2..=9u32 {
            let ranks: Vec<u32> = (0..n).collect();
            let rs = rounds(&ranks);
            assert_eq!(rs.len() as u32, if n % 2 == 0 { n - 1 } else { n });
            let mut seen = std::collections::BTreeSet::new();
            for r in &rs {
                let mut used = std::collections::BTreeSet::new();
                for (a, b) in r {
                    assert!(used.insert(*a) && used.insert(*b), "rank reused in a round");
                    assert!(seen.insert((*a, *b)), "pair repeated");
                }
            }
            assert_eq!(seen.len() as u32, n * (n - 1) / 2);
        }
    }
}
