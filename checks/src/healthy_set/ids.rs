//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const HEALTHY_SET: FindingId = FindingId::new("cluster.healthy-set");
