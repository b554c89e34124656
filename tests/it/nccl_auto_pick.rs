//! `net.nccl-auto-pick` with real processes: every node carries a BMC-style USB NIC at the same
//! link-local address (one end of a veth pair), NCCL_SOCKET_IFNAME is unset, and rank 0's report says
//! NCCL would use it too, with the advised value; without that NIC it passes.

use crate::netns::Cluster;

fn add_bmc_nic(c: &Cluster, rank: usize) {
    for argv in [
        // No dummy driver in every kernel: a veth pair kept inside the host has a carrier too.
        &[
            "ip", "link", "add", "usb0", "type", "veth", "peer", "name", "usb0p",
        ][..],
        &["ip", "addr", "add", "169.254.0.2/16", "dev", "usb0"],
        // The far end stays without an address NCCL could pick (no IPv6 link-local).
        &["sysctl", "-qw", "net.ipv6.conf.usb0p.disable_ipv6=1"],
        &["ip", "link", "set", "usb0p", "up"],
        &["ip", "link", "set", "usb0", "up"],
    ] {
        let out = c.exec(rank, argv);
        assert!(out.status.success(), "{argv:?}: {out:?}");
    }
}

#[test]
fn a_link_local_nic_on_every_node_is_named_and_a_plain_cluster_passes() {
    let Some(c) = Cluster::flat("ncclap", 3, "eth0").build() else {
        return;
    };
    for r in 0..3 {
        add_bmc_nic(&c, r);
    }
    let runs = c.preflight().timeout(20).run();
    let rank0 = runs.iter().find(|r| r.rank == 0).expect("rank 0 ran");
    let f = rank0.findings("net.nccl-auto-pick");
    assert_eq!(f.len(), 1, "{}", rank0.describe());
    assert_eq!(f[0]["status"], "warn", "{}", rank0.describe());
    let summary = f[0]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("usb0 on")
            && summary.contains("169.254.0.2: link-local, the same address on 3 nodes"),
        "{summary}"
    );
    eprintln!("net.nccl-auto-pick: {summary}");
    let fix = f[0]["fix"]["commands"].to_string();
    assert!(fix.contains("export NCCL_SOCKET_IFNAME=eth0"), "{fix}");
    assert_eq!(f[0]["evidence"]["bad_picks"][0]["nodes"], 3);
    drop(c);

    let Some(c) = Cluster::flat("ncclok", 2, "eth0").build() else {
        return;
    };
    let runs = c.preflight().timeout(20).run();
    let rank0 = runs.iter().find(|r| r.rank == 0).expect("rank 0 ran");
    let f = rank0.findings("net.nccl-auto-pick");
    assert_eq!(f.len(), 1, "{}", rank0.describe());
    assert_eq!(f[0]["status"], "pass", "{}", rank0.describe());
}
