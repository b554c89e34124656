//! The cluster report at scale as a person reads it: snapshots of the grouped terminal report
//! at 3 and 64 nodes, healthy and failing (a dead node, a firewalled node, one bad link, a
//! slow node), what a rank other than 0 prints, and the size of the JSON at 1024 nodes with
//! every pair still recoverable from it. Reports come from `synthetic.rs` (no network).

use crate::synthetic::{Faults, cluster};
use preflight::render::Style;
use preflight::report_compact;
use preflight_checks::model::{LinkOutcome, Report};

fn render(report: &Report, rank: u32, width: u16) -> String {
    let style = Style {
        width,
        ..Style::plain()
    };
    preflight::render::doctor::render_for_rank(report, style, rank)
}

/// Serialised size of any part of a report.
mod erased {
    pub trait Size {
        fn size(&self) -> usize;
    }
    impl<T: serde::Serialize> Size for T {
        fn size(&self) -> usize {
            serde_json::to_string(self).map_or(0, |s| s.len())
        }
    }
}

fn failing() -> Faults {
    Faults {
        dead: Some(17),
        firewalled: Some(40),
        bad_link: Some((3, 9)),
        slow: Some(50),
        links_only: false,
        ..Default::default()
    }
}

/// Every line within the width, but fix and launch commands (printed whole, to be pasted).
/// Shared with the 64-agent netns test.
pub(crate) fn fits(text: &str, width: usize) {
    for l in text.lines() {
        let t = l.trim_start();
        // A fix's command (indented 8), a launch line, the healthy set's re-check and the
        // faster set's `preflight launch` are printed whole, to be pasted.
        let command = l.starts_with("        ")
            || (l.starts_with("    ")
                && (t.contains("torchrun --")
                    || t.starts_with("pdsh ")
                    || t.starts_with("preflight cluster --hosts ")
                    || t.starts_with("preflight launch --report ")
                    || t.starts_with("# or: ")));
        assert!(
            l.chars().count() <= width || command,
            "wider than {width}: {l}\n{text}"
        );
    }
}

#[test]
fn render_scale_three_nodes() {
    let healthy = cluster(3, &Faults::default());
    let text = render(&healthy, 0, 80);
    insta::assert_snapshot!("scale_3_healthy_rank0_80cols", text);
    fits(&text, 80);
    // Alike nodes are one row and links that all connected a summary, at any size; -v keeps
    // a row per node and the matrix.
    assert!(text.contains("Nodes: all 3 alike"), "{text}");
    assert!(!text.contains("Connectivity on"), "{text}");
    let verbose = preflight::render::doctor::render(
        &healthy,
        Style {
            verbose: true,
            ..Style::plain()
        },
    );
    assert!(
        verbose.contains("Connectivity on 10.1.0.0/16 (eno1)"),
        "{verbose}"
    );
    assert!(verbose.lines().any(|l| l.starts_with("│ 2 ")), "{verbose}");
    let bad = cluster(
        3,
        &Faults {
            bad_link: Some((0, 2)),
            ..Default::default()
        },
    );
    let text = render(&bad, 0, 80);
    insta::assert_snapshot!("scale_3_bad_link_rank0_80cols", text);
    fits(&text, 80);
    assert!(text.contains("refused"), "{text}");
    // A link that failed: the matrix shows where.
    assert!(
        text.contains("Connectivity on 10.1.0.0/16 (eno1)"),
        "{text}"
    );
    insta::assert_snapshot!("scale_3_bad_link_rank1_80cols", render(&bad, 1, 80));
}

