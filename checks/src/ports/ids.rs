//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const IN_USE: FindingId = FindingId::new("port.in-use");
