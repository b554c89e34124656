//! A node that joined, as rank 0 holds it, and the little every phase asks of the lot.

use crate::transport::events::Events;
use crate::transport::wire::Listener;
use preflight_checks::model::NodeFacts;
use std::net::TcpStream;

/// A node that joined.
pub struct JoinedNode {
    pub rank: u32,
    pub stream: TcpStream,
    /// Where it connected from.
    pub peer: std::net::SocketAddr,
    pub facts: NodeFacts,
    pub listeners: Vec<Listener>,
    /// It asked for the whole report (`--full-report`).
    pub whole_report: bool,
    pub alive: bool,
    /// Why it stopped answering (set with `alive = false`).
    pub lost: Option<String>,
}

/// Logs every node lost since the last call, once.
pub fn log_losses(members: &mut [JoinedNode], events: &Events) {
    for m in members.iter_mut() {
        if let Some(why) = m.lost.take() {
            events.log(format!("coordinator: lost rank {} {why}", m.rank));
        }
    }
}

pub fn alive_facts(members: &[JoinedNode]) -> Vec<(u32, &NodeFacts)> {
    members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, &m.facts))
        .collect()
}

pub fn listener_for(m: &JoinedNode, address: &str) -> Option<Listener> {
    m.listeners.iter().find(|l| l.address == address).cloned()
}
