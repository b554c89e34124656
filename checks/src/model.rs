//! The data model: facts a node reports, findings the checks make, and the report (JSON contract v1).
//!
//! Everything here is plain serde data. Field names are a public contract
//! (`preflight.report.v1`): add fields freely, never rename or drop one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;

mod gpu_compute;
mod gpu_health;
mod label;
mod name_order;
mod rdma;
pub use gpu_compute::*;
pub use gpu_health::*;
pub use label::{Label, Labels};
pub use name_order::{AddressOrigin, FirstDial};
pub use rdma::*;

/// Schema name written into every report.
pub const SCHEMA: &str = "preflight.report.v1";

/// The outcome of one check. Ordered from best to worst, so `max` is the worst.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not applicable here (no InfiniBand, no GPUs expected).
    Skip,
    Pass,
    Warn,
    Fail,
    /// The check itself could not run.
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Skip => "skip",
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Error => "error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to fix a finding: a sentence and the exact commands.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct Fix {
    pub hint: String,
    pub commands: Vec<String>,
}

impl Fix {
    pub fn new(hint: impl Into<String>) -> Self {
        Fix {
            hint: hint.into(),
            commands: Vec::new(),
        }
    }

    pub fn command(mut self, cmd: impl Into<String>) -> Self {
        self.commands.push(cmd.into());
        self
    }
}

/// One judgment about one subject on one node (or the whole cluster when `node` is null).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct Finding {
    /// Stable id, `area.name` (see the README's list).
    pub id: String,
    pub status: Status,
    /// Rank of the node, or null for a cluster-wide finding.
    pub node: Option<u32>,
    /// What the finding is about: "29500", "mlx5_0/1", "eth0", "0->2 data0".
    pub subject: String,
    pub summary: String,
    /// Observed values the judgment rests on.
    pub evidence: Map<String, Value>,
    pub fix: Option<Fix>,
}

impl Finding {
    pub fn new(
        id: &str,
        status: Status,
        subject: impl Into<String>,
        summary: impl Into<String>,
    ) -> Self {
        Finding {
            id: id.to_string(),
            status,
            node: None,
            subject: subject.into(),
            summary: summary.into(),
            evidence: Map::new(),
            fix: None,
        }
    }

    /// Adds one evidence value.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.evidence.insert(key.to_string(), v);
        self
    }

    pub fn fix(mut self, fix: Fix) -> Self {
        self.fix = Some(fix);
        self
    }

    pub fn on_node(mut self, rank: Option<u32>) -> Self {
        self.node = rank;
        self
    }
}

