//! What an authenticated node may send about itself: counts and string lengths, so one node
//! cannot make the report too big to deliver or too slow to judge, and data listeners only on
//! its own addresses, so it cannot aim the other nodes at a host that did not join. A limit
//! that bites refuses the node with a reason naming the field.

use super::joined::JoinedNode;
use crate::transport::wire::Listener;
use preflight_checks::model::{LinkOutcome, LinkResult, NodeFacts};
use serde_json::Value;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Longest hostname (a fully qualified DNS name is at most 253 bytes).
pub const MAX_HOSTNAME: usize = 255;
/// Most network interfaces on one node.
pub const MAX_INTERFACES: usize = 256;
/// Most data listeners (candidate addresses) one node offers.
pub const MAX_LISTENERS: usize = 64;
/// Longest string anywhere in a node's facts.
pub const MAX_STRING: usize = 64 << 10;
/// Longest list anywhere in a node's facts.
pub const MAX_ITEMS: usize = 4096;

/// Most addresses (IPv4 and IPv6, every interface) one node may report: the candidate
/// networks are found over every node's addresses, so this bounds that work per node.
pub const MAX_ADDRESSES: usize = 256;
/// Addresses per node the whole cluster may average (see [`total_addresses`]).
pub const ADDRESSES_PER_NODE: usize = 32;
/// The cluster's address budget is never below this.
pub const MIN_TOTAL_ADDRESSES: usize = 4096;

/// Addresses all nodes together may report: the candidate networks are found over all of
/// them, in more than linear time, so the total is bounded as well as each node's
/// ([`MAX_ADDRESSES`]). 32 per node, 4096 at least: 16 nodes at the per-node cap, or a big
/// cluster of ordinary nodes.
pub fn total_addresses(nnodes: u32) -> usize {
    (nnodes as usize)
        .saturating_mul(ADDRESSES_PER_NODE)
        .max(MIN_TOTAL_ADDRESSES)
}

/// The addresses one node reports (every interface, IPv4 and IPv6).
pub fn address_count(facts: &NodeFacts) -> usize {
    facts
        .net
        .interfaces
        .iter()
        .map(|i| i.ipv4.len() + i.ipv6.len())
        .sum()
}

/// Joins read at once after the handshake (each holds at most a join's budget).
pub const JOINS_IN_FLIGHT: usize = 8;
/// Longest a node may take to send its whole join message once authenticated.
pub const JOIN_READ: Duration = Duration::from_secs(10);

/// Checks one join message; the error names the field and the limit.
pub fn check_join(facts: &NodeFacts, listeners: &[Listener]) -> Result<(), String> {
    if facts.hostname.len() > MAX_HOSTNAME {
        return Err(format!(
            "its hostname has {} bytes (at most {MAX_HOSTNAME})",
            facts.hostname.len()
        ));
    }
    if facts.net.interfaces.len() > MAX_INTERFACES {
        return Err(format!(
            "it reports {} network interfaces (at most {MAX_INTERFACES})",
            facts.net.interfaces.len()
        ));
    }
    if listeners.len() > MAX_LISTENERS {
        return Err(format!(
            "it offers {} data listeners (at most {MAX_LISTENERS})",
            listeners.len()
        ));
    }
    if let Some(l) = listeners
        .iter()
        .find(|l| l.address.len() > 64 || l.interface.len() > 64)
    {
        return Err(format!(
            "a data listener's address or interface name is {} bytes long (at most 64)",
            l.address.len().max(l.interface.len())
        ));
    }
    let addresses = address_count(facts);
    if addresses > MAX_ADDRESSES {
        return Err(format!(
            "it reports {addresses} interface addresses (at most {MAX_ADDRESSES})"
        ));
    }
    let value = serde_json::to_value(facts).map_err(|e| format!("its facts do not encode: {e}"))?;
    walk(&value, "facts")
}

