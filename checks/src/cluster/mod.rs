//! Cluster-wide checks over every node's facts and the pairwise link results (pure functions).
//!
//! [`check_cluster`] runs on the coordinator once every node has joined (or the
//! join timeout ended); [`master_unreachable`] is what a node says about itself
//! when it could not reach the coordinator at all.

use crate::model::{Finding, FirewallFacts, Fix, LinkOutcome, LinkResult, NodeFacts, Status};
use crate::networks::{Member, NetworkEval};
use crate::stats::median;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The error text the agent uses when the master port answered but the peer does not speak preflight.
pub const NOT_PREFLIGHT: &str = "the port answered but is not preflight";

/// A pair whose throughput is below this share of the median (or of its rated speed) is slow.
const SLOW_SHARE: f64 = 0.5;

/// One TCP stream rarely fills more than this (Gbit/s), so faster rated links are judged by the median only.
const RATED_CHECK_MAX_GBIT: f64 = 25.0;

/// Names listed in a summary before "and N more".
const LIST_CAP: usize = 12;

/// Everything the cluster checks look at.
pub struct ClusterInput<'a> {
    /// The ranks that joined, with their facts.
    pub nodes: &'a [(u32, &'a NodeFacts)],
    /// Expected number of nodes.
    pub nnodes: u32,
    /// Expected host per rank when known (from --hosts / Slurm), else empty.
    pub expected_hosts: &'a [String],
    /// Every ordered pair x every candidate address of the target.
    pub links: &'a [LinkResult],
    /// `networks::evaluate(...)`, best first.
    pub evals: &'a [NetworkEval],
    /// `networks::choose(...)`.
    pub chosen: Option<&'a NetworkEval>,
    pub master_port: u16,
}

impl ClusterInput<'_> {
    fn facts(&self, rank: u32) -> Option<&NodeFacts> {
        self.nodes.iter().find(|(r, _)| *r == rank).map(|(_, f)| *f)
    }

    fn joined(&self) -> BTreeSet<u32> {
        self.nodes.iter().map(|(r, _)| *r).collect()
    }

    /// The host a rank runs on, as best known: its own hostname, else the expected one.
    fn host(&self, rank: u32) -> Option<String> {
        self.facts(rank)
            .map(|f| f.hostname.trim().to_string())
            .filter(|h| !h.is_empty())
            .or_else(|| self.expected_host(rank))
    }

    fn expected_host(&self, rank: u32) -> Option<String> {
        self.expected_hosts
            .get(rank as usize)
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
    }

    /// "rank 2 (node03)" or "rank 2".
    fn who(&self, rank: u32) -> String {
        match self.host(rank) {
            Some(h) => format!("rank {rank} ({h})"),
            None => format!("rank {rank}"),
        }
    }

    /// What the other nodes dial to reach the coordinator, as best known here.
    fn master_label(&self) -> String {
        self.expected_host(0)
            .or_else(|| self.host(0))
            .unwrap_or_else(|| "MASTER".to_string())
    }
}

/// Runs every cluster-wide check. Each id appears at least once, with `pass` or `skip` when nothing is wrong.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = vec![rendezvous(input)];
    out.extend(duplicate_hosts(input));
    out.extend(versions(input));
    out.push(gpus(input));
    out.push(ib_partial(input));
    out.extend(unreachable_links(input));
    out.push(mtu_mismatch(input));
    out.extend(slow_links(input));
    out
}

// ----- helpers -----

fn ranks_text(ranks: &[u32]) -> String {
    let shown: Vec<String> = ranks.iter().take(LIST_CAP).map(u32::to_string).collect();
    let more = ranks.len().saturating_sub(LIST_CAP);
    let s = shown.join(", ");
    if more > 0 {
        format!("{s} and {more} more")
    } else {
        s
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("rank {one}")
    } else {
        format!("ranks {many}")
    }
}

fn ranks_phrase(ranks: &[u32]) -> String {
    let t = ranks_text(ranks);
    plural(ranks.len(), &t, &t)
}

/// `host:port`, bracketing IPv6 literals.
fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn outcome_word(o: LinkOutcome) -> &'static str {
    match o {
        LinkOutcome::Ok => "ok",
        LinkOutcome::Refused => "refused",
        LinkOutcome::Timeout => "timeout",
        LinkOutcome::Unreachable => "unreachable",
        LinkOutcome::Error => "error",
    }
}

fn rank_map<T: serde::Serialize>(values: &BTreeMap<u32, T>) -> Value {
    let m: Map<String, Value> = values
        .iter()
        .map(|(r, v)| {
            (
                r.to_string(),
                serde_json::to_value(v).unwrap_or(Value::Null),
            )
        })
        .collect();
    Value::Object(m)
}

/// The most frequent value; ties go to the value seen on the lowest rank.
fn most_common<T: Ord + Clone>(values: &BTreeMap<u32, T>) -> Option<T> {
    let mut counts: BTreeMap<&T, (usize, u32)> = BTreeMap::new();
    for (rank, v) in values {
        let e = counts.entry(v).or_insert((0, *rank));
        e.0 += 1;
        e.1 = e.1.min(*rank);
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.1.1.cmp(&a.1.1)))
        .map(|(v, _)| v.clone())
}

/// True when a `ufw`/`firewalld` state line says the firewall is on.
fn says_active(state: Option<&str>, word: &str) -> bool {
    state.is_some_and(|s| {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_prefix("status:").unwrap_or(&s).trim();
        s == word
    })
}

/// Commands that make a node accept every connection from `subnet`, for the firewall it runs.
fn accept_subnet_commands(fw: Option<&FirewallFacts>, subnet: &str) -> Vec<String> {
    let Some(fw) = fw else {
        return vec![format!("iptables -I INPUT -s {subnet} -j ACCEPT")];
    };
    if says_active(fw.ufw.as_deref(), "active") {
        vec![format!("ufw allow from {subnet}")]
    } else if says_active(fw.firewalld.as_deref(), "running") {
        vec![
            format!("firewall-cmd --zone=trusted --add-source={subnet}"),
            format!("firewall-cmd --permanent --zone=trusted --add-source={subnet}"),
        ]
    } else if fw
        .backend
        .as_deref()
        .is_some_and(|b| b.eq_ignore_ascii_case("nftables"))
    {
        vec![format!(
            "nft insert rule inet filter input ip saddr {subnet} accept"
        )]
    } else {
        vec![format!("iptables -I INPUT -s {subnet} -j ACCEPT")]
    }
}

fn is_member_address(member: &Member, address: &str) -> bool {
    address
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .map(|a| a == member.address)
        .unwrap_or_else(|_| member.address.to_string() == address)
}

/// Links that targeted a member address of `eval`'s network.
fn links_on<'a>(input: &'a ClusterInput, eval: &NetworkEval) -> Vec<&'a LinkResult> {
    input
        .links
        .iter()
        .filter(|l| {
            l.from != l.to
                && eval
                    .network
                    .members
                    .get(&l.to)
                    .is_some_and(|m| is_member_address(m, &l.address))
        })
        .collect()
}

/// The evaluation the link checks judge: the chosen network, else the best evaluated one.
fn judged_network<'a>(input: &'a ClusterInput) -> Option<&'a NetworkEval> {
    input.chosen.or_else(|| input.evals.first())
}

fn other_networks(input: &ClusterInput, judged: Option<&NetworkEval>) -> Value {
    let judged_id = judged.map(|e| e.network.id.as_str());
    Value::Array(
        input
            .evals
            .iter()
            .filter(|e| Some(e.network.id.as_str()) != judged_id)
            .map(|e| {
                json!({
                    "network": e.network.id,
                    "ok": e.pairs_ok,
                    "total": e.pairs_total,
                })
            })
            .collect(),
    )
}

fn interfaces_by_rank(eval: &NetworkEval) -> Value {
    let m: BTreeMap<u32, String> = eval
        .network
        .members
        .iter()
        .map(|(r, m)| (*r, m.interface.clone()))
        .collect();
    rank_map(&m)
}

// ----- cluster.rendezvous -----

