//! System checks: /dev/shm size (`sys.shm`), memlock with RDMA (`sys.memlock`), and a
//! hostname that resolves to loopback (`net.hostname-loopback`).

pub mod catalog;
pub mod ids;
pub mod name_origin;
pub mod nccl_shm_probe;
pub mod probe;
pub mod scale;
pub mod scale_probe;

use crate::core::CheckContext;
use crate::core::{Finding, Fix, NodeFacts, Status};
use crate::infra::format_bytes;
use std::net::IpAddr;

pub use crate::sys::ids::HOSTNAME_LOOPBACK;
pub use crate::sys::ids::MEMLOCK;
pub use crate::sys::ids::SHM;

/// NCCL's shared-memory transport and DataLoader workers need at least this much /dev/shm.
pub const MIN_SHM_BYTES: u64 = 1 << 30;

pub fn check(facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    vec![
        check_shm(facts),
        check_memlock(facts),
        check_hostname(facts),
    ]
}

fn check_shm(facts: &NodeFacts) -> Finding {
    let sys = &facts.sys;
    let Some(bytes) = sys.shm_bytes else {
        let why = sys.shm_error.as_deref().unwrap_or("size not reported");
        return Finding::new(
            SHM,
            Status::Error,
            "/dev/shm",
            format!("cannot tell the size of /dev/shm: {why}"),
        )
        .with("error", why);
    };
    let finding = |status, summary: String| {
        Finding::new(SHM, status, "/dev/shm", summary)
            .with("shm_bytes", bytes)
            .with("min_bytes", MIN_SHM_BYTES)
    };
    if bytes >= MIN_SHM_BYTES {
        return finding(Status::Pass, format!("/dev/shm is {}", format_bytes(bytes)));
    }
    finding(
        Status::Warn,
        format!(
            "/dev/shm is {}, NCCL and DataLoader workers need >= {} (expect 'posix_fallocate failed: No space left on device' or bus errors)",
            format_bytes(bytes),
            format_bytes(MIN_SHM_BYTES)
        ),
    )
    .fix(
        Fix::new(
            "Give /dev/shm more room. Docker: restart the container with --shm-size=16g (or --ipc=host). \
             Kubernetes: add volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}] and volumeMounts: [{name: dshm, mountPath: /dev/shm}] to the pod spec. \
             Bare host: remount the tmpfs larger.",
        )
        .command("docker run --shm-size=16g ...")
        .command("mount -o remount,size=16G /dev/shm"),
    )
}

fn check_memlock(facts: &NodeFacts) -> Finding {
    let sys = &facts.sys;
    let devices: Vec<&str> = facts.ib.devices.iter().map(|d| d.name.as_str()).collect();
    if devices.is_empty() {
        return Finding::new(
            MEMLOCK,
            Status::Skip,
            "memlock",
            "no RDMA devices, the memlock limit does not matter to NCCL here",
        )
        .with("memlock_soft", sys.memlock_soft)
        .with("memlock_hard", sys.memlock_hard);
    }
    if let Some(e) = &sys.memlock_error {
        return Finding::new(
            MEMLOCK,
            Status::Error,
            "memlock",
            format!("cannot read the memlock limit: {e}"),
        )
        .with("error", e);
    }
    let Some(soft) = sys.memlock_soft else {
        return Finding::new(
            MEMLOCK,
            Status::Pass,
            "memlock",
            format!(
                "memlock is unlimited for RDMA devices {}",
                devices.join(", ")
            ),
        )
        .with("memlock_soft", "unlimited")
        .with("devices", &devices);
    };
    let hard = sys
        .memlock_hard
        .map(format_bytes)
        .unwrap_or_else(|| "unlimited".into());
    Finding::new(
        MEMLOCK,
        Status::Warn,
        "memlock",
        format!(
            "memlock limit is {} (hard {hard}) while RDMA devices {} exist: NCCL cannot pin enough memory (ibv_reg_mr failed / 'Cannot allocate memory')",
            format_bytes(soft),
            devices.join(", ")
        ),
    )
    .with("memlock_soft", soft)
    .with("memlock_hard", sys.memlock_hard)
    .with("devices", &devices)
    .fix(
        Fix::new(
            "Make the locked-memory limit unlimited for the job: in the launching shell, permanently in limits.conf (new logins), \
             and for containers with --ulimit memlock=-1:-1. Under systemd services set LimitMEMLOCK=infinity.",
        )
        .command("ulimit -l unlimited")
        .command("echo '* soft memlock unlimited' >> /etc/security/limits.conf")
        .command("echo '* hard memlock unlimited' >> /etc/security/limits.conf")
        .command("docker run --ulimit memlock=-1:-1 ..."),
    )
}

