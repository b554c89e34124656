//! The links the nodes report: collected from every asked node at once (checked for sense, their
//! strings shared), kept in (from, to, address) order and looked up by binary search.

use super::gather::{Step, Wait, gather};
use super::joined::JoinedNode;
use super::send::send_orders;
use crate::transport::wire::Msg;
use preflight_checks::model::{Labels, LinkResult};
use std::time::Duration;

fn is_links(m: &Msg) -> bool {
    matches!(
        m,
        Msg::ProbeDone { .. } | Msg::BulkDone { .. } | Msg::MtuDone { .. }
    )
}

/// Sends each alive member its order (None: nothing for it) and collects the links every node
/// answers, all at once, within `limit`.
pub fn exchange(
    members: &mut [JoinedNode],
    limit: Duration,
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
) -> Vec<LinkResult> {
    let asked = send_orders(members, phase, order);
    let mut got = Vec::new();
    collect_links(members, &asked, Wait::within(limit), phase, |batch| {
        got.extend(batch)
    });
    got
}

/// [`exchange`], with each node's answer copied into the matching links by `f` as it arrives:
/// no phase holds a second copy of every link.
pub fn exchange_into(
    members: &mut [JoinedNode],
    wait: Wait,
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
    links: &mut [LinkResult],
    f: impl Fn(&mut LinkResult, &LinkResult),
) {
    let asked = send_orders(members, phase, order);
    collect_links(members, &asked, wait, phase, |batch| {
        merge(links, &batch, &f)
    });
}

/// Collects the links each asked node answers (its own only), all at once, within `wait`, and
/// hands each node's batch to `take` as it arrives, checked for sense and with its strings
/// shared ([`Labels`]: a million links to a thousand addresses hold a thousand strings). A
/// node's progress reports keep it from counting as silent.
pub fn collect_links(
    members: &mut [JoinedNode],
    asked: &[usize],
    wait: Wait,
    phase: &str,
    mut take: impl FnMut(Vec<LinkResult>),
) {
    let sense = super::limits::LinkSense::of(members);
    let mut labels = Labels::default();
    let mut own = |rank: u32, batch: Vec<LinkResult>| {
        let mut batch: Vec<LinkResult> = batch.into_iter().filter(|x| x.from == rank).collect();
        sense.check(&mut batch);
        for l in &mut batch {
            labels.intern(&mut l.interface);
            labels.intern(&mut l.address);
        }
        take(batch);
    };
    gather(members, asked, phase, wait, is_links, |m, msg| match msg {
        Msg::ProbeProgress { .. } => Step::More,
        Msg::ProbeDone { links: l, resolved } => {
            own(m.rank, l);
            if let Some(r) = resolved {
                m.facts.sys.master_fqdn = Some(super::limits::bounded_lookup(r));
            }
            Step::Done
        }
        Msg::BulkDone { links: l } | Msg::MtuDone { links: l } => {
            own(m.rank, l);
            Step::Done
        }
        _ => Step::Unexpected,
    });
}

/// The order the coordinator keeps its links in (from, to, address), so [`find`] looks one up
/// without an index the size of the cluster squared.
fn link_key(l: &LinkResult) -> (u32, u32, &str) {
    (l.from, l.to, l.address.as_str())
}

/// Puts `links` in [`link_key`] order, the order [`find`] needs.
pub fn sort_links(links: &mut [LinkResult]) {
    links.sort_unstable_by(|a, b| link_key(a).cmp(&link_key(b)));
}

/// Where the link (from, to, address) is in `links` (kept in [`link_key`] order).
pub fn find(links: &[LinkResult], from: u32, to: u32, address: &str) -> Option<usize> {
    links
        .binary_search_by(|l| link_key(l).cmp(&(from, to, address)))
        .ok()
}

/// Copies fields from `got` into the matching (from, to, address) links of `links` (kept in
/// [`link_key`] order), each looked up by binary search.
pub fn merge(
    links: &mut [LinkResult],
    got: &[LinkResult],
    f: impl Fn(&mut LinkResult, &LinkResult),
) {
    for g in got {
        if let Some(i) = find(links, g.from, g.to, &g.address) {
            f(&mut links[i], g);
        }
    }
}
