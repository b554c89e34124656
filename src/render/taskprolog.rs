//! `--format task-prolog`: the recommended environment as Slurm TaskProlog lines
//! (`export NAME=value`), which slurmstepd applies to every task of the step.
//!
//! Slurm reads each line literally (no shell quoting), so a value is printed only when it is
//! plain (letters, digits and `_ . , : ^ = + / @ % -`); a variable whose deciding check could
//! not judge (an `error` finding in its area, or no interface chosen) is left out, never
//! exported half-made.

use preflight_checks::model::{Report, Status};
use std::collections::BTreeMap;

/// The `export` lines for node `rank` (its own `node_env` values win); empty when nothing is
/// decided. A variable the user set is kept when it works here; one that does not is replaced,
/// and a `print` line (which slurmstepd writes into the task's output) says so and why. A master
/// port another running job holds is said the same way.
pub fn render(report: &Report, rank: u32) -> String {
    let mut out = String::new();
    let empty = BTreeMap::new();
    let users = report
        .nodes
        .iter()
        .find(|n| n.rank == rank)
        .map_or(&empty, |n| &n.facts.env);
    for (k, v) in decided(report, rank) {
        match (users.get(&k), broken(report, &k)) {
            (Some(mine), _) if *mine == v => {}
            (Some(_), None) => continue,
            (Some(mine), Some(why)) => out.push_str(&format!(
                "print preflight: your {k}={} does not work on this node ({}): this task gets {k}={v}\n",
                print_safe(mine),
                print_safe(&why)
            )),
            (None, _) => {}
        }
        out.push_str(&format!("export {k}={v}\n"));
    }
    if let Some(f) = held_by_another_job(report) {
        // The job's reason, without the node's standing clause (a job's problem, not the node's).
        let clause = f.evidence.get("standing").and_then(|c| c.as_str());
        let summary = clause
            .and_then(|c| f.summary.strip_suffix(c))
            .and_then(|s| s.strip_suffix("; "))
            .unwrap_or(&f.summary);
        out.push_str(&format!("print preflight: {}\n", print_safe(summary)));
    }
    out
}

/// The first clause of a non-pass `env.*` finding about `var` (the user's value does not work
/// here), if there is one.
fn broken(report: &Report, var: &str) -> Option<String> {
    report
        .findings
        .iter()
        .find(|f| {
            f.id.starts_with("env.")
                && f.subject == var
                && matches!(f.status, Status::Warn | Status::Fail | Status::Error)
        })
        .map(|f| f.summary.split("; ").next().unwrap_or_default().to_string())
}

/// The `port.in-use` failure of a port another running Slurm job holds (the user's problem).
pub fn held_by_another_job(report: &Report) -> Option<&preflight_checks::model::Finding> {
    report.findings.iter().find(|f| {
        f.is(preflight_checks::ports::ids::IN_USE)
            && f.status == Status::Fail
            && f.evidence.get("owner").and_then(|o| o.as_str()) == Some("running-job")
    })
}

/// Whether a TaskProlog must fail its task: the job exported `MASTER_PORT`, and another running
/// job holds that very port, so its rendezvous cannot bind (the task's output says which job
/// and which port is free). Anything else only advises: the task runs.
pub fn fails_task(report: &Report) -> bool {
    let Some(f) = held_by_another_job(report) else {
        return false;
    };
    let port = f.evidence.get("port").and_then(|p| p.as_u64());
    report
        .nodes
        .first()
        .and_then(|n| n.facts.env.get("MASTER_PORT"))
        .and_then(|p| p.trim().parse::<u64>().ok())
        .is_some_and(|p| Some(p) == port)
}

/// A value or text on one `print` line: control characters dropped, at most 400 characters.
fn print_safe(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(400).collect()
}