/// A peer's answer for rank 0's FQDN, kept within bounds: a name of at most 255 characters,
/// 16 addresses with 16 origins, short origin and dial fields, and an error line of at most
/// 512 characters.
pub fn bounded_lookup(
    mut l: preflight_checks::model::NameLookup,
) -> preflight_checks::model::NameLookup {
    l.name = l.name.chars().take(255).collect();
    l.addresses.truncate(16);
    l.error = l.error.map(|e| e.chars().take(512).collect());
    let cap = |s: &mut String, n: usize| *s = s.chars().take(n).collect();
    l.origins.truncate(16);
    for o in &mut l.origins {
        cap(&mut o.address, 64);
        cap(&mut o.source, 32);
        o.file.iter_mut().for_each(|f| cap(f, 255));
        o.text.iter_mut().for_each(|t| cap(t, 256));
    }
    if let Some(d) = &mut l.first_dial {
        cap(&mut d.address, 64);
        cap(&mut d.result, 16);
        cap(&mut d.error, 512);
        if !d.timeout_s.is_finite() || d.timeout_s < 0.0 {
            d.timeout_s = 0.0;
        }
    }
    l
}

/// A node names only itself: each data listener it offers is on the address its connection
/// came from (`peer`) or on an address of the interface it names, one listener per address,
/// on a port that is neither 0 nor one of `forbidden` (the master and coordinator ports).
pub fn check_listeners(
    facts: &NodeFacts,
    listeners: &[Listener],
    peer: IpAddr,
    forbidden: &[u16],
) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for l in listeners {
        let shown = preflight_checks::net::host_port(&l.address, l.port);
        let Ok(ip) = l.address.parse::<IpAddr>() else {
            return Err(format!(
                "it advertises a data listener at {shown:?}, which is not an IP address"
            ));
        };
        let ip = crate::transport::gate::canonical(ip);
        if l.port == 0 || forbidden.contains(&l.port) {
            return Err(format!(
                "it advertises a data listener at {shown} on port {}, which no data listener uses (not 0, the master port or the coordinator's)",
                l.port
            ));
        }
        if ip.is_unspecified() || ip.is_multicast() || ip == IpAddr::from([255, 255, 255, 255]) {
            return Err(format!(
                "it advertises a data listener at {shown}, which is not a host address"
            ));
        }
        let own = ip == crate::transport::gate::canonical(peer)
            || facts
                .net
                .interfaces
                .iter()
                .filter(|i| i.name == l.interface)
                .flat_map(|i| i.ipv4.iter().chain(&i.ipv6))
                .any(|a| a.addr == ip);
        if !own {
            return Err(format!(
                "it advertises a data listener at {shown} ({}), an address that is neither the one it connected from ({peer}) nor one of {} in its own facts; a node may only offer its own addresses",
                l.interface, l.interface
            ));
        }
        if !seen.insert(ip) {
            return Err(format!(
                "it advertises more than one data listener on {ip}; a node offers one per address"
            ));
        }
    }
    Ok(())
}

/// The data listeners of `me` on the address another node connected from: that host joined as
/// someone else, and a listener there would send every node to it in `me`'s name. The caller
/// drops each and names it in `cluster.refused`.
pub fn stray_listeners(me: &JoinedNode, others: &[&JoinedNode]) -> Vec<(Listener, String)> {
    let own_conn = crate::transport::gate::canonical(me.peer.ip());
    let mut out = Vec::new();
    for l in &me.listeners {
        let Ok(ip) = l.address.parse::<IpAddr>() else {
            continue;
        };
        let ip = crate::transport::gate::canonical(ip);
        // Two nodes may report the same addresses (several ranks on one host share its
        // interfaces), so only the address another node connected from is taken.
        let taken = others
            .iter()
            .find(|o| crate::transport::gate::canonical(o.peer.ip()) == ip && ip != own_conn);
        if let Some(o) = taken {
            out.push((
                l.clone(),
                format!(
                    "its data listener {} is on an address of rank {} ({}); a node may only offer its own addresses",
                    preflight_checks::net::host_port(&l.address, l.port),
                    o.rank,
                    o.facts.hostname
                ),
            ));
        }
    }
    out
}

