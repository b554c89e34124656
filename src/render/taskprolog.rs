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
/// decided.
pub fn render(report: &Report, rank: u32) -> String {
    let mut out = String::new();
    for (k, v) in decided(report, rank) {
        out.push_str(&format!("export {k}={v}\n"));
    }
    out
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