/// Everything one node knows about itself. Written by `preflight facts`, read by `--facts`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NodeFacts {
    pub hostname: String,
    /// NCCL's idea of the host: `NCCL_HOSTID`, else hostname + boot id.
    pub host_id: String,
    pub boot_id: Option<String>,
    pub kernel: Option<String>,
    pub net: NetFacts,
    pub ib: IbFacts,
    pub gpu: GpuFacts,
    pub nccl: NcclFacts,
    pub ports: PortFacts,
    pub firewall: FirewallFacts,
    pub sys: SysFacts,
    /// Node settings that only bite at scale (sysctls, limits, cgroup pids, GIDs, /dev/shm
    /// leftovers); absent in facts of older releases, which the scale checks then leave alone.
    #[serde(skip_serializing_if = "ScaleFacts::is_unprobed")]
    pub scale: ScaleFacts,
    /// The environment variables that matter to a torchrun/NCCL job (NCCL_*, GLOO_*, CUDA_*, MASTER_*, ranks).
    pub env: BTreeMap<String, String>,
    /// How this node resolved the master address when it joined the coordinator (cluster runs
    /// only; absent in `preflight facts` and in reports of older releases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_resolution: Option<MasterResolution>,
    /// The address rank 0 saw this node's join come from (the peer address of its connection,
    /// an IPv4-mapped IPv6 written as IPv4); filled by rank 0, absent outside cluster runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joined_from: Option<String>,
    /// The connections this node held silent to its ring neighbour and what reusing them gave
    /// (`link.idle-timeout`); filled by rank 0 from the node's answer, absent outside cluster
    /// runs and when `--idle-test 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_test: Option<IdleTest>,
}

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
        ) || crate::net::is_virtual_name(&self.name)
    }

    /// Non-loopback IPv4 or global IPv6 addresses.
    pub fn usable_addrs(&self) -> Vec<IfAddr> {
        self.ipv4
            .iter()
            .chain(self.ipv6.iter())
            .filter(|a| crate::net::is_usable_addr(&a.addr))
            .copied()
            .collect()
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IbFacts {
    pub devices: Vec<IbDevice>,
    /// Path of libibverbs when installed.
    pub verbs_library: Option<String>,
    pub error: Option<String>,
    /// The PCIe path of each GPU, for the rail mapping (read only when RDMA devices exist).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_pci_paths: Vec<GpuPciPath>,
    /// `/dev/infiniband` as this process sees it (a container may lack it); None when not looked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_infiniband: Option<Vec<String>>,
}

impl IbFacts {
    /// `(device, port)` of every ACTIVE port, in device order.
    pub fn active_ports(&self) -> Vec<(&str, u32)> {
        self.devices
            .iter()
            .flat_map(|d| {
                d.ports
                    .iter()
                    .filter(|p| p.is_active())
                    .map(move |p| (d.name.as_str(), p.port))
            })
            .collect()
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IbDevice {
    pub name: String,
    pub hca_type: Option<String>,
    pub fw_ver: Option<String>,
    pub ports: Vec<IbPort>,
    /// Where the HCA sits on PCIe, for the rail mapping and the driver stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<RdmaPci>,
    /// The verbs character device (`uverbs0`) sysfs names for this HCA, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uverbs: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct IbPort {
    pub port: u32,
    /// "ACTIVE", "DOWN", "INIT", "ARMED" (sysfs `state` without the number).
    pub state: String,
    /// "LinkUp", "Disabled", "Polling" (sysfs `phys_state` without the number).
    pub phys_state: String,
    pub rate: Option<String>,
    pub rate_gbps: Option<f64>,
    /// "InfiniBand" or "Ethernet" (RoCE).
    pub link_layer: String,
    /// The net device this port maps to (ib0, ens1f0np0), if any.
    pub netdev: Option<String>,
    /// `counters/<name>` (IB PortCounters: some 4, 8 or 16 bits wide, saturating).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
    /// `hw_counters/<name>` the rail checks read (RoCE retransmissions and timeouts).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hw_counters: BTreeMap<String, u64>,
}

impl IbPort {
    pub fn is_active(&self) -> bool {
        self.state.eq_ignore_ascii_case("ACTIVE")
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuFacts {
    /// Why NVML could not be used (no driver, library missing); None when it loaded.
    pub nvml_error: Option<String>,
    pub driver_version: Option<String>,
    /// CUDA version the driver supports, "12.8".
    pub cuda_driver_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Node-level GPU health (kernel log XIDs, fabric manager, peermem, ACS, bandwidth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_health: Option<GpuNodeHealth>,
    /// Matrix-multiply speed and exactness per GPU (`check --thorough`, `--gemm`, `--burn`,
    /// and every node of `cluster`); absent when not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute: Option<GpuCompute>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub processes: Vec<GpuProcess>,
    pub mig_enabled: Option<bool>,
    /// UUIDs of this GPU's MIG devices ("MIG-..."), when MIG is enabled.
    pub mig_devices: Vec<String>,
    /// Why some fields are missing, when a per-GPU query failed.
    pub error: Option<String>,
    /// PCIe, memory, NVLink, clocks and fabric as NVML reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<GpuHealth>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_bytes: Option<u64>,
    pub command: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NcclFacts {
    /// The libnccl a PyTorch job here would load.
    pub library: Option<String>,
    /// "2.21.5"
    pub version: Option<String>,
    /// Where it was found: "python:/path/to/venv", "ld.so.cache", "LD_LIBRARY_PATH".
    pub source: Option<String>,
    /// torch version in the same Python environment, when found.
    pub torch_version: Option<String>,
    /// Every libnccl found, in search order.
    pub candidates: Vec<String>,
    pub error: Option<String>,
    /// How `version` was read: "ncclGetVersion", "file name" or "dist-info".
    pub version_source: Option<String>,
    /// Every libnccl found, in search order, with what is known about each.
    pub found: Vec<NcclCandidate>,
}

/// One libnccl found on the search path.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NcclCandidate {
    pub path: String,
    /// Where it was found: "python:/venv", "LD_LIBRARY_PATH", "ld.so.cache", "system".
    pub source: String,
    pub version: Option<String>,
    /// "ncclGetVersion", "file name" or "dist-info".
    pub version_source: Option<String>,
    /// torch version in the same Python environment, when there is one.
    pub torch_version: Option<String>,
    /// Why ncclGetVersion could not be called, when it was tried and failed.
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BindStatus {
    Free,
    InUse,
    Denied,
    /// The address family is not available (no IPv6).
    Unsupported,
    #[default]
    Error,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct BindResult {
    pub status: BindStatus,
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PortFacts {
    pub port: u16,
    /// Binding 0.0.0.0:port.
    pub ipv4: BindResult,
    /// Binding [::]:port (what torchrun does).
    pub ipv6: BindResult,
    /// Processes with a socket listening on the port.
    pub holders: Vec<PortHolder>,
    /// A nearby port that was verified bindable on both families.
    pub suggested_free: Option<u16>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PortHolder {
    pub pid: Option<u32>,
    pub command: Option<String>,
    pub local_address: String,
    pub inode: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct FirewallFacts {
    /// "nftables" or "iptables" when rules were read.
    pub backend: Option<String>,
    /// Why the rules could not be read (not root, tool missing).
    pub read_error: Option<String>,
    /// The INPUT hook chain(s) in evaluation order, flattened.
    pub input: Option<InputChain>,
    /// `ufw status` first line ("active"/"inactive") when ufw is installed.
    pub ufw: Option<String>,
    /// firewalld state ("running"/"not running") when installed.
    pub firewalld: Option<String>,
    /// The OUTPUT hook chain(s) in evaluation order, flattened: what decides the new
    /// connections this node opens (iptables OUTPUT, nftables output hooks; ufw's and
    /// firewalld's egress rules live there too). None when not read (old facts files).
    pub output: Option<InputChain>,
    /// The IPv6 input path (ip6tables INPUT, nftables `ip6`/`inet` input hooks); None when not read.
    pub input6: Option<InputChain>,
    /// The IPv6 output path (ip6tables OUTPUT, nftables `ip6`/`inet` output hooks); None when not read.
    pub output6: Option<InputChain>,
    /// ufw's default outgoing policy (`DEFAULT_OUTPUT_POLICY` in /etc/default/ufw:
    /// "accept", "drop", "reject") when ufw is installed.
    pub ufw_outgoing: Option<String>,
    /// The nat table's REDIRECT and DNAT rules on the output and prerouting hooks, in order:
    /// what sends this node's own connections (output) or the connections arriving at it
    /// (prerouting) somewhere other than where they were addressed (a mesh sidecar, a
    /// transparent proxy). Empty when none, or when not read (`read_error`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nat: Vec<NatRule>,
}

/// One REDIRECT or DNAT rule of the nat table.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NatRule {
    /// "output" (connections this node opens) or "prerouting" (connections arriving).
    pub hook: String,
    /// "REDIRECT" (to a port of this node) or "DNAT" (to another address).
    pub target: String,
    /// The rule's matches (protocol, ports, addresses, conditions); its action is `other`.
    pub matches: FwRule,
    /// Where it sends the connection (`--to-ports 15001`, `--to-destination 10.0.0.9:80`), when shown.
    pub to: Option<String>,
}

/// A simplified view of the input path: the policy and the rules that can decide a TCP packet.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct InputChain {
    /// "accept" or "drop".
    pub policy: String,
    pub rules: Vec<FwRule>,
    /// The base chain as the tool names it: "filter INPUT" (iptables), "inet filter input" (nftables).
    pub name: Option<String>,
    /// Further input-hook base chains (other nftables tables, later priority). A packet this
    /// chain accepts must still pass each of them; a drop anywhere is final.
    pub then: Vec<InputChain>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum FwAction {
    Accept,
    Drop,
    Reject,
    #[default]
    Other,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct FwRule {
    pub action: FwAction,
    /// "tcp", "udp", or None for any protocol.
    pub protocol: Option<String>,
    /// Destination port ranges (inclusive); empty means any port.
    pub dports: Vec<(u16, u16)>,
    /// Input interface match, if any ("lo", "eth0").
    pub in_interface: Option<String>,
    /// Output interface match, if any (OUTPUT chains: "lo", "eth0").
    pub out_interface: Option<String>,
    /// Source match, if any.
    pub source: Option<String>,
    /// Connection-tracking states matched ("ESTABLISHED,RELATED"), if any.
    pub ct_state: Option<String>,
    /// The rule as the tool printed it (nftables: rebuilt from `nft -j` in nft syntax).
    pub text: String,
    /// Destination address match, if any.
    pub destination: Option<String>,
    /// Other matches the checker cannot judge (`-m limit`, `--sport 67`, negations,
    /// `xt match conntrack`): a rule with any of them is conditional.
    pub conditions: Vec<String>,
    /// The user chain this rule was flattened from (`ufw-user-input`), None for the base chain.
    pub chain: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct SysFacts {
    /// Size of /dev/shm in bytes.
    pub shm_bytes: Option<u64>,
    pub shm_error: Option<String>,
    /// RLIMIT_MEMLOCK soft limit in bytes; None means unlimited.
    pub memlock_soft: Option<u64>,
    pub memlock_hard: Option<u64>,
    pub memlock_error: Option<String>,
    /// What this host's name resolves to, in resolver order.
    pub hostname_addrs: Vec<IpAddr>,
    pub hostname_error: Option<String>,
    /// What Python's `socket.getfqdn()` gives here (the canonical name of the hostname): the
    /// name torchrun's c10d rendezvous publishes for the node of rank 0 unless `--local-addr`
    /// is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fqdn: Option<String>,
    /// Cluster mode under c10d: what this node resolved rank 0's FQDN to (`cluster.fqdn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_fqdn: Option<NameLookup>,
    /// `net.netfilter.nf_conntrack_tcp_timeout_established` in seconds: how long this node's
    /// own connection tracking keeps a silent connection; None where conntrack is not loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conntrack_established_s: Option<u64>,
}

/// A name and what one node's resolver gave for it.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NameLookup {
    pub name: String,
    /// In the resolver's order (getaddrinfo's, after RFC 6724 sorting): the order a TCPStore
    /// client dials them in.
    pub addresses: Vec<IpAddr>,
    /// Why nothing was found (no such name, a slow DNS).
    pub error: Option<String>,
    /// Where each address came from (a hosts file line, DNS), in `addresses`' order; empty in
    /// facts of releases before it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<AddressOrigin>,
    /// The connect this node made to the first address on the master port when that address
    /// was not one it knew as rank 0's; absent when it was, or nothing resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_dial: Option<FirstDial>,
}

/// What the scale checks read (`checks/src/scale/`): every value is None when it could not be
/// read, with the reason in `errors` (keyed by the value's name).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct ScaleFacts {
    /// Set by the probe; false in facts of releases before these checks.
    pub probed: bool,
    /// `net.core.somaxconn`: the cap on every listen() backlog.
    pub somaxconn: Option<u64>,
    /// `net.ipv4.tcp_max_syn_backlog`.
    pub tcp_max_syn_backlog: Option<u64>,
    /// `net.ipv4.tcp_abort_on_overflow`: 1 turns a full accept queue into resets.
    pub tcp_abort_on_overflow: Option<u64>,
    /// `net.ipv4.ip_local_port_range` as [low, high].
    pub port_range: Option<[u32; 2]>,
    /// `net.ipv4.ip_local_reserved_ports` as [low, high] ranges.
    pub reserved_ports: Vec<[u32; 2]>,
    /// `net.ipv4.neigh.default.gc_thresh3`.
    pub neigh_gc_thresh3_v4: Option<u64>,
    /// `net.ipv6.neigh.default.gc_thresh3`.
    pub neigh_gc_thresh3_v6: Option<u64>,
    /// RLIMIT_NOFILE (soft, hard) a process started like this one gets; None = unlimited.
    pub nofile_soft: Option<u64>,
    pub nofile_hard: Option<u64>,
    /// RLIMIT_NPROC (soft, hard); None = unlimited.
    pub nproc_soft: Option<u64>,
    pub nproc_hard: Option<u64>,
    /// The real uid of this process (RLIMIT_NPROC does not bind uid 0).
    pub uid: Option<u32>,
    /// The tightest cgroup pids limit on the way to the root.
    pub pids: Option<PidsLimit>,
    /// NCCL shared-memory files in /dev/shm and whether a live process still holds them.
    pub nccl_shm: Vec<ShmFile>,
    /// Non-zero GIDs of RoCE (Ethernet link layer) ports.
    pub gids: Vec<GidEntry>,
    /// `arp_ignore` per interface, plus "all".
    pub arp_ignore: BTreeMap<String, u64>,
    /// `rp_filter` per interface, plus "all" (1 strict, 2 loose; the kernel uses the larger of
    /// "all" and the interface's own).
    pub rp_filter: BTreeMap<String, u64>,
    /// `ip rule show` lines; None when not read (fixture roots, no `ip`).
    pub ip_rules: Option<Vec<String>>,
    /// Why a value could not be read, keyed by its name.
    pub errors: BTreeMap<String, String>,
}

impl ScaleFacts {
    pub fn is_unprobed(&self) -> bool {
        !self.probed
    }
}

/// A cgroup's pids controller: `pids.max` (None = "max") and `pids.current`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct PidsLimit {
    /// The cgroup the limit is set on (as /proc/self/cgroup names it).
    pub cgroup: String,
    /// "v1" or "v2".
    pub version: String,
    pub max: Option<u64>,
    pub current: Option<u64>,
}

/// One NCCL shared-memory file under /dev/shm.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct ShmFile {
    pub name: String,
    pub bytes: u64,
    /// Processes that map it or hold it open; empty means its owners are gone (unless
    /// `unverified`).
    pub holders: Vec<u32>,
    /// The file's owner (uid).
    pub owner_uid: Option<u32>,
    /// Some process of the file's owner could not be read (another user's, without root), or the
    /// scan ran out of time: no holder found does not prove the owners gone.
    pub unverified: bool,
    /// Seconds since it was last modified, when known.
    pub age_s: Option<u64>,
}

/// One entry of a RoCE port's GID table.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct GidEntry {
    pub device: String,
    pub port: u32,
    pub index: u32,
    /// As sysfs writes it: `0000:0000:0000:0000:0000:ffff:0a02:0015`.
    pub gid: String,
    /// `gid_attrs/types/<index>`: "RoCE v2", "IB/RoCE v1".
    pub kind: Option<String>,
    /// `gid_attrs/ndevs/<index>`: the net device it belongs to.
    pub netdev: Option<String>,
}

// ----- cluster-level data (filled by `preflight cluster`) -----

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinkOutcome {
    Ok,
    Refused,
    Timeout,
    Unreachable,
    #[default]
    Error,
    /// The peer reported values that cannot be (negative, not finite, far above the link's
    /// rated speed, an MTU outside 68-65535): not a measurement, and never `ok`.
    Invalid,
}

impl LinkOutcome {
    /// The word the report writes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkOutcome::Ok => "ok",
            LinkOutcome::Refused => "refused",
            LinkOutcome::Timeout => "timeout",
            LinkOutcome::Unreachable => "unreachable",
            LinkOutcome::Error => "error",
            LinkOutcome::Invalid => "invalid",
        }
    }
}

/// One ordered pair's measurement on one address.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct LinkResult {
    pub from: u32,
    pub to: u32,
    /// Interface of `to` that owns `address`.
    #[schemars(with = "String")]
    pub interface: Label,
    #[schemars(with = "String")]
    pub address: Label,
    pub port: u16,
    pub result: LinkOutcome,
    // Microseconds, and Gbit/s below: 4 bytes each in memory (a thousand nodes hold a million
    // links), written to JSON as any number; one past f32's range reads as infinite (and the
    // coordinator's sense check calls it a lie) rather than failing the whole message.
    #[schemars(with = "Option<f64>")]
    #[serde(deserialize_with = "any_number_f32")]
    pub rtt_us: Option<f32>,
    #[schemars(with = "Option<f64>")]
    #[serde(deserialize_with = "any_number_f32")]
    pub rtt_p99_us: Option<f32>,
    #[schemars(with = "Option<f64>")]
    #[serde(deserialize_with = "any_number_f32")]
    pub throughput_gbit_s: Option<f32>,
    pub mtu: Option<u32>,
    #[schemars(with = "Option<String>")]
    pub error: Option<Label>,
    /// The connection was established but a large transfer on it made no progress (a
    /// write stalled): with `mtu` below the interfaces' MTU, an MTU black hole.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stalled: bool,
    /// Attempts beyond the first before this result (a refused or reset connect is retried
    /// with backoff; a link is called failed only after a retry).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub retries: u32,
    /// The TCP connection was accepted, then the preflight handshake failed: how (absent when
    /// the connect itself failed, or the handshake passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake: Option<HandshakeFailure>,
}

/// How a handshake failed on a connection that was accepted.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum HandshakeFailure {
    /// Nothing was sent back within the handshake's time.
    Silent,
    /// The connection was closed or reset before the handshake ended.
    Closed,
    /// An answer came that is not the dialled peer's preflight (other bytes, or another rank).
    Stranger,
}

impl HandshakeFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            HandshakeFailure::Silent => "silent",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::Stranger => "stranger",
        }
    }
}

