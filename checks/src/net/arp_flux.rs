//! `net.arp-flux`: two or more up interfaces with IPv4 addresses in one subnet, `arp_ignore` 0
//! and no per-interface `ip rule`: Linux answers ARP for any local address on every NIC and
//! routes replies out of the first, so peers learn the wrong MAC and traffic leaves by the
//! wrong NIC (NCCL: asymmetric paths, hangs when one NIC is filtered or down). With strict
//! `rp_filter` (1) on a NIC the subnet's route does not leave by, the kernel also drops what
//! arrives on it: peers dialling that NIC's address time out, as if a firewall dropped them.

use crate::core::{Finding, Fix, IfKind, NodeFacts, Status};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

pub use crate::net::ids::ARP_FLUX as ID;

fn subnet(a: Ipv4Addr, prefix: u8) -> (Ipv4Addr, u8) {
    let p = prefix.min(32);
    let mask = if p == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(p))
    };
    ((u32::from(a) & mask).into(), p)
}

/// True when `a` lies in the subnet `(net, prefix)`.
fn within(a: Ipv4Addr, (net, prefix): (Ipv4Addr, u8)) -> bool {
    subnet(a, prefix).0 == net
}

/// Up, non-loopback IPv4 addresses of NICs a peer could dial (a pod's or a test host's veth
/// counts; docker and other bridges, loopback and host-side veths do not), grouped by the
/// widest subnet that holds them: a /20 on one NIC and a /24 inside it on another are one group.
fn overlapping(facts: &NodeFacts) -> BTreeMap<(Ipv4Addr, u8), Vec<(String, Ipv4Addr)>> {
    let mut addrs: Vec<(u8, String, Ipv4Addr)> = Vec::new();
    for i in facts.net.interfaces.iter().filter(|i| {
        i.up && !matches!(i.kind, IfKind::Docker | IfKind::Bridge | IfKind::Loopback)
            && !crate::net::is_virtual_name(&i.name)
    }) {
        for a in &i.ipv4 {
            if let std::net::IpAddr::V4(v4) = a.addr
                && a.prefix < 32
                && !v4.is_loopback()
                && !v4.is_link_local()
            {
                addrs.push((a.prefix, i.name.clone(), v4));
            }
        }
    }
    addrs.sort();
    let mut groups: BTreeMap<(Ipv4Addr, u8), Vec<(String, Ipv4Addr)>> = BTreeMap::new();
    for (prefix, name, a) in addrs {
        let key = groups
            .keys()
            .copied()
            .find(|k| within(a, *k))
            .unwrap_or_else(|| subnet(a, prefix));
        groups.entry(key).or_default().push((name, a));
    }
    groups
}

/// When `iface` shares an IPv4 subnet with another NIC of this node and strict rp_filter is on
/// for it without a per-NIC rule: the subnet and the other NICs. What arrives on `iface` is
/// dropped whenever the subnet's route leaves by one of the others.
pub(crate) fn strict_shared_nic(facts: &NodeFacts, iface: &str) -> Option<(String, Vec<String>)> {
    let s = &facts.scale;
    let rp_all = s.rp_filter.get("all").copied().unwrap_or(0);
    if rp_all.max(s.rp_filter.get(iface).copied().unwrap_or(0)) != 1 {
        return None;
    }
    overlapping(facts)
        .into_iter()
        .find_map(|((net, prefix), members)| {
            let mine: Vec<&Ipv4Addr> = members
                .iter()
                .filter(|(n, _)| n == iface)
                .map(|(_, a)| a)
                .collect();
            let ruled = mine.iter().any(|a| {
                s.ip_rules.as_ref().is_some_and(|rules| {
                    rules.iter().any(|r| {
                        r.contains(&format!("from {a} ")) || r.ends_with(&format!("from {a}"))
                    })
                })
            });
            let mut others: Vec<String> = members
                .iter()
                .filter(|(n, _)| n != iface)
                .map(|(n, _)| n.clone())
                .collect();
            others.sort_unstable();
            others.dedup();
            (!mine.is_empty() && !ruled && !others.is_empty())
                .then(|| (format!("{net}/{prefix}"), others))
        })
}

