//! `link.latency`: a node (or a group behind a cut) whose round-trip times stand far above the
//! others', judged by [`crate::link::fail_slow`] with the RTT as a speed, against the lower quartile
//! of the pairs' RTTs (which a slow minority cannot move).

use crate::core::ClusterInput;
use crate::core::NetworkEval;
use crate::core::cluster_common::{links_on, records_to};
use crate::core::{Finding, Fix, Status};
use crate::link::fail_slow::{self, Cut, Sample, SlowNode, Verdict};

/// Latency is judged only where the reference round trip is under this (microseconds): a data
/// centre's TCP round trip is tens of microseconds, while agents sharing a few loaded cores
/// connect in milliseconds whatever their links, and then every node looks slow by turns.
const JUDGED_UP_TO_US: f64 = 2000.0;

/// Without throughput-scheduled pairs to judge, every link is judged up to this many.
const ALL_LINKS_UP_TO: usize = 64 * 63;

pub(crate) fn high_latency(input: &ClusterInput) -> Vec<Finding> {
    let Some(eval) = crate::link::slow::judged_network(input) else {
        return vec![Finding::new(
            crate::link::ids::LATENCY,
            Status::Skip,
            "latency",
            "no network connected any pair, so no round trip was measured",
        )];
    };
    let net = &eval.network.id;
    let (samples, scheduled) = rtt_samples(input, eval);
    if samples.is_empty() || (!scheduled && samples.len() > ALL_LINKS_UP_TO) {
        return vec![
            Finding::new(
                crate::link::ids::LATENCY,
                Status::Skip,
                net.clone(),
                format!("no round-trip time was measured on {net}"),
            )
            .with("network", net),
        ];
    }
    let v = fail_slow::judge(&samples, fail_slow::latency_rule);
    let reference = fail_slow::speed_rtt(v.reference.unwrap_or(1.0));
    if reference > JUDGED_UP_TO_US {
        return vec![
            Finding::new(
                crate::link::ids::LATENCY,
                Status::Pass,
                net.clone(),
                format!(
                    "{} pairs on {net}: the cluster's reference round trip is {reference:.0} us, so the hosts were too loaded while connecting (or the path too long) to tell one node's latency from the others': not judged",
                    v.pairs
                ),
            )
            .with("network", net)
            .with("reference_rtt_us", reference)
            .with("pairs", v.pairs)
            .with("judged", false),
        ];
    }
    let mut out = Vec::new();
    for n in &v.nodes {
        out.push(slow_node(input, eval, &v, reference, n));
    }
    for c in &v.cuts {
        out.push(slow_cut(input, eval, reference, c));
    }
    if out.is_empty() {
        out.push(
            Finding::new(
                crate::link::ids::LATENCY,
                Status::Pass,
                net.clone(),
                format!(
                    "{} pairs on {net}: median round trip {} us, reference {reference:.0} us; no node stands above {:.1}x it",
                    v.pairs,
                    us(v.median),
                    fail_slow::LATENCY_FACTOR
                ),
            )
            .with("network", net)
            .with("reference_rtt_us", reference)
            .with("pairs", v.pairs),
        );
    }
    out
}

/// A round trip (microseconds) for a judged speed, `-` where none.
fn us(speed: Option<f64>) -> String {
    speed.map_or("-".into(), |s| format!("{:.0}", fail_slow::speed_rtt(s)))
}

/// The warning for a node whose round trips stand above the reference.
fn slow_node(
    input: &ClusterInput,
    eval: &NetworkEval,
    v: &Verdict,
    reference: f64,
    n: &SlowNode,
) -> Finding {
    let net = &eval.network.id;
    let who = input.who(n.rank);
    let iface = eval
        .network
        .members
        .get(&n.rank)
        .map(|m| m.interface.clone())
        .unwrap_or_default();
    Finding::new(
            crate::link::ids::LATENCY,
            Status::Warn,
            format!("{} {iface}", n.rank),
            format!(
                "{who} answers slowly on {net}: median round trip {} us to its partners and {} us from them, against the cluster's {reference:.0} us (the lower quartile of {} pairs); {} of its {} healthy partners see it above {:.1}x that. A node's own latency comes from its CPU (power states, load, interrupts on a busy core), its NIC's interrupt moderation, or a queue in its path",
                us(n.send_median),
                us(n.recv_median),
                v.pairs,
                n.slow_partners,
                n.partners,
                fail_slow::LATENCY_FACTOR,
            ),
        )
        .on_node(Some(n.rank))
        .with("kind", "node")
        .with("network", net)
        .with("node", n.rank)
        .with("direction", n.direction.as_str())
        .with("reference_rtt_us", reference)
        .with("send_median_rtt_us", n.send_median.map(fail_slow::speed_rtt))
        .with("recv_median_rtt_us", n.recv_median.map(fail_slow::speed_rtt))
        .with("partners", n.partners)
        .with("slow_partners", n.slow_partners)
        .fix(
            Fix::new(format!(
                "Check {who}: its load and CPU power states, its NIC's interrupt moderation and queues on {iface}, then rerun preflight"
            ))
            .command(format!("uptime; cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor   # on {who}"))
            .command(format!("ethtool -c {iface}   # on {who}"))
            .command(format!("tc qdisc show dev {iface}   # on {who}")),
        )
}

