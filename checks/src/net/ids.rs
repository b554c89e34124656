//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const NO_INTERFACE: FindingId = FindingId::new("net.no-interface");
pub const ARP_FLUX: FindingId = FindingId::new("net.arp-flux");
pub const NCCL_AUTO_PICK: FindingId = FindingId::new("net.nccl-auto-pick");
