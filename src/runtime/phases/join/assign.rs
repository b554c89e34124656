//! torchrun's c10d rendezvous without a node rank: right after the handshake the coordinator
//! (on the node that owns the endpoint, rank 0) tells this node the rank it assigned, in join
//! order. Nothing that depends on the rank (data listeners, the node state, the report) starts
//! before this answer.

use crate::placement::Placement;
use crate::transport::wire::{HANDSHAKE_FRAME, Msg, read_msg_capped};
use preflight_checks::model::{self, Finding};
use std::net::TcpStream;
use std::time::Duration;

/// Longest wait for the assigned rank once the handshake is done (the coordinator sends it at once).
const ASSIGN_TIMEOUT: Duration = Duration::from_secs(10);

/// The rank the coordinator assigned this node, or why there is none.
pub fn receive(stream: &mut TcpStream, p: &Placement) -> Result<u32, String> {
    stream.set_read_timeout(Some(ASSIGN_TIMEOUT)).ok();
    let at = preflight_checks::net::host_port(&p.master_addr, p.master_port);
    match read_msg_capped::<_, Msg>(stream, HANDSHAKE_FRAME) {
        Ok(Msg::Assigned { rank }) if rank > 0 && rank < p.nnodes => Ok(rank),
        Ok(Msg::Assigned { rank }) => Err(format!(
            "the coordinator on {at} assigned rank {rank}, which is not in 1..{} for --nnodes={}",
            p.nnodes.saturating_sub(1),
            p.nnodes
        )),
        Ok(Msg::Reject { reason, .. }) => Err(format!(
            "the coordinator on {at} refused to assign this node a rank: {reason}"
        )),
        Ok(other) => Err(format!(
            "the coordinator on {at} answered a request for a rank with {}; it runs an older preflight that cannot assign c10d ranks",
            serde_json::to_value(&other)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
                .unwrap_or_else(|| "another message".into())
        )),
        Err(e) => Err(format!(
            "no rank came from the coordinator on {at} after the handshake: {e}"
        )),
    }
}

/// `cluster.rendezvous`: this node authenticated with rank 0 but got no rank.
pub fn no_rank_finding(p: &Placement, why: &str) -> Finding {
    let at = preflight_checks::net::host_port(&p.master_addr, p.master_port);
    Finding::new(
        preflight_checks::rendezvous::ids::RENDEZVOUS,
        model::Status::Fail,
        at.clone(),
        format!(
            "this node has no rank: ranks come from torchrun's c10d rendezvous (--rdzv-backend=c10d without --node-rank) and are assigned at join by rank 0, the node owning the endpoint {at}; {why}"
        ),
    )
    .with("rank_source", crate::placement::C10D_JOIN)
    .with("endpoint", &at)
    .with("error", why)
    .fix(model::Fix::new(format!(
        "run the same preflight version with the same --nnodes={} on every node, and exactly {} nodes; or give each node --node-rank R",
        p.nnodes, p.nnodes
    )))
}
