//! Each node's copy of the cluster report: the whole report while it is small enough to send,
//! else what that node needs (its own links and facts, everyone's findings, the advice), with
//! `trimmed` saying what was left out. Rank 0 keeps and prints the whole report.

use crate::report::json_len;
use crate::report_compact::COMPACT_ABOVE;
use preflight_checks::model::{LinkResult, NodeEntry, NodeFacts, Report, Trimmed};
use std::borrow::Cow;

/// Largest report (JSON bytes, before compression) sent whole to every node. A cluster of a
/// few hundred nodes with one address each stays under it.
pub const WHOLE_REPORT_CAP: usize = 24 << 20;

/// Links measured to estimate the size of all of them.
const LINK_SAMPLE: usize = 1000;

/// About how many bytes the report's JSON has, without building it or copying any part: every
/// part but the links counted, the links estimated from a sample (millions of them would take
/// seconds to count).
pub fn json_size(report: &Report) -> usize {
    let parts = json_len(&report.nodes)
        + json_len(&report.findings)
        + json_len(&report.collectives)
        + json_len(&report.recommendation)
        + json_len(&report.placement)
        + json_len(&report.trimmed)
        + json_len(&report.measurement)
        + json_len(&report.link_matrix);
    let sample = &report.links[..report.links.len().min(LINK_SAMPLE)];
    let per_link = if sample.is_empty() {
        0.0
    } else {
        json_len(&sample) as f64 / sample.len() as f64
    };
    // The field names, the schema and tool strings.
    parts + 256 + (per_link * report.links.len() as f64) as usize
}

/// A node's copy of `report`: the given nodes, links and `trimmed`, everything else cloned
/// (the whole report's nodes and links are never copied only to be replaced).
fn copy_with(
    report: &Report,
    nodes: Vec<NodeEntry>,
    links: Vec<LinkResult>,
    trimmed: Trimmed,
) -> Report {
    Report {
        schema: report.schema.clone(),
        tool: report.tool.clone(),
        mode: report.mode,
        status: report.status,
        nodes,
        findings: report.findings.clone(),
        links,
        collectives: report.collectives.clone(),
        recommendation: report.recommendation.clone(),
        placement: report.placement.clone(),
        trimmed: Some(trimmed),
        measurement: report.measurement.clone(),
        link_matrix: report.link_matrix.clone(),
        run_id: report.run_id.clone(),
    }
}

/// Above [`COMPACT_ABOVE`] nodes, the copy every rank gets unless it asked for the whole report
/// (`--full-report`): the verdict, every finding, the advice and the launch lines, the
/// collectives and the measurement, without the other nodes' facts (each node puts its own back)
/// and without the links. One copy for all, serialised and compressed once; at a thousand nodes
/// it is a third of the whole report and a rank holds tens of MiB less.
pub fn shared_copy(report: &Report) -> Report {
    let n = report.nodes.len();
    let links_total = report
        .link_matrix
        .as_ref()
        .map_or(report.links.len() as u64, |m| m.links_total);
    let trimmed = Trimmed {
        links_total,
        links_kept: 0,
        facts_omitted: n as u32,
        why: format!(
            "the cluster has {n} nodes (over {COMPACT_ABOVE}): every rank gets the verdict, every finding, the advice and the launch lines, without the other nodes' facts and the links; rank 0 prints the whole report (write it there with -o FILE, or give --full-report to every rank)"
        ),
    };
    let nodes = report.nodes.iter().map(stub).collect();
    Report {
        link_matrix: None,
        ..copy_with(report, nodes, Vec::new(), trimmed)
    }
}

/// A node's entry with its facts left out: rank, hostname and host id stay.
fn stub(n: &NodeEntry) -> NodeEntry {
    NodeEntry {
        rank: n.rank,
        hostname: n.hostname.clone(),
        facts: NodeFacts {
            hostname: n.facts.hostname.clone(),
            host_id: n.facts.host_id.clone(),
            ..Default::default()
        },
    }
}

