//! InfiniBand / RoCE checks: ports that are not ACTIVE (`ib.port-down`), a missing libibverbs (`ib.verbs`),
//! and, across the cluster, IB on some nodes but not on others (`ib.partial`).

pub mod catalog;
pub mod gid_across;
pub mod gid_index;
pub mod ids;
pub mod probe;
pub mod rails;

use crate::core::CheckContext;
use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, rank_map, ranks_phrase};
use crate::core::{Finding, Fix, IbDevice, IbPort, NodeFacts, Status};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::rdma::ids::PORT_DOWN;
pub use crate::rdma::ids::VERBS;

pub fn check(facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    let mut out = check_ports(facts);
    out.push(check_verbs(facts));
    out
}

/// One warning per port that is not ACTIVE; a single pass when all are; skip without devices.
fn check_ports(facts: &NodeFacts) -> Vec<Finding> {
    let ib = &facts.ib;
    if ib.devices.is_empty() {
        return vec![match &ib.error {
            Some(e) => Finding::new(
                PORT_DOWN,
                Status::Error,
                "infiniband",
                format!("cannot list RDMA devices: {e}"),
            )
            .with("error", e),
            None => Finding::new(
                PORT_DOWN,
                Status::Skip,
                "infiniband",
                "no InfiniBand/RoCE devices in /sys/class/infiniband",
            ),
        }];
    }
    let mut out = Vec::new();
    for dev in &ib.devices {
        if dev.ports.is_empty() {
            out.push(device_without_ports(dev));
        }
        for port in dev.ports.iter().filter(|p| !p.is_active()) {
            out.push(port_down(dev, port));
        }
    }
    if out.is_empty() {
        out.push(all_ports_active(&ib.devices));
    }
    out
}

fn subject(dev: &IbDevice, port: &IbPort) -> String {
    format!("{}/{}", dev.name, port.port)
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

fn is_infiniband(port: &IbPort) -> bool {
    port.link_layer.eq_ignore_ascii_case("InfiniBand")
}

fn port_down(dev: &IbDevice, port: &IbPort) -> Finding {
    let subj = subject(dev, port);
    let summary = format!(
        "{subj} is {} (physical {}, {} link layer{}): NCCL cannot use it, and jobs that expect it hang or fail in init",
        or_unknown(&port.state),
        or_unknown(&port.phys_state),
        or_unknown(&port.link_layer),
        port.netdev
            .as_deref()
            .map(|n| format!(", netdev {n}"))
            .unwrap_or_default(),
    );
    Finding::new(PORT_DOWN, Status::Warn, subj, summary)
        .with("device", &dev.name)
        .with("port", port.port)
        .with("state", &port.state)
        .with("phys_state", &port.phys_state)
        .with("rate", &port.rate)
        .with("link_layer", &port.link_layer)
        .with("netdev", &port.netdev)
        .fix(port_fix(dev, port))
}

/// What to run depends on where the link stops: physical layer, subnet manager, or admin-down netdev.
fn port_fix(dev: &IbDevice, port: &IbPort) -> Fix {
    let link_up = port.phys_state.eq_ignore_ascii_case("LinkUp");
    let waiting_for_sm = is_infiniband(port)
        && link_up
        && (port.state.eq_ignore_ascii_case("INIT") || port.state.eq_ignore_ascii_case("ARMED"));
    let hint = if waiting_for_sm {
        "The link is up but no subnet manager has activated the port: check that an SM runs on the fabric (sminfo), or start opensm on one node."
    } else if is_infiniband(port) {
        "Check the port, its cable and switch, and that a subnet manager is reachable; bring the IPoIB interface up. If this port is not meant to be used, exclude it with NCCL_IB_HCA."
    } else {
        "Check the port's Ethernet link (cable, switch port) and bring its net device up. If this port is not meant to be used, exclude it with NCCL_IB_HCA."
    };
    let mut fix = Fix::new(hint).command(format!("ibstat {}", dev.name));
    if let Some(n) = &port.netdev {
        fix = fix.command(format!("ip link set {n} up"));
        if !is_infiniband(port) {
            fix = fix.command(format!("ethtool {n}"));
        }
    }
    if is_infiniband(port) {
        fix = fix.command("sminfo");
        if waiting_for_sm {
            fix = fix.command("systemctl start opensm");
        }
    }
    fix
}

fn device_without_ports(dev: &IbDevice) -> Finding {
    Finding::new(
        PORT_DOWN,
        Status::Warn,
        dev.name.clone(),
        format!(
            "{} lists no ports in /sys/class/infiniband/{}/ports, so it has no ACTIVE port",
            dev.name, dev.name
        ),
    )
    .with("device", &dev.name)
    .with("hca_type", &dev.hca_type)
    .with("fw_ver", &dev.fw_ver)
    .fix(
        Fix::new("Check the adapter and its driver (mlx5_ib / ib_core loaded, firmware healthy).")
            .command(format!("ibstat {}", dev.name))
            .command("lsmod | grep -E 'mlx5_ib|ib_core'"),
    )
}

fn all_ports_active(devices: &[IbDevice]) -> Finding {
    let ports: Vec<String> = devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| subject(d, p)))
        .collect();
    let rates: Vec<String> = devices
        .iter()
        .flat_map(|d| {
            d.ports.iter().map(move |p| {
                format!(
                    "{} {} {}",
                    subject(d, p),
                    or_unknown(&p.link_layer),
                    p.rate.as_deref().unwrap_or("rate unknown")
                )
            })
        })
        .collect();
    Finding::new(
        PORT_DOWN,
        Status::Pass,
        ports.join(","),
        format!(
            "all {} RDMA port(s) are ACTIVE: {}",
            ports.len(),
            rates.join("; ")
        ),
    )
    .with("ports", &ports)
}

