//! All-reduce bus bandwidth against message size: an inline SVG line chart (log2 x axis), one
//! series per measured all-reduce, one point per size; the numbers again in a table below.

use super::escape::text;
use preflight_checks::model::{CollectiveResult, Report};
use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 340.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 44.0;
const COLOURS: [&str; 6] = [
    "#2563eb", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2",
];

/// The section, or nothing when the report has no collectives.
pub fn section(report: &Report) -> String {
    let colls: Vec<&CollectiveResult> = report.collectives.iter().collect();
    if colls.is_empty() {
        return String::new();
    }
    let mut out = String::from("<section id=\"allreduce\"><h2>All-reduce bus bandwidth</h2>\n");
    out.push_str(&svg(&colls));
    out.push_str("<ul class=\"series-legend\">\n");
    for (i, c) in colls.iter().enumerate() {
        let _ = writeln!(
            out,
            "<li><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
            COLOURS[i % COLOURS.len()],
            label(c)
        );
        if let Some(e) = &c.error {
            let _ = writeln!(out, "<li class=\"error\">error: {}</li>", text(e));
        }
    }
    out.push_str("</ul>\n");
    out.push_str(&numbers(&colls));
    out.push_str("</section>\n");
    out
}

/// "tcp, advice, 3 ranks on eth0, NCCL_IB_DISABLE=1", escaped.
fn label(c: &CollectiveResult) -> String {
    let mut s = format!("{} {}", text(&c.op), text(&c.transport));
    if !c.config.is_empty() {
        let _ = write!(s, " ({})", text(&c.config));
    }
    let _ = write!(s, ", {} ranks", c.ranks);
    if let Some(n) = c.network.as_ref().or(c.net.as_ref()) {
        let _ = write!(s, " on {}", text(n));
    }
    for (k, v) in &c.env {
        let _ = write!(s, ", {}={}", text(k), text(v));
    }
    s
}

/// Bytes as nccl-tests prints sizes: 1K, 4M, 1G (powers of 1024), else bytes.
pub fn size(bytes: u64) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

fn finite(v: f64) -> f64 {
    if v.is_finite() { v.max(0.0) } else { 0.0 }
}

fn svg(colls: &[&CollectiveResult]) -> String {
    let rows = || colls.iter().flat_map(|c| c.rows.iter());
    let log = |b: u64| (b.max(1) as f64).log2();
    let (mut x0, mut x1) = rows().fold((f64::MAX, f64::MIN), |(a, b), r| {
        (a.min(log(r.bytes)), b.max(log(r.bytes)))
    });
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1.0 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    let ymax = nice_max(rows().map(|r| finite(r.busbw_gb_s)).fold(0.0, f64::max));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |b: u64| LEFT + (log(b) - x0) / (x1 - x0) * pw;
    let py = |v: f64| TOP + ph - finite(v) / ymax * ph;
    let mut s = format!(
        "<svg id=\"busbw-chart\" role=\"img\" aria-label=\"all-reduce bus bandwidth (GB/s) against message size\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" xmlns=\"http://www.w3.org/2000/svg\">\n"
    );
    // Axes and grid: five y ticks, an x tick per measured size (every other when crowded).
    for i in 0..=4 {
        let v = ymax * f64::from(i) / 4.0;
        let y = py(v);
        let _ = writeln!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            trim_number(v)
        );
    }
    let mut sizes: Vec<u64> = rows().map(|r| r.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let step = sizes.len().div_ceil(10).max(1);
    for b in sizes.iter().step_by(step) {
        let x = px(*b);
        let _ = writeln!(
            s,
            "<line class=\"tickmark\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            TOP + ph,
            TOP + ph + 5.0,
            TOP + ph + 18.0,
            size(*b)
        );
    }
    let _ = writeln!(
        s,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{:.1}\"/><line class=\"axis\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
        TOP + ph,
        W - RIGHT,
        TOP + ph,
        TOP + ph
    );
    let _ = writeln!(
        s,
        "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">message size (bytes, log2 scale)</text><text class=\"label\" transform=\"rotate(-90)\" x=\"{:.1}\" y=\"14\" text-anchor=\"middle\">bus bandwidth (GB/s)</text>",
        LEFT + pw / 2.0,
        H - 6.0,
        -(TOP + ph / 2.0)
    );
    for (i, c) in colls.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            s,
            "<g class=\"series\" data-index=\"{i}\" data-transport=\"{}\" data-config=\"{}\" data-points=\"{}\">",
            text(&c.transport),
            text(&c.config),
            c.rows.len()
        );
        let mut rows: Vec<_> = c.rows.iter().collect();
        rows.sort_by_key(|r| r.bytes);
        let points: Vec<String> = rows
            .iter()
            .map(|r| format!("{:.1},{:.1}", px(r.bytes), py(r.busbw_gb_s)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        for r in rows {
            let wrong = if r.wrong > 0 { " wrong" } else { "" };
            let _ = writeln!(
                s,
                "<circle class=\"pt{wrong}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\" data-bytes=\"{}\" data-busbw=\"{}\"><title>{}: bus {:.2} GB/s, alg {:.2} GB/s, {:.0} µs{}</title></circle>",
                px(r.bytes),
                py(r.busbw_gb_s),
                r.bytes,
                finite(r.busbw_gb_s),
                size(r.bytes),
                finite(r.busbw_gb_s),
                finite(r.algbw_gb_s),
                finite(r.time_us),
                if r.wrong > 0 {
                    format!(", {} wrong values", r.wrong)
                } else {
                    String::new()
                }
            );
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten at or above `v` (1 when `v` is 0).
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The rows as a table, for reading the exact values.
fn numbers(colls: &[&CollectiveResult]) -> String {
    let mut out = String::from(
        "<details><summary>Numbers</summary><table class=\"numbers\"><thead><tr><th>series</th><th>size</th><th>time (µs)</th><th>algbw (GB/s)</th><th>busbw (GB/s)</th><th>wrong</th></tr></thead><tbody>\n",
    );
    for (i, c) in colls.iter().enumerate() {
        for r in &c.rows {
            let _ = writeln!(
                out,
                "<tr><td>{} {}</td><td>{}</td><td>{:.1}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td></tr>",
                i + 1,
                text(&c.transport),
                size(r.bytes),
                finite(r.time_us),
                finite(r.algbw_gb_s),
                finite(r.busbw_gb_s),
                r.wrong
            );
        }
    }
    out.push_str("</tbody></table></details>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_nccl_tests_prints_them() {
        assert_eq!(size(1 << 20), "1M");
        assert_eq!(size(256 << 20), "256M");
        assert_eq!(size(1 << 30), "1G");
        assert_eq!(size(1000), "1000B");
    }

    #[test]
    fn the_y_axis_ends_at_a_round_number() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.7), 5.0);
        assert_eq!(nice_max(11.0), 20.0);
        assert_eq!(nice_max(0.21), 0.25);
    }
}
