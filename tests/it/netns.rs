//! Test hosts as network namespaces joined by bridges (root only; see DESIGN.md safety rules).
//!
//! A [`Cluster`] is a set of host namespaces plus one "switch" namespace holding one bridge per
//! network; every host interface is a veth whose other end is a port of that bridge. Nothing is
//! created in the root namespace except an idempotent `blackhole` route for 10.200.0.0/16, so no
//! test packet can leave the machine. Every namespace, `/etc/netns/<ns>` directory and process
//! the harness started is removed when the `Cluster` (or a [`Running`]) is dropped.
//!
//! Each host gets its own `TMPDIR` (`<tmp>/<cluster>/h<rank>`). When the `Cluster` is dropped,
//! after the harness's own port holders are stopped, nothing of the runs may be left: no
//! process in its namespaces, no listening TCP or bound UDP socket, no `preflight-*` entry in
//! a host's TMPDIR. Anything left fails the test (only logged when the test already panics).
//!
//! Each host runs its commands under `unshare --uts` with its own hostname and `NCCL_HOSTID`, and
//! sees an `/etc/hosts` (bind-mounted by `ip netns exec`) naming every test host.
//!
//! A test's own code can act from inside a host ([`Cluster::enter`]), and a run can watch the
//! peak memory of each node's process ([`PreflightRun::watch_memory`]).

use crate::common::INHERITED_ENV_TO_CLEAR;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The only address range the harness uses; blackholed in the root namespace.
pub const TEST_RANGE: &str = "10.200.0.0/16";
/// The port every scenario uses as torchrun's master port.
pub const MASTER_PORT: u16 = 29500;
/// Extra seconds, beyond `--timeout`, a node may take to give up and print its report.
pub const SLACK: Duration = Duration::from_secs(6);

const SKIP_MESSAGE: &str = "skipped: needs root for network namespaces";
const SETUP_COMMAND_LIMIT: Duration = Duration::from_secs(30);
const REAP_LIMIT: Duration = Duration::from_secs(3);
/// How long a process of a finished run may take to vanish before it counts as left behind.
const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);
/// How often a watched node's peak memory is read (see [`HighWater`]).
const MEMORY_POLL: Duration = Duration::from_millis(50);

static COUNTER: AtomicU32 = AtomicU32::new(0);
static BLACKHOLE: Once = Once::new();

/// A network: one bridge in the switch namespace and the /24 `10.200.<subnet>.0/24`.
#[derive(Debug, Clone)]
pub struct Net {
    name: String,
    subnet: u8,
    rate: Option<String>,
    mtu: Option<u32>,
    v6: bool,
}

impl Net {
    /// A network called `name` (only the tests' label) on `10.200.<subnet>.0/24`.
    pub fn new(name: &str, subnet: u8) -> Self {
        assert!(
            subnet != 255,
            "10.200.255.0/24 is kept for the fake docker0"
        );
        Net {
            name: name.to_string(),
            subnet,
            rate: None,
            mtu: None,
            v6: false,
        }
    }

    /// Makes this an IPv6-only network: the ULA `fd00:200:<subnet>::/64`, hosts at `::<rank + 1>`.
    pub fn v6(mut self) -> Self {
        self.v6 = true;
        self
    }

    /// Shapes every link of this network with `tc tbf` (e.g. "100mbit"), in both directions.
    pub fn rate(mut self, rate: &str) -> Self {
        self.rate = Some(rate.to_string());
        self
    }

    /// MTU of the bridge and of every veth end on this network.
    pub fn mtu(mut self, mtu: u32) -> Self {
        self.mtu = Some(mtu);
        self
    }
}

/// A test host: its hostname, its interface name on each network, and extras.
#[derive(Debug, Clone)]
pub struct Host {
    hostname: String,
    ifaces: Vec<(String, String)>,
    /// Networks on which this host's address is a /32 reached through the router's device route.
    host_routes: Vec<String>,
    mtus: Vec<(String, u32)>,
    bridges: Vec<(String, String)>,
}

impl Host {
    /// A host named `hostname`; its rank is its position in the cluster.
    pub fn new(hostname: &str) -> Self {
        Host {
            hostname: hostname.to_string(),
            ifaces: Vec::new(),
            host_routes: Vec::new(),
            mtus: Vec::new(),
            bridges: Vec::new(),
        }
    }

    /// Joins network `net` through an interface called `ifname` (<= 15 chars). The first
    /// network joined is the one the hostname resolves to.
    pub fn on(mut self, net: &str, ifname: &str) -> Self {
        assert!(ifname.len() <= 15, "interface name {ifname} is too long");
        self.ifaces.push((net.to_string(), ifname.to_string()));
        self
    }

    /// Joins `net` as a cloud VM does: the address is a /32 with a device route to the network's
    /// router (see [`ClusterBuilder::router`]) and everything else through it.
    pub fn on_slash32(mut self, net: &str, ifname: &str) -> Self {
        self.host_routes.push(net.to_string());
        self.on(net, ifname)
    }

    /// Overrides this host's MTU on `net` (its own end only, as a misconfigured node would).
    pub fn mtu(mut self, net: &str, mtu: u32) -> Self {
        self.mtus.push((net.to_string(), mtu));
        self
    }

    /// Adds an unconnected bridge `name` carrying `cidr` (must lie inside 10.200.0.0/16).
    pub fn bridge(mut self, name: &str, cidr: &str) -> Self {
        assert!(name.len() <= 15, "interface name {name} is too long");
        self.bridges.push((name.to_string(), cidr.to_string()));
        self
    }

    /// A `docker0` bridge with 10.200.255.1/24, the same on every host, connected to nothing.
    pub fn docker0(self) -> Self {
        self.bridge("docker0", "10.200.255.1/24")
    }
}

/// Describes a cluster before it exists; `build` creates it, or returns None to skip.
#[derive(Debug)]
pub struct ClusterBuilder {
    tag: String,
    nets: Vec<Net>,
    hosts: Vec<Host>,
    routers: Vec<Vec<String>>,
    tools: Vec<&'static str>,
}

impl ClusterBuilder {
    pub fn network(mut self, net: Net) -> Self {
        self.nets.push(net);
        self
    }

    pub fn host(mut self, host: Host) -> Self {
        self.hosts.push(host);
        self
    }

    /// A router namespace joined to each of `nets` at `.254` (`::fe` on IPv6), forwarding between
    /// them; every host on one of them gets a route to the others through it, as racks behind
    /// L3 switches or a cloud's routed subnets do.
    pub fn router(mut self, nets: &[&str]) -> Self {
        self.routers
            .push(nets.iter().map(|n| n.to_string()).collect());
        self
    }

    /// Tools beyond `ip` and `unshare` this test needs (e.g. "iptables", "python3", "tc").
    pub fn needs(mut self, tools: &[&'static str]) -> Self {
        self.tools.extend_from_slice(tools);
        self
    }

    /// Creates the namespaces, or returns None (printing why) when they cannot be made here.
    /// With `PREFLIGHT_REQUIRE_NETNS=1` the reason is a test failure instead.
    pub fn build(self) -> Option<Cluster> {
        let mut tools = vec!["ip", "unshare"];
        if self.nets.iter().any(|n| n.rate.is_some()) {
            tools.push("tc");
        }
        tools.extend(self.tools.iter().copied());
        if let Err(reason) = namespaces_usable(&tools) {
            skip_or_fail(&reason);
            return None;
        }
        self.validate();
        ensure_blackhole_route();
        if self.hosts.len() > 32 {
            raise_neigh_thresholds();
        }
        let cluster = Cluster::empty(&self.tag, self.nets, self.hosts, self.routers);
        cluster.create();
        Some(cluster)
    }

    fn validate(&self) {
        assert!(!self.hosts.is_empty(), "a cluster needs hosts");
        assert!(self.hosts.len() < 200, "at most 199 hosts");
        for net in self.routers.iter().flatten() {
            assert!(
                self.nets.iter().any(|n| &n.name == net),
                "a router names unknown network {net}"
            );
        }
        for host in &self.hosts {
            assert!(
                !host.ifaces.is_empty(),
                "{} joins no network",
                host.hostname
            );
            let named = host.ifaces.iter().map(|(n, _)| n);
            for net in named.chain(host.mtus.iter().map(|(n, _)| n)) {
                assert!(
                    self.nets.iter().any(|n| &n.name == net),
                    "{} names unknown network {net}",
                    host.hostname
                );
            }
            for net in &host.host_routes {
                assert!(
                    self.routers.iter().any(|r| r.contains(net)),
                    "{} has a /32 on {net}, which no router serves",
                    host.hostname
                );
            }
            for (_, cidr) in &host.bridges {
                assert!(
                    cidr.starts_with("10.200."),
                    "{cidr} is outside {TEST_RANGE}"
                );
            }
        }
    }
}

/// True when namespaces can be made here with `tools` installed; else prints why and returns
/// false (a test failure with `PREFLIGHT_REQUIRE_NETNS=1`). For tests that make their own.
pub fn usable(tools: &[&str]) -> bool {
    match namespaces_usable(tools) {
        Ok(()) => true,
        Err(reason) => {
            skip_or_fail(&reason);
            false
        }
    }
}

/// Why namespaces cannot be used here, if they cannot.
fn namespaces_usable(tools: &[&str]) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not running as root".to_string());
    }
    if let Some(missing) = tools.iter().find(|t| find_in_path(t).is_none()) {
        return Err(format!("`{missing}` is not installed"));
    }
    let probe = format!("pf-probe-{}-{}", std::process::id(), next_id());
    let add = bounded(ip(&["netns", "add", &probe]), SETUP_COMMAND_LIMIT);
    let _ = bounded(ip(&["netns", "del", &probe]), SETUP_COMMAND_LIMIT);
    match add {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`ip netns add` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("`ip netns add` could not run: {e}")),
    }
}

