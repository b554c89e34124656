//! InfiniBand / RoCE devices and ports from /sys/class/infiniband, and whether libibverbs is installed.

use crate::core::{IbDevice, IbFacts, IbPort};
use crate::infra::root::Root;
use std::io::ErrorKind;

const CLASS: &str = "/sys/class/infiniband";

/// Directories (under the root) where distributions install libibverbs.so.1.
const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
];
const VERBS_SONAME: &str = "libibverbs.so.1";

/// Every device under /sys/class/infiniband with its ports. A missing class directory
/// means no RDMA devices (not an error).
pub fn probe(root: &Root) -> IbFacts {
    let mut facts = IbFacts {
        verbs_library: find_verbs_library(root),
        ..Default::default()
    };
    match std::fs::read_dir(root.path(CLASS)) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return facts,
        Err(e) => {
            facts.error = Some(format!("cannot read {CLASS}: {e}"));
            return facts;
        }
    }
    facts.devices = root
        .list(CLASS)
        .into_iter()
        .map(|name| read_device(root, &name))
        .collect();
    if !facts.devices.is_empty() {
        facts.dev_infiniband = Some(super::paths::dev_infiniband(root));
    }
    facts
}

fn read_device(root: &Root, name: &str) -> IbDevice {
    let dir = format!("{CLASS}/{name}");
    let mut port_numbers: Vec<u32> = root
        .list(format!("{dir}/ports"))
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    port_numbers.sort_unstable();
    IbDevice {
        name: name.to_string(),
        hca_type: root.attr(format!("{dir}/hca_type")),
        fw_ver: root.attr(format!("{dir}/fw_ver")),
        ports: port_numbers
            .into_iter()
            .map(|n| read_port(root, &dir, n))
            .collect(),
        pci: super::paths::hca_pci(root, name),
        uverbs: super::paths::hca_uverbs(root, name),
    }
}

fn read_port(root: &Root, dev_dir: &str, port: u32) -> IbPort {
    let pdir = format!("{dev_dir}/ports/{port}");
    let rate = root.attr(format!("{pdir}/rate"));
    IbPort {
        port,
        state: root
            .attr(format!("{pdir}/state"))
            .map(|s| strip_state_number(&s))
            .unwrap_or_default(),
        phys_state: root
            .attr(format!("{pdir}/phys_state"))
            .map(|s| strip_state_number(&s))
            .unwrap_or_default(),
        rate_gbps: rate.as_deref().and_then(parse_rate_gbps),
        rate,
        link_layer: root.attr(format!("{pdir}/link_layer")).unwrap_or_default(),
        netdev: port_netdev(root, dev_dir, port),
        counters: super::paths::counters(root, &format!("{pdir}/counters"), None),
        hw_counters: super::paths::counters(
            root,
            &format!("{pdir}/hw_counters"),
            Some(super::paths::HW_COUNTERS),
        ),
    }
}

/// "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"; text without a number is kept as is.
pub fn strip_state_number(raw: &str) -> String {
    let raw = raw.trim();
    match raw.split_once(':') {
        Some((num, name)) if num.trim().chars().all(|c| c.is_ascii_digit()) => {
            name.trim().to_string()
        }
        _ => raw.to_string(),
    }
}

/// "200 Gb/sec (4X HDR)" -> 200.0, "2.5 Gb/sec (1X SDR)" -> 2.5; anything else -> None.
pub fn parse_rate_gbps(raw: &str) -> Option<f64> {
    let mut words = raw.split_whitespace();
    let value: f64 = words.next()?.parse().ok()?;
    let unit = words.next()?;
    if unit != "Gb/sec" || !value.is_finite() || value < 0.0 {
        return None;
    }
    Some(value)
}

