//! The cluster's tables on rank 0: one row per node (one per set of alike nodes), the
//! connectivity matrix per network where a link failed (up to [`MATRIX_MAX`] nodes; each
//! network summed up otherwise), and the all-reduce (two ranks or more).

use super::super::Style;
use super::super::sanitize::{cut, shown};
use super::number::bw;
use super::paint;
use super::wrap::wrap;
use comfy_table::{ContentArrangement, Table, presets};
use preflight_checks::model::{IfKind, LinkOutcome, LinkResult, Report};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// Most nodes drawn as a matrix; a larger cluster gets a list of its worst links.
pub const MATRIX_MAX: usize = 16;
/// Links listed by [`worst_links`] beyond the failed ones.
const SLOWEST: usize = 5;

/// A table in the style's characters; wrapping only when `wrap`.
fn table(style: Style, wrap: bool) -> Table {
    let mut t = Table::new();
    t.load_preset(if style.unicode {
        presets::UTF8_FULL_CONDENSED
    } else {
        presets::ASCII_FULL_CONDENSED
    })
    .set_content_arrangement(if wrap {
        ContentArrangement::Dynamic
    } else {
        ContentArrangement::Disabled
    })
    .set_width(style.width);
    t.force_no_tty();
    t
}

/// Every cluster table, each after a blank line. Nodes alike are one row and a network whose
/// every link connected is summed up, at any size (`-v` keeps a row per node and the matrix
/// up to [`MATRIX_MAX`] nodes); above it, always.
pub fn tables(report: &Report, style: Style) -> String {
    let mut out = String::new();
    let large = report.nodes.len() > MATRIX_MAX;
    if large || (!style.verbose && folds_nodes(report)) {
        out.push_str(&grouped_nodes_table(report, style));
    } else {
        out.push_str(&nodes_table(report, style));
    }
    if large || (!style.verbose && all_links_ok(report)) {
        out.push_str(&super::summary::networks(report, style));
    } else {
        out.push_str(&connectivity(report, style));
    }
    out.push_str(&allreduce(report, style));
    out.push('\n');
    out
}

/// Two nodes or more whose rows would say the same but for rank, host and address: one row
/// says it for all of them.
pub(crate) fn folds_nodes(report: &Report) -> bool {
    let reached = crate::report_compact::addresses(report);
    let key = |n: &preflight_checks::model::NodeEntry| {
        [
            gpus_text(&n.facts),
            versions_text(&n.facts),
            network_text(report, &reached, n),
        ]
    };
    match report.nodes.split_first() {
        Some((first, rest)) if !rest.is_empty() => {
            let k = key(first);
            rest.iter().all(|n| key(n) == k)
        }
        _ => false,
    }
}

/// Every measured link connected (up to [`MATRIX_MAX`] nodes the report keeps each link):
/// a matrix of marks would say nothing the network's summary does not.
fn all_links_ok(report: &Report) -> bool {
    report.link_matrix.is_none() && report.links.iter().all(|l| l.result == LinkOutcome::Ok)
}

