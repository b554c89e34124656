//! Active measurements between nodes: TCP connect/RTT/throughput, path MTU, the TCP ring all-reduce and the NCCL all-reduce, idle connections; and on one node, the GPUs' copy bandwidth and matrix-multiply speed.

pub mod child;
pub mod gemm;
pub mod gpu_bw;
pub mod idle;
pub mod mtu;
pub mod nccl;
pub mod ring;
pub mod sizes;
pub mod tcp;

pub use crate::transport::wire::RankRow;
