//! The one integration-test binary: CLI behaviour, fixtures, and multi-node scenarios in network namespaces.

mod cli;
mod cluster;
mod netns;
mod report_contract;