/// A JSON number (or null) as an f32: out of range is infinite, never an error.
fn any_number_f32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.map(|v| v as f32))
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// How the measurements were run: what a reader needs to trust a verdict at any size.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Measurement {
    /// Ordered pairs × addresses connected and authenticated.
    pub links_total: u64,
    /// Of those, how many needed a retry before their result (ok or not).
    pub links_retried: u64,
    /// Connects one node had in flight at most (the pacing window).
    pub connect_window: u32,
    /// "all pairs" (small clusters) or "ring + K random matchings".
    pub throughput_schedule: String,
    /// Throughput rounds per network (each round: disjoint pairs, both directions at once).
    pub throughput_rounds: u32,
    /// Nodes that failed with many peers, tested again against a partner whose links all worked.
    pub second_pass: Vec<SecondPass>,
    /// Seconds each phase took, in order.
    pub phases: Vec<PhaseTime>,
}

/// One node re-tested against a partner whose every link worked.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct SecondPass {
    pub node: u32,
    pub partner: u32,
    /// The address tested (the node's, on the network where it failed).
    pub address: String,
    /// Peers it failed with in the first pass.
    pub failed_peers: u32,
    /// node -> partner and partner -> node in the second pass.
    pub outbound: LinkOutcome,
    pub inbound: LinkOutcome,
    /// "node": the node fails with a known-good partner too, so the node is the fault;
    /// "links": it works with the partner, so the first pass's failures are its links'.
    pub verdict: String,
}

