//! Path MTU from every node to every other on the chosen network (don't-fragment probes); each
//! node's side ([`answer`]) probes its targets a window at a time, with progress reports.

use super::answer::{Counted, base_link, with_progress};
use super::ctx::{Lap, Phase, PhaseCtx, bounded};
use super::state::NodeState;
use crate::measure::mtu;
use crate::runtime::budget::PROBE_SILENCE;
use crate::runtime::dial::{self, paced};
use crate::runtime::members::links::exchange_into;
use crate::runtime::members::{JoinedNode, Wait, alive_facts, listener_for};
use crate::runtime::rendezvous::Rendezvous;
use crate::transport::auth::Secret;
use crate::transport::wire::{Msg, Target};
use preflight_checks::model::{LinkOutcome, LinkResult};
use preflight_checks::networks;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// The path MTU phase.
pub struct Mtu;

impl Phase for Mtu {
    fn name(&self) -> &'static str {
        "path MTU"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        let events = &ctx.run.events;
        events.step();
        events.phase("path MTU");
        mtu_phase(&mut ctx.members, ctx.run, &mut ctx.links);
        Lap::Timed
    }
}

/// Path MTU from every node to every other on the chosen network.
fn mtu_phase(members: &mut [JoinedNode], run: &Rendezvous, links: &mut [LinkResult]) {
    let refs = alive_facts(members);
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let view = preflight_checks::model::Links::borrowed(links);
    let evals = networks::evaluate(&networks::discover(&refs, &view), &view, &ranks);
    let Some(chosen) = networks::choose(&evals).cloned() else {
        return;
    };
    // Each member's listener on the chosen network, looked up once (not once per pair).
    let on_net: Vec<Target> = chosen
        .network
        .members
        .iter()
        .filter_map(|(r, peer)| {
            let m = members.iter().find(|m| m.rank == *r)?;
            Some(Target {
                rank: *r,
                listener: listener_for(m, &peer.address.to_string())?,
            })
        })
        .collect();
    let orders: BTreeMap<u32, (Vec<Target>, u32)> = chosen
        .network
        .members
        .iter()
        .map(|(rank, own)| {
            let targets = on_net.iter().filter(|t| t.rank != *rank).cloned().collect();
            (*rank, (targets, own.mtu.unwrap_or(1500)))
        })
        .collect();
    let order = |m: &JoinedNode| {
        orders.get(&m.rank).map(|(t, mtu)| Msg::Mtu {
            targets: t.clone(),
            max_mtu: *mtu,
        })
    };
    // Each node probes every peer, so the phase follows its work: a node reports progress once
    // a second and is given up on after PROBE_SILENCE without one, up to --timeout.
    let wait = Wait {
        limit: bounded(run, run.join_timeout() + Duration::from_secs(5)),
        silence: PROBE_SILENCE,
    };
    exchange_into(members, wait, "the MTU test", order, links, |dst, src| {
        if !dst.stalled || src.mtu.is_some() {
            dst.mtu = src.mtu
        }
    });
}

/// A node's side: the path MTU to every target (`Msg::Mtu`), with progress reports on `stream`
/// (its length grows with the peers).
pub fn answer(node: &NodeState, stream: &TcpStream, targets: Vec<Target>, max_mtu: u32) -> Msg {
    let (me, nnodes, secret) = (node.rank, node.nnodes, &node.secret);
    Msg::MtuDone {
        links: with_progress(stream, |done| {
            mtu_targets(me, nnodes, targets, max_mtu, secret, done)
        }),
    }
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
