//! InfiniBand/RoCE rails (issue 34): GPU r with its closest HCA r, judged per node from sysfs,
//! across nodes, and per (node, rail, pair) from NCCL pair tests.

pub mod across;
pub mod advice;
pub mod counters;
pub mod fault;
pub mod grew;
pub mod localise;
pub mod mapping;
pub mod nccl_log;
pub mod node;

#[cfg(test)]
pub(crate) mod fixtures_test;
#[cfg(test)]
mod localise_tests;

pub use mapping::{PathKind, Rail, map_rails};