/// `report` with a healthy all-reduce over its ranks on ib0, as a default-mode run measures it
/// (five sizes, the table the terminal prints).
fn with_allreduce(report: &Report) -> Report {
    let n = report.nodes.len();
    let mut v = serde_json::to_value(report).unwrap();
    let rows: Vec<serde_json::Value> = (20..25)
        .map(|p| {
            let bytes = 1u64 << p;
            let algbw = 40.0 + f64::from(p - 20);
            let busbw = algbw * 2.0 * (n as f64 - 1.0) / n as f64;
            serde_json::json!({
                "bytes": bytes,
                "time_us": bytes as f64 / algbw / 1e3,
                "algbw_gb_s": algbw,
                "busbw_gb_s": busbw,
                "wrong": 0
            })
        })
        .collect();
    let addresses: serde_json::Map<String, serde_json::Value> = report
        .nodes
        .iter()
        .map(|node| {
            (
                node.rank.to_string(),
                format!("192.168.0.{}", node.rank + 2).into(),
            )
        })
        .collect();
    v["collectives"] = serde_json::json!([{
        "op": "allreduce",
        "transport": "nccl",
        "ranks": n,
        "env": {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_HCA": "mlx5_0:1"},
        "net": "IB",
        "rows": rows,
        "order": report.nodes.iter().map(|node| node.rank).collect::<Vec<_>>(),
        "addresses": addresses,
        "network": "192.168.0.0/16 (ib0)",
        "streams": null,
        "config": "advice",
        "error": null,
        "failed_ranks": [],
        "net_mismatch": null
    }]);
    serde_json::from_value(v).unwrap()
}

/// A healthy default-mode report (every link measured, the all-reduce) stays within 60 lines
/// at 2, 16 and 64 nodes: alike nodes are one row, links that all connected are summed up,
/// and the launch lines that differ only in the rank are one line with the rank's variable.
#[test]
fn healthy_reports_stay_within_sixty_lines_at_2_16_and_64_nodes() {
    for n in [2u32, 16, 64] {
        let r = with_allreduce(&cluster(n, &Faults::default()));
        let text = render(&r, 0, 80);
        if n != 64 {
            insta::assert_snapshot!(format!("scale_{n}_healthy_allreduce_rank0_80cols"), text);
        }
        fits(&text, 80);
        let lines = text.lines().count();
        assert!(lines <= 60, "{n} nodes: {lines} lines\n{text}");
        assert!(text.contains(&format!("Nodes: all {n} alike")), "{text}");
        assert!(!text.contains("Connectivity on"), "{text}");
        assert!(text.contains("All-reduce: "), "{text}");
        let launch: Vec<&str> = text.lines().filter(|l| l.contains("torchrun --")).collect();
        assert_eq!(launch.len(), 1, "{text}");
        assert!(launch[0].contains("--node-rank=$SLURM_NODEID"), "{text}");
        assert!(text.trim_end().ends_with("✓ ready to launch"), "{text}");
    }
}

#[test]
fn render_scale_sixty_four_healthy_nodes_fit_sixty_lines() {
    let r = cluster(64, &Faults::default());
    assert!(r.link_matrix.is_none(), "64 nodes keep every link");
    let text = render(&r, 0, 80);
    insta::assert_snapshot!("scale_64_healthy_rank0_80cols", text);
    fits(&text, 80);
    let lines = text.lines().count();
    assert!(lines <= 60, "{lines} lines\n{text}");
    // One row for all 64 alike nodes, one launch line with Slurm's rank variable.
    assert!(text.contains("Nodes: all 64 alike"), "{text}");
    assert!(text.contains("│ 64    ┆ gpu[01-64]"), "{text}");
    let launch: Vec<&str> = text.lines().filter(|l| l.contains("torchrun --")).collect();
    assert_eq!(launch.len(), 1, "{text}");
    assert!(launch[0].contains("--node-rank=$SLURM_NODEID"), "{text}");
    // Each network summed up, with percentiles.
    for net in ["10.1.0.0/16 (eno1)", "192.168.0.0/16 (ib0)"] {
        assert!(
            text.contains(&format!("Links on {net}, mtu"))
                && text.contains("4032 of 4032 pairs ok"),
            "{net}\n{text}"
        );
    }
    assert!(text.contains("RTT p50 "), "{text}");
    // Rank 5 prints a few lines: its verdict, its command, where the whole report is.
    let five = render(&r, 5, 80);
    insta::assert_snapshot!("scale_64_healthy_rank5_80cols", five);
    assert!(five.lines().count() <= 10, "{five}");
    assert!(five.contains("--node-rank=5 "), "{five}");
    assert!(five.contains("--full-report"), "{five}");
    assert!(five.trim_end().ends_with("✓ ready to launch"), "{five}");
    // With --full-report a rank prints it all.
    let full = preflight::render::doctor::render_view(&r, Style::plain(), 5, true);
    assert!(full.contains("Nodes: all 64 alike"), "{full}");
    // A node whose driver differs is a row of its own, marked, after the 63 alike.
    let mut odd = r.clone();
    odd.nodes[5].facts.gpu.driver_version = Some("535.104.05".into());
    let text = render(&odd, 0, 80);
    assert!(
        text.contains("Nodes: 64 in 2 groups of identical facts"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("│ ") && !l.starts_with("│ nodes"))
        .collect();
    assert!(rows.iter().any(|l| l.starts_with("│ 63 ")), "{text}");
    let odd_row = rows
        .iter()
        .position(|l| l.starts_with("│ 1 !"))
        .expect("the odd row, marked");
    assert!(rows[odd_row].contains("gpu06"), "{text}");
    assert!(rows[odd_row].contains("535.104.05"), "{text}");
    // A node's trimmed copy says what it leaves out before the tables.
    let mut trimmed = r.clone();
    trimmed.trimmed = Some(preflight_checks::model::Trimmed {
        links_total: 8064,
        links_kept: 252,
        facts_omitted: 63,
        why: "too big to send whole".into(),
    });
    let full = preflight::render::doctor::render_view(&trimmed, Style::plain(), 5, true);
    assert!(
        full.contains("This is a node's copy: 7812 of 8064 links and 63 nodes' facts are left out"),
        "{full}"
    );
}

#[test]
fn render_scale_sixty_four_nodes_with_faults() {
    let r = cluster(64, &failing());
    let text = render(&r, 0, 80);
    insta::assert_snapshot!("scale_64_failing_rank0_80cols", text);
    fits(&text, 80);
    // The dead node and the firewalled node are named as nodes, per network.
    assert!(
        text.contains("✗ every link to and from failed: gpu18 (rank 17)"),
        "{text}"
    );
    assert!(
        text.contains("✗ every link to it failed (a filter on input?): gpu41 (rank 40)"),
        "{text}"
    );
    // The bad link as a link; the slow node as a node.
    assert!(text.contains("3 -> 9 (gpu04 -> gpu10) refused"), "{text}");
    assert!(
        text.contains("slow with every healthy partner (link.slow)"),
        "{text}"
    );
    assert!(text.contains("gpu51 (rank 50)"), "{text}");
    // Each finding id heads one block.
    let headings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("✗ FAIL ") || l.starts_with("! warning "))
        .collect();
    let mut ids: Vec<&str> = headings
        .iter()
        .map(|l| l.split_whitespace().nth(2).unwrap_or(""))
        .collect();
    let before = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), before, "{headings:#?}");
    assert!(
        text.trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("✗ do not launch")
    );
    insta::assert_snapshot!("scale_64_failing_rank5_80cols", render(&r, 5, 80));
}

