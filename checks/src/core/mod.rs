//! The leaf of the checks crate: the report's types (the JSON contract), a node's facts, the
//! finding and its typed id, the context a check gets. It names nothing above it.

mod action;
mod advice;
mod cluster_input;
mod context;
mod entry;
mod facts;
mod finding;
mod id;
mod link_table;
mod links;
mod networks;
mod refusal;
mod report;

pub mod cluster_common;
pub mod schema;

pub use action::{Action, Fault, Problem, Remedy};
pub use advice::*;
pub use cluster_input::ClusterInput;
pub use context::CheckContext;
pub use entry::{Entry, entry};
pub use facts::*;
pub use finding::*;
pub use id::FindingId;
pub use link_table::*;
pub use links::*;
pub use networks::*;
pub use refusal::{Refusal, RefusalKind};
pub use report::*;
