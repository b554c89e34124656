//! Active measurements between nodes: TCP connect/RTT/throughput, path MTU, the TCP ring all-reduce and the NCCL all-reduce.

pub mod mtu;
pub mod nccl;
pub mod ring;
pub mod sizes;
pub mod tcp;

/// One node's result for one message size, as the ring, the NCCL worker and the wire carry it.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RankRow {
    pub bytes: u64,
    /// Mean time of one all-reduce on this node (the slowest local GPU for NCCL), microseconds.
    pub time_us: f64,
    /// Elements that differed from the exact expected sum after the last iteration.
    pub wrong: u64,
}
