//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const AS_WRITTEN: FindingId = FindingId::new("launch.as-written");
pub const ARGS: FindingId = FindingId::new("launch.args");
pub const UNKNOWN_FLAG: FindingId = FindingId::new("launch.unknown-flag");
pub const NNODES: FindingId = FindingId::new("launch.nnodes");
pub const NODE_RANK: FindingId = FindingId::new("launch.node-rank");
pub const NPROC: FindingId = FindingId::new("launch.nproc");
pub const STANDALONE: FindingId = FindingId::new("launch.standalone");
pub const RDZV_BACKEND: FindingId = FindingId::new("launch.rdzv-backend");
pub const RDZV_CONF: FindingId = FindingId::new("launch.rdzv-conf");
pub const ENDPOINT: FindingId = FindingId::new("launch.endpoint");
pub const PORT: FindingId = FindingId::new("launch.port");
pub const LEGACY: FindingId = FindingId::new("launch.legacy");
pub const VARIABLES: FindingId = FindingId::new("launch.variables");
pub const SCRIPT: FindingId = FindingId::new("launch.script");
pub const COMMAND: FindingId = FindingId::new("launch.command");
pub const TASKS_PER_NODE: FindingId = FindingId::new("launch.tasks-per-node");
