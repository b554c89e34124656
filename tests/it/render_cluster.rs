//! The cluster report as a person reads it: snapshots of the table rendering (node table,
//! connectivity matrix, all-reduce block, findings, recommendation and launch commands) of saved
//! real reports, as rank 0 and rank 1 print them, at 120 and 80 columns, without colour; plus
//! properties of that text the snapshots could silently lose.
//!
//! The reports come from real `preflight cluster` runs on network-namespace hosts:
//! `tests/fixtures/reports/make-cluster-reports.sh` says how each was made.

use crate::common::fixture;
use preflight::render::Style;
use preflight_checks::model::{LinkOutcome, Report};

const WIDTHS: [u16; 2] = [120, 80];

/// The saved report `name` (under tests/fixtures/reports) and its table rendering as `rank`
/// prints it, `width` columns wide, without colour. The one place that names the renderer.
fn rendered(name: &str, rank: u32, width: u16) -> (Report, String) {
    let path = fixture(&format!("reports/{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let report: Report = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a report: {e}", path.display()));
    let style = Style {
        color: false,
        width,
    };
    let out = preflight::render::table::render_for_rank(&report, style, rank);
    (report, out)
}

/// Snapshots of rank 0's and rank 1's view at every width, then the properties below.
fn check_fixture(name: &str) {
    for rank in [0, 1] {
        for width in WIDTHS {
            let (report, text) = rendered(name, rank, width);
            insta::assert_snapshot!(format!("{name}_rank{rank}_{width}cols"), text);
            tables_fit(&text, width);
            if rank == 0 {
                rank0_properties(&report, &text, width);
            } else {
                other_rank_properties(&report, &text, rank);
            }
        }
    }
}

#[test]
fn three_healthy_nodes() {
    check_fixture("cluster-3-healthy");
}

#[test]
fn three_nodes_with_a_filtered_pair_and_a_slow_node() {
    check_fixture("cluster-3-filtered-slow");
    // The fixture holds what its name says: the pair 0->2 was filtered (timed out) ...
    let (report, _) = rendered("cluster-3-filtered-slow", 0, 120);
    let failed: Vec<_> = report
        .links
        .iter()
        .filter(|l| l.result != LinkOutcome::Ok)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!((failed[0].from, failed[0].to), (0, 2), "{failed:#?}");
    assert_eq!(failed[0].result, LinkOutcome::Timeout, "{failed:#?}");
    for width in WIDTHS {
        let (_, text) = rendered("cluster-3-filtered-slow", 0, width);
        // ... its cell (row 0, column 2) says so, and link.unreachable fails on rank 2.
        let matrix = rows(&table_after(&text, "Connectivity on "), 0);
        assert_eq!(matrix[0][3], "timeout", "{text}");
        let findings = rows(&last_table(&text), 1);
        let unreachable: Vec<(&str, &str)> = findings
            .iter()
            .filter(|r| r[2].replace('\n', "") == "link.unreachable")
            .map(|r| (r[1].as_str(), r[4].as_str()))
            .collect();
        assert_eq!(unreachable, [("FAIL", "2")], "{text}");
    }
}

#[test]
fn eight_nodes() {
    check_fixture("cluster-8-nodes");
}

// ------------------------------------------------------------------------------- properties

/// Rank 0 prints the whole cluster report.
fn rank0_properties(report: &Report, text: &str, width: u16) {
    let ctx = || format!("--- rendered ---\n{text}");

    // The node table: one row per node, in rank order, each with its hostname: on one line at
    // 120 columns; at 80 a long name is wrapped inside the word, so its pieces are joined.
    let nodes = rows(&table_after(text, "preflight "), 0);
    let ranks: Vec<String> = nodes.iter().map(|r| r[0].clone()).collect();
    let expected: Vec<String> = report.nodes.iter().map(|n| n.rank.to_string()).collect();
    assert_eq!(ranks, expected, "node table rows\n{}", ctx());
    for (row, node) in nodes.iter().zip(&report.nodes) {
        let whole = if width >= 120 {
            row[1].lines().any(|l| l == node.hostname)
        } else {
            row[1].replace('\n', "") == node.hostname
        };
        assert!(
            whole,
            "host cell {:?} of rank {} does not show {}\n{}",
            row[1],
            node.rank,
            node.hostname,
            ctx()
        );
    }

    // The connectivity matrix: one row per rank, and every link's result in its cell.
    let matrix = rows(&table_after(text, "Connectivity on "), 0);
    let ranks: Vec<String> = matrix.iter().map(|r| r[0].clone()).collect();
    assert_eq!(ranks, expected, "matrix rows\n{}", ctx());
    for l in &report.links {
        let cell = &matrix[l.from as usize][l.to as usize + 1];
        let result = format!("{:?}", l.result).to_lowercase();
        assert!(
            cell.split_whitespace().next() == Some(result.as_str()),
            "cell {}->{} is {cell:?}, the link was {result}\n{}",
            l.from,
            l.to,
            ctx()
        );
    }

    // The findings table: every finding of the report, once. (A narrow column wraps an id
    // without a space, so the pieces are joined back.)
    let findings = rows(&last_table(text), 1);
    let checks: Vec<String> = findings.iter().map(|r| r[2].replace('\n', "")).collect();
    let mut expected: Vec<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
    let mut sorted = checks.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "checks of the findings table\n{}", ctx());

    // The all-reduce block with every measured size, as nccl-tests prints its rows.
    for c in &report.collectives {
        assert!(
            text.lines()
                .any(|l| l.starts_with("All-reduce")
                    && l.contains(c.network.as_deref().unwrap_or("?"))),
            "no all-reduce block for {:?}\n{}",
            c.network,
            ctx()
        );
        for r in &c.rows {
            let (bytes, count) = (r.bytes.to_string(), (r.bytes / 4).to_string());
            assert!(
                text.lines().any(|l| {
                    let words: Vec<&str> = l.split_whitespace().collect();
                    words.len() == 8 && words[0] == bytes && words[1] == count
                }),
                "no all-reduce row for {bytes} bytes\n{}",
                ctx()
            );
        }
    }
    if report.collectives.is_empty() {
        assert!(
            !text.lines().any(|l| l.starts_with("All-reduce")),
            "an all-reduce block without a measurement\n{}",
            ctx()
        );
    }

    // The advice: the NCCL_SOCKET_IFNAME value and every node's launch command, whole.
    let rec = report.recommendation.as_ref().expect("a recommendation");
    if let Some(ifname) = rec.env.get("NCCL_SOCKET_IFNAME") {
        let export = format!("export NCCL_SOCKET_IFNAME={ifname}");
        assert!(
            text.lines().any(|l| l.trim() == export),
            "no `{export}`\n{}",
            ctx()
        );
    }
    assert_eq!(rec.launch.len(), report.nodes.len());
    for l in &rec.launch {
        assert!(
            text.lines().any(|line| line.trim() == l.command),
            "launch command of rank {} missing or cut: {}\n{}",
            l.node_rank,
            l.command,
            ctx()
        );
    }
}