/// One kernel keeps every namespace's neighbour (ARP) entries under one cap
/// (`net.ipv4.neigh.default.gc_thresh3`, 1024 by default): a cluster of more than 32 namespaces
/// would overflow it, a fault no real cluster has. Raised (never lowered) before such a test.
fn raise_neigh_thresholds() {
    for (name, want) in [
        ("gc_thresh1", 8192u64),
        ("gc_thresh2", 32768),
        ("gc_thresh3", 65536),
    ] {
        for family in ["ipv4", "ipv6"] {
            let path = format!("/proc/sys/net/{family}/neigh/default/{name}");
            let now: u64 = std::fs::read_to_string(&path)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if now < want {
                let _ = std::fs::write(&path, want.to_string());
            }
        }
    }
}

fn skip_or_fail(reason: &str) {
    if std::env::var("PREFLIGHT_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("PREFLIGHT_REQUIRE_NETNS=1 but network-namespace tests cannot run: {reason}");
    }
    println!("{SKIP_MESSAGE} ({reason})");
    eprintln!("{SKIP_MESSAGE} ({reason})");
}

fn find_in_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

fn next_id() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Keeps test traffic for 10.200.0.0/16 from ever leaving the root namespace.
fn ensure_blackhole_route() {
    BLACKHOLE.call_once(|| {
        let out = bounded(
            ip(&["route", "replace", "blackhole", TEST_RANGE]),
            SETUP_COMMAND_LIMIT,
        );
        check_ok(&out, "ip route replace blackhole 10.200.0.0/16");
    });
}

fn ip(args: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    cmd
}

fn check_ok(out: &std::io::Result<Output>, what: &str) {
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`{what}` failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("`{what}` could not run: {e}"),
    }
}

/// Runs `cmd` to completion, killing it after `limit`; its output is captured.
fn bounded(mut cmd: Command, limit: Duration) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let stdout = Capture::start(child.stdout.take());
    let stderr = Capture::start(child.stderr.take());
    let status = wait_until(&mut child, Instant::now() + limit);
    let status = match status {
        Some(s) => s,
        None => {
            let _ = child.kill();
            child.wait()?
        }
    };
    Ok(Output {
        status,
        stdout: stdout.finish(),
        stderr: stderr.finish(),
    })
}

/// Polls `child` until it exits or `deadline` passes.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            _ => return None,
        }
    }
}

/// Kills `child` and reaps it, waiting at most `REAP_LIMIT`.
fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    let _ = wait_until(child, Instant::now() + REAP_LIMIT);
}

