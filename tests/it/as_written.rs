//! The user's own command would hang: the master address is on a management network that
//! passes only the master port. preflight must say so (`launch.as-written` warns, not a plain
//! pass), and a real torch.distributed (gloo) job run with its advice must work.

use crate::netns::{Cluster, Host, MASTER_PORT, Net, node};
use std::process::Output;

/// A gloo all-reduce of 1 Mi floats, configured by the environment torchrun would set.
const GLOO_JOB: &str = "import datetime, os, torch, torch.distributed as dist\n\
dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=20))\n\
t = torch.ones(1 << 20)\n\
dist.all_reduce(t)\n\
assert t[0].item() == dist.get_world_size(), t[0].item()\n\
print('allreduce ok', dist.get_rank(), t[0].item(), flush=True)\n\
dist.destroy_process_group()\n";

/// Rank 0 listens on a high port of `addr`; does rank 1's connection get through (3 s)?
fn high_port_connects(c: &Cluster, addr: &str) -> bool {
    let listen = concat!(
        "import socket, sys\n",
        "s = socket.socket(socket.AF_INET)\n",
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n",
        "s.bind((sys.argv[1], 45123)); s.listen(4); s.settimeout(6)\n",
        "try:\n",
        "    s.accept()\n",
        "except OSError: pass\n",
    );
    let connect = concat!(
        "import socket, sys, time\n",
        "time.sleep(1)\n",
        "try:\n",
        "    socket.create_connection((sys.argv[1], 45123), timeout=3); print('connected')\n",
        "except OSError as e: print('failed', e)\n",
    );
    std::thread::scope(|s| {
        let server = s.spawn(|| c.exec(0, &["python3", "-c", listen, addr]));
        let out = c.exec(1, &["python3", "-c", connect, addr]);
        let _ = server.join();
        String::from_utf8_lossy(&out.stdout).contains("connected")
    })
}

fn has_torch() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import torch.distributed"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_master_on_a_network_passing_only_the_master_port_warns_and_the_advice_runs_a_job() {
    let n = 2;
    let mut b = Cluster::new("aswr")
        .network(Net::new("mgmt", 1))
        .network(Net::new("data", 2));
    for i in 0..n {
        b = b.host(
            Host::new(&format!("node{i}"))
                .on("mgmt", "eth0")
                .on("data", "eth1"),
        );
    }
    let Some(c) = b.needs(&["iptables", "python3"]).build() else {
        return;
    };
    let master = MASTER_PORT.to_string();
    for rank in 0..n {
        c.iptables(
            rank,
            &[
                "-A", "INPUT", "-i", "eth0", "-p", "tcp", "--dport", &master, "-j", "ACCEPT",
            ],
        );
        c.iptables(
            rank,
            &[
                "-A", "INPUT", "-i", "eth0", "-p", "tcp", "--syn", "-j", "DROP",
            ],
        );
    }
    let runs = c.preflight().master_net("mgmt").timeout(6).run();
    let r0 = node(&runs, 0);
    let given = c.addr(0, "mgmt");
    let data0 = c.addr(0, "data");
    let f = r0.findings("launch.as-written");
    assert_eq!(f.len(), 1, "{}", r0.describe());
    let f = f[0];
    println!("launch.as-written: {} {}", f["status"], f["summary"]);
    assert_eq!(f["status"], "warn", "{f:#}");
    let summary = f["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with(&format!(
            "your command as written hangs: {given} (rank 0's eth0)"
        )),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("passes only the master port {MASTER_PORT}")),
        "{summary}"
    );
    assert!(summary.contains("timeout"), "{summary}");
    let rec = r0.recommendation();
    assert_eq!(rec["master_addr"], data0.as_str(), "{rec:#}");
    assert_eq!(rec["env"]["GLOO_SOCKET_IFNAME"], "eth1", "{rec:#}");
    // A warning, not a failure: the advice works, so the run passes with warnings.
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    assert_eq!(r0.report()["status"], "warn");

    // What a person reads: the terminal report of rank 0's JSON says it too.
    let saved = c.host_tmp(0).join("as-written-report.json");
    std::fs::write(&saved, &r0.stdout).expect("save the report");
    let out = crate::common::bin()
        .args(["render", "--format", "table"])
        .arg(&saved)
        .env("COLUMNS", "200")
        .output()
        .expect("preflight render");
    let table = String::from_utf8_lossy(&out.stdout);
    println!(
        "{}",
        table.lines().rev().take(3).collect::<Vec<_>>().join("\n")
    );
    assert!(table.contains("your command as written hangs"), "{table}");
    assert!(
        table.contains("not your command as written: it would hang"),
        "{table}"
    );

    // What the job does after the rendezvous, without torch: rank 1 opens a connection to a
    // random high port of rank 0 (as gloo and NCCL do). As written it times out; with the
    // advice it connects.
    assert!(
        !high_port_connects(&c, &given),
        "a high port on {given} should be filtered"
    );
    assert!(
        high_port_connects(&c, &data0),
        "a high port on {data0} should connect"
    );
    if !has_torch() {
        eprintln!("skipping the gloo job: python3 has no torch");
        return;
    }
    // The job with the advice: MASTER_ADDR and GLOO_SOCKET_IFNAME from the report.
    let world = n.to_string();
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let c = &c;
                let (world, data0, rank_s) = (&world, &data0, rank.to_string());
                s.spawn(move || {
                    c.exec(
                        rank,
                        &[
                            "env",
                            &format!("MASTER_ADDR={data0}"),
                            &format!("MASTER_PORT={MASTER_PORT}"),
                            &format!("WORLD_SIZE={world}"),
                            &format!("RANK={rank_s}"),
                            "GLOO_SOCKET_IFNAME=eth1",
                            "python3",
                            "-c",
                            GLOO_JOB,
                        ],
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("job thread"))
            .collect()
    });
    for (rank, out) in outs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("gloo job rank {rank}: {}", stdout.trim());
        assert!(
            out.status.success() && stdout.contains("allreduce ok"),
            "rank {rank}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
