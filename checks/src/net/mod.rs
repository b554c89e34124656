//! Checks for network interfaces, plus the name rules for virtual interfaces.

pub mod arp_flux;
pub mod catalog;
pub mod ids;
pub mod ifname;
pub mod nccl_auto_pick;
pub mod networks;
pub mod probe;

use crate::core::CheckContext;
use crate::core::{Finding, Fix, IfKind, Interface, NetFacts, NodeFacts, Status};
pub use crate::infra::host_port;
use serde_json::{Value, json};
use std::cmp::Reverse;

pub use crate::core::{VIRTUAL_PREFIXES, is_usable_addr, is_virtual_name};

/// Up, not loopback, and holding an address another node could reach.
pub fn is_usable_interface(iface: &Interface) -> bool {
    iface.up && iface.kind != IfKind::Loopback && !iface.usable_addrs().is_empty()
}

/// This node's interfaces worth giving to NCCL, best first.
///
/// Only interfaces that are up with a usable address; then physical, bond,
/// VLAN and IPoIB before anything virtual; then the fastest rated speed; then
/// the one carrying the default route; then the lowest index.
pub fn candidate_interfaces(facts: &NetFacts) -> Vec<&Interface> {
    let mut out: Vec<&Interface> = facts
        .interfaces
        .iter()
        .filter(|i| is_usable_interface(i))
        .collect();
    out.sort_by_key(|i| {
        (
            virtualness(i),
            Reverse(i.speed_mbps.unwrap_or(0)),
            !i.default_route,
            i.index,
        )
    });
    out
}

/// 0 for real NICs and their aggregates, 1 for unknown kinds, 2 for virtual ones.
fn virtualness(iface: &Interface) -> u8 {
    if iface.is_virtual() {
        2
    } else {
        match iface.kind {
            IfKind::Physical | IfKind::Bond | IfKind::Vlan | IfKind::Ipoib => 0,
            _ => 1,
        }
    }
}

/// One interface as evidence: kind, state and addresses.
pub fn interface_evidence(iface: &Interface) -> Value {
    let addrs: Vec<String> = iface
        .ipv4
        .iter()
        .chain(iface.ipv6.iter())
        .map(|a| a.to_string())
        .collect();
    json!({
        "name": iface.name,
        "kind": iface.kind.as_str(),
        "state": iface.oper_state,
        "up": iface.up,
        "addresses": addrs,
        "speed_mbps": iface.speed_mbps,
        "master": iface.master,
    })
}

pub fn check(facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    vec![no_interface(&facts.net)]
}

/// `net.no-interface`: some interface must be up, non-loopback and hold a usable address.
fn no_interface(net: &NetFacts) -> Finding {
    use crate::net::ids::NO_INTERFACE as ID;
    let evidence: Vec<Value> = net.interfaces.iter().map(interface_evidence).collect();
    if net.interfaces.is_empty() {
        if let Some(err) = &net.error {
            return Finding::new(
                ID,
                Status::Error,
                "interfaces",
                format!("could not list network interfaces: {err}"),
            )
            .with("probe_error", err);
        }
    }
    let usable = candidate_interfaces(net);
    let finding = if usable.is_empty() {
        Finding::new(
            ID,
            Status::Fail,
            "interfaces",
            format!(
                "no network interface is up with a usable address (only {}); other nodes cannot reach this one",
                names_or_none(net.interfaces.iter())
            ),
        )
        .fix(bring_up_fix(net))
    } else {
        let listed: Vec<String> = usable
            .iter()
            .map(|i| {
                let addrs: Vec<String> = i.usable_addrs().iter().map(|a| a.to_string()).collect();
                format!("{} ({})", i.name, addrs.join(", "))
            })
            .collect();
        Finding::new(
            ID,
            Status::Pass,
            "interfaces",
            format!("usable interfaces: {}", listed.join("; ")),
        )
        .with(
            "usable",
            usable.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        )
    };
    let finding = finding.with("interfaces", evidence);
    match &net.error {
        Some(err) => finding.with("probe_error", err),
        None => finding,
    }
}

