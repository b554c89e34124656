//! Helpers shared by the cluster checks: ranks in words, per-rank evidence maps, the majority value, and the links measured on one network.

use crate::core::ClusterInput;
use crate::core::LinkResult;
use crate::core::{Member, NetworkEval};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Characters of a group's hostlist in a summary.
pub(crate) const GROUP_CHARS: usize = 48;

/// Names listed in a summary before "and N more".
pub(crate) const LIST_CAP: usize = 12;

fn ranks_text(ranks: &[u32]) -> String {
    let shown: Vec<String> = ranks.iter().take(LIST_CAP).map(u32::to_string).collect();
    let more = ranks.len().saturating_sub(LIST_CAP);
    let s = shown.join(", ");
    if more > 0 {
        format!("{s} and {more} more")
    } else {
        s
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("rank {one}")
    } else {
        format!("ranks {many}")
    }
}

pub(crate) fn ranks_phrase(ranks: &[u32]) -> String {
    let t = ranks_text(ranks);
    plural(ranks.len(), &t, &t)
}

pub(crate) use crate::infra::host_port;

pub(crate) fn rank_map<T: serde::Serialize>(values: &BTreeMap<u32, T>) -> Value {
    let m: Map<String, Value> = values
        .iter()
        .map(|(r, v)| {
            (
                r.to_string(),
                serde_json::to_value(v).unwrap_or(Value::Null),
            )
        })
        .collect();
    Value::Object(m)
}

/// The most frequent value; ties go to the value seen on the lowest rank.
pub(crate) fn most_common<T: Ord + Clone>(values: &BTreeMap<u32, T>) -> Option<T> {
    let mut counts: BTreeMap<&T, (usize, u32)> = BTreeMap::new();
    for (rank, v) in values {
        let e = counts.entry(v).or_insert((0, *rank));
        e.0 += 1;
        e.1 = e.1.min(*rank);
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.1.1.cmp(&a.1.1)))
        .map(|(v, _)| v.clone())
}

fn is_member_address(member: &Member, address: &str) -> bool {
    address
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .map(|a| a == member.address)
        .unwrap_or_else(|_| member.address.to_string() == address)
}

/// Links that targeted a member address of `eval`'s network.
pub(crate) fn links_on<'a>(input: &'a ClusterInput, eval: &NetworkEval) -> Vec<&'a LinkResult> {
    links_to(input.links, eval)
}

/// Links among `links` that targeted a member address of `eval`'s network.
/// Sized for every link at once: a list of a million grown by doubling would hold half as much
/// again for a moment.
pub(crate) fn links_to<'a>(links: &'a [LinkResult], eval: &NetworkEval) -> Vec<&'a LinkResult> {
    let mut on = Vec::with_capacity(links.len());
    on.extend(links.iter().filter(|l| {
        l.from != l.to
            && eval
                .network
                .members
                .get(&l.to)
                .is_some_and(|m| is_member_address(m, &l.address))
    }));
    on
}