/// 127.0.0.0/8, ::1, and IPv4-mapped loopback (::ffff:127.0.1.1).
fn is_loopback(a: &IpAddr) -> bool {
    a.to_canonical().is_loopback()
}

fn check_hostname(facts: &NodeFacts) -> Finding {
    let sys = &facts.sys;
    let host = facts.hostname.as_str();
    let addrs: Vec<String> = sys.hostname_addrs.iter().map(|a| a.to_string()).collect();
    if sys.hostname_addrs.is_empty() {
        let why = sys.hostname_error.as_deref().unwrap_or("no address");
        let mut fix = Fix::new(
            "Give the hostname an address in /etc/hosts (or DNS) so torchrun's master can advertise it.",
        );
        if let Some(cmd) = add_hosts_line(facts) {
            fix = fix.command(cmd);
        }
        return Finding::new(
            HOSTNAME_LOOPBACK,
            Status::Warn,
            host,
            format!("hostname {host} does not resolve ({why}): torchrun's master cannot advertise a reachable address"),
        )
        .with("hostname", host)
        .with("error", why)
        .fix(fix);
    }
    let loopback: Vec<&IpAddr> = sys
        .hostname_addrs
        .iter()
        .filter(|a| is_loopback(a))
        .collect();
    if loopback.is_empty() {
        return Finding::new(
            HOSTNAME_LOOPBACK,
            Status::Pass,
            host,
            format!("hostname {host} resolves to {}", addrs.join(", ")),
        )
        .with("hostname", host)
        .with("addresses", &addrs);
    }
    let loop_strs: Vec<String> = loopback.iter().map(|a| a.to_string()).collect();
    Finding::new(
        HOSTNAME_LOOPBACK,
        Status::Warn,
        host,
        format!(
            "hostname {host} resolves to loopback {}: torchrun's master then advertises loopback and peers get connection refused",
            loop_strs.join(", ")
        ),
    )
    .with("hostname", host)
    .with("addresses", &addrs)
    .with("loopback", &loop_strs)
    .with("suggested_address", node_address(facts).map(|a| a.to_string()))
    .fix(hosts_fix(facts, &loopback))
}

/// The address the hostname should map to: the first up, non-loopback IPv4,
/// preferring the default-route interface, then physical over virtual ones.
fn node_address(facts: &NodeFacts) -> Option<IpAddr> {
    let candidates: Vec<(&crate::core::Interface, IpAddr)> = facts
        .net
        .interfaces
        .iter()
        .filter(|i| i.up)
        .flat_map(|i| i.ipv4.iter().map(move |a| (i, a.addr)))
        .filter(|(_, a)| crate::net::is_usable_addr(a))
        .collect();
    candidates
        .iter()
        .find(|(i, _)| i.default_route)
        .or_else(|| candidates.iter().find(|(i, _)| !i.is_virtual()))
        .or_else(|| candidates.first())
        .map(|(_, a)| *a)
}

/// Only plain hostnames go into shell commands; anything odd gets a hint only.
fn is_safe_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
}

fn add_hosts_line(facts: &NodeFacts) -> Option<String> {
    let host = facts.hostname.as_str();
    if !is_safe_hostname(host) {
        return None;
    }
    let addr = node_address(facts)
        .map(|a| a.to_string())
        .unwrap_or_else(|| "<this-node-ip>".into());
    Some(format!("echo '{addr} {host}' >> /etc/hosts"))
}

