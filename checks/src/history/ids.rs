//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const LEMON: FindingId = FindingId::new("history.lemon");
pub const STORE: FindingId = FindingId::new("history.store");
