//! Network interfaces: netdev on the live system, sysfs/procfs through `Root` for kinds, speeds and fixtures.
//!
//! Every interface comes from `/sys/class/net` (kind, state, speed, driver,
//! master). Addresses come from netdev (netlink) on the real root, and from
//! `/proc/net/fib_trie` + `/proc/net/route` + `/proc/net/if_inet6` on a
//! fixture root, as tools without netlink do. The default route always comes
//! from `/proc/net/route`.

use crate::core::{IfAddr, IfKind, Interface, NetFacts};
use crate::infra::root::Root;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const SYS_NET: &str = "/sys/class/net";
/// `IFF_UP` in `/sys/class/net/*/flags`.
const IFF_UP: u32 = 0x1;
/// `IFF_SLAVE`: enslaved to a bond.
const IFF_SLAVE: u32 = 0x800;
/// `RTF_GATEWAY` in `/proc/net/route` flags.
const RTF_GATEWAY: u32 = 0x2;
/// `ARPHRD_LOOPBACK` and `ARPHRD_INFINIBAND` in `/sys/class/net/*/type`.
const ARPHRD_LOOPBACK: u32 = 772;
const ARPHRD_INFINIBAND: u32 = 32;

/// IPv4 and IPv6 addresses of one interface, by name.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct AddrSet {
    pub ipv4: Vec<IfAddr>,
    pub ipv6: Vec<IfAddr>,
}

/// One line of `/proc/net/route`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteEntry {
    pub iface: String,
    pub destination: Ipv4Addr,
    pub gateway: Ipv4Addr,
    pub flags: u32,
    pub metric: u32,
    pub mask: Ipv4Addr,
}

impl RouteEntry {
    pub fn is_default(&self) -> bool {
        self.destination.is_unspecified() && self.mask.is_unspecified()
    }

    fn prefix_len(&self) -> u8 {
        u32::from(self.mask).count_ones() as u8
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::from(self.mask);
        u32::from(ip) & mask == u32::from(self.destination) & mask
    }
}

/// Probes every interface under `root`. Never panics; problems land in `error`.
pub fn probe(root: &Root) -> NetFacts {
    let mut errors = Vec::new();
    let mut interfaces: Vec<Interface> = interface_names(root)
        .iter()
        .map(|name| read_sysfs_interface(root, name))
        .collect();
    if interfaces.is_empty() {
        errors.push(format!("no interfaces readable under {SYS_NET}"));
    }

    let addrs = if root.is_system() {
        system_addresses(&mut interfaces)
    } else {
        procfs_addresses(root, &interfaces)
    };
    match addrs {
        Ok(map) => apply_addresses(&mut interfaces, map),
        Err(e) => errors.push(e),
    }

    match read_routes(root) {
        Ok(routes) => apply_default_routes(&mut interfaces, &routes),
        Err(e) => errors.push(e),
    }

    interfaces.sort_by(|a, b| a.index.cmp(&b.index).then_with(|| a.name.cmp(&b.name)));
    NetFacts {
        interfaces,
        error: if errors.is_empty() {
            None
        } else {
            Some(errors.join("; "))
        },
    }
}

/// Directory entries of `/sys/class/net` that are interfaces (not `bonding_masters`).
fn interface_names(root: &Root) -> Vec<String> {
    root.list(SYS_NET)
        .into_iter()
        .filter(|n| root.path(format!("{SYS_NET}/{n}")).is_dir())
        .collect()
}