/// Rank, host, address, GPUs and versions per node (interfaces too with `-v`).
fn nodes_table(report: &Report, style: Style) -> String {
    let mut t = table(style, true);
    let mut header = vec![
        "rank",
        "host",
        "address",
        "GPUs",
        "driver / CUDA / NCCL / torch",
    ];
    if style.verbose {
        header.push("interfaces");
    }
    t.set_header(header);
    let addresses = crate::report_compact::addresses(report);
    for n in &report.nodes {
        let f = &n.facts;
        let gpus = if f.gpu.gpus.is_empty() {
            "0".to_string()
        } else {
            format!("{} x {}", f.gpu.gpus.len(), shown(&f.gpu.gpus[0].name))
        };
        let versions = [
            f.gpu.driver_version.as_deref(),
            f.gpu.cuda_driver_version.as_deref(),
            f.nccl.version.as_deref(),
            f.nccl.torch_version.as_deref(),
        ]
        .iter()
        .map(|v| shown(v.unwrap_or("-")).into_owned())
        .collect::<Vec<_>>()
        .join(" / ");
        let mut row = vec![
            n.rank.to_string(),
            shown(&n.hostname).into_owned(),
            address(report, &addresses, n.rank),
            gpus,
            versions,
        ];
        if style.verbose {
            let ifaces = f
                .net
                .interfaces
                .iter()
                .filter(|i| i.kind != IfKind::Loopback)
                .map(|i| {
                    let addr = i
                        .ipv4
                        .first()
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "-".into());
                    format!(
                        "{} {addr} {}",
                        shown(&i.name),
                        if i.up { "up" } else { "down" }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            row.push(cut(&ifaces, 4 * super::super::sanitize::MAX_SHOWN).into_owned());
        }
        t.add_row(row);
    }
    format!("{}\n{t}\n", paint::bold("Nodes:", style))
}

/// A node's address: rank 0's is the master address when one was chosen; else the address
/// its peers reached it on (or tried to), else its first non-loopback IPv4 address.
fn address(report: &Report, reached: &HashMap<u32, String>, rank: u32) -> String {
    let master = report
        .recommendation
        .as_ref()
        .and_then(|r| r.master_addr.clone());
    if rank == 0 {
        if let Some(m) = &master {
            return shown(m).into_owned();
        }
    }
    if let Some(a) = reached.get(&rank) {
        return shown(a).into_owned();
    }
    report
        .nodes
        .iter()
        .find(|n| n.rank == rank)
        .and_then(|n| {
            n.facts
                .net
                .interfaces
                .iter()
                .filter(|i| i.kind != IfKind::Loopback && i.up)
                .flat_map(|i| i.ipv4.iter())
                .next()
        })
        .map(|a| a.addr.to_string())
        .unwrap_or_else(|| "-".into())
}

/// GPUs of a node in a cell: `8 x NVIDIA H100 80GB HBM3`, or `0`.
fn gpus_text(f: &preflight_checks::model::NodeFacts) -> String {
    if f.gpu.gpus.is_empty() {
        "0".to_string()
    } else {
        format!("{} x {}", f.gpu.gpus.len(), shown(&f.gpu.gpus[0].name))
    }
}

/// `550.54.15 / 12.4 / 2.21.5 / 2.5.1`, `-` for what is unknown.
fn versions_text(f: &preflight_checks::model::NodeFacts) -> String {
    [
        f.gpu.driver_version.as_deref(),
        f.gpu.cuda_driver_version.as_deref(),
        f.nccl.version.as_deref(),
        f.nccl.torch_version.as_deref(),
    ]
    .iter()
    .map(|v| shown(v.unwrap_or("-")).into_owned())
    .collect::<Vec<_>>()
    .join(" / ")
}

/// The interface owning the address a node was reached on, with its MTU: `eno1 1500`.
fn network_text(
    report: &Report,
    reached: &HashMap<u32, String>,
    n: &preflight_checks::model::NodeEntry,
) -> String {
    // The interface the advice chose for this node (its own value, else everyone's) ...
    let rec = report.recommendation.as_ref();
    let chosen = rec
        .and_then(|r| r.node_env.get(&n.rank.to_string()))
        .and_then(|e| e.get("NCCL_SOCKET_IFNAME"))
        .or_else(|| rec.and_then(|r| r.env.get("NCCL_SOCKET_IFNAME")))
        .map(|v| v.split(',').next().unwrap_or("").trim_start_matches('='));
    let by_name = chosen.and_then(|name| n.facts.net.interfaces.iter().find(|i| i.name == name));
    // ... else the one owning the address its peers reached it on.
    let addr = address(report, reached, n.rank);
    by_name
        .or_else(|| {
            n.facts
                .net
                .interfaces
                .iter()
                .find(|i| i.ipv4.iter().any(|a| a.addr.to_string() == addr))
        })
        .map(|i| {
            format!(
                "{} mtu {}",
                shown(&i.name),
                i.mtu.map_or("?".to_string(), |m| m.to_string())
            )
        })
        .unwrap_or_else(|| "-".into())
}

/// Above [`MATRIX_MAX`] nodes: one row per set of nodes with identical facts (GPUs, versions,
/// the interface and MTU they were reached on), with the count and the hosts; the largest set
/// first, every other row marked as differing from it.
fn grouped_nodes_table(report: &Report, style: Style) -> String {
    let reached = crate::report_compact::addresses(report);
    let mut groups: Vec<([String; 3], Vec<u32>)> = Vec::new();
    let mut index: HashMap<[String; 3], usize> = HashMap::new();
    for n in &report.nodes {
        let key = [
            gpus_text(&n.facts),
            versions_text(&n.facts),
            network_text(report, &reached, n),
        ];
        match index.get(&key) {
            Some(&i) => groups[i].1.push(n.rank),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![n.rank]));
            }
        }
    }
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1[0].cmp(&b.1[0])));
    let mut t = table(style, true);
    t.set_header(vec![
        "nodes",
        "hosts (ranks)",
        "GPUs",
        "driver / CUDA / NCCL / torch",
        "network",
    ]);
    for (i, (key, ranks)) in groups.iter().enumerate() {
        let count = if i == 0 {
            ranks.len().to_string()
        } else {
            format!(
                "{} {}",
                ranks.len(),
                paint::mark(preflight_checks::model::Status::Warn, style)
            )
        };
        t.add_row(vec![
            count,
            format!(
                "{} ({})",
                super::hosts::hostlist(report, ranks, super::hosts::HOSTLIST_MAX),
                super::ranks_text(ranks)
            ),
            key[0].clone(),
            key[1].clone(),
            key[2].clone(),
        ]);
    }
    let heading = if groups.len() == 1 {
        format!("Nodes: all {} alike", report.nodes.len())
    } else {
        format!(
            "Nodes: {} in {} groups of identical facts ({} marks a group that differs from the largest)",
            report.nodes.len(),
            groups.len(),
            paint::mark(
                preflight_checks::model::Status::Warn,
                Style {
                    color: false,
                    ..style
                }
            )
        )
    };
    format!(
        "{}\n{t}\n",
        paint::bold(
            wrap(&heading, usize::from(style.width), "", "  ").trim_end(),
            style
        )
    )
}

