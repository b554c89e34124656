//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const HOSTNAME_LOOPBACK: FindingId = FindingId::new("net.hostname-loopback");
pub const SHM: FindingId = FindingId::new("sys.shm");
pub const MEMLOCK: FindingId = FindingId::new("sys.memlock");
