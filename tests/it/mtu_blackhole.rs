//! An MTU black hole: both hosts at MTU 9000, the switch between them at 1500, segmentation
//! offloads off (else the veths pass large frames as GSO). The join and the report must still
//! reach every node, and the report must name the MTU with the fix.

use crate::netns::{Cluster, Host, Net, SLACK, node};
use std::time::Duration;

fn offloads_off(c: &Cluster, rank: usize) {
    let out = c.exec(
        rank,
        &[
            "ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off",
        ],
    );
    assert!(
        out.status.success(),
        "ethtool in host {rank}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sizes (UDP payload bytes) of don't-fragment datagrams host 0 sends that host 1 receives.
fn df_datagrams_received(c: &Cluster, to: &str, sizes: &[u32]) -> String {
    let recv = concat!(
        "import socket\n",
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n",
        "s.bind(('0.0.0.0', 9999)); s.settimeout(3)\n",
        "got = []\n",
        "try:\n",
        "    while True: got.append(len(s.recv(65536)))\n",
        "except OSError: pass\n",
        "print(' '.join(map(str, sorted(set(got)))))\n",
    );
    // IP_MTU_DISCOVER (10) = IP_PMTUDISC_DO (2): the DF bit, no local fragmentation.
    let send = concat!(
        "import socket, sys, time\n",
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n",
        "s.setsockopt(socket.IPPROTO_IP, 10, 2)\n",
        "time.sleep(1)\n",
        "for n in sys.argv[2:]:\n",
        "    for _ in range(3): s.sendto(b'x' * int(n), (sys.argv[1], 9999))\n",
    );
    let sizes: Vec<String> = sizes.iter().map(u32::to_string).collect();
    std::thread::scope(|scope| {
        let r = scope.spawn(|| c.exec(1, &["python3", "-c", recv]));
        let mut argv = vec!["python3", "-c", send, to];
        argv.extend(sizes.iter().map(String::as_str));
        let sent = c.exec(0, &argv);
        assert!(
            sent.status.success(),
            "{}",
            String::from_utf8_lossy(&sent.stderr)
        );
        let out = r.join().expect("receiver");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    })
}

#[test]
fn jumbo_hosts_behind_a_1500_switch_join_and_get_the_mtu_named() {
    let Some(c) = Cluster::new("mtubh")
        .network(Net::new("data", 1).mtu(1500))
        .host(Host::new("node0").on("data", "eth0").mtu("data", 9000))
        .host(Host::new("node1").on("data", "eth0").mtu("data", 9000))
        .needs(&["ethtool", "python3"])
        .build()
    else {
        return;
    };
    for rank in 0..2 {
        offloads_off(&c, rank);
    }
    let peer = c.addr(1, "data");
    // The black hole: 1400 bytes pass, 4000 vanish (no ICMP comes back through a bridge).
    assert_eq!(df_datagrams_received(&c, &peer, &[1400, 4000]), "1400");
    let timeout = 8;
    let runs = c.preflight().timeout(timeout).run();
    for run in &runs {
        // The join and the report fit a 1280-byte path: every node gets the report, in time.
        assert_eq!(run.exit_code, Some(1), "{}", run.describe());
        assert!(
            run.elapsed < Duration::from_secs(timeout + 15) + SLACK,
            "rank {} took {:?}",
            run.rank,
            run.elapsed
        );
        let f = run.findings("link.mtu-blackhole");
        assert_eq!(f.len(), 1, "{}", run.describe());
        let f = f[0];
        println!("rank {}: {} {}", run.rank, f["status"], f["summary"]);
        println!(
            "rank {}: verdict: {}",
            run.rank,
            crate::egress::verdict_line(&c, run)
        );
        assert_eq!(f["status"], "fail", "{f:#}");
        let passed = f["evidence"]["largest_passed"].as_u64().unwrap_or(0);
        assert!((1400..=1500).contains(&passed), "{f:#}");
        assert_eq!(f["evidence"]["interface_mtus"]["0"]["mtu"], 9000, "{f:#}");
        let summary = f["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("eth0 at MTU 9000"), "{summary}");
        assert!(summary.contains("MTU black hole"), "{summary}");
        assert_eq!(
            f["fix"]["commands"][0], "ip link set dev eth0 mtu 1500",
            "{f:#}"
        );
        // Not blamed on a lost node.
        assert!(
            run.findings("cluster.rendezvous")
                .iter()
                .all(|r| r["status"] != "fail"),
            "{}",
            run.describe()
        );
    }
    // The printed fix, run on both nodes, makes the next run pass.
    for rank in 0..2 {
        let out = c.exec(rank, &["ip", "link", "set", "dev", "eth0", "mtu", "1500"]);
        assert!(out.status.success());
    }
    let runs = c.preflight().timeout(timeout).run();
    let r0 = node(&runs, 0);
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    assert_eq!(r0.findings("link.mtu-blackhole")[0]["status"], "pass");
    println!("after the fix: {}", crate::egress::verdict_line(&c, r0));
}
