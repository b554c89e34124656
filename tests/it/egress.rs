//! Egress firewalls in network namespaces: one node's OUTPUT chain (iptables) or nftables
//! output hook drops its own new connections to high ports. The report must blame that node
//! (not its peers' INPUT), print an outgoing fix, and that fix, run on that node, must work.

use crate::netns::{Cluster, Host, MASTER_PORT, Net, NodeRun, node};
use serde_json::Value;

/// `--timeout` for the runs: links into the filtered direction time out within it.
const TIMEOUT: u64 = 4;

#[derive(Clone, Copy)]
enum Tool {
    /// `--syn`: iptables-nft shows it to nft natively, so the probe reads it with nft.
    Iptables,
    /// `-m conntrack --ctstate NEW`: an xt match to nft, so the probe reads iptables-save.
    IptablesConntrack,
    Nft,
}

/// Drops new TCP connections host `rank` opens to ports 1024-65535 of other hosts, except
/// the master port (so it still joins), with `tool`.
fn drop_outgoing_high_ports(c: &Cluster, rank: usize, tool: Tool) {
    let master = MASTER_PORT.to_string();
    match tool {
        Tool::Iptables => {
            c.iptables(
                rank,
                &[
                    "-A", "OUTPUT", "!", "-o", "lo", "-p", "tcp", "--dport", &master, "-j",
                    "ACCEPT",
                ],
            );
            c.iptables(
                rank,
                &[
                    "-A",
                    "OUTPUT",
                    "!",
                    "-o",
                    "lo",
                    "-p",
                    "tcp",
                    "--syn",
                    "--dport",
                    "1024:65535",
                    "-j",
                    "DROP",
                ],
            );
        }
        Tool::IptablesConntrack => {
            c.iptables(rank, &["-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"]);
            c.iptables(
                rank,
                &[
                    "-A", "OUTPUT", "-p", "tcp", "--dport", &master, "-j", "ACCEPT",
                ],
            );
            c.iptables(
                rank,
                &[
                    "-A",
                    "OUTPUT",
                    "-p",
                    "tcp",
                    "--dport",
                    "1024:65535",
                    "-m",
                    "conntrack",
                    "--ctstate",
                    "NEW",
                    "-j",
                    "DROP",
                ],
            );
        }
        Tool::Nft => {
            let script = format!(
                "add table inet egress\n\
                 add chain inet egress out {{ type filter hook output priority 0; policy accept; }}\n\
                 add rule inet egress out oifname != \"lo\" tcp dport {master} accept\n\
                 add rule inet egress out oifname != \"lo\" tcp dport 1024-65535 ct state new drop\n"
            );
            sh(c, rank, &format!("printf '%s' '{script}' | nft -f -"));
        }
    }
}

/// Runs `command` with `sh -c` inside host `rank`; panics with its output on failure.
fn sh(c: &Cluster, rank: usize, command: &str) {
    let out = c.exec(rank, &["sh", "-c", command]);
    assert!(
        out.status.success(),
        "`{command}` failed in host {rank}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The closing line of the terminal report of `run`'s JSON (`preflight render`), for the log.
pub(crate) fn verdict_line(c: &Cluster, run: &NodeRun) -> String {
    let saved = c.host_tmp(run.rank).join("verdict-report.json");
    if std::fs::write(&saved, &run.stdout).is_err() {
        return String::new();
    }
    let out = crate::common::bin()
        .args(["render", "--format", "table"])
        .arg(&saved)
        .env("COLUMNS", "200")
        .output();
    let _ = std::fs::remove_file(&saved);
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_string()
    })
    .unwrap_or_default()
}

fn failing<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a Value> {
    run.findings(id)
        .into_iter()
        .filter(|f| f["status"] == "fail")
        .collect()
}

