//! The RDMA ports' error counters read again at the end of a run (issue 34, `ib.counters-grew`):
//! the coordinator's order ([`Counters`]), each node's second snapshot, and the "after" facts
//! the coordinator compares with the join's.

use crate::runtime::members::{JoinedNode, Step, Wait, gather, send_orders};
use crate::runtime::phases::ctx::{Lap, Phase, PhaseCtx};
use crate::transport::wire::{Msg, PortCounters};
use preflight_checks::model::IbFacts;
use preflight_checks::probe;
use preflight_checks::root::Root;
use std::collections::BTreeMap;
use std::time::Duration;

/// Ports one snapshot carries at most (a node has a few HCAs of one or two ports).
pub const MAX_PORTS: usize = 64;

/// Every RDMA port's judged counters as they are now (those `ib.counters-grew` compares), at
/// most [`MAX_PORTS`], read under `root` (the node's, or a test's fixture: `Seams::rdma_root`).
pub fn snapshot(root: &Root) -> Vec<PortCounters> {
    use preflight_checks::rails::counters::{GROWTH_HW_COUNTERS, spec};
    probe::ib::probe(root)
        .devices
        .into_iter()
        .flat_map(|d| {
            d.ports.into_iter().map(move |p| PortCounters {
                device: d.name.clone(),
                port: p.port,
                counters: p
                    .counters
                    .into_iter()
                    .filter(|(n, _)| spec(n).is_some())
                    .collect(),
                hw_counters: p
                    .hw_counters
                    .into_iter()
                    .filter(|(n, _)| GROWTH_HW_COUNTERS.contains(&n.as_str()))
                    .collect(),
            })
        })
        .take(MAX_PORTS)
        .collect()
}

/// The join's RDMA facts with the counters of the second snapshot: ports the snapshot lacks
/// are left out (nothing to compare them with).
pub fn after(before: &IbFacts, ports: &[PortCounters]) -> IbFacts {
    let mut after = before.clone();
    for d in &mut after.devices {
        d.ports.retain_mut(|p| {
            let Some(s) = ports
                .iter()
                .find(|s| s.device == d.name && s.port == p.port)
            else {
                return false;
            };
            p.counters = s.counters.clone();
            p.hw_counters = s.hw_counters.clone();
            true
        });
    }
    after.devices.retain(|d| !d.ports.is_empty());
    after
}

/// The counters' second snapshot, after the traffic phases (its time counts in no lap).
pub struct Counters;

impl Phase for Counters {
    fn name(&self) -> &'static str {
        "counters"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        ctx.found.traffic.rails.counters_after =
            counters_after(&mut ctx.members, ctx.run.join_timeout());
        Lap::Untimed
    }
}

/// The RDMA counters' second snapshot, after the traffic phases: every alive node with RDMA
/// devices reads its counters again; the join's facts with those counters, by rank.
fn counters_after(members: &mut [JoinedNode], timeout: Duration) -> BTreeMap<u32, IbFacts> {
    let asked = send_orders(members, "the counters' second snapshot", |m| {
        (!m.facts.ib.devices.is_empty()).then_some(Msg::CountersSnapshot)
    });
    let mut after = BTreeMap::new();
    gather(
        members,
        &asked,
        "the counters' second snapshot",
        Wait::within(timeout.min(Duration::from_secs(10))),
        |m| matches!(m, Msg::Counters { .. }),
        |m, msg| match msg {
            Msg::Counters { ports } => {
                after.insert(m.rank, self::after(&m.facts.ib, &ports));
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    after
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{IbDevice, IbPort};
    use std::collections::BTreeMap;

    fn port(n: u32, downed: u64) -> IbPort {
        IbPort {
            port: n,
            state: "ACTIVE".into(),
            counters: BTreeMap::from([("link_downed".to_string(), downed)]),
            ..Default::default()
        }
    }

    #[test]
    fn after_takes_the_second_snapshots_counters_and_drops_unseen_ports() {
        let before = IbFacts {
            devices: vec![
                IbDevice {
                    name: "mlx5_0".into(),
                    ports: vec![port(1, 0), port(2, 0)],
                    ..Default::default()
                },
                IbDevice {
                    name: "mlx5_1".into(),
                    ports: vec![port(1, 0)],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let snap = vec![PortCounters {
            device: "mlx5_0".into(),
            port: 1,
            counters: BTreeMap::from([("link_downed".to_string(), 2)]),
            hw_counters: BTreeMap::new(),
        }];
        let a = after(&before, &snap);
        assert_eq!(a.devices.len(), 1);
        assert_eq!(a.devices[0].ports.len(), 1);
        assert_eq!(a.devices[0].ports[0].counters["link_downed"], 2);
        let grew = preflight_checks::rails::grew::check(&before, &a);
        assert_eq!(grew.len(), 1);
        assert_eq!(grew[0].id, "ib.counters-grew");
        assert!(
            grew[0].summary.contains("link_downed +2 (0 -> 2)"),
            "{grew:?}"
        );
    }
}
