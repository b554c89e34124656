//! Where this node stands in the job: nnodes, rank, master address and port, job id, from flags, --hosts, Slurm or torchrun/Kubernetes env.
//!
//! Order (DESIGN.md): torchrun's own flags, then `--hosts LIST`, then Slurm,
//! then the torchrun/Kubernetes environment. In that environment the node rank
//! is the first of `PET_NODE_RANK`, `NODE_RANK`, `GROUP_RANK`, `RANK`,
//! `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job's pod index: a rank the
//! user set explicitly wins over it); under torchrun only `PET_NODE_RANK`,
//! `GROUP_RANK`, `NODE_RANK` (RANK counts processes there). The number of
//! nodes is `PET_NNODES`, then `NNODES`, then under torchrun
//! `GROUP_WORLD_SIZE` or `WORLD_SIZE / LOCAL_WORLD_SIZE`, elsewhere `WORLD_SIZE`.
//!
//! The coordinator's port: the master port itself, except under torchrun,
//! whose own store already holds `MASTER_PORT` on rank 0: there it is
//! `MASTER_PORT + 1`. `--coordinator-port` / `PREFLIGHT_COORDINATOR_PORT`
//! override both. A flag always wins over the
//! environment for the same value, and the environment is only read for the
//! values the flags left open, so a garbage `NODE_RANK` does not matter when
//! `--node-rank` is given. The environment comes in as a map: nothing here
//! reads the process environment.
//!
//! The Slurm hostlist expander is our own rather than the `hostlist-parser`
//! crate: that crate de-duplicates names (which would shift ranks), has no cap
//! on the expansion, accepts reversed ranges Slurm rejects, and rejects `_`.

use preflight_checks::model::NetFacts;
use std::collections::BTreeMap;
use std::net::IpAddr;
use thiserror::Error;

mod endpoint;
mod hostlist;
mod layers;
pub mod local_group;
pub mod local_tasks;
mod other_names;
mod resolve;
mod values;

use endpoint::parse_endpoint;
pub use endpoint::{DEFAULT_MASTER_PORT, DEFAULT_RDZV_PORT, split_endpoint};
pub use hostlist::expand_hostlist;
use layers::*;
pub use other_names::{other_names, other_names_in};
pub use resolve::{Resolved, resolve_host};
use values::*;

/// The placement flags as given, in torchrun's spellings; `resolve` works from these and the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementFlags {
    pub nnodes: Option<u32>,
    pub node_rank: Option<u32>,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    pub rdzv_endpoint: Option<String>,
    pub rdzv_id: Option<String>,
    /// `--rdzv-backend`: with `c10d` and no node rank from any source, ranks are assigned at join.
    pub rdzv_backend: Option<String>,
    /// `--hosts`: every node in rank order (Slurm hostlist syntax).
    pub hosts: Option<String>,
    pub coordinator_port: Option<u16>,
}

/// Most names a host list may expand to.
pub const MAX_HOSTLIST: usize = 100_000;
/// Most nodes preflight runs with (the same cap as `--nnodes`).
pub const MAX_NODES: u32 = 4096;
/// Hosts named in an error before "and N more".
const HOSTS_SHOWN: usize = 20;

/// Where this node stands in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub nnodes: u32,
    pub rank: u32,
    pub master_addr: String,
    pub master_port: u16,
    pub job_id: Option<String>,
    /// Where the job id came from (`--rdzv-id`, `SLURM_JOB_ID`, `TORCHELASTIC_RUN_ID`).
    pub job_id_source: Option<&'static str>,
    /// Expected host per rank, from `--hosts` or Slurm; empty otherwise.
    pub expected_hosts: Vec<String>,
    /// "flags" | "--hosts" | "slurm" | "torchrun-env" | "c10d-join" (see [`C10D_JOIN`])
    pub source: &'static str,
    /// Set when the rank is assigned at join (torchrun's c10d rendezvous with no node rank):
    /// rank 0 owns the endpoint, the others get [`RANK_AT_JOIN`] until the coordinator assigns one.
    pub c10d: Option<C10dJoin>,
    /// The port preflight's coordinator listens on and every node joins: `master_port` unless
    /// under torchrun (`master_port + 1`) or set with `--coordinator-port`/`PREFLIGHT_COORDINATOR_PORT`.
    pub coordinator_port: u16,
    /// Why the coordinator is not on the master port, for the report's reasons; None when it is.
    pub coordinator_note: Option<String>,
}