/// Everything sysfs says about one interface (addresses come later).
pub fn read_sysfs_interface(root: &Root, name: &str) -> Interface {
    let dir = format!("{SYS_NET}/{name}");
    let at = |f: &str| format!("{dir}/{f}");
    let uevent = root.read(at("uevent")).unwrap_or_default();
    let index = root
        .attr_num::<u32>(at("ifindex"))
        .or_else(|| uevent_value(&uevent, "IFINDEX").and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    let flags = root.attr(at("flags")).and_then(|f| parse_hex_u32(&f));
    let oper_state = root
        .attr(at("operstate"))
        .unwrap_or_else(|| "unknown".into());
    let carrier = root.attr_num::<u8>(at("carrier"));
    Interface {
        name: name.to_string(),
        index,
        kind: classify(root, name, index, &uevent),
        up: is_up(flags, &oper_state, carrier),
        admin_up: flags.map(|f| f & IFF_UP != 0),
        // The kernel refuses to read `carrier` of an interface that is administratively down.
        carrier: carrier.map(|c| c == 1),
        oper_state,
        mtu: root.attr_num(at("mtu")),
        speed_mbps: root.attr(at("speed")).and_then(|s| parse_speed(&s)),
        mac: root.attr(at("address")).filter(|m| !is_zero_mac(m)),
        driver: root.link_name(at("device/driver")),
        master: master_of(root, &dir, flags),
        parent: vlan_parent(root, &dir, &uevent),
        ..Default::default()
    }
}

/// Administratively up (IFF_UP) with a carrier, judged from flags, carrier and operstate.
pub fn is_up(flags: Option<u32>, oper_state: &str, carrier: Option<u8>) -> bool {
    if flags.is_some_and(|f| f & IFF_UP == 0) {
        return false;
    }
    if carrier == Some(0) {
        return false;
    }
    match oper_state {
        "up" => true,
        // Loopback and many virtual devices never report "up"; trust IFF_UP + carrier.
        "unknown" => flags.is_some() || carrier == Some(1),
        _ => false,
    }
}

/// Kind by the rules in DESIGN: type, bonding/bridge dirs, DEVTYPE, links, name.
fn classify(root: &Root, name: &str, index: u32, uevent: &str) -> IfKind {
    let dir = format!("{SYS_NET}/{name}");
    let arp_type = root.attr_num::<u32>(format!("{dir}/type"));
    let devtype = uevent_value(uevent, "DEVTYPE").unwrap_or_default();
    let iflink = root.attr_num::<u32>(format!("{dir}/iflink"));
    let has_device = root.exists(format!("{dir}/device"));
    if arp_type == Some(ARPHRD_LOOPBACK) {
        IfKind::Loopback
    } else if arp_type == Some(ARPHRD_INFINIBAND) {
        IfKind::Ipoib
    } else if root.exists(format!("{dir}/bonding")) || devtype == "bond" {
        IfKind::Bond
    } else if root.exists(format!("{dir}/bridge")) || devtype == "bridge" {
        if name.starts_with("docker") {
            IfKind::Docker
        } else {
            IfKind::Bridge
        }
    } else if devtype == "vlan" {
        IfKind::Vlan
    } else if name.starts_with("veth")
        || (!has_device && iflink.is_some_and(|l| l != 0 && l != index))
    {
        IfKind::Veth
    } else if has_device {
        IfKind::Physical
    } else {
        IfKind::Other
    }
}

/// The bond or bridge this interface belongs to: `master`, `brport/bridge`, or an `upper_*` link of a slave.
fn master_of(root: &Root, dir: &str, flags: Option<u32>) -> Option<String> {
    root.link_name(format!("{dir}/master"))
        .or_else(|| root.link_name(format!("{dir}/brport/bridge")))
        .or_else(|| {
            if flags.is_some_and(|f| f & IFF_SLAVE != 0) {
                first_link_with_prefix(root, dir, "upper_")
            } else {
                None
            }
        })
}

/// The device a VLAN sits on (`lower_*` link).
fn vlan_parent(root: &Root, dir: &str, uevent: &str) -> Option<String> {
    if uevent_value(uevent, "DEVTYPE").as_deref() != Some("vlan") {
        return None;
    }
    first_link_with_prefix(root, dir, "lower_")
}

fn first_link_with_prefix(root: &Root, dir: &str, prefix: &str) -> Option<String> {
    root.list(dir)
        .into_iter()
        .find_map(|e| e.strip_prefix(prefix).map(str::to_string))
}

fn uevent_value(uevent: &str, key: &str) -> Option<String> {
    uevent.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

use crate::infra::parse_hex_u32;

/// Rated speed; -1 (SPEED_UNKNOWN), 0 and garbage mean "not reported".
pub fn parse_speed(s: &str) -> Option<u64> {
    s.trim()
        .parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .map(|v| v as u64)
}

fn is_zero_mac(m: &str) -> bool {
    m.chars().all(|c| c == '0' || c == ':')
}

// ----- addresses -----

fn apply_addresses(interfaces: &mut [Interface], mut map: BTreeMap<String, AddrSet>) {
    for iface in interfaces.iter_mut() {
        if let Some(set) = map.remove(&iface.name) {
            iface.ipv4 = set.ipv4;
            iface.ipv6 = set.ipv6;
        }
    }
}

/// Addresses from netdev (netlink/getifaddrs). Interfaces sysfs did not show are added.
fn system_addresses(interfaces: &mut Vec<Interface>) -> Result<BTreeMap<String, AddrSet>, String> {
    let mut found = netdev::get_interfaces();
    // netdev's order varies between runs.
    found.sort_by_key(|i| i.index);
    let mut map = BTreeMap::new();
    for nd in &found {
        if !interfaces.iter().any(|i| i.name == nd.name) {
            interfaces.push(interface_from_netdev(nd));
        }
        map.insert(nd.name.clone(), netdev_addr_set(nd));
    }
    Ok(map)
}

/// IPv4/IPv6 addresses of one netdev interface, sorted.
pub fn netdev_addr_set(nd: &netdev::Interface) -> AddrSet {
    let mut set = AddrSet {
        ipv4: nd
            .ipv4
            .iter()
            .map(|n| IfAddr {
                addr: IpAddr::V4(n.addr()),
                prefix: n.prefix_len(),
            })
            .collect(),
        ipv6: nd
            .ipv6
            .iter()
            .map(|n| IfAddr {
                addr: IpAddr::V6(n.addr()),
                prefix: n.prefix_len(),
            })
            .collect(),
    };
    set.ipv4.sort_by_key(|a| a.addr);
    set.ipv4.dedup();
    set.ipv6.sort_by_key(|a| a.addr);
    set.ipv6.dedup();
    set
}

fn interface_from_netdev(nd: &netdev::Interface) -> Interface {
    Interface {
        name: nd.name.clone(),
        index: nd.index,
        kind: if nd.is_loopback() {
            IfKind::Loopback
        } else {
            IfKind::Other
        },
        oper_state: if nd.is_running() { "up" } else { "unknown" }.into(),
        up: nd.is_up() && nd.is_running(),
        admin_up: Some(nd.is_up()),
        mtu: nd.mtu,
        mac: nd
            .mac_addr
            .map(|m| m.to_string())
            .filter(|m| !is_zero_mac(m)),
        ..Default::default()
    }
}

/// Addresses the way tools without netlink read them: fib_trie + route for IPv4, if_inet6 for IPv6.
pub fn procfs_addresses(
    root: &Root,
    interfaces: &[Interface],
) -> Result<BTreeMap<String, AddrSet>, String> {
    let mut map: BTreeMap<String, AddrSet> = BTreeMap::new();
    let mut errors = Vec::new();
    match (root.read("/proc/net/fib_trie"), read_routes(root)) {
        (Ok(trie), Ok(routes)) => {
            let loopback = interfaces
                .iter()
                .find(|i| i.kind == IfKind::Loopback)
                .map_or("lo", |i| i.name.as_str());
            for (name, addr) in assign_local_ipv4(&parse_fib_trie_locals(&trie), &routes, loopback)
            {
                map.entry(name).or_default().ipv4.push(addr);
            }
        }
        (Err(e), _) => errors.push(format!("/proc/net/fib_trie: {e}")),
        (_, Err(e)) => errors.push(e),
    }
    match root.read("/proc/net/if_inet6") {
        Ok(text) => {
            for (name, addr) in parse_if_inet6(&text) {
                map.entry(name).or_default().ipv6.push(addr);
            }
        }
        // No IPv6 in this kernel: not an error worth reporting.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => errors.push(format!("/proc/net/if_inet6: {e}")),
    }
    for set in map.values_mut() {
        set.ipv4.sort_by_key(|a| a.addr);
        set.ipv4.dedup();
        set.ipv6.sort_by_key(|a| a.addr);
        set.ipv6.dedup();
    }
    if errors.is_empty() {
        Ok(map)
    } else {
        Err(errors.join("; "))
    }
}

/// Local host addresses: leaves of `/proc/net/fib_trie` followed by `/32 host LOCAL`.
pub fn parse_fib_trie_locals(text: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(ip) = t.strip_prefix("|-- ") {
            leaf = ip.trim().parse().ok();
        } else if t.starts_with('/') {
            let mut words = t.split_whitespace();
            let is_host_local = words.next() == Some("/32")
                && words.next() == Some("host")
                && words.next() == Some("LOCAL");
            if let (true, Some(ip)) = (is_host_local, leaf) {
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
        } else {
            leaf = None;
        }
    }
    out
}

/// Gives each local address to the interface whose link route (no gateway) contains it, longest prefix first.
pub fn assign_local_ipv4(
    locals: &[Ipv4Addr],
    routes: &[RouteEntry],
    loopback: &str,
) -> Vec<(String, IfAddr)> {
    let mut out = Vec::new();
    for ip in locals {
        let best = routes
            .iter()
            .filter(|r| r.flags & RTF_GATEWAY == 0 && !r.is_default() && r.contains(*ip))
            .max_by_key(|r| r.prefix_len());
        let assigned = match best {
            Some(r) => Some((r.iface.clone(), r.prefix_len())),
            // 127.0.0.0/8 lives in the local table only, which /proc/net/route does not show.
            None if ip.is_loopback() => Some((loopback.to_string(), 8)),
            None => None,
        };
        if let Some((iface, prefix)) = assigned {
            out.push((
                iface,
                IfAddr {
                    addr: IpAddr::V4(*ip),
                    prefix,
                },
            ));
        }
    }
    out
}

/// `/proc/net/if_inet6`: address, ifindex, prefix length, scope, flags, name (all hex but the name).
pub fn parse_if_inet6(text: &str) -> Vec<(String, IfAddr)> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 || f[0].len() != 32 {
                return None;
            }
            let bits = u128::from_str_radix(f[0], 16).ok()?;
            let prefix = u8::from_str_radix(f[2], 16).ok()?;
            Some((
                f[5].to_string(),
                IfAddr {
                    addr: IpAddr::V6(Ipv6Addr::from(bits)),
                    prefix,
                },
            ))
        })
        .collect()
}

