//! A broken pair read as one problem: the two `link.unreachable` findings of a pair that fails
//! both ways (3 -> 9 and 9 -> 3) are shown as one entry naming both directions, with one fix.
//!
//! The report keeps both findings (JSON, SARIF and the exit code are unchanged); only what a
//! person reads in the terminal folds them, so one cable does not read as two faults with the
//! same fix written twice.

use super::where_;
use preflight_checks::model::{Finding, Report};
use serde_json::Value;

use preflight_checks::link::ids::UNREACHABLE as ID;

/// One direction of a pair: the only failed source of a destination's finding.
struct OneWay<'a> {
    index: usize,
    from: u32,
    to: u32,
    network: &'a str,
    interface: &'a str,
    at: String,
    result: &'a str,
}

fn one_way(index: usize, f: &Finding) -> Option<OneWay<'_>> {
    if f.id != ID {
        return None;
    }
    let ev = &f.evidence;
    let sources = ev.get("sources")?.as_array()?;
    let not_measured = ev.get("not_measured").and_then(Value::as_array);
    if sources.len() != 1 || not_measured.is_some_and(|n| !n.is_empty()) {
        return None;
    }
    let source = &sources[0];
    let from = u32::try_from(source.get("from")?.as_u64()?).ok()?;
    let to = u32::try_from(ev.get("to")?.as_u64()?).ok()?;
    let address = ev.get("address")?.as_str()?;
    let at = match source.get("port").and_then(Value::as_u64) {
        Some(p) if p != 0 && address.contains(':') => format!("[{address}]:{p}"),
        Some(p) if p != 0 => format!("{address}:{p}"),
        _ => address.to_string(),
    };
    Some(OneWay {
        index,
        from,
        to,
        network: ev.get("network")?.as_str()?,
        interface: ev.get("interface")?.as_str()?,
        at,
        result: source.get("result")?.as_str()?,
    })
}

/// The report with each pair broken both ways folded into one finding, or `None` when it has
/// no such pair (the report is then shown as it is).
pub fn folded(report: &Report) -> Option<Report> {
    let ways: Vec<OneWay> = report
        .findings
        .iter()
        .enumerate()
        .filter_map(|(i, f)| one_way(i, f))
        .collect();
    let mut partner: Vec<(usize, usize)> = Vec::new();
    for (k, a) in ways.iter().enumerate() {
        let back = ways[k + 1..].iter().find(|b| {
            b.from == a.to
                && b.to == a.from
                && b.network == a.network
                && report.findings[b.index].status == report.findings[a.index].status
        });
        if let Some(b) = back {
            let taken = |i: usize| partner.iter().any(|(x, y)| *x == i || *y == i);
            if !taken(a.index) && !taken(b.index) {
                partner.push((a.index, b.index));
            }
        }
    }
    if partner.is_empty() {
        return None;
    }
    let mut out = report.clone();
    let mut drop = vec![false; report.findings.len()];
    for (a, b) in partner {
        let (Some(x), Some(y)) = (
            one_way(a, &report.findings[a]),
            one_way(b, &report.findings[b]),
        ) else {
            continue;
        };
        out.findings[a] = both_ways(report, &report.findings[a], &x, &y);
        drop[b] = true;
    }
    let mut i = 0;
    out.findings.retain(|_| {
        let keep = !drop[i];
        i += 1;
        keep
    });
    Some(out)
}

/// The one entry of a pair: both directions with their results, the first direction's cause
/// and its fix, and how to check the other direction.
fn both_ways(report: &Report, first: &Finding, x: &OneWay, y: &OneWay) -> Finding {
    let (a, b) = (where_(report, Some(x.to)), where_(report, Some(x.from)));
    let results = if x.result == y.result {
        format!("{} both ways", x.result)
    } else {
        format!(
            "{} from {} to {}, {} back",
            x.result, x.from, x.to, y.result
        )
    };
    // The cause as the checks worded it for the first direction ("...: connections time out:
    // ..."), after the part that names the direction.
    let cause = first
        .summary
        .split_once("): ")
        .map(|(_, c)| format!(": {c}"))
        .unwrap_or_default();
    let summary = format!(
        "{a} and {b} cannot connect to each other on {} ({results}; {} from {a}, {} from {b}){cause}",
        x.interface, y.at, x.at
    );
    let mut f = Finding {
        id: first.id.clone(),
        status: first.status,
        node: first.node,
        subject: format!(
            "{}<->{} {}",
            x.from.min(x.to),
            x.from.max(x.to),
            x.interface
        ),
        summary,
        // Each direction has its own evidence: --format json has both, whole.
        evidence: Default::default(),
        fix: first.fix.clone(),
        action: first.action,
        problem: first.problem,
    };
    if let Some(fix) = f.fix.as_mut() {
        fix.hint
            .push_str("\nThe same steps with the two nodes swapped test the other direction.");
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Fix, Mode, Status};
    use serde_json::json;

    fn way(from: u32, to: u32, result: &str) -> Finding {
        let mut f = Finding::new(
            ID,
            Status::Fail,
            format!("{from}->{to} eth0"),
            format!("rank {from} cannot connect to rank {to} at 10.0.0.{to}:4000{to} on eth0 ({result}): connections time out: a firewall drops them"),
        )
        .on_node(Some(to))
        .with("network", "10.0.0.0/24")
        .with("to", to)
        .with("interface", "eth0")
        .with("address", format!("10.0.0.{to}"))
        .with("sources", json!([{"from": from, "result": result, "port": 40000 + to}]))
        .with("not_measured", json!([]));
        f.fix =
            Some(Fix::new(format!("test {from} to {to}")).command(format!("nc -l -k 4000{to}")));
        f
    }

    fn report(findings: Vec<Finding>) -> Report {
        let mut r = crate::report::ReportBuilder::new(Mode::Cluster).build();
        r.findings = findings;
        r
    }

    #[test]
    fn a_pair_failing_both_ways_is_one_finding_with_one_fix() {
        let r = report(vec![
            way(3, 9, "timeout"),
            way(9, 3, "timeout"),
            way(1, 2, "refused"),
        ]);
        let f = folded(&r).expect("a pair to fold");
        assert_eq!(f.findings.len(), 2);
        let pair = &f.findings[0];
        assert_eq!(pair.subject, "3<->9 eth0");
        assert!(pair.summary.contains("cannot connect to each other on eth0 (timeout both ways; 10.0.0.3:40003 from rank 9, 10.0.0.9:40009 from rank 3): connections time out"), "{}", pair.summary);
        let fix = pair.fix.as_ref().unwrap();
        assert_eq!(fix.commands, vec!["nc -l -k 40009"]);
        assert!(
            fix.hint.contains("with the two nodes swapped"),
            "{}",
            fix.hint
        );
        assert_eq!(f.findings[1].subject, "1->2 eth0");
    }

    #[test]
    fn one_way_failures_and_other_networks_are_left_alone() {
        let mut other = way(9, 3, "timeout");
        other
            .evidence
            .insert("network".into(), json!("10.1.0.0/24"));
        assert!(folded(&report(vec![way(3, 9, "timeout"), other])).is_none());
        assert!(folded(&report(vec![way(3, 9, "timeout"), way(3, 8, "timeout")])).is_none());
        let mut many = way(9, 3, "timeout");
        many.evidence.insert(
            "sources".into(),
            json!([{"from": 9, "result": "timeout"}, {"from": 8, "result": "timeout"}]),
        );
        assert!(folded(&report(vec![way(3, 9, "timeout"), many])).is_none());
    }
}