/// `Placement::source` when ranks are assigned at join, as torchrun's c10d rendezvous does.
pub const C10D_JOIN: &str = "c10d-join";

/// The rank of a node that waits for the coordinator to assign it one (c10d, not the endpoint's owner).
pub const RANK_AT_JOIN: u32 = u32::MAX;

/// How the ranks are found under c10d without a node rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct C10dJoin {
    /// The endpoint host as given (`--rdzv-endpoint`'s host or the master address).
    pub endpoint: String,
    /// What the endpoint host resolved to here.
    pub endpoint_addrs: Vec<IpAddr>,
    /// One of this node's addresses is one of those: it is rank 0 and hosts the coordinator.
    pub owner: bool,
}

/// Is this torchrun's c10d rendezvous backend?
pub fn is_c10d(backend: &str) -> bool {
    backend.trim().eq_ignore_ascii_case("c10d")
}

/// Does this node own the endpoint: is one of its addresses one the endpoint host resolves to?
pub fn owns_endpoint(endpoint_addrs: &[IpAddr], me: &LocalIdentity) -> bool {
    endpoint_addrs.iter().any(|a| me.addrs.contains(a))
}

impl Placement {
    /// True until the coordinator assigned this node its rank (c10d, not the endpoint's owner).
    pub fn rank_pending(&self) -> bool {
        self.rank == RANK_AT_JOIN
    }

    /// The placement the rendezvous uses: `master_port` replaced by the coordinator's port.
    pub fn for_rendezvous(&self) -> Placement {
        Placement {
            master_port: self.coordinator_port,
            ..self.clone()
        }
    }
}

/// Every environment variable `resolve` reads (tests check the shipped recipes set only these).
pub const ENV_VARS: &[&str] = &[
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NODEID",
    "SLURMD_NODENAME",
    "SLURM_JOB_ID",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "NODE_RANK",
    "GROUP_RANK",
    "RANK",
    "JOB_COMPLETION_INDEX",
    "WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    COORDINATOR_PORT_VAR,
];

/// The variable that sets the coordinator's port (as `--coordinator-port` does).
pub const COORDINATOR_PORT_VAR: &str = "PREFLIGHT_COORDINATOR_PORT";

/// Variables only torchrun (and `torch.distributed.launch`) sets for its workers.
const TORCHRUN_MARKERS: &[&str] = &["TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE"];

/// Is this process a torchrun worker? Any of `TORCHELASTIC_RUN_ID`, `GROUP_RANK`, `LOCAL_WORLD_SIZE` set.
pub fn under_torchrun(env: &BTreeMap<String, String>) -> bool {
    Env(env).has_any(TORCHRUN_MARKERS)
}

/// How this node recognises itself in a host list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalIdentity {
    pub hostname: String,
    pub addrs: Vec<IpAddr>,
}

impl LocalIdentity {
    /// This node by its hostname and every usable address of its interfaces.
    pub fn of(hostname: String, net: &NetFacts) -> Self {
        LocalIdentity {
            hostname,
            addrs: net
                .interfaces
                .iter()
                .flat_map(|i| i.usable_addrs())
                .map(|a| a.addr)
                .collect(),
        }
    }
}

