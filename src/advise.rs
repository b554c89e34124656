//! Facts + findings -> Recommendation: the NCCL/Gloo environment, the master address and port, and torchrun commands.
//!
//! The rules are DESIGN.md's "How the advice is made"; every reason cites its evidence.

pub mod faster;
pub mod healthy;

use preflight_checks::model::{
    BindStatus, IfKind, Interface, LaunchCommand, NodeFacts, Recommendation,
};
use preflight_checks::net::candidate_interfaces;
use std::collections::BTreeMap;

/// What the advice needs beyond the facts.
#[derive(Clone, Debug, Default)]
pub struct AdviceInput {
    pub master_port: u16,
    /// `--nproc-per-node` when given; else the visible GPU count.
    pub nproc_per_node: Option<u32>,
    /// The user's script and its arguments (`train.py` when empty).
    pub script: Vec<String>,
    /// Nodes in the job when known (`check --nnodes`, the launcher's environment): the launch
    /// line's `--nnodes`; else `$NNODES` for the user to set.
    pub nnodes: Option<u32>,
}

/// The value for NCCL_SOCKET_IFNAME that selects exactly `name` among `all_names`:
/// the plain name when no other name starts with it, `=name` when one does.
pub fn nccl_ifname_value<'a>(name: &str, all_names: impl IntoIterator<Item = &'a str>) -> String {
    let shadowed = all_names
        .into_iter()
        .any(|other| other != name && other.starts_with(name));
    if shadowed {
        format!("={name}")
    } else {
        name.to_string()
    }
}

/// The InfiniBand decision for a set of nodes: `(NCCL_IB_DISABLE, NCCL_IB_HCA, reason)`.
pub fn ib_decision(nodes: &[&NodeFacts]) -> (String, Option<String>, String) {
    let active: Vec<Vec<String>> = nodes.iter().map(|f| active_ib_ports(f)).collect();
    let with_ib = active.iter().filter(|a| !a.is_empty()).count();
    let any_devices = nodes.iter().any(|f| !f.ib.devices.is_empty());
    if with_ib == nodes.len() && !nodes.is_empty() {
        // Only list ports that are ACTIVE on every node.
        let mut common: Vec<String> = active[0].clone();
        common.retain(|p| active.iter().all(|a| a.contains(p)));
        let list = if common.is_empty() {
            active[0].clone()
        } else {
            common
        };
        let device_names: Vec<String> = nodes
            .iter()
            .flat_map(|f| f.ib.devices.iter().map(|d| d.name.clone()))
            .collect();
        let exact = list.iter().any(|p| {
            let dev = p.split(':').next().unwrap_or(p);
            device_names.iter().any(|d| d != dev && d.starts_with(dev))
        });
        let hca = format!("{}{}", if exact { "=" } else { "" }, list.join(","));
        let reason = format!(
            "NCCL_IB_DISABLE=0: every node has an ACTIVE InfiniBand/RoCE port ({}); NCCL_IB_HCA lists only ACTIVE ports",
            list.join(", ")
        );
        ("0".into(), Some(hca), reason)
    } else if with_ib > 0 {
        let reason = format!(
            "NCCL_IB_DISABLE=1: only {with_ib} of {} nodes have an ACTIVE InfiniBand/RoCE port; NCCL would hang mixing IB and sockets",
            nodes.len()
        );
        ("1".into(), None, reason)
    } else if any_devices {
        ("1".into(), None, "NCCL_IB_DISABLE=1: InfiniBand/RoCE devices exist but no port is ACTIVE (see ib.port-down)".into())
    } else {
        (
            "1".into(),
            None,
            "NCCL_IB_DISABLE=1: no InfiniBand/RoCE device found (/sys/class/infiniband is empty)"
                .into(),
        )
    }
}

/// `mlx5_0:1`-style names of the ACTIVE ports on one node.
fn active_ib_ports(f: &NodeFacts) -> Vec<String> {
    f.ib.active_ports()
        .into_iter()
        .map(|(d, p)| format!("{d}:{p}"))
        .collect()
}

