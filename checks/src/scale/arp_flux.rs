//! `net.arp-flux`: two or more up interfaces with IPv4 addresses in one subnet, `arp_ignore` 0
//! and no per-interface `ip rule`: Linux answers ARP for any local address on every NIC and
//! routes replies out of the first, so peers learn the wrong MAC and traffic leaves by the
//! wrong NIC (NCCL: asymmetric paths, hangs when one NIC is filtered or down).

use crate::model::{Finding, Fix, NodeFacts, Status};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

pub const ID: &str = "net.arp-flux";

fn subnet(a: Ipv4Addr, prefix: u8) -> (Ipv4Addr, u8) {
    let p = prefix.min(32);
    let mask = if p == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(p))
    };
    ((u32::from(a) & mask).into(), p)
}

pub fn check(facts: &NodeFacts) -> Finding {
    let s = &facts.scale;
    let mut groups: BTreeMap<(Ipv4Addr, u8), Vec<(String, Ipv4Addr)>> = BTreeMap::new();
    for i in facts
        .net
        .interfaces
        .iter()
        .filter(|i| i.up && !i.is_virtual())
    {
        for a in &i.ipv4 {
            let std::net::IpAddr::V4(v4) = a.addr else {
                continue;
            };
            if a.prefix < 32 && !v4.is_loopback() && !v4.is_link_local() {
                groups
                    .entry(subnet(v4, a.prefix))
                    .or_default()
                    .push((i.name.clone(), v4));
            }
        }
    }
    let all = s.arp_ignore.get("all").copied().unwrap_or(0);
    let ignore = |name: &str| all.max(s.arp_ignore.get(name).copied().unwrap_or(0));
    let has_rule = |addr: &Ipv4Addr| {
        s.ip_rules.as_ref().is_some_and(|rules| {
            rules.iter().any(|r| {
                r.contains(&format!("from {addr} ")) || r.ends_with(&format!("from {addr}"))
            })
        })
    };
    let mut bad = Vec::new();
    for ((net, prefix), members) in &groups {
        let mut names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
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
    }
    let rules_read = s.ip_rules.is_some();
    if bad.is_empty() {
        let multi = groups.values().filter(|m| m.len() > 1).count();
        return Finding::new(
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
        .with("ip_rules_read", rules_read);
    }
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
                "interfaces": m.iter().map(|(n, a)| serde_json::json!({"name": n, "address": a.to_string(), "arp_ignore": ignore(n)})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut fix = Fix::new(
        "Make each NIC answer ARP only for its own address and route replies out of the NIC that owns \
         the source address (arp_ignore=1, arp_announce=2, one routing table per NIC), now and at boot; \
         or give the NICs different subnets.",
    );
    let settings = [
        ("net.ipv4.conf.all.arp_ignore", "1".to_string()),
        ("net.ipv4.conf.all.arp_announce", "2".to_string()),
    ];
    for c in super::sysctl_fix("arp", &settings) {
        fix = fix.command(c);
    }
    let mut table = 100;
    for (_, m) in &bad {
        for (n, a) in m.iter() {
            if n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                fix = fix
                    .command(format!("ip rule add from {a} table {table}"))
                    .command(format!(
                        "ip route add {} dev {n} src {a} table {table}",
                        bad_net(&bad, a)
                    ));
                table += 1;
            }
        }
    }
    Finding::new(
        ID,
        Status::Warn,
        "interfaces",
        format!(
            "several NICs in one subnet answer ARP for each other ({}) with arp_ignore 0 and no per-NIC ip rule{}: replies leave by the wrong NIC (ARP flux)",
            words.join("; "),
            if rules_read { "" } else { " (ip rules not read here)" }
        ),
    )
    .with("subnets", evidence)
    .with("arp_ignore_all", all)
    .with("ip_rules_read", rules_read)
    .fix(fix)
}

fn bad_net(bad: &[(String, Vec<&(String, Ipv4Addr)>)], a: &Ipv4Addr) -> String {
    bad.iter()
        .find(|(_, m)| m.iter().any(|(_, x)| x == a))
        .map(|(n, _)| n.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IfAddr, Interface};
    use crate::scale::testkit::defaults;

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
            let read = crate::probe::scale::probe(&crate::testutil::fixture_root(tree));
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
}