/// Joins in flight after the handshake: at most `cap` connections at once (sized to the
/// cluster: every node has one), of which at most [`JOINS_IN_FLIGHT`] are read at once; the
/// others wait for a reading slot (their bytes wait in the socket) until the deadline.
#[derive(Clone)]
pub struct JoinSlots(Arc<Slots>);

struct Slots {
    cap: usize,
    /// (in flight, being read)
    counts: Mutex<(usize, usize)>,
    freed: Condvar,
}

/// One join being read; its place is free again when it drops.
pub struct JoinSlot(Arc<Slots>);

/// Why no slot was given.
#[derive(Debug, PartialEq, Eq)]
pub enum NoSlot {
    /// `cap` authenticated connections were already in flight.
    Full(usize),
    /// No reading slot came free before the deadline.
    Late,
}

impl JoinSlots {
    pub fn new(cap: usize) -> JoinSlots {
        JoinSlots(Arc::new(Slots {
            cap: cap.max(JOINS_IN_FLIGHT),
            counts: Mutex::new((0, 0)),
            freed: Condvar::new(),
        }))
    }

    /// A reading slot, waiting until `until` at most; none at once when `cap` are in flight.
    pub fn take(&self, until: Instant) -> Result<JoinSlot, NoSlot> {
        let s = &*self.0;
        let mut c = s.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.0 >= s.cap {
            return Err(NoSlot::Full(s.cap));
        }
        c.0 += 1;
        while c.1 >= JOINS_IN_FLIGHT {
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                c.0 -= 1;
                return Err(NoSlot::Late);
            };
            c = s
                .freed
                .wait_timeout(c, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        c.1 += 1;
        Ok(JoinSlot(self.0.clone()))
    }
}

impl Drop for JoinSlot {
    fn drop(&mut self) {
        let s = &*self.0;
        let mut c = s.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.0 = c.0.saturating_sub(1);
        c.1 = c.1.saturating_sub(1);
        s.freed.notify_one();
    }
}

/// A stream read against one deadline for the whole message, not per read: a node that
/// trickles its join a byte at a time is cut off at the deadline.
pub struct Until<'a> {
    pub stream: &'a std::net::TcpStream,
    pub until: Instant,
}

impl std::io::Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self
            .until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))?;
        self.stream.set_read_timeout(Some(left))?;
        std::io::Read::read(&mut self.stream, buf)
    }
}

/// Fastest rate any link result may claim, rated speed unknown: 3.2 Tbit/s (no NIC, and no
/// socket between two processes on one host, moves more).
pub const MAX_GBIT_S: f64 = 3200.0;
/// How far above its interface's rated speed a measured throughput may be before it is
/// impossible (ranks on one host move data through memory, not the NIC).
pub const OVER_RATED: f64 = 16.0;
/// Longest round trip any link may report: ten minutes (every wait is shorter).
pub const MAX_RTT_US: f64 = 600e6;

/// What the sense check of a link needs of its two ends, indexed by rank once (owned, so a
/// phase can check each node's links as they arrive while the members are borrowed).
pub struct LinkSense {
    nodes: HashMap<u32, SenseNode>,
}

struct SenseNode {
    hostname: String,
    host_id: String,
    /// Rated speed of each interface, Gbit/s (known ones only).
    rated_gbit: Vec<(String, f64)>,
}

impl LinkSense {
    pub fn of(members: &[JoinedNode]) -> LinkSense {
        let nodes = members
            .iter()
            .map(|m| {
                let rated_gbit = m
                    .facts
                    .net
                    .interfaces
                    .iter()
                    .filter_map(|i| {
                        let s = i.speed_mbps.filter(|&s| s > 0)?;
                        Some((i.name.clone(), s as f64 / 1000.0))
                    })
                    .collect();
                let node = SenseNode {
                    hostname: m.facts.hostname.chars().take(64).collect(),
                    host_id: m.facts.host_id.clone(),
                    rated_gbit,
                };
                (m.rank, node)
            })
            .collect();
        LinkSense { nodes }
    }