/// One phase's wall time.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PhaseTime {
    pub phase: String,
    pub seconds: f64,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct CollectiveRow {
    pub bytes: u64,
    pub time_us: f64,
    pub algbw_gb_s: f64,
    pub busbw_gb_s: f64,
    pub wrong: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct CollectiveResult {
    pub op: String,
    pub transport: String,
    pub ranks: u32,
    pub env: BTreeMap<String, String>,
    pub net: Option<String>,
    pub rows: Vec<CollectiveRow>,
    /// Node ranks in ring order (TCP: the ring itself; NCCL: the node order).
    pub order: Vec<u32>,
    /// The address each node rank used (key: rank), on the network the run went over.
    pub addresses: BTreeMap<String, String>,
    /// The network's label ("eth0", "eth0/eth1" when names differ), as in the advice.
    pub network: Option<String>,
    /// TCP connections per ring neighbour (TCP), GPUs in total (NCCL: `ranks` counts GPUs).
    pub streams: Option<u32>,
    /// `"advice"` for the recommended environment, `"compare"` for `--compare-env`.
    pub config: String,
    /// Why the run could not finish, with the node that failed; rows hold what was measured before.
    pub error: Option<String>,
    /// Node ranks whose own result differed (a rank that saw wrong values or failed).
    pub failed_ranks: Vec<u32>,
    /// When NCCL used another network than the advice named: what it used and what was advised.
    pub net_mismatch: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct LaunchCommand {
    pub node_rank: u32,
    pub command: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Recommendation {
    pub env: BTreeMap<String, String>,
    /// Per-node values, keyed by rank, only where a node needs its own.
    pub node_env: BTreeMap<String, BTreeMap<String, String>>,
    pub master_addr: Option<String>,
    pub master_port: u16,
    pub launch: Vec<LaunchCommand>,
    pub reasons: Vec<String>,
    /// Single-node command (`torchrun --standalone ...`), in node mode.
    pub standalone: Option<String>,
    /// When the cluster fails: the nodes to train on now, those to leave out and why, and the
    /// launch on the rest (absent when the cluster passes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_set: Option<HealthySetAdvice>,
}

/// `recommendation.healthy_set`: the largest set of nodes the measurements show working together.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthySetAdvice {
    /// Nodes in the set.
    pub count: u32,
    /// Nodes the job expected.
    pub total: u32,
    /// The set's hosts in Slurm hostlist syntax (`node[02-04,06]`).
    pub hosts: String,
    /// Original ranks in the set, in their order within it (the master first).
    pub ranks: Vec<u32>,
    /// Nodes left out, with the finding ids that explain each.
    pub excluded: Vec<HealthyExclusion>,
    /// The excluded hosts in hostlist syntax (for `srun --exclude=` / `sbatch --exclude=`).
    pub exclude_hosts: String,
    pub master_addr: Option<String>,
    pub master_port: u16,
    /// Why the master is not rank 0, when it is not.
    pub master_reason: Option<String>,
    pub env: BTreeMap<String, String>,
    /// Per-node values, keyed by the original rank, only where a node needs its own.
    pub node_env: BTreeMap<String, BTreeMap<String, String>>,
    pub launch: Vec<HealthyLaunch>,
    /// True when no larger set meets the same rules; false when the search was cut short (best found).
    pub largest: bool,
    pub constraints: HealthyConstraints,
    /// The network the set connects on.
    pub network: Option<String>,
    /// The command that re-checks the set (`preflight cluster --hosts ...`).
    pub recheck: String,
    /// Why the set cannot be used, when `constraints.met` is false.
    pub why: Option<String>,
}

/// A node left out of the healthy set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthyExclusion {
    /// The node's original rank.
    pub node: u32,
    pub hostname: String,
    /// Finding ids that explain it (empty for a node left idle by `--nodes-multiple-of`).
    pub reasons: Vec<String>,
    /// It works but stays idle to round the set down (`--nodes-multiple-of`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
    /// Why, in words.
    pub why: String,
}

/// One node's launch on the healthy set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthyLaunch {
    /// The node's original rank.
    pub node: u32,
    pub hostname: String,
    /// Its rank within the set (torchrun's --node-rank).
    pub node_rank: u32,
    pub command: String,
}