/// The warning for a cut whose crossing round trips stand above the inside ones.
fn slow_cut(input: &ClusterInput, eval: &NetworkEval, reference: f64, c: &Cut) -> Finding {
    let net = &eval.network.id;
    let hosts = |ranks: &[u32]| input.hosts_within(ranks, crate::core::cluster_common::GROUP_CHARS);
    let (ha, hb) = (hosts(&c.a), hosts(&c.b));
    Finding::new(
            crate::link::ids::LATENCY,
            Status::Warn,
            format!("cut {ha} | {hb}"),
            format!(
                "round trips between {ha} and {hb} on {net} take {} us one way and {} us the other, {} us inside each group: the path between the groups adds the delay (a longer route, a congested uplink)",
                us(c.a_to_b_median),
                us(c.b_to_a_median),
                us(c.inside_median),
            ),
        )
        .with("kind", "cut")
        .with("network", net)
        .with("group_a", &c.a)
        .with("group_b", &c.b)
        .with("reference_rtt_us", reference)
        .fix(Fix::new("Trace the route between the groups and check the uplink's queues")
            .command(format!("tracepath -n {}   # on {}",
                eval.network.members.get(&c.b[0]).map(|m| m.address.to_string()).unwrap_or_default(),
                input.who(c.a[0]))))
}

/// The round trips to judge on `eval`, and whether any pair there was measured for
/// throughput: those pairs' (linear in n: a measured link is always one of the records), else
/// every pair's, read only up to one past [`ALL_LINKS_UP_TO`] (more are not judged).
fn rtt_samples(input: &ClusterInput, eval: &NetworkEval) -> (Vec<Sample>, bool) {
    let sample = |from: u32, to: u32, rtt: Option<f32>| {
        let rtt = rtt.map(f64::from).filter(|r| r.is_finite() && *r > 0.0)?;
        Some(Sample {
            from,
            to,
            value: fail_slow::rtt_speed(rtt),
            floor: 0.0,
        })
    };
    let scheduled = records_to(input.links, eval).any(|l| l.throughput_gbit_s.is_some());
    let samples = if scheduled {
        records_to(input.links, eval)
            .filter(|l| l.throughput_gbit_s.is_some())
            .filter_map(|l| sample(l.from, l.to, l.rtt_us))
            .collect()
    } else {
        links_on(input, eval)
            .filter_map(|l| sample(l.from, l.to, l.rtt_us))
            .take(ALL_LINKS_UP_TO + 1)
            .collect()
    };
    (samples, scheduled)
}

#[cfg(test)]
mod tests {
    use crate::core::{LinkOutcome, Status};
    use crate::testkit::*;
    use serde_json::json;

    #[test]
    fn a_node_that_answers_slowly_is_named_and_noise_is_not() {
        let mut c = Cluster::healthy(5);
        for l in &mut c.links {
            if l.result == LinkOutcome::Ok {
                let slow = l.from == 3 || l.to == 3;
                l.rtt_us = Some(if slow {
                    4000.0
                } else {
                    60.0 + (l.from * 7 + l.to) as f32
                });
            }
        }
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::LATENCY);
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert_eq!(f.node, Some(3));
        assert_eq!(f.evidence["send_median_rtt_us"], json!(4000.0));
        // 300 us against 60: scheduling noise, under the absolute excess.
        for l in &mut c.links {
            if l.rtt_us == Some(4000.0) {
                l.rtt_us = Some(300.0);
            }
        }
        assert_eq!(
            only(&c.findings(), crate::link::ids::LATENCY).status,
            Status::Pass
        );
    }
}