/// A pipe drained by a thread into a shared buffer that can be read while the process runs.
struct Capture {
    buf: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Capture {
    fn start<R: Read + Send + 'static>(pipe: Option<R>) -> Self {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let reader = pipe.map(|mut pipe| {
            let buf = Arc::clone(&buf);
            thread::spawn(move || {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut b) = buf.lock() {
                        b.extend_from_slice(&chunk[..n]);
                    }
                }
            })
        });
        Capture { buf, reader }
    }

    fn text(&self) -> String {
        self.buf
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// What was read, after giving the reader a bounded time to see end-of-file (a leftover
    /// grandchild may keep the pipe open; its output is then cut off, not waited for).
    fn finish(mut self) -> Vec<u8> {
        if let Some(reader) = self.reader.take() {
            let deadline = Instant::now() + REAP_LIMIT;
            while !reader.is_finished() && Instant::now() < deadline {
                thread::sleep(POLL);
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
        self.buf.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

/// The firewall verdict a blocking rule uses.
#[derive(Debug, Clone, Copy)]
pub enum Verdict {
    /// Packets vanish: connections time out.
    Drop,
    /// `REJECT --reject-with tcp-reset`: connections are refused.
    RejectTcpReset,
    /// `REJECT --reject-with icmp-port-unreachable`.
    RejectPortUnreachable,
}

impl Verdict {
    fn target(self) -> &'static [&'static str] {
        match self {
            Verdict::Drop => &["-j", "DROP"],
            Verdict::RejectTcpReset => &["-j", "REJECT", "--reject-with", "tcp-reset"],
            Verdict::RejectPortUnreachable => {
                &["-j", "REJECT", "--reject-with", "icmp-port-unreachable"]
            }
        }
    }
}

struct HostNs {
    ns: String,
    host: Host,
}

/// Live namespaces; everything is torn down on drop.
pub struct Cluster {
    id: String,
    switch_ns: String,
    nets: Vec<Net>,
    hosts: Vec<HostNs>,
    /// Each router's networks; router `i` lives in namespace `<id>-rt<i>`.
    routers: Vec<Vec<String>>,
    token: String,
    /// Holds every host's TMPDIR (`h<rank>`); removed on drop.
    tmp: PathBuf,
    created: Mutex<Vec<String>>,
    background: Mutex<Vec<Child>>,
}

impl Cluster {
    /// Starts describing a cluster; `tag` (a few letters) makes its names recognisable.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(tag: &str) -> ClusterBuilder {
        ClusterBuilder {
            tag: tag
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .take(12)
                .collect(),
            nets: Vec::new(),
            hosts: Vec::new(),
            routers: Vec::new(),
            tools: Vec::new(),
        }
    }

    /// `n` hosts `node0..` on one network `data` (10.200.1.0/24) through interface `ifname`.
    pub fn flat(tag: &str, n: usize, ifname: &str) -> ClusterBuilder {
        (0..n).fold(Cluster::new(tag).network(Net::new("data", 1)), |b, i| {
            b.host(Host::new(&format!("node{i}")).on("data", ifname))
        })
    }

    fn empty(tag: &str, nets: Vec<Net>, hosts: Vec<Host>, routers: Vec<Vec<String>>) -> Cluster {
        let id = format!("pf-{tag}-{}-{}", std::process::id(), next_id());
        let hosts = hosts
            .into_iter()
            .enumerate()
            .map(|(rank, host)| HostNs {
                ns: format!("{id}-h{rank}"),
                host,
            })
            .collect();
        Cluster {
            switch_ns: format!("{id}-sw"),
            token: format!("{id}-{}", token_salt()),
            tmp: std::env::temp_dir().join(&id),
            id,
            nets,
            hosts,
            routers,
            created: Mutex::new(Vec::new()),
            background: Mutex::new(Vec::new()),
        }
    }

    fn create(&self) {
        self.add_namespace(&self.switch_ns);
        for (k, net) in self.nets.iter().enumerate() {
            self.create_bridge(k, net);
        }
        for rank in 0..self.hosts.len() {
            let tmp = self.host_tmp(rank);
            if let Err(e) = std::fs::create_dir_all(&tmp) {
                panic!("cannot create {}: {e}", tmp.display());
            }
            self.add_namespace(&self.hosts[rank].ns);
            self.write_hosts_file(rank);
            for (net, ifname) in &self.hosts[rank].host.ifaces {
                self.connect(rank, net, ifname);
            }
            for (name, cidr) in &self.hosts[rank].host.bridges {
                let ns = &self.hosts[rank].ns;
                self.ip_in(ns, &["link", "add", "name", name, "type", "bridge"]);
                self.ip_in(ns, &["addr", "add", cidr, "dev", name]);
                self.ip_in(ns, &["link", "set", "dev", name, "up"]);
            }
        }
        for (i, nets) in self.routers.iter().enumerate() {
            self.create_router(i, nets);
        }
        for rank in 0..self.hosts.len() {
            self.add_routes(rank);
        }
    }

    fn router_ns(&self, i: usize) -> String {
        format!("{}-rt{i}", self.id)
    }

    /// The router's address on `net`: `.254`, or `::fe` on IPv6.
    pub fn gateway(&self, net: &str) -> String {
        let n = &self.nets[self.net_index(net)];
        if n.v6 {
            format!("fd00:200:{}::fe", n.subnet)
        } else {
            format!("10.200.{}.254", n.subnet)
        }
    }

    fn prefix(&self, net: &str) -> String {
        let n = &self.nets[self.net_index(net)];
        if n.v6 {
            format!("fd00:200:{}::/64", n.subnet)
        } else {
            format!("10.200.{}.0/24", n.subnet)
        }
    }

    /// Router `i`: a namespace with one port on each of its networks and forwarding on.
    fn create_router(&self, i: usize, nets: &[String]) {
        let ns = self.router_ns(i);
        self.add_namespace(&ns);
        for (j, net) in nets.iter().enumerate() {
            let k = self.net_index(net);
            let (ifname, port) = (format!("r{j}"), format!("rt{i}n{k}"));
            let sw = &self.switch_ns;
            self.ip_in(
                &ns,
                &[
                    "link", "add", "name", &ifname, "type", "veth", "peer", "name", &port, "netns",
                    sw,
                ],
            );
            self.ip_in(
                sw,
                &["link", "set", "dev", &port, "master", &format!("br{k}")],
            );
            self.ip_in(sw, &["link", "set", "dev", &port, "up"]);
            let len = if self.nets[k].v6 { 64 } else { 24 };
            let cidr = format!("{}/{len}", self.gateway(net));
            self.add_addr(&ns, self.nets[k].v6, &cidr, &ifname);
            self.ip_in(&ns, &["link", "set", "dev", &ifname, "up"]);
        }
        for key in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
            self.sysctl_in(&ns, key);
        }
    }

    fn sysctl_in(&self, ns: &str, key: &str) {
        check_ok(
            &bounded(
                ip(&["netns", "exec", ns, "sysctl", "-q", "-w", key]),
                SETUP_COMMAND_LIMIT,
            ),
            &format!("sysctl -w {key} (in {ns})"),
        );
    }

    fn add_addr(&self, ns: &str, v6: bool, cidr: &str, dev: &str) {
        if v6 {
            // No duplicate address detection: the address is usable at once.
            self.ip_in(ns, &["-6", "addr", "add", cidr, "dev", dev, "nodad"]);
        } else {
            self.ip_in(ns, &["addr", "add", cidr, "dev", dev]);
        }
    }

    /// Routes from host `rank` to the other networks of each router it shares a network with.
    fn add_routes(&self, rank: usize) {
        let host = &self.hosts[rank].host;
        let ns = &self.hosts[rank].ns;
        for (net, ifname) in &host.ifaces {
            let Some(router) = self.routers.iter().find(|r| r.contains(net)) else {
                continue;
            };
            let v6 = self.nets[self.net_index(net)].v6;
            let gw = self.gateway(net);
            let family = if v6 { "-6" } else { "-4" };
            let slash32 = host.host_routes.contains(net);
            if slash32 {
                self.ip_in(ns, &[family, "route", "add", &gw, "dev", ifname]);
            }
            for other in router.iter().filter(|o| *o != net || slash32) {
                if self.nets[self.net_index(other)].v6 != v6 {
                    continue;
                }
                let prefix = self.prefix(other);
                self.ip_in(
                    ns,
                    &[family, "route", "add", &prefix, "via", &gw, "dev", ifname],
                );
            }
        }
    }

    /// Shapes host `rank`'s link on `net` to `rate` both ways (`tc tbf` on its own interface
    /// and on its switch port): a slow NIC or a port that trained at a lower speed.
    pub fn shape_host(&self, rank: usize, net: &str, rate: &str) {
        let k = self.net_index(net);
        let ifname = self.ifname(rank, net).to_string();
        self.tc_in(&self.hosts[rank].ns, &ifname, rate);
        self.tc_in(&self.switch_ns, &format!("h{rank}n{k}"), rate);
    }

    /// Takes [`Cluster::shape_host`]'s shaping off again.
    pub fn unshape_host(&self, rank: usize, net: &str) {
        let k = self.net_index(net);
        let ifname = self.ifname(rank, net).to_string();
        for (ns, dev) in [
            (self.hosts[rank].ns.clone(), ifname),
            (self.switch_ns.clone(), format!("h{rank}n{k}")),
        ] {
            let cmd = ip(&[
                "netns", "exec", &ns, "tc", "qdisc", "del", "dev", &dev, "root",
            ]);
            check_ok(
                &bounded(cmd, SETUP_COMMAND_LIMIT),
                &format!("tc qdisc del dev {dev} root (in {ns})"),
            );
        }
    }

    /// Shapes only the traffic between hosts `a` and `b` on `net` to `rate`, both ways: on each
    /// end an `htb` qdisc whose class 1:2 (at `rate`) takes the packets to the other's address,
    /// every other packet going to class 1:1 at 40 Gbit/s (above what a veth carries here).
    /// With `one_way`, only `a -> b`.
    pub fn shape_pair(&self, a: usize, b: usize, net: &str, rate: &str, one_way: bool) {
        let ends: &[(usize, usize)] = if one_way {
            &[(a, b)]
        } else {
            &[(a, b), (b, a)]
        };
        for &(from, to) in ends {
            let ns = &self.hosts[from].ns;
            let dev = self.ifname(from, net).to_string();
            let dst = format!("{}/32", self.addr(to, net));
            // Pure ACKs (IP length under 128, no data) skip the slow class: the other way's
            // traffic is acknowledged at once, as on a path slow one way only.
            let steps: [Vec<&str>; 5] = [
                vec![
                    "qdisc", "add", "dev", &dev, "root", "handle", "1:", "htb", "default", "1",
                ],
                vec![
                    "class", "add", "dev", &dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                    "40gbit",
                ],
                vec![
                    "class", "add", "dev", &dev, "parent", "1:", "classid", "1:2", "htb", "rate",
                    rate, "ceil", rate,
                ],
                vec![
                    "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "prio", "1",
                    "u32", "match", "ip", "protocol", "6", "0xff", "match", "u16", "0x0000",
                    "0xff80", "at", "2", "flowid", "1:1",
                ],
                vec![
                    "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "prio", "2",
                    "u32", "match", "ip", "dst", &dst, "flowid", "1:2",
                ],
            ];
            for args in &steps {
                let mut cmd = ip(&["netns", "exec", ns, "tc"]);
                cmd.args(args);
                check_ok(
                    &bounded(cmd, SETUP_COMMAND_LIMIT),
                    &format!("tc {} (in {ns})", args.join(" ")),
                );
            }
        }
    }

    /// Shapes router `i`'s every port to `rate`: traffic between its networks (two racks
    /// behind one uplink) crosses it at that rate both ways, traffic inside each does not.
    pub fn shape_router(&self, i: usize, rate: &str) {
        let ns = self.router_ns(i);
        for j in 0..self.routers[i].len() {
            self.tc_in(&ns, &format!("r{j}"), rate);
        }
    }

    /// Makes router `i` a stateful firewall that forgets idle connections: its connection
    /// tracking expires an established TCP connection after `established_s` seconds of silence,
    /// does not pick up a connection in the middle (`nf_conntrack_tcp_loose=0`), and drops what
    /// it cannot match (`--ctstate INVALID -j DROP`), as a firewall or NAT with a short idle
    /// timeout does. Both sysctls are the router namespace's own (per network namespace in
    /// this kernel): nothing global changes, and they go with the namespace.
    pub fn forget_idle_on_router(&self, i: usize, established_s: u32) {
        let ns = self.router_ns(i);
        let timeout = format!("net.netfilter.nf_conntrack_tcp_timeout_established={established_s}");
        let steps: [Vec<&str>; 2] = [
            vec![
                "iptables",
                "-A",
                "FORWARD",
                "-m",
                "conntrack",
                "--ctstate",
                "INVALID",
                "-j",
                "DROP",
            ],
            vec![
                "sysctl",
                "-w",
                "net.netfilter.nf_conntrack_tcp_loose=0",
                timeout.as_str(),
            ],
        ];
        for args in &steps {
            let mut cmd = ip(&["netns", "exec", &ns]);
            cmd.args(args);
            check_ok(
                &bounded(cmd, SETUP_COMMAND_LIMIT),
                &format!("{} (in {ns})", args.join(" ")),
            );
        }
    }

    /// Gives host `rank` a second NIC `ifname` on `net`'s switch with the address `cidr` (inside
    /// 10.200.0.0/16): two NICs in one subnet, as a node with two ports on one fabric has.
    pub fn second_nic(&self, rank: usize, net: &str, ifname: &str, cidr: &str) {
        assert!(
            cidr.starts_with("10.200."),
            "{cidr} is outside the test range"
        );
        let k = self.net_index(net);
        let port = format!("h{rank}x{k}");
        let ns = &self.hosts[rank].ns;
        self.ip_in(
            ns,
            &[
                "link",
                "add",
                "name",
                ifname,
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                &self.switch_ns,
            ],
        );
        self.ip_in(
            &self.switch_ns,
            &["link", "set", "dev", &port, "master", &format!("br{k}")],
        );
        self.ip_in(&self.switch_ns, &["link", "set", "dev", &port, "up"]);
        self.add_addr(ns, false, cidr, ifname);
        self.ip_in(ns, &["link", "set", "dev", ifname, "up"]);
    }

    /// Takes host `rank`'s switch port on `net` down: its interface there loses carrier, as
    /// with a dead NIC or cable.
    pub fn cut(&self, rank: usize, net: &str) {
        let port = format!("h{rank}n{}", self.net_index(net));
        self.ip_in(&self.switch_ns, &["link", "set", "dev", &port, "down"]);
    }

    fn add_namespace(&self, ns: &str) {
        // Recorded first, so a half-made namespace is still deleted.
        if let Ok(mut created) = self.created.lock() {
            created.push(ns.to_string());
        }
        check_ok(
            &bounded(ip(&["netns", "add", ns]), SETUP_COMMAND_LIMIT),
            &format!("ip netns add {ns}"),
        );
        self.ip_in(ns, &["link", "set", "dev", "lo", "up"]);
    }

    fn ip_in(&self, ns: &str, args: &[&str]) {
        let mut full = vec!["-n", ns];
        full.extend_from_slice(args);
        check_ok(
            &bounded(ip(&full), SETUP_COMMAND_LIMIT),
            &format!("ip {}", full.join(" ")),
        );
    }

    fn tc_in(&self, ns: &str, dev: &str, rate: &str) {
        let mut cmd = ip(&["netns", "exec", ns, "tc", "qdisc", "add", "dev", dev]);
        cmd.args([
            "root", "tbf", "rate", rate, "burst", "256kb", "latency", "50ms",
        ]);
        check_ok(
            &bounded(cmd, SETUP_COMMAND_LIMIT),
            &format!("tc qdisc add dev {dev} root tbf rate {rate} (in {ns})"),
        );
    }

    fn create_bridge(&self, k: usize, net: &Net) {
        let br = format!("br{k}");
        self.ip_in(
            &self.switch_ns,
            &["link", "add", "name", &br, "type", "bridge"],
        );
        if let Some(mtu) = net.mtu {
            self.ip_in(
                &self.switch_ns,
                &["link", "set", "dev", &br, "mtu", &mtu.to_string()],
            );
        }
        self.ip_in(&self.switch_ns, &["link", "set", "dev", &br, "up"]);
    }

    /// One veth: `ifname` in the host namespace, `h<rank>n<k>` as a port of `br<k>`.
    fn connect(&self, rank: usize, net_name: &str, ifname: &str) {
        let k = self.net_index(net_name);
        let net = &self.nets[k];
        let ns = &self.hosts[rank].ns;
        let port = format!("h{rank}n{k}");
        let (sw, br) = (&self.switch_ns, format!("br{k}"));
        self.ip_in(
            ns,
            &[
                "link", "add", "name", ifname, "type", "veth", "peer", "name", &port, "netns", sw,
            ],
        );
        if let Some(mtu) = net.mtu {
            let mtu = mtu.to_string();
            self.ip_in(ns, &["link", "set", "dev", ifname, "mtu", &mtu]);
            self.ip_in(sw, &["link", "set", "dev", &port, "mtu", &mtu]);
        }
        if let Some(mtu) = self.host_mtu(rank, net_name) {
            self.ip_in(ns, &["link", "set", "dev", ifname, "mtu", &mtu.to_string()]);
        }
        self.ip_in(sw, &["link", "set", "dev", &port, "master", &br]);
        self.ip_in(sw, &["link", "set", "dev", &port, "up"]);
        let v6 = net.v6;
        let len = match (
            v6,
            self.hosts[rank]
                .host
                .host_routes
                .iter()
                .any(|n| n == net_name),
        ) {
            (false, true) => 32,
            (true, true) => 128,
            (false, false) => 24,
            (true, false) => 64,
        };
        let cidr = format!("{}/{len}", self.addr(rank, net_name));
        self.add_addr(ns, v6, &cidr, ifname);
        self.ip_in(ns, &["link", "set", "dev", ifname, "up"]);
        if let Some(rate) = &net.rate {
            self.tc_in(ns, ifname, rate);
            self.tc_in(sw, &port, rate);
        }
    }

    fn host_mtu(&self, rank: usize, net: &str) -> Option<u32> {
        let mtus = &self.hosts[rank].host.mtus;
        mtus.iter().rev().find(|(n, _)| n == net).map(|(_, m)| *m)
    }

    fn net_index(&self, net: &str) -> usize {
        self.nets
            .iter()
            .position(|n| n.name == net)
            .unwrap_or_else(|| panic!("unknown network {net}"))
    }

    /// Host `rank`'s private `/etc` entries: each file or folder there is mounted over its
    /// `/etc` namesake for the host's commands (`ip netns exec`), and deleted with the cluster.
    pub fn etc_of(&self, rank: usize) -> PathBuf {
        self.netns_etc(rank)
    }

    fn netns_etc(&self, rank: usize) -> PathBuf {
        Path::new("/etc/netns").join(&self.hosts[rank].ns)
    }

    /// `/etc/netns/<ns>/hosts`: localhost plus every test host on its first network.
    fn write_hosts_file(&self, rank: usize) {
        let mut text = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n");
        for (r, h) in self.hosts.iter().enumerate() {
            let primary = &h.host.ifaces[0].0;
            text.push_str(&format!("{}\t{}\n", self.addr(r, primary), h.host.hostname));
        }
        let dir = self.netns_etc(rank);
        let written =
            std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("hosts"), &text));
        if let Err(e) = written {
            panic!("cannot write {}: {e}", dir.display());
        }
    }

    /// Gives `addr` the names `names` in host `rank`'s `/etc/hosts` (the first is the canonical
    /// name, as `socket.getfqdn()` reads it), replacing every line that names one of them.
    pub fn name_host(&self, rank: usize, addr: &str, names: &[&str]) {
        assert!(
            addr.starts_with("10.200."),
            "{addr} is outside {TEST_RANGE}"
        );
        let path = self.netns_etc(rank).join("hosts");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut kept: String = text
            .lines()
            .filter(|l| !l.split_whitespace().skip(1).any(|w| names.contains(&w)))
            .map(|l| format!("{l}\n"))
            .collect();
        kept.push_str(&format!("{addr}\t{}\n", names.join(" ")));
        if let Err(e) = std::fs::write(&path, kept) {
            panic!("cannot write {}: {e}", path.display());
        }
    }

    /// Host `rank`'s own name resolves to loopback there (`127.0.1.1`, as Debian's installer
    /// writes it), the line that named its address dropped.
    pub fn name_loopback(&self, rank: usize) {
        let name = self.hostname(rank).to_string();
        self.unname_host(rank, &name);
        let path = self.netns_etc(rank).join("hosts");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&format!("127.0.1.1\t{name}\n"));
        if let Err(e) = std::fs::write(&path, text) {
            panic!("cannot write {}: {e}", path.display());
        }
    }

    /// Drops every line naming `name` from host `rank`'s `/etc/hosts` (the name no longer
    /// resolves there through the file).
    pub fn unname_host(&self, rank: usize, name: &str) {
        let path = self.netns_etc(rank).join("hosts");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let kept: String = text
            .lines()
            .filter(|l| !l.split_whitespace().skip(1).any(|w| w == name))
            .map(|l| format!("{l}\n"))
            .collect();
        if let Err(e) = std::fs::write(&path, kept) {
            panic!("cannot write {}: {e}", path.display());
        }
    }

    /// Puts `addr names...` first in host `rank`'s `/etc/hosts`: the reverse entry of `addr`
    /// there (what `gethostbyaddr` and Python's `socket.getfqdn()` read first).
    pub fn prepend_host(&self, rank: usize, addr: &str, names: &[&str]) {
        assert!(
            addr.starts_with("10.200."),
            "{addr} is outside {TEST_RANGE}"
        );
        let path = self.netns_etc(rank).join("hosts");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let text = format!("{addr}\t{}\n{text}", names.join(" "));
        if let Err(e) = std::fs::write(&path, text) {
            panic!("cannot write {}: {e}", path.display());
        }
    }

    /// Maps `name` to `addr` in host `rank`'s `/etc/hosts` only (a stale or wrong entry on one
    /// node), replacing the lines for `name` there. Later commands in that host see it.
    pub fn map_host(&self, rank: usize, name: &str, addr: &str) {
        self.name_host(rank, addr, &[name]);
    }

    /// Number of hosts.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The namespace of the host with this rank.
    pub fn ns(&self, rank: usize) -> &str {
        &self.hosts[rank].ns
    }

    /// The hostname (and `NCCL_HOSTID`) of the host with this rank.
    pub fn hostname(&self, rank: usize) -> &str {
        &self.hosts[rank].host.hostname
    }

    /// The host's address on `net`: 10.200.<subnet>.<rank + 1>, or fd00:200:<subnet>::<rank + 1>.
    pub fn addr(&self, rank: usize, net: &str) -> String {
        let n = &self.nets[self.net_index(net)];
        if n.v6 {
            format!("fd00:200:{}::{:x}", n.subnet, rank + 1)
        } else {
            format!("10.200.{}.{}", n.subnet, rank + 1)
        }
    }

    /// The host's interface name on `net`.
    pub fn ifname(&self, rank: usize, net: &str) -> &str {
        self.hosts[rank]
            .host
            .ifaces
            .iter()
            .find(|(n, _)| n == net)
            .map(|(_, i)| i.as_str())
            .unwrap_or_else(|| panic!("{} is not on {net}", self.hostname(rank)))
    }

    /// The shared secret the nodes are started with.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The host's own TMPDIR (every command run in it sees it).
    pub fn host_tmp(&self, rank: usize) -> PathBuf {
        self.tmp.join(format!("h{rank}"))
    }

    /// Every namespace this cluster made (hosts and switch).
    pub fn namespaces(&self) -> Vec<String> {
        self.created.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// `cmd` run inside a host as that host (own hostname, `NCCL_HOSTID`, /etc/hosts).
    fn host_command(&self, rank: usize, argv: &[&str]) -> Command {
        let mut cmd = ip(&[
            "netns",
            "exec",
            self.ns(rank),
            "unshare",
            "--uts",
            "sh",
            "-c",
        ]);
        cmd.arg(r#"hostname "$1" && NCCL_HOSTID="$1" && export NCCL_HOSTID && shift && exec "$@""#);
        cmd.arg("sh").arg(self.hostname(rank)).args(argv);
        for var in INHERITED_ENV_TO_CLEAR {
            cmd.env_remove(var);
        }
        cmd.env("TMPDIR", self.host_tmp(rank));
        cmd
    }

    /// Runs `argv` inside host `rank` (bounded to 30 s) and returns its output.
    pub fn exec(&self, rank: usize, argv: &[&str]) -> Output {
        match bounded(self.host_command(rank, argv), SETUP_COMMAND_LIMIT) {
            Ok(out) => out,
            Err(e) => panic!("cannot run {argv:?} in {}: {e}", self.ns(rank)),
        }
    }

    /// Runs `f` on a thread of this test process that has entered host `rank`'s network
    /// namespace (`setns`): its sockets, and those of the threads it starts, are that host's, so
    /// a peer written in the test talks to the others across the veths and the bridge.
    pub fn enter<T: Send>(&self, rank: usize, f: impl FnOnce() -> T + Send) -> T {
        let path = Path::new("/var/run/netns").join(self.ns(rank));
        thread::scope(|s| {
            let inside = s.spawn(|| {
                let ns = std::fs::File::open(&path)
                    .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
                // SAFETY: setns(2) on an open namespace file; it moves only this thread.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(
                    rc,
                    0,
                    "setns into {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                );
                f()
            });
            inside
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Runs every `(host, argv)` at once, each inside its host and bounded by `limit` (killed
    /// after it); the outputs in the order given.
    pub fn exec_all(
        &self,
        jobs: &[(usize, Vec<String>)],
        limit: Duration,
    ) -> Vec<std::io::Result<Output>> {
        thread::scope(|s| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|(rank, argv)| {
                    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                    let cmd = self.host_command(*rank, &argv);
                    s.spawn(move || bounded(cmd, limit))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(std::io::Error::other("the waiting thread panicked"))
                    })
                })
                .collect()
        })
    }

    /// Appends an iptables rule (`args` after `iptables`) inside host `rank`; panics on failure.
    pub fn iptables(&self, rank: usize, args: &[&str]) {
        let mut cmd = ip(&["netns", "exec", self.ns(rank), "iptables"]);
        cmd.args(args);
        check_ok(
            &bounded(cmd, SETUP_COMMAND_LIMIT),
            &format!("iptables {} (in {})", args.join(" "), self.ns(rank)),
        );
    }

    /// Blocks new TCP connections to `port` arriving at host `rank` from other hosts.
    pub fn block_port(&self, rank: usize, port: u16, verdict: Verdict) {
        let port = port.to_string();
        let mut rule = vec!["-A", "INPUT", "!", "-i", "lo", "-p", "tcp", "--syn"];
        rule.extend_from_slice(&["--dport", &port]);
        rule.extend_from_slice(verdict.target());
        self.iptables(rank, &rule);
    }

    /// Blocks new TCP connections to ports 1024..65535 of host `rank`, except `allowed`.
    pub fn block_high_ports(&self, rank: usize, allowed: u16, verdict: Verdict) {
        let allowed = allowed.to_string();
        self.iptables(
            rank,
            &[
                "-A", "INPUT", "!", "-i", "lo", "-p", "tcp", "--dport", &allowed, "-j", "ACCEPT",
            ],
        );
        let mut rule = vec!["-A", "INPUT", "!", "-i", "lo", "-p", "tcp", "--syn"];
        rule.extend_from_slice(&["--dport", "1024:65535"]);
        rule.extend_from_slice(verdict.target());
        self.iptables(rank, &rule);
    }

    /// Puts host `rank`'s runs behind NAT, as a container on a bridge network with one published
    /// port: an inner namespace on 10.200.`subnet`.0/24 (the host's side .1, the inner .2) whose
    /// connections out leave MASQUERADEd as the host's own address, and only `port` forwarded
    /// in (DNAT). Returns the inner namespace: run there with `wrap_on(rank, &["ip", "netns",
    /// "exec", inner])`. Deleted with the cluster.
    pub fn behind_nat(&self, rank: usize, subnet: u8, port: u16) -> String {
        let host = self.ns(rank).to_string();
        let inner = format!("{host}-in");
        self.add_namespace(&inner);
        let outer_if = format!("nat{rank}");
        self.ip_in(
            &host,
            &[
                "link", "add", "name", &outer_if, "type", "veth", "peer", "name", "eth0", "netns",
                &inner,
            ],
        );
        let net = format!("10.200.{subnet}");
        self.ip_in(
            &host,
            &["addr", "add", &format!("{net}.1/24"), "dev", &outer_if],
        );
        self.ip_in(&host, &["link", "set", "dev", &outer_if, "up"]);
        self.ip_in(
            &inner,
            &["addr", "add", &format!("{net}.2/24"), "dev", "eth0"],
        );
        self.ip_in(&inner, &["link", "set", "dev", "eth0", "up"]);
        self.ip_in(
            &inner,
            &["route", "add", "default", "via", &format!("{net}.1")],
        );
        self.sysctl_in(&host, "net.ipv4.ip_forward=1");
        let src = format!("{net}.0/24");
        self.iptables(
            rank,
            &[
                "-t",
                "nat",
                "-A",
                "POSTROUTING",
                "-s",
                &src,
                "-j",
                "MASQUERADE",
            ],
        );
        let to = format!("{net}.2:{port}");
        let port = port.to_string();
        self.iptables(
            rank,
            &[
                "-t",
                "nat",
                "-A",
                "PREROUTING",
                "!",
                "-i",
                &outer_if,
                "-p",
                "tcp",
                "--dport",
                &port,
                "-j",
                "DNAT",
                "--to-destination",
                &to,
            ],
        );
        inner
    }

    /// Starts a python3 process in host `rank` listening on 0.0.0.0:`port` (accepting nothing)
    /// and returns its pid once it listens. It is killed on drop.
    pub fn hold_port(&self, rank: usize, port: u16) -> u32 {
        let script = "import os,socket,sys,time\n\
                      s=socket.socket()\n\
                      s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                      s.bind(('0.0.0.0',int(sys.argv[1])))\n\
                      s.listen(16)\n\
                      print('listening',os.getpid(),flush=True)\n\
                      time.sleep(600)\n";
        let mut cmd = self.host_command(rank, &["python3", "-c", script, &port.to_string()]);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot start a port holder in {}: {e}", self.ns(rank)),
        };
        let stdout = child.stdout.take();
        self.keep_in_background(child);
        let pid = first_line_within(stdout, Duration::from_secs(10))
            .and_then(|line| line.strip_prefix("listening ")?.trim().parse().ok());
        pid.unwrap_or_else(|| panic!("port holder on {port} in {} never listened", self.ns(rank)))
    }

    fn keep_in_background(&self, child: Child) {
        if let Ok(mut bg) = self.background.lock() {
            bg.push(child);
        }
    }

    /// How `preflight cluster` is started on the hosts; see [`PreflightRun`].
    pub fn preflight(&self) -> PreflightRun<'_> {
        PreflightRun {
            cluster: self,
            ranks: (0..self.len()).collect(),
            nnodes: self.len(),
            master_net: self.hosts[0].host.ifaces[0].0.clone(),
            master_port: MASTER_PORT,
            timeout_s: 10,
            quick: true,
            default_timing: false,
            extra: Vec::new(),
            script: Vec::new(),
            deadline: None,
            env: Vec::new(),
            claims: Vec::new(),
            late: Vec::new(),
            token: true,
            command: None,
            master_host: None,
            extra_on: Vec::new(),
            nnodes_on: Vec::new(),
            wrap_on: Vec::new(),
            watch_memory: false,
        }
    }

    /// Every host runs `preflight cluster ... --timeout=<timeout_s> --quick <extra>`; see
    /// [`PreflightRun::run`].
    pub fn run_preflight_all(&self, timeout_s: u64, extra: &[&str]) -> Vec<NodeRun> {
        self.preflight().timeout(timeout_s).args(extra).run()
    }

    /// Kills every process left in the namespace (bounded) and deletes it.
    fn remove_namespace(ns: &str) {
        for _ in 0..3 {
            let pids = namespace_pids(ns);
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: plain syscall on a pid `ip netns pids` reported inside our namespace.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            thread::sleep(Duration::from_millis(100));
        }
        let _ = bounded(ip(&["netns", "del", ns]), SETUP_COMMAND_LIMIT);
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(ns));
    }
}