/// Why the placement could not be worked out. Every message says what is missing or wrong and what fixes it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LauncherError {
    #[error(
        "the number of nodes is unknown: give --nnodes N (or --hosts LIST; under mpirun or mpiexec, --hosts with the launcher's hosts in order, as their variables do not say which node is which), or run under srun (SLURM_NNODES), or set WORLD_SIZE / PET_NNODES"
    )]
    MissingNnodes,
    #[error(
        "this node's rank is unknown ({nnodes} nodes): give --node-rank R (0..{last}), or --hosts LIST so each node finds itself, or set NODE_RANK (GROUP_RANK under torchrun), or give --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT so ranks are assigned at join as torchrun does"
    )]
    MissingRank { nnodes: u32, last: u32 },
    #[error(
        "the master address is unknown: give --master-addr HOST (rank 0's address) or --rdzv-endpoint HOST:PORT, or set MASTER_ADDR"
    )]
    MissingMaster,
    #[error(
        "the master address is empty: {name} is set but empty ({name}=''), so the command meant to fill it printed nothing (e.g. `$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)` in a container without scontrol); set {name} to rank 0's address on every node (run that command where it exists and check it prints a host), or give --master-addr HOST"
    )]
    EmptyMaster { name: String },
    #[error("{name}={value:?} is not {expected}: {fix}")]
    BadValue {
        name: String,
        value: String,
        expected: &'static str,
        fix: String,
    },
    #[error(
        "rank {rank} (from {rank_from}) is not below the number of nodes {nnodes} (from {nnodes_from}): ranks run 0..{last}; fix {rank_from} or {nnodes_from}"
    )]
    RankOutOfRange {
        rank: u32,
        rank_from: String,
        nnodes: u32,
        nnodes_from: String,
        last: u32,
    },
    #[error("{nnodes} nodes (from {from}) is more than preflight supports ({max})")]
    TooManyNodes { nnodes: u64, from: String, max: u32 },
    #[error("{what} disagree: {a_name} says {a}, {b_name} says {b}; give one, or make them agree")]
    Conflict {
        what: &'static str,
        a_name: String,
        a: String,
        b_name: String,
        b: String,
    },
    #[error(
        "cannot expand the host list {input:?}: {reason} (Slurm syntax: node[1-3],gpu[01-04,07],a[1-2]-ib)"
    )]
    Hostlist { input: String, reason: String },
    #[error("{name}: {inner}")]
    In {
        name: String,
        inner: Box<LauncherError>,
    },
    #[error(
        "this host ({hostname}; addresses {addrs}) is not in {from}: {hosts}; add it under its hostname or an address, or give --node-rank"
    )]
    NotInHosts {
        hostname: String,
        addrs: String,
        from: String,
        hosts: String,
    },
    #[error(
        "this host ({hostname}) appears {count} times in {from} (ranks {ranks}); list each host once, or give --node-rank to say which rank this is"
    )]
    FoundTwice {
        hostname: String,
        count: usize,
        from: String,
        ranks: String,
    },
}

// ----- finding this node in a list -----