pub fn check(facts: &NodeFacts) -> Finding {
    let s = &facts.scale;
    let groups = overlapping(facts);
    let all = s.arp_ignore.get("all").copied().unwrap_or(0);
    let ignore = |name: &str| all.max(s.arp_ignore.get(name).copied().unwrap_or(0));
    let rp_all = s.rp_filter.get("all").copied().unwrap_or(0);
    // The kernel uses the larger of "all" and the interface's own value; 1 is strict.
    let rp = |name: &str| rp_all.max(s.rp_filter.get(name).copied().unwrap_or(0));
    let has_rule = |addr: &Ipv4Addr| {
        s.ip_rules.as_ref().is_some_and(|rules| {
            rules.iter().any(|r| {
                r.contains(&format!("from {addr} ")) || r.ends_with(&format!("from {addr}"))
            })
        })
    };
    let mut bad = Vec::new();
    let mut strict: Vec<(String, Ipv4Addr, String)> = Vec::new();
    for ((net, prefix), members) in &groups {
        let mut names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.len() < 2 {
            continue;
        }
        let exposed: Vec<&(String, Ipv4Addr)> = members
            .iter()
            .filter(|(n, a)| ignore(n) == 0 && !has_rule(a))
            .collect();
        if exposed.len() >= 2 {
            bad.push((format!("{net}/{prefix}"), exposed));
        }
        strict.extend(
            members
                .iter()
                .filter(|(n, a)| rp(n) == 1 && !has_rule(a))
                .map(|(n, a)| (n.clone(), *a, format!("{net}/{prefix}"))),
        );
    }
    // One strict NIC in a group may be the one the route leaves by; say so only when the group
    // has another NIC the route could take instead.
    if !bad.is_empty() || !strict.is_empty() {
        return flux_finding(facts, &bad, &strict, all, rp_all);
    }
    let multi = groups.values().filter(|m| m.len() > 1).count();
    Finding::new(
        ID,
        Status::Pass,
        "interfaces",
        if multi == 0 {
            "no two interfaces share an IPv4 subnet".to_string()
        } else {
            format!("{multi} subnet(s) with several NICs, each answered by its own NIC (arp_ignore or ip rules)")
        },
    )
    .with("arp_ignore_all", all)
    .with("ip_rules_read", s.ip_rules.is_some())
}