fn rendezvous(input: &ClusterInput) -> Finding {
    let joined = input.joined();
    let missing: Vec<u32> = (0..input.nnodes).filter(|r| !joined.contains(r)).collect();
    let master = host_port(&input.master_label(), input.master_port);
    let joined_list: Vec<u32> = joined.iter().copied().collect();
    if missing.is_empty() {
        return Finding::new(
            "cluster.rendezvous",
            Status::Pass,
            master,
            format!("all {} nodes joined", input.nnodes),
        )
        .with("joined", &joined_list)
        .with("nnodes", input.nnodes);
    }
    let described: Vec<String> = missing
        .iter()
        .take(LIST_CAP)
        .map(|r| match input.expected_host(*r) {
            Some(h) => format!("rank {r} ({h})"),
            None => format!("rank {r} (unknown host)"),
        })
        .collect();
    let more = missing.len().saturating_sub(LIST_CAP);
    let more_text = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let missing_ev: Vec<Value> = missing
        .iter()
        .map(|r| json!({"rank": r, "host": input.expected_host(*r)}))
        .collect();
    let known_hosts: Vec<String> = missing
        .iter()
        .filter_map(|r| input.expected_host(*r))
        .collect();
    let where_ = if known_hosts.is_empty() {
        "the missing nodes".to_string()
    } else {
        known_hosts
            .iter()
            .take(LIST_CAP)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (mhost, mport) = (input.master_label(), input.master_port);
    Finding::new(
        "cluster.rendezvous",
        Status::Fail,
        master.clone(),
        format!(
            "{} of {} nodes never joined the coordinator at {master}: {}{more_text}",
            missing.len(),
            input.nnodes,
            described.join(", ")
        ),
    )
    .with("joined", &joined_list)
    .with("missing", missing_ev)
    .with("nnodes", input.nnodes)
    .with("master_port", input.master_port)
    .fix(
        Fix::new(format!(
            "Start `preflight cluster` with the same flags on {where_}; if it is running there, check from that host that it reaches {master} (a node that cannot reach the master says why in its own report)"
        ))
        .command(format!("nc -vz {mhost} {mport}")),
    )
}

/// The finding a node reports about itself when it could not reach the coordinator.
pub fn master_unreachable(
    rank: u32,
    master: &str,
    port: u16,
    outcome: LinkOutcome,
    waited_s: f64,
    error: &str,
) -> Finding {
    let target = host_port(master, port);
    let nc = format!("nc -vz {master} {port}");
    let not_preflight = error.to_ascii_lowercase().contains("not preflight");
    let (summary, fix) = match outcome {
        LinkOutcome::Timeout => (
            format!(
                "cannot reach the coordinator at {target}: connections time out (filtered: a firewall on the master, or between, drops packets to {port})"
            ),
            Fix::new(format!(
                "On the master, as root, accept TCP {port} with the command for the firewall it runs; then check from this node"
            ))
            .command(format!("iptables -I INPUT -p tcp --dport {port} -j ACCEPT"))
            .command(format!("ufw allow {port}/tcp"))
            .command(format!("firewall-cmd --add-port={port}/tcp"))
            .command(nc),
        ),
        LinkOutcome::Refused => (
            format!(
                "cannot reach the coordinator at {target}: connection refused (nothing listens on {target}, or a firewall REJECT rule)"
            ),
            Fix::new(format!(
                "Start rank 0 first (it hosts the coordinator on port {port}) with the same --master-port; if it runs, look for a REJECT rule for {port} on the master"
            ))
            .command(format!("ss -ltnp 'sport = :{port}'"))
            .command("iptables -S INPUT | grep -i reject")
            .command(nc),
        ),
        LinkOutcome::Unreachable => (
            format!(
                "cannot reach the coordinator at {target}: no route to {master} ({error})"
            ),
            Fix::new(format!(
                "Check the master address ({master}) and that this node has an interface on its subnet or a route to it"
            ))
            .command(format!("ip route get {master}"))
            .command(nc),
        ),
        _ if not_preflight => (
            format!(
                "the port {target} answered but is not preflight: something else (a leftover torchrun or training process?) holds port {port} on the master"
            ),
            Fix::new(format!(
                "On the master, find and stop the process holding port {port}, or use another --master-port on every node"
            ))
            .command(format!("ss -ltnp 'sport = :{port}'")),
        ),
        _ => (
            format!("cannot reach the coordinator at {target}: {error}"),
            Fix::new(format!(
                "Check that rank 0 runs preflight with the same flags (and the same --token or PREFLIGHT_TOKEN) on {target}"
            ))
            .command(nc),
        ),
    };
    Finding::new("cluster.rendezvous", Status::Fail, target, summary)
        .on_node(Some(rank))
        .with("master", master)
        .with("port", port)
        .with("result", outcome_word(outcome))
        .with("waited_s", waited_s)
        .with("error", error)
        .fix(fix)
}

// ----- cluster.duplicate-host -----

/// NCCL's identity of a node: `host_id` as probed, else hostname + boot id.
fn nccl_host_id(f: &NodeFacts) -> Option<String> {
    let id = f.host_id.trim();
    if !id.is_empty() {
        return Some(id.to_string());
    }
    let host = f.hostname.trim();
    let boot = f.boot_id.as_deref().unwrap_or("").trim();
    (!host.is_empty() || !boot.is_empty()).then(|| format!("{host}{boot}"))
}

fn duplicate_hosts(input: &ClusterInput) -> Vec<Finding> {
    let mut by_id: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (rank, facts) in input.nodes {
        if let Some(id) = nccl_host_id(facts) {
            by_id.entry(id).or_default().push(*rank);
        }
    }
    let mut out: Vec<Finding> = by_id
        .into_iter()
        .filter(|(_, ranks)| ranks.len() > 1)
        .map(|(id, mut ranks)| {
            ranks.sort_unstable();
            let hosts: BTreeMap<u32, String> = ranks
                .iter()
                .map(|r| (*r, input.host(*r).unwrap_or_default()))
                .collect();
            let names: BTreeSet<&str> = hosts.values().map(String::as_str).collect();
            let names: Vec<&str> = names.into_iter().collect();
            let mut fix = Fix::new(
                "Run one rank per machine (fix the host list or --node-rank), or, when ranks share a machine on purpose, give each its own NCCL_HOSTID",
            );
            for r in &ranks {
                fix = fix.command(format!("export NCCL_HOSTID=preflight-rank{r}   # on rank {r}"));
            }
            Finding::new(
                "cluster.duplicate-host",
                Status::Fail,
                id.clone(),
                format!(
                    "{} run on one host ({}): NCCL treats them as a single host",
                    ranks_phrase(&ranks),
                    names.join(", ")
                ),
            )
            .with("ranks", &ranks)
            .with("hostnames", rank_map(&hosts))
            .with("host_id", id)
            .fix(fix)
        })
        .collect();
    if out.is_empty() {
        out.push(
            Finding::new(
                "cluster.duplicate-host",
                Status::Pass,
                "hosts",
                format!("{} nodes, each on its own host", input.nodes.len()),
            )
            .with("nodes", input.nodes.len()),
        );
    }
    out
}

// ----- cluster.versions -----

struct VersionField {
    key: &'static str,
    label: &'static str,
    get: fn(&NodeFacts) -> Option<&str>,
}

const VERSION_FIELDS: &[VersionField] = &[
    VersionField {
        key: "driver",
        label: "NVIDIA driver",
        get: |f| f.gpu.driver_version.as_deref(),
    },
    VersionField {
        key: "cuda_driver",
        label: "CUDA driver version",
        get: |f| f.gpu.cuda_driver_version.as_deref(),
    },
    VersionField {
        key: "nccl",
        label: "NCCL",
        get: |f| f.nccl.version.as_deref(),
    },
    VersionField {
        key: "torch",
        label: "torch",
        get: |f| f.nccl.torch_version.as_deref(),
    },
];

/// "2.21.5" -> (2, 21).
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.trim().split(['.', '+', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn versions(input: &ClusterInput) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut common = Map::new();
    let mut unknown_all = Map::new();
    for field in VERSION_FIELDS {
        let mut values: BTreeMap<u32, String> = BTreeMap::new();
        let mut unknown: Vec<u32> = Vec::new();
        for (rank, facts) in input.nodes {
            match (field.get)(facts).map(str::trim).filter(|v| !v.is_empty()) {
                Some(v) => {
                    values.insert(*rank, v.to_string());
                }
                None => unknown.push(*rank),
            }
        }
        unknown.sort_unstable();
        if !unknown.is_empty() {
            unknown_all.insert(field.key.to_string(), json!(unknown));
        }
        let distinct: BTreeSet<&String> = values.values().collect();
        if distinct.len() <= 1 {
            if let Some(v) = distinct.into_iter().next() {
                common.insert(field.key.to_string(), json!(v));
            }
            continue;
        }
        out.push(version_differs(input, field, &values, &unknown));
    }
    if out.is_empty() {
        let summary = if common.is_empty() {
            "no versions known to compare".to_string()
        } else {
            let parts: Vec<String> = VERSION_FIELDS
                .iter()
                .filter_map(|f| {
                    common
                        .get(f.key)
                        .and_then(Value::as_str)
                        .map(|v| format!("{} {v}", f.label))
                })
                .collect();
            format!("same on every node: {}", parts.join(", "))
        };
        out.push(
            Finding::new("cluster.versions", Status::Pass, "versions", summary)
                .with("versions", Value::Object(common))
                .with("unknown", Value::Object(unknown_all)),
        );
    }
    out
}

fn version_differs(
    input: &ClusterInput,
    field: &VersionField,
    values: &BTreeMap<u32, String>,
    unknown: &[u32],
) -> Finding {
    let mut groups: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (r, v) in values {
        groups.entry(v.as_str()).or_default().push(*r);
    }
    let listing: Vec<String> = groups
        .iter()
        .map(|(v, ranks)| format!("{v} on {}", ranks_phrase(ranks)))
        .collect();
    let protocol_split = field.key == "nccl" && {
        let mm: BTreeSet<(u32, u32)> = values.values().filter_map(|v| major_minor(v)).collect();
        mm.len() > 1
    };
    let status = if protocol_split {
        Status::Fail
    } else {
        Status::Warn
    };
    let consequence = if protocol_split {
        " (NCCL major.minor differ: the wire protocol may not match and init can hang)"
    } else {
        ""
    };
    let unknown_text = if unknown.is_empty() {
        String::new()
    } else {
        format!("; unknown on {}", ranks_phrase(unknown))
    };
    let target = most_common(values).unwrap_or_default();
    let odd: Vec<u32> = values
        .iter()
        .filter(|(_, v)| **v != target)
        .map(|(r, _)| *r)
        .collect();
    Finding::new(
        "cluster.versions",
        status,
        field.key,
        format!(
            "{} differs across nodes: {}{consequence}{unknown_text}",
            field.label,
            listing.join("; ")
        ),
    )
    .with("field", field.key)
    .with("per_rank", rank_map(values))
    .with("most_common", &target)
    .with("unknown", unknown)
    .fix(version_fix(input, field, &target, &odd))
}

fn version_fix(input: &ClusterInput, field: &VersionField, target: &str, odd: &[u32]) -> Fix {
    let on = ranks_phrase(odd);
    match field.key {
        "driver" | "cuda_driver" => Fix::new(format!(
            "Install the NVIDIA driver most nodes run (the CUDA driver version follows the driver) on {on}, so every node reports {} {target}",
            field.label
        ))
        .command("nvidia-smi --query-gpu=driver_version --format=csv,noheader"),
        "torch" => {
            let mut fix = Fix::new(format!(
                "Install torch {target} (what most nodes have) on {on}, in the environment the job runs"
            ));
            fix = fix.command(pip_torch_command(target));
            fix.command("python -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'")
        }
        _ => {
            let mut fix = Fix::new(format!(
                "Use NCCL {target} (what most nodes have) on {on}: install the same torch/NCCL wheels everywhere and unset LD_LIBRARY_PATH entries that point at another libnccl"
            ));
            let pip_sourced = odd.iter().any(|r| {
                input
                    .facts(*r)
                    .and_then(|f| f.nccl.source.as_deref())
                    .is_some_and(|s| s.starts_with("python"))
            });
            if pip_sourced {
                let cu = odd
                    .iter()
                    .find_map(|r| input.facts(*r).and_then(|f| f.nccl.torch_version.clone()))
                    .map(|t| if t.contains("+cu11") { "cu11" } else { "cu12" })
                    .unwrap_or("cu12");
                fix = fix.command(format!("pip install nvidia-nccl-{cu}=={target}"));
            }
            fix.command("python -c 'import torch; print(torch.cuda.nccl.version())'")
        }
    }
}

/// `pip install torch==2.5.1 --index-url .../cu124` for "2.5.1+cu124".
fn pip_torch_command(version: &str) -> String {
    match version.split_once('+') {
        Some((base, local))
            if local.starts_with("cu") || local == "cpu" || local.starts_with("rocm") =>
        {
            format!(
                "pip install torch=={base} --index-url https://download.pytorch.org/whl/{local}"
            )
        }
        _ => format!("pip install torch=={version}"),
    }
}

// ----- cluster.gpus -----

fn gpus(input: &ClusterInput) -> Finding {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    let mut models: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut unknown: Vec<u32> = Vec::new();
    for (rank, facts) in input.nodes {
        if facts.gpu.nvml_error.is_some() && facts.gpu.gpus.is_empty() {
            unknown.push(*rank);
            continue;
        }
        counts.insert(*rank, facts.gpu.gpus.len());
        let names: BTreeSet<String> = facts
            .gpu
            .gpus
            .iter()
            .map(|g| g.name.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        models.insert(*rank, names.into_iter().collect());
    }
    unknown.sort_unstable();
    if counts.is_empty() {
        return Finding::new(
            "cluster.gpus",
            Status::Skip,
            "gpus",
            "no node could list its GPUs (NVML not loaded anywhere)",
        )
        .with("unknown", &unknown);
    }
    let distinct_counts: BTreeSet<usize> = counts.values().copied().collect();
    let distinct_models: BTreeSet<&Vec<String>> =
        models.values().filter(|m| !m.is_empty()).collect();
    let count_differs = distinct_counts.len() > 1;
    let model_differs = distinct_models.len() > 1;
    let base = |status, summary: String| {
        Finding::new("cluster.gpus", status, "gpus", summary)
            .with("count", rank_map(&counts))
            .with("models", rank_map(&models))
            .with("unknown", &unknown)
    };
    if !count_differs && !model_differs {
        let n = distinct_counts.into_iter().next().unwrap_or(0);
        let model = distinct_models
            .into_iter()
            .next()
            .map(|m| m.join(" + "))
            .unwrap_or_else(|| "GPU".into());
        return base(
            Status::Pass,
            format!("{n} x {model} on each of {} nodes", counts.len()),
        );
    }
    let mut parts = Vec::new();
    let min = counts.values().copied().min().unwrap_or(0);
    if count_differs {
        let mut by_count: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for (r, c) in &counts {
            by_count.entry(*c).or_default().push(*r);
        }
        let t: Vec<String> = by_count
            .iter()
            .map(|(c, rs)| format!("{c} on {}", ranks_phrase(rs)))
            .collect();
        parts.push(format!("GPU count differs ({})", t.join("; ")));
    }
    if model_differs {
        let mut by_model: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (r, m) in &models {
            if !m.is_empty() {
                by_model.entry(m.join(" + ")).or_default().push(*r);
            }
        }
        let t: Vec<String> = by_model
            .iter()
            .map(|(m, rs)| format!("{m} on {}", ranks_phrase(rs)))
            .collect();
        parts.push(format!(
            "GPU models differ ({}): the job runs at the pace of the slowest",
            t.join("; ")
        ));
    }
    let mut hint = String::new();
    if count_differs {
        hint.push_str(&format!(
            "torchrun starts --nproc-per-node processes on every node: use at most {min}, or fix the nodes with fewer GPUs. "
        ));
    }
    if model_differs {
        hint.push_str("Prefer nodes with one GPU model for one job. ");
    }
    hint.push_str("List each node's GPUs to compare");
    base(Status::Warn, parts.join("; "))
        .with("min_count", min)
        .fix(Fix::new(hint).command("nvidia-smi -L"))
}

// ----- ib.partial -----

fn active_ports(f: &NodeFacts) -> Vec<String> {
    f.ib.active_ports()
        .into_iter()
        .map(|(d, p)| format!("{d}/{p}"))
        .collect()
}

fn ib_partial(input: &ClusterInput) -> Finding {
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
        Finding::new("ib.partial", status, "InfiniBand/RoCE", summary)
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

// ----- link.unreachable -----

/// What happened on one ordered pair on the judged network.
enum PairState<'a> {
    Ok,
    Failed(&'a LinkResult),
    NotMeasured,
}

fn pair_state<'a>(links: &[&'a LinkResult], from: u32, to: u32) -> PairState<'a> {
    let mut first_fail = None;
    for l in links.iter().filter(|l| l.from == from && l.to == to) {
        if l.result == LinkOutcome::Ok {
            return PairState::Ok;
        }
        first_fail.get_or_insert(*l);
    }
    match first_fail {
        Some(l) => PairState::Failed(l),
        None => PairState::NotMeasured,
    }
}

/// The outcome that best explains a destination's failures: a filter (timeout) first, then refused, no route, error.
fn dominant_outcome(failed: &[&LinkResult]) -> LinkOutcome {
    [
        LinkOutcome::Timeout,
        LinkOutcome::Refused,
        LinkOutcome::Unreachable,
    ]
    .into_iter()
    .find(|o| failed.iter().any(|l| l.result == *o))
    .unwrap_or(LinkOutcome::Error)
}

fn unreachable_links(input: &ClusterInput) -> Vec<Finding> {
    let joined: Vec<u32> = input.joined().into_iter().collect();
    if joined.len() < 2 {
        return vec![
            Finding::new(
                "link.unreachable",
                Status::Skip,
                "links",
                "fewer than two nodes joined: no pairs to test",
            )
            .with("joined", &joined),
        ];
    }
    let Some(eval) = judged_network(input) else {
        return vec![
            Finding::new(
                "link.unreachable",
                Status::Fail,
                "links",
                "the nodes share no IPv4 network: no interface with a usable address was found to test",
            )
            .with("joined", &joined)
            .fix(
                Fix::new("Give every node an address on a common network (see net.no-interface on each node)")
                    .command("ip -br addr"),
            ),
        ];
    };
    let others = other_networks(input, Some(eval));
    let members: Vec<u32> = joined
        .iter()
        .copied()
        .filter(|r| eval.network.members.contains_key(r))
        .collect();
    let absent: Vec<u32> = joined
        .iter()
        .copied()
        .filter(|r| !eval.network.members.contains_key(r))
        .collect();
    let links = links_on(input, eval);
    let mut out = Vec::new();
    if !absent.is_empty() {
        out.push(absent_members(input, eval, &absent, &others));
    }
    for to in &members {
        if let Some(f) = unreachable_destination(input, eval, &links, &members, *to, &others) {
            out.push(f);
        }
    }
    if out.is_empty() {
        if eval.fully_connected || input.chosen.is_some() {
            out.push(
                Finding::new(
                    "link.unreachable",
                    Status::Pass,
                    eval.network.id.clone(),
                    format!(
                        "every node reaches every other on {} ({} of {} ordered pairs)",
                        eval.network.id, eval.pairs_ok, eval.pairs_total
                    ),
                )
                .with("network", &eval.network.id)
                .with("interfaces", interfaces_by_rank(eval))
                .with("pairs_ok", eval.pairs_ok)
                .with("pairs_total", eval.pairs_total)
                .with("other_networks", others),
            );
        } else {
            out.push(
                Finding::new(
                    "link.unreachable",
                    Status::Fail,
                    eval.network.id.clone(),
                    format!(
                        "no network connects every node: the best, {}, has {} of {} ordered pairs connected",
                        eval.network.id, eval.pairs_ok, eval.pairs_total
                    ),
                )
                .with("network", &eval.network.id)
                .with("pairs_ok", eval.pairs_ok)
                .with("pairs_total", eval.pairs_total)
                .with("other_networks", others)
                .fix(Fix::new("Rerun preflight on every node; if it repeats, send the JSON report (links[]) with the issue")),
            );
        }
    }
    out
}

fn absent_members(
    input: &ClusterInput,
    eval: &NetworkEval,
    absent: &[u32],
    others: &Value,
) -> Finding {
    let who: Vec<String> = absent
        .iter()
        .take(LIST_CAP)
        .map(|r| input.who(*r))
        .collect();
    Finding::new(
        "link.unreachable",
        Status::Fail,
        eval.network.id.clone(),
        format!(
            "no network connects every node: the best one, {}, has no address on {}",
            eval.network.id,
            who.join(", ")
        ),
    )
    .with("network", &eval.network.id)
    .with("absent", absent)
    .with("interfaces", interfaces_by_rank(eval))
    .with("pairs_ok", eval.pairs_ok)
    .with("pairs_total", eval.pairs_total)
    .with("other_networks", others.clone())
    .fix(
        Fix::new(format!(
            "Give {} an address on {} (or connect it to a network every node shares), then rerun; compare the addresses on each node",
            ranks_phrase(absent),
            eval.network.id
        ))
        .command("ip -br addr"),
    )
}

fn unreachable_destination(
    input: &ClusterInput,
    eval: &NetworkEval,
    links: &[&LinkResult],
    members: &[u32],
    to: u32,
    others: &Value,
) -> Option<Finding> {
    let member = eval.network.members.get(&to)?;
    let mut failed: Vec<&LinkResult> = Vec::new();
    let mut not_measured: Vec<u32> = Vec::new();
    for from in members.iter().copied().filter(|f| *f != to) {
        match pair_state(links, from, to) {
            PairState::Ok => {}
            PairState::Failed(l) => failed.push(l),
            PairState::NotMeasured => not_measured.push(from),
        }
    }
    if failed.is_empty() && not_measured.is_empty() {
        return None;
    }
    let sources: Vec<u32> = failed
        .iter()
        .map(|l| l.from)
        .chain(not_measured.iter().copied())
        .collect();
    let subject = format!(
        "{}->{to} {}",
        sources
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        member.interface
    );
    let addr = member.address.to_string();
    let ports: BTreeSet<u16> = failed.iter().map(|l| l.port).filter(|p| *p != 0).collect();
    let ports: Vec<u16> = ports.into_iter().collect();
    let where_ = match ports.as_slice() {
        [p] => host_port(&addr, p),
        _ => addr.clone(),
    };
    let sources_ev: Vec<Value> = failed
        .iter()
        .map(|l| {
            json!({
                "from": l.from,
                "host": input.host(l.from),
                "result": outcome_word(l.result),
                "port": l.port,
                "error": l.error,
            })
        })
        .collect();
    let dominant = dominant_outcome(&failed);
    let summary = if failed.is_empty() {
        format!(
            "{} at {addr} on {} was not measured from {}",
            input.who(to),
            member.interface,
            ranks_phrase(&not_measured)
        )
    } else {
        destination_summary(input, eval, links, to, member, &failed, &where_, dominant)
    };
    let mut f = Finding::new("link.unreachable", Status::Fail, subject, summary)
        .on_node(Some(to))
        .with("network", &eval.network.id)
        .with("to", to)
        .with("to_host", input.host(to))
        .with("interface", &member.interface)
        .with("address", &addr)
        .with("ports", &ports)
        .with("sources", sources_ev)
        .with("not_measured", &not_measured)
        .with("pairs_ok", eval.pairs_ok)
        .with("pairs_total", eval.pairs_total)
        .with("other_networks", others.clone());
    if !failed.is_empty() {
        f = f.fix(destination_fix(input, eval, to, &failed, &addr, dominant));
    }
    Some(f)
}

#[allow(clippy::too_many_arguments)]
fn destination_summary(
    input: &ClusterInput,
    eval: &NetworkEval,
    links: &[&LinkResult],
    to: u32,
    member: &Member,
    failed: &[&LinkResult],
    where_: &str,
    dominant: LinkOutcome,
) -> String {
    let cause = match dominant {
        LinkOutcome::Timeout => format!(
            "connections time out: a firewall on {} drops packets to NCCL's random high ports",
            input.who(to)
        ),
        LinkOutcome::Refused => format!(
            "connections are refused: a REJECT rule on {}, or nothing listened on the port",
            input.who(to)
        ),
        LinkOutcome::Unreachable => format!("there is no route to {}", member.address),
        _ => {
            let errs: BTreeSet<&str> = failed.iter().filter_map(|l| l.error.as_deref()).collect();
            format!(
                "the connection failed: {}",
                errs.into_iter().collect::<Vec<_>>().join("; ")
            )
        }
    };
    if let [one] = failed {
        let back_ok = eval
            .network
            .members
            .contains_key(&one.from)
            .then(|| pair_state(links, to, one.from))
            .is_some_and(|s| matches!(s, PairState::Ok));
        let results = outcome_word(one.result);
        return if back_ok {
            format!(
                "{} cannot connect to {} at {where_} on {} ({results}), though {} reaches {} the other way: {cause}",
                input.who(one.from),
                input.who(to),
                member.interface,
                input.who(to),
                input.who(one.from),
            )
        } else {
            format!(
                "{} cannot connect to {} at {where_} on {} ({results}): {cause}",
                input.who(one.from),
                input.who(to),
                member.interface,
            )
        };
    }
    let per_source: Vec<String> = failed
        .iter()
        .map(|l| format!("{} from {}", outcome_word(l.result), l.from))
        .collect();
    format!(
        "{} at {where_} on {} is not reachable from {} ({}): {cause}",
        input.who(to),
        member.interface,
        ranks_phrase(&failed.iter().map(|l| l.from).collect::<Vec<_>>()),
        per_source.join(", ")
    )
}

fn destination_fix(
    input: &ClusterInput,
    eval: &NetworkEval,
    to: u32,
    failed: &[&LinkResult],
    addr: &str,
    dominant: LinkOutcome,
) -> Fix {
    let subnet = &eval.network.id;
    let fw = input.facts(to).map(|f| &f.firewall);
    match dominant {
        LinkOutcome::Timeout | LinkOutcome::Refused => {
            let lead = if dominant == LinkOutcome::Timeout {
                format!(
                    "On {} (the node that filters), accept every connection from the cluster's subnet {subnet}: NCCL listens on random high ports, so opening only the master port is not enough",
                    input.who(to)
                )
            } else {
                format!(
                    "On {}, remove the REJECT rule or accept every connection from {subnet} (if no rule rejects, the listener was not up: rerun preflight)",
                    input.who(to)
                )
            };
            accept_subnet_commands(fw, subnet)
                .into_iter()
                .fold(Fix::new(lead), Fix::command)
        }
        LinkOutcome::Unreachable => {
            let from: Vec<u32> = failed.iter().map(|l| l.from).collect();
            Fix::new(format!(
                "On {}, check the route to {addr}: it should leave through the interface on {subnet}",
                ranks_phrase(&from)
            ))
            .command(format!("ip route get {addr}"))
        }
        _ => {
            let port = failed.first().map(|l| l.port).unwrap_or(0);
            Fix::new(format!(
                "Check the connection by hand from {} to {}",
                ranks_phrase(&failed.iter().map(|l| l.from).collect::<Vec<_>>()),
                input.who(to)
            ))
            .command(format!("nc -vz {addr} {port}"))
        }
    }
}

// ----- link.mtu-mismatch -----

fn mtu_mismatch(input: &ClusterInput) -> Finding {
    let Some(eval) = input.chosen else {
        return Finding::new(
            "link.mtu-mismatch",
            Status::Skip,
            "mtu",
            "no network connects every node, so none is chosen to compare MTUs on",
        );
    };
    let joined = input.joined();
    let mtus: BTreeMap<u32, u32> = eval
        .network
        .members
        .iter()
        .filter(|(r, _)| joined.contains(r))
        .filter_map(|(r, m)| m.mtu.map(|mtu| (*r, mtu)))
        .collect();
    let path: BTreeMap<String, u32> = links_on(input, eval)
        .into_iter()
        .filter_map(|l| l.mtu.map(|m| (format!("{}->{}", l.from, l.to), m)))
        .collect();
    let subject = eval
        .common_name()
        .map(|n| format!("{} {n}", eval.network.id))
        .unwrap_or_else(|| eval.network.id.clone());
    let base = |status, summary: String| {
        Finding::new("link.mtu-mismatch", status, subject.clone(), summary)
            .with("network", &eval.network.id)
            .with("mtu", rank_map(&mtus))
            .with("path_mtu", &path)
    };
    let distinct: BTreeSet<u32> = mtus.values().copied().collect();
    if distinct.len() > 1 {
        return interface_mtus_differ(input, eval, &mtus, base(Status::Warn, String::new()));
    }
    let iface_mtu = distinct.into_iter().next();
    let narrow: BTreeMap<&String, u32> = path
        .iter()
        .filter(|(_, m)| iface_mtu.is_some_and(|i| **m < i))
        .map(|(k, m)| (k, *m))
        .collect();
    if let (Some(i), Some(lowest)) = (iface_mtu, narrow.values().copied().min()) {
        let pairs: Vec<&str> = narrow.keys().map(|k| k.as_str()).collect();
        let summary = format!(
            "every node's interface on {} has MTU {i}, but the path carries only {lowest} between {}: something in between (a switch) has a smaller MTU, and large packets are dropped",
            eval.network.id,
            pairs.join(", ")
        );
        return base(Status::Warn, summary).fix(
            mtu_commands(input, eval, &mtus.keys().copied().collect::<Vec<_>>(), lowest)
                .into_iter()
                .fold(
                    Fix::new(format!(
                        "Raise the MTU of the switches between the nodes to {i}, or lower every node's interface to {lowest}{}",
                        PERSIST_HINT
                    )),
                    Fix::command,
                ),
        );
    }
    let summary = match iface_mtu {
        Some(m) => format!("MTU {m} on every node's interface on {}", eval.network.id),
        None => format!("no MTU known on {}", eval.network.id),
    };
    base(Status::Pass, summary)
}

const PERSIST_HINT: &str = ". `ip link` does not survive a reboot: also set it where the interface is configured (netplan `mtu:`, `nmcli connection modify <conn> 802-3-ethernet.mtu <mtu>`, or MTU= in ifcfg)";

fn mtu_commands(input: &ClusterInput, eval: &NetworkEval, ranks: &[u32], mtu: u32) -> Vec<String> {
    ranks
        .iter()
        .filter_map(|r| {
            eval.network.members.get(r).map(|m| {
                format!(
                    "ip link set dev {} mtu {mtu}   # on {}",
                    m.interface,
                    input.who(*r)
                )
            })
        })
        .collect()
}

/// The value most nodes have; on a tie the smaller, which every switch carries.
fn common_mtu(mtus: &BTreeMap<u32, u32>) -> Option<u32> {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for m in mtus.values() {
        *counts.entry(*m).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(m, _)| m)
}

fn interface_mtus_differ(
    input: &ClusterInput,
    eval: &NetworkEval,
    mtus: &BTreeMap<u32, u32>,
    base: Finding,
) -> Finding {
    let common = common_mtu(mtus).unwrap_or(1500);
    let odd: Vec<u32> = mtus
        .iter()
        .filter(|(_, m)| **m != common)
        .map(|(r, _)| *r)
        .collect();
    let mut by_mtu: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (r, m) in mtus {
        by_mtu.entry(*m).or_default().push(*r);
    }
    let listing: Vec<String> = by_mtu
        .iter()
        .map(|(m, rs)| format!("{m} on {}", ranks_phrase(rs)))
        .collect();
    let mut f = base;
    f.summary = format!(
        "MTU differs on {}: {} (small messages pass, large ones can hang)",
        eval.network.id,
        listing.join("; ")
    );
    f.with("common_mtu", common).with("odd_ranks", &odd).fix(
        mtu_commands(input, eval, &odd, common).into_iter().fold(
            Fix::new(format!(
                "Set MTU {common} (what most nodes have) on {}{PERSIST_HINT}",
                ranks_phrase(&odd)
            )),
            Fix::command,
        ),
    )
}

// ----- link.slow -----

fn slow_links(input: &ClusterInput) -> Vec<Finding> {
    let Some(eval) = input.chosen else {
        return vec![Finding::new(
            "link.slow",
            Status::Skip,
            "throughput",
            "no network connects every node, so none is chosen to measure",
        )];
    };
    let mut best: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for l in links_on(input, eval) {
        let Some(tp) = l.throughput_gbit_s.filter(|t| t.is_finite() && *t >= 0.0) else {
            continue;
        };
        let e = best.entry((l.from, l.to)).or_insert(tp);
        *e = e.max(tp);
    }
    let mut all: Vec<f64> = best.values().copied().collect();
    let Some(med) = median(&mut all) else {
        return vec![
            Finding::new(
                "link.slow",
                Status::Skip,
                eval.network.id.clone(),
                format!("no throughput was measured on {}", eval.network.id),
            )
            .with("network", &eval.network.id),
        ];
    };
    let mut out = Vec::new();
    for ((from, to), tp) in &best {
        if let Some(f) = slow_pair(input, eval, *from, *to, *tp, med) {
            out.push(f);
        }
    }
    if out.is_empty() {
        let min = best.values().copied().fold(f64::INFINITY, f64::min);
        out.push(
            Finding::new(
                "link.slow",
                Status::Pass,
                eval.network.id.clone(),
                format!(
                    "{} pairs on {}: median {med:.2} Gbit/s, slowest {min:.2} Gbit/s",
                    best.len(),
                    eval.network.id
                ),
            )
            .with("network", &eval.network.id)
            .with("median_gbit_s", med)
            .with("min_gbit_s", min)
            .with("pairs", best.len()),
        );
    }
    out
}

/// The lower rated speed of the two ends, in Gbit/s.
fn rated_gbit(eval: &NetworkEval, from: u32, to: u32) -> Option<f64> {
    let a = eval.network.members.get(&from).and_then(|m| m.speed_mbps);
    let b = eval.network.members.get(&to).and_then(|m| m.speed_mbps);
    let mbps = match (a, b) {
        (Some(x), Some(y)) => x.min(y),
        (x, y) => x.or(y)?,
    };
    (mbps > 0).then_some(mbps as f64 / 1000.0)
}

fn slow_pair(
    input: &ClusterInput,
    eval: &NetworkEval,
    from: u32,
    to: u32,
    tp: f64,
    med: f64,
) -> Option<Finding> {
    let rated = rated_gbit(eval, from, to);
    let below_median = tp < SLOW_SHARE * med;
    let below_rated = rated.is_some_and(|r| r <= RATED_CHECK_MAX_GBIT && tp < SLOW_SHARE * r);
    if !below_median && !below_rated {
        return None;
    }
    let iface_from = eval.network.members.get(&from).map(|m| m.interface.clone());
    let iface_to = eval.network.members.get(&to).map(|m| m.interface.clone());
    let iface = iface_to.clone().or(iface_from.clone()).unwrap_or_default();
    let mut reasons = Vec::new();
    if below_median {
        reasons.push(format!(
            "under half the median of all pairs ({med:.2} Gbit/s)"
        ));
    }
    if let (true, Some(r)) = (below_rated, rated) {
        reasons.push(format!("under half the rated {r:.0} Gbit/s"));
    }
    let mut fix = Fix::new(format!(
        "Check cabling, negotiated speed/duplex and traffic shaping on both ends ({} and {})",
        input.who(from),
        input.who(to)
    ));
    for (r, name) in [(from, &iface_from), (to, &iface_to)] {
        if let Some(n) = name {
            fix = fix
                .command(format!("ethtool {n}   # on {}", input.who(r)))
                .command(format!("tc qdisc show dev {n}   # on {}", input.who(r)));
        }
    }
    Some(
        Finding::new(
            "link.slow",
            Status::Warn,
            format!("{from}->{to} {iface}"),
            format!(
                "{} -> {} on {} measured {tp:.2} Gbit/s: {}",
                input.who(from),
                input.who(to),
                eval.network.id,
                reasons.join(" and ")
            ),
        )
        .with("network", &eval.network.id)
        .with("from", from)
        .with("to", to)
        .with("measured_gbit_s", tp)
        .with("median_gbit_s", med)
        .with("rated_gbit_s", rated)
        .fix(fix),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpu, IbDevice, IbPort, IfAddr, IfKind, Interface, NetFacts};
    use crate::networks::{choose, discover, evaluate};

    fn iface(name: &str, addr: &str, mtu: u32, speed: Option<u64>, kind: IfKind) -> Interface {
        Interface {
            name: name.into(),
            kind,
            up: true,
            oper_state: "up".into(),
            mtu: Some(mtu),
            speed_mbps: speed,
            ipv4: vec![IfAddr {
                addr: addr.parse().unwrap(),
                prefix: 24,
            }],
            ..Default::default()
        }
    }

    fn gpu(name: &str, index: u32) -> Gpu {
        Gpu {
            index,
            name: name.into(),
            ..Default::default()
        }
    }

    /// A healthy node: eno1 on 10.0.0.0/24 (10 Gbit/s), docker0 with the same address everywhere, 8 H100s.
    fn node(rank: u32) -> NodeFacts {
        let mut f = NodeFacts {
            hostname: format!("node{:02}", rank + 1),
            host_id: format!("node{:02}-boot{rank}", rank + 1),
            net: NetFacts {
                interfaces: vec![
                    iface(
                        "eno1",
                        &format!("10.0.0.{}", rank + 1),
                        1500,
                        Some(10_000),
                        IfKind::Physical,
                    ),
                    iface("docker0", "172.17.0.1", 1500, None, IfKind::Docker),
                ],
                error: None,
            },
            ..Default::default()
        };
        f.gpu.driver_version = Some("550.54.15".into());
        f.gpu.cuda_driver_version = Some("12.4".into());
        f.gpu.gpus = (0..8).map(|i| gpu("NVIDIA H100 80GB HBM3", i)).collect();
        f.nccl.version = Some("2.21.5".into());
        f.nccl.torch_version = Some("2.5.1+cu124".into());
        f.nccl.source = Some("python:/opt/venv".into());
        f
    }

    fn link(from: u32, to: u32, addr: &str, result: LinkOutcome, tp: Option<f64>) -> LinkResult {
        LinkResult {
            from,
            to,
            interface: "eno1".into(),
            address: addr.into(),
            port: 40000 + to as u16,
            result,
            throughput_gbit_s: tp,
            ..Default::default()
        }
    }

    struct Cluster {
        facts: Vec<NodeFacts>,
        links: Vec<LinkResult>,
        nnodes: u32,
        expected: Vec<String>,
        not_joined: Vec<u32>,
    }

    impl Cluster {
        /// `n` healthy nodes, every pair ok at 9 Gbit/s on eno1, docker0 failing.
        fn healthy(n: u32) -> Self {
            let mut links = Vec::new();
            for from in 0..n {
                for to in (0..n).filter(|t| *t != from) {
                    let addr = format!("10.0.0.{}", to + 1);
                    links.push(link(from, to, &addr, LinkOutcome::Ok, Some(9.0)));
                    links.push(link(from, to, "172.17.0.1", LinkOutcome::Error, None));
                }
            }
            Cluster {
                facts: (0..n).map(node).collect(),
                links,
                nnodes: n,
                expected: Vec::new(),
                not_joined: Vec::new(),
            }
        }

        /// Replaces the result of every link `from -> to` on eno1.
        fn set(&mut self, from: u32, to: u32, result: LinkOutcome) {
            let addr = format!("10.0.0.{}", to + 1);
            for l in &mut self.links {
                if l.from == from && l.to == to && l.address == addr {
                    l.result = result;
                    l.throughput_gbit_s = None;
                }
            }
        }

        fn findings(&self) -> Vec<Finding> {
            let nodes: Vec<(u32, &NodeFacts)> = self
                .facts
                .iter()
                .enumerate()
                .map(|(i, f)| (i as u32, f))
                .filter(|(r, _)| !self.not_joined.contains(r))
                .collect();
            let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
            let nets = discover(&nodes);
            let evals = evaluate(&nets, &self.links, &ranks);
            let chosen = choose(&evals);
            check_cluster(&ClusterInput {
                nodes: &nodes,
                nnodes: self.nnodes,
                expected_hosts: &self.expected,
                links: &self.links,
                evals: &evals,
                chosen,
                master_port: 29500,
            })
        }
    }

    fn with_id<'a>(findings: &'a [Finding], id: &str) -> Vec<&'a Finding> {
        findings.iter().filter(|f| f.id == id).collect()
    }

    fn only<'a>(findings: &'a [Finding], id: &str) -> &'a Finding {
        let v = with_id(findings, id);
        assert_eq!(v.len(), 1, "expected one {id}, got {v:#?}");
        v[0]
    }

    fn commands(f: &Finding) -> Vec<String> {
        f.fix
            .as_ref()
            .map(|x| x.commands.clone())
            .unwrap_or_default()
    }

    const IDS: &[&str] = &[
        "cluster.rendezvous",
        "cluster.duplicate-host",
        "cluster.versions",
        "cluster.gpus",
        "ib.partial",
        "link.unreachable",
        "link.mtu-mismatch",
        "link.slow",
    ];

    #[test]
    fn healthy_cluster_passes_every_check_once() {
        let fs = Cluster::healthy(3).findings();
        for id in IDS {
            let f = only(&fs, id);
            let expected = if *id == "ib.partial" {
                Status::Skip
            } else {
                Status::Pass
            };
            assert_eq!(f.status, expected, "{f:#?}");
            assert!(f.fix.is_none(), "no fix on {id}");
        }
        let link = only(&fs, "link.unreachable");
        assert_eq!(link.evidence["pairs_ok"], json!(6));
        assert_eq!(link.evidence["network"], json!("10.0.0.0/24"));
        // docker0's failures are no finding, only evidence.
        assert_eq!(
            link.evidence["other_networks"],
            json!([{"network": "172.17.0.0/24", "ok": 0, "total": 6}])
        );
    }

    #[test]
    fn rendezvous_names_missing_ranks_with_expected_hosts() {
        let mut c = Cluster::healthy(4);
        c.expected = (1..=4).map(|i| format!("gpu{i:02}")).collect();
        c.not_joined = vec![2];
        let fs = c.findings();
        let f = only(&fs, "cluster.rendezvous");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, None);
        assert!(f.summary.contains("rank 2 (gpu03)"), "{}", f.summary);
        assert_eq!(f.evidence["joined"], json!([0, 1, 3]));
        assert_eq!(f.evidence["missing"], json!([{"rank": 2, "host": "gpu03"}]));
        assert_eq!(commands(f), vec!["nc -vz gpu01 29500"]);
    }

    #[test]
    fn rendezvous_says_unknown_host_without_a_host_list() {
        let mut c = Cluster::healthy(3);
        c.nnodes = 4;
        let fs = c.findings();
        let f = only(&fs, "cluster.rendezvous");
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("rank 3 (unknown host)"), "{}", f.summary);
        assert_eq!(commands(f), vec!["nc -vz node01 29500"]);
    }

    #[test]
    fn master_timeout_is_a_filter_with_firewall_commands_for_the_master() {
        let f = master_unreachable(2, "10.0.0.1", 29500, LinkOutcome::Timeout, 60.0, "");
        assert_eq!(f.id, "cluster.rendezvous");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(2));
        assert_eq!(f.subject, "10.0.0.1:29500");
        assert!(f.summary.contains("filtered"), "{}", f.summary);
        let cmds = commands(&f);
        assert!(cmds.contains(&"iptables -I INPUT -p tcp --dport 29500 -j ACCEPT".to_string()));
        assert!(cmds.contains(&"ufw allow 29500/tcp".to_string()));
        assert!(cmds.contains(&"firewall-cmd --add-port=29500/tcp".to_string()));
        assert!(cmds.contains(&"nc -vz 10.0.0.1 29500".to_string()));
        assert_eq!(f.evidence["result"], json!("timeout"));
        assert_eq!(f.evidence["waited_s"], json!(60.0));
    }

    #[test]
    fn master_refused_unreachable_and_foreign_listener_are_told_apart() {
        let refused = master_unreachable(1, "gpu01", 29500, LinkOutcome::Refused, 0.1, "");
        assert!(refused.summary.contains("nothing listens on gpu01:29500"));
        assert!(refused.summary.contains("REJECT"));
        assert!(
            refused
                .fix
                .as_ref()
                .unwrap()
                .hint
                .contains("Start rank 0 first")
        );

        let route = master_unreachable(
            1,
            "10.9.0.1",
            29500,
            LinkOutcome::Unreachable,
            0.0,
            "No route to host (os error 113)",
        );
        assert!(route.summary.contains("no route"));
        assert!(commands(&route).contains(&"ip route get 10.9.0.1".to_string()));

        let foreign =
            master_unreachable(3, "fd00::1", 29500, LinkOutcome::Error, 0.2, NOT_PREFLIGHT);
        assert_eq!(foreign.subject, "[fd00::1]:29500");
        assert!(foreign.summary.contains("is not preflight"));
        assert!(foreign.summary.contains("leftover torchrun"));

        let other = master_unreachable(1, "gpu01", 29500, LinkOutcome::Error, 0.2, "bad token");
        assert!(other.summary.contains("bad token"));
        assert!(other.fix.as_ref().unwrap().hint.contains("--token"));
    }

    #[test]
    fn duplicate_host_fires_on_a_shared_host_id_only() {
        let mut c = Cluster::healthy(3);
        assert_eq!(
            only(&c.findings(), "cluster.duplicate-host").status,
            Status::Pass
        );
        c.facts[2].host_id = c.facts[1].host_id.clone();
        c.facts[2].hostname = c.facts[1].hostname.clone();
        let fs = c.findings();
        let f = only(&fs, "cluster.duplicate-host");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.evidence["ranks"], json!([1, 2]));
        assert!(f.summary.contains("ranks 1, 2"), "{}", f.summary);
        assert!(f.summary.contains("node02"));
        assert!(commands(f).iter().any(|c| c.contains("NCCL_HOSTID")));
    }

    #[test]
    fn duplicate_host_falls_back_to_hostname_and_boot_id() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.host_id.clear();
            f.hostname = "same".into();
            f.boot_id = Some("b1".into());
        }
        assert_eq!(
            only(&c.findings(), "cluster.duplicate-host").status,
            Status::Fail
        );
        c.facts[1].boot_id = Some("b2".into());
        assert_eq!(
            only(&c.findings(), "cluster.duplicate-host").status,
            Status::Pass
        );
    }

    #[test]
    fn nccl_major_minor_split_fails_patch_split_warns() {
        let mut c = Cluster::healthy(3);
        c.facts[2].nccl.version = Some("2.18.1".into());
        let fs = c.findings();
        let f = only(&fs, "cluster.versions");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.subject, "nccl");
        assert_eq!(f.evidence["per_rank"]["2"], json!("2.18.1"));
        assert_eq!(f.evidence["most_common"], json!("2.21.5"));
        assert!(f.summary.contains("2.18.1 on rank 2"), "{}", f.summary);
        assert!(commands(f).contains(&"pip install nvidia-nccl-cu12==2.21.5".to_string()));

        c.facts[2].nccl.version = Some("2.21.3".into());
        let fs = c.findings();
        assert_eq!(only(&fs, "cluster.versions").status, Status::Warn);
    }

    #[test]
    fn driver_and_torch_differences_warn_each() {
        let mut c = Cluster::healthy(3);
        c.facts[0].gpu.driver_version = Some("535.104.05".into());
        c.facts[1].nccl.torch_version = Some("2.4.0+cu121".into());
        let fs = c.findings();
        let v = with_id(&fs, "cluster.versions");
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v.iter().all(|f| f.status == Status::Warn));
        let torch = v.iter().find(|f| f.subject == "torch").unwrap();
        assert!(
            commands(torch).contains(
                &"pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124"
                    .to_string()
            )
        );
        let driver = v.iter().find(|f| f.subject == "driver").unwrap();
        assert_eq!(driver.evidence["per_rank"]["0"], json!("535.104.05"));
    }

    #[test]
    fn unknown_versions_are_ignored_and_mentioned() {
        let mut c = Cluster::healthy(3);
        c.facts[1].nccl.version = None;
        let fs = c.findings();
        let f = only(&fs, "cluster.versions");
        assert_eq!(f.status, Status::Pass);
        assert_eq!(f.evidence["unknown"]["nccl"], json!([1]));
        assert_eq!(f.evidence["versions"]["nccl"], json!("2.21.5"));
    }

    #[test]
    fn gpu_count_and_model_differences_warn() {
        let mut c = Cluster::healthy(3);
        c.facts[1].gpu.gpus.truncate(4);
        let fs = c.findings();
        let f = only(&fs, "cluster.gpus");
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["count"]["1"], json!(4));
        assert_eq!(f.evidence["min_count"], json!(4));
        assert!(f.summary.contains("4 on rank 1"), "{}", f.summary);

        let mut c = Cluster::healthy(2);
        c.facts[1].gpu.gpus = (0..8).map(|i| gpu("NVIDIA A100-SXM4-80GB", i)).collect();
        let fs = c.findings();
        let f = only(&fs, "cluster.gpus");
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("models differ"), "{}", f.summary);
    }

    #[test]
    fn gpus_skip_without_nvml_anywhere() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.gpu.gpus.clear();
            f.gpu.nvml_error = Some("libnvidia-ml.so not found".into());
        }
        assert_eq!(only(&c.findings(), "cluster.gpus").status, Status::Skip);
    }

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
        let f = only(&fs, "ib.partial");
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["without_ib"], json!([2]));
        assert_eq!(f.evidence["active_ports"]["0"], json!(["mlx5_0/1"]));
        assert!(f.summary.contains("rank 2 (node03)"), "{}", f.summary);
        assert!(commands(f).contains(&"export NCCL_IB_DISABLE=1".to_string()));

        with_ib(&mut c.facts[2], "ACTIVE");
        assert_eq!(only(&c.findings(), "ib.partial").status, Status::Pass);
    }

    #[test]
    fn dropped_high_ports_fail_once_for_the_filtering_node_with_its_firewall_command() {
        let mut c = Cluster::healthy(3);
        c.set(0, 2, LinkOutcome::Timeout);
        c.set(1, 2, LinkOutcome::Timeout);
        c.facts[2].firewall.ufw = Some("active".into());
        let fs = c.findings();
        let v = with_id(&fs, "link.unreachable");
        assert_eq!(v.len(), 1, "{v:#?}");
        let f = v[0];
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(2));
        assert_eq!(f.subject, "0,1->2 eno1");
        assert!(f.summary.contains("rank 2 (node03)"), "{}", f.summary);
        assert!(f.summary.contains("time out"), "{}", f.summary);
        assert!(f.summary.contains("10.0.0.3:40002"), "{}", f.summary);
        assert_eq!(commands(f), vec!["ufw allow from 10.0.0.0/24"]);
        assert_eq!(f.evidence["sources"][0]["result"], json!("timeout"));
        assert_eq!(
            f.evidence["other_networks"][0]["network"],
            json!("172.17.0.0/24")
        );
        // Nothing is chosen, so the MTU and speed checks have nothing to judge.
        assert_eq!(only(&fs, "link.mtu-mismatch").status, Status::Skip);
    }

    #[test]
    fn firewall_command_follows_the_nodes_firewall() {
        let fw = |f: FirewallFacts| accept_subnet_commands(Some(&f), "10.0.0.0/24");
        assert_eq!(
            fw(FirewallFacts {
                firewalld: Some("running".into()),
                ..Default::default()
            })[0],
            "firewall-cmd --zone=trusted --add-source=10.0.0.0/24"
        );
        assert_eq!(
            fw(FirewallFacts {
                backend: Some("nftables".into()),
                ufw: Some("inactive".into()),
                ..Default::default()
            }),
            vec!["nft insert rule inet filter input ip saddr 10.0.0.0/24 accept"]
        );
        assert_eq!(
            fw(FirewallFacts::default()),
            vec!["iptables -I INPUT -s 10.0.0.0/24 -j ACCEPT"]
        );
    }

    #[test]
    fn one_way_failure_names_both_ends_and_refused_is_not_a_timeout() {
        let mut c = Cluster::healthy(2);
        c.set(0, 1, LinkOutcome::Refused);
        c.facts[1].firewall.backend = Some("nftables".into());
        let fs = c.findings();
        let f = only(&fs, "link.unreachable");
        assert_eq!(f.node, Some(1));
        assert!(
            f.summary
                .contains("rank 0 (node01) cannot connect to rank 1 (node02)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("the other way"), "{}", f.summary);
        assert!(f.summary.contains("refused"), "{}", f.summary);
        assert!(!f.summary.contains("time out"), "{}", f.summary);
        assert!(f.fix.as_ref().unwrap().hint.contains("REJECT"));
        assert_eq!(
            commands(f),
            vec!["nft insert rule inet filter input ip saddr 10.0.0.0/24 accept"]
        );
    }

    #[test]
    fn no_route_points_at_the_sources_routing() {
        let mut c = Cluster::healthy(2);
        c.set(1, 0, LinkOutcome::Unreachable);
        let fs = c.findings();
        let f = only(&fs, "link.unreachable");
        assert_eq!(commands(f), vec!["ip route get 10.0.0.1"]);
    }

    #[test]
    fn a_node_without_an_address_on_the_best_network_is_named() {
        let mut c = Cluster::healthy(3);
        c.facts[2].net.interfaces[0].ipv4[0].addr = "10.9.9.3".parse().unwrap();
        let fs = c.findings();
        let v = with_id(&fs, "link.unreachable");
        let absent = v
            .iter()
            .find(|f| f.evidence.contains_key("absent"))
            .expect("absent finding");
        assert_eq!(absent.evidence["absent"], json!([2]));
        assert!(absent.summary.contains("rank 2 (node03)"));
    }

    #[test]
    fn mtu_mismatch_warns_with_the_common_value_for_the_odd_node() {
        let mut c = Cluster::healthy(3);
        c.facts[1].net.interfaces[0].mtu = Some(9000);
        let fs = c.findings();
        let f = only(&fs, "link.mtu-mismatch");
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["mtu"]["1"], json!(9000));
        assert_eq!(f.evidence["common_mtu"], json!(1500));
        assert_eq!(
            commands(f),
            vec!["ip link set dev eno1 mtu 1500   # on rank 1 (node02)"]
        );
        assert!(f.fix.as_ref().unwrap().hint.contains("netplan"));
    }

    #[test]
    fn narrow_path_mtu_warns_even_when_interfaces_agree() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.net.interfaces[0].mtu = Some(9000);
        }
        assert_eq!(
            only(&c.findings(), "link.mtu-mismatch").status,
            Status::Pass
        );
        for l in &mut c.links {
            l.mtu = Some(if l.address.starts_with("10.") {
                1500
            } else {
                9000
            });
        }
        let fs = c.findings();
        let f = only(&fs, "link.mtu-mismatch");
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["path_mtu"]["0->1"], json!(1500));
        assert!(f.summary.contains("only 1500"), "{}", f.summary);
    }

    #[test]
    fn slow_pair_below_half_the_median_warns() {
        let mut c = Cluster::healthy(3);
        for l in &mut c.links {
            if l.from == 0 && l.to == 2 && l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(1.0);
            }
        }
        let fs = c.findings();
        let v = with_id(&fs, "link.slow");
        assert_eq!(v.len(), 1, "{v:#?}");
        let f = v[0];
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.subject, "0->2 eno1");
        assert_eq!(f.evidence["measured_gbit_s"], json!(1.0));
        assert_eq!(f.evidence["median_gbit_s"], json!(9.0));
        assert_eq!(f.evidence["rated_gbit_s"], json!(10.0));
        assert!(commands(f).contains(&"ethtool eno1   # on rank 2 (node03)".to_string()));
    }

    #[test]
    fn slow_against_rated_speed_only_where_one_stream_can_fill_the_link() {
        let mut c = Cluster::healthy(2);
        for l in &mut c.links {
            if l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(2.0);
            }
        }
        // 2 of a rated 10 Gbit/s on every pair: all slow, though equal to the median.
        let fs = c.findings();
        let v = with_id(&fs, "link.slow");
        assert_eq!(v.len(), 2);
        assert!(v[0].summary.contains("rated 10 Gbit/s"), "{}", v[0].summary);
        // 30 of a rated 200 Gbit/s is what one TCP stream gets: not flagged.
        for f in &mut c.facts {
            f.net.interfaces[0].speed_mbps = Some(200_000);
        }
        for l in &mut c.links {
            if l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(30.0);
            }
        }
        assert_eq!(only(&c.findings(), "link.slow").status, Status::Pass);
    }

    #[test]
    fn slow_skips_without_measurements() {
        let mut c = Cluster::healthy(2);
        for l in &mut c.links {
            l.throughput_gbit_s = None;
        }
        assert_eq!(only(&c.findings(), "link.slow").status, Status::Skip);
    }

    #[test]
    fn a_single_node_skips_the_link_checks_and_never_panics_on_empty_input() {
        let c = Cluster::healthy(1);
        let fs = c.findings();
        assert_eq!(only(&fs, "link.unreachable").status, Status::Skip);
        let empty = check_cluster(&ClusterInput {
            nodes: &[],
            nnodes: 0,
            expected_hosts: &[],
            links: &[],
            evals: &[],
            chosen: None,
            master_port: 29500,
        });
        for id in IDS {
            assert!(!with_id(&empty, id).is_empty(), "{id} missing");
        }
    }
}
