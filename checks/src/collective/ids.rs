//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const BUSBW: FindingId = FindingId::new("collective.busbw");
pub const WRONG: FindingId = FindingId::new("collective.wrong");
pub const NET: FindingId = FindingId::new("collective.net");
pub const ERROR: FindingId = FindingId::new("collective.error");
