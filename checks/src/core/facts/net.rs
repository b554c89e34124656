//! Network facts: interfaces and addresses, how the master's name resolved, the idle-connection test.

use super::AddressOrigin;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The idle test one node ran: connections to its ring neighbour(s) on the chosen network,
/// opened and answered, held silent, then used again.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IdleTest {
    /// How long the connections were to stay silent (`--idle-test`), in seconds.
    pub idle_s: f64,
    /// How long a reused connection was given to answer, in seconds.
    pub answer_wait_s: f64,
    /// One entry per neighbour listener dialled.
    pub links: Vec<IdleLink>,
}

/// The connections held to one listener of a neighbour, and how they fared.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IdleLink {
    pub from: u32,
    pub to: u32,
    pub interface: String,
    pub address: String,
    pub port: u16,
    /// Connections opened, authenticated and answered before the silence.
    pub opened: u32,
    /// Of those, the ones that answered again after it.
    pub answered: u32,
    /// Seconds the connections actually stayed silent (the longest).
    pub silent_s: f64,
    /// What the first connection that failed after the silence gave; `ok` when all answered.
    pub outcome: IdleOutcome,
    /// The error text of that failure, or why none could be opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a held connection gave when it was used again.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum IdleOutcome {
    /// Every connection answered.
    #[default]
    Ok,
    /// Reset (`ECONNRESET`, `EPIPE`): something between the nodes forgot the connection and
    /// answered for the peer.
    Reset,
    /// Closed by the other side (a FIN) before it answered.
    Closed,
    /// No answer within the wait: the data was dropped on the way.
    NoAnswer,
    /// No connection could be opened in the first place (not an idle problem: the
    /// connectivity findings tell why).
    NotOpened,
}

impl IdleOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            IdleOutcome::Ok => "ok",
            IdleOutcome::Reset => "reset",
            IdleOutcome::Closed => "closed",
            IdleOutcome::NoAnswer => "no_answer",
            IdleOutcome::NotOpened => "not_opened",
        }
    }
}

/// What the master address resolved to on one node, and the address it joined through.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct MasterResolution {
    /// The master address as given (`--master-addr`, `MASTER_ADDR`, the endpoint's host).
    pub name: String,
    /// Every address it resolved to on this node, in the resolver's order.
    pub addrs: Vec<String>,
    /// The address (`host:port`) the join went through.
    pub joined_via: Option<String>,
    /// Seconds the name took to resolve on this node when it did not resolve at first (a
    /// Kubernetes headless Service publishes a pod's record only once it is ready); absent
    /// when it resolved at the first try.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_after_s: Option<f64>,
    /// What the resolver said while the name did not resolve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolve_error: Option<String>,
    /// The addresses the name led to that failed while another address of rank 0 worked, with
    /// what each gave; empty when the name's own addresses worked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<AddressTry>,
    /// The other name of rank 0's host that led to the address that worked (`node0.data`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worked_name: Option<String>,
    /// Where each address of `addrs` came from here (a hosts file line, DNS), in `addrs`'
    /// order; empty in facts of releases before it, and for an IP address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<AddressOrigin>,
    /// The name's own addresses dialled before the one the join went through, in the
    /// resolver's order, with what each gave (a stale first address that timed out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passed_over: Vec<AddressTry>,
}

/// One address a node dialled to reach rank 0, and what it gave.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct AddressTry {
    pub address: String,
    /// `refused`, `timeout`, `unreachable` or `error`.
    pub result: String,
    /// The error in words.
    pub error: String,
}

/// Network interfaces, sorted by index.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NetFacts {
    pub interfaces: Vec<Interface>,
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[serde(rename_all = "lowercase")]
pub enum IfKind {
    Physical,
    Bond,
    Bridge,
    Vlan,
    Veth,
    Docker,
    Loopback,
    Ipoib,
    #[default]
    Other,
}

impl IfKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IfKind::Physical => "physical",
            IfKind::Bond => "bond",
            IfKind::Bridge => "bridge",
            IfKind::Vlan => "vlan",
            IfKind::Veth => "veth",
            IfKind::Docker => "docker",
            IfKind::Loopback => "loopback",
            IfKind::Ipoib => "ipoib",
            IfKind::Other => "other",
        }
    }
}

/// An address with its prefix length.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl std::fmt::Display for IfAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Interface {
    pub name: String,
    pub index: u32,
    pub kind: IfKind,
    /// `operstate` from sysfs: "up", "down", "unknown", ...
    pub oper_state: String,
    /// Administratively up and carrier present (or operstate up/unknown with carrier).
    pub up: bool,
    /// `IFF_UP`: set up by the administrator (`ip link set dev X up`), when known.
    pub admin_up: Option<bool>,
    /// The link has a carrier (cable, peer, switch port up), when the kernel says.
    pub carrier: Option<bool>,
    pub mtu: Option<u32>,
    /// Rated speed in Mbit/s, when the driver reports one.
    pub speed_mbps: Option<u64>,
    pub mac: Option<String>,
    pub ipv4: Vec<IfAddr>,
    pub ipv6: Vec<IfAddr>,
    /// This interface carries the default route.
    pub default_route: bool,
    pub gateway: Option<IpAddr>,
    /// Bond or bridge this interface is enslaved to.
    pub master: Option<String>,
    /// Kernel driver (`mlx5_core`, `virtio_net`, ...), when known.
    pub driver: Option<String>,
    /// For a VLAN: the device it sits on (`bond0` for `bond0.100`).
    pub parent: Option<String>,
}

impl Interface {
    /// Virtual by the names and kinds NCCL users get bitten by.
    pub fn is_virtual(&self) -> bool {
        matches!(
            self.kind,
            IfKind::Veth | IfKind::Docker | IfKind::Loopback | IfKind::Bridge
        ) || is_virtual_name(&self.name)
    }

    /// Non-loopback IPv4 or global IPv6 addresses.
    pub fn usable_addrs(&self) -> Vec<IfAddr> {
        self.ipv4
            .iter()
            .chain(self.ipv6.iter())
            .filter(|a| is_usable_addr(&a.addr))
            .copied()
            .collect()
    }
}

/// Name prefixes of virtual interfaces NCCL should not use.
pub const VIRTUAL_PREFIXES: &[&str] = &[
    "docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "lo",
];

/// True when the name looks like a container/VM bridge or tunnel.
pub fn is_virtual_name(name: &str) -> bool {
    VIRTUAL_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Not loopback, not unspecified, not IPv6 link-local.
pub fn is_usable_addr(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => !a.is_loopback() && !a.is_unspecified() && !a.is_link_local(),
        IpAddr::V6(a) => {
            !a.is_loopback() && !a.is_unspecified() && (a.segments()[0] & 0xffc0) != 0xfe80
        }
    }
}