/// The user's constraints on the healthy set, and whether it meets them.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthyConstraints {
    pub min_nodes: u32,
    pub multiple_of: u32,
    pub met: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct NodeEntry {
    pub rank: u32,
    pub hostname: String,
    pub facts: NodeFacts,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Node,
    Cluster,
}

/// The whole report. Renderers read only this.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    pub mode: Mode,
    pub status: Status,
    pub nodes: Vec<NodeEntry>,
    pub findings: Vec<Finding>,
    pub links: Vec<LinkResult>,
    pub collectives: Vec<CollectiveResult>,
    pub recommendation: Option<Recommendation>,
    /// How the ranks and the master were found (absent in node mode and older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementInfo>,
    /// Set on a node's copy of a cluster report too big to send whole: what was left out of
    /// it (rank 0's own report, and its `-o FILE`, are always whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<Trimmed>,
    /// How the cluster's measurements were run (cluster mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    /// Above 64 nodes: every pair's result and RTT per network, compactly; `links` then holds
    /// only the links that are not ok and a bounded sample of measured ones. Absent up to 64
    /// nodes, where `links` has one entry per ordered pair and address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_matrix: Option<LinkMatrix>,
}

/// Every ordered pair's result and RTT, per network, for a cluster above 64 nodes.
///
/// For each network, `ranks[i]` is the i-th row and column; the pair from `ranks[i]` to
/// `ranks[j]` is cell `i * ranks.len() + j` (row: from, column: to), measured on `to`'s
/// `addresses[j]` (owned by its interface `interfaces[j]`). Each matrix is the cells in that
/// order, deflated (RFC 1951, raw) and then base64 (RFC 4648, with padding).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct LinkMatrix {
    /// "deflate+base64": how `result` and `rtt_us` are encoded (see above).
    pub encoding: String,
    pub networks: Vec<MatrixNetwork>,
    /// Links in the whole measurement (every network), and how many of them `links` keeps.
    pub links_total: u64,
    pub links_kept: u64,
    /// Links not ok that are left out of `links` because a network had too many of them (their
    /// result and RTT are still in the matrix; the error text is not).
    pub failed_omitted: u64,
}

