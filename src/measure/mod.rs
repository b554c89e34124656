//! Active measurements between nodes: TCP connect/RTT/throughput, path MTU, and the TCP ring all-reduce.

pub mod mtu;
pub mod ring;
pub mod sizes;
pub mod tcp;
