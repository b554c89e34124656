//! What a node keeps between the coordinator's orders: who it is, its facts, the admitted peers
//! its listeners serve, and what one order leaves for the next (a ring listener, a worker that
//! made NCCL's unique id, the per-rail children).

use super::rails::node::Held;
use crate::measure::nccl::Worker;
use crate::measure::ring::RingListener;
use crate::runtime::seams::SeamsRef;
use crate::transport::auth::Secret;
use crate::transport::events::Events;
use crate::transport::gate::Gate;
use preflight_checks::model::NodeFacts;

/// What a node keeps between the coordinator's orders.
pub struct NodeState {
    pub rank: u32,
    pub nnodes: u32,
    /// The master port (the first address of rank 0's FQDN is dialled on it).
    pub master_port: u16,
    pub secret: Secret,
    pub facts: NodeFacts,
    pub events: Events,
    /// The nodes the coordinator admitted: the only ones this node's listeners serve.
    pub admitted: Gate,
    /// Where this node's facts were probed (the counters' second snapshot reads it again).
    pub root: preflight_checks::root::Root,
    /// What a test stands in for (the ring's corrupted value, the rails' network, RDMA's tree).
    pub seams: SeamsRef,
    /// The TCP ring's listener, from `RingListen` to `Ring`.
    pub ring: Option<RingListener>,
    /// The NCCL worker that made the unique id, from `NcclStart` to `NcclRun`.
    pub nccl: Option<Worker>,
    /// The per-rail rank-0 children, from `RailStart` to `RailRun`.
    pub rails: Held,
}

impl NodeState {
    pub fn new(
        rank: u32,
        nnodes: u32,
        secret: Secret,
        facts: NodeFacts,
        events: Events,
        seams: SeamsRef,
    ) -> NodeState {
        NodeState {
            rank,
            nnodes,
            master_port: 0,
            secret,
            facts,
            events,
            admitted: Gate::pending().sized_for(nnodes),
            root: preflight_checks::root::Root::system(),
            seams,
            ring: None,
            nccl: None,
            rails: Default::default(),
        }
    }
}
