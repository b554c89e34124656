//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const RULES: FindingId = FindingId::new("firewall.rules");
