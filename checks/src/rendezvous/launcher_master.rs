//! `cluster.launcher-master`: the job's own `MASTER_ADDR`, as the launcher set it on the nodes,
//! judged against the nodes that joined. Two mistakes of the launch script: `MASTER_ADDR` set
//! but empty (the command meant to fill it, e.g. `scontrol show hostnames`, is missing in the
//! container: mmcv#700, DeepSpeed#2612), and under Slurm a `MASTER_ADDR` that names a node other
//! than the one with `SLURM_NODEID=0` (Primus#721), which torchrun's `--node-rank=$SLURM_NODEID`
//! makes rank 0.

use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, ranks_phrase};
use crate::core::{Finding, Fix, NodeFacts, Status};
use std::net::IpAddr;

use crate::rendezvous::ids::LAUNCHER_MASTER as ID;
/// What a Slurm batch script runs to name the first node of the job.
const SLURM_FIRST_NODE: &str = "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1";

pub(crate) fn launcher_master(input: &ClusterInput) -> Finding {
    let seen: Vec<(u32, &str)> = input
        .nodes
        .iter()
        .filter_map(|(r, f)| f.env.get("MASTER_ADDR").map(|v| (*r, v.as_str())))
        .collect();
    if seen.is_empty() {
        return Finding::new(
            ID,
            Status::Skip,
            "MASTER_ADDR",
            "no node has MASTER_ADDR set: the launch line gives the master",
        );
    }
    let slurm = input
        .nodes
        .iter()
        .any(|(_, f)| f.env.contains_key("SLURM_NODEID"));
    let rank0 = rank0_host(input);
    let empty: Vec<u32> = seen
        .iter()
        .filter(|(_, v)| v.trim().is_empty())
        .map(|(r, _)| *r)
        .collect();
    if !empty.is_empty() {
        return empty_master(input, &empty, slurm, rank0.as_deref());
    }
    if !slurm {
        return pass(&seen);
    }
    // Under Slurm: which node does each MASTER_ADDR name?
    for (_, value) in &seen {
        let Some((named, nodeid)) = named_node(input, value.trim()) else {
            continue;
        };
        if nodeid == 0 {
            continue;
        }
        let named_host = input.host(named).unwrap_or_else(|| format!("rank {named}"));
        let first = rank0.clone().unwrap_or_else(|| "the first node".into());
        let port = input.master_port;
        let others: Vec<u32> = seen
            .iter()
            .filter(|(_, v)| v.trim() == value.trim())
            .map(|(x, _)| *x)
            .collect();
        return Finding::new(
            ID,
            Status::Fail,
            "MASTER_ADDR",
            format!(
                "MASTER_ADDR={} (on {}) is {named_host}, the node with SLURM_NODEID={nodeid}, not {first}, the node with SLURM_NODEID=0: torchrun started with --node-rank=$SLURM_NODEID makes {first} rank 0 and host the store there, while every node dials {}:{port} and waits for the rendezvous timeout",
                value.trim(),
                ranks_phrase(&others),
                value.trim()
            ),
        )
        .with("cause", "not-rank0")
        .with("MASTER_ADDR", value.trim())
        .with("named_rank", named)
        .with("named_host", &named_host)
        .with("named_slurm_nodeid", nodeid)
        .with("slurm_nodeid_0_host", &rank0)
        .with("SLURM_JOB_NODELIST", nodelist(input))
        .with("seen_on", &others)
        .fix(
            Fix::new(format!(
                "Set MASTER_ADDR to the node with SLURM_NODEID=0 ({first}), the first host of the job's node list, the same on every node"
            ))
            .command(format!("export MASTER_ADDR=$({SLURM_FIRST_NODE})"))
            .command(format!("echo $SLURM_NODEID $MASTER_ADDR   # on each node: 0 must be on {first}")),
        );
    }
    pass(&seen)
}

fn pass(seen: &[(u32, &str)]) -> Finding {
    let mut values: Vec<&str> = seen.iter().map(|(_, v)| v.trim()).collect();
    values.sort();
    values.dedup();
    Finding::new(
        ID,
        Status::Pass,
        "MASTER_ADDR",
        format!(
            "the launcher's MASTER_ADDR={} names rank 0's node",
            values.join(", ")
        ),
    )
    .with("MASTER_ADDR", &values)
}