    /// Checks every link result a node reported for sense: negative, non-finite or impossible
    /// values (a round trip past every wait, throughput far above the rated speed of the target
    /// interface, an MTU outside 68-65535) make the link `invalid`, naming the reporting node
    /// and the value, and the value is dropped so nothing downstream averages it.
    pub fn check(&self, links: &mut [LinkResult]) {
        for l in links.iter_mut() {
            let Some(from) = self.nodes.get(&l.from) else {
                continue;
            };
            let to = self.nodes.get(&l.to);
            let rated_gbit = to.and_then(|t| {
                t.rated_gbit
                    .iter()
                    .find(|(name, _)| *name == l.interface)
                    .map(|(_, g)| *g)
            });
            let same_host = to.is_some_and(|t| t.host_id == from.host_id);
            let ceiling = match rated_gbit {
                Some(r) if !same_host => (r * OVER_RATED).min(MAX_GBIT_S),
                _ => MAX_GBIT_S,
            };
            if let Some(why) = nonsense(l, ceiling) {
                let error = format!(
                    "rank {} ({}) reported {why} for its link to rank {} at {}; not a measurement",
                    l.from,
                    from.hostname,
                    l.to,
                    l.address.chars().take(64).collect::<String>()
                );
                l.result = LinkOutcome::Invalid;
                l.error = Some(error.into());
                l.rtt_us = None;
                l.rtt_p99_us = None;
                l.throughput_gbit_s = None;
                l.mtu = None;
            }
        }
    }
}

#[cfg(test)]
fn check_links(members: &[JoinedNode], links: &mut [LinkResult]) {
    LinkSense::of(members).check(links);
}

/// What is impossible about one link result, if anything.
fn nonsense(l: &LinkResult, ceiling_gbit: f64) -> Option<String> {
    for (name, v) in [
        ("a round trip", l.rtt_us.map(f64::from)),
        ("a p99 round trip", l.rtt_p99_us.map(f64::from)),
    ] {
        match v {
            Some(x) if !x.is_finite() || !(0.0..=MAX_RTT_US).contains(&x) => {
                return Some(format!("{name} of {x} µs"));
            }
            _ => {}
        }
    }
    if let Some(x) = l.throughput_gbit_s.map(f64::from) {
        if !x.is_finite() || x < 0.0 {
            return Some(format!("a throughput of {x} Gbit/s"));
        }
        if x > ceiling_gbit {
            return Some(format!(
                "a throughput of {x} Gbit/s, above the {ceiling_gbit} Gbit/s the link could carry"
            ));
        }
    }
    if let Some(m) = l.mtu {
        if !(68..=65535).contains(&m) {
            return Some(format!("an MTU of {m} (an IP path MTU is 68 to 65535)"));
        }
    }
    None
}

