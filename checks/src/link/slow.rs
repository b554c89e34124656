//! `link.slow`: the measured throughput judged by [`crate::link::fail_slow`] (a reference the slow part
//! cannot move, a rated speed, `--min-link-gbit`), each slow part named as what it is: a node
//! and its direction, a cut between two groups, a pair, one direction, or the whole link.

use crate::core::ClusterInput;
use crate::core::NetworkEval;
use crate::core::cluster_common::{GROUP_CHARS, records_to};
use crate::core::{AsLinks, Finding, Fix, Links, Status};
use crate::link::fail_slow::{self, Cut, Direction, Sample, SlowNode, SlowPair, Verdict};
use std::collections::HashSet;

pub use crate::link::fail_slow::SLOW_SHARE;

/// One TCP stream rarely fills more than this (Gbit/s), so faster rated links are judged by
/// the reference only.
const RATED_CHECK_MAX_GBIT: f64 = 25.0;

/// The network whose measurements are judged: the chosen one, else (a failing cluster, where
/// the healthy set needs the judgment most) the one on which the most pairs connected.
pub(crate) fn judged_network<'a>(input: &ClusterInput<'a>) -> Option<&'a NetworkEval> {
    input.chosen.or_else(|| {
        input
            .evals
            .iter()
            .filter(|e| e.pairs_ok > 0)
            .max_by_key(|e| e.pairs_ok)
    })
}

pub(crate) fn slow_links(input: &ClusterInput) -> Vec<Finding> {
    let Some(eval) = judged_network(input) else {
        return vec![Finding::new(
            crate::link::ids::SLOW,
            Status::Skip,
            "throughput",
            "no network connected any pair, so no throughput was measured",
        )];
    };
    let samples = throughput_samples(input.links, eval, input.min_link_gbit);
    let retested = retested_on(input, eval);
    let v = fail_slow::judge_retested(&samples, fail_slow::throughput_rule, &retested);
    let Some(reference) = v.reference else {
        return vec![
            Finding::new(
                crate::link::ids::SLOW,
                Status::Skip,
                eval.network.id.clone(),
                format!("no throughput was measured on {}", eval.network.id),
            )
            .with("network", &eval.network.id),
        ];
    };
    let ctx = Ctx {
        input,
        eval,
        verdict: &v,
        reference,
        retested,
    };
    let mut out: Vec<Finding> = Vec::new();
    out.extend(v.nodes.iter().map(|n| ctx.node(n)));
    out.extend(v.cuts.iter().map(|c| ctx.cut(c)));
    out.extend(v.pairs_slow.iter().map(|p| ctx.pair(p)));
    if v.unlisted_pairs > 0 {
        out.push(ctx.unlisted());
    }
    if let Some(e) = &v.everywhere {
        out.push(ctx.everywhere(e));
    }
    if out.is_empty() {
        out.push(ctx.pass());
    }
    out
}

/// The measured throughput of each ordered pair on `eval`, with its floor: half the rated
/// speed of a link one stream can fill, or `--min-link-gbit`, whichever is higher. The
/// coordinator judges its retest's suspects from the same samples.
pub fn throughput_samples(
    links: impl AsLinks,
    eval: &NetworkEval,
    min_link_gbit: Option<f64>,
) -> Vec<Sample> {
    links.with_links(|links| samples_in(links, eval, min_link_gbit))
}

fn samples_in(links: &Links, eval: &NetworkEval, min_link_gbit: Option<f64>) -> Vec<Sample> {
    // A measured link is always a record: the table's plain cells are skipped.
    records_to(links, eval)
        .filter_map(|l| {
            let tp = l.throughput_gbit_s.map(f64::from)?;
            let rated = rated_gbit(eval, l.from, l.to)
                .filter(|r| *r <= RATED_CHECK_MAX_GBIT)
                .map(|r| SLOW_SHARE * r)
                .unwrap_or(0.0);
            Some(Sample {
                from: l.from,
                to: l.to,
                value: tp,
                floor: rated.max(min_link_gbit.unwrap_or(0.0)),
            })
        })
        .collect()
}

/// The ordered pairs measured again on `eval` (the retest before naming).
fn retested_on(input: &ClusterInput, eval: &NetworkEval) -> HashSet<(u32, u32)> {
    input
        .retested
        .iter()
        .filter(|(_, to, addr)| {
            eval.network
                .members
                .get(to)
                .is_some_and(|m| m.address.to_string() == *addr)
        })
        .map(|(from, to, _)| (*from, *to))
        .collect()
}