fn empty_master(input: &ClusterInput, ranks: &[u32], slurm: bool, rank0: Option<&str>) -> Finding {
    let shown: Vec<u32> = ranks.iter().take(LIST_CAP).copied().collect();
    let cause = if slurm {
        format!(
            "the command meant to fill it printed nothing, e.g. `$({SLURM_FIRST_NODE})` in a container without scontrol"
        )
    } else {
        "the command or variable meant to fill it gave nothing (a tool missing in the container, a variable the launcher did not set)".to_string()
    };
    let mut fix = Fix::new(format!(
        "Set MASTER_ADDR to rank 0's address before the job starts, the same on every node{}; where it comes from a command, run that command outside the container (or install it inside) and check it prints a host",
        rank0.map_or(String::new(), |h| format!(" ({h})"))
    ));
    fix = match rank0 {
        Some(h) => fix.command(format!("export MASTER_ADDR={h}")),
        None => fix,
    };
    if slurm {
        fix = fix
            .command(format!("export MASTER_ADDR=$({SLURM_FIRST_NODE})"))
            .command("command -v scontrol   # inside the container: empty means missing");
    }
    Finding::new(
        ID,
        Status::Fail,
        "MASTER_ADDR",
        format!(
            "MASTER_ADDR is set but empty (MASTER_ADDR='') on {}: {cause}; torchrun and the job's processes get no master to dial",
            ranks_phrase(&shown)
        ),
    )
    .with("cause", "empty")
    .with("MASTER_ADDR", "")
    .with("ranks", ranks)
    .with("rank0_host", rank0)
    .with("SLURM_JOB_NODELIST", nodelist(input))
    .fix(fix)
}

/// The host of the node with `SLURM_NODEID=0`, else rank 0's.
fn rank0_host(input: &ClusterInput) -> Option<String> {
    input
        .nodes
        .iter()
        .find(|(_, f)| slurm_nodeid(f) == Some(0))
        .and_then(|(r, _)| input.host(*r))
        .or_else(|| input.expected_host(0))
        .or_else(|| input.host(0))
}

fn slurm_nodeid(f: &NodeFacts) -> Option<u32> {
    f.env.get("SLURM_NODEID")?.trim().parse().ok()
}

fn nodelist(input: &ClusterInput) -> Option<String> {
    input.nodes.iter().find_map(|(_, f)| {
        f.env
            .get("SLURM_JOB_NODELIST")
            .or_else(|| f.env.get("SLURM_NODELIST"))
            .cloned()
    })
}

/// The joined node `value` names (by hostname, short name or one of its addresses), with its
/// `SLURM_NODEID` (its rank when unset).
fn named_node(input: &ClusterInput, value: &str) -> Option<(u32, u32)> {
    let ip = value
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .ok();
    let short = |n: &str| n.split('.').next().unwrap_or(n).to_ascii_lowercase();
    input.nodes.iter().find_map(|(r, f)| {
        let by_name = ip.is_none()
            && !f.hostname.trim().is_empty()
            && (f.hostname.trim().eq_ignore_ascii_case(value)
                || short(f.hostname.trim()) == short(value));
        let by_addr = ip.is_some_and(|ip| {
            f.net
                .interfaces
                .iter()
                .any(|i| i.ipv4.iter().chain(i.ipv6.iter()).any(|a| a.addr == ip))
        });
        (by_name || by_addr).then(|| (*r, slurm_nodeid(f).unwrap_or(*r)))
    })
}

#[cfg(test)]
mod tests {
    use crate::core::Status;
    use crate::testkit::*;

    fn slurm(c: &mut Cluster, master: &str) {
        for (i, f) in c.facts.iter_mut().enumerate() {
            f.env.insert("SLURM_NODEID".into(), i.to_string());
            f.env
                .insert("SLURM_JOB_NODELIST".into(), "node[01-03]".into());
            f.env.insert("MASTER_ADDR".into(), master.into());
        }
    }

    #[test]
    fn under_slurm_a_master_addr_on_the_second_node_fails_naming_both_nodes() {
        let mut c = Cluster::healthy(3);
        let second = c.facts[1].hostname.clone();
        let first = c.facts[0].hostname.clone();
        slurm(&mut c, &second);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::LAUNCHER_MASTER);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert!(
            f.summary.contains(&format!(
                "MASTER_ADDR={second} (on ranks 0, 1, 2) is {second}, the node with SLURM_NODEID=1, not {first}, the node with SLURM_NODEID=0"
            )),
            "{}",
            f.summary
        );
        assert_eq!(f.evidence["named_slurm_nodeid"], 1);
        assert_eq!(f.evidence["SLURM_JOB_NODELIST"], "node[01-03]");
        assert!(commands(f)[0].contains("scontrol show hostnames"));
        // By address too.
        let addr = c.facts[2].net.interfaces[0].ipv4[0].addr.to_string();
        slurm(&mut c, &addr);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::LAUNCHER_MASTER);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert_eq!(f.evidence["named_slurm_nodeid"], 2);
    }

    #[test]
    fn an_empty_master_addr_fails_naming_the_missing_command() {
        let mut c = Cluster::healthy(2);
        slurm(&mut c, "");
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::LAUNCHER_MASTER);
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary
                .contains("MASTER_ADDR is set but empty (MASTER_ADDR='') on ranks 0, 1"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("container without scontrol"),
            "{}",
            f.summary
        );
        assert_eq!(f.evidence["cause"], "empty");
    }

    #[test]
    fn the_first_node_or_no_master_addr_passes_or_skips() {
        let mut c = Cluster::healthy(2);
        let first = c.facts[0].hostname.clone();
        slurm(&mut c, &first);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::LAUNCHER_MASTER).status,
            Status::Pass
        );
        let c = Cluster::healthy(2);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::LAUNCHER_MASTER).status,
            Status::Skip
        );
    }
}
