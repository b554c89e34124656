//! Above [`super::cluster::MATRIX_MAX`] nodes, or when every link connected, each network's
//! links summed up instead of a matrix: how many pairs connected, RTT and throughput percentiles, the nodes whose every link
//! failed or is slow (named as nodes, not as their links), and the worst other links.

use super::super::Style;
use super::super::sanitize::shown;
use super::hosts::hostlist;
use super::number::bw;
use super::{count, paint, wrap::wrap};
use crate::report_compact::{self, NetworkLinks};
use preflight_checks::model::{LinkOutcome, Report};
use std::fmt::Write;

/// Links listed by name beyond the nodes named.
const WORST: usize = 5;

/// Every network's summary, each after a blank line.
pub fn networks(report: &Report, style: Style) -> String {
    let mut out = String::new();
    for net in report_compact::networks(report) {
        if net.measured == 0 {
            continue;
        }
        out.push('\n');
        out.push_str(&network(report, &net, style));
    }
    out
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Per node of the network: links from it and to it, and how many failed.
#[derive(Default, Clone, Copy)]
struct Tally {
    out_total: usize,
    out_failed: usize,
    in_total: usize,
    in_failed: usize,
}

fn network(report: &Report, net: &NetworkLinks, style: Style) -> String {
    let width = usize::from(style.width);
    let (mut out, ok) = heading(net, style);
    if ok == 0 {
        // Nothing connected (an address every node shares, such as docker0's): naming every
        // node would say nothing more.
        out.push_str(&wrap(
            "no pair connected on this network: it is not usable between the nodes",
            width,
            "  ",
            "    ",
        ));
        return out;
    }
    out.push_str(&figures(net, style));
    // Per node: links from and to it, failed. Slowness is link.slow's judgment, not this
    // table's: its slow nodes, and whether it found anything slow at all.
    let slow_warnings: Vec<&preflight_checks::model::Finding> = report
        .findings
        .iter()
        .filter(|f| {
            f.id == preflight_checks::link::ids::SLOW
                && f.status == preflight_checks::model::Status::Warn
        })
        .collect();
    let named_pairs: Vec<(u32, u32)> = slow_warnings
        .iter()
        .filter_map(|f| preflight_checks::link::verdict::Slow::of(f)?.pair())
        .collect();
    let judged_slow: Vec<u32> = slow_warnings
        .iter()
        .filter_map(|f| preflight_checks::link::verdict::Slow::of(f)?.slow_node())
        .collect();
    let named = named_nodes(report, net, style, &judged_slow, &mut out);
    // The worst links not explained by a named node: failed first, then the slowest.
    let (failed, measured) = unexplained_links(net, &named);
    if !failed.is_empty() {
        failed_links(report, net, style, &failed, &mut out);
    }
    // The pairs and directions link.slow named, with their figures, slowest first.
    let slowest: Vec<_> = measured
        .iter()
        .filter(|(_, f, t)| {
            let (a, b) = (net.ranks[*f], net.ranks[*t]);
            named_pairs.contains(&(a.min(b), a.max(b)))
        })
        .take(WORST)
        .collect();
    if !slowest.is_empty() {
        let _ = writeln!(out, "  slow pairs (link.slow):");
        for (g, f, t) in slowest {
            let _ = writeln!(
                out,
                "    {} {} Gbit/s",
                link(report, net, *f, *t),
                bw(f64::from(*g))
            );
        }
    }
    out
}

/// The network's heading line (its name, interface, MTU, pairs ok), and how many pairs are ok.
fn heading(net: &NetworkLinks, style: Style) -> (String, usize) {
    let width = usize::from(style.width);
    let mut names: Vec<&str> = net.interfaces.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    names.retain(|s| !s.is_empty());
    let label = match names.as_slice() {
        [one] => format!("{} ({})", shown(&net.name), shown(one)),
        _ => shown(&net.name).into_owned(),
    };
    let mtu = match net.mtus.as_slice() {
        [] => String::new(),
        [one] => format!(", mtu {one}"),
        many => format!(
            ", mtu differs: {}",
            many.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let ok = net
        .cells
        .iter()
        .filter(|c| c.result == Some(LinkOutcome::Ok))
        .count();
    let out = paint::bold(
        &wrap(
            &format!(
                "Links on {label}{mtu}: {ok} of {} ok",
                count(net.measured, "pair")
            ),
            width,
            "",
            "  ",
        ),
        style,
    );
    (out, ok)
}

/// The RTT and throughput percentiles of the links that connected.
fn figures(net: &NetworkLinks, style: Style) -> String {
    let width = usize::from(style.width);
    let us = if style.unicode { "µs" } else { "us" };
    let mut out = String::new();
    let mut rtts: Vec<f64> = net
        .cells
        .iter()
        .filter(|c| c.result == Some(LinkOutcome::Ok))
        .filter_map(|c| c.rtt_us.map(f64::from))
        .collect();
    rtts.sort_by(f64::total_cmp);
    let mut tps: Vec<f64> = net
        .cells
        .iter()
        .filter(|c| c.result == Some(LinkOutcome::Ok))
        .filter_map(|c| c.throughput_gbit_s.map(f64::from))
        .collect();
    tps.sort_by(f64::total_cmp);
    if !rtts.is_empty() {
        let line = format!(
            "RTT p50 {:.0}{us}, p90 {:.0}{us}, p99 {:.0}{us}, max {:.0}{us}",
            pct(&rtts, 0.5),
            pct(&rtts, 0.9),
            pct(&rtts, 0.99),
            pct(&rtts, 1.0)
        );
        out.push_str(&wrap(&line, width, "  ", "    "));
    }
    let median = pct(&tps, 0.5);
    if !tps.is_empty() {
        let line = format!(
            "throughput ({} measured) min {}, p10 {}, p50 {}, max {} Gbit/s",
            count(tps.len(), "pair"),
            bw(tps[0]),
            bw(pct(&tps, 0.1)),
            bw(median),
            bw(pct(&tps, 1.0))
        );
        out.push_str(&wrap(&line, width, "  ", "    "));
    }
    out
}

/// Per node of the network: its links from and to it, and how many failed.
fn tallies(net: &NetworkLinks) -> Vec<Tally> {
    let n = net.ranks.len();
    let mut tally = vec![Tally::default(); n];
    for f in 0..n {
        for t in (0..n).filter(|t| *t != f) {
            let c = net.cell(f, t);
            let Some(r) = c.result else { continue };
            let failed = r != LinkOutcome::Ok;
            tally[f].out_total += 1;
            tally[t].in_total += 1;
            if failed {
                tally[f].out_failed += 1;
                tally[t].in_failed += 1;
            }
        }
    }
    tally
}

/// Writes the lines naming the nodes whose every link failed or that link.slow judged slow;
/// returns those nodes' indices.
fn named_nodes(
    report: &Report,
    net: &NetworkLinks,
    style: Style,
    judged_slow: &[u32],
    out: &mut String,
) -> Vec<usize> {
    let width = usize::from(style.width);
    let n = net.ranks.len();
    let tally = tallies(net);
    let all_in = |t: &Tally| t.in_total > 0 && t.in_failed == t.in_total;
    let all_out = |t: &Tally| t.out_total > 0 && t.out_failed == t.out_total;
    let dead: Vec<usize> = (0..n)
        .filter(|i| all_in(&tally[*i]) && all_out(&tally[*i]))
        .collect();
    let no_in: Vec<usize> = (0..n)
        .filter(|i| all_in(&tally[*i]) && !dead.contains(i))
        .collect();
    let no_out: Vec<usize> = (0..n)
        .filter(|i| all_out(&tally[*i]) && !dead.contains(i))
        .collect();
    let slow_nodes: Vec<usize> = (0..n)
        .filter(|i| judged_slow.contains(&net.ranks[*i]))
        .collect();
    let named: Vec<usize> = dead
        .iter()
        .chain(&no_in)
        .chain(&no_out)
        .chain(&slow_nodes)
        .copied()
        .collect();
    let nodes_line = |what: &str, idx: &[usize]| {
        let ranks: Vec<u32> = idx.iter().map(|i| net.ranks[*i]).collect();
        format!(
            "{} {what}: {} (rank{} {})",
            paint::mark(preflight_checks::model::Status::Fail, style),
            hostlist(report, &ranks, super::hosts::HOSTLIST_MAX),
            if ranks.len() == 1 { "" } else { "s" },
            super::ranks_text(&ranks)
        )
    };
    if !dead.is_empty() {
        out.push_str(&wrap(
            &nodes_line("every link to and from failed", &dead),
            width,
            "  ",
            "    ",
        ));
    }
    if !no_in.is_empty() {
        out.push_str(&wrap(
            &nodes_line("every link to it failed (a filter on input?)", &no_in),
            width,
            "  ",
            "    ",
        ));
    }
    if !no_out.is_empty() {
        out.push_str(&wrap(
            &nodes_line("every link from it failed", &no_out),
            width,
            "  ",
            "    ",
        ));
    }
    if !slow_nodes.is_empty() {
        let line = nodes_line("slow with every healthy partner (link.slow)", &slow_nodes).replacen(
            &paint::mark(preflight_checks::model::Status::Fail, style),
            &paint::mark(preflight_checks::model::Status::Warn, style),
            1,
        );
        out.push_str(&wrap(&line, width, "  ", "    "));
    }
    named
}

/// A failed link: its outcome, from, to (indices into the network's ranks).
type FailedLink = (LinkOutcome, usize, usize);
/// A measured link: its throughput, from, to.
type MeasuredLink = (f32, usize, usize);

/// The links between nodes not named: those failed, and those measured (slowest first).
fn unexplained_links(net: &NetworkLinks, named: &[usize]) -> (Vec<FailedLink>, Vec<MeasuredLink>) {
    let n = net.ranks.len();
    let mut failed = Vec::new();
    let mut measured = Vec::new();
    for f in 0..n {
        for t in (0..n).filter(|t| *t != f) {
            if named.contains(&f) || named.contains(&t) {
                continue;
            }
            let c = net.cell(f, t);
            match c.result {
                Some(LinkOutcome::Ok) => {
                    if let Some(g) = c.throughput_gbit_s {
                        measured.push((g, f, t));
                    }
                }
                Some(r) => failed.push((r, f, t)),
                None => {}
            }
        }
    }
    measured.sort_by(|a, b| a.0.total_cmp(&b.0));
    (failed, measured)
}

/// One direction of a link, by rank and host.
fn link(report: &Report, net: &NetworkLinks, f: usize, t: usize) -> String {
    format!(
        "{} -> {} ({} -> {})",
        net.ranks[f],
        net.ranks[t],
        hostlist(report, &[net.ranks[f]], 24),
        hostlist(report, &[net.ranks[t]], 24)
    )
}

/// Writes the failed links (a pair failed both ways with one outcome folded into one row).
fn failed_links(
    report: &Report,
    net: &NetworkLinks,
    style: Style,
    failed: &[FailedLink],
    out: &mut String,
) {
    let width = usize::from(style.width);
    let mut heading = format!(
        "  {} {} failed:",
        paint::mark(preflight_checks::model::Status::Fail, style),
        count(failed.len(), "other link")
    );
    // A pair failed both ways with one outcome is one line: one cable, one switch port.
    let mut rows: Vec<String> = Vec::new();
    let mut folded: Vec<(usize, usize)> = Vec::new();
    for (r, f, t) in failed {
        if folded.contains(&(*f, *t)) {
            continue;
        }
        if f < t
            && failed
                .iter()
                .any(|(r2, f2, t2)| (f2, t2) == (t, f) && r2 == r)
        {
            folded.push((*t, *f));
            rows.push(format!(
                "{} <-> {} ({} <-> {}) {} both ways",
                net.ranks[*f],
                net.ranks[*t],
                hostlist(report, &[net.ranks[*f]], 24),
                hostlist(report, &[net.ranks[*t]], 24),
                r.as_str()
            ));
        } else {
            rows.push(format!("{} {}", link(report, net, *f, *t), r.as_str()));
        }
    }
    // One row fits on the heading's line when the terminal is wide enough.
    if let [row] = rows.as_slice() {
        let one = format!("{}: {row}", heading.trim_end_matches(':'));
        if one.chars().count() <= width {
            rows.clear();
            heading = one;
        }
    }
    let _ = writeln!(out, "{heading}");
    for row in rows.iter().take(WORST) {
        let _ = writeln!(out, "    {row}");
    }
    if rows.len() > WORST {
        let _ = writeln!(
            out,
            "    and {} more (--format json has each)",
            rows.len() - WORST
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportBuilder;
    use preflight_checks::model::{IfAddr, Interface, LinkResult, Mode, NodeFacts};

    /// 20 nodes: eth0 on 10.0.0.0/24 all ok but every link to rank 7 timed out; docker0's
    /// shared 172.17.0.1 never connects.
    fn report() -> Report {
        let mut b = ReportBuilder::new(Mode::Cluster);
        let mut links = Vec::new();
        for r in 0..20u32 {
            let mut f = NodeFacts {
                hostname: format!("n{:02}", r + 1),
                ..Default::default()
            };
            for (name, addr) in [
                ("eth0", format!("10.0.0.{}", r + 1)),
                ("docker0", "172.17.0.1".into()),
            ] {
                f.net.interfaces.push(Interface {
                    name: name.into(),
                    ipv4: vec![IfAddr {
                        addr: addr.parse().unwrap(),
                        prefix: if name == "eth0" { 24 } else { 16 },
                    }],
                    ..Default::default()
                });
            }
            b = b.node(r, f);
            for to in (0..20u32).filter(|t| *t != r) {
                let lost = to == 7;
                links.push(LinkResult {
                    from: r,
                    to,
                    interface: "eth0".into(),
                    address: format!("10.0.0.{}", to + 1).into(),
                    result: if lost {
                        LinkOutcome::Timeout
                    } else {
                        LinkOutcome::Ok
                    },
                    rtt_us: (!lost).then_some(40.0),
                    ..Default::default()
                });
                links.push(LinkResult {
                    from: r,
                    to,
                    interface: "docker0".into(),
                    address: "172.17.0.1".into(),
                    result: LinkOutcome::Error,
                    ..Default::default()
                });
            }
        }
        b.links(links).build()
    }

    #[test]
    fn a_node_nobody_reaches_is_named_and_a_dead_network_is_one_line() {
        let text = networks(&report(), Style::plain());
        assert!(
            text.contains("Links on 10.0.0.0/24 (eth0): 361 of 380 pairs ok"),
            "{text}"
        );
        assert!(
            text.contains("✗ every link to it failed (a filter on input?): n08 (rank 7)"),
            "{text}"
        );
        assert!(
            text.contains("Links on 172.17.0.0/16 (docker0): 0 of 380 pairs ok"),
            "{text}"
        );
        assert!(text.contains("no pair connected on this network"), "{text}");
        assert!(!text.contains("every link to and from failed"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }
}
