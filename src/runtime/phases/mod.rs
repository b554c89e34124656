//! The coordinator's phases, one module each, behind one [`Phase`] interface (`ctx`), run in the
//! order [`in_order`] gives; each module holds its node side too (`answer`, or a `node` module):
//!
//! - `join`: admit the nodes on the master port (node side: `join::node`, `join::assign`);
//! - `connectivity`: every node to every listener of every other, authenticated, with RTTs;
//! - `retest`: the second pass, a node that failed with many peers against a known-good one;
//! - `idle`: hold a few connections silent (`idle::Hold`), use them again later (`idle::Check`);
//! - `pairs`: throughput in rounds of disjoint pairs, suspects measured again;
//! - `mtu`: path MTU on the chosen network;
//! - `allreduce`: the first advice, then the TCP or NCCL all-reduce;
//! - `rails`: the per-rail NCCL pair tests, then the RDMA counters' second snapshot;
//! - `gemm`: each node's GPU matrix-multiply test, before it joins (node side only).
//!
//! `state` is what a node keeps between orders; `answer` what the link phases' node sides share.

pub mod allreduce;
pub mod answer;
pub mod connectivity;
pub mod ctx;
pub mod fqdn;
pub mod gemm;
pub mod idle;
pub mod join;
pub mod mtu;
pub mod pairs;
pub mod rails;
pub mod retest;
pub mod state;

pub use ctx::{
    BulkDone, Found, IdleHold, Lap, Outcome, Phase, PhaseCtx, RailOutcome, RailReport, Traffic,
};

use std::net::TcpListener;

/// Every phase the coordinator runs, in order; the join admits on `listener`.
pub fn in_order(listener: TcpListener) -> Vec<Box<dyn Phase>> {
    vec![
        Box::new(join::Join::new(listener)),
        Box::new(connectivity::Connectivity),
        Box::new(retest::Retest),
        // The idle test's connections stay silent while the later phases run.
        Box::new(idle::Hold),
        Box::new(pairs::Pairs),
        Box::new(mtu::Mtu),
        Box::new(allreduce::Allreduce),
        Box::new(rails::Rails),
        Box::new(idle::Check),
        Box::new(rails::counters::Counters),
    ]
}
