//! Active measurements between nodes: TCP connect/RTT/throughput, path MTU, and NCCL all-reduce.

pub mod mtu;
pub mod nccl;
pub mod tcp;