impl Cluster {
    /// What the runs left behind, once the harness's own background processes are gone:
    /// processes and sockets in the namespaces, `preflight-*` entries in the hosts' TMPDIRs.
    fn leftovers(&self) -> Vec<String> {
        let namespaces = self.namespaces();
        let deadline = Instant::now() + LEFTOVER_GRACE;
        let procs = loop {
            let procs: Vec<(&String, i32)> = namespaces
                .iter()
                .flat_map(|ns| namespace_pids(ns).into_iter().map(move |p| (ns, p)))
                .collect();
            if procs.is_empty() || Instant::now() >= deadline {
                break procs;
            }
            thread::sleep(POLL);
        };
        let mut left: Vec<String> = procs
            .into_iter()
            .map(|(ns, pid)| format!("process {pid} ({}) in {ns}", cmdline(pid)))
            .collect();
        for ns in &namespaces {
            left.extend(
                namespace_sockets(ns)
                    .into_iter()
                    .map(|s| format!("{s} in {ns}")),
            );
        }
        for rank in 0..self.hosts.len() {
            let dir = self.host_tmp(rank);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            left.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("preflight-"))
                    .map(|n| format!("{} (temp file of rank {rank})", dir.join(n).display())),
            );
        }
        left
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(mut bg) = self.background.lock() {
            for child in bg.iter_mut() {
                kill_and_reap(child);
            }
        }
        let left = self.leftovers();
        for ns in self.namespaces().iter().rev() {
            Cluster::remove_namespace(ns);
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
        if !left.is_empty() {
            let msg = format!(
                "cluster {} left behind (now removed):\n  {}",
                self.id,
                left.join("\n  ")
            );
            // Failing while the test already unwinds would abort the whole test binary.
            if thread::panicking() {
                eprintln!("{msg}");
            } else {
                panic!("{msg}");
            }
        }
    }
}

