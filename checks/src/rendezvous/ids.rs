//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const RENDEZVOUS: FindingId = FindingId::new("cluster.rendezvous");
pub const REFUSED: FindingId = FindingId::new("cluster.refused");
pub const MASTER_RESOLUTION: FindingId = FindingId::new("cluster.master-resolution");
pub const FQDN: FindingId = FindingId::new("cluster.fqdn");
pub const MASTER_ELSEWHERE: FindingId = FindingId::new("cluster.master-elsewhere");
pub const MASTER_LATE: FindingId = FindingId::new("cluster.master-late");
pub const LAUNCHER_MASTER: FindingId = FindingId::new("cluster.launcher-master");
pub const AUTH: FindingId = FindingId::new("cluster.auth");
pub const DUPLICATE_HOST: FindingId = FindingId::new("cluster.duplicate-host");
pub const VERSIONS: FindingId = FindingId::new("cluster.versions");