/// Every string and list in `v`, depth first; the first one over its limit is named by path.
fn walk(v: &Value, path: &str) -> Result<(), String> {
    match v {
        Value::String(s) if s.len() > MAX_STRING => Err(format!(
            "{path} is a string of {} bytes (at most {MAX_STRING})",
            s.len()
        )),
        Value::Array(items) if items.len() > MAX_ITEMS => Err(format!(
            "{path} lists {} items (at most {MAX_ITEMS})",
            items.len()
        )),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| walk(x, &format!("{path}[{i}]"))),
        Value::Object(map) if map.len() > MAX_ITEMS => Err(format!(
            "{path} has {} entries (at most {MAX_ITEMS})",
            map.len()
        )),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, x)| walk(x, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{IfAddr, Interface};

    fn iface(name: &str, addr: &str, prefix: u8, speed_mbps: Option<u64>) -> Interface {
        let addr: IpAddr = addr.parse().unwrap();
        let a = IfAddr { addr, prefix };
        Interface {
            name: name.into(),
            up: true,
            speed_mbps,
            ipv4: if addr.is_ipv4() { vec![a] } else { vec![] },
            ipv6: if addr.is_ipv6() { vec![a] } else { vec![] },
            ..Default::default()
        }
    }

    fn listener(interface: &str, address: &str, port: u16) -> Listener {
        Listener {
            interface: interface.into(),
            address: address.into(),
            port,
        }
    }

    fn joined(
        rank: u32,
        from: &str,
        ifaces: Vec<Interface>,
        listeners: Vec<Listener>,
    ) -> JoinedNode {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut facts = NodeFacts {
            hostname: format!("node{rank}"),
            host_id: format!("host{rank}"),
            ..Default::default()
        };
        facts.net.interfaces = ifaces;
        JoinedNode {
            rank,
            stream,
            peer: std::net::SocketAddr::new(from.parse().unwrap(), 40000),
            facts,
            listeners,
            whole_report: false,
            alive: true,
            lost: None,
        }
    }

    #[test]
    fn a_node_offers_only_its_own_addresses_on_real_ports() {
        let mut f = NodeFacts::default();
        f.net.interfaces = vec![
            iface("eth0", "10.200.0.2", 24, None),
            iface("ib0", "192.168.7.2", 24, None),
        ];
        let peer: IpAddr = "10.200.0.2".parse().unwrap();
        let forbidden = [29500, 29501];
        let honest = [
            listener("eth0", "10.200.0.2", 41000),
            listener("ib0", "192.168.7.2", 41001),
        ];
        assert_eq!(check_listeners(&f, &honest, peer, &forbidden), Ok(()));
        for (l, says) in [
            (
                listener("eth0", "10.200.0.77", 22),
                "neither the one it connected from",
            ),
            (listener("ib0", "10.200.0.2", 0), "port 0"),
            (listener("eth0", "10.200.0.2", 29500), "port 29500"),
            (listener("eth0", "10.200.0.2", 29501), "port 29501"),
            (listener("eth0", "0.0.0.0", 4000), "not a host address"),
            (listener("eth0", "ssh.example", 22), "not an IP address"),
            // The address is its own, but on another interface than it names.
            (
                listener("eth0", "192.168.7.2", 4000),
                "neither the one it connected from",
            ),
        ] {
            let e = check_listeners(&f, std::slice::from_ref(&l), peer, &forbidden).unwrap_err();
            assert!(e.contains(says), "{l:?}: {e}");
        }
        let twice = [
            listener("eth0", "10.200.0.2", 41000),
            listener("eth0", "10.200.0.2", 22),
        ];
        assert!(
            check_listeners(&f, &twice, peer, &forbidden)
                .unwrap_err()
                .contains("more than one")
        );
    }

    #[test]
    fn a_listener_on_another_nodes_connection_address_is_a_stray() {
        let a = joined(
            0,
            "10.200.0.1",
            vec![iface("eth0", "10.200.0.1", 24, None)],
            vec![],
        );
        // Rank 1: its connection address, an IB address, and rank 0's connection address
        // claimed on an interface of its own.
        let b = joined(
            1,
            "10.200.0.2",
            vec![
                iface("eth0", "10.200.0.2", 24, None),
                iface("ib0", "192.168.7.2", 24, None),
                iface("eth5", "10.200.0.1", 32, None),
            ],
            vec![
                listener("eth0", "10.200.0.2", 41000),
                listener("ib0", "192.168.7.2", 41001),
                listener("eth5", "10.200.0.1", 2222),
            ],
        );
        let strays = stray_listeners(&b, &[&a]);
        let ports: Vec<u16> = strays.iter().map(|(l, _)| l.port).collect();
        assert_eq!(ports, vec![2222], "{strays:?}");
        assert!(
            strays[0].1.contains("an address of rank 0 (node0)"),
            "{}",
            strays[0].1
        );
        assert!(stray_listeners(&a, &[&b]).is_empty());
        // Ranks on one host connect from the same address: their listeners there are theirs.
        let c = joined(
            2,
            "10.200.0.2",
            vec![],
            vec![listener("eth0", "10.200.0.2", 41002)],
        );
        assert!(stray_listeners(&c, &[&a, &b]).is_empty());
    }

    #[test]
    fn impossible_measurements_make_the_link_invalid_naming_the_peer() {
        let a = joined(
            0,
            "10.200.0.1",
            vec![iface("eth0", "10.200.0.1", 24, Some(10_000))],
            vec![],
        );
        let b = joined(
            1,
            "10.200.0.2",
            vec![iface("eth0", "10.200.0.2", 24, Some(10_000))],
            vec![],
        );
        let members = [a, b];
        let ok = LinkResult {
            from: 1,
            to: 0,
            interface: "eth0".into(),
            address: "10.200.0.1".into(),
            port: 4000,
            result: LinkOutcome::Ok,
            rtt_us: Some(40.0),
            rtt_p99_us: Some(90.0),
            throughput_gbit_s: Some(9.4),
            mtu: Some(1500),
            error: None,
            retries: 0,
            stalled: false,
            handshake: None,
        };
        let lies = [
            LinkResult {
                rtt_us: Some(-5.0),
                ..ok.clone()
            },
            LinkResult {
                rtt_p99_us: Some(1e30),
                ..ok.clone()
            },
            LinkResult {
                rtt_us: Some(f32::NAN),
                ..ok.clone()
            },
            LinkResult {
                throughput_gbit_s: Some(-1.0),
                ..ok.clone()
            },
            LinkResult {
                throughput_gbit_s: Some(f32::INFINITY),
                ..ok.clone()
            },
            // 10 Gbit/s rated: 400 Gbit/s is impossible.
            LinkResult {
                throughput_gbit_s: Some(400.0),
                ..ok.clone()
            },
            LinkResult {
                mtu: Some(4_294_967_295),
                ..ok.clone()
            },
            LinkResult {
                mtu: Some(67),
                ..ok.clone()
            },
        ];
        // A number past f32's range on the wire reads as infinite, and is a lie too.
        let wire: LinkResult = serde_json::from_str(r#"{"from":1,"rtt_p99_us":1e308}"#).unwrap();
        assert_eq!(wire.rtt_p99_us, Some(f32::INFINITY));
        let mut links: Vec<LinkResult> = lies.to_vec();
        links.push(LinkResult {
            rtt_p99_us: wire.rtt_p99_us,
            ..ok.clone()
        });
        links.push(ok.clone());
        check_links(&members, &mut links);
        assert_eq!(links.len(), lies.len() + 2);
        // Every lie, the wire's infinite one last, is invalid; the honest link stays as it was.
        for l in &links[..lies.len() + 1] {
            assert_eq!(l.result, LinkOutcome::Invalid, "{l:?}");
            let e = l.error.as_deref().unwrap();
            assert!(e.starts_with("rank 1 (node1) reported"), "{e}");
            assert_eq!((l.rtt_us, l.throughput_gbit_s, l.mtu), (None, None, None));
        }
        assert_eq!(links.last(), Some(&ok));
        // Ranks on one host move data through memory: only the absolute ceiling applies.
        let mut same = members;
        same[1].facts.host_id = "host0".into();
        let mut fast = vec![LinkResult {
            throughput_gbit_s: Some(60.0),
            ..ok.clone()
        }];
        check_links(&same, &mut fast);
        assert_eq!(fast[0].result, LinkOutcome::Ok);
    }

    #[test]
    fn join_slots_bound_the_joins_read_and_in_flight() {
        let slots = JoinSlots::new(JOINS_IN_FLIGHT + 1);
        let soon = Instant::now() + Duration::from_millis(300);
        let held: Vec<JoinSlot> = (0..JOINS_IN_FLIGHT)
            .map(|_| slots.take(soon).unwrap())
            .collect();
        // One more may wait for a reading slot, until the deadline; past the cap none waits.
        let waiter = {
            let slots = slots.clone();
            std::thread::spawn(move || slots.take(Instant::now() + Duration::from_secs(3)).is_ok())
        };
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            slots.take(soon).err(),
            Some(NoSlot::Full(JOINS_IN_FLIGHT + 1))
        );
        drop(held);
        assert!(waiter.join().unwrap());
        let started = Instant::now();
        let busy: Vec<JoinSlot> = (0..JOINS_IN_FLIGHT)
            .map(|_| slots.take(soon).unwrap())
            .collect();
        assert_eq!(
            slots
                .take(Instant::now() + Duration::from_millis(100))
                .err(),
            Some(NoSlot::Late)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(busy);
        assert!(slots.take(Instant::now()).is_ok());
    }

    #[test]
    fn too_many_addresses_are_refused() {
        let mut f = NodeFacts::default();
        let mut two = iface("eth0", "10.0.0.1", 24, None);
        two.ipv6 = vec![IfAddr {
            addr: "fd00::1".parse().unwrap(),
            prefix: 64,
        }];
        f.net.interfaces = vec![two.clone(); MAX_ADDRESSES / 2];
        assert_eq!(check_join(&f, &[]), Ok(()));
        f.net.interfaces.push(two);
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("258 interface addresses")
        );
    }

    #[test]
    fn honest_facts_pass_and_each_limit_names_its_field() {
        let mut f = NodeFacts {
            hostname: "gpu01".into(),
            ..Default::default()
        };
        assert!(check_join(&f, &[]).is_ok());
        f.hostname = "h".repeat(20 << 20);
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("hostname has 20971520 bytes")
        );
        f.hostname = "gpu01".into();
        f.net.interfaces = vec![Interface::default(); 20_000];
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("20000 network interfaces")
        );
        f.net.interfaces.clear();
        f.env.insert("X".into(), "v".repeat(MAX_STRING + 1));
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("facts.env.X is a string")
        );
        f.env.clear();
        let l = Listener {
            interface: "eth0".into(),
            address: "10.200.0.1".into(),
            port: 1,
        };
        assert!(
            check_join(&f, &vec![l; 65])
                .unwrap_err()
                .contains("65 data listeners")
        );
    }

    /// Nodes at the address cap: 64 interfaces of 4 addresses each, every one on a subnet of
    /// its own (the most candidate networks a node can seed).
    fn at_the_cap(rank: u32) -> NodeFacts {
        let mut f = NodeFacts {
            hostname: format!("node{rank}"),
            ..Default::default()
        };
        f.net.interfaces = (0..MAX_ADDRESSES / 4)
            .map(|i| {
                let mut x = iface(&format!("e{i}"), &format!("10.{i}.{rank}.1"), 24, None);
                x.ipv4.extend((1..4).map(|k| IfAddr {
                    addr: format!("1{k}.{i}.{rank}.1").parse().unwrap(),
                    prefix: 24,
                }));
                x
            })
            .collect();
        assert_eq!(check_join(&f, &[]), Ok(()));
        f
    }

    /// The candidate networks are found over every node's addresses: at the cluster's address
    /// budget (16 nodes at the per-node cap), one call stays well inside a phase (the 97,280
    /// addresses of one node the caps now refuse took about 10 s a call).
    #[test]
    fn discovery_over_the_address_budget_is_bounded() {
        assert_eq!(total_addresses(2), MIN_TOTAL_ADDRESSES);
        assert_eq!(total_addresses(1024), 32 * 1024);
        let n = (MIN_TOTAL_ADDRESSES / MAX_ADDRESSES) as u32;
        {
            let facts: Vec<NodeFacts> = (0..n).map(at_the_cap).collect();
            let refs: Vec<(u32, &NodeFacts)> = facts
                .iter()
                .enumerate()
                .map(|(r, f)| (r as u32, f))
                .collect();
            let started = Instant::now();
            let nets = preflight_checks::networks::discover(&refs, &[]);
            let took = started.elapsed();
            eprintln!(
                "discover: {n} nodes x {MAX_ADDRESSES} addresses: {} networks in {took:?}",
                nets.len()
            );
            assert!(took < Duration::from_secs(10), "{n} nodes: {took:?}");
        }
    }
}
