//! `env.socket-ifname` across the cluster: a user's `NCCL_SOCKET_IFNAME` that selects a slower network than the best measured one.

use crate::core::ClusterInput;
use crate::core::NetworkEval;
use crate::core::{Finding, Fix, Status};
use crate::net::ifname::IfnameSpec;
use std::collections::BTreeMap;

const VAR: &str = "NCCL_SOCKET_IFNAME";
/// Slower means below the chosen network's throughput by more than this factor.
const SLOWER: f64 = 1.2;

/// The best-ranked fully connected network whose every member interface the node's own
/// `NCCL_SOCKET_IFNAME` selects.
fn selected<'a>(
    input: &'a ClusterInput,
    specs: &BTreeMap<u32, IfnameSpec>,
) -> Option<&'a NetworkEval> {
    input.evals.iter().filter(|e| e.fully_connected).find(|e| {
        e.network
            .members
            .iter()
            .all(|(r, m)| specs.get(r).is_some_and(|s| s.matches(&m.interface)))
    })
}

/// A warning when every node sets `NCCL_SOCKET_IFNAME` and the network it selects measured
/// slower than the chosen one; nothing otherwise (the node checks judge the value itself).
pub(crate) fn slower_ifname(input: &ClusterInput) -> Option<Finding> {
    let chosen = input.chosen?;
    let specs: BTreeMap<u32, IfnameSpec> = input
        .nodes
        .iter()
        .filter_map(|(r, f)| f.env.get(VAR).map(|v| (*r, IfnameSpec::parse(v))))
        .collect();
    if specs.len() != input.nodes.len() || specs.values().any(|s| s.ignored) {
        return None;
    }
    let user = selected(input, &specs)?;
    if user.network.id == chosen.network.id {
        return None;
    }
    let (Some(theirs), Some(best)) = (user.min_throughput_gbit_s, chosen.min_throughput_gbit_s)
    else {
        return None;
    };
    if best <= theirs * SLOWER {
        return None;
    }
    let values: Vec<&str> = {
        let mut v: Vec<&str> = specs.values().map(|s| s.raw.as_str()).collect();
        v.dedup();
        v
    };
    let advice = chosen
        .common_name()
        .map(str::to_string)
        .unwrap_or_else(|| "the per-node value in the report's node_env".to_string());
    Some(
        Finding::new(
            crate::env::ids::SOCKET_IFNAME,
            Status::Warn,
            format!("{VAR}={}", values.join(" / ")),
            format!(
                "{VAR}={} selects {} ({theirs:.2} Gbit/s measured, slowest pair), but {} measured {best:.2} Gbit/s: the job would run {:.1}x slower than it can",
                values.join(" / "),
                user.network.id,
                chosen.network.id,
                best / theirs.max(f64::MIN_POSITIVE)
            ),
        )
        .with("variable", VAR)
        .with("values", &values)
        .with("selected_network", &user.network.id)
        .with("selected_gbit_s", theirs)
        .with("best_network", &chosen.network.id)
        .with("best_gbit_s", best)
        .fix(
            Fix::new(format!(
                "Set {VAR} to {advice} on every node (see the recommended environment), or unset it"
            ))
            .command(match chosen.common_name() {
                Some(n) => format!("export {VAR}={n}"),
                None => format!("unset {VAR}"),
            }),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    fn with_fast_eth1(ifname: Option<&str>) -> Cluster {
        let mut c = Cluster::healthy(2);
        c.add_fast_eth1();
        if let Some(v) = ifname {
            for f in &mut c.facts {
                f.env.insert(VAR.into(), v.into());
            }
        }
        c.add_eth1_link(0, 1, 80.0);
        c.add_eth1_link(1, 0, 85.0);
        c
    }

    fn ifname_warnings(c: &Cluster) -> Vec<Finding> {
        c.findings()
            .into_iter()
            .filter(|f| f.id == crate::env::ids::SOCKET_IFNAME && f.status == Status::Warn)
            .collect()
    }

    #[test]
    fn a_user_value_on_the_slower_network_warns_with_both_numbers() {
        let c = with_fast_eth1(Some("eno1"));
        let w = ifname_warnings(&c);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].summary.contains("9.00 Gbit/s"), "{}", w[0].summary);
        assert!(w[0].summary.contains("80.00 Gbit/s"), "{}", w[0].summary);
        assert_eq!(commands(&w[0]), vec!["export NCCL_SOCKET_IFNAME=eth1"]);
    }

    #[test]
    fn the_best_network_or_no_value_does_not_warn() {
        assert!(ifname_warnings(&with_fast_eth1(Some("eth1"))).is_empty());
        assert!(ifname_warnings(&with_fast_eth1(None)).is_empty());
    }
}