#[test]
fn render_scale_1024_nodes_json_is_linear_and_every_pair_recoverable() {
    let r = crate::synthetic::cluster_1024();
    let json = preflight::render::json::render(r);
    let m = r.link_matrix.as_ref().expect("a matrix above 64 nodes");
    let matrix_bytes = serde_json::to_string(m).unwrap().len();
    let links_bytes = serde_json::to_string(&r.links).unwrap().len();
    let part = |v: &dyn erased::Size| v.size();
    eprintln!(
        "1024 nodes: JSON {} bytes: nodes {}, findings {}, links {} kept of {} in {links_bytes}, link_matrix {matrix_bytes}",
        json.len(),
        part(&r.nodes),
        part(&r.findings),
        r.links.len(),
        m.links_total
    );
    // Linear: per node, 1024 nodes take no more than 128 do (and a little).
    let small = preflight::render::json::render(&cluster(
        128,
        &Faults {
            links_only: true,
            ..Default::default()
        },
    ));
    let (per_big, per_small) = (json.len() as f64 / 1024.0, small.len() as f64 / 128.0);
    eprintln!("per node: {per_big:.0} bytes at 1024 nodes, {per_small:.0} at 128");
    assert!(
        per_big <= 1.25 * per_small,
        "{per_big} vs {per_small} bytes per node"
    );
    assert_eq!(m.links_total, 2 * 1024 * 1023);
    assert!(
        links_bytes + matrix_bytes <= 5_000_000,
        "the links of 1024 nodes take {} bytes",
        links_bytes + matrix_bytes
    );
    // Every pair's result and RTT come back from the report.
    let back: Report = serde_json::from_str(&json).unwrap();
    let nets = report_compact::networks(&back);
    assert_eq!(
        nets.len(),
        2,
        "{:?}",
        nets.iter().map(|n| &n.name).collect::<Vec<_>>()
    );
    for net in &nets {
        assert_eq!(net.ranks.len(), 1024);
        assert_eq!(net.measured, 1024 * 1023, "{}", net.name);
    }
    let eno1 = nets.iter().find(|n| n.name == "10.1.0.0/16").unwrap();
    assert_eq!(eno1.cell(3, 9).result, Some(LinkOutcome::Refused));
    let original = crate::synthetic::rtt_us(5, 700, 0);
    let c = eno1.cell(5, 700);
    assert_eq!(c.result, Some(LinkOutcome::Ok));
    assert!(
        (f64::from(c.rtt_us.unwrap()) - original).abs() <= 0.5,
        "{c:?} vs {original}"
    );
    // The terminal report still fits 60 lines.
    let text = render(&back, 0, 80);
    assert!(text.lines().count() <= 60, "{text}");
}

