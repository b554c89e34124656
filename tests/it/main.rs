//! The one integration-test binary: CLI behaviour, fixtures, and multi-node scenarios in network namespaces.

mod allreduce;
mod as_written;
mod c10d;
mod cli;
mod cluster;
mod common;
mod egress;
mod fabrics;
mod faults;
mod hostile;
mod hostile_input;
mod html;
mod join_causes;
mod launchers;
mod layers;
mod mtu_blackhole;
mod nccl;
mod netns;
mod props;
mod render_cluster;
mod render_node;
mod report_contract;
mod signals;
mod torchrun;