/// Comment out 127.0.1.1-style lines; on 127.0.0.1/::1 lines (shared with
/// localhost) remove only the hostname, and a line left with no name gets `localhost` back;
/// then map the name to the node's address.
fn hosts_fix(facts: &NodeFacts, loopback: &[&IpAddr]) -> Fix {
    let host = facts.hostname.as_str();
    let mut fix = Fix::new(
        "Edit /etc/hosts so the hostname maps to this node's real address, not loopback \
         (in a Kubernetes pod /etc/hosts is managed by the kubelet: fix the pod's hostAliases or set MASTER_ADDR to an IP).",
    );
    if !is_safe_hostname(host) {
        return fix;
    }
    let host_re = host.replace('.', "\\.");
    for a in loopback {
        let a_str = a.to_string();
        let a_re = a_str.replace('.', "\\.");
        let shared = matches!(a_str.as_str(), "127.0.0.1" | "::1");
        fix = fix.command(if shared {
            format!(
                "sed -i -E '/^{a_re}[[:space:]]/{{s/[[:space:]]{host_re}([[:space:]]|$)/\\1/;s/^({a_re})[[:space:]]*$/\\1 localhost/;s/^({a_re})[[:space:]]+#/\\1 localhost #/}}' /etc/hosts"
            )
        } else {
            format!("sed -i 's/^{a_re}\\([[:space:]]\\)/# {a_str}\\1/' /etc/hosts")
        });
    }
    if let Some(cmd) = add_hosts_line(facts) {
        fix = fix.command(cmd);
    }
    fix
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IbDevice, IfAddr, IfKind, Interface, SysFacts};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    use crate::infra::testutil::fixture_root;

    fn fixture_facts(node: &str, host: &str) -> NodeFacts {
        let root = fixture_root(node);
        NodeFacts {
            hostname: host.into(),
            sys: crate::sys::probe::probe(&root, host),
            ib: crate::rdma::probe::ib::probe(&root),
            ..Default::default()
        }
    }

    fn find(out: &[Finding], id: crate::core::FindingId) -> &Finding {
        let all: Vec<_> = out.iter().filter(|f| f.id == id).collect();
        assert_eq!(all.len(), 1, "{id}");
        all[0]
    }

    fn iface(name: &str, kind: IfKind, up: bool, addr: &str, default_route: bool) -> Interface {
        Interface {
            name: name.into(),
            kind,
            up,
            ipv4: vec![IfAddr {
                addr: addr.parse().unwrap(),
                prefix: 24,
            }],
            default_route,
            ..Default::default()
        }
    }

    #[test]
    fn format_bytes_is_exact() {
        assert_eq!(format_bytes(64 * MIB), "64 MiB");
        assert_eq!(format_bytes(GIB), "1 GiB");
        assert_eq!(format_bytes(1536 * MIB), "1536 MiB");
        assert_eq!(format_bytes(65536), "64 KiB");
        assert_eq!(format_bytes(1000), "1000 bytes");
        assert_eq!(format_bytes(0), "0 bytes");
    }

    #[test]
    fn k8s_pod_default_shm_warns_with_exact_size() {
        let out = check(
            &fixture_facts("k8s-pod", "trainer-0"),
            &CheckContext::default(),
        );
        let f = find(&out, SHM);
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary
                .starts_with("/dev/shm is 64 MiB, NCCL and DataLoader workers need >= 1 GiB"),
            "{}",
            f.summary
        );
        assert_eq!(f.evidence["shm_bytes"], 64 * MIB);
        let cmds = &f.fix.as_ref().unwrap().commands;
        assert!(cmds.iter().any(|c| c.contains("--shm-size=16g")));
        assert!(f.fix.as_ref().unwrap().hint.contains("medium: Memory"));
        assert!(cmds.contains(&"mount -o remount,size=16G /dev/shm".to_string()));
    }

    #[test]
    fn large_shm_passes_and_unknown_is_error() {
        let out = check(
            &fixture_facts("ib-node", "gpu-ib-01"),
            &CheckContext::default(),
        );
        let f = find(&out, SHM);
        assert_eq!(
            (f.status, f.summary.as_str()),
            (Status::Pass, "/dev/shm is 64 GiB")
        );
        assert!(f.fix.is_none());
        let facts = NodeFacts {
            sys: SysFacts {
                shm_error: Some("cannot read /proc/mounts".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let f = check_shm(&facts);
        assert_eq!(f.status, Status::Error);
        assert!(f.summary.contains("cannot read /proc/mounts"));
        let edge = NodeFacts {
            sys: SysFacts {
                shm_bytes: Some(GIB),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(check_shm(&edge).status, Status::Pass);
    }

    #[test]
    fn memlock_warns_on_ib_node_with_8_mib() {
        let out = check(
            &fixture_facts("ib-node", "gpu-ib-01"),
            &CheckContext::default(),
        );
        let f = find(&out, MEMLOCK);
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary.contains("memlock limit is 8 MiB (hard 8 MiB)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("mlx5_0, mlx5_1"));
        assert_eq!(f.evidence["memlock_soft"], 8 * MIB);
        let cmds = &f.fix.as_ref().unwrap().commands;
        assert!(cmds.contains(&"ulimit -l unlimited".to_string()));
        assert!(cmds.iter().any(|c| c.contains("* soft memlock unlimited")));
        assert!(cmds.iter().any(|c| c.contains("* hard memlock unlimited")));
        assert!(cmds.iter().any(|c| c.contains("--ulimit memlock=-1:-1")));
    }

    #[test]
    fn memlock_passes_when_unlimited_and_skips_without_rdma() {
        let out = check(
            &fixture_facts("roce-node", "gpu-roce-01"),
            &CheckContext::default(),
        );
        let f = find(&out, MEMLOCK);
        assert_eq!(f.status, Status::Pass);
        assert!(f.fix.is_none());
        // docker-bond-host has a 64 KiB limit but no RDMA device.
        let out = check(
            &fixture_facts("docker-bond-host", "node07"),
            &CheckContext::default(),
        );
        let f = find(&out, MEMLOCK);
        assert_eq!(f.status, Status::Skip);
        assert_eq!(f.evidence["memlock_soft"], 65536);
    }

    #[test]
    fn memlock_unreadable_with_rdma_is_error() {
        let facts = NodeFacts {
            ib: crate::core::IbFacts {
                devices: vec![IbDevice {
                    name: "mlx5_0".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            sys: SysFacts {
                memlock_error: Some("cannot read /proc/self/limits".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(check_memlock(&facts).status, Status::Error);
    }

    fn ib_node_with_interfaces() -> NodeFacts {
        let mut facts = fixture_facts("ib-node", "gpu-ib-01");
        facts.net.interfaces = vec![
            iface("lo", IfKind::Loopback, true, "127.0.0.1", false),
            iface("docker0", IfKind::Docker, true, "172.17.0.1", false),
            iface("eno1", IfKind::Physical, true, "10.1.0.11", true),
            iface("ib0", IfKind::Ipoib, true, "192.168.100.11", false),
        ];
        facts
    }

    #[test]
    fn debian_127_0_1_1_warns_and_fix_uses_default_route_address() {
        let facts = ib_node_with_interfaces();
        let f = check_hostname(&facts);
        assert_eq!(f.id, HOSTNAME_LOOPBACK);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.subject, "gpu-ib-01");
        assert!(f.summary.contains("loopback 127.0.1.1"), "{}", f.summary);
        assert_eq!(f.evidence["addresses"], serde_json::json!(["127.0.1.1"]));
        let cmds = &f.fix.as_ref().unwrap().commands;
        assert_eq!(
            cmds,
            &[
                r"sed -i 's/^127\.0\.1\.1\([[:space:]]\)/# 127.0.1.1\1/' /etc/hosts",
                "echo '10.1.0.11 gpu-ib-01' >> /etc/hosts",
            ]
        );
    }

    #[test]
    fn address_falls_back_to_first_physical_then_any_up_interface() {
        let mut facts = ib_node_with_interfaces();
        facts.net.interfaces[2].default_route = false;
        facts.net.interfaces[2].up = false;
        assert_eq!(
            node_address(&facts),
            Some("192.168.100.11".parse().unwrap())
        );
        facts.net.interfaces.truncate(2);
        assert_eq!(node_address(&facts), Some("172.17.0.1".parse().unwrap()));
        facts.net.interfaces.truncate(1);
        assert_eq!(node_address(&facts), None);
        let f = check_hostname(&facts);
        assert!(
            f.fix
                .unwrap()
                .commands
                .contains(&"echo '<this-node-ip> gpu-ib-01' >> /etc/hosts".to_string())
        );
    }

    /// Runs the fix's sed commands on a copy of the fixture's /etc/hosts and
    /// checks that the name then resolves to a non-loopback address only.
    fn apply_fix_to_hosts_copy(node: &str, host: &str, facts: &NodeFacts) -> Vec<IpAddr> {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        let hosts = d.path().join("etc/hosts");
        std::fs::copy(fixture_root(node).path("/etc/hosts"), &hosts).unwrap();
        let f = check_hostname(facts);
        for cmd in &f.fix.unwrap().commands {
            let cmd = cmd.replace("/etc/hosts", &hosts.to_string_lossy());
            let st = std::process::Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .status()
                .unwrap();
            assert!(st.success(), "{cmd}");
        }
        let text = std::fs::read_to_string(&hosts).unwrap();
        assert!(
            crate::sys::probe::lookup_in_hosts(&text, "localhost")
                .iter()
                .any(|a| a.is_loopback()),
            "localhost must survive: {text}"
        );
        crate::sys::probe::lookup_in_hosts(&text, host)
    }

    #[test]
    fn fix_commands_really_repair_the_hosts_files() {
        if std::process::Command::new("sed")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("sed not available; skipping");
            return;
        }
        let facts = ib_node_with_interfaces();
        assert_eq!(
            apply_fix_to_hosts_copy("ib-node", "gpu-ib-01", &facts),
            vec!["10.1.0.11".parse::<IpAddr>().unwrap()]
        );
        let mut vm = fixture_facts("plain-vm", "vm");
        vm.net.interfaces = vec![iface("eth0", IfKind::Physical, true, "10.0.2.15", true)];
        let f = check_hostname(&vm);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(
            apply_fix_to_hosts_copy("plain-vm", "vm", &vm),
            vec!["10.0.2.15".parse::<IpAddr>().unwrap()]
        );
    }

    #[test]
    fn real_address_passes_and_unresolved_warns() {
        for (node, host, addr) in [
            ("roce-node", "gpu-roce-01", "10.2.0.21"),
            ("docker-bond-host", "node07", "10.4.0.31"),
            ("k8s-pod", "trainer-0", "10.244.1.17"),
        ] {
            let out = check(&fixture_facts(node, host), &CheckContext::default());
            let f = find(&out, HOSTNAME_LOOPBACK);
            assert_eq!(f.status, Status::Pass, "{node}");
            assert_eq!(f.summary, format!("hostname {host} resolves to {addr}"));
            assert!(f.fix.is_none());
        }
        let facts = fixture_facts("roce-node", "renamed-node");
        let f = check_hostname(&facts);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("does not resolve"), "{}", f.summary);
        assert!(f.fix.is_some());
    }

    #[test]
    fn odd_hostname_never_lands_in_a_command() {
        let facts = NodeFacts {
            hostname: "x'; rm -rf /".into(),
            sys: SysFacts {
                hostname_addrs: vec!["127.0.1.1".parse().unwrap()],
                ..Default::default()
            },
            ..Default::default()
        };
        let f = check_hostname(&facts);
        assert_eq!(f.status, Status::Warn);
        assert!(f.fix.unwrap().commands.is_empty());
    }
}