/// Two real nodes on loopback, the terminal report: rank 1 prints a few lines by default and
/// the whole report with `--full-report`; rank 0 prints the whole report either way.
#[test]
fn render_scale_rank_one_prints_a_few_lines_unless_full_report() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let run = |rank: u32, port: u16, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
        cmd.args([
            "cluster",
            "--nnodes=2",
            &format!("--node-rank={rank}"),
            "--master-addr=127.0.0.1",
            &format!("--master-port={port}"),
            "--timeout=20",
            "--quick",
            "--allreduce=off",
            "--token=render-scale",
            "--no-gpu",
        ])
        .args(extra);
        for v in crate::common::INHERITED_ENV_TO_CLEAR {
            cmd.env_remove(v);
        }
        cmd.env("NCCL_HOSTID", format!("render-{rank}-{port}"))
            .env("NO_COLOR", "1")
            .env("COLUMNS", "80")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd.spawn().expect("start preflight")
    };
    let finish = |mut child: std::process::Child| {
        let started = Instant::now();
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("preflight ran over 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        reader.join().unwrap()
    };
    for full in [false, true] {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let extra: &[&str] = if full { &["--full-report"] } else { &[] };
        let zero = run(0, port, extra);
        std::thread::sleep(Duration::from_millis(200));
        let one = run(1, port, extra);
        let (zero, one) = (finish(zero), finish(one));
        // Every link connected: each network summed up (no matrix of marks).
        assert!(zero.contains("Links on "), "{zero}");
        assert!(
            one.starts_with("preflight ") && one.contains("this is rank 1"),
            "{one}"
        );
        if full {
            assert!(one.contains("Links on ") && one.contains("Nodes:"), "{one}");
        } else {
            assert!(
                !one.contains("Links on ") && !one.contains("Nodes:"),
                "{one}"
            );
            assert!(one.contains("--full-report"), "{one}");
            assert!(
                one.lines().count() < zero.lines().count() / 2,
                "{one}\n---\n{zero}"
            );
        }
    }
}

