//! The faster-set block under the verdict: "Faster without gpu51: ~8.3x the all-reduce's bus bandwidth", the prediction with and without the slow nodes, and the launch on the set without them (the launch on every node above stays valid).

use super::super::Style;
use super::super::sanitize::{line, shown};
use super::number::bw;
use super::{paint, wrap::wrap};
use preflight_checks::model::{FasterSetAdvice, Report};
use std::fmt::Write;

const COMMAND: &str = "    ";
/// Names of a rank mapping shown before "and N more".
const SHOWN: usize = 4;

/// The block, or nothing when the report offers no faster set.
pub fn block(report: &Report, style: Style, rank: u32, whole: bool) -> String {
    let Some(f) = report
        .recommendation
        .as_ref()
        .and_then(|r| r.faster_set.as_ref())
    else {
        return String::new();
    };
    let width = usize::from(style.width);
    let mut out = String::from("\n");
    let head = format!(
        "Faster without {}: ~{:.1}x the all-reduce's bus bandwidth on {} of {} nodes",
        shown(&f.slow_hosts),
        f.speedup,
        f.nodes_without,
        f.nodes_with
    );
    out.push_str(&paint::bold(&wrap(&head, width, "", "  "), style));
    if !whole {
        out.push_str(&this_node(f, rank, width));
        return out;
    }
    for p in prediction(f) {
        out.push_str(&wrap(&p, width, "  ", "    "));
    }
    if !f.set.constraints.met {
        return out;
    }
    if let Some(first) = f.set.launch.first() {
        out.push_str(&wrap(
            &format!(
                "Launch on {} ({} nodes), NODE_RANK its rank in the set ({}):",
                shown(&f.set.hosts),
                f.nodes_without,
                mapping(f)
            ),
            width,
            "  ",
            "    ",
        ));
        let cmd = first
            .command
            .replacen("--node-rank=0 ", "--node-rank=$NODE_RANK ", 1);
        let _ = writeln!(out, "{COMMAND}{}", line(&cmd));
    }
    out.push_str(&wrap(
        "Each node's line from this report saved as JSON (FILE); --format srun, hostfile, exclude, sbatch or k8s-env for the others:",
        width,
        "  ",
        "    ",
    ));
    let _ = writeln!(
        out,
        "{COMMAND}preflight launch --report FILE --healthy-set --exclude-slow --format torchrun"
    );
    out
}

/// Why, and the numbers with and without the slow nodes: three paragraphs.
fn prediction(f: &FasterSetAdvice) -> [String; 3] {
    [
        format!(
            "link.slow names {} slow with every partner, and a ring all-reduce runs at the pace of its slowest hop: {} Gbit/s with {}, {} without.",
            shown(&f.slow_hosts),
            bw(f.ring_gbit_s_with),
            if f.slow.len() == 1 { "it" } else { "them" },
            bw(f.ring_gbit_s_without),
        ),
        format!(
            "All {} nodes: {} GB/s bus bandwidth ({}), {} s per GB all-reduced.",
            f.nodes_with,
            bw(f.busbw_gb_s_with),
            if f.measured {
                "measured"
            } else {
                "the ring's bound"
            },
            bw(f.seconds_per_gb_with),
        ),
        format!(
            "{} nodes: {} GB/s predicted, {} s per GB: ~{:.1}x the samples per second when the all-reduce sets the step's pace (it pays above {:.2}x = {}/{}).",
            f.nodes_without,
            bw(f.busbw_gb_s_without),
            bw(f.seconds_per_gb_without),
            f.throughput_gain,
            f.break_even,
            f.nodes_with,
            f.nodes_without,
        ),
    ]
}

/// "gpu01=0, gpu02=1, ... and 91 more".
fn mapping(f: &FasterSetAdvice) -> String {
    let mut parts: Vec<String> = f
        .set
        .launch
        .iter()
        .take(SHOWN)
        .map(|l| format!("{}={}", shown(&l.hostname), l.node_rank))
        .collect();
    if f.set.launch.len() > SHOWN {
        parts.push(format!("and {} more", f.set.launch.len() - SHOWN));
    }
    parts.join(", ")
}

/// What a node other than rank 0 needs to know: it is the slow one, or its rank in the set.
fn this_node(f: &FasterSetAdvice, rank: u32, width: usize) -> String {
    if f.slow.contains(&rank) {
        return wrap(
            &format!("This node (rank {rank}) is the one left out: link.slow names it slow"),
            width,
            "  ",
            "    ",
        );
    }
    match f.set.launch.iter().find(|l| l.node == rank) {
        Some(l) if f.set.constraints.met => wrap(
            &format!(
                "Without it this node is rank {} of {} (rank 0's report has the launch)",
                l.node_rank, f.nodes_without
            ),
            width,
            "  ",
            "    ",
        ),
        _ => String::new(),
    }
}