fn names_or_none<'a>(ifaces: impl Iterator<Item = &'a Interface>) -> String {
    let names: Vec<&str> = ifaces.map(|i| i.name.as_str()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Commands to bring the best-looking non-loopback interface up and look at addresses.
fn bring_up_fix(net: &NetFacts) -> Fix {
    let down = net
        .interfaces
        .iter()
        .filter(|i| i.kind != IfKind::Loopback && !i.up && i.master.is_none())
        .min_by_key(|i| (virtualness(i), Reverse(i.speed_mbps.unwrap_or(0)), i.index));
    let mut fix = Fix::new(
        "Bring up the cluster-facing NIC and give it an address (DHCP or static), then re-run preflight",
    );
    if let Some(i) = down {
        fix = fix.command(format!("sudo ip link set dev {} up", i.name));
    }
    fix.command("ip -br addr show")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::IfAddr;
    use crate::infra::root::Root;
    use crate::probe;

    fn fixture_net(name: &str) -> NetFacts {
        probe::net::probe(&Root::at(format!(
            "{}/../tests/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        )))
    }

    fn facts_with(net: NetFacts) -> NodeFacts {
        NodeFacts {
            net,
            ..Default::default()
        }
    }

    fn names(v: &[&Interface]) -> Vec<String> {
        v.iter().map(|i| i.name.clone()).collect()
    }

    #[test]
    fn passes_and_lists_usable_interfaces_on_ib_node() {
        let f = check(
            &facts_with(fixture_net("ib-node")),
            &CheckContext::default(),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, crate::net::ids::NO_INTERFACE);
        assert_eq!(f[0].status, Status::Pass);
        assert!(
            f[0].summary.contains("ib0 (192.168.100.11/24)"),
            "{}",
            f[0].summary
        );
        assert!(!f[0].summary.contains("docker0"), "docker0 is down");
        assert!(f[0].fix.is_none());
        let ifaces = f[0].evidence["interfaces"].as_array().map_or(0, Vec::len);
        assert_eq!(ifaces, 5);
    }

    #[test]
    fn fails_when_only_loopback_and_link_local_exist() {
        let lo = Interface {
            name: "lo".into(),
            index: 1,
            kind: IfKind::Loopback,
            up: true,
            ipv4: vec![IfAddr {
                addr: "127.0.0.1".parse().expect("ip"),
                prefix: 8,
            }],
            ..Default::default()
        };
        let eth0 = Interface {
            name: "eth0".into(),
            index: 2,
            kind: IfKind::Physical,
            up: true,
            ipv6: vec![IfAddr {
                addr: "fe80::1".parse().expect("ip"),
                prefix: 64,
            }],
            ..Default::default()
        };
        let eth1 = Interface {
            name: "eth1".into(),
            index: 3,
            kind: IfKind::Physical,
            up: false,
            oper_state: "down".into(),
            ..Default::default()
        };
        let net = NetFacts {
            interfaces: vec![lo, eth0, eth1],
            error: None,
        };
        let f = check(&facts_with(net), &CheckContext::default());
        assert_eq!(f[0].status, Status::Fail);
        let fix = f[0].fix.clone().unwrap_or_default();
        assert_eq!(fix.commands[0], "sudo ip link set dev eth1 up");
    }

    #[test]
    fn errors_when_the_probe_found_nothing() {
        let net = NetFacts {
            interfaces: vec![],
            error: Some("no interfaces readable under /sys/class/net".into()),
        };
        let f = check(&facts_with(net), &CheckContext::default());
        assert_eq!(f[0].status, Status::Error);
    }

    #[test]
    fn candidates_rank_fast_real_nics_first() {
        assert_eq!(
            names(&candidate_interfaces(&fixture_net("ib-node"))),
            ["ib0", "eno1"]
        );
        assert_eq!(
            names(&candidate_interfaces(&fixture_net("roce-node"))),
            ["ens1f0np0", "eno1"]
        );
        // bond0 and bond0.100 tie on speed; the default route breaks the tie; docker0 comes last.
        assert_eq!(
            names(&candidate_interfaces(&fixture_net("docker-bond-host"))),
            ["bond0", "bond0.100", "docker0"]
        );
        assert_eq!(
            names(&candidate_interfaces(&fixture_net("k8s-pod"))),
            ["eth0"]
        );
        assert_eq!(
            names(&candidate_interfaces(&fixture_net("plain-vm"))),
            ["eth0"]
        );
    }

    #[test]
    fn virtual_veth_never_outranks_a_slower_physical_nic() {
        let mut net = fixture_net("plain-vm");
        net.interfaces.push(Interface {
            name: "veth9".into(),
            index: 9,
            kind: IfKind::Veth,
            up: true,
            speed_mbps: Some(10000),
            ipv4: vec![IfAddr {
                addr: "10.9.0.1".parse().expect("ip"),
                prefix: 24,
            }],
            ..Default::default()
        });
        assert_eq!(names(&candidate_interfaces(&net)), ["eth0", "veth9"]);
    }

    #[test]
    fn usable_addr_rules() {
        assert!(is_usable_addr(&"10.0.0.1".parse().expect("ip")));
        assert!(!is_usable_addr(&"127.0.1.1".parse().expect("ip")));
        assert!(!is_usable_addr(&"169.254.3.4".parse().expect("ip")));
        assert!(!is_usable_addr(&"fe80::1".parse().expect("ip")));
        assert!(is_usable_addr(&"fd00::2".parse().expect("ip")));
        assert!(is_virtual_name("docker0") && !is_virtual_name("eno1"));
    }
}