/// A process's command line, for messages.
fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw)
        .replace('\0', " ")
        .trim()
        .to_string()
}

/// Listening TCP and bound UDP sockets inside network namespace `ns`, from its `/proc/net`.
fn namespace_sockets(ns: &str) -> Vec<String> {
    let script = "for f in tcp tcp6 udp udp6; do echo \"# $f\"; cat /proc/net/$f 2>/dev/null; done";
    let Ok(out) = bounded(
        ip(&["netns", "exec", ns, "sh", "-c", script]),
        SETUP_COMMAND_LIMIT,
    ) else {
        return vec![format!("(cannot list the sockets of {ns})")];
    };
    parse_sockets(&String::from_utf8_lossy(&out.stdout))
}

/// `# tcp` sections of `/proc/net/{tcp,tcp6,udp,udp6}` -> "tcp listening on 0100007F:29500".
fn parse_sockets(text: &str) -> Vec<String> {
    let mut kind = "";
    let mut found = Vec::new();
    for line in text.lines() {
        if let Some(k) = line.strip_prefix("# ") {
            kind = if k.starts_with("tcp") { "tcp" } else { "udp" };
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st ...; the header's first field is "sl".
        let (Some(local), Some(state)) = (fields.get(1), fields.get(3)) else {
            continue;
        };
        if fields[0] == "sl" {
            continue;
        }
        let port = local
            .rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
            .unwrap_or(0);
        let addr = local.rsplit_once(':').map_or(*local, |(a, _)| a);
        match kind {
            // 0A: TCP_LISTEN; connections left in TIME_WAIT are the kernel's, not a process's.
            "tcp" if *state == "0A" => found.push(format!("tcp listening on {addr}:{port}")),
            "udp" => found.push(format!("udp bound to {addr}:{port}")),
            _ => {}
        }
    }
    found
}

/// Pids of processes inside network namespace `ns` (`ip netns pids`); empty on any error.
fn namespace_pids(ns: &str) -> Vec<i32> {
    match bounded(ip(&["netns", "pids", ns]), SETUP_COMMAND_LIMIT) {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .filter(|&p| p > 1)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Reads the first line of `pipe` from a thread, giving up after `limit`.
fn first_line_within<R: Read + Send + 'static>(pipe: Option<R>, limit: Duration) -> Option<String> {
    let pipe = pipe?;
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let mut reader = BufReader::new(pipe);
        if reader.read_line(&mut line).is_ok() {
            let _ = tx.send(line);
        }
        // Keep draining so the writer never blocks on a full pipe.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    rx.recv_timeout(limit).ok()
}

fn token_salt() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// One `preflight cluster` invocation across hosts, built up then `start`ed or `run`.
pub struct PreflightRun<'a> {
    cluster: &'a Cluster,
    ranks: Vec<usize>,
    nnodes: usize,
    master_net: String,
    master_port: u16,
    timeout_s: u64,
    quick: bool,
    default_timing: bool,
    extra: Vec<String>,
    script: Vec<String>,
    deadline: Option<Duration>,
    env: Vec<(usize, String, String)>,
    /// Host index -> the rank it claims (default: its index).
    claims: Vec<(usize, usize)>,
    /// Host index -> how long after the first node it starts.
    late: Vec<(usize, Duration)>,
    /// Pass the cluster's `--token` (default); false runs with no secret source at all.
    token: bool,
    /// Every host runs `preflight` with exactly these words instead (see [`PreflightRun::command`]).
    command: Option<Vec<String>>,
    /// `--master-addr` as given (a name, say) in place of rank 0's address.
    master_host: Option<String>,
    /// Host index -> flags for that host only, after the standard ones.
    extra_on: Vec<(usize, String)>,
    /// Host index -> its own `--nnodes` (a node started with another count).
    nnodes_on: Vec<(usize, usize)>,
    /// Host index -> words put before its `preflight` (`prlimit --nofile=24:4096 --`).
    wrap_on: Vec<(usize, Vec<String>)>,
    /// Watch each node's peak memory (see [`PreflightRun::watch_memory`]).
    watch_memory: bool,
}

impl<'a> PreflightRun<'a> {
    /// `--nnodes` (default: the number of hosts).
    pub fn nnodes(mut self, n: usize) -> Self {
        self.nnodes = n;
        self
    }

    /// Host `host` runs with `--node-rank=rank` (a copy-paste slip: two hosts, one rank).
    pub fn claim(mut self, host: usize, rank: usize) -> Self {
        self.claims.push((host, rank));
        self
    }

    /// `--master-addr=<host>` on every node, as given (e.g. "node0"), in place of an address.
    pub fn master_host(mut self, host: &str) -> Self {
        self.master_host = Some(host.to_string());
        self
    }

    /// More flags for host `host` only, after the standard ones.
    pub fn args_on(mut self, host: usize, extra: &[&str]) -> Self {
        self.extra_on
            .extend(extra.iter().map(|s| (host, s.to_string())));
        self
    }

    /// Host `host` runs with `--nnodes=n` (the others keep the cluster's count).
    pub fn nnodes_on(mut self, host: usize, n: usize) -> Self {
        self.nnodes_on.push((host, n));
        self
    }

    /// No `--token`: the run has no secret source (`cluster.auth`).
    pub fn no_token(mut self) -> Self {
        self.token = false;
        self
    }

    /// Host `host` starts `after` the first node does.
    pub fn late(mut self, host: usize, after: Duration) -> Self {
        self.late.push((host, after));
        self
    }

    /// Sets an environment variable for one rank's process only.
    pub fn env_on(mut self, rank: usize, key: &str, value: &str) -> Self {
        self.env.push((rank, key.to_string(), value.to_string()));
        self
    }

    /// `--timeout` seconds (default 10).
    pub fn timeout(mut self, secs: u64) -> Self {
        self.timeout_s = secs;
        self
    }

    /// Start only these ranks (default all); `--nnodes` stays the cluster size.
    pub fn ranks(mut self, ranks: &[usize]) -> Self {
        self.ranks = ranks.to_vec();
        self
    }

    /// `--master-addr` is rank 0's address on this network (default: rank 0's first network).
    pub fn master_net(mut self, net: &str) -> Self {
        self.master_net = net.to_string();
        self
    }

    /// `--thorough` in place of `--quick`.
    pub fn thorough(mut self) -> Self {
        self.quick = false;
        self
    }

    /// Neither `--quick` nor `--thorough`: the default timing (1 s per throughput round, so a
    /// measurement on cores other tests share is less at the mercy of one busy moment).
    pub fn default_timing(mut self) -> Self {
        self.default_timing = true;
        self
    }

    /// Host `host` runs its `preflight` under `words` (a wrapper that execs the rest, such as
    /// `prlimit --nofile=24:4096 --`).
    pub fn wrap_on(mut self, host: usize, words: &[&str]) -> Self {
        self.wrap_on
            .push((host, words.iter().map(|s| s.to_string()).collect()));
        self
    }

    /// Reads each node's peak memory while it runs, for [`NodeRun::peak_rss_mib`].
    pub fn watch_memory(mut self) -> Self {
        self.watch_memory = true;
        self
    }

    /// More flags, after the standard ones.
    pub fn args(mut self, extra: &[&str]) -> Self {
        self.extra.extend(extra.iter().map(|s| s.to_string()));
        self
    }

    /// The training script and its words, passed after `--`.
    pub fn script(mut self, words: &[&str]) -> Self {
        self.script = words.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Hard limit on the whole run (default: 2 x timeout + 30 s); nodes still running then are
    /// killed and reported with `timed_out`.
    pub fn deadline(mut self, limit: Duration) -> Self {
        self.deadline = Some(limit);
        self
    }

    /// Every host runs `preflight WORDS` as given, in place of the generated `cluster` flags
    /// (no `--node-rank`, `--master-addr`, token or timeout added): a c10d join, `preflight torchrun`.
    pub fn command(mut self, words: &[&str]) -> Self {
        self.command = Some(words.iter().map(|s| s.to_string()).collect());
        self
    }

    /// The address given as `--master-addr`.
    pub fn master_addr(&self) -> String {
        self.master_host
            .clone()
            .unwrap_or_else(|| self.cluster.addr(0, &self.master_net))
    }

    fn argv(&self, rank: usize) -> Vec<String> {
        if let Some(words) = &self.command {
            let bin = env!("CARGO_BIN_EXE_preflight").to_string();
            return std::iter::once(bin).chain(words.iter().cloned()).collect();
        }
        let mut argv = vec![
            env!("CARGO_BIN_EXE_preflight").to_string(),
            "cluster".to_string(),
            format!(
                "--nnodes={}",
                self.nnodes_on
                    .iter()
                    .find(|(h, _)| *h == rank)
                    .map_or(self.nnodes, |(_, n)| *n)
            ),
            format!(
                "--node-rank={}",
                self.claims
                    .iter()
                    .find(|(h, _)| *h == rank)
                    .map_or(rank, |(_, r)| *r)
            ),
            format!("--master-addr={}", self.master_addr()),
            format!("--master-port={}", self.master_port),
            format!("--timeout={}", self.timeout_s),
            "--format=json".to_string(),
        ];
        if self.token {
            argv.push(format!("--token={}", self.cluster.token()));
        }
        if !self.default_timing {
            argv.push(if self.quick { "--quick" } else { "--thorough" }.to_string());
        }
        // The idle test holds the run for its silence: only the tests that ask for it pay.
        let asks_idle = |a: &String| a.starts_with("--idle-test");
        if !self.extra.iter().any(asks_idle) && !self.extra_on.iter().any(|(_, a)| asks_idle(a)) {
            argv.push("--idle-test=0".to_string());
        }
        argv.extend(self.extra.iter().cloned());
        argv.extend(
            self.extra_on
                .iter()
                .filter(|(h, _)| *h == rank)
                .map(|(_, a)| a.clone()),
        );
        if !self.script.is_empty() {
            argv.push("--".to_string());
            argv.extend(self.script.iter().cloned());
        }
        argv
    }

    /// Starts the nodes (rank 0 first, then the rest 100 ms later) and returns at once.
    pub fn start(self) -> Running<'a> {
        let deadline = self
            .deadline
            .unwrap_or(Duration::from_secs(2 * self.timeout_s + 30));
        let started = Instant::now();
        let mut nodes = Vec::new();
        let delay = |r: usize| self.late.iter().find(|(h, _)| *h == r).map(|(_, d)| *d);
        let (on_time, late): (Vec<usize>, Vec<usize>) =
            self.ranks.iter().partition(|r| delay(**r).is_none());
        for (i, &rank) in on_time.iter().enumerate() {
            if i == 1 {
                thread::sleep(Duration::from_millis(100));
            }
            nodes.push(self.spawn(rank));
        }
        let mut late = late;
        late.sort_by_key(|r| delay(*r));
        for rank in late {
            let at = started + delay(rank).unwrap_or_default();
            thread::sleep(at.saturating_duration_since(Instant::now()));
            nodes.push(self.spawn(rank));
        }
        Running {
            cluster: self.cluster,
            nodes,
            deadline: started + deadline,
        }
    }

    fn spawn(&self, rank: usize) -> Node {
        let mut argv = self.argv(rank);
        if let Some((_, wrap)) = self.wrap_on.iter().find(|(h, _)| *h == rank) {
            argv.splice(0..0, wrap.iter().cloned());
        }
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut cmd = self.cluster.host_command(rank, &argv);
        for (_, k, v) in self.env.iter().filter(|(r, _, _)| *r == rank) {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot start preflight for rank {rank}: {e}"),
        };
        Node {
            rank,
            stdout: Capture::start(child.stdout.take()),
            stderr: Capture::start(child.stderr.take()),
            memory: self.watch_memory.then(|| HighWater::watch(child.id())),
            child,
            started,
            ended: None,
        }
    }

    /// Starts every node and waits for all of them; see [`Running::finish`].
    pub fn run(self) -> Vec<NodeRun> {
        self.start().finish()
    }
}

struct Node {
    rank: usize,
    child: Child,
    stdout: Capture,
    stderr: Capture,
    memory: Option<HighWater>,
    started: Instant,
    ended: Option<(Option<ExitStatus>, Instant, bool)>,
}

/// Nodes in flight; dropping it kills those still running.
pub struct Running<'a> {
    cluster: &'a Cluster,
    nodes: Vec<Node>,
    deadline: Instant,
}

