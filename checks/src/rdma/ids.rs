//! The finding ids this concern emits: one constant each, the only place the id is written.

use crate::core::FindingId;

pub const PORT_DOWN: FindingId = FindingId::new("ib.port-down");
pub const VERBS: FindingId = FindingId::new("ib.verbs");
pub const PARTIAL: FindingId = FindingId::new("ib.partial");
pub const GID_INDEX: FindingId = FindingId::new("ib.gid-index");
pub const RATE: FindingId = FindingId::new("ib.rate");
pub const RAILS: FindingId = FindingId::new("ib.rails");
pub const FIRMWARE: FindingId = FindingId::new("ib.firmware");
pub const ROCE_GID: FindingId = FindingId::new("ib.roce-gid");
pub const COUNTERS: FindingId = FindingId::new("ib.counters");
pub const COUNTERS_GREW: FindingId = FindingId::new("ib.counters-grew");
pub const CONTAINER: FindingId = FindingId::new("ib.container");
pub const IOMMU: FindingId = FindingId::new("ib.iommu");
pub const RAIL_FAULT: FindingId = FindingId::new("ib.rail-fault");