/// The copy of `report` to send to `rank`, given the whole report's JSON size.
pub fn report_for(report: &Report, rank: u32, whole_size: usize) -> Cow<'_, Report> {
    if whole_size <= WHOLE_REPORT_CAP {
        return Cow::Borrowed(report);
    }
    let links: Vec<_> = report
        .links
        .iter()
        .filter(|l| l.from == rank || l.to == rank)
        .cloned()
        .collect();
    let mut facts_omitted = 0u32;
    let nodes = report
        .nodes
        .iter()
        .map(|n| {
            if n.rank == rank {
                return n.clone();
            }
            facts_omitted += 1;
            stub(n)
        })
        .collect();
    let trimmed = Trimmed {
        links_total: report.links.len() as u64,
        links_kept: links.len() as u64,
        facts_omitted,
        why: format!(
            "the whole report is {whole_size} bytes of JSON, over the {WHOLE_REPORT_CAP} sent to every node: this copy keeps this node's links and facts and every finding; rank 0 prints the whole report (write it there with -o FILE)"
        ),
    };
    Cow::Owned(copy_with(report, nodes, links, trimmed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportBuilder;
    use crate::transport::wire::{read_msg, write_msg};
    use preflight_checks::model::{
        Finding, IfAddr, Interface, LinkOutcome, LinkResult, Mode, Status,
    };
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    /// A node with four addresses on four interfaces, facts as a real node's are filled.
    fn node(rank: u32) -> NodeFacts {
        let mut f: NodeFacts = serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/facts/docker-bond-host.json"
        )))
        .unwrap();
        f.hostname = format!("gpu{rank:04}.rack{}.example.com", rank / 32);
        f.host_id = f.hostname.clone();
        f.net.interfaces = (0..4)
            .map(|i| Interface {
                name: format!("ens{i}f0"),
                up: true,
                oper_state: "up".into(),
                mtu: Some(9000),
                speed_mbps: Some(200_000),
                ipv4: vec![IfAddr {
                    addr: format!("10.{i}.{}.{}", rank / 250, rank % 250 + 1)
                        .parse()
                        .unwrap(),
                    prefix: 16,
                }],
                ..Default::default()
            })
            .collect();
        f
    }

    /// Every ordered pair on every address, as the connectivity phase leaves them.
    fn synthetic(n: u32) -> Report {
        let facts: Vec<NodeFacts> = (0..n).map(node).collect();
        let mut links = Vec::with_capacity((n * (n - 1) * 4) as usize);
        for from in 0..n {
            for to in (0..n).filter(|t| *t != from) {
                for iface in &facts[to as usize].net.interfaces {
                    links.push(LinkResult {
                        from,
                        to,
                        interface: iface.name.as_str().into(),
                        address: iface.ipv4[0].addr.to_string().into(),
                        port: 40_000,
                        result: LinkOutcome::Ok,
                        rtt_us: Some(12.5),
                        rtt_p99_us: Some(30.1),
                        throughput_gbit_s: Some(180.2),
                        mtu: Some(9000),
                        ..Default::default()
                    });
                }
            }
        }
        let mut b = ReportBuilder::new(Mode::Cluster);
        for (r, f) in facts.into_iter().enumerate() {
            b = b.node(r as u32, f);
        }
        b.findings([Finding::new(
            preflight_checks::core::FindingId::new("cluster.rendezvous"),
            Status::Pass,
            "x",
            "all joined",
        )])
        .links(links)
        .build()
    }

    #[test]
    fn small_reports_go_whole() {
        let r = synthetic(3);
        let size = json_size(&r);
        let exact = serde_json::to_vec(&r).unwrap().len();
        assert!(size.abs_diff(exact) < exact / 50, "{size} vs {exact}");
        assert!(matches!(report_for(&r, 1, size), Cow::Borrowed(_)));
    }

    /// Above 64 nodes every rank but those asking for the whole report gets one shared copy:
    /// every finding and the advice, no other node's facts and no links; the node puts its
    /// own facts back and its view still shows its verdict and launch line.
    #[test]
    fn above_64_nodes_the_shared_copy_leaves_out_facts_and_links() {
        let n = 100;
        let mut r = synthetic(n);
        r.findings.push(
            Finding::new(
                preflight_checks::core::FindingId::new("gpu.count"),
                Status::Warn,
                "gpus",
                "rank 7 has 7 GPUs",
            )
            .on_node(Some(7)),
        );
        crate::report_compact::compact(&mut r);
        let whole = serde_json::to_vec(&r).unwrap().len();
        let copy = shared_copy(&r);
        let bytes = serde_json::to_vec(&copy).unwrap().len();
        assert!(
            bytes * 10 < whole,
            "shared copy {bytes} bytes, whole {whole}"
        );
        assert_eq!(copy.findings, r.findings);
        assert_eq!(copy.recommendation, r.recommendation);
        assert!(copy.links.is_empty() && copy.link_matrix.is_none());
        assert_eq!(copy.nodes.len(), n as usize);
        assert!(copy.nodes.iter().all(|x| x.facts.net.interfaces.is_empty()));
        let t = copy.trimmed.clone().expect("trimmed");
        assert_eq!((t.facts_omitted, t.links_kept), (n, 0));
        assert_eq!(t.links_total, (n * (n - 1) * 4) as u64);
        assert!(t.why.contains("--full-report"), "{}", t.why);
        // A copy of a small cluster's report is never made: it goes whole.
        assert!(synthetic(3).nodes.len() <= COMPACT_ABOVE);
    }

    /// 1024 nodes with four addresses each: 4,190,208 links. Each node's copy crosses a real
    /// TCP connection through the wire code, compressed, well under the frame cap.
    #[test]
    fn a_1024_node_report_reaches_every_node() {
        let n = 1024;
        let r = synthetic(n);
        assert_eq!(r.links.len(), 1024 * 1023 * 4);
        let whole = json_size(&r);
        assert!(whole > WHOLE_REPORT_CAP, "whole report {whole} bytes");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(read_msg::<_, Report>(&mut s).unwrap());
            }
            got
        });
        let mut s = TcpStream::connect(addr).unwrap();
        let started = Instant::now();
        let mut sent = Vec::new();
        for rank in [0, 517, 1023] {
            let copy = report_for(&r, rank, whole);
            let t = copy.trimmed.clone().expect("trimmed");
            assert_eq!(t.links_kept, 2 * 1023 * 4);
            assert_eq!(t.links_total, r.links.len() as u64);
            assert_eq!(t.facts_omitted, n - 1);
            write_msg(&mut s, copy.as_ref()).unwrap();
            sent.push(copy.into_owned());
        }
        let got = reader.join().unwrap();
        let took = started.elapsed();
        assert_eq!(got, sent);
        for (rank, copy) in [0u32, 517, 1023].iter().zip(&got) {
            assert_eq!(copy.nodes.len(), n as usize);
            assert!(copy.links.iter().all(|l| l.from == *rank || l.to == *rank));
            let own = copy.nodes.iter().find(|x| x.rank == *rank).unwrap();
            assert_eq!(own.facts.net.interfaces.len(), 4);
        }
        eprintln!(
            "1024 nodes x 4 addresses: whole report {whole} bytes; a node's copy {} bytes of JSON; 3 copies over TCP in {took:?}",
            serde_json::to_vec(&got[1]).unwrap().len()
        );
        assert!(took < Duration::from_secs(60), "{took:?}");
    }
}