impl<'a> Running<'a> {
    /// Adds the nodes `later` started (another [`PreflightRun`] of the same cluster, after
    /// something this test did), so one `finish` waits for all and times each from its start.
    pub fn with(mut self, mut later: Running<'a>) -> Self {
        self.nodes.append(&mut later.nodes);
        self.deadline = self.deadline.max(later.deadline);
        self
    }

    fn node(&mut self, rank: usize) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.rank == rank)
            .unwrap_or_else(|| panic!("rank {rank} was not started"))
    }

    /// Waits (at most `limit`) until rank's stderr contains `needle` (case-insensitive).
    pub fn wait_stderr(&mut self, rank: usize, needle: &str, limit: Duration) -> bool {
        let needle = needle.to_lowercase();
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self
                .node(rank)
                .stderr
                .text()
                .to_lowercase()
                .contains(&needle)
            {
                return true;
            }
            thread::sleep(POLL);
        }
        false
    }

    /// Waits (at most `limit`) until host `rank`'s namespace holds at least `n` processes
    /// (its preflight and what that started).
    pub fn wait_processes(&self, rank: usize, n: usize, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if namespace_pids(self.cluster.ns(rank)).len() >= n {
                return true;
            }
            thread::sleep(POLL);
        }
        false
    }

    /// Sends `sig` to rank's preflight.
    pub fn signal(&mut self, rank: usize, sig: i32) {
        let pid = i32::try_from(self.node(rank).child.id()).expect("pid");
        // SAFETY: kill(2) on our own child, not yet reaped (finish reaps it).
        unsafe { libc::kill(pid, sig) };
    }

    /// SIGKILLs rank's preflight now.
    pub fn kill(&mut self, rank: usize) {
        let node = self.node(rank);
        kill_and_reap(&mut node.child);
        node.ended = Some((node.child.try_wait().ok().flatten(), Instant::now(), false));
    }

    /// Waits for `ranks` until the run's deadline, then kills every node still running (a
    /// stopped one, say) and returns the runs of `ranks`.
    pub fn finish_ranks(mut self, ranks: &[usize]) -> Vec<NodeRun> {
        let deadline = self.deadline;
        let waiting = |n: &Node| ranks.contains(&n.rank) && n.ended.is_none();
        while Instant::now() < deadline && self.nodes.iter().any(waiting) {
            for node in self.nodes.iter_mut().filter(|n| n.ended.is_none()) {
                if let Ok(Some(status)) = node.child.try_wait() {
                    node.ended = Some((Some(status), Instant::now(), false));
                }
            }
            thread::sleep(POLL);
        }
        for node in self.nodes.iter_mut().filter(|n| n.ended.is_none()) {
            let timed_out = ranks.contains(&node.rank);
            kill_and_reap(&mut node.child);
            node.ended = Some((None, Instant::now(), timed_out));
        }
        let runs: Vec<NodeRun> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Node::into_run)
            .collect();
        dump_runs(&self.cluster.id, &runs);
        runs.into_iter()
            .filter(|r| ranks.contains(&r.rank))
            .collect()
    }

    /// Waits for every node until the run's deadline, killing the ones still running then.
    pub fn finish(mut self) -> Vec<NodeRun> {
        let deadline = self.deadline;
        while Instant::now() < deadline && self.nodes.iter().any(|n| n.ended.is_none()) {
            for node in self.nodes.iter_mut().filter(|n| n.ended.is_none()) {
                if let Ok(Some(status)) = node.child.try_wait() {
                    node.ended = Some((Some(status), Instant::now(), false));
                }
            }
            thread::sleep(POLL);
        }
        for node in self.nodes.iter_mut().filter(|n| n.ended.is_none()) {
            kill_and_reap(&mut node.child);
            node.ended = Some((None, Instant::now(), true));
        }
        let runs: Vec<NodeRun> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Node::into_run)
            .collect();
        dump_runs(&self.cluster.id, &runs);
        runs
    }
}