/// One network of a [`LinkMatrix`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct MatrixNetwork {
    /// The subnet of the target addresses (`10.0.0.0/24`), else the interface name.
    pub name: String,
    pub ranks: Vec<u32>,
    /// Per column: the address the pair connected to, and the interface owning it.
    pub addresses: Vec<String>,
    pub interfaces: Vec<String>,
    /// One byte per cell: 0 not measured (and the diagonal), 1 ok, 2 refused, 3 timeout,
    /// 4 unreachable, 5 error, 6 invalid.
    pub result: String,
    /// Two bytes per cell, little-endian: the RTT p50 in microseconds rounded, 0 when none
    /// was measured, 65535 for 65535 µs or more.
    pub rtt_us: String,
}

/// How the ranks and the master were found.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct PlacementInfo {
    /// "flags" | "--hosts" | "slurm" | "torchrun-env" | "c10d-join" (ranks assigned at join, as
    /// torchrun's c10d rendezvous does: the node owning the endpoint is rank 0, the others are
    /// numbered in the order they joined).
    pub source: String,
    /// With "c10d-join": the endpoint (HOST:PORT) whose owner is rank 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// With "c10d-join": this node never got a rank (no rank 0 answered), so its `nodes[]`
    /// entry carries 4294967295 and its findings name no node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unassigned: bool,
}

/// What a node's copy of the cluster report leaves out, and why.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct Trimmed {
    /// Links in the whole report.
    pub links_total: u64,
    /// Links kept here: those from or to this node.
    pub links_kept: u64,
    /// Nodes whose facts are left out here (their rank, hostname and findings stay).
    pub facts_omitted: u32,
    /// Why, in words, and where the whole report is.
    pub why: String,
}

/// Worst status of the findings, with `skip` counting as `pass`.
pub fn overall_status(findings: &[Finding]) -> Status {
    findings
        .iter()
        .map(|f| f.status)
        .max()
        .map(|s| if s == Status::Skip { Status::Pass } else { s })
        .unwrap_or(Status::Pass)
}
