//! The measured all-reduce as nccl-tests prints it: one block per transport and configuration.

use super::Style;
use super::number::bw;
use super::wrap::wrap;
use crate::render::sanitize::shown;
use preflight_checks::collective::{human_bytes, large_row};
use preflight_checks::model::CollectiveResult;
use std::fmt::Write;

/// One all-reduce result: a heading, nccl-tests' columns (bandwidths with three significant
/// digits), and the bus bandwidth of the largest message.
pub fn block(c: &CollectiveResult, style: Style) -> String {
    let mut out = String::new();
    let what = match c.transport.as_str() {
        "tcp" => format!(
            "TCP ring over {}, {} nodes, {} connections per neighbour",
            shown(c.network.as_deref().unwrap_or("?")),
            c.ranks,
            c.streams.unwrap_or(1)
        ),
        "nccl" => format!(
            "NCCL, {} GPUs on {} nodes, network used: {}",
            c.ranks,
            c.order.len(),
            shown(c.net.as_deref().unwrap_or("unknown"))
        ),
        other => shown(other).into_owned(),
    };
    let config = if c.config == "compare" {
        " (--compare-env)"
    } else {
        ""
    };
    let width = usize::from(style.width);
    out.push_str(&super::paint::bold(
        &wrap(&format!("All-reduce{config}: {what}"), width, "", "  "),
        style,
    ));
    if !c.env.is_empty() {
        let env: Vec<String> = c
            .env
            .iter()
            .map(|(k, v)| format!("{}={}", shown(k), shown(v)))
            .collect();
        out.push_str(&wrap(
            &format!("env: {}", env.join(" ")),
            width,
            "#  ",
            "#    ",
        ));
    }
    let _ = writeln!(
        out,
        "#{:>12} {:>12} {:>6} {:>6} {:>11} {:>8} {:>8} {:>7}",
        "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong"
    );
    let units = format!(
        "#{:>12} {:>12} {:>6} {:>6} {:>11} {:>8} {:>8}",
        "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)"
    );
    let _ = writeln!(out, "{}", units.trim_end());
    for r in &c.rows {
        let _ = writeln!(
            out,
            " {:>12} {:>12} {:>6} {:>6} {:>11.1} {:>8} {:>8} {:>7}",
            r.bytes,
            r.bytes / 4,
            "float",
            "sum",
            r.time_us,
            bw(r.algbw_gb_s),
            bw(r.busbw_gb_s),
            r.wrong
        );
    }
    if let Some(big) = large_row(c) {
        let _ = writeln!(
            out,
            "# Bus bandwidth at {}: {} GB/s",
            human_bytes(big.bytes),
            bw(big.busbw_gb_s)
        );
    }
    if let Some(e) = &c.error {
        let _ = writeln!(
            out,
            "# Could not finish: {}",
            crate::render::sanitize::line(e)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::CollectiveRow;

    #[test]
    fn block_reads_like_nccl_tests() {
        let c = CollectiveResult {
            op: "allreduce".into(),
            transport: "tcp".into(),
            ranks: 4,
            network: Some("10.200.1.0/24 (eth0)".into()),
            streams: Some(4),
            rows: vec![CollectiveRow {
                bytes: 1 << 20,
                time_us: 1000.0,
                algbw_gb_s: 1.049,
                busbw_gb_s: 1.573,
                wrong: 0,
            }],
            ..Default::default()
        };
        let text = block(
            &c,
            Style {
                width: 120,
                ..Style::plain()
            },
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "All-reduce: TCP ring over 10.200.1.0/24 (eth0), 4 nodes, 4 connections per neighbour"
        );
        assert!(
            lines[1].contains("size") && lines[1].contains("busbw") && lines[1].contains("#wrong")
        );
        let row: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            row,
            [
                "1048576", "262144", "float", "sum", "1000.0", "1.05", "1.57", "0"
            ]
        );
        assert_eq!(lines[4], "# Bus bandwidth at 1M: 1.57 GB/s");
        assert!(
            text.lines().all(|l| l == l.trim_end()),
            "no trailing spaces:\n{text}"
        );
    }
}