/// With `PREFLIGHT_NETNS_DUMP=DIR`, writes each node's stdout and stderr to
/// `DIR/<cluster>-rank<R>.{json,stderr}` for reading after a failure.
fn dump_runs(cluster_id: &str, runs: &[NodeRun]) {
    let Some(dir) = std::env::var_os("PREFLIGHT_NETNS_DUMP").map(PathBuf::from) else {
        return;
    };
    let _ = std::fs::create_dir_all(&dir);
    for run in runs {
        let base = dir.join(format!("{cluster_id}-rank{}", run.rank));
        let _ = std::fs::write(base.with_extension("json"), &run.stdout);
        let _ = std::fs::write(base.with_extension("stderr"), &run.stderr);
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            kill_and_reap(&mut node.child);
        }
    }
}

impl Node {
    fn into_run(self) -> NodeRun {
        let (status, ended, timed_out) = self.ended.unwrap_or((None, Instant::now(), true));
        let stdout = String::from_utf8_lossy(&self.stdout.finish()).into_owned();
        let stderr = String::from_utf8_lossy(&self.stderr.finish()).into_owned();
        NodeRun {
            rank: self.rank,
            exit_code: status.and_then(|s| s.code()),
            json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
            stdout,
            stderr,
            peak_rss_mib: self.memory.and_then(HighWater::finish),
            elapsed: ended.duration_since(self.started),
            ended_at: ended,
            timed_out,
        }
    }
}

/// The peak resident memory of one node's process: its `VmHWM` (the kernel's high-water mark)
/// read from `/proc/<pid>/status` every 50 ms by a thread while it lives, the last read before
/// it exits included. `ip netns exec`, `unshare` and `sh` exec one into the next, so the pid
/// spawned is preflight's; reads count once its name is `preflight` (exec starts a new mark).
struct HighWater(JoinHandle<Option<u64>>);

impl HighWater {
    fn watch(pid: u32) -> Self {
        HighWater(thread::spawn(move || {
            let mut peak = None;
            while let Some((name, kib)) = high_water_kib(pid) {
                if name == "preflight" {
                    peak = peak.max(Some(kib));
                }
                thread::sleep(MEMORY_POLL);
            }
            peak
        }))
    }

    /// The peak in MiB once the process has ended; None when it never ran as `preflight`.
    fn finish(self) -> Option<f64> {
        self.0.join().ok().flatten().map(|kib| kib as f64 / 1024.0)
    }
}

/// `Name` and `VmHWM` (KiB) of a live process; None once it has exited (a zombie has no
/// `VmHWM`) or is gone.
fn high_water_kib(pid: u32) -> Option<(String, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key));
    let kib = field("VmHWM:")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((field("Name:")?.trim().to_string(), kib))
}

/// The run of rank `rank` among `runs`; panics when that rank did not run.
pub fn node(runs: &[NodeRun], rank: usize) -> &NodeRun {
    runs.iter()
        .find(|r| r.rank == rank)
        .unwrap_or_else(|| panic!("rank {rank} did not run"))
}

