//! The cluster report as a person reads it: snapshots of the terminal rendering (node table,
//! connectivity matrix, all-reduce, area lines, problems with their fixes, the advice and the
//! verdict) of saved real reports, as rank 0 and rank 1 print them, at 120 and 80 columns,
//! without colour; plus properties of that text the snapshots could silently lose.
//!
//! The reports come from real `preflight cluster` runs on network-namespace hosts:
//! `tests/fixtures/reports/make-cluster-reports.sh` says how each was made.

use crate::common::fixture;
use preflight::render::Style;
use preflight_checks::model::{LinkOutcome, Report, Status};

const WIDTHS: [u16; 2] = [120, 80];

/// The saved report `name` (under tests/fixtures/reports).
fn report(name: &str) -> Report {
    let path = fixture(&format!("reports/{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a report: {e}", path.display()))
}

/// The terminal rendering of `report` as `rank` prints it, `width` columns wide, without
/// colour. The one place that names the renderer.
fn render(report: &Report, rank: u32, width: u16, verbose: bool) -> String {
    let style = Style {
        width,
        verbose,
        ..Style::plain()
    };
    preflight::render::doctor::render_for_rank(report, style, rank)
}

fn rendered(name: &str, rank: u32, width: u16) -> (Report, String) {
    let r = report(name);
    let text = render(&r, rank, width, false);
    (r, text)
}