fn commands(f: &Value) -> Vec<String> {
    f["fix"]["commands"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn link_result(run: &NodeRun, from: u64, to: u64) -> Vec<String> {
    run.links()
        .into_iter()
        .filter(|l| l["from"] == from && l["to"] == to)
        .filter_map(|l| l["result"].as_str().map(str::to_string))
        .collect()
}

/// `n` hosts, the last one's egress filtered with `tool`: rank 0's report blames it, with an
/// outgoing fix; running that fix on it makes the next run pass.
fn egress_drop_is_blamed_on_the_sender_and_fixed_there(tag: &str, n: usize, tool: Tool) {
    let tools: &[&'static str] = match tool {
        Tool::Iptables | Tool::IptablesConntrack => &["iptables"],
        Tool::Nft => &["nft"],
    };
    let Some(c) = Cluster::flat(tag, n, "eth0").needs(tools).build() else {
        return;
    };
    let bad = n - 1;
    drop_outgoing_high_ports(&c, bad, tool);
    let runs = c.preflight().timeout(TIMEOUT).run();
    let r0 = node(&runs, 0);
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());
    for peer in (0..n as u64).filter(|p| *p != bad as u64) {
        assert!(
            link_result(r0, bad as u64, peer)
                .iter()
                .all(|r| r == "timeout"),
            "{bad}->{peer}: {:?}\n{}",
            link_result(r0, bad as u64, peer),
            r0.describe()
        );
        assert!(
            link_result(r0, peer, bad as u64).iter().any(|r| r == "ok"),
            "{peer}->{bad} should work: {:?}",
            link_result(r0, peer, bad as u64)
        );
    }
    let unreachable = failing(r0, "link.unreachable");
    assert_eq!(unreachable.len(), 1, "{unreachable:#?}");
    let f = unreachable[0];
    println!("{tag}: link.unreachable: {}", f["summary"]);
    println!("{tag}: fix: {:?}", commands(f));
    println!("{tag}: verdict: {}", verdict_line(&c, r0));
    assert_eq!(f["evidence"]["cause_node"], bad as u64, "{f:#}");
    assert_eq!(f["evidence"]["cause_direction"], "outgoing", "{f:#}");
    assert_eq!(f["node"], bad as u64, "{f:#}");
    let summary = f["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("outgoing"), "{summary}");
    assert!(
        !summary.contains("firewall on rank 0"),
        "rank 0's INPUT is not the cause: {summary}"
    );
    let fix = commands(f);
    assert!(!fix.is_empty(), "{f:#}");
    for cmd in &fix {
        let outgoing = match tool {
            Tool::IptablesConntrack => cmd.starts_with("iptables -I OUTPUT -d "),
            Tool::Iptables | Tool::Nft => cmd.contains("daddr") || cmd.contains("OUTPUT"),
        };
        assert!(outgoing, "not an outgoing fix: {cmd}");
        assert!(!cmd.contains("INPUT") && !cmd.contains("saddr"), "{cmd}");
    }
    // The node's own report of its rules says so too.
    let fw: Vec<&Value> = r0
        .findings("firewall.rules")
        .into_iter()
        .filter(|f| f["node"] == bad as u64)
        .collect();
    assert!(
        fw.iter()
            .any(|f| f["status"] == "warn"
                && f["summary"].as_str().unwrap_or("").contains("outgoing")),
        "firewall.rules of rank {bad}: {fw:#?}"
    );

    // The fix, run where the report says, works.
    for cmd in &fix {
        sh(&c, bad, cmd);
    }
    let runs = c.preflight().timeout(TIMEOUT * 3).run();
    let r0 = node(&runs, 0);
    assert!(
        failing(r0, "link.unreachable").is_empty(),
        "after the fix: {:#?}",
        r0.findings("link.unreachable")
    );
    println!("{tag}: after the fix: {}", verdict_line(&c, r0));
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
}

#[test]
fn iptables_output_drop_on_one_node_of_two() {
    egress_drop_is_blamed_on_the_sender_and_fixed_there("eg2i", 2, Tool::Iptables);
}

#[test]
fn iptables_output_drop_on_one_node_of_three() {
    egress_drop_is_blamed_on_the_sender_and_fixed_there("eg3i", 3, Tool::Iptables);
}

#[test]
fn iptables_conntrack_output_drop_read_by_iptables_save_on_one_node_of_three() {
    egress_drop_is_blamed_on_the_sender_and_fixed_there("eg3c", 3, Tool::IptablesConntrack);
}

#[test]
fn nft_output_hook_drop_on_one_node_of_two() {
    egress_drop_is_blamed_on_the_sender_and_fixed_there("eg2n", 2, Tool::Nft);
}

#[test]
fn nft_output_hook_drop_on_one_node_of_three() {
    egress_drop_is_blamed_on_the_sender_and_fixed_there("eg3n", 3, Tool::Nft);
}

#[test]
fn ip6tables_output_drop_on_an_ipv6_network_is_blamed_on_the_sender() {
    let Some(c) = Cluster::new("eg6")
        .network(Net::new("data", 1).v6())
        .host(Host::new("node0").on("data", "eth0"))
        .host(Host::new("node1").on("data", "eth0"))
        .needs(&["ip6tables"])
        .build()
    else {
        return;
    };
    sh(
        &c,
        1,
        &format!(
            "ip6tables -A OUTPUT ! -o lo -p tcp --dport {MASTER_PORT} -j ACCEPT && ip6tables -A OUTPUT ! -o lo -p tcp --syn --dport 1024:65535 -j DROP"
        ),
    );
    let runs = c.preflight().timeout(TIMEOUT).run();
    let r0 = node(&runs, 0);
    let unreachable = failing(r0, "link.unreachable");
    assert_eq!(unreachable.len(), 1, "{}", r0.describe());
    let f = unreachable[0];
    println!("eg6: {}", f["summary"]);
    println!("eg6: fix: {:?}", commands(f));
    assert_eq!(f["evidence"]["cause_node"], 1, "{f:#}");
    assert_eq!(f["evidence"]["cause_direction"], "outgoing", "{f:#}");
    let fix = commands(f);
    assert!(
        fix.iter()
            .all(|c| c.contains("ip6 daddr") || c.starts_with("ip6tables -I OUTPUT -d ")),
        "{fix:?}"
    );
    for cmd in &fix {
        sh(&c, 1, cmd);
    }
    let runs = c.preflight().timeout(TIMEOUT * 3).run();
    let r0 = node(&runs, 0);
    assert!(
        failing(r0, "link.unreachable").is_empty(),
        "{}",
        r0.describe()
    );
}