/// What one node's `preflight cluster` did.
#[derive(Debug, Clone)]
pub struct NodeRun {
    pub rank: usize,
    /// None when killed by a signal (or by the harness at the deadline).
    pub exit_code: Option<i32>,
    /// stdout parsed as JSON; `Value::Null` when it was not JSON (see `stdout`).
    pub json: Value,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident memory of its `preflight` process in MiB (`VmHWM`), when the run was
    /// started with [`PreflightRun::watch_memory`].
    pub peak_rss_mib: Option<f64>,
    /// From spawn to exit.
    pub elapsed: Duration,
    /// When it exited (or was killed).
    pub ended_at: Instant,
    /// The harness killed it at the run's deadline.
    pub timed_out: bool,
}

impl NodeRun {
    /// How long after `t` it ended (zero when it ended before).
    pub fn ended_after_start_of(&self, t: Instant) -> Duration {
        self.ended_at.saturating_duration_since(t)
    }

    /// Exit code, time, and the ends of stdout/stderr, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "rank {} exit {:?} after {:.1?}{}\n--- stdout (start) ---\n{}\n--- stderr (end) ---\n{}",
            self.rank,
            self.exit_code,
            self.elapsed,
            if self.timed_out {
                " (killed at deadline)"
            } else {
                ""
            },
            head(&self.stdout, 3000),
            tail(&self.stderr, 3000),
        )
    }

    /// The parsed report; panics with the raw output when stdout was not JSON.
    pub fn report(&self) -> &Value {
        assert!(
            self.json.is_object(),
            "stdout is not a JSON report:\n{}",
            self.describe()
        );
        &self.json
    }

    /// Findings of this report with `id`.
    pub fn findings(&self, id: &str) -> Vec<&Value> {
        self.report()["findings"]
            .as_array()
            .map(|all| all.iter().filter(|f| f["id"] == id).collect())
            .unwrap_or_default()
    }

    /// Links of this report.
    pub fn links(&self) -> Vec<&Value> {
        self.report()["links"]
            .as_array()
            .map(|all| all.iter().collect())
            .unwrap_or_default()
    }

    /// `recommendation` of this report.
    pub fn recommendation(&self) -> &Value {
        &self.report()["recommendation"]
    }
}

fn head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn tail(s: &str, n: usize) -> &str {
    let count = s.chars().count();
    match s.char_indices().nth(count.saturating_sub(n)) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

#[test]
fn netns_two_hosts_reach_each_other_and_cleanup_removes_everything() {
    let Some(cluster) = Cluster::flat("self", 2, "eth0")
        .needs(&["python3", "bash"])
        .build()
    else {
        return;
    };
    let hosts_file = cluster.netns_etc(1).join("hosts");
    assert!(hosts_file.is_file());

    let name = cluster.exec(1, &["hostname"]);
    assert_eq!(String::from_utf8_lossy(&name.stdout).trim(), "node1");
    let resolved = cluster.exec(1, &["getent", "hosts", "node0"]);
    assert!(
        String::from_utf8_lossy(&resolved.stdout).contains("10.200.1.1"),
        "node0 does not resolve to 10.200.1.1 inside node1: {resolved:?}"
    );
    let hostid = cluster.exec(0, &["sh", "-c", "echo $NCCL_HOSTID"]);
    assert_eq!(String::from_utf8_lossy(&hostid.stdout).trim(), "node0");

    let pid = cluster.hold_port(0, 4242);
    let connect = "exec 3<>/dev/tcp/10.200.1.1/4242";
    let reached = cluster.exec(1, &["timeout", "5", "bash", "-c", connect]);
    assert!(
        reached.status.success(),
        "node1 cannot reach node0: {reached:?}"
    );
    let closed = "exec 3<>/dev/tcp/10.200.1.1/4243";
    let refused = cluster.exec(1, &["timeout", "5", "bash", "-c", closed]);
    assert!(
        !refused.status.success(),
        "a closed port accepted: {refused:?}"
    );

    let namespaces = cluster.namespaces();
    assert_eq!(
        namespaces.len(),
        3,
        "two hosts and a switch: {namespaces:?}"
    );
    drop(cluster);

    let listed = bounded(ip(&["netns", "list"]), SETUP_COMMAND_LIMIT);
    let listed = listed.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    let listed = listed.unwrap_or_default();
    for ns in &namespaces {
        let still_listed = listed.split_whitespace().any(|w| w == ns);
        assert!(!still_listed, "{ns} survived cleanup");
        assert!(
            !Path::new("/etc/netns").join(ns).exists(),
            "/etc/netns/{ns} survived"
        );
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "port holder {pid} survived cleanup"
    );
}

/// Exit code of a 2-second TCP connect from `from` to `addr:port`: 0 ok, 124 timeout, else refused.
#[cfg(test)]
fn connect_code(cluster: &Cluster, from: usize, addr: &str, port: u16) -> Option<i32> {
    let script = format!("exec 3<>/dev/tcp/{addr}/{port}");
    let out = cluster.exec(from, &["timeout", "2", "bash", "-c", &script]);
    out.status.code()
}

#[test]
fn netns_faults_behave_as_injected() {
    let Some(c) = Cluster::new("faults")
        .network(Net::new("mgmt", 1).rate("100mbit"))
        .network(Net::new("data", 2).mtu(1500))
        .host(Host::new("node0").on("mgmt", "eno1").on("data", "bond0"))
        .host(Host::new("node1").on("mgmt", "eno1").on("data", "bond0"))
        .host(
            Host::new("node2")
                .on("mgmt", "eno1")
                .on("data", "eno2")
                .mtu("data", 9000)
                .docker0(),
        )
        .needs(&["iptables", "python3", "bash"])
        .build()
    else {
        return;
    };
    let data1 = c.addr(1, "data");
    let data2 = c.addr(2, "data");
    c.hold_port(1, 4000);
    c.hold_port(2, MASTER_PORT);
    c.hold_port(0, 4002);
    assert_eq!(connect_code(&c, 0, &data1, 4000), Some(0), "plain connect");
    c.block_port(1, 4000, Verdict::Drop);
    assert_eq!(
        connect_code(&c, 0, &data1, 4000),
        Some(124),
        "DROP must time out"
    );

    c.block_high_ports(2, MASTER_PORT, Verdict::RejectTcpReset);
    assert_eq!(
        connect_code(&c, 0, &data2, MASTER_PORT),
        Some(0),
        "allowed port"
    );
    assert_eq!(
        connect_code(&c, 0, &data2, 4001),
        Some(1),
        "REJECT must refuse"
    );
    // Outgoing connections from the filtered host still work (only SYNs are filtered).
    assert_eq!(
        connect_code(&c, 2, &c.addr(0, "data"), 4002),
        Some(0),
        "outgoing from node2"
    );

    let mtu = c.exec(2, &["cat", "/sys/class/net/eno2/mtu"]);
    assert_eq!(String::from_utf8_lossy(&mtu.stdout).trim(), "9000");
    let mtu = c.exec(0, &["cat", "/sys/class/net/bond0/mtu"]);
    assert_eq!(String::from_utf8_lossy(&mtu.stdout).trim(), "1500");
    let qdisc = c.exec(0, &["tc", "qdisc", "show", "dev", "eno1"]);
    assert!(
        String::from_utf8_lossy(&qdisc.stdout).contains("tbf"),
        "{qdisc:?}"
    );
    let docker = c.exec(2, &["ip", "-br", "addr", "show", "dev", "docker0"]);
    assert!(String::from_utf8_lossy(&docker.stdout).contains("10.200.255.1/24"));
    assert_eq!(c.ifname(2, "data"), "eno2");
}

#[test]
fn netns_drop_fails_the_test_when_a_run_leaves_anything_behind() {
    let Some(c) = Cluster::flat("leak", 1, "eth0").needs(&["python3"]).build() else {
        return;
    };
    let tmp = c.host_tmp(0);
    std::fs::write(tmp.join("preflight-nccl-leaked"), b"x").expect("write");
    // A stray listener, detached from the harness (as a leaked worker would be).
    let listen = "import socket,time\n\
                  s=socket.socket()\n\
                  s.bind(('0.0.0.0',4555))\n\
                  s.listen(1)\n\
                  time.sleep(60)\n";
    c.exec(
        0,
        &[
            "sh",
            "-c",
            "python3 -c \"$1\" >/dev/null 2>&1 &",
            "sh",
            listen,
        ],
    );
    let ns = c.ns(0).to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while namespace_sockets(&ns).is_empty() && Instant::now() < deadline {
        thread::sleep(POLL);
    }
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(c)));
    let err = failed.expect_err("the drop must fail the test");
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| format!("{err:?}"));
    assert!(msg.contains("python3 -c"), "{msg}");
    assert!(msg.contains("tcp listening on 00000000:4555"), "{msg}");
    assert!(msg.contains("preflight-nccl-leaked"), "{msg}");
    // It still cleaned up.
    assert!(!Path::new("/etc/netns").join(&ns).exists());
    assert!(!tmp.exists(), "{} survived", tmp.display());
}

#[test]
fn proc_net_sockets_parse_to_listeners_and_bound_udp() {
    let text = "# tcp\n  sl  local_address rem_address   st tx_queue rx_queue\n   \
                0: 00000000:7530 00000000:0000 0A 00000000:00000000\n   \
                1: 0100007F:7530 0100007F:D431 06 00000000:00000000\n\
                # tcp6\n# udp\n  sl  local_address rem_address   st\n \
                5: 00000000:1F90 00000000:0000 07 00000000:00000000\n";
    assert_eq!(
        parse_sockets(text),
        vec![
            "tcp listening on 00000000:30000".to_string(),
            "udp bound to 00000000:8080".to_string()
        ]
    );
}