/// Another rank prints its own findings, the cluster-wide ones, and only its own command.
fn other_rank_properties(report: &Report, text: &str, rank: u32) {
    let ctx = || format!("--- rendered (rank {rank}) ---\n{text}");
    let rec = report.recommendation.as_ref().expect("a recommendation");
    assert!(
        text.contains(&format!("Your command (this node is rank {rank}):")),
        "{}",
        ctx()
    );
    for l in &rec.launch {
        let shown = text.lines().any(|line| line.trim() == l.command);
        assert_eq!(
            shown,
            l.node_rank == rank,
            "launch command of rank {} (shown: {shown})\n{}",
            l.node_rank,
            ctx()
        );
    }
    // The findings table holds this node's findings and the cluster-wide ones, no other node's.
    let findings = rows(&table_after(text, "preflight "), 1);
    let mut nodes: Vec<&str> = findings.iter().map(|r| r[4].as_str()).collect();
    let mut expected: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.node.is_none() || f.node == Some(rank))
        .map(|f| f.node.map_or("all".to_string(), |n| n.to_string()))
        .collect();
    nodes.sort_unstable();
    expected.sort_unstable();
    assert_eq!(nodes, expected, "node column of the findings\n{}", ctx());
    assert!(nodes.contains(&rank.to_string().as_str()), "{}", ctx());
    assert!(
        !text.contains("Connectivity on ") && !text.lines().any(|l| l.starts_with("All-reduce")),
        "the cluster-wide parts are printed on rank 0 only\n{}",
        ctx()
    );
}

/// Every table line fits the width asked for.
fn tables_fit(text: &str, width: u16) {
    for line in text.lines().filter(|l| is_table_line(l)) {
        assert!(
            line.chars().count() <= width as usize,
            "table line wider than {width} columns: {line}\n--- rendered ---\n{text}"
        );
    }
}

// ------------------------------------------------------------ reading comfy-table's output back

fn is_table_line(line: &str) -> bool {
    line.starts_with(['┌', '│', '╞', '├', '└'])
}

/// The lines of the first table after the first line starting with `marker`.
fn table_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(marker))
        .unwrap_or_else(|| panic!("no line starts with {marker:?}:\n{text}"));
    let table: Vec<&str> = lines[start..]
        .iter()
        .skip_while(|l| !l.starts_with('┌'))
        .copied()
        .collect();
    one_table(&table)
}

/// The first table of `lines`, which start with its top border: up to its bottom border.
fn one_table<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let end = lines
        .iter()
        .position(|l| l.starts_with('└'))
        .unwrap_or_else(|| panic!("a table without a bottom border: {lines:#?}"));
    lines[..=end].to_vec()
}

/// The lines of the last table of the text.
fn last_table(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with('┌'))
        .unwrap_or_else(|| panic!("no table:\n{text}"));
    one_table(&lines[start..])
}

/// Body rows of a table, one per record: a line whose cell `key` is empty continues the row
/// above it (a wrapped cell), its cells joined to that row's with a newline.
fn rows(table: &[&str], key: usize) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let body = table.iter().skip_while(|l| !l.starts_with('╞')).skip(1);
    for line in body.filter(|l| l.starts_with('│')) {
        let cells: Vec<String> = line
            .trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect();
        match out.last_mut() {
            Some(row) if cells[key].is_empty() => {
                for (have, more) in row.iter_mut().zip(cells) {
                    if !have.is_empty() && !more.is_empty() {
                        have.push('\n');
                    }
                    have.push_str(&more);
                }
            }
            _ => out.push(cells),
        }
    }
    out
}
