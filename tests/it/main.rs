//! The one integration-test binary: CLI behaviour, fixtures, and multi-node scenarios in network namespaces.

mod allreduce;
mod cli;
mod cluster;
mod nccl;
mod launchers;
mod netns;
mod torchrun;
