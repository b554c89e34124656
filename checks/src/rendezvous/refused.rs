//! `cluster.refused`: nodes that reached the coordinator and were turned away, and why.

use crate::core::ClusterInput;
use crate::core::cluster_common::LIST_CAP;
use crate::core::{Finding, Fix, Refusal, RefusalKind, Status};

fn fix_for(r: &Refusal) -> Fix {
    match r.kind {
        RefusalKind::Secret => Fix::new(format!(
            "Start preflight on {} with the same secret as rank 0: the same --token / PREFLIGHT_TOKEN / --token-file, or the same --rdzv-id (or job id) and master endpoint; compare the command lines on both",
            r.who()
        ))
        .command("ps -o args= -C preflight"),
        RefusalKind::Nnodes => Fix::new(format!(
            "Give every node the same --nnodes and a --node-rank below it; {} said: {}; compare the command lines on both",
            r.who(),
            r.reason
        ))
        .command("ps -o args= -C preflight"),
        RefusalKind::Version => {
            Fix::new("Install the same preflight release on every node (`preflight --version`)")
        }
        RefusalKind::RankTaken => Fix::new(format!(
            "Give each node its own rank: {} and {} both said rank {}; fix --node-rank (or the host list) on one of them and rerun on every node",
            r.holder.as_deref().unwrap_or("another host"),
            r.who(),
            r.claimed_rank.map_or("?".to_string(), |n| n.to_string())
        )),
        RefusalKind::NotAdmitted => Fix::new(format!(
            "{} is not an address of the hosts given (--hosts or Slurm's node list): add its host to the list, or stop preflight there",
            r.address
        )),
        RefusalKind::Limits => Fix::new(format!(
            "See what {} reports about itself (`preflight facts` there); {}",
            r.who(),
            r.reason
        )),
        RefusalKind::Listener => Fix::new(format!(
            "Run the released preflight on {}: a node only offers data listeners on its own addresses ({}); compare its interfaces with `preflight facts` there, or stop whatever runs there in its place",
            r.who(),
            r.reason
        ))
        .command("ps -o args= -C preflight"),
    }
}

pub(crate) fn refused(input: &ClusterInput) -> Vec<Finding> {
    if input.refused.is_empty() {
        return vec![Finding::new(
            crate::rendezvous::ids::REFUSED,
            Status::Pass,
            "coordinator",
            "no node was refused",
        )];
    }
    let mut out: Vec<Finding> = input
        .refused
        .iter()
        .take(LIST_CAP)
        .map(|r| {
            let subject = r
                .claimed_rank
                .map_or_else(|| r.address.clone(), |n| format!("rank {n}"));
            let claimed = r
                .claimed_rank
                .map_or(String::new(), |n| format!(" claiming rank {n}"));
            let summary = match (&r.kind, &r.holder) {
                (RefusalKind::RankTaken, Some(holder)) => format!(
                    "{}{claimed} was refused: rank {} already joined from {holder}, which keeps it",
                    r.who(),
                    r.claimed_rank.unwrap_or_default()
                ),
                _ => format!("{}{claimed} was refused: {}", r.who(), r.reason),
            };
            Finding::new(
                crate::rendezvous::ids::REFUSED,
                Status::Fail,
                subject,
                summary,
            )
            .with("address", &r.address)
            .with("claimed_rank", r.claimed_rank)
            .with("hostname", &r.hostname)
            .with("kind", r.kind)
            .with("reason", &r.reason)
            .with("holder", &r.holder)
            .fix(fix_for(r))
        })
        .collect();
    let more = input.refused.len().saturating_sub(LIST_CAP);
    if more > 0 {
        out.push(
            Finding::new(
                crate::rendezvous::ids::REFUSED,
                Status::Fail,
                "coordinator",
                format!("{more} more connections were refused (the first {LIST_CAP} are listed)"),
            )
            .with("more", more),
        );
    }
    out
}