/// Node settings that bite at scale (issue 25), grouped: 64 nodes of 8 processes (a world of
/// 512) with the old default listen backlog of 128 are one `sys.listen-backlog` entry with
/// every node as a hostlist and one fix for all, not 64 blocks.
#[test]
fn render_scale_sixty_four_nodes_with_the_old_listen_backlog_are_one_entry() {
    let r = cluster(
        64,
        &Faults {
            old_backlog: true,
            ..Default::default()
        },
    );
    let text = render(&r, 0, 80);
    insta::assert_snapshot!("scale_64_old_backlog_rank0_80cols", text);
    fits(&text, 80);
    assert_eq!(
        text.matches("warning sys.listen-backlog").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("sys.listen-backlog · gpu[01-64] (ranks 0-63)"),
        "{text}"
    );
    // The same fix on every node is given once.
    assert_eq!(
        text.matches("sysctl -w net.core.somaxconn=4096").count(),
        1,
        "{text}"
    );
    assert!(
        text.lines().count() <= 80,
        "{} lines:\n{text}",
        text.lines().count()
    );
}

/// One fault among `n` nodes: a pair broken both ways, a dead node, a node that filters input.
fn single_faults() -> [(&'static str, Faults); 3] {
    [
        (
            "broken_pair",
            Faults {
                broken_pair: Some((3, 9)),
                ..Default::default()
            },
        ),
        (
            "dead_node",
            Faults {
                dead: Some(17),
                ..Default::default()
            },
        ),
        (
            "filtered_node",
            Faults {
                firewalled: Some(40),
                ..Default::default()
            },
        ),
    ]
}

/// A screen: what one fault among 96 nodes may take at 80 columns.
const SCREEN: usize = 60;

#[test]
fn render_scale_one_fault_among_96_fits_a_screen_and_does_not_grow_with_n() {
    for (what, faults) in single_faults() {
        let at_48 = render(&cluster(48, &faults), 0, 80);
        let text = render(&cluster(96, &faults), 0, 80);
        insta::assert_snapshot!(format!("scale_96_{what}_rank0_80cols"), text);
        fits(&text, 80);
        let lines = text.lines().count();
        assert!(lines <= SCREEN, "{what}: {lines} lines\n{text}");
        assert_eq!(
            lines,
            at_48.lines().count(),
            "{what}: the report grows with n\n{at_48}\n{text}"
        );
        assert!(
            text.contains("✗ do not launch: 1 problem on rank "),
            "{what}: one fault is one problem\n{text}"
        );
    }
    // The broken pair: one entry naming both directions, one fix, no "likewise".
    let text = render(&cluster(96, &single_faults()[0].1), 0, 80);
    let entries = text.lines().filter(|l| l.starts_with("✗ FAIL ")).count();
    assert_eq!(entries, 1, "{text}");
    assert!(
        text.contains("✗ FAIL link.unreachable · rank 3 (gpu04) · 3<->9 ib0"),
        "{text}"
    );
    assert!(
        text.contains("cannot connect to each other on ib0")
            && text.contains("(timeout both ways;"),
        "{text}"
    );
    assert!(!text.contains("likewise"), "{text}");
    assert!(
        text.contains("✗ do not launch: 1 problem on rank 3"),
        "{text}"
    );
    // The fix is given once: in the entry, not again in the list of what to fix first.
    let listen = text.lines().filter(|l| l.contains("nc -l -k")).count();
    assert_eq!(listen, 1, "{text}");
    // Three numbered nc commands, then a line of its own per result: what it means.
    for which in [
        "(1) on rank 3 (gpu04)",
        "(2) on rank 9 (gpu10)",
        "(3) on another host",
    ] {
        let shown = text
            .lines()
            .filter(|l| l.starts_with("        nc ") && l.ends_with(which))
            .count();
        assert_eq!(shown, 1, "{which}\n{text}");
    }
    for result in [
        "(2) fails, (3) connects: rank 9 (gpu10)'s OUTPUT drops it",
        "(2) and (3) fail: rank 3 (gpu04)'s INPUT drops it",
        "(2) and (3) fail, and `iptables -vnL INPUT` on rank 3 (gpu04)",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("    {result}"))),
            "{result}\n{text}"
        );
    }
    assert!(
        text.contains("link.unreachable on rank 3 (gpu04) (above)"),
        "{text}"
    );
    // The JSON keeps both directions.
    let r = cluster(96, &single_faults()[0].1);
    let ids: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.id == "link.unreachable")
        .map(|f| f.subject.as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
}