/// The warning: ARP flux (`bad`), strict rp_filter on NICs that share a subnet (`strict`), or both.
fn flux_finding(
    facts: &NodeFacts,
    bad: &[(String, Vec<&(String, Ipv4Addr)>)],
    strict: &[(String, Ipv4Addr, String)],
    all: u64,
    rp_all: u64,
) -> Finding {
    let s = &facts.scale;
    let rules_read = s.ip_rules.is_some();
    let arp_ignore = |name: &str| all.max(s.arp_ignore.get(name).copied().unwrap_or(0));
    let words: Vec<String> = bad
        .iter()
        .map(|(net, m)| {
            let list: Vec<String> = m.iter().map(|(n, a)| format!("{n} {a}")).collect();
            format!("{net}: {}", list.join(", "))
        })
        .collect();
    let evidence: Vec<serde_json::Value> = bad
        .iter()
        .map(|(net, m)| {
            serde_json::json!({
                "subnet": net,
                "interfaces": m.iter().map(|(n, a)| serde_json::json!({"name": n, "address": a.to_string(), "arp_ignore": arp_ignore(n)})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let what = match (bad.is_empty(), strict.is_empty()) {
        (false, true) => "answer ARP only for its own address",
        (true, _) => "accept what arrives on it (rp_filter=2, loose)",
        (false, false) => {
            "answer ARP only for its own address, accept what arrives on it (rp_filter=2, loose)"
        }
    };
    let mut fix = Fix::new(format!(
        "Make each NIC {what} and route replies out of the NIC that owns the source address ({}one \
         routing table per NIC), now and at boot; or give the NICs different subnets.",
        if bad.is_empty() {
            ""
        } else {
            "arp_ignore=1, arp_announce=2, "
        }
    ));
    let mut settings: Vec<(String, String)> = Vec::new();
    if !bad.is_empty() {
        settings.push(("net.ipv4.conf.all.arp_ignore".into(), "1".into()));
        settings.push(("net.ipv4.conf.all.arp_announce".into(), "2".into()));
    }
    let plain = |n: &str| {
        n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !strict.is_empty() {
        if rp_all == 1 {
            settings.push(("net.ipv4.conf.all.rp_filter".into(), "2".into()));
        }
        for (n, _, _) in strict.iter().filter(|(n, _, _)| plain(n)) {
            settings.push((format!("net.ipv4.conf.{n}.rp_filter"), "2".into()));
        }
    }
    let settings: Vec<(&str, String)> = settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let tag = if bad.is_empty() { "rp-filter" } else { "arp" };
    for c in crate::infra::sysctl::sysctl_fix(tag, &settings) {
        fix = fix.command(c);
    }
    // One routing table per NIC of every subnet named, each NIC once.
    let mut routed: Vec<(String, Ipv4Addr, String)> = Vec::new();
    for (net, m) in bad {
        for (n, a) in m.iter() {
            routed.push((n.clone(), *a, net.clone()));
        }
    }
    routed.extend(strict.iter().cloned());
    let mut seen = std::collections::BTreeSet::new();
    routed.retain(|(n, a, _)| seen.insert((n.clone(), *a)));
    for (table, (n, a, net)) in (100..).zip(routed.iter().filter(|(n, _, _)| plain(n))) {
        fix = fix
            .command(format!("ip rule add from {a} table {table}"))
            .command(format!("ip route add {net} dev {n} src {a} table {table}"));
    }
    let mut parts = Vec::new();
    if !bad.is_empty() {
        parts.push(format!(
            "several NICs in one subnet answer ARP for each other ({}) with arp_ignore 0 and no per-NIC ip rule{}: replies leave by the wrong NIC (ARP flux)",
            words.join("; "),
            if rules_read { "" } else { " (ip rules not read here)" }
        ));
    }
    if !strict.is_empty() {
        let list: Vec<String> = strict
            .iter()
            .map(|(n, a, net)| format!("{n} {a} in {net}"))
            .collect();
        parts.push(format!(
            "rp_filter is 1 (strict) on {} while another NIC shares the subnet and no per-NIC ip rule exists{}: the kernel routes the subnet out of one NIC only, so a packet that arrives on any other is dropped, and peers dialling that NIC's address time out as if a firewall dropped them",
            list.join(", "),
            if rules_read { "" } else { " (ip rules not read here)" }
        ));
    }
    let strict_ev: Vec<serde_json::Value> = strict
        .iter()
        .map(|(n, a, net)| serde_json::json!({"name": n, "address": a.to_string(), "subnet": net}))
        .collect();
    Finding::new(ID, Status::Warn, "interfaces", parts.join("; and "))
        .with("subnets", evidence)
        .with("rp_filter_strict", strict_ev)
        .with("arp_ignore_all", all)
        .with("rp_filter_all", rp_all)
        .with("ip_rules_read", rules_read)
        .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IfAddr, Interface};
    use crate::sys::scale::testkit::defaults;

    fn two_nics_one_subnet() -> NodeFacts {
        let mut f = defaults();
        for (name, a) in [("ens1", "10.5.0.11"), ("ens2", "10.5.0.12")] {
            f.net.interfaces.push(Interface {
                name: name.into(),
                up: true,
                ipv4: vec![IfAddr {
                    addr: a.parse().unwrap(),
                    prefix: 24,
                }],
                ..Default::default()
            });
        }
        f.scale.arp_ignore = [("all", 0), ("ens1", 0), ("ens2", 0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        f.scale.ip_rules = Some(vec![
            "0:\tfrom all lookup local".into(),
            "32766:\tfrom all lookup main".into(),
        ]);
        f
    }

    #[test]
    fn fires_on_two_nics_in_one_subnet_and_names_them() {
        let out = check(&two_nics_one_subnet());
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert!(
            out.summary
                .contains("10.5.0.0/24: ens1 10.5.0.11, ens2 10.5.0.12"),
            "{}",
            out.summary
        );
        let cmds = out.fix.unwrap().commands;
        assert!(cmds.contains(&"sysctl -w net.ipv4.conf.all.arp_ignore=1".to_string()));
        assert!(cmds.contains(&"ip rule add from 10.5.0.11 table 100".to_string()));
        assert!(
            cmds.contains(&"ip route add 10.5.0.0/24 dev ens2 src 10.5.0.12 table 101".to_string())
        );
    }

    #[test]
    fn arp_ignore_read_from_the_fixture_trees_decides() {
        let mut f = two_nics_one_subnet();
        for (tree, want) in [
            ("scale-small", Status::Warn),
            ("scale-raised", Status::Pass),
        ] {
            let read = crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root(tree));
            f.scale.arp_ignore = read.arp_ignore;
            f.scale.arp_ignore.insert("ens1".into(), 0);
            f.scale.arp_ignore.insert("ens2".into(), 0);
            assert_eq!(check(&f).status, want, "{tree}");
        }
    }

    #[test]
    fn arp_ignore_or_per_nic_rules_or_one_nic_per_subnet_pass() {
        let mut f = two_nics_one_subnet();
        f.scale.arp_ignore.insert("all".into(), 1);
        assert_eq!(check(&f).status, Status::Pass);
        let mut f = two_nics_one_subnet();
        f.scale
            .ip_rules
            .as_mut()
            .unwrap()
            .push("100:\tfrom 10.5.0.11 lookup 100".into());
        f.scale
            .ip_rules
            .as_mut()
            .unwrap()
            .push("101:\tfrom 10.5.0.12 lookup 101".into());
        assert_eq!(check(&f).status, Status::Pass);
        let mut f = two_nics_one_subnet();
        f.net.interfaces[1].ipv4[0].addr = "10.6.0.12".parse().unwrap();
        assert_eq!(check(&f).status, Status::Pass);
    }

    /// Two veths (a pod's, a test host's) in one /20, ARP answered right, rp_filter strict on
    /// the second: what arrives on it is dropped.
    fn strict_rp_filter_in_a_slash20() -> NodeFacts {
        let mut f = two_nics_one_subnet();
        for (i, a) in f
            .net
            .interfaces
            .iter_mut()
            .rev()
            .take(2)
            .zip(["10.5.3.12", "10.5.0.11"])
        {
            i.kind = IfKind::Veth;
            i.ipv4[0].addr = a.parse().unwrap();
            i.ipv4[0].prefix = 20;
        }
        f.scale.arp_ignore.insert("all".into(), 1);
        f.scale.rp_filter = [("all", 0), ("ens1", 0), ("ens2", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        f
    }

    #[test]
    fn strict_rp_filter_on_a_nic_sharing_a_slash20_is_named_with_the_loose_setting() {
        let out = check(&strict_rp_filter_in_a_slash20());
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert!(
            out.summary
                .starts_with("rp_filter is 1 (strict) on ens2 10.5.3.12 in 10.5.0.0/20"),
            "{}",
            out.summary
        );
        assert!(
            out.summary
                .contains("time out as if a firewall dropped them")
        );
        let cmds = out.fix.unwrap().commands;
        assert_eq!(
            cmds[0], "sysctl -w net.ipv4.conf.ens2.rp_filter=2",
            "{cmds:?}"
        );
        assert!(
            cmds.contains(&"ip rule add from 10.5.3.12 table 100".to_string()),
            "{cmds:?}"
        );
        assert!(
            cmds.contains(&"ip route add 10.5.0.0/20 dev ens2 src 10.5.3.12 table 100".to_string()),
            "{cmds:?}"
        );
        assert_eq!(out.evidence["rp_filter_strict"][0]["name"], "ens2");
    }

    #[test]
    fn a_slash24_inside_another_nics_slash20_is_one_subnet() {
        let mut f = two_nics_one_subnet();
        f.net.interfaces.last_mut().unwrap().ipv4[0] = IfAddr {
            addr: "10.5.7.12".parse().unwrap(),
            prefix: 24,
        };
        f.net.interfaces.iter_mut().rev().nth(1).unwrap().ipv4[0].prefix = 20;
        let out = check(&f);
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert!(
            out.summary
                .contains("10.5.0.0/20: ens1 10.5.0.11, ens2 10.5.7.12"),
            "{}",
            out.summary
        );
    }

    #[test]
    fn loose_rp_filter_per_nic_rules_or_a_docker_bridge_pass() {
        let mut f = strict_rp_filter_in_a_slash20();
        f.scale.rp_filter.insert("all".into(), 2);
        assert_eq!(check(&f).status, Status::Pass, "{:#?}", check(&f));
        let mut f = strict_rp_filter_in_a_slash20();
        f.scale
            .ip_rules
            .as_mut()
            .unwrap()
            .push("101:\tfrom 10.5.3.12 lookup 101".into());
        assert_eq!(check(&f).status, Status::Pass);
        let mut f = strict_rp_filter_in_a_slash20();
        f.net.interfaces.last_mut().unwrap().kind = IfKind::Bridge;
        assert_eq!(check(&f).status, Status::Pass);
    }
}