/// The net device of one port: the GID table's ndev first (RoCE), then the
/// PCI device's net/ entries (IPoIB), matched by `dev_port`/`dev_id` when the
/// device has several.
fn port_netdev(root: &Root, dev_dir: &str, port: u32) -> Option<String> {
    if let Some(n) = root.attr(format!("{dev_dir}/ports/{port}/gid_attrs/ndevs/0")) {
        return Some(n);
    }
    let net_dir = format!("{dev_dir}/device/net");
    let names = root.list(&net_dir);
    if names.len() > 1 {
        let wanted = port.saturating_sub(1);
        let by_port = names.iter().find(|n| {
            let d = format!("{net_dir}/{n}");
            root.attr_num::<u32>(format!("{d}/dev_port")) == Some(wanted)
                || root.attr(format!("{d}/dev_id")).and_then(|s| parse_hex(&s)) == Some(wanted)
        });
        if let Some(n) = by_port {
            return Some(n.clone());
        }
    }
    names.into_iter().next()
}

use crate::infra::parse_hex_u32 as parse_hex;

/// Path of libibverbs.so.1 in the usual library directories, else as named in /etc/ld.so.cache.
pub fn find_verbs_library(root: &Root) -> Option<String> {
    LIB_DIRS
        .iter()
        .map(|dir| format!("{dir}/{VERBS_SONAME}"))
        .find(|p| root.exists(p))
        .or_else(|| verbs_in_ld_cache(root))
}

