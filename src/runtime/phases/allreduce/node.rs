//! A node's side of the all-reduce: opens its ring listener, runs its part of the TCP ring, and
//! drives the NCCL child (`nccl`), answering the coordinator's orders.

use crate::measure::ring::{self, Corrupt, RingConfig, RingListener, RingPeers};
use crate::runtime::phases::state::NodeState;
use crate::transport::wire::{Msg, RingOrder, WireError, write_msg};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

/// Answers one all-reduce order; `None` when `msg` is not one (the caller handles it).
pub fn handle(
    state: &mut NodeState,
    msg: &Msg,
    stream: &mut TcpStream,
) -> Option<Result<Msg, WireError>> {
    Some(Ok(match msg {
        Msg::RingListen { address } => listen(state, address),
        Msg::Ring { order } => return Some(run_ring(state, order, stream)),
        Msg::NcclStart { order } => super::nccl::start(&mut state.nccl, &state.facts, order),
        Msg::NcclRun { order, id } => {
            super::nccl::run_nccl(&mut state.nccl, &state.facts, order, id)
        }
        _ => return None,
    }))
}

fn listen(state: &mut NodeState, address: &str) -> Msg {
    let ip: IpAddr = match address.parse() {
        Ok(ip) => ip,
        Err(_) => {
            return Msg::Failed {
                error: format!("the coordinator sent a bad ring address '{address}'"),
            };
        }
    };
    match RingListener::bind(ip) {
        Ok(l) => {
            let port = l.port();
            state.ring = Some(l);
            Msg::RingReady { port }
        }
        Err(e) => Msg::Failed {
            error: format!("cannot listen for the ring on {ip}: {e}"),
        },
    }
}

fn run_ring(
    state: &mut NodeState,
    order: &RingOrder,
    stream: &mut TcpStream,
) -> Result<Msg, WireError> {
    let Some(listener) = state.ring.take() else {
        return Ok(Msg::RingDone {
            rows: Vec::new(),
            error: Some("the ring started before this node opened its listener".into()),
        });
    };
    let right = match order.right_address.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, order.right_port),
        Err(_) => {
            return Ok(Msg::RingDone {
                rows: Vec::new(),
                error: Some(format!(
                    "bad address '{}' for rank {}",
                    order.right_address, order.right_rank
                )),
            });
        }
    };
    let peers = RingPeers {
        my_rank: state.rank,
        nnodes: state.nnodes,
        pos: order.pos as usize,
        n: order.n as usize,
        left_rank: order.left_rank,
        right_rank: order.right_rank,
        right,
        admitted: state.admitted.clone(),
    };
    let cfg = RingConfig {
        streams: order.streams.clamp(1, 16) as usize,
        warmup: order.warmup.min(100),
        iters: order.iters.clamp(1, 1000),
        timeout: Duration::from_millis(order.timeout_ms.clamp(1000, 600_000)),
        corrupt: state
            .seams
            .corrupt_ring()
            .then_some(Corrupt { size_index: None }),
    };
    if cfg.corrupt.is_some() {
        state.events.log(format!(
            "test hook {} is set: this node perturbs one value it sends in the ring",
            crate::runtime::seams::vars::CORRUPT_ALLREDUCE
        ));
    }
    let mut sent: Result<(), WireError> = Ok(());
    let outcome = ring::run_with_progress(
        listener,
        &peers,
        &order.sizes,
        &cfg,
        &state.secret,
        &mut |row| {
            if sent.is_ok() {
                sent = write_msg(stream, &Msg::RingRow { row: row.clone() });
            }
        },
    );
    sent?;
    Ok(match outcome {
        Ok(rows) => Msg::RingDone { rows, error: None },
        Err(failure) => Msg::RingDone {
            rows: failure.rows,
            error: Some(failure.error.to_string()),
        },
    })
}
