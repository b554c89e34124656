//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const NAT: FindingId = FindingId::new("cluster.nat");
pub const UNREACHABLE: FindingId = FindingId::new("link.unreachable");
pub const INTERCEPTED: FindingId = FindingId::new("link.intercepted");
pub const IDLE_TIMEOUT: FindingId = FindingId::new("link.idle-timeout");
pub const MTU_BLACKHOLE: FindingId = FindingId::new("link.mtu-blackhole");
pub const MTU_MISMATCH: FindingId = FindingId::new("link.mtu-mismatch");
pub const DEGRADED: FindingId = FindingId::new("link.degraded");
pub const SLOW: FindingId = FindingId::new("link.slow");
pub const LATENCY: FindingId = FindingId::new("link.latency");
