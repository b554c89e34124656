//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const SOCKET_IFNAME: FindingId = FindingId::new("env.socket-ifname");
pub const IB_DISABLE: FindingId = FindingId::new("env.ib-disable");
pub const MASTER: FindingId = FindingId::new("env.master");