/// Issue 46: 96 agents, one slow with every partner. `link.slow` names it, `collective.busbw`
/// says the ring runs at its pace; the verdict stays "ready to launch" on all 96, and the
/// report offers the 95 without it with the predicted gain and the launch line for them.
#[test]
fn render_scale_one_slow_node_among_96_offers_the_faster_set() {
    let faults = Faults {
        slow: Some(50),
        allreduce: true,
        advise_sets: true,
        ..Default::default()
    };
    let r = cluster(96, &faults);
    let f = r
        .recommendation
        .as_ref()
        .and_then(|x| x.faster_set.as_ref())
        .expect("a faster set");
    assert_eq!((f.slow.clone(), f.slow_hosts.as_str()), (vec![50], "gpu51"));
    assert_eq!((f.nodes_with, f.nodes_without), (96, 95));
    assert!(f.measured);
    assert!(f.speedup > 9.0 && f.speedup < 11.0, "{}", f.speedup);
    assert_eq!(f.set.hosts, "gpu[01-50,52-96]");
    assert_eq!(f.set.exclude_hosts, "gpu51");
    assert_eq!(f.set.launch.len(), 95);
    assert!(f.set.launch.iter().all(|l| l.hostname != "gpu51"));
    assert!(
        f.set.launch[0].command.contains("--nnodes=95"),
        "{:?}",
        f.set.launch[0]
    );
    let text = render(&r, 0, 80);
    insta::assert_snapshot!("scale_96_slow_node_rank0_80cols", text);
    fits(&text, 80);
    assert!(
        text.contains("✓ ready to launch (2 warnings above)"),
        "{text}"
    );
    assert!(
        text.contains("Faster without gpu51: ~") && text.contains("on 95 of 96 nodes"),
        "{text}"
    );
    assert!(
        text.contains("--nnodes=96") && text.contains("--nnodes=95"),
        "{text}"
    );
    assert!(text.contains("--healthy-set --exclude-slow"), "{text}");
    // The slow node's own report says it is the one left out; another node, its rank.
    let slow = render(&r, 50, 80);
    assert!(
        slow.contains("This node (rank 50) is the one left out"),
        "{slow}"
    );
    let other = render(&r, 60, 80);
    assert!(
        other.contains("Without it this node is rank 59 of 95"),
        "{other}"
    );
}

#[test]
fn render_scale_one_bad_link_among_1024_fits_a_screen() {
    let big = crate::synthetic::cluster_1024();
    let text = render(big, 0, 80);
    insta::assert_snapshot!("scale_1024_bad_link_rank0_80cols", text);
    fits(&text, 80);
    let lines = text.lines().count();
    assert!(lines <= SCREEN, "{lines} lines\n{text}");
    assert!(
        text.contains("3 -> 9 (gpu0004 -> gpu0010) refused"),
        "{text}"
    );
}
