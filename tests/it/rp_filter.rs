//! Two NICs in one subnet with strict rp_filter on both nodes, in network namespaces, and the
//! subnet's routes in opposite order: each node drops what arrives on the NIC its route does not
//! leave by, so neither network carries every pair. The failed pairs name the node that drops
//! them and rp_filter (`net.arp-flux`), not a firewall.

use crate::netns::Cluster;

#[test]
fn strict_rp_filter_on_a_nic_sharing_its_subnet_is_named_instead_of_a_firewall() {
    let Some(c) = Cluster::flat("rpf", 2, "eth0").build() else {
        return;
    };
    for rank in 0..2 {
        c.second_nic(rank, "data", "eth1", &format!("10.200.1.{}/24", 101 + rank));
    }
    // Both hosts: ARP answered by the NIC that owns the address, strict reverse-path
    // filtering; host 1 routes the subnet out of eth1 first (eth0's route demoted).
    for rank in 0..2 {
        for argv in [
            &["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"][..],
            &["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1"],
        ] {
            let out = c.exec(rank, argv);
            assert!(out.status.success(), "{argv:?}: {out:?}");
        }
    }
    let addr = c.addr(1, "data");
    for argv in [
        &["ip", "route", "del", "10.200.1.0/24", "dev", "eth0"][..],
        &[
            "ip",
            "route",
            "add",
            "10.200.1.0/24",
            "dev",
            "eth0",
            "src",
            &addr,
            "metric",
            "50",
        ],
    ] {
        let out = c.exec(1, argv);
        assert!(out.status.success(), "{argv:?}: {out:?}");
    }
    let runs = c.preflight().timeout(20).run();
    let rank0 = runs.iter().find(|r| r.rank == 0).expect("rank 0 ran");
    let flux = rank0
        .findings("net.arp-flux")
        .into_iter()
        .find(|f| f["node"] == 1)
        .cloned()
        .unwrap_or_else(|| panic!("no net.arp-flux on rank 1:\n{}", rank0.describe()));
    let summary = flux["summary"].as_str().unwrap_or_default();
    eprintln!("net.arp-flux on rank 1: {summary}");
    assert_eq!(flux["status"], "warn", "{flux:#}");
    assert!(
        summary.contains("rp_filter is 1 (strict) on eth0 ") && summary.contains("10.200.1.0/24"),
        "{summary}"
    );
    let unreachable = rank0.findings("link.unreachable");
    let text = serde_json::to_string(&unreachable).unwrap_or_default();
    eprintln!("link.unreachable: {text}");
    let named = unreachable.iter().any(|f| {
        f["summary"]
            .as_str()
            .is_some_and(|s| s.contains("drops them itself") && s.contains("rp_filter 1 (strict)"))
    });
    assert!(named, "{}", rank0.describe());
    assert!(
        text.contains("rp_filter=2"),
        "the fix loosens rp_filter: {text}"
    );
    assert!(!text.contains("firewall between them"), "{text}");
}