/// How much a matrix cell says, from most to least: the widest that fits the width.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Cells {
    /// RTT and throughput on two lines (or the failure).
    Full,
    /// Throughput in Gbit/s only (or RTT when none was measured), failures as a word.
    Number,
    /// A mark: ok or not.
    Mark,
}

/// For each network (the target's subnet), a from x to matrix; the worst links beyond
/// [`MATRIX_MAX`] nodes.
fn connectivity(report: &Report, style: Style) -> String {
    if report.links.is_empty() {
        return String::new();
    }
    let ranks: Vec<u32> = report.nodes.iter().map(|n| n.rank).collect();
    let mut groups: BTreeMap<String, Vec<&LinkResult>> = BTreeMap::new();
    for l in &report.links {
        groups.entry(network_label(report, l)).or_default().push(l);
    }
    let mut out = String::new();
    for (subnet, links) in groups {
        out.push('\n');
        let mut names: Vec<&str> = links.iter().map(|l| l.interface.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let label = match names.as_slice() {
            [one] if !one.is_empty() && *one != subnet => format!("{subnet} ({})", shown(one)),
            _ => subnet,
        };
        let mut mtus: Vec<u32> = links.iter().filter_map(|l| l.mtu).collect();
        mtus.sort_unstable();
        mtus.dedup();
        let mtu = match mtus.as_slice() {
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
        if ranks.len() > MATRIX_MAX {
            let heading = format!("Worst links on {label} ({} links{mtu}):", links.len());
            out.push_str(&paint::bold(
                &wrap(&heading, usize::from(style.width), "", "  "),
                style,
            ));
            out.push_str(&worst_links(&links, style));
            continue;
        }
        let has_rate = links.iter().any(|l| l.throughput_gbit_s.is_some());
        let cells = [Cells::Full, Cells::Number, Cells::Mark]
            .into_iter()
            .find(|c| matrix_width(&ranks, &links, *c, style) <= usize::from(style.width))
            .unwrap_or(Cells::Mark);
        let what = match (cells, has_rate) {
            (Cells::Full, true) => "RTT p50 and throughput",
            (Cells::Full, false) => "RTT p50",
            (Cells::Number, true) => "throughput in Gbit/s",
            (Cells::Number, false) => "RTT p50",
            (Cells::Mark, _) => "connected or not",
        };
        let heading = format!("Connectivity on {label}{mtu} (row: from, column: to; {what}):");
        out.push_str(&paint::bold(
            &wrap(&heading, usize::from(style.width), "", "  "),
            style,
        ));
        let mut t = table(style, false);
        let mut header = vec!["from".to_string()];
        header.extend(ranks.iter().map(|r| r.to_string()));
        t.set_header(header);
        for from in &ranks {
            let mut row = vec![from.to_string()];
            for to in &ranks {
                row.push(cell(&links, *from, *to, cells, style));
            }
            t.add_row(row);
        }
        let _ = writeln!(out, "{t}");
        if cells != Cells::Full && has_rate {
            out.push_str(&worst_links(&links, style));
        }
    }
    out
}

/// Columns a matrix would take with these cells.
fn matrix_width(ranks: &[u32], links: &[&LinkResult], cells: Cells, style: Style) -> usize {
    let plain = Style {
        color: false,
        ..style
    };
    let mut w = "from"
        .len()
        .max(ranks.iter().map(|r| r.to_string().len()).max().unwrap_or(1));
    let mut total = w + 3;
    for to in ranks {
        w = to.to_string().len();
        for from in ranks {
            let c = cell(links, *from, *to, cells, plain);
            w = w.max(c.lines().map(|l| l.chars().count()).max().unwrap_or(0));
        }
        total += w + 3;
    }
    total + 1
}

fn cell(links: &[&LinkResult], from: u32, to: u32, cells: Cells, style: Style) -> String {
    if from == to {
        return if style.unicode { "·" } else { "-" }.to_string();
    }
    let Some(l) = links.iter().find(|l| l.from == from && l.to == to) else {
        return String::new();
    };
    let ok = l.result == LinkOutcome::Ok;
    let us = if style.unicode { "µs" } else { "us" };
    match cells {
        Cells::Mark => paint::mark(
            if ok {
                preflight_checks::model::Status::Pass
            } else {
                preflight_checks::model::Status::Fail
            },
            style,
        ),
        _ if !ok => l.result.as_str().to_string(),
        Cells::Full => {
            let mut c = Vec::new();
            if let Some(r) = l.rtt_us.map(f64::from) {
                c.push(format!("{r:.0}{us}"));
            }
            if let Some(g) = l.throughput_gbit_s.map(f64::from) {
                c.push(format!("{} Gb/s", bw(g)));
            }
            if c.is_empty() {
                c.push("ok".into());
            }
            c.join("\n")
        }
        Cells::Number => match (l.throughput_gbit_s.map(f64::from), l.rtt_us.map(f64::from)) {
            (Some(g), _) => bw(g),
            (None, Some(r)) => format!("{r:.0}{us}"),
            (None, None) => "ok".into(),
        },
    }
}

/// Failed links, then the slowest few, one line each.
fn worst_links(links: &[&LinkResult], style: Style) -> String {
    let us = if style.unicode { "µs" } else { "us" };
    let mut out = String::new();
    let line = |l: &LinkResult| {
        let mut s = format!(
            "  {} -> {} {} {}",
            l.from,
            l.to,
            shown(&l.address),
            l.result.as_str()
        );
        if let Some(r) = l.rtt_us.map(f64::from) {
            let _ = write!(s, ", {r:.0}{us}");
        }
        if let Some(g) = l.throughput_gbit_s.map(f64::from) {
            let _ = write!(s, ", {} Gbit/s", bw(g));
        }
        s
    };
    for l in links.iter().filter(|l| l.result != LinkOutcome::Ok) {
        let _ = writeln!(out, "{}", line(l));
    }
    let mut ok: Vec<&&LinkResult> = links
        .iter()
        .filter(|l| l.result == LinkOutcome::Ok && l.throughput_gbit_s.is_some())
        .collect();
    ok.sort_by(|a, b| {
        a.throughput_gbit_s
            .unwrap_or(0.0)
            .total_cmp(&b.throughput_gbit_s.unwrap_or(0.0))
    });
    if !ok.is_empty() {
        let _ = writeln!(out, "  slowest:");
        for l in ok.iter().take(SLOWEST) {
            let _ = writeln!(out, "  {}", line(l));
        }
    }
    out
}

fn network_label(report: &Report, l: &LinkResult) -> String {
    shown(&crate::report_compact::network_label(report, l)).into_owned()
}

/// The measured all-reduce, only when two ranks or more took part.
fn allreduce(report: &Report, style: Style) -> String {
    let mut out = String::new();
    for c in report.collectives.iter().filter(|c| c.ranks >= 2) {
        out.push('\n');
        out.push_str(&super::collective::block(c, style));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::report::ReportBuilder;
    use preflight_checks::model::Mode;

    /// `n` nodes, every pair measured at `from + to` Gbit/s, and 0->1 timed out.
    fn cluster(n: u32) -> Report {
        let mut b = ReportBuilder::new(Mode::Cluster);
        let mut links = Vec::new();
        for from in 0..n {
            b = b.node(from, Default::default());
            for to in (0..n).filter(|t| *t != from) {
                let bad = (from, to) == (0, 1);
                links.push(LinkResult {
                    from,
                    to,
                    interface: "eth0".into(),
                    address: format!("10.200.{}.{}", to / 200, to % 200 + 1).into(),
                    result: if bad {
                        LinkOutcome::Timeout
                    } else {
                        LinkOutcome::Ok
                    },
                    rtt_us: (!bad).then_some(50.0),
                    throughput_gbit_s: (!bad).then_some((from + to) as f32),
                    ..Default::default()
                });
            }
        }
        b.links(links).build()
    }

    #[test]
    fn beyond_sixteen_nodes_the_worst_links_replace_the_matrix() {
        let text = connectivity(&cluster(17), Style::plain());
        assert!(!text.contains('┌'), "{text}");
        assert!(text.contains("Worst links on "), "{text}");
        assert!(text.contains("  0 -> 1 10.200.0.2 timeout\n"), "{text}");
        assert!(
            text.contains("    1 -> 0 10.200.0.1 ok, 50µs, 1.00 Gbit/s\n"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        // Sixteen still get a matrix, of marks at 80 columns, every line within them.
        let text = connectivity(&cluster(16), Style::plain());
        assert!(text.contains('┌') && text.contains('✗'), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }

    #[test]
    fn bandwidth_has_three_significant_digits() {
        assert_eq!(bw(0.0921), "0.0921");
        assert_eq!(bw(0.466), "0.466");
        assert_eq!(bw(3.924), "3.92");
        assert_eq!(bw(41.23), "41.2");
        assert_eq!(bw(118.4), "118");
    }
}
