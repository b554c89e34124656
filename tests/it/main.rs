//! The one integration-test binary: CLI behaviour, fixtures, and multi-node scenarios in network namespaces.

mod cluster;
mod netns;