/// The script words for torchrun, quoted.
fn script_words(script: &[String]) -> String {
    if script.is_empty() {
        "train.py".to_string()
    } else {
        script
            .iter()
            .map(|w| crate::shell::quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A full torchrun command line for one node.
pub fn torchrun_command(
    env: &BTreeMap<String, String>,
    nnodes: &str,
    nproc: u32,
    node_rank: &str,
    master_addr: &str,
    master_port: u16,
    script: &[String],
) -> String {
    let prefix = crate::shell::env_prefix(env);
    let sep = if prefix.is_empty() { "" } else { " " };
    format!(
        "{prefix}{sep}torchrun --nnodes={nnodes} --nproc-per-node={nproc} --node-rank={node_rank} --master-addr={master_addr} --master-port={master_port} {}",
        script_words(script)
    )
}

/// A torchrun command line for a node of a c10d rendezvous: no `--node-rank` (torchrun assigns
/// ranks at join, the endpoint's host being rank 0), the same on every node but its environment.
pub fn torchrun_c10d_command(
    env: &BTreeMap<String, String>,
    nnodes: &str,
    nproc: u32,
    endpoint: &str,
    rdzv_id: Option<&str>,
    script: &[String],
) -> String {
    let prefix = crate::shell::env_prefix(env);
    let sep = if prefix.is_empty() { "" } else { " " };
    let id = rdzv_id
        .map(|id| format!(" --rdzv-id={}", crate::shell::quote(id)))
        .unwrap_or_default();
    format!(
        "{prefix}{sep}torchrun --nnodes={nnodes} --nproc-per-node={nproc} --rdzv-backend=c10d --rdzv-endpoint={}{id} {}",
        crate::shell::quote(endpoint),
        script_words(script)
    )
}

/// The first IPv4 address (else global IPv6) of an interface.
pub fn primary_addr(iface: &Interface) -> Option<String> {
    iface
        .usable_addrs()
        .into_iter()
        .min_by_key(|a| a.addr.is_ipv6())
        .map(|a| a.addr.to_string())
}

/// Why this interface was picked, citing what was observed.
fn interface_reason(chosen: &Interface, all: &[&Interface]) -> String {
    let speed = chosen
        .speed_mbps
        .map(|s| format!("{} Gb/s rated", s as f64 / 1000.0))
        .unwrap_or_else(|| "no rated speed reported".into());
    let others: Vec<String> = all
        .iter()
        .filter(|i| i.name != chosen.name)
        .map(|i| {
            let why = if i.is_virtual() {
                "virtual".to_string()
            } else {
                match i.speed_mbps {
                    Some(s) => format!("{} Gb/s", s as f64 / 1000.0),
                    None => "no rated speed".into(),
                }
            };
            format!("{} ({why})", i.name)
        })
        .collect();
    let kind = if chosen.kind == IfKind::Physical {
        "physical".to_string()
    } else {
        chosen.kind.as_str().to_string()
    };
    let mut s = format!(
        "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME: {} is up with {} ({kind}, {speed}, mtu {})",
        chosen.name,
        chosen
            .usable_addrs()
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        chosen
            .mtu
            .map(|m| m.to_string())
            .unwrap_or_else(|| "?".into())
    );
    if !others.is_empty() {
        s.push_str(&format!(
            "; other candidates ranked lower: {}",
            others.join(", ")
        ));
    }
    s
}

/// The master port to recommend: the requested one when it is free, else the verified free alternative.
fn master_port_for(facts: &NodeFacts, requested: u16, reasons: &mut Vec<String>) -> u16 {
    let p = &facts.ports;
    let in_use = p.ipv4.status == BindStatus::InUse || p.ipv6.status == BindStatus::InUse;
    if in_use {
        if let Some(free) = p.suggested_free {
            reasons.push(format!(
                "master_port {free}: {requested} is held on this node (see port.in-use); {free} was bound successfully on IPv4 and IPv6"
            ));
            return free;
        }
    } else if p.port == requested && p.ipv4.status == BindStatus::Free {
        reasons.push(format!(
            "master_port {requested}: bound successfully on 0.0.0.0 and [::] when the facts were taken"
        ));
    }
    requested
}

/// Advice for one node, acting as rank 0 of a job of unknown size.
pub fn advise_node(facts: &NodeFacts, input: &AdviceInput) -> Recommendation {
    let mut reasons = Vec::new();
    let mut env = BTreeMap::new();
    let ranked = candidate_interfaces(&facts.net);
    let chosen = ranked.first().copied();
    let names: Vec<&str> = facts
        .net
        .interfaces
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    let mut master_addr = None;
    match chosen {
        Some(iface) => {
            env.insert("NCCL_SOCKET_IFNAME".to_string(), nccl_ifname_value(&iface.name, names.iter().copied()));
            env.insert("GLOO_SOCKET_IFNAME".to_string(), iface.name.clone());
            reasons.push(interface_reason(iface, &ranked));
            if env["NCCL_SOCKET_IFNAME"].starts_with('=') {
                let shadowed: Vec<&str> =
                    names.iter().copied().filter(|n| *n != iface.name && n.starts_with(&iface.name)).collect();
                reasons.push(format!(
                    "NCCL_SOCKET_IFNAME uses '=' because the prefix '{}' would also match {}",
                    iface.name,
                    shadowed.join(", ")
                ));
            }
            master_addr = primary_addr(iface);
        }
        None => reasons.push(
            format!("no NCCL_SOCKET_IFNAME: no interface is up with a usable address (see net.no-interface); the launch line holds {RANK0_PLACEHOLDER} because this node has no address to give"),
        ),
    }
    let (ib_disable, hca, ib_reason) = ib_decision(&[facts]);
    let ib_on = ib_disable == "0";
    env.insert("NCCL_IB_DISABLE".to_string(), ib_disable);
    if let Some(hca) = hca {
        env.insert("NCCL_IB_HCA".to_string(), hca);
    }
    reasons.push(ib_reason);
    if let Some(r) = ib_on
        .then(|| preflight_checks::gpu_health::gpudirect_reason(&[facts]))
        .flatten()
    {
        reasons.push(r);
    }
    let master_port = master_port_for(facts, input.master_port, &mut reasons);
    let gpus = preflight_checks::visible_devices::visible_gpu_count(facts);
    let nproc = input.nproc_per_node.unwrap_or(gpus.max(1));
    if input.nproc_per_node.is_none() {
        reasons.push(if gpus > 0 {
            format!("--nproc-per-node={nproc}: {gpus} GPUs visible on this node")
        } else {
            "--nproc-per-node=1: no GPU visible on this node (CPU/gloo only)".to_string()
        });
    }
    let addr = master_addr
        .clone()
        .unwrap_or_else(|| RANK0_PLACEHOLDER.into());
    let nnodes = input
        .nnodes
        .map_or_else(|| "$NNODES".to_string(), |n| n.to_string());
    let launch = vec![LaunchCommand {
        node_rank: 0,
        command: torchrun_command(&env, &nnodes, nproc, "0", &addr, master_port, &input.script),
    }];
    let standalone = format!(
        "{} torchrun --standalone --nproc-per-node={nproc} {}",
        crate::shell::env_prefix(&env),
        script_words(&input.script)
    );
    Recommendation {
        env,
        node_env: BTreeMap::new(),
        master_addr,
        master_port,
        launch,
        reasons,
        standalone: Some(standalone),
        healthy_set: None,
        faster_set: None,
    }
}

/// What the cluster advice needs beyond the facts.
#[derive(Clone, Debug, Default)]
pub struct ClusterAdviceInput {
    pub nnodes: u32,
    pub master_port: u16,
    pub nproc_per_node: Option<u32>,
    pub script: Vec<String>,
    /// Variables set for every node over the advice (the faster `--compare-env` setting).
    pub env_override: BTreeMap<String, String>,
    /// Set when preflight's coordinator did not listen on the master port itself (under torchrun).
    pub coordinator_note: Option<String>,
    /// The master address the job was given (a name or an address) and what it resolved to
    /// on rank 0, when any.
    pub given_master: Option<(String, Vec<std::net::IpAddr>)>,
    /// Set when ranks were assigned at join (torchrun's c10d rendezvous): the launch keeps c10d.
    pub c10d: Option<C10dAdvice>,
    /// The per-rail NCCL pair tests as localised, when they ran: rails they blame leave
    /// `NCCL_IB_HCA`.
    pub rail_verdict: Option<preflight_checks::rails::localise::RailVerdict>,
}

/// The c10d rendezvous the ranks came from, for the launch commands and the reasons.
#[derive(Clone, Debug, Default)]
pub struct C10dAdvice {
    /// The endpoint as the nodes were given it (HOST:PORT); its owner was rank 0.
    pub endpoint: String,
    /// The job id for `--rdzv-id`, when there is one.
    pub rdzv_id: Option<String>,
}

/// When `addr` (rank 0's address on the chosen network) failed on the master port from some
/// node while every node joined through one other address of rank 0: that address, and the
/// nodes it failed from ("rank 1").
fn master_port_refused(nodes: &[(u32, &NodeFacts)], addr: &str) -> Option<(String, String)> {
    let failed: Vec<u32> = nodes
        .iter()
        .filter(|(_, f)| {
            f.master_resolution
                .as_ref()
                .is_some_and(|m| m.failed.iter().any(|t| t.address == addr))
        })
        .map(|(r, _)| *r)
        .collect();
    if failed.is_empty() {
        return None;
    }
    let mut via = nodes.iter().filter(|(r, _)| *r != 0).map(|(_, f)| {
        f.master_resolution
            .as_ref()
            .and_then(|m| m.joined_via.as_deref())
            .and_then(|v| v.parse::<std::net::SocketAddr>().ok())
            .map(|s| s.ip().to_string())
    });
    let first = via.next()??;
    if first == addr || !via.all(|v| v.as_deref() == Some(first.as_str())) {
        return None;
    }
    let ranks: Vec<String> = failed.iter().map(|r| format!("rank {r}")).collect();
    Some((first, ranks.join(", ")))
}

/// Advice for the whole cluster from every node's facts and the evaluated networks (best first).
pub fn advise_cluster(
    nodes: &[(u32, &NodeFacts)],
    evals: &[preflight_checks::networks::NetworkEval],
    input: &ClusterAdviceInput,
) -> Recommendation {
    let mut reasons = Vec::new();
    let mut env = BTreeMap::new();
    let mut per_rank: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
    let mut master_addr =
        choose_network(nodes, evals, input, &mut env, &mut per_rank, &mut reasons);
    hoist_shared(nodes, &mut env, &mut per_rank);
    if !per_rank.values().all(|e| e.is_empty()) {
        reasons.push("interface names differ across nodes: each node gets its own NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME in node_env rather than a list that could match a wrong interface somewhere".into());
    }
    let facts: Vec<&NodeFacts> = nodes.iter().map(|(_, f)| *f).collect();
    ib_env(nodes, &facts, input, &mut env, &mut per_rank, &mut reasons);
    for (k, v) in &input.env_override {
        env.insert(k.clone(), v.clone());
        for e in per_rank.values_mut() {
            e.remove(k);
        }
    }
    reasons.push(match &input.coordinator_note {
        Some(note) => format!(
            "master_port {}: kept from the job; {note}",
            input.master_port
        ),
        None => format!(
            "master_port {}: preflight's coordinator listened on it on rank 0 and every joined node reached it",
            input.master_port
        ),
    });
    if let Some(c) = &input.c10d {
        let host0 = nodes
            .iter()
            .find(|(r, _)| *r == 0)
            .map_or("rank 0", |(_, f)| f.hostname.as_str());
        reasons.push(format!(
            "ranks were assigned at join as torchrun's c10d rendezvous does: rank 0 owns the endpoint {} ({host0}: one of its addresses is one the endpoint's host resolves to), the others are numbered in the order they joined; the launch commands keep --rdzv-backend=c10d and no --node-rank, so torchrun assigns ranks the same way",
            c.endpoint
        ));
    }
    if let Some(given) = master_addr.clone()
        && let Some((joined, failed_on)) = master_port_refused(nodes, &given)
    {
        reasons.push(format!(
            "master_addr {joined}: rank 0's {given} on the chosen network failed on the master port {} from {failed_on} (cluster.master-elsewhere), while every node joined through {joined}; NCCL still uses the chosen network",
            input.master_port
        ));
        master_addr = Some(joined);
    }
    if master_addr.is_none() {
        let (addr, reason) = fallback_master(nodes, evals, input);
        master_addr = addr;
        reasons.push(reason);
    }
    let addr = master_addr
        .clone()
        .unwrap_or_else(|| RANK0_PLACEHOLDER.into());
    let min_gpus = nodes
        .iter()
        .map(|(_, f)| preflight_checks::visible_devices::visible_gpu_count(f))
        .min()
        .unwrap_or(0);
    let nproc = input.nproc_per_node.unwrap_or(min_gpus.max(1));
    let launch = launch_commands(nodes, &env, &per_rank, &addr, nproc, input);
    Recommendation {
        env,
        node_env: per_rank
            .into_iter()
            .filter(|(_, e)| !e.is_empty())
            .map(|(r, e)| (r.to_string(), e))
            .collect(),
        master_addr,
        master_port: input.master_port,
        launch,
        reasons,
        standalone: None,
        healthy_set: None,
        faster_set: None,
    }
}

/// Per-node and shared environment.
type Env = BTreeMap<String, String>;

/// The network NCCL and Gloo use (its interfaces per rank) and why, or why none can work;
/// returns rank 0's address on it.
fn choose_network(
    nodes: &[(u32, &NodeFacts)],
    evals: &[preflight_checks::networks::NetworkEval],
    input: &ClusterAdviceInput,
    env: &mut Env,
    per_rank: &mut BTreeMap<u32, Env>,
    reasons: &mut Vec<String>,
) -> Option<String> {
    let chosen = preflight_checks::networks::choose(evals);
    // Each name once (a few, however many nodes): every member is matched against them, so a
    // list of every node's names would make this n² at thousands of nodes.
    let all_names: Vec<&str> = nodes
        .iter()
        .flat_map(|(_, f)| f.net.interfaces.iter().map(|i| i.name.as_str()))
        .collect::<std::collections::BTreeSet<&str>>()
        .into_iter()
        .collect();
    let mut master_addr = None;
    match chosen {
        Some(net) => {
            for (rank, m) in &net.network.members {
                let e = per_rank.entry(*rank).or_default();
                e.insert("NCCL_SOCKET_IFNAME".into(), nccl_ifname_value(&m.interface, all_names.iter().copied()));
                e.insert("GLOO_SOCKET_IFNAME".into(), m.interface.clone());
            }
            master_addr = net.network.members.get(&0).map(|m| m.address.to_string());
            reasons.push(network_reason(net));
            if net.network.is_ipv6() {
                env.insert("NCCL_SOCKET_FAMILY".into(), "AF_INET6".into());
                reasons.push(format!(
                    "NCCL_SOCKET_FAMILY=AF_INET6: the chosen network {} carries IPv6 addresses only, so NCCL must not pick an IPv4 address of those interfaces",
                    net.network.id
                ));
            }
            if let (Some((given, ips)), Some(rank0)) =
                (&input.given_master, net.network.members.get(&0))
                && let Some(reason) = master_reason(given, ips, rank0, &net.network, nodes)
            {
                reasons.push(reason);
            }
            for other in evals.iter().filter(|e| e.network.id != net.network.id) {
                reasons.push(rejected_reason(other, net));
            }
            let shadowed: Vec<String> = net
                .network
                .members
                .values()
                .filter(|m| all_names.iter().any(|n| *n != m.interface && n.starts_with(&m.interface)))
                .map(|m| m.interface.clone())
                .collect();
            if !shadowed.is_empty() {
                reasons.push(format!(
                    "NCCL_SOCKET_IFNAME uses '=' for {} because the prefix would also match another interface on some node",
                    shadowed.join(", ")
                ));
            }
        }
        None => reasons.push(match evals.first() {
            Some(best) => format!(
                "no network reaches every node: the best, {}, connected {} of {} ordered pairs (see link.unreachable); no NCCL_SOCKET_IFNAME can work until that is fixed",
                best.network.id, best.pairs_ok, best.pairs_total
            ),
            None => "no network found: no node has an up interface with a usable IPv4 or IPv6 address".into(),
        }),
    }
    master_addr
}

/// Hoists values every node shares into `env`; keeps the rest per node.
fn hoist_shared(nodes: &[(u32, &NodeFacts)], env: &mut Env, per_rank: &mut BTreeMap<u32, Env>) {
    for key in ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"] {
        let values: Vec<Option<&String>> = nodes
            .iter()
            .map(|(r, _)| per_rank.get(r).and_then(|e| e.get(key)))
            .collect();
        if let Some(Some(first)) = values.first()
            && values.iter().all(|v| *v == Some(*first))
        {
            env.insert(key.to_string(), (*first).clone());
            for e in per_rank.values_mut() {
                e.remove(key);
            }
        }
    }
}

/// InfiniBand: whether NCCL uses it, which HCAs, GID index, QPs, and GPUDirect's reason.
fn ib_env(
    nodes: &[(u32, &NodeFacts)],
    facts: &[&NodeFacts],
    input: &ClusterAdviceInput,
    env: &mut Env,
    per_rank: &mut BTreeMap<u32, Env>,
    reasons: &mut Vec<String>,
) {
    let (ib_disable, hca, ib_reason) = ib_decision(facts);
    let ib_on = ib_disable == "0";
    env.insert("NCCL_IB_DISABLE".into(), ib_disable);
    if let Some(h) = hca {
        env.insert("NCCL_IB_HCA".into(), h);
    }
    reasons.push(ib_reason);
    if ib_on {
        let rails = preflight_checks::rails::advice::advise(nodes, input.rail_verdict.as_ref());
        if let Some(h) = rails.hca {
            env.insert("NCCL_IB_HCA".into(), h);
        }
        if let Some(g) = rails.gid_index {
            env.insert("NCCL_IB_GID_INDEX".into(), g);
        }
        for (rank, g) in rails.gid_index_per_rank {
            per_rank
                .entry(rank)
                .or_default()
                .insert("NCCL_IB_GID_INDEX".into(), g);
        }
        if let Some(q) = rails.qps_per_connection {
            env.insert("NCCL_IB_QPS_PER_CONNECTION".into(), q);
        }
        reasons.extend(rails.reasons);
    }
    if let Some(r) = ib_on
        .then(|| preflight_checks::gpu_health::gpudirect_reason(facts))
        .flatten()
    {
        reasons.push(r);
    }
}

/// One torchrun command per node: the shared env with the node's own on top.
fn launch_commands(
    nodes: &[(u32, &NodeFacts)],
    env: &Env,
    per_rank: &BTreeMap<u32, Env>,
    addr: &str,
    nproc: u32,
    input: &ClusterAdviceInput,
) -> Vec<LaunchCommand> {
    nodes
        .iter()
        .map(|(rank, _)| {
            let mut e = env.clone();
            if let Some(own) = per_rank.get(rank) {
                e.extend(own.clone());
            }
            let command = match &input.c10d {
                Some(c) => torchrun_c10d_command(
                    &e,
                    &input.nnodes.to_string(),
                    nproc,
                    &preflight_checks::net::host_port(addr, input.master_port),
                    c.rdzv_id.as_deref(),
                    &input.script,
                ),
                None => torchrun_command(
                    &e,
                    &input.nnodes.to_string(),
                    nproc,
                    &rank.to_string(),
                    addr,
                    input.master_port,
                    &input.script,
                ),
            };
            LaunchCommand {
                node_rank: *rank,
                command,
            }
        })
        .collect()
}

/// What the launch lines hold where rank 0's address cannot be known.
const RANK0_PLACEHOLDER: &str = "<rank-0-address>";

/// The master address for the launch lines when no network carries the job yet: rank 0's
/// address on the best network (right once its failing pairs are fixed), else the address
/// the job was given (every joined node reached it); the placeholder only when neither is
/// known, with the reason saying why.
fn fallback_master(
    nodes: &[(u32, &NodeFacts)],
    evals: &[preflight_checks::networks::NetworkEval],
    input: &ClusterAdviceInput,
) -> (Option<String>, String) {
    if let Some((best, m)) = evals
        .first()
        .and_then(|e| e.network.members.get(&0).map(|m| (e, m)))
    {
        return (
            Some(m.address.to_string()),
            format!(
                "master_addr {}: rank 0's {} on {}, the best network ({} of {} ordered pairs connected); the launch lines are right once the failing pairs are fixed (see link.unreachable)",
                m.address, m.interface, best.network.id, best.pairs_ok, best.pairs_total
            ),
        );
    }
    if let Some((given, _)) = input.given_master.as_ref().filter(|(g, _)| !g.is_empty()) {
        if nodes.iter().any(|(r, _)| *r == 0) {
            return (
                Some(given.clone()),
                format!(
                    "master_addr {given}: the address the job was given; no network was measured between the nodes, so it is kept"
                ),
            );
        }
    }
    let why = if nodes.iter().all(|(r, _)| *r != 0) {
        "rank 0 did not join, so its address is unknown"
    } else {
        "rank 0 has no address any other node reached, and the job was given none"
    };
    (
        None,
        format!(
            "master_addr unknown: the launch lines hold {RANK0_PLACEHOLDER} because {why}; put rank 0's address there"
        ),
    )
}

/// Why `master_addr` is not the address the job was given, when it is not.
fn master_reason(
    given: &str,
    given_ips: &[std::net::IpAddr],
    rank0: &preflight_checks::networks::Member,
    net: &preflight_checks::networks::Network,
    nodes: &[(u32, &NodeFacts)],
) -> Option<String> {
    if given_ips.contains(&rank0.address) {
        return None;
    }
    let on_rank0 = nodes
        .iter()
        .find(|(r, _)| *r == 0)
        .and_then(|(_, f)| {
            f.net
                .interfaces
                .iter()
                .find(|i| i.usable_addrs().iter().any(|a| given_ips.contains(&a.addr)))
        })
        .map(|i| format!(" (rank 0's {})", i.name))
        .unwrap_or_default();
    Some(format!(
        "master_addr {} instead of the given {given}{on_rank0}: it is rank 0's {} on the chosen network {}, which every node reached in the pairwise test; the rendezvous works on either, but this keeps the job's traffic on one network",
        rank0.address, rank0.interface, net.id
    ))
}

fn describe_speed(e: &preflight_checks::networks::NetworkEval) -> String {
    match (e.min_throughput_gbit_s, e.min_rated_mbps) {
        (Some(t), _) => format!("slowest pair measured {t:.2} Gbit/s"),
        (None, Some(r)) => format!("rated {} Gb/s (not measured)", r as f64 / 1000.0),
        (None, None) => "speed unknown".into(),
    }
}

fn network_reason(net: &preflight_checks::networks::NetworkEval) -> String {
    let names: Vec<String> = net
        .network
        .members
        .iter()
        .map(|(r, m)| format!("rank {r} {} {}", m.interface, m.address))
        .collect();
    format!(
        "network {} chosen: all {} ordered pairs connected, {}, {}; interfaces: {}",
        net.network.id,
        net.pairs_total,
        describe_speed(net),
        if net.all_physical {
            "physical on every node"
        } else {
            "virtual on some node"
        },
        names.join(", ")
    )
}

fn rejected_reason(
    other: &preflight_checks::networks::NetworkEval,
    chosen: &preflight_checks::networks::NetworkEval,
) -> String {
    let why = if !other.fully_connected {
        format!(
            "only {} of {} ordered pairs connected",
            other.pairs_ok,
            other.pairs_total.max(other.pairs_ok)
        )
    } else if let (Some(a), Some(b)) = (other.min_throughput_gbit_s, chosen.min_throughput_gbit_s) {
        format!("slower: {a:.2} Gbit/s vs {b:.2} Gbit/s")
    } else if !other.all_physical {
        "virtual interfaces".to_string()
    } else {
        describe_speed(other)
    };
    let names: std::collections::BTreeSet<&str> = other
        .network
        .members
        .values()
        .map(|m| m.interface.as_str())
        .collect();
    let names: Vec<&str> = names.into_iter().collect();
    format!(
        "network {} ({}) not chosen: {why}",
        other.network.id,
        names.join("/")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use preflight_checks::model::{IfAddr, LinkOutcome, LinkResult, NetFacts};

    fn node(addr: &str) -> NodeFacts {
        NodeFacts {
            hostname: format!("n{addr}"),
            net: NetFacts {
                interfaces: vec![Interface {
                    name: "eth0".into(),
                    kind: IfKind::Physical,
                    up: true,
                    oper_state: "up".into(),
                    ipv4: vec![IfAddr {
                        addr: addr.parse().unwrap(),
                        prefix: 24,
                    }],
                    ..Default::default()
                }],
                error: None,
            },
            ..Default::default()
        }
    }

    fn link(from: u32, to: u32, result: LinkOutcome) -> LinkResult {
        LinkResult {
            from,
            to,
            interface: "eth0".into(),
            address: format!("10.0.0.{}", to + 1).into(),
            port: 40000,
            result,
            ..Default::default()
        }
    }

    #[test]
    fn a_failing_cluster_launches_with_rank0s_address_on_the_best_network_not_a_placeholder() {
        let (a, b) = (node("10.0.0.1"), node("10.0.0.2"));
        let nodes = vec![(0, &a), (1, &b)];
        let links = vec![
            link(0, 1, LinkOutcome::Ok),
            link(1, 0, LinkOutcome::Timeout),
        ];
        let evals = preflight_checks::networks::evaluate(
            &preflight_checks::networks::discover(&nodes, &links),
            &links,
            &[0, 1],
        );
        let input = ClusterAdviceInput {
            nnodes: 2,
            master_port: 29500,
            ..Default::default()
        };
        let rec = advise_cluster(&nodes, &evals, &input);
        assert_eq!(rec.master_addr.as_deref(), Some("10.0.0.1"));
        assert!(
            rec.launch
                .iter()
                .all(|l| l.command.contains("--master-addr=10.0.0.1")),
            "{:?}",
            rec.launch
        );
        assert!(rec.launch.iter().all(|l| !l.command.contains('<')));
        assert!(
            rec.reasons.iter().any(|r| r.starts_with(
                "master_addr 10.0.0.1: rank 0's eth0 on 10.0.0.0/24, the best network (1 of 2"
            )),
            "{:?}",
            rec.reasons
        );
        // Nothing measured and no address given: the placeholder, and the reason says why.
        let rec = advise_cluster(&nodes, &[], &input);
        assert!(
            rec.launch[0]
                .command
                .contains("--master-addr=<rank-0-address>")
        );
        assert!(
            rec.reasons.iter().any(|r| r.contains("the launch lines hold <rank-0-address> because rank 0 has no address any other node reached")),
            "{:?}",
            rec.reasons
        );
        // The address the job was given, when nothing was measured.
        let given = ClusterAdviceInput {
            given_master: Some(("node0".into(), vec![])),
            ..input
        };
        let rec = advise_cluster(&nodes, &[], &given);
        assert!(rec.launch[0].command.contains("--master-addr=node0"));
    }

    #[test]
    fn ifname_value_uses_equals_only_when_a_prefix_collides() {
        assert_eq!(
            nccl_ifname_value("bond0", ["lo", "bond0", "bond0.100"]),
            "=bond0"
        );
        assert_eq!(nccl_ifname_value("eth0", ["lo", "eth0", "docker0"]), "eth0");
        assert_eq!(nccl_ifname_value("eth1", ["eth1", "eth10"]), "=eth1");
    }
}
