//! The multi-node runtime: the agent every node runs, the coordinator inside rank 0, the
//! all-reduce scheduling, and the torchrun local group. Takes validated jobs, reports through
//! events, returns reports; never prints.

pub mod agent;
pub mod allreduce;
pub mod allreduce_node;
pub mod coordinator;
pub mod fds;
pub mod job;
pub mod local_group;
pub mod nccl_node;
pub mod node;
pub mod schedule;
pub mod sim;

/// How long each measurement runs (`--quick`, default, `--thorough`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub connect_timeout: std::time::Duration,
    pub pings: u32,
    pub bulk: std::time::Duration,
    /// Random perfect matchings measured for throughput beyond the ring (see `schedule`).
    pub matchings: u32,
}

/// The connectivity phase's budget for one node with `targets` listeners to reach: the dial
/// window's waves of connect, handshake and pings, plus room for one timed-out connect and
/// handshake and the retries' backoff. It grows with the node's own work (linearly in the
/// cluster's size), never with the square of it.
pub fn probe_budget(
    connect_timeout: std::time::Duration,
    pings: u32,
    targets: usize,
) -> std::time::Duration {
    use std::time::Duration;
    let waves = targets.div_ceil(agent::dial::CONNECT_WINDOW) as u32;
    // A wave is the window's connects, handshakes and pings at once: 150 ms leaves room for a
    // busy node (measured: 256 agents on 2 cores needed about 20 s for 255 targets each).
    let per_wave = Duration::from_millis(150) + Duration::from_millis(2) * pings;
    // A timed-out connect and its retry, which waits twice as long (see `dial::open`).
    connect_timeout * 3
        + crate::transport::auth::HANDSHAKE_TIMEOUT * 2
        + Duration::from_millis(700)
        + per_wave * waves
}
