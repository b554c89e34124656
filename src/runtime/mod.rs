//! The multi-node runtime: the agent every node runs, the coordinator inside rank 0, the
//! all-reduce scheduling, and the torchrun local group. Takes validated jobs, reports through
//! events, returns reports; never prints.

pub mod agent;
pub mod allreduce;
pub mod allreduce_node;
pub mod coordinator;
pub mod job;
pub mod local_group;
pub mod nccl_node;
pub mod node;

/// How long each measurement runs (`--quick`, default, `--thorough`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub connect_timeout: std::time::Duration,
    pub pings: u32,
    pub bulk: std::time::Duration,
}
