//! Helpers shared by the cluster checks: ranks in words, per-rank evidence maps, the majority value, and the links measured on one network.

use crate::core::ClusterInput;
use crate::core::LinkResult;
use crate::core::{Label, Link, Links, NetworkEval, RankText};
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

/// The member addresses of a network by rank, as text and as read, to tell the links that
/// targeted one (each label compared once, with no parse when its text matches).
pub(crate) struct MemberAddrs {
    texts: RankText,
    ips: BTreeMap<u32, IpAddr>,
}

impl MemberAddrs {
    pub(crate) fn of(eval: &NetworkEval) -> MemberAddrs {
        let members = &eval.network.members;
        MemberAddrs {
            texts: RankText::new(members.iter().map(|(r, m)| (*r, m.address.to_string()))),
            ips: members.iter().map(|(r, m)| (*r, m.address)).collect(),
        }
    }

    /// Whether `address` (brackets allowed) is `to`'s member address.
    pub(crate) fn is_member(&self, to: u32, address: &Label) -> bool {
        self.texts.matches(to, address, |a| {
            a.trim_matches(|c| c == '[' || c == ']')
                .parse::<IpAddr>()
                .is_ok_and(|a| self.ips.get(&to) == Some(&a))
        })
    }
}

/// Links that targeted a member address of `eval`'s network.
pub(crate) fn links_on<'a>(
    input: &'a ClusterInput,
    eval: &NetworkEval,
) -> impl Iterator<Item = Link<'a>> + 'a {
    links_to(input.links, eval)
}

/// Links among `links` that targeted a member address of `eval`'s network, read as they are
/// needed (never a list of every link: 16.7 million at 4096 nodes).
pub(crate) fn links_to<'a>(
    links: &'a Links<'a>,
    eval: &NetworkEval,
) -> impl Iterator<Item = Link<'a>> + 'a {
    let members = MemberAddrs::of(eval);
    links
        .iter()
        .filter(move |l| l.from != l.to && members.is_member(l.to, l.address))
}

/// [`links_to`] among the links held as records only (every one not ok or measured for
/// throughput): for judgments of those alone, which then skip the table's plain cells.
pub(crate) fn records_to<'a>(
    links: &'a Links<'a>,
    eval: &NetworkEval,
) -> impl Iterator<Item = &'a LinkResult> + 'a {
    let members = MemberAddrs::of(eval);
    links
        .records()
        .filter(move |l| l.from != l.to && members.is_member(l.to, &l.address))
}