/// ld.so.cache is binary; its string table holds NUL-terminated sonames and paths.
fn verbs_in_ld_cache(root: &Root) -> Option<String> {
    let bytes = root.read_bytes("/etc/ld.so.cache").ok()?;
    let suffix = format!("/{VERBS_SONAME}");
    let mut found_name = false;
    for chunk in bytes.split(|b| *b == 0) {
        let Ok(s) = std::str::from_utf8(chunk) else {
            continue;
        };
        if s.starts_with('/') && s.ends_with(&suffix) {
            return Some(s.to_string());
        }
        found_name |= s.ends_with(VERBS_SONAME);
    }
    found_name.then(|| format!("ld.so.cache:{VERBS_SONAME}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Root {
        crate::infra::testutil::fixture_root(name)
    }

    #[test]
    fn state_and_rate_parsing() {
        assert_eq!(strip_state_number("4: ACTIVE"), "ACTIVE");
        assert_eq!(strip_state_number("5: LinkUp\n"), "LinkUp");
        assert_eq!(strip_state_number("DOWN"), "DOWN");
        assert_eq!(strip_state_number("x: odd"), "x: odd");
        assert_eq!(strip_state_number(""), "");
        assert_eq!(parse_rate_gbps("200 Gb/sec (4X HDR)"), Some(200.0));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbps("fast"), None);
        assert_eq!(parse_rate_gbps("200"), None);
        assert_eq!(parse_rate_gbps("NaN Gb/sec"), None);
        assert_eq!(parse_rate_gbps("-1 Gb/sec"), None);
        assert_eq!(parse_rate_gbps(""), None);
    }

    #[test]
    fn ib_node_has_two_hdr_devices_one_down() {
        let f = probe(&fixture("ib-node"));
        assert_eq!(f.error, None);
        let names: Vec<_> = f.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["mlx5_0", "mlx5_1"]);
        let d0 = &f.devices[0];
        assert_eq!(d0.hca_type.as_deref(), Some("MT4123"));
        assert_eq!(d0.fw_ver.as_deref(), Some("20.31.1014"));
        let p = &d0.ports[0];
        assert_eq!(
            (p.port, p.state.as_str(), p.phys_state.as_str()),
            (1, "ACTIVE", "LinkUp")
        );
        assert_eq!(p.rate.as_deref(), Some("200 Gb/sec (4X HDR)"));
        assert_eq!(p.rate_gbps, Some(200.0));
        assert_eq!(p.link_layer, "InfiniBand");
        assert_eq!(p.netdev.as_deref(), Some("ib0"));
        let p1 = &f.devices[1].ports[0];
        assert_eq!(
            (p1.state.as_str(), p1.phys_state.as_str()),
            ("DOWN", "Disabled")
        );
        assert_eq!(p1.rate_gbps, Some(10.0));
        assert_eq!(p1.netdev.as_deref(), Some("ib1"));
        assert!(!p1.is_active());
        assert_eq!(
            f.verbs_library.as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
        );
    }

    #[test]
    fn roce_node_maps_port_to_ethernet_netdev_and_lacks_verbs() {
        let f = probe(&fixture("roce-node"));
        assert_eq!(f.devices.len(), 1);
        let p = &f.devices[0].ports[0];
        assert_eq!(p.link_layer, "Ethernet");
        assert_eq!(p.rate_gbps, Some(100.0));
        assert_eq!(p.netdev.as_deref(), Some("ens1f0np0"));
        assert!(p.is_active());
        assert_eq!(f.verbs_library, None);
    }

    #[test]
    fn absent_class_dir_means_no_devices_and_no_error() {
        let f = probe(&fixture("plain-vm"));
        assert!(f.devices.is_empty());
        assert_eq!(f.error, None);
    }

    #[test]
    fn multi_port_device_matches_netdev_by_dev_port_and_garbage_never_panics() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("sys/class/infiniband/mlx4_0");
        for port in ["1", "2", "junk"] {
            std::fs::create_dir_all(dev.join("ports").join(port)).unwrap();
        }
        std::fs::write(dev.join("ports/1/state"), "\u{0}\u{ff}garbage\n").unwrap();
        std::fs::write(dev.join("ports/1/rate"), "lots Gb/sec\n").unwrap();
        std::fs::write(dev.join("ports/2/state"), "4: ACTIVE\n").unwrap();
        for (name, dev_port, dev_id) in [("ib0", "0", "0x0"), ("ib1", "1", "0x1")] {
            let n = dev.join("device/net").join(name);
            std::fs::create_dir_all(&n).unwrap();
            std::fs::write(n.join("dev_port"), format!("{dev_port}\n")).unwrap();
            std::fs::write(n.join("dev_id"), format!("{dev_id}\n")).unwrap();
        }
        let f = probe(&Root::at(d.path()));
        let ports = &f.devices[0].ports;
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].rate_gbps, None);
        assert!(!ports[0].is_active());
        assert_eq!(ports[0].netdev.as_deref(), Some("ib0"));
        assert_eq!(ports[1].netdev.as_deref(), Some("ib1"));
        assert!(ports[1].is_active());
    }

    #[test]
    fn dev_id_matches_when_dev_port_missing() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("sys/class/infiniband/mlx4_0");
        std::fs::create_dir_all(dev.join("ports/2")).unwrap();
        for (name, dev_id) in [("eth0", "0x0"), ("eth1", "0x1")] {
            let n = dev.join("device/net").join(name);
            std::fs::create_dir_all(&n).unwrap();
            std::fs::write(n.join("dev_id"), format!("{dev_id}\n")).unwrap();
        }
        let f = probe(&Root::at(d.path()));
        assert_eq!(f.devices[0].ports[0].netdev.as_deref(), Some("eth1"));
    }

    #[test]
    fn verbs_found_through_ld_so_cache_strings() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        let mut cache = b"glibc-ld.so.cache1.1\0\0\x03".to_vec();
        cache.extend_from_slice(b"libibverbs.so.1\0/opt/rdma/lib/libibverbs.so.1\0");
        std::fs::write(d.path().join("etc/ld.so.cache"), &cache).unwrap();
        assert_eq!(
            find_verbs_library(&Root::at(d.path())).as_deref(),
            Some("/opt/rdma/lib/libibverbs.so.1")
        );
        std::fs::write(d.path().join("etc/ld.so.cache"), b"junk\0libfoo.so\0").unwrap();
        assert_eq!(find_verbs_library(&Root::at(d.path())), None);
    }
}