/// NCCL's IB transport dlopens libibverbs; without it NCCL falls back to sockets.
fn check_verbs(facts: &NodeFacts) -> Finding {
    let ib = &facts.ib;
    if ib.devices.is_empty() {
        return Finding::new(
            VERBS,
            Status::Skip,
            "libibverbs",
            "no InfiniBand/RoCE devices, libibverbs not needed",
        );
    }
    let names: Vec<&str> = ib.devices.iter().map(|d| d.name.as_str()).collect();
    match &ib.verbs_library {
        Some(path) => Finding::new(
            VERBS,
            Status::Pass,
            "libibverbs",
            format!(
                "libibverbs is installed ({path}) for {}",
                names.join(", ")
            ),
        )
        .with("library", path)
        .with("devices", &names),
        None => Finding::new(
            VERBS,
            Status::Warn,
            "libibverbs",
            format!(
                "RDMA devices {} exist but libibverbs.so.1 is not installed: NCCL cannot use InfiniBand/RoCE without it and falls back to TCP sockets",
                names.join(", ")
            ),
        )
        .with("library", Option::<String>::None)
        .with("devices", &names)
        .fix(
            Fix::new("Install the verbs library and the provider for your adapter (rdma-core); use the command for your distribution.")
                .command("apt-get install -y libibverbs1 ibverbs-providers")
                .command("dnf install -y rdma-core libibverbs"),
        ),
    }
}

fn active_ports(f: &NodeFacts) -> Vec<String> {
    f.ib.active_ports()
        .into_iter()
        .map(|(d, p)| format!("{d}/{p}"))
        .collect()
}