/// The variables to export, after every rule of the module comment.
pub fn decided(report: &Report, rank: u32) -> BTreeMap<String, String> {
    let Some(rec) = &report.recommendation else {
        return BTreeMap::new();
    };
    let mut env = rec.env.clone();
    if let Some(own) = rec.node_env.get(&rank.to_string()) {
        env.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let undecided = |area: &str| {
        report.findings.iter().any(|f| {
            f.id.split('.').next() == Some(area)
                && (f.status == Status::Error
                    || f.id == preflight_checks::net::ids::NO_INTERFACE && f.status == Status::Fail)
        })
    };
    env.into_iter()
        .filter(|(k, _)| k.starts_with("NCCL_") || k.starts_with("GLOO_"))
        .filter(|(k, _)| {
            let area = if k.contains("_IB_") { "ib" } else { "net" };
            !undecided(area)
        })
        .filter(|(k, v)| plain_name(k) && plain_value(v))
        .collect()
}

fn plain_name(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 128
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn plain_value(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 1024
        && v.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '_' | '.' | ',' | ':' | '^' | '=' | '+' | '/' | '@' | '%' | '-'
                )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Finding, Recommendation};

    fn report(env: &[(&str, &str)], findings: Vec<Finding>) -> Report {
        let mut r = crate::report::ReportBuilder::single(
            preflight_checks::model::Mode::Node,
            0,
            Default::default(),
        )
        .build();
        r.findings = findings;
        r.recommendation = Some(Recommendation {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        });
        r
    }

    #[test]
    fn exports_plain_values_only() {
        let r = report(
            &[
                ("NCCL_SOCKET_IFNAME", "=eth0"),
                ("GLOO_SOCKET_IFNAME", "eth0"),
                ("NCCL_IB_DISABLE", "1"),
                ("NCCL_DEBUG", "INFO; rm -rf /"),
                ("PATH", "/bin"),
            ],
            vec![],
        );
        assert_eq!(
            render(&r, 0),
            "export GLOO_SOCKET_IFNAME=eth0\nexport NCCL_IB_DISABLE=1\nexport NCCL_SOCKET_IFNAME==eth0\n"
        );
    }

    #[test]
    fn a_users_value_is_kept_when_it_works_and_replaced_with_a_print_line_when_not() {
        let mut r = report(
            &[
                ("NCCL_SOCKET_IFNAME", "eth0"),
                ("GLOO_SOCKET_IFNAME", "eth0"),
            ],
            vec![Finding::new(
                preflight_checks::core::FindingId::new("env.socket-ifname"),
                Status::Fail,
                "NCCL_SOCKET_IFNAME",
                "NCCL_SOCKET_IFNAME=\"nosuch0\" matches no interface on this node; the job fails",
            )],
        );
        r.nodes[0].rank = 0;
        r.nodes[0].facts.env = [
            ("NCCL_SOCKET_IFNAME", "nosuch0"),
            ("GLOO_SOCKET_IFNAME", "bond0"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            render(&r, 0),
            "print preflight: your NCCL_SOCKET_IFNAME=nosuch0 does not work on this node \
             (NCCL_SOCKET_IFNAME=\"nosuch0\" matches no interface on this node): this task gets \
             NCCL_SOCKET_IFNAME=eth0\nexport NCCL_SOCKET_IFNAME=eth0\n"
        );
    }

    #[test]
    fn undecided_areas_export_nothing() {
        let r = report(
            &[("NCCL_IB_DISABLE", "1"), ("NCCL_SOCKET_IFNAME", "eth0")],
            vec![Finding::new(
                preflight_checks::core::FindingId::new("net.no-interface"),
                Status::Fail,
                "",
                "no interface",
            )],
        );
        assert_eq!(render(&r, 0), "export NCCL_IB_DISABLE=1\n");
        let r = report(
            &[("NCCL_IB_DISABLE", "0"), ("NCCL_IB_HCA", "=mlx5_0")],
            vec![Finding::new(
                preflight_checks::core::FindingId::new("ib.port-down"),
                Status::Error,
                "",
                "cannot read",
            )],
        );
        assert_eq!(render(&r, 0), "");
        let mut none = report(&[], vec![]);
        none.recommendation = None;
        assert_eq!(render(&none, 0), "");
    }
}