fn short_name(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Same name, one the short form of the other, or one of this node's addresses.
fn is_me(entry: &str, me: &LocalIdentity, extra_names: &[&str]) -> bool {
    let e = entry.trim().to_ascii_lowercase();
    if let Ok(ip) = e.trim_matches(['[', ']']).parse::<IpAddr>() {
        return me.addrs.contains(&ip);
    }
    std::iter::once(me.hostname.as_str())
        .chain(extra_names.iter().copied())
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .any(|n| {
            n == e
                || (!n.contains('.') && short_name(&e) == n)
                || (!e.contains('.') && short_name(&n) == e)
        })
}

fn shown_hosts(hosts: &[String]) -> String {
    let mut s = hosts
        .iter()
        .take(HOSTS_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(",");
    if hosts.len() > HOSTS_SHOWN {
        s.push_str(&format!(" and {} more", hosts.len() - HOSTS_SHOWN));
    }
    s
}

fn find_self(
    hosts: &[String],
    me: &LocalIdentity,
    extra_names: &[&str],
    from: &str,
) -> Result<u32, LauncherError> {
    let found: Vec<usize> = hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| is_me(h, me, extra_names))
        .map(|(i, _)| i)
        .collect();
    match found.as_slice() {
        [one] => Ok(*one as u32),
        [] => Err(LauncherError::NotInHosts {
            hostname: me.hostname.clone(),
            addrs: if me.addrs.is_empty() {
                "none known".into()
            } else {
                me.addrs
                    .iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            from: from.to_string(),
            hosts: shown_hosts(hosts),
        }),
        many => Err(LauncherError::FoundTwice {
            hostname: me.hostname.clone(),
            count: many.len(),
            from: from.to_string(),
            ranks: many
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

// ----- resolve -----

/// `--master-addr` and the host of `--rdzv-endpoint`, which must agree when both are given.
fn flag_master(
    args: &PlacementFlags,
    endpoint: Option<&(String, Option<u16>)>,
) -> Result<Option<Sourced<String>>, LauncherError> {
    let addr = args
        .master_addr
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty());
    match (addr, endpoint) {
        (Some(a), Some((h, _))) if !a.eq_ignore_ascii_case(h) => Err(LauncherError::Conflict {
            what: "master addresses",
            a_name: "--master-addr".into(),
            a: a.into(),
            b_name: "--rdzv-endpoint".into(),
            b: h.clone(),
        }),
        (Some(a), _) => Ok(Some(sourced(a.to_string(), "--master-addr"))),
        (None, Some((h, _))) => Ok(Some(sourced(h.clone(), "--rdzv-endpoint"))),
        (None, None) => Ok(None),
    }
}

/// `--master-port`, the port of `--rdzv-endpoint` (torchrun's 29400 when it has none), MASTER_PORT, 29500.
fn master_port(
    args: &PlacementFlags,
    endpoint: Option<&(String, Option<u16>)>,
    env: &Env,
) -> Result<u16, LauncherError> {
    let flag = args.master_port;
    let ep_port = endpoint.and_then(|(_, p)| *p);
    if let (Some(f), Some(e)) = (flag, ep_port.filter(|e| Some(*e) != flag)) {
        return Err(LauncherError::Conflict {
            what: "master ports",
            a_name: "--master-port".into(),
            a: f.to_string(),
            b_name: "--rdzv-endpoint".into(),
            b: e.to_string(),
        });
    }
    if let Some(p) = flag.or(ep_port) {
        if p == 0 {
            return Err(LauncherError::BadValue {
                name: "--master-port".into(),
                value: "0".into(),
                expected: PORT_EXPECTED,
                fix: "give a port 1-65535".into(),
            });
        }
        return Ok(p);
    }
    if endpoint.is_some() {
        return Ok(DEFAULT_RDZV_PORT);
    }
    match env.first(&["PET_MASTER_PORT", "MASTER_PORT"]) {
        Some((k, v)) => parse_port(
            k,
            v,
            &format!("set {k} to a free port, or give --master-port"),
        ),
        None => Ok(DEFAULT_MASTER_PORT),
    }
}

/// The launcher's master port from the environment (`PET_MASTER_PORT`, then `MASTER_PORT`), if set.
pub fn env_master_port(env: &BTreeMap<String, String>) -> Result<Option<u16>, LauncherError> {
    match Env(env).first(&["PET_MASTER_PORT", "MASTER_PORT"]) {
        Some((k, v)) => parse_port(
            k,
            v,
            &format!("set {k} to a free port, or give --master-port"),
        )
        .map(Some),
        None => Ok(None),
    }
}

/// The job id and where it came from: `--rdzv-id`, else `SLURM_JOB_ID`, else `TORCHELASTIC_RUN_ID`.
fn job_id(args: &PlacementFlags, env: &Env) -> Option<(String, &'static str)> {
    args.rdzv_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| (s.to_string(), "--rdzv-id"))
        .or_else(|| {
            env.first(&["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"])
                // torchrun's placeholder when no --rdzv-id was given: the same everywhere, so no id at all.
                .filter(|(_, v)| !v.eq_ignore_ascii_case("none"))
                .map(|(k, v)| (v.to_string(), k))
        })
}

fn check_nnodes(n: &Sourced<u32>) -> Result<(), LauncherError> {
    if n.value == 0 {
        return Err(LauncherError::BadValue {
            name: n.from.clone(),
            value: "0".into(),
            expected: NNODES_EXPECTED,
            fix: "give --nnodes N with N >= 1".into(),
        });
    }
    if n.value > MAX_NODES {
        return Err(LauncherError::TooManyNodes {
            nnodes: u64::from(n.value),
            from: n.from.clone(),
            max: MAX_NODES,
        });
    }
    Ok(())
}

/// Works out nnodes, rank, master and port from the flags, then `--hosts`, Slurm or the torchrun/Kubernetes environment.
pub fn resolve(
    args: &PlacementFlags,
    env: &BTreeMap<String, String>,
    me: &LocalIdentity,
) -> Result<Placement, LauncherError> {
    let env = Env(env);
    let endpoint = args
        .rdzv_endpoint
        .as_deref()
        .map(parse_endpoint)
        .transpose()?;
    let flag_nnodes = args.nnodes.map(|n| sourced(n, "--nnodes"));
    let flag_rank = args.node_rank.map(|r| sourced(r, "--node-rank"));
    let flag_master = flag_master(args, endpoint.as_ref())?;
    let single = flag_nnodes.as_ref().is_some_and(|n| n.value == 1);
    let need = Need {
        nnodes: flag_nnodes.is_none(),
        rank: flag_rank.is_none() && !single,
        master: flag_master.is_none() && !single,
    };
    let layer = if let Some(list) = args.hosts.as_deref() {
        hosts_layer(list, need, me)?
    } else if !need.nnodes && !need.rank && !need.master {
        // The flags say it all; Slurm's node list still tells rank 0's host, for the report.
        Layer {
            hosts: slurm_hosts(&env, flag_nnodes.as_ref().map(|n| n.value)),
            ..Layer::default()
        }
    } else if let Some(l) = slurm_layer(&env, need, me)? {
        l
    } else {
        torch_layer(&env, need)?.unwrap_or_default()
    };
    let hosts_nnodes = layer.nnodes.as_ref().filter(|_| args.hosts.is_some());
    if let (Some(f), Some(h)) = (
        &flag_nnodes,
        hosts_nnodes.filter(|h| Some(h.value) != args.nnodes),
    ) {
        return Err(LauncherError::Conflict {
            what: "the number of nodes",
            a_name: "--nnodes".into(),
            a: f.value.to_string(),
            b_name: "--hosts".into(),
            b: format!("{} hosts", h.value),
        });
    }
    let nnodes = flag_nnodes
        .or(layer.nnodes)
        .ok_or(LauncherError::MissingNnodes)?;
    check_nnodes(&nnodes)?;
    let c10d_backend = args.rdzv_backend.as_deref().is_some_and(is_c10d);
    let mut c10d = None;
    let rank = match flag_rank.or(layer.rank) {
        Some(r) => r,
        None if nnodes.value == 1 => sourced(0, "the default for one node"),
        None if c10d_backend => {
            let join = c10d_join(
                flag_master.as_ref().or(layer.master.as_ref()),
                me,
                args,
                &env,
            )?;
            let rank = if join.owner { 0 } else { RANK_AT_JOIN };
            c10d = Some(join);
            sourced(rank, "--rdzv-backend=c10d (assigned at join)")
        }
        None => {
            return Err(LauncherError::MissingRank {
                nnodes: nnodes.value,
                last: nnodes.value - 1,
            });
        }
    };
    if rank.value >= nnodes.value && c10d.is_none() {
        return Err(LauncherError::RankOutOfRange {
            rank: rank.value,
            rank_from: rank.from,
            nnodes: nnodes.value,
            nnodes_from: nnodes.from,
            last: nnodes.value - 1,
        });
    }
    let master_addr = match flag_master.or(layer.master) {
        Some(m) => m.value,
        None if nnodes.value == 1 => "127.0.0.1".to_string(),
        None => return Err(missing_master(args, &env)),
    };
    let master_port = master_port(args, endpoint.as_ref(), &env)?;
    let (coordinator_port, coordinator_note) =
        coordinator_port(args, &env, master_port, env.has_any(TORCHRUN_MARKERS))?;
    Ok(Placement {
        nnodes: nnodes.value,
        rank: rank.value,
        master_addr,
        master_port,
        job_id_source: job_id(args, &env).map(|(_, from)| from),
        job_id: job_id(args, &env).map(|(id, _)| id),
        expected_hosts: layer.hosts,
        source: if c10d.is_some() {
            C10D_JOIN
        } else {
            layer.source.unwrap_or("flags")
        },
        c10d,
        coordinator_port,
        coordinator_note,
    })
}

/// Under c10d with no node rank: resolve the endpoint host (bounded) and see whether this node owns it.
fn c10d_join(
    master: Option<&Sourced<String>>,
    me: &LocalIdentity,
    args: &PlacementFlags,
    env: &Env,
) -> Result<C10dJoin, LauncherError> {
    let Some(master) = master else {
        return Err(missing_master(args, env));
    };
    let endpoint = master.value.clone();
    let endpoint_addrs = resolve_host(&endpoint).addrs;
    Ok(C10dJoin {
        owner: owns_endpoint(&endpoint_addrs, me),
        endpoint,
        endpoint_addrs,
    })
}

/// Why no master address was found: `--master-addr` or a master variable set but empty (the
/// command meant to fill it printed nothing), else simply none given.
fn missing_master(args: &PlacementFlags, env: &Env) -> LauncherError {
    if args
        .master_addr
        .as_deref()
        .is_some_and(|a| a.trim().is_empty())
    {
        return LauncherError::EmptyMaster {
            name: "--master-addr".into(),
        };
    }
    ["PET_MASTER_ADDR", "MASTER_ADDR"]
        .iter()
        .find(|k| env.0.get(**k).is_some_and(|v| v.trim().is_empty()))
        .map_or(LauncherError::MissingMaster, |k| {
            LauncherError::EmptyMaster {
                name: k.to_string(),
            }
        })
}

/// The coordinator's port and, when it is not the master port, why (see the module doc for the rule).
fn coordinator_port(
    args: &PlacementFlags,
    env: &Env,
    master_port: u16,
    under_torchrun: bool,
) -> Result<(u16, Option<String>), LauncherError> {
    let given = match (args.coordinator_port, env.get(COORDINATOR_PORT_VAR)) {
        (Some(p), _) => Some((p, "--coordinator-port")),
        (None, Some(v)) => Some((
            parse_port(
                COORDINATOR_PORT_VAR,
                v,
                "set it to a free port every node can reach on rank 0, or unset it",
            )?,
            COORDINATOR_PORT_VAR,
        )),
        (None, None) => None,
    };
    if let Some((port, from)) = given {
        if port == master_port {
            return Ok((port, None));
        }
        let proof = if under_torchrun {
            "under torchrun the master port is held by torchrun's own store"
        } else {
            "the master port itself was not tested for reachability"
        };
        return Ok((
            port,
            Some(format!(
                "coordinator port {port} (from {from}): preflight's coordinator listened on it on rank 0 instead of the master port {master_port}; {proof}"
            )),
        ));
    }
    if !under_torchrun {
        return Ok((master_port, None));
    }
    let Some(next) = master_port.checked_add(1) else {
        return Err(LauncherError::BadValue {
            name: "MASTER_PORT".into(),
            value: master_port.to_string(),
            expected: "a port below 65535 under torchrun (preflight's coordinator takes MASTER_PORT + 1)",
            fix: format!("give --coordinator-port PORT or set {COORDINATOR_PORT_VAR}"),
        });
    };
    Ok((
        next,
        Some(format!(
            "coordinator port {next} (MASTER_PORT + 1): under torchrun, torchrun's own store holds the master port {master_port} on rank 0, so preflight's coordinator listened on the next port and every joined node reached it there (change with --coordinator-port or {COORDINATOR_PORT_VAR})"
        )),
    ))
}

#[cfg(test)]
mod tests;
