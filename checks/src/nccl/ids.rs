//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const LIBRARY: FindingId = FindingId::new("nccl.library");
