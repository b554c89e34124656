//! The finding ids of the settings that bite at scale: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const LISTEN_BACKLOG: FindingId = FindingId::new("sys.listen-backlog");
pub const NOFILE: FindingId = FindingId::new("sys.nofile");
pub const PORT_RANGE: FindingId = FindingId::new("sys.port-range");
pub const NEIGH_TABLE: FindingId = FindingId::new("sys.neigh-table");
pub const STALE_NCCL: FindingId = FindingId::new("sys.stale-nccl");
pub const PIDS: FindingId = FindingId::new("sys.pids");
pub const TCPSTORE: FindingId = FindingId::new("launch.tcpstore");