/// `ib.partial`: InfiniBand/RoCE ACTIVE on some nodes but not on others (NCCL may try IB and hang).
pub(crate) fn check_partial(input: &ClusterInput) -> Finding {
    let per_rank: BTreeMap<u32, Vec<String>> = input
        .nodes
        .iter()
        .map(|(r, f)| (*r, active_ports(f)))
        .collect();
    let with: Vec<u32> = per_rank
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(r, _)| *r)
        .collect();
    let without: Vec<u32> = per_rank
        .iter()
        .filter(|(_, p)| p.is_empty())
        .map(|(r, _)| *r)
        .collect();
    let base = |status, summary: String| {
        Finding::new(
            crate::rdma::ids::PARTIAL,
            status,
            "InfiniBand/RoCE",
            summary,
        )
        .with("active_ports", rank_map(&per_rank))
        .with("with_ib", &with)
        .with("without_ib", &without)
    };
    if with.is_empty() {
        return base(
            Status::Skip,
            "no node has an ACTIVE InfiniBand/RoCE port".into(),
        );
    }
    if without.is_empty() {
        return base(
            Status::Pass,
            format!(
                "every node ({}) has an ACTIVE InfiniBand/RoCE port",
                with.len()
            ),
        );
    }
    let down_devices: Vec<String> = without
        .iter()
        .filter_map(|r| input.facts(*r))
        .flat_map(|f| f.ib.devices.iter().map(|d| d.name.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let without_text: Vec<String> = without
        .iter()
        .take(LIST_CAP)
        .map(|r| input.who(*r))
        .collect();
    let mut fix = Fix::new(format!(
        "NCCL needs InfiniBand on every node or none: run this job with NCCL_IB_DISABLE=1 (TCP sockets), or bring up an IB/RoCE port on {}{}",
        ranks_phrase(&without),
        if down_devices.is_empty() {
            String::new()
        } else {
            format!(" (their devices: {})", down_devices.join(", "))
        }
    ))
    .command("export NCCL_IB_DISABLE=1");
    fix = fix.command("ibstat   # on the nodes without an ACTIVE port");
    base(
        Status::Warn,
        format!(
            "InfiniBand/RoCE is ACTIVE on {} but not on {}: NCCL may try IB and hang",
            ranks_phrase(&with),
            without_text.join(", ")
        ),
    )
    .fix(fix)
}

/// The RDMA node checks: ports and verbs, then the rails judged from sysfs.
pub fn check_node(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let mut out = check(facts, ctx);
    out.extend(rails::node::check(facts));
    out
}

/// The RDMA cluster checks: InfiniBand on some nodes only, the rails across nodes, GID indexes
/// that differ.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = vec![check_partial(input)];
    out.extend(rails::across::check_cluster(input));
    out.extend(gid_across::check_cluster(input));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::IbFacts;
    use crate::infra::root::Root;

    fn fixture_facts(node: &str) -> NodeFacts {
        let root = Root::at(format!(
            "{}/../tests/fixtures/{node}",
            env!("CARGO_MANIFEST_DIR")
        ));
        NodeFacts {
            ib: crate::rdma::probe::ib::probe(&root),
            ..Default::default()
        }
    }

    fn by_id(out: &[Finding], id: crate::core::FindingId) -> Vec<&Finding> {
        out.iter().filter(|f| f.id == id).collect()
    }

    fn port(n: u32, state: &str, phys: &str, ll: &str, netdev: Option<&str>) -> IbPort {
        IbPort {
            port: n,
            state: state.into(),
            phys_state: phys.into(),
            rate: Some("200 Gb/sec (4X HDR)".into()),
            rate_gbps: Some(200.0),
            link_layer: ll.into(),
            netdev: netdev.map(String::from),
            ..Default::default()
        }
    }

    fn facts_with(devices: Vec<IbDevice>, verbs: Option<&str>) -> NodeFacts {
        NodeFacts {
            ib: IbFacts {
                devices,
                verbs_library: verbs.map(String::from),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn ib_node_warns_for_the_down_port_only() {
        let out = check(&fixture_facts("ib-node"), &CheckContext::default());
        let down = by_id(&out, PORT_DOWN);
        assert_eq!(down.len(), 1);
        let f = down[0];
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.subject, "mlx5_1/1");
        assert_eq!(f.evidence["state"], "DOWN");
        assert_eq!(f.evidence["phys_state"], "Disabled");
        assert_eq!(f.evidence["netdev"], "ib1");
        assert_eq!(f.evidence["rate"], "10 Gb/sec (4X SDR)");
        let cmds = &f.fix.as_ref().unwrap().commands;
        assert!(cmds.contains(&"ibstat mlx5_1".to_string()));
        assert!(cmds.contains(&"ip link set ib1 up".to_string()));
        assert!(cmds.contains(&"sminfo".to_string()));
        assert!(f.summary.contains("mlx5_1/1 is DOWN"));
        let verbs = by_id(&out, VERBS);
        assert_eq!(verbs[0].status, Status::Pass);
    }

    #[test]
    fn roce_node_passes_ports_and_warns_about_missing_verbs() {
        let out = check(&fixture_facts("roce-node"), &CheckContext::default());
        let down = by_id(&out, PORT_DOWN);
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].status, Status::Pass);
        assert_eq!(down[0].subject, "mlx5_0/1");
        assert!(down[0].fix.is_none());
        let v = by_id(&out, VERBS)[0];
        assert_eq!(v.status, Status::Warn);
        assert!(v.summary.contains("mlx5_0"));
        let cmds = &v.fix.as_ref().unwrap().commands;
        assert!(
            cmds.iter()
                .any(|c| c.contains("apt-get install -y libibverbs1 ibverbs-providers"))
        );
        assert!(
            cmds.iter()
                .any(|c| c.starts_with("dnf install -y rdma-core"))
        );
    }

    #[test]
    fn no_devices_skips_both() {
        let out = check(&fixture_facts("plain-vm"), &CheckContext::default());
        assert_eq!(out.len(), 2);
        assert!(
            out.iter()
                .all(|f| f.status == Status::Skip && f.fix.is_none())
        );
    }

    #[test]
    fn probe_error_without_devices_is_an_error() {
        let mut facts = facts_with(vec![], None);
        facts.ib.error = Some("permission denied".into());
        let out = check(&facts, &CheckContext::default());
        assert_eq!(by_id(&out, PORT_DOWN)[0].status, Status::Error);
    }

    #[test]
    fn roce_port_down_fix_targets_ethernet_not_subnet_manager() {
        let dev = IbDevice {
            name: "mlx5_2".into(),
            ports: vec![port(1, "DOWN", "Polling", "Ethernet", Some("ens2f0"))],
            ..Default::default()
        };
        let out = check(
            &facts_with(vec![dev], Some("/usr/lib64/libibverbs.so.1")),
            &CheckContext::default(),
        );
        let f = by_id(&out, PORT_DOWN)[0];
        assert_eq!(f.status, Status::Warn);
        let cmds = &f.fix.as_ref().unwrap().commands;
        assert_eq!(
            cmds,
            &["ibstat mlx5_2", "ip link set ens2f0 up", "ethtool ens2f0"]
        );
    }

    #[test]
    fn init_port_with_link_up_points_at_subnet_manager() {
        let dev = IbDevice {
            name: "mlx5_3".into(),
            ports: vec![
                port(1, "ACTIVE", "LinkUp", "InfiniBand", None),
                port(2, "INIT", "LinkUp", "InfiniBand", None),
            ],
            ..Default::default()
        };
        let out = check(&facts_with(vec![dev], Some("x")), &CheckContext::default());
        let down = by_id(&out, PORT_DOWN);
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].subject, "mlx5_3/2");
        let fix = down[0].fix.as_ref().unwrap();
        assert!(fix.hint.contains("subnet manager"));
        assert!(fix.commands.contains(&"systemctl start opensm".to_string()));
        assert!(!fix.commands.iter().any(|c| c.starts_with("ip link")));
    }

    #[test]
    fn garbage_port_state_warns_as_unknown_without_panicking() {
        let dev = IbDevice {
            name: "mlx5_9".into(),
            ports: vec![port(1, "", "", "", None)],
            ..Default::default()
        };
        let out = check(
            &facts_with(vec![dev.clone()], None),
            &CheckContext::default(),
        );
        let f = by_id(&out, PORT_DOWN)[0];
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("is unknown"));
        let no_ports = IbDevice {
            ports: vec![],
            ..dev
        };
        let out = check(&facts_with(vec![no_ports], None), &CheckContext::default());
        assert_eq!(by_id(&out, PORT_DOWN)[0].status, Status::Warn);
    }
}

