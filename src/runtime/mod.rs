//! The multi-node runtime: the agent every node runs (`agent`), the coordinator inside rank 0
//! (`coordinator`), which runs the measurement phases in order (`phases`: one module per phase,
//! each with its node side), over the admitted nodes (`members`). Takes validated jobs, reports
//! through events, returns reports; never prints. Test seams come in through `seams`.
//!
//! Layers, top to bottom (a module names only those below it): `agent` > `coordinator` >
//! `phases` > `members`, `advice` > `rendezvous`, `node`, `dial`, `budget`, `fds`, `schedule`,
//! `seams`, `job`; `sim` models the coordinator's judgment beside them; `group_files` keeps the
//! local task group's files (`placement::local_group`) under the cleanup registry.

pub mod advice;
pub mod agent;
pub mod budget;
pub mod coordinator;
pub mod dial;
pub mod fds;
pub mod group_files;
pub mod job;
pub(crate) mod members;
pub mod node;
pub mod phases;
pub mod rendezvous;
pub mod schedule;
pub mod seams;
pub mod sim;

pub use budget::{
    MIN_PINGS, PING_LINKS, PROBE_PROGRESS_EVERY, PROBE_SILENCE, pings_per_link, probe_budget,
};
pub use job::Timing;