/// The lower rated speed of the two ends, in Gbit/s. A virtual interface's speed (a veth or a
/// bridge port says 10000 Mb/s whatever carries it) is the kernel's placeholder, not a rate.
fn rated_gbit(eval: &NetworkEval, from: u32, to: u32) -> Option<f64> {
    let rate = |r: u32| {
        eval.network
            .members
            .get(&r)
            .filter(|m| !m.is_virtual)
            .and_then(|m| m.speed_mbps)
    };
    let mbps = match (rate(from), rate(to)) {
        (Some(x), Some(y)) => x.min(y),
        (x, y) => x.or(y)?,
    };
    (mbps > 0).then_some(mbps as f64 / 1000.0)
}

/// What every `link.slow` finding of one network is written from.
struct Ctx<'a> {
    input: &'a ClusterInput<'a>,
    eval: &'a NetworkEval,
    verdict: &'a Verdict,
    reference: f64,
    /// The ordered pairs measured again on this network.
    retested: HashSet<(u32, u32)>,
}

fn gbit(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

impl Ctx<'_> {
    fn net(&self) -> &str {
        &self.eval.network.id
    }

    fn member(&self, rank: u32) -> Option<&crate::core::Member> {
        self.eval.network.members.get(&rank)
    }

    fn iface(&self, rank: u32) -> String {
        self.member(rank)
            .map(|m| m.interface.clone())
            .unwrap_or_default()
    }

    fn address(&self, rank: u32) -> String {
        self.member(rank)
            .map(|m| m.address.to_string())
            .unwrap_or_default()
    }

    fn subnet(&self, rank: u32) -> String {
        self.member(rank)
            .map(|m| m.subnet.clone())
            .unwrap_or_default()
    }

    /// "the cluster's reference 9.41 Gbit/s (the upper quartile of 46 measured pairs, ...)".
    fn reference_text(&self) -> String {
        format!(
            "the cluster's reference {:.2} Gbit/s (the upper quartile of {} measured pairs, which a slow minority cannot move)",
            self.reference, self.verdict.pairs
        )
    }

    /// Ordered pairs retested that touch `rank` (or any, for None).
    fn retested(&self, rank: Option<u32>) -> usize {
        self.retested
            .iter()
            .filter(|(from, to)| rank.is_none_or(|r| *from == r || *to == r))
            .count()
    }

    fn retest_text(&self, rank: Option<u32>) -> String {
        match self.retested(rank) {
            0 => String::new(),
            n => format!(
                "; measured again with few flows at once before naming it ({n} directions retested, the better figure kept)"
            ),
        }
    }

    /// A warning; `part` names the slow part in a few words, for the all-reduce's finding.
    fn base(&self, subject: String, summary: String, kind: &str, part: String) -> Finding {
        Finding::new(crate::link::ids::SLOW, Status::Warn, subject, summary)
            .with("kind", kind)
            .with("unconfirmed", self.verdict.unconfirmed)
            .with("part", part)
            .with("network", self.net())
            .with("reference_gbit_s", self.reference)
            .with("pairs_measured", self.verdict.pairs)
    }

    fn nic_commands(&self, mut fix: Fix, rank: u32) -> Fix {
        let (iface, who) = (self.iface(rank), self.input.who(rank));
        fix = fix
            .command(format!("ethtool {iface}   # on {who}"))
            .command(format!(
                "ethtool -S {iface} | grep -i -e err -e drop -e discard   # on {who}"
            ))
            .command(format!("tc qdisc show dev {iface}   # on {who}"));
        fix
    }

    fn node(&self, n: &SlowNode) -> Finding {
        let who = self.input.who(n.rank);
        let way = match n.direction {
            Direction::Sending => "sending",
            Direction::Receiving => "receiving",
            Direction::Both => "sending and receiving",
        };
        let worst = match n.direction {
            Direction::Sending => n.send_median,
            Direction::Receiving => n.recv_median,
            Direction::Both => match (n.send_median, n.recv_median) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
        .unwrap_or(0.0);
        let share = 100.0 * worst / self.reference.max(f64::MIN_POSITIVE);
        let summary = format!(
            "{who} is slow {way} on {}: median {} Gbit/s sending and {} receiving with its {} healthy partners ({} of them slow with it), {share:.0}% of {}{}. Its partners are fast with everyone else, so the node (its NIC, its link to the switch, or its load), not one link, is the cause",
            self.net(),
            gbit(n.send_median),
            gbit(n.recv_median),
            n.partners,
            n.slow_partners,
            self.reference_text(),
            self.retest_text(Some(n.rank)),
        );
        let fix = Fix::new(format!(
            "Check {who}'s NIC on {}: negotiated speed and duplex (ethtool), error and drop counters, traffic shaping (tc), and what else runs there; then rerun preflight",
            self.iface(n.rank)
        ));
        self.base(
            format!("{} {}", n.rank, self.iface(n.rank)),
            summary,
            "node",
            format!("{who}, slow {way}"),
        )
        .on_node(Some(n.rank))
        .with("node", n.rank)
        .with("direction", n.direction.as_str())
        .with("send_median_gbit_s", n.send_median)
        .with("recv_median_gbit_s", n.recv_median)
        .with(
            "share_of_reference",
            worst / self.reference.max(f64::MIN_POSITIVE),
        )
        .with("partners", n.partners)
        .with("slow_partners", n.slow_partners)
        .with("retested", self.retested(Some(n.rank)))
        .fix(self.nic_commands(fix, n.rank))
    }

    /// A group's hosts as a hostlist, cut to fit a summary.
    fn hosts(&self, ranks: &[u32]) -> String {
        self.input.hosts_within(ranks, GROUP_CHARS)
    }

    /// "subnet 10.200.1.0/24" when every member of the group sits in one.
    fn group_subnet(&self, ranks: &[u32]) -> Option<String> {
        let first = self.subnet(*ranks.first()?);
        (!first.is_empty() && ranks.iter().all(|r| self.subnet(*r) == first)).then_some(first)
    }

    fn cut(&self, c: &Cut) -> Finding {
        let (ha, hb) = (self.hosts(&c.a), self.hosts(&c.b));
        let across = [c.a_to_b_median, c.b_to_a_median]
            .into_iter()
            .flatten()
            .fold(f64::INFINITY, f64::min);
        let inside = c.inside_median.unwrap_or(self.reference);
        let cost = inside / across.max(f64::MIN_POSITIVE);
        let path = match (self.group_subnet(&c.a), self.group_subnet(&c.b)) {
            (Some(sa), Some(sb)) if sa != sb => format!(
                "the routed hop between {sa} and {sb}, or the uplinks of the switches behind it"
            ),
            _ => "the uplink between the groups' switches (a rack uplink or a spine port)".into(),
        };
        let summary = format!(
            "pairs between {ha} ({} nodes) and {hb} ({} nodes) are slow on {}: {} Gbit/s one way and {} the other across ({} directions measured), {} Gbit/s inside each group; every node is fast within its own group, so the path between the groups is the cause: {path}. An all-reduce over both groups crosses it and runs at about 1/{cost:.0} of the speed inside{}",
            c.a.len(),
            c.b.len(),
            self.net(),
            gbit(c.a_to_b_median),
            gbit(c.b_to_a_median),
            c.across_pairs,
            gbit(c.inside_median),
            self.retest_text(None),
        );
        let (a0, b0) = (c.a[0], c.b[0]);
        let fix = Fix::new(format!(
            "Check what carries traffic between the groups: {path}: its ports' speed and error counters on the switches, and the route each group takes to the other. Until it is fixed, train inside one group or expect the cross-group rate"
        ))
        .command(format!(
            "tracepath -n {}   # on {}",
            self.address(b0),
            self.input.who(a0)
        ))
        .command(format!(
            "ip route get {}   # on {}",
            self.address(b0),
            self.input.who(a0)
        ))
        .command(format!(
            "tracepath -n {}   # on {}",
            self.address(a0),
            self.input.who(b0)
        ));
        self.base(
            format!("cut {ha} | {hb}"),
            summary,
            "cut",
            format!("the cut between {ha} and {hb}"),
        )
        .with("group_a", &c.a)
        .with("group_b", &c.b)
        .with("group_a_hosts", &ha)
        .with("group_b_hosts", &hb)
        .with("inside_median_gbit_s", c.inside_median)
        .with("a_to_b_median_gbit_s", c.a_to_b_median)
        .with("b_to_a_median_gbit_s", c.b_to_a_median)
        .with("across_pairs", c.across_pairs)
        .with("allreduce_slowdown", cost)
        .fix(fix)
    }

    /// "10.0.0.1 (eno1) to 10.0.0.3 (eno1), both in 10.0.0.0/24".
    fn path(&self, a: u32, b: u32) -> String {
        let (sa, sb) = (self.subnet(a), self.subnet(b));
        let hop = if !sa.is_empty() && sa == sb {
            format!("both in {sa}")
        } else {
            format!("routed from {sa} to {sb}")
        };
        format!(
            "{} ({}) to {} ({}), {hop}",
            self.address(a),
            self.iface(a),
            self.address(b),
            self.iface(b)
        )
    }

    fn pair(&self, p: &SlowPair) -> Finding {
        let (wa, wb) = (self.input.who(p.a), self.input.who(p.b));
        let elsewhere = format!(
            "each end is fast with its other partners ({wa}: {} Gbit/s, {wb}: {} Gbit/s median)",
            gbit(p.a_elsewhere),
            gbit(p.b_elsewhere)
        );
        let (subject, summary, kind, part) = if p.one_way() {
            let (from, to, slow, back) = if p.a_to_b_slow {
                (p.a, p.b, p.a_to_b, p.b_to_a)
            } else {
                (p.b, p.a, p.b_to_a, p.a_to_b)
            };
            let (wf, wt) = (self.input.who(from), self.input.who(to));
            (
                format!("{from}->{to} {}", self.iface(to)),
                format!(
                    "{wf} -> {wt} is slow on {}: {} Gbit/s one way, {} Gbit/s back, against {}; {elsewhere}, so one direction of the path between them is the cause ({}): a shaped or congested queue on {wf}'s way out, an asymmetric route, or a port that is slow one way{}",
                    self.net(),
                    gbit(slow),
                    gbit(back),
                    self.reference_text(),
                    self.path(from, to),
                    self.retest_text(Some(from)),
                ),
                "direction",
                format!("the direction {wf} -> {wt}"),
            )
        } else {
            (
                format!("{}<->{} {}", p.a, p.b, self.iface(p.b)),
                format!(
                    "{wa} <-> {wb} is slow both ways on {}: {} and {} Gbit/s, against {}; {elsewhere}, so the path between these two is the cause ({}){}",
                    self.net(),
                    gbit(p.a_to_b),
                    gbit(p.b_to_a),
                    self.reference_text(),
                    self.path(p.a, p.b),
                    self.retest_text(Some(p.a)),
                ),
                "pair",
                format!("the pair {wa} <-> {wb}"),
            )
        };
        let mut fix = Fix::new(format!(
            "Check the path between {wa} and {wb}: the route each takes to the other, the switch ports and cable on it, and shaping on both ends"
        ))
        .command(format!("tracepath -n {}   # on {wa}", self.address(p.b)))
        .command(format!("tracepath -n {}   # on {wb}", self.address(p.a)));
        for r in [p.a, p.b] {
            fix = fix.command(format!(
                "tc qdisc show dev {}   # on {}",
                self.iface(r),
                self.input.who(r)
            ));
        }
        self.base(subject, summary, kind, part)
            .with("from", p.a)
            .with("to", p.b)
            .with("a_to_b_gbit_s", p.a_to_b)
            .with("b_to_a_gbit_s", p.b_to_a)
            .with("a_to_b_slow", p.a_to_b_slow)
            .with("b_to_a_slow", p.b_to_a_slow)
            .with("a_elsewhere_gbit_s", p.a_elsewhere)
            .with("b_elsewhere_gbit_s", p.b_elsewhere)
            .with("path", self.path(p.a, p.b))
            .fix(fix)
    }

    fn unlisted(&self) -> Finding {
        self.base(
            format!("{} more pairs", self.verdict.unlisted_pairs),
            format!(
                "{} more pairs or directions on {} are slow against {}, each between nodes fast elsewhere (the slowest {} are named above): many unrelated slow pairs point at congestion in the fabric rather than at one part",
                self.verdict.unlisted_pairs,
                self.net(),
                self.reference_text(),
                fail_slow::MAX_LISTED_PAIRS
            ),
            "pairs",
            format!("{} scattered slow pairs", self.verdict.unlisted_pairs),
        )
        .with("unlisted_pairs", self.verdict.unlisted_pairs)
        .fix(
            Fix::new("Look at the fabric's congestion and error counters on the switches, and rerun preflight with --thorough to measure each pair longer")
                .command("preflight cluster --thorough ..."),
        )
    }

    /// Every pair slow against its floor: with two nodes, the link between them.
    fn everywhere(&self, e: &fail_slow::Everywhere) -> Finding {
        let floor = if self.input.min_link_gbit.is_some_and(|m| m >= e.floor) {
            format!("--min-link-gbit {:.2}", e.floor)
        } else {
            format!("half the NICs' rated speed, {:.2} Gbit/s", e.floor)
        };
        let others = self.other_networks();
        let others_text = if others.is_empty() {
            String::new()
        } else {
            format!(
                "; the same nodes measured {} on other networks",
                others
                    .iter()
                    .map(|(id, m)| format!("{m:.2} Gbit/s on {id}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let nodes = self.eval.network.members.len();
        let (subject, summary, part) = if nodes == 2 {
            let mut r = self.eval.network.members.keys().copied();
            let (a, b) = (r.next().unwrap_or(0), r.next().unwrap_or(1));
            (
                format!("{a}<->{b} {}", self.iface(b)),
                format!(
                    "the link between {} and {} is slow on {}: {:.2} to {:.2} Gbit/s, under {floor}{others_text}. With two nodes there is no third partner to tell which end is slow: rerun with a third node (the end that is slow with it too is the cause), or compare both ends' counters",
                    self.input.who(a),
                    self.input.who(b),
                    self.net(),
                    e.min,
                    e.max,
                ),
                format!(
                    "the link between {} and {}",
                    self.input.who(a),
                    self.input.who(b)
                ),
            )
        } else {
            (
                self.net().to_string(),
                format!(
                    "every measured pair on {} is slow: median {:.2} Gbit/s (slowest {:.2}, fastest {:.2}), under {floor}{others_text}; nothing inside the cluster is faster to compare with, so the network as a whole (the NICs' negotiated speed, the switch, shaping) is the cause",
                    self.net(),
                    e.median,
                    e.min,
                    e.max
                ),
                format!("every pair on {}", self.net()),
            )
        };
        let mut fix = Fix::new(
            "Check the NICs' negotiated speed and duplex and any shaping on every node, and the switch ports; compare with another network's figure above",
        );
        for r in self.eval.network.members.keys().take(2) {
            fix = self.nic_commands(fix, *r);
        }
        self.base(subject, summary, "everywhere", part)
            .with("median_gbit_s", e.median)
            .with("min_gbit_s", e.min)
            .with("max_gbit_s", e.max)
            .with("floor_gbit_s", e.floor)
            .with(
                "other_networks",
                others
                    .iter()
                    .map(|(id, m)| serde_json::json!({"network": id, "median_gbit_s": m}))
                    .collect::<Vec<_>>(),
            )
            .fix(fix)
    }

    /// The median throughput measured on each other network (the same nodes, another path).
    fn other_networks(&self) -> Vec<(String, f64)> {
        self.input
            .evals
            .iter()
            .filter(|e| e.network.id != self.eval.network.id)
            .filter_map(|e| {
                let mut v: Vec<f64> = records_to(self.input.links, e)
                    .filter_map(|l| l.throughput_gbit_s.map(f64::from))
                    .filter(|t| t.is_finite())
                    .collect();
                crate::infra::stats::median(&mut v).map(|m| (e.network.id.clone(), m))
            })
            .collect()
    }

    fn pass(&self) -> Finding {
        let v = self.verdict;
        let min = v.min.unwrap_or(0.0);
        let retest = match (self.retested(None), v.unconfirmed) {
            (0, _) => String::new(),
            (n, 0) => format!(
                "; {n} directions that looked slow once were measured again with few flows at once and cleared (a busy moment, not a slow part)"
            ),
            (n, u) => format!(
                "; {n} directions that looked slow once were measured again with few flows at once and cleared, and {u} more parts seen slow once were beyond the retest's budget (not named: rerun with --thorough to measure longer)"
            ),
        };
        Finding::new(
            crate::link::ids::SLOW,
            Status::Pass,
            self.net().to_string(),
            format!(
                "{} pairs on {}: median {:.2} Gbit/s, slowest {min:.2} Gbit/s, none under half of the reference {:.2} Gbit/s{retest}",
                v.pairs,
                self.net(),
                v.median.unwrap_or(0.0),
                self.reference,
            ),
        )
        .with("network", self.net())
        .with("median_gbit_s", v.median)
        .with("reference_gbit_s", self.reference)
        .with("min_gbit_s", min)
        .with("pairs", v.pairs)
        .with("retested", self.retested(None))
        .with("unconfirmed", v.unconfirmed)
    }
}

#[cfg(test)]
mod tests {
    use crate::core::{LinkOutcome, Status};
    use crate::testkit::*;
    use serde_json::json;

    fn shape(c: &mut Cluster, f: impl Fn(u32, u32) -> Option<f32>) {
        for l in &mut c.links {
            if l.result == LinkOutcome::Ok
                && let Some(t) = f(l.from, l.to)
            {
                l.throughput_gbit_s = Some(t);
            }
        }
    }

    #[test]
    fn a_slow_pair_is_the_pair_with_the_path_between_them() {
        let mut c = Cluster::healthy(3);
        shape(&mut c, |a, b| (a + b == 2 && a != b).then_some(1.0));
        let fs = c.findings();
        let v = with_id(&fs, crate::link::ids::SLOW);
        assert_eq!(v.len(), 1, "{v:#?}");
        let f = v[0];
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.subject, "0<->2 eno1");
        assert_eq!(f.evidence["kind"], json!("pair"));
        assert_eq!(f.evidence["a_to_b_gbit_s"], json!(1.0));
        assert_eq!(f.evidence["a_elsewhere_gbit_s"], json!(9.0));
        assert_eq!(
            f.evidence["path"],
            json!("10.0.0.1 (eno1) to 10.0.0.3 (eno1), both in 10.0.0.0/24")
        );
        assert!(commands(f).contains(&"tracepath -n 10.0.0.3   # on rank 0 (node01)".to_string()));
    }

    #[test]
    fn a_node_slow_with_every_peer_is_named_once_as_the_node_and_a_pair_elsewhere_as_itself() {
        let mut c = Cluster::healthy(8);
        shape(&mut c, |a, b| (a == 5 || b == 5).then_some(0.5));
        shape(&mut c, |a, b| (a == 1 && b == 2).then_some(1.0));
        let fs = c.findings();
        let v = with_id(&fs, crate::link::ids::SLOW);
        assert_eq!(v.len(), 2, "{v:#?}");
        let node = v.iter().find(|f| f.node == Some(5)).expect("rank 5 named");
        assert!(
            node.summary
                .contains("rank 5 (node06) is slow sending and receiving"),
            "{}",
            node.summary
        );
        assert_eq!(node.evidence["partners"], json!(7));
        assert_eq!(node.evidence["direction"], json!("both"));
        let dir = v
            .iter()
            .find(|f| f.subject.starts_with("1->2"))
            .expect("1->2");
        assert_eq!(dir.evidence["kind"], json!("direction"));
    }

    #[test]
    fn a_slow_node_among_three_is_the_node() {
        // The case: rank 2 at 10 Mbit/s both ways, the others at 17 Gbit/s; a 25 Gbit/s
        // NIC so the rated floor does not decide it.
        let mut c = Cluster::healthy(3);
        for f in &mut c.facts {
            f.net.interfaces[0].speed_mbps = Some(25_000);
        }
        shape(&mut c, |a, b| {
            Some(if a == 2 || b == 2 { 0.01 } else { 17.0 })
        });
        let fs = c.findings();
        let v = with_id(&fs, crate::link::ids::SLOW);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!(v[0].node, Some(2));
        assert_eq!(v[0].evidence["reference_gbit_s"], json!(17.0));
    }

    #[test]
    fn two_nodes_under_the_rated_speed_are_the_link_with_what_would_tell_the_end() {
        let mut c = Cluster::healthy(2);
        shape(&mut c, |_, _| Some(2.0));
        let fs = c.findings();
        let v = with_id(&fs, crate::link::ids::SLOW);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!(v[0].evidence["kind"], json!("everywhere"));
        assert!(
            v[0].summary
                .contains("the link between rank 0 (node01) and rank 1 (node02)")
                && v[0].summary.contains("rated speed, 5.00")
                && v[0].summary.contains("third node"),
            "{}",
            v[0].summary
        );
        // 30 of a rated 200 Gbit/s is what one TCP stream gets: not flagged.
        for f in &mut c.facts {
            f.net.interfaces[0].speed_mbps = Some(200_000);
        }
        shape(&mut c, |_, _| Some(30.0));
        assert_eq!(
            only(&c.findings(), crate::link::ids::SLOW).status,
            Status::Pass
        );
        // ... unless the user's floor says so.
        c.min_link_gbit = Some(40.0);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::SLOW);
        assert!(f.summary.contains("--min-link-gbit 40.00"), "{}", f.summary);
    }

    #[test]
    fn slow_skips_without_measurements() {
        let mut c = Cluster::healthy(2);
        for l in &mut c.links {
            l.throughput_gbit_s = None;
        }
        assert_eq!(
            only(&c.findings(), crate::link::ids::SLOW).status,
            Status::Skip
        );
    }
}