// ----- routes -----

/// Reads and parses `/proc/net/route` through `root`.
pub fn read_routes(root: &Root) -> Result<Vec<RouteEntry>, String> {
    root.read("/proc/net/route")
        .map(|t| parse_route(&t))
        .map_err(|e| format!("/proc/net/route: {e}"))
}

/// Parses `/proc/net/route` (addresses are the kernel's native-endian hex, little-endian here).
pub fn parse_route(text: &str) -> Vec<RouteEntry> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some(RouteEntry {
                iface: f[0].to_string(),
                destination: hex_le_ipv4(f[1])?,
                gateway: hex_le_ipv4(f[2])?,
                flags: parse_hex_u32(f[3])?,
                metric: f[6].parse().ok()?,
                mask: hex_le_ipv4(f[7])?,
            })
        })
        .collect()
}

/// `0100010A` -> 10.1.0.1.
pub fn hex_le_ipv4(s: &str) -> Option<Ipv4Addr> {
    u32::from_str_radix(s, 16)
        .ok()
        .map(|v| Ipv4Addr::from(v.to_le_bytes()))
}

/// Marks interfaces that carry a default route, with the gateway.
fn apply_default_routes(interfaces: &mut [Interface], routes: &[RouteEntry]) {
    let mut defaults: Vec<&RouteEntry> = routes.iter().filter(|r| r.is_default()).collect();
    defaults.sort_by_key(|r| r.metric);
    for r in defaults {
        if let Some(iface) = interfaces.iter_mut().find(|i| i.name == r.iface) {
            if iface.default_route {
                continue;
            }
            iface.default_route = true;
            iface.gateway = (r.flags & RTF_GATEWAY != 0 && !r.gateway.is_unspecified())
                .then_some(IpAddr::V4(r.gateway));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::infra::testutil::proptest_config())]

        /// Any `uevent` text and key: no panic, bounded time.
        #[test]
        fn uevent_values_take_any_text(
            text in crate::infra::testutil::near_lines("DEVTYPE=vlan\nINTERFACE=eth0.100\nIFINDEX=4\nDEVTYPE=bond\n=\n==\nDEVTYPE"),
            key in proptest::prop_oneof![proptest::strategy::Just("DEVTYPE".to_string()), "[ -~]{0,8}"],
        ) {
            let start = std::time::Instant::now();
            let _ = uevent_value(&text, &key);
            let _ = is_zero_mac(&text);
            let took = start.elapsed();
            proptest::prop_assert!(took < crate::infra::testutil::PROP_LIMIT, "took {took:?}");
        }
    }

    fn fixture(name: &str) -> Root {
        crate::infra::testutil::fixture_root(name)
    }

    fn by_name<'a>(facts: &'a NetFacts, name: &str) -> &'a Interface {
        match facts.interfaces.iter().find(|i| i.name == name) {
            Some(i) => i,
            None => panic!("{name} missing from {:?}", facts.interfaces),
        }
    }

    fn v4(s: &str, prefix: u8) -> IfAddr {
        IfAddr {
            addr: s.parse().expect("test address"),
            prefix,
        }
    }

    #[test]
    fn ib_node_interfaces_kinds_and_addresses() {
        let f = probe(&fixture("ib-node"));
        assert_eq!(f.error, None);
        let names: Vec<&str> = f.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["lo", "eno1", "ib0", "ib1", "docker0"]);
        let lo = by_name(&f, "lo");
        assert_eq!(lo.kind, IfKind::Loopback);
        assert!(lo.up);
        assert_eq!(lo.ipv4, vec![v4("127.0.0.1", 8)]);
        assert_eq!(lo.mac, None);
        let eno1 = by_name(&f, "eno1");
        assert_eq!(eno1.kind, IfKind::Physical);
        assert_eq!(eno1.driver.as_deref(), Some("ice"));
        assert_eq!(eno1.speed_mbps, Some(25000));
        assert_eq!(eno1.ipv4, vec![v4("10.1.0.11", 16)]);
        assert!(eno1.default_route);
        assert_eq!(eno1.gateway, Some("10.1.0.1".parse().expect("ip")));
        assert_eq!(eno1.ipv6.len(), 1);
        let ib0 = by_name(&f, "ib0");
        assert_eq!(ib0.kind, IfKind::Ipoib);
        assert!(ib0.up);
        assert_eq!(ib0.mtu, Some(2044));
        assert_eq!(ib0.driver.as_deref(), Some("mlx5_core"));
        assert_eq!(ib0.ipv4, vec![v4("192.168.100.11", 24)]);
        assert!(!ib0.default_route);
        let ib1 = by_name(&f, "ib1");
        assert_eq!(ib1.kind, IfKind::Ipoib);
        assert!(!ib1.up);
        assert_eq!(ib1.speed_mbps, None);
        assert!(ib1.ipv4.is_empty() && ib1.ipv6.is_empty());
        let docker0 = by_name(&f, "docker0");
        assert_eq!(docker0.kind, IfKind::Docker);
        assert!(!docker0.up);
        assert_eq!(docker0.oper_state, "down");
        assert_eq!(docker0.ipv4, vec![v4("172.17.0.1", 16)]);
    }

    #[test]
    fn docker_bond_host_bond_vlan_bridge_and_slaves() {
        let f = probe(&fixture("docker-bond-host"));
        assert_eq!(f.error, None);
        // bonding_masters is a file, not an interface.
        assert_eq!(f.interfaces.len(), 7);
        let indexes: Vec<u32> = f.interfaces.iter().map(|i| i.index).collect();
        assert_eq!(indexes, [1, 2, 3, 4, 5, 6, 7]);
        for slave in ["eno1", "eno2"] {
            let s = by_name(&f, slave);
            assert_eq!(s.kind, IfKind::Physical);
            assert_eq!(s.master.as_deref(), Some("bond0"));
            assert_eq!(s.driver.as_deref(), Some("bnxt_en"));
            assert!(s.ipv4.is_empty() && s.ipv6.is_empty());
        }
        let bond = by_name(&f, "bond0");
        assert_eq!(bond.kind, IfKind::Bond);
        assert_eq!(bond.speed_mbps, Some(50000));
        assert_eq!(bond.ipv4, vec![v4("10.4.0.31", 24)]);
        assert!(bond.default_route);
        assert_eq!(bond.master, None);
        let vlan = by_name(&f, "bond0.100");
        assert_eq!(vlan.kind, IfKind::Vlan);
        assert_eq!(vlan.parent.as_deref(), Some("bond0"));
        assert_eq!(vlan.master, None);
        assert_eq!(vlan.ipv4, vec![v4("10.100.0.31", 24)]);
        let docker0 = by_name(&f, "docker0");
        assert_eq!(docker0.kind, IfKind::Docker);
        assert!(docker0.up);
        let veth = by_name(&f, "veth3f2a1b0");
        assert_eq!(veth.kind, IfKind::Veth);
        assert_eq!(veth.master.as_deref(), Some("docker0"));
        assert!(veth.ipv4.is_empty());
    }

    #[test]
    fn k8s_pod_eth0_is_a_veth_and_plain_vm_eth0_is_virtio() {
        let pod = probe(&fixture("k8s-pod"));
        let eth0 = by_name(&pod, "eth0");
        assert_eq!(eth0.kind, IfKind::Veth);
        assert_eq!(eth0.index, 3);
        assert_eq!(eth0.mtu, Some(1450));
        assert_eq!(eth0.ipv4, vec![v4("10.244.1.17", 24)]);
        assert_eq!(eth0.gateway, Some("10.244.1.1".parse().expect("ip")));

        let vm = probe(&fixture("plain-vm"));
        let eth0 = by_name(&vm, "eth0");
        assert_eq!(eth0.kind, IfKind::Physical);
        assert_eq!(eth0.driver.as_deref(), Some("virtio_net"));
        assert_eq!(eth0.speed_mbps, None, "virtio reports -1");
        assert_eq!(eth0.ipv4, vec![v4("10.0.2.15", 24)]);
        assert_eq!(eth0.gateway, Some("10.0.2.2".parse().expect("ip")));
    }

    #[test]
    fn roce_node_two_physical_nics() {
        let f = probe(&fixture("roce-node"));
        let fast = by_name(&f, "ens1f0np0");
        assert_eq!(fast.kind, IfKind::Physical);
        assert_eq!(fast.speed_mbps, Some(100000));
        assert_eq!(fast.mtu, Some(9000));
        assert_eq!(fast.ipv4, vec![v4("10.3.0.21", 24)]);
        assert!(by_name(&f, "eno1").default_route);
        assert!(!fast.default_route);
    }

    #[test]
    fn missing_root_reports_an_error_instead_of_panicking() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = probe(&Root::at(d.path()));
        assert!(f.interfaces.is_empty());
        let err = f.error.unwrap_or_default();
        assert!(err.contains("/sys/class/net"), "{err}");
        assert!(err.contains("/proc/net/route"), "{err}");
    }

    #[test]
    fn garbage_sysfs_values_do_not_panic() {
        let d = tempfile::tempdir().expect("tempdir");
        let dir = d.path().join("sys/class/net/weird0");
        std::fs::create_dir_all(&dir).expect("mkdir");
        for (f, v) in [
            ("ifindex", "x\n"),
            ("flags", "0xZZ\n"),
            ("speed", "\n"),
            ("mtu", "-5\n"),
            ("carrier", "\u{fffd}\n"),
            ("uevent", "garbage without equals\n"),
        ] {
            std::fs::write(dir.join(f), v).expect("write");
        }
        let f = probe(&Root::at(d.path()));
        let w = by_name(&f, "weird0");
        assert_eq!(w.index, 0);
        assert_eq!(w.speed_mbps, None);
        assert_eq!(w.mtu, None);
        assert_eq!(w.kind, IfKind::Other);
        assert!(!w.up);
    }

    #[test]
    fn up_needs_iff_up_and_carrier() {
        assert!(is_up(Some(0x1003), "up", Some(1)));
        assert!(is_up(Some(0x9), "unknown", Some(1)));
        assert!(!is_up(Some(0x1002), "up", Some(1)), "IFF_UP clear");
        assert!(!is_up(Some(0x1003), "down", Some(0)));
        assert!(!is_up(Some(0x1003), "up", Some(0)));
        assert!(!is_up(None, "dormant", None));
    }

    #[test]
    fn speed_parsing_rejects_unknown() {
        assert_eq!(parse_speed("25000"), Some(25000));
        assert_eq!(parse_speed("-1"), None);
        assert_eq!(parse_speed("0"), None);
        assert_eq!(parse_speed("fast"), None);
    }

    #[test]
    fn route_hex_is_little_endian() {
        assert_eq!(hex_le_ipv4("0100010A"), Some(Ipv4Addr::new(10, 1, 0, 1)));
        assert_eq!(
            hex_le_ipv4("00FFFFFF"),
            Some(Ipv4Addr::new(255, 255, 255, 0))
        );
        assert_eq!(hex_le_ipv4("nothex"), None);
        let routes = parse_route(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
             broken line\n",
        );
        assert_eq!(routes.len(), 1);
        assert!(routes[0].is_default());
        assert_eq!(routes[0].gateway, Ipv4Addr::new(192, 0, 2, 1));
    }

    #[test]
    fn fib_trie_skips_network_and_broadcast_entries() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n\
                    \x20    +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n\
                    \x20          |-- 127.0.0.1\n              /32 host LOCAL\n        |-- 127.255.255.255\n           /32 link BROADCAST\n";
        assert_eq!(
            parse_fib_trie_locals(trie),
            vec![Ipv4Addr::new(127, 0, 0, 1)]
        );
    }

    /// On this machine, netdev (netlink) and the procfs fallback must agree on IPv4 and the default route.
    #[test]
    fn netdev_and_procfs_agree_on_this_machine() {
        let root = Root::system();
        if root.read("/proc/net/fib_trie").is_err() || read_routes(&root).is_err() {
            eprintln!("skipping: /proc/net/fib_trie or /proc/net/route unreadable here");
            return;
        }
        let live = probe(&root);
        let sysfs_only: Vec<Interface> = interface_names(&root)
            .iter()
            .map(|n| read_sysfs_interface(&root, n))
            .collect();
        let procfs = match procfs_addresses(&root, &sysfs_only) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("skipping: {e}");
                return;
            }
        };
        for iface in &live.interfaces {
            let from_proc = procfs.get(&iface.name).map(|s| s.ipv4.clone());
            assert_eq!(
                iface.ipv4,
                from_proc.unwrap_or_default(),
                "IPv4 of {} differs between netdev and procfs",
                iface.name
            );
        }
        let routes = read_routes(&root).unwrap_or_default();
        let default_ifaces: Vec<&str> = routes
            .iter()
            .filter(|r| r.is_default())
            .map(|r| r.iface.as_str())
            .collect();
        for iface in &live.interfaces {
            assert_eq!(
                iface.default_route,
                default_ifaces.contains(&iface.name.as_str()),
                "default route flag of {}",
                iface.name
            );
        }
        // netdev's own gateway view must match /proc/net/route's.
        for nd in netdev::get_interfaces() {
            let Some(gw) = nd.gateway.as_ref().and_then(|g| g.ipv4.first()) else {
                continue;
            };
            let ours = live.interfaces.iter().find(|i| i.name == nd.name);
            assert_eq!(ours.and_then(|i| i.gateway), Some(IpAddr::V4(*gw)));
        }
    }
}
