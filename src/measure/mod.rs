//! Active measurements between nodes: TCP connect/RTT/throughput and path MTU.

pub mod mtu;
pub mod tcp;
