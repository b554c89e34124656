//! Admitting nodes on the master port: the handshake, the join message, one node per rank, until all joined or the join timeout ends.

use super::{CoordConfig, JoinedNode};
use crate::transport::auth;
use crate::transport::wire::{Listener, Msg, read_msg, write_msg};
use preflight_checks::model::NodeFacts;
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A node that passed the handshake and sent its join message.
struct Joined {
    rank: u32,
    stream: TcpStream,
    facts: NodeFacts,
    listeners: Vec<Listener>,
}

/// Accepts nodes until all `nnodes` joined or the join timeout ends. Garbage and unauthenticated peers are dropped.
pub(super) fn admit(listener: TcpListener, cfg: &CoordConfig) -> Vec<JoinedNode> {
    let deadline = Instant::now() + cfg.join_timeout;
    let (tx, rx) = mpsc::channel::<Joined>();
    listener.set_nonblocking(true).ok();
    let mut joined: BTreeMap<u32, JoinedNode> = BTreeMap::new();
    while Instant::now() < deadline && (joined.len() as u32) < cfg.nnodes {
        match listener.accept() {
            Ok((stream, peer)) => {
                let tx = tx.clone();
                let cfg = cfg.clone();
                let events = cfg.events.clone();
                let _ = std::thread::Builder::new()
                    .name("join".into())
                    .spawn(move || match handshake_and_join(stream, &cfg) {
                        Ok(j) => {
                            let _ = tx.send(j);
                        }
                        Err(e) => {
                            events.log(format!("coordinator: dropped connection from {peer}: {e}"))
                        }
                    });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => cfg.events.log(format!("coordinator: accept failed: {e}")),
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
                cfg.events
                    .log(format!("coordinator: rejected a second rank {}", j.rank));
                continue;
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
                    facts: j.facts,
                    listeners: j.listeners,
                    alive: true,
                    lost: None,
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

pub(super) fn kind(m: &Msg) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
        .unwrap_or_else(|| "?".into())
}
