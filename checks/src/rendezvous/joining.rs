//! What a node says about its own join, before or instead of a cluster report: its master
//! address is itself ([`MasterIsSelf`]), how it dialed the master ([`Dialed`]), and why rank 0
//! turned it away ([`refused_here`]).

use crate::core::RefusalKind;
use crate::core::{Finding, Fix, Status};
use crate::infra::host_port;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// How a node dialed the master: what the name resolved to here and which addresses it tried.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Dialed {
    /// Every address the master address resolved to on this node.
    pub resolved: Vec<String>,
    /// Every `host:port` a connection was attempted to, in order, once each.
    pub tried: Vec<String>,
    /// Why the name did not resolve, when it did not.
    pub resolve_error: Option<String>,
}

impl Dialed {
    /// "node0 resolved to 10.0.0.9 on this node (tried 10.0.0.9:29500)"; for an IP address
    /// only the tried part.
    pub fn describe(&self, master: &str) -> String {
        let tried = if self.tried.is_empty() {
            "no connection was attempted".to_string()
        } else {
            format!("tried {}", self.tried.join(", "))
        };
        let literal = master
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<IpAddr>()
            .is_ok();
        if literal {
            return tried;
        }
        match (&self.resolve_error, self.resolved.is_empty()) {
            (Some(e), _) => format!("{master} did not resolve on this node: {e}"),
            (None, true) => format!("{master} resolved to no address on this node"),
            (None, false) => format!(
                "{master} resolved to {} on this node ({tried})",
                self.resolved.join(", ")
            ),
        }
    }
}

/// Is `master` a host name (not an IP address literal)?
pub(crate) fn is_name(master: &str) -> bool {
    master
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .is_err()
}

/// The facts behind the "master is this node" rule: a node whose rank is not 0 was given one
/// of its own addresses as the master address, so it would wait for itself.
pub struct MasterIsSelf<'a> {
    /// The finding id to report under (`cluster.rendezvous`, `launch.endpoint`, `env.master`).
    pub id: crate::core::FindingId,
    pub rank: u32,
    /// The master address as given.
    pub master: &'a str,
    pub port: u16,
    /// How it was given, for the fix: "--master-addr", "MASTER_ADDR", "--rdzv-endpoint".
    pub given_as: &'a str,
    /// What `master` resolved to on this node (the address itself when it is one).
    pub resolved: &'a [IpAddr],
    /// This node's own addresses.
    pub own: &'a [IpAddr],
    /// Rank 0's host and addresses, when this node can know them (from `--hosts`/Slurm).
    pub rank0: Option<(&'a str, &'a [IpAddr])>,
}

impl MasterIsSelf<'_> {
    fn is_self(&self, a: &IpAddr) -> bool {
        a.is_loopback() || self.own.contains(a)
    }

    /// The FAIL finding when the rule fires: rank is not 0 and every address the master
    /// resolved to is this node's own (or loopback). `None` otherwise.
    pub fn judge(&self) -> Option<Finding> {
        if self.rank == 0
            || self.resolved.is_empty()
            || !self.resolved.iter().all(|a| self.is_self(a))
        {
            return None;
        }
        let resolved: Vec<String> = self.resolved.iter().map(|a| a.to_string()).collect();
        let addrs = resolved.join(", ");
        let given = if is_name(self.master) {
            format!(
                "{} (which resolves to its own address {addrs} here)",
                self.master
            )
        } else {
            format!("its own address {addrs}")
        };
        let rank = self.rank;
        let (rank0_text, fix) = match self.rank0 {
            Some((host, addrs)) if !addrs.is_empty() => {
                let first = addrs[0].to_string();
                let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
                let shown = if host == first {
                    first.clone()
                } else {
                    format!("{} ({host})", list.join(", "))
                };
                (
                    format!("rank 0's address is {shown}"),
                    Fix::new(format!(
                        "Give this node rank 0's address, the same on every node: {}={first} (rank 0 runs on {host})",
                        self.given_as
                    ))
                    .command(format!("getent hosts {host}")),
                )
            }
            Some((host, _)) => (
                format!("rank 0 runs on {host}, whose address this node could not resolve"),
                Fix::new(format!(
                    "Give this node rank 0's address as {}, the same on every node; find it on {host}",
                    self.given_as
                ))
                .command("hostname -I"),
            ),
            None => (
                "this node cannot know rank 0's address (no --hosts or Slurm node list): find it on rank 0".to_string(),
                Fix::new(format!(
                    "On rank 0, print its address and give it to every node as {} (the same on every node); the rank 0 machine is the one started with --node-rank=0",
                    self.given_as
                ))
                .command("hostname -I"),
            ),
        };
        let own: Vec<String> = self.own.iter().map(|a| a.to_string()).collect();
        Some(
            Finding::new(
                self.id,
                Status::Fail,
                host_port(self.master, self.port),
                format!(
                    "rank {rank} was given {given} as the master address; rank 0 hosts the rendezvous, so rank {rank} would wait for itself until the timeout: {rank0_text}"
                ),
            )
            .on_node(Some(rank))
            .with("cause", "master-is-self")
            .with("rank", rank)
            .with("master", self.master)
            .with("port", self.port)
            .with("given_as", self.given_as)
            .with("resolved", &resolved)
            .with("own_addresses", &own)
            .with("rank0_host", self.rank0.map(|(h, _)| h))
            .with(
                "rank0_addresses",
                self.rank0
                    .map(|(_, a)| a.iter().map(|x| x.to_string()).collect::<Vec<_>>()),
            )
            .fix(fix),
        )
    }
}