#[cfg(test)]
mod cluster_tests {
    use crate::core::{IbDevice, IbPort, NodeFacts, Status};
    use crate::testkit::*;
    use serde_json::json;

    fn with_ib(f: &mut NodeFacts, state: &str) {
        f.ib.devices = vec![IbDevice {
            name: "mlx5_0".into(),
            ports: vec![IbPort {
                port: 1,
                state: state.into(),
                link_layer: "InfiniBand".into(),
                ..Default::default()
            }],
            ..Default::default()
        }];
    }

    #[test]
    fn ib_partial_warns_and_names_the_nodes_without() {
        let mut c = Cluster::healthy(3);
        with_ib(&mut c.facts[0], "ACTIVE");
        with_ib(&mut c.facts[1], "ACTIVE");
        with_ib(&mut c.facts[2], "DOWN");
        let fs = c.findings();
        let f = only(&fs, crate::rdma::ids::PARTIAL);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["without_ib"], json!([2]));
        assert_eq!(f.evidence["active_ports"]["0"], json!(["mlx5_0/1"]));
        assert!(f.summary.contains("rank 2 (node03)"), "{}", f.summary);
        assert!(commands(f).contains(&"export NCCL_IB_DISABLE=1".to_string()));

        with_ib(&mut c.facts[2], "ACTIVE");
        assert_eq!(
            only(&c.findings(), crate::rdma::ids::PARTIAL).status,
            Status::Pass
        );
    }
}