/// Snapshots of rank 0's and rank 1's view at every width, then the properties below.
fn check_fixture(name: &str) {
    for rank in [0, 1] {
        for width in WIDTHS {
            let (report, text) = rendered(name, rank, width);
            if report.nodes.iter().all(|n| n.rank != rank) {
                continue;
            }
            insta::assert_snapshot!(format!("{name}_rank{rank}_{width}cols"), text);
            fits(&report, &text, width);
            problems_with_whole_fixes(&report, &text, rank);
            advice_follows_the_verdict(&report, &text, rank);
            if rank == 0 {
                rank0_properties(&report, &text);
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
    let report = report("cluster-3-filtered-slow");
    let failed: Vec<_> = report
        .links
        .iter()
        .filter(|l| l.result != LinkOutcome::Ok)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!((failed[0].from, failed[0].to), (0, 2), "{failed:#?}");
    assert_eq!(failed[0].result, LinkOutcome::Timeout, "{failed:#?}");
    for width in WIDTHS {
        let text = render(&report, 0, width, false);
        // ... its cell (row 0, column 2) says so, and link.unreachable fails on rank 2.
        let matrix = rows(&table_after(&text, "Connectivity on "));
        assert_eq!(matrix[0][3], "timeout", "{text}");
        assert!(
            text.lines()
                .any(|l| l == "✗ FAIL link.unreachable · rank 2 (gpu13) · 0->2 eth0"),
            "{text}"
        );
        // Rank 0's address is shown though no network was chosen (a row per node with -v).
        let loud = render(&report, 0, width, true);
        let nodes = rows(&table_after(&loud, "Nodes:"));
        assert_eq!(nodes[0][2], "10.200.1.1", "{loud}");
        // Rank 1 is told there is a problem elsewhere, and where.
        let one = render(&report, 1, width, false);
        assert!(
            one.lines()
                .last()
                .unwrap()
                .starts_with("✗ do not launch: 1 problem on rank 2"),
            "{one}"
        );
    }
}

#[test]
fn eight_nodes() {
    check_fixture("cluster-8-nodes");
    // 56 slow links are one problem block, each fix command once.
    let (report, text) = rendered("cluster-8-nodes", 0, 80);
    let slow = report
        .findings
        .iter()
        .filter(|f| f.id == "link.slow")
        .count();
    assert_eq!(slow, 56);
    let headings = text.lines().filter(|l| l.contains(" link.slow ")).count();
    assert_eq!(headings, 1, "{text}");
    assert!(text.contains("- and 52 more like these"), "{text}");
    // The same command on every node is one pdsh line with the host list, not eight lines.
    assert_eq!(
        text.matches(
            "        pdsh -w 'gpu-rack1-node[01-04],gpu-rack2-node[01-04]' 'ethtool enp65s0f0'\n"
        )
        .count(),
        1,
        "{text}"
    );
    assert!(!text.contains("ethtool enp65s0f0   # on rank"), "{text}");
}

#[test]
fn one_node_joined_of_two() {
    check_fixture("cluster-failed");
    let (_, text) = rendered("cluster-failed", 0, 80);
    assert!(!text.contains("All-reduce"), "{text}");
    assert!(text.contains("Fix these first"), "{text}");
}

#[test]
fn two_nodes_without_links() {
    check_fixture("cluster-2-nodes");
}

#[test]
fn verbose_shows_passes_and_skips_and_interfaces() {
    let r = report("cluster-3-healthy");
    let quiet = render(&r, 0, 80, false);
    let loud = render(&r, 0, 80, true);
    for f in r.findings.iter().filter(|f| f.status == Status::Pass) {
        let line = format!("✓ {} (", f.id);
        assert!(!quiet.contains(&line), "{quiet}");
        assert!(loud.contains(&line), "{loud}");
    }
    assert!(
        loud.contains("interfaces") && loud.contains("Why:"),
        "{loud}"
    );
}

// ------------------------------------------------------------------------------- properties

/// Lines that are allowed past the width: commands, printed whole to be pasted.
fn commands(report: &Report) -> Vec<String> {
    let mut out: Vec<String> = report
        .findings
        .iter()
        .filter_map(|f| f.fix.as_ref())
        .flat_map(|f| f.commands.clone())
        .collect();
    if let Some(rec) = &report.recommendation {
        for l in &rec.launch {
            out.extend(launch_forms(&l.command, l.node_rank));
        }
        out.extend(rec.standalone.clone());
    }
    out
}

/// A launch command as the terminal may print it: as it is, or (rank 0's view, every node's
/// line alike but for the rank) with the rank taken from the launcher's variable.
fn launch_forms(command: &str, rank: u32) -> Vec<String> {
    let flag = format!("--node-rank={rank}");
    let mut forms = vec![command.to_string()];
    if command.contains(&flag) {
        for var in ["$NODE_RANK", "$SLURM_NODEID"] {
            forms.push(command.replacen(&flag, &format!("--node-rank={var}"), 1));
        }
    }
    forms
}

/// Every line fits the width, but a command (never wrapped or cut) and a table row of a
/// node table whose cells are single words.
fn fits(report: &Report, text: &str, width: u16) {
    let cmds = commands(report);
    for line in text.lines() {
        // A fix run on many nodes at once (pdsh, and its clush/srun alternatives) is a command.
        let many = ["pdsh -w ", "# or: clush -w ", "# or: srun -w "]
            .iter()
            .any(|p| line.starts_with(&format!("        {p}")));
        if line.chars().count() <= width as usize || many || cmds.iter().any(|c| line.trim() == c) {
            continue;
        }
        panic!("line wider than {width} columns: {line}\n--- rendered ---\n{text}");
    }
}

/// Every warn, fail and error the rank shows has a heading, and each of its fix commands is
/// one whole line of its own, indented.
fn problems_with_whole_fixes(report: &Report, text: &str, rank: u32) {
    // Rank 0 shows every problem; another rank its own (the cluster's are in rank 0's report).
    for f in report.findings.iter().filter(|f| {
        matches!(f.status, Status::Warn | Status::Fail | Status::Error)
            && (rank == 0 || f.node == Some(rank))
    }) {
        assert!(
            text.lines().any(|l| l.contains(&format!(" {} · ", f.id))),
            "no heading for {}\n{text}",
            f.id
        );
        for c in f.fix.iter().flat_map(|x| &x.commands) {
            // A command given for three nodes or more is one pdsh line with the host list.
            let pdsh = c
                .split_once("   # on rank ")
                .map(|(cmd, _)| format!(" {}", preflight::shell::quote(cmd)));
            assert!(
                text.lines().any(|l| l == format!("        {c}"))
                    || pdsh.is_some_and(|p| text
                        .lines()
                        .any(|l| { l.starts_with("        pdsh -w ") && l.ends_with(&p) })),
                "fix command of {} missing, cut or wrapped: {c}\n{text}",
                f.id
            );
        }
    }
    assert!(
        !text.contains("│ $"),
        "a fix command in a table cell\n{text}"
    );
}

/// The last line is the verdict; launch commands only when nothing fails.
fn advice_follows_the_verdict(report: &Report, text: &str, rank: u32) {
    let fails = report
        .findings
        .iter()
        .any(|f| matches!(f.status, Status::Fail | Status::Error));
    let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
    if fails {
        assert!(last.starts_with("✗ do not launch: "), "{text}");
        assert!(text.contains("Fix these first"), "{text}");
    } else {
        assert!(last.starts_with("✓ ready to launch"), "{text}");
    }
    let rec = report.recommendation.as_ref();
    for l in rec.iter().flat_map(|r| &r.launch) {
        let forms = launch_forms(&l.command, l.node_rank);
        let shown = text
            .lines()
            .any(|line| forms.iter().any(|f| line.trim() == f));
        let expected = !fails && (rank == 0 || l.node_rank == rank);
        assert_eq!(
            shown, expected,
            "launch command of rank {} (shown: {shown})\n{text}",
            l.node_rank
        );
    }
}

/// Rank 0 prints the node table (one row when every node is alike), the matrix when a link
/// failed (else each network summed up) and the all-reduce.
fn rank0_properties(report: &Report, text: &str) {
    let ctx = || format!("--- rendered ---\n{text}");
    let nodes = rows(&table_after(text, "Nodes:"));
    let expected: Vec<String> = report.nodes.iter().map(|n| n.rank.to_string()).collect();
    let alike = format!("Nodes: all {} alike", report.nodes.len());
    if text.lines().any(|l| l == alike) {
        assert_eq!(nodes.len(), 1, "one row for alike nodes\n{}", ctx());
        assert_eq!(nodes[0][0], report.nodes.len().to_string(), "{}", ctx());
    } else {
        let ranks: Vec<String> = nodes.iter().map(|r| r[0].clone()).collect();
        assert_eq!(ranks, expected, "node table rows\n{}", ctx());
        for (row, node) in nodes.iter().zip(&report.nodes) {
            assert_eq!(row[1].replace('\n', ""), node.hostname, "{}", ctx());
        }
    }
    if report.links.iter().all(|l| l.result == LinkOutcome::Ok) {
        assert!(!text.contains("Connectivity on "), "{}", ctx());
        assert_eq!(
            text.contains("Links on "),
            !report.links.is_empty(),
            "{}",
            ctx()
        );
    } else {
        let matrix = rows(&table_after(text, "Connectivity on "));
        let ranks: Vec<String> = matrix.iter().map(|r| r[0].clone()).collect();
        assert_eq!(ranks, expected, "matrix rows\n{}", ctx());
        for l in report.links.iter().filter(|l| l.result != LinkOutcome::Ok) {
            let cell = &matrix[l.from as usize][l.to as usize + 1];
            let word = format!("{:?}", l.result).to_lowercase();
            assert!(
                cell == &word || cell == "✗",
                "cell {}->{}: {cell}\n{}",
                l.from,
                l.to,
                ctx()
            );
        }
    }
    let blocks = text.lines().filter(|l| l.starts_with("All-reduce")).count();
    let measured = report.collectives.iter().filter(|c| c.ranks >= 2).count();
    assert_eq!(blocks, measured, "all-reduce blocks\n{}", ctx());
    for c in report.collectives.iter().filter(|c| c.ranks >= 2) {
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
}

/// Another rank prints its own findings and the cluster-wide ones, no cluster tables.
fn other_rank_properties(report: &Report, text: &str, rank: u32) {
    for f in report
        .findings
        .iter()
        .filter(|f| f.node.is_some_and(|n| n != rank) && f.status >= Status::Warn)
    {
        let own_too = report
            .findings
            .iter()
            .any(|o| o.id == f.id && (o.node.is_none() || o.node == Some(rank)));
        if !own_too {
            assert!(
                !text.lines().any(|l| l.contains(&format!(" {} · ", f.id))),
                "rank {rank} shows {} of rank {:?}\n{text}",
                f.id,
                f.node
            );
        }
    }
    assert!(
        !text.contains("Connectivity on ") && !text.contains("Nodes:"),
        "the cluster tables are printed on rank 0 only\n{text}"
    );
}

// ------------------------------------------------------------ reading comfy-table's output back

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
    let end = table
        .iter()
        .position(|l| l.starts_with('└'))
        .unwrap_or_else(|| panic!("a table without a bottom border: {table:#?}"));
    table[..=end].to_vec()
}

/// Body rows of a table, one per record: a line whose first cell is empty continues the row
/// above it (a wrapped cell), its cells joined to that row's with a newline.
fn rows(table: &[&str]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let body = table.iter().skip_while(|l| !l.starts_with('╞')).skip(1);
    for line in body.filter(|l| l.starts_with('│')) {
        let cells: Vec<String> = line
            .trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect();
        match out.last_mut() {
            Some(row) if cells[0].is_empty() => {
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