/// What this node was started with that rank 0 may not share, for a refused node's report.
pub struct ThisNode<'a> {
    pub rank: u32,
    pub nnodes: u32,
    /// Where this node's secret came from, in words ("--rdzv-id=job7 with the master endpoint
    /// node0:29500", "--token", "the master endpoint alone").
    pub secret_from: &'a str,
}

/// The finding a node reports when rank 0 turned it away: `cluster.refused` on this node,
/// saying what differs and how to start it like the others.
pub fn refused_here(
    me: &ThisNode,
    master: &str,
    port: u16,
    kind: Option<RefusalKind>,
    reason: &str,
) -> Finding {
    let target = host_port(master, port);
    let rank = me.rank;
    let (summary, fix) = match kind {
        Some(RefusalKind::Secret) => (
            format!(
                "rank 0 at {target} refused rank {rank}: the secret differs: this node's came from {}; start every node with the same --rdzv-id/--token",
                me.secret_from
            ),
            Fix::new(format!(
                "Start every node with the same --rdzv-id (or job id) and --master-addr, or the same --token / PREFLIGHT_TOKEN / --token-file; this node used {}. Compare with the command line on rank 0",
                me.secret_from
            ))
            .command("ps -o args= -C preflight"),
        ),
        Some(RefusalKind::Nnodes) => (
            format!("rank 0 at {target} refused rank {rank}: {reason}"),
            Fix::new(format!(
                "Start every node with rank 0's --nnodes (this node used --nnodes={}) and a --node-rank below it; compare with the command line on rank 0",
                me.nnodes
            ))
            .command("ps -o args= -C preflight"),
        ),
        Some(RefusalKind::RankTaken) => (
            format!("rank 0 at {target} refused rank {rank}: {reason}"),
            Fix::new(format!(
                "Give each node its own --node-rank: this node said {rank}; fix it here or on the other node, then rerun on every node"
            ))
            .command("ps -o args= -C preflight"),
        ),
        Some(RefusalKind::Version) => (
            format!("rank 0 at {target} refused rank {rank}: {reason}"),
            Fix::new("Install the same preflight release on every node")
                .command("preflight --version"),
        ),
        _ => (
            format!("rank 0 at {target} refused rank {rank}: {reason}"),
            Fix::new("See rank 0's report (cluster.refused) for this node's address and why")
                .command("ps -o args= -C preflight"),
        ),
    };
    Finding::new(
        crate::rendezvous::ids::REFUSED,
        Status::Fail,
        target,
        summary,
    )
    .on_node(Some(rank))
    .with("rank", rank)
    .with("nnodes", me.nnodes)
    .with("kind", kind)
    .with("reason", reason)
    .with("secret_from", me.secret_from)
    .with("master", master)
    .with("port", port)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ips(v: &[&str]) -> Vec<IpAddr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn rank_1_given_its_own_address_fails_naming_rank_0s_address() {
        let own = ips(&["10.200.1.2", "172.17.0.1"]);
        let resolved = ips(&["10.200.1.2"]);
        let r0 = ips(&["10.200.1.1"]);
        let f = MasterIsSelf {
            id: crate::rendezvous::ids::RENDEZVOUS,
            rank: 1,
            master: "10.200.1.2",
            port: 29500,
            given_as: "--master-addr",
            resolved: &resolved,
            own: &own,
            rank0: Some(("node0", &r0)),
        }
        .judge()
        .expect("fires");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(1));
        assert!(
            f.summary
                .contains("rank 1 was given its own address 10.200.1.2 as the master address"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("rank 0's address is 10.200.1.1 (node0)"),
            "{}",
            f.summary
        );
        assert!(
            f.fix
                .as_ref()
                .unwrap()
                .hint
                .contains("--master-addr=10.200.1.1")
        );
        assert_eq!(f.evidence["resolved"], json!(["10.200.1.2"]));
        assert_eq!(f.evidence["rank0_addresses"], json!(["10.200.1.1"]));
    }

    #[test]
    fn without_a_host_list_it_says_it_cannot_know_and_how_to_find_out() {
        let own = ips(&["10.0.0.2"]);
        let f = MasterIsSelf {
            id: crate::launch::ids::ENDPOINT,
            rank: 3,
            master: "gpu02",
            port: 29400,
            given_as: "--rdzv-endpoint",
            resolved: &own,
            own: &own,
            rank0: None,
        }
        .judge()
        .expect("fires");
        assert_eq!(f.id, crate::launch::ids::ENDPOINT);
        assert!(
            f.summary
                .contains("gpu02 (which resolves to its own address 10.0.0.2 here)")
        );
        assert!(
            f.summary.contains("cannot know rank 0's address"),
            "{}",
            f.summary
        );
        assert_eq!(f.fix.as_ref().unwrap().commands, vec!["hostname -I"]);
    }

    #[test]
    fn rank_0_another_nodes_address_or_a_mixed_answer_do_not_fire() {
        let own = ips(&["10.0.0.2"]);
        let base = |rank, resolved: &[IpAddr]| {
            MasterIsSelf {
                id: crate::env::ids::MASTER,
                rank,
                master: "m",
                port: 1,
                given_as: "MASTER_ADDR",
                resolved,
                own: &own,
                rank0: None,
            }
            .judge()
        };
        assert!(base(0, &own).is_none(), "rank 0 is the master");
        assert!(base(1, &ips(&["10.0.0.1"])).is_none(), "another node");
        assert!(base(1, &ips(&["10.0.0.2", "10.0.0.1"])).is_none(), "mixed");
        assert!(base(1, &[]).is_none(), "nothing resolved");
        assert!(
            base(1, &ips(&["127.0.0.1"])).is_some(),
            "loopback is itself"
        );
    }

    #[test]
    fn dialed_names_the_resolution_of_a_name_and_only_the_tries_of_an_address() {
        let d = Dialed {
            resolved: vec!["10.200.1.9".into()],
            tried: vec!["10.200.1.9:29500".into()],
            resolve_error: None,
        };
        assert_eq!(
            d.describe("node0"),
            "node0 resolved to 10.200.1.9 on this node (tried 10.200.1.9:29500)"
        );
        assert_eq!(d.describe("10.200.1.9"), "tried 10.200.1.9:29500");
        let failed = Dialed {
            resolve_error: Some("no such host".into()),
            ..Default::default()
        };
        assert!(failed.describe("gpu1").contains("did not resolve"));
    }

    #[test]
    fn refused_nodes_say_what_differs() {
        let me = ThisNode {
            rank: 2,
            nnodes: 4,
            secret_from: "--rdzv-id=other with the master endpoint 10.0.0.1:29500",
        };
        let s = refused_here(
            &me,
            "10.0.0.1",
            29500,
            Some(RefusalKind::Secret),
            "bad proof",
        );
        assert_eq!(s.id, crate::rendezvous::ids::REFUSED);
        assert_eq!(s.node, Some(2));
        assert!(s.summary.contains("the secret differs"), "{}", s.summary);
        assert!(s.summary.contains("--rdzv-id=other"), "{}", s.summary);
        let n = refused_here(
            &me,
            "10.0.0.1",
            29500,
            Some(RefusalKind::Nnodes),
            "rank 0 expects 3 nodes; rank 2 was started with --nnodes=4",
        );
        assert!(
            n.summary.contains("rank 0 expects 3 nodes"),
            "{}",
            n.summary
        );
        assert!(n.fix.as_ref().unwrap().hint.contains("--nnodes=4"));
        assert_eq!(n.evidence["kind"], json!("nnodes"));
    }
}
