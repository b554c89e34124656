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

use crate::cli::ClusterArgs;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::str::FromStr;
use thiserror::Error;

/// torchrun's default master port.
pub const DEFAULT_MASTER_PORT: u16 = 29500;
/// torchrun's c10d port when `--rdzv-endpoint` names no port.
pub const DEFAULT_RDZV_PORT: u16 = 29400;
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
    /// Expected host per rank, from `--hosts` or Slurm; empty otherwise.
    pub expected_hosts: Vec<String>,
    /// "flags" | "--hosts" | "slurm" | "torchrun-env"
    pub source: &'static str,
    /// The port preflight's coordinator listens on and every node joins: `master_port` unless
    /// under torchrun (`master_port + 1`) or set with `--coordinator-port`/`PREFLIGHT_COORDINATOR_PORT`.
    pub coordinator_port: u16,
    /// Why the coordinator is not on the master port, for the report's reasons; None when it is.
    pub coordinator_note: Option<String>,
}

impl Placement {
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

/// Why the placement could not be worked out. Every message says what is missing or wrong and what fixes it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LauncherError {
    #[error(
        "the number of nodes is unknown: give --nnodes N (or --hosts LIST), or run under srun (SLURM_NNODES), or set WORLD_SIZE / PET_NNODES"
    )]
    MissingNnodes,
    #[error(
        "this node's rank is unknown ({nnodes} nodes): give --node-rank R (0..{last}), or --hosts LIST so each node finds itself, or set NODE_RANK (GROUP_RANK under torchrun)"
    )]
    MissingRank { nnodes: u32, last: u32 },
    #[error(
        "the master address is unknown: give --master-addr HOST (rank 0's address) or --rdzv-endpoint HOST:PORT, or set MASTER_ADDR"
    )]
    MissingMaster,
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

/// A value and the flag or variable it came from, for error messages.
#[derive(Clone, Debug)]
struct Sourced<T> {
    value: T,
    from: String,
}

fn sourced<T>(value: T, from: impl Into<String>) -> Sourced<T> {
    Sourced {
        value,
        from: from.into(),
    }
}

/// The environment, with empty values treated as unset.
struct Env<'a>(&'a BTreeMap<String, String>);

impl Env<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn has_any(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.get(k).is_some())
    }

    /// The first of `keys` that is set, as (key, value).
    fn first<'k>(&self, keys: &[&'k str]) -> Option<(&'k str, &str)> {
        keys.iter().find_map(|k| self.get(k).map(|v| (*k, v)))
    }

    fn number<T: FromStr>(
        &self,
        keys: &[&str],
        expected: &'static str,
        fix: &str,
    ) -> Result<Option<Sourced<T>>, LauncherError> {
        self.first(keys)
            .map(|(k, v)| parse_number(k, v, expected, fix).map(|n| sourced(n, k)))
            .transpose()
    }
}

fn parse_number<T: FromStr>(
    name: &str,
    value: &str,
    expected: &'static str,
    fix: &str,
) -> Result<T, LauncherError> {
    value.trim().parse().map_err(|_| LauncherError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        expected,
        fix: fix.to_string(),
    })
}

const RANK_EXPECTED: &str = "a node rank (a whole number from 0)";
const RANK_FIX: &str = "set it to this node's rank, or give --node-rank";
const NNODES_EXPECTED: &str = "a number of nodes (a whole number from 1)";
const NNODES_FIX: &str = "set it to the number of nodes, or give --nnodes";
const PORT_EXPECTED: &str = "a port number (1-65535)";

fn parse_port(name: &str, value: &str, fix: &str) -> Result<u16, LauncherError> {
    let port: u16 = parse_number(name, value, PORT_EXPECTED, fix)?;
    if port == 0 {
        return Err(LauncherError::BadValue {
            name: name.into(),
            value: value.into(),
            expected: PORT_EXPECTED,
            fix: fix.into(),
        });
    }
    Ok(port)
}

// ----- --rdzv-endpoint -----

/// Splits `HOST:PORT`, `[v6]:PORT`, `HOST`, `[v6]` or a bare IPv6 address.
pub fn split_endpoint(v: &str) -> Result<(String, Option<u16>), String> {
    let v = v.trim();
    let (host, port) = if let Some(rest) = v.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{v:?} has '[' without ']'"))?;
        match after {
            "" => (host, None),
            p => (
                host,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("{v:?}: expected ':' after ']'"))?,
                ),
            ),
        }
    } else if v.matches(':').count() > 1 {
        (v, None)
    } else {
        match v.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (v, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{v:?} has no host"));
    }
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{p:?} is not a port (1-65535)")),
        })
        .transpose()?;
    Ok((host.to_string(), port))
}

/// `host:port` with IPv6 hosts bracketed.
pub fn join_endpoint(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `--rdzv-endpoint` in torchrun's grammar (`HOST:PORT`, `[v6]:PORT`, `HOST`, `[v6]`, bare IPv6),
/// with the error in the launcher's terms.
fn parse_endpoint(value: &str) -> Result<(String, Option<u16>), LauncherError> {
    split_endpoint(value).map_err(|why| LauncherError::BadValue {
        name: "--rdzv-endpoint".into(),
        value: value.into(),
        expected: if why.contains("not a port") {
            PORT_EXPECTED
        } else {
            "HOST:PORT"
        },
        fix: format!(
            "{why}; give HOST:PORT, e.g. --rdzv-endpoint=10.0.0.1:29500 or [fd00::1]:29500"
        ),
    })
}

// ----- the layers below the flags -----

/// What the flags left open; the layers parse only that.
#[derive(Clone, Copy)]
struct Need {
    nnodes: bool,
    rank: bool,
    master: bool,
}

/// Values from one source below the flags.
#[derive(Default)]
struct Layer {
    source: Option<&'static str>,
    nnodes: Option<Sourced<u32>>,
    rank: Option<Sourced<u32>>,
    master: Option<Sourced<String>>,
    hosts: Vec<String>,
}

fn in_var(name: &str) -> impl FnOnce(LauncherError) -> LauncherError + '_ {
    move |e| LauncherError::In {
        name: name.to_string(),
        inner: Box::new(e),
    }
}

fn hosts_count(hosts: &[String], from: &str) -> Result<u32, LauncherError> {
    u32::try_from(hosts.len())
        .ok()
        .filter(|n| *n <= MAX_NODES)
        .ok_or(LauncherError::TooManyNodes {
            nnodes: hosts.len() as u64,
            from: from.to_string(),
            max: MAX_NODES,
        })
}

fn hosts_layer(list: &str, need: Need, me: &LocalIdentity) -> Result<Layer, LauncherError> {
    let hosts = expand_hostlist(list).map_err(in_var("--hosts"))?;
    let n = hosts_count(&hosts, "--hosts")?;
    let rank = if need.rank {
        Some(sourced(find_self(&hosts, me, &[], "--hosts")?, "--hosts"))
    } else {
        None
    };
    Ok(Layer {
        source: Some("--hosts"),
        nnodes: Some(sourced(n, "--hosts")),
        rank,
        master: hosts
            .first()
            .map(|h| sourced(h.clone(), "--hosts (its first host)")),
        hosts,
    })
}

const SLURM_NODELISTS: &[&str] = &[
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
];

fn slurm_layer(env: &Env, need: Need, me: &LocalIdentity) -> Result<Option<Layer>, LauncherError> {
    let Some((list_var, list)) = env.first(SLURM_NODELISTS) else {
        return Ok(None);
    };
    let hosts = expand_hostlist(list).map_err(in_var(list_var))?;
    let listed = hosts_count(&hosts, list_var)?;
    let declared: Option<Sourced<u32>> = env.number(
        &[
            "SLURM_STEP_NUM_NODES",
            "SLURM_NNODES",
            "SLURM_JOB_NUM_NODES",
        ],
        NNODES_EXPECTED,
        NNODES_FIX,
    )?;
    if let Some(d) = declared
        .as_ref()
        .filter(|d| need.nnodes && d.value != listed)
    {
        return Err(LauncherError::Conflict {
            what: "the number of nodes",
            a_name: d.from.clone(),
            a: d.value.to_string(),
            b_name: list_var.to_string(),
            b: format!("{listed} hosts"),
        });
    }
    let rank = if need.rank {
        match env.number::<u32>(&["SLURM_NODEID"], RANK_EXPECTED, RANK_FIX)? {
            Some(r) => Some(r),
            None => {
                let extra: Vec<&str> = env.get("SLURMD_NODENAME").into_iter().collect();
                Some(sourced(find_self(&hosts, me, &extra, list_var)?, list_var))
            }
        }
    } else {
        None
    };
    Ok(Some(Layer {
        source: Some("slurm"),
        nnodes: Some(declared.unwrap_or_else(|| sourced(listed, list_var))),
        rank,
        master: hosts
            .first()
            .map(|h| sourced(h.clone(), format!("{list_var} (its first host)"))),
        hosts,
    }))
}

const TORCH_VARS: &[&str] = &[
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "MASTER_ADDR",
    "NODE_RANK",
    "GROUP_RANK",
    "RANK",
    "WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "LOCAL_WORLD_SIZE",
    "JOB_COMPLETION_INDEX",
    "NNODES",
];

/// `PET_NNODES` may be torchrun's `MIN:MAX`; only a fixed count makes sense here.
fn pet_nnodes(env: &Env) -> Result<Option<Sourced<u32>>, LauncherError> {
    let Some(v) = env.get("PET_NNODES") else {
        return Ok(None);
    };
    let bad = || LauncherError::BadValue {
        name: "PET_NNODES".into(),
        value: v.into(),
        expected: "a fixed number of nodes (N or N:N)",
        fix: "give --nnodes N".into(),
    };
    let (lo, hi) = v.split_once(':').unwrap_or((v, v));
    let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
    if lo != hi {
        return Err(bad());
    }
    Ok(Some(sourced(lo, "PET_NNODES")))
}

/// Under torchrun (TORCHELASTIC_RUN_ID set) WORLD_SIZE counts processes: nodes = WORLD_SIZE / LOCAL_WORLD_SIZE.
fn torchrun_nnodes(env: &Env) -> Result<Option<Sourced<u32>>, LauncherError> {
    if let Some(n) = env.number(&["GROUP_WORLD_SIZE"], NNODES_EXPECTED, NNODES_FIX)? {
        return Ok(Some(n));
    }
    let Some(world) = env.number::<u32>(&["WORLD_SIZE"], NNODES_EXPECTED, NNODES_FIX)? else {
        return Ok(None);
    };
    let fix = "under torchrun WORLD_SIZE counts processes; give --nnodes";
    let local: u32 = match env.get("LOCAL_WORLD_SIZE") {
        Some(v) => parse_number("LOCAL_WORLD_SIZE", v, "a number of processes per node", fix)?,
        None => {
            return Err(LauncherError::BadValue {
                name: "LOCAL_WORLD_SIZE".into(),
                value: String::new(),
                expected: "set under torchrun (WORLD_SIZE counts processes, not nodes)",
                fix: fix.into(),
            });
        }
    };
    if local == 0 || world.value % local != 0 {
        return Err(LauncherError::BadValue {
            name: "WORLD_SIZE / LOCAL_WORLD_SIZE".into(),
            value: format!("{} / {local}", world.value),
            expected: "a whole number of nodes",
            fix: fix.into(),
        });
    }
    Ok(Some(sourced(
        world.value / local,
        "WORLD_SIZE / LOCAL_WORLD_SIZE",
    )))
}

fn torch_layer(env: &Env, need: Need) -> Result<Option<Layer>, LauncherError> {
    if !env.has_any(TORCH_VARS) {
        return Ok(None);
    }
    let under_torchrun = env.has_any(TORCHRUN_MARKERS);
    let rank_vars: &[&str] = if under_torchrun {
        &["PET_NODE_RANK", "GROUP_RANK", "NODE_RANK"]
    } else {
        &[
            "PET_NODE_RANK",
            "NODE_RANK",
            "GROUP_RANK",
            "RANK",
            "JOB_COMPLETION_INDEX",
        ]
    };
    let rank = if need.rank {
        env.number(rank_vars, RANK_EXPECTED, RANK_FIX)?
    } else {
        None
    };
    let nnodes = if !need.nnodes {
        None
    } else if let Some(n) = pet_nnodes(env)? {
        Some(n)
    } else if let Some(n) = env.number(&["NNODES"], NNODES_EXPECTED, NNODES_FIX)? {
        Some(n)
    } else if under_torchrun {
        torchrun_nnodes(env)?
    } else {
        env.number(&["WORLD_SIZE"], NNODES_EXPECTED, NNODES_FIX)?
    };
    let master = env
        .first(&["PET_MASTER_ADDR", "MASTER_ADDR"])
        .map(|(k, v)| sourced(v.to_string(), k));
    Ok(Some(Layer {
        source: Some("torchrun-env"),
        nnodes,
        rank,
        master,
        hosts: Vec::new(),
    }))
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
    args: &ClusterArgs,
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
    args: &ClusterArgs,
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

fn job_id(args: &ClusterArgs, env: &Env) -> Option<String> {
    args.rdzv_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| {
            env.first(&["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"])
                // torchrun's placeholder when no --rdzv-id was given: the same everywhere, so no id at all.
                .filter(|(_, v)| !v.eq_ignore_ascii_case("none"))
                .map(|(_, v)| v.to_string())
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
    args: &ClusterArgs,
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
        Layer::default()
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
    let rank = match flag_rank.or(layer.rank) {
        Some(r) => r,
        None if nnodes.value == 1 => sourced(0, "the default for one node"),
        None => {
            return Err(LauncherError::MissingRank {
                nnodes: nnodes.value,
                last: nnodes.value - 1,
            });
        }
    };
    if rank.value >= nnodes.value {
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
        None => return Err(LauncherError::MissingMaster),
    };
    let master_port = master_port(args, endpoint.as_ref(), &env)?;
    let (coordinator_port, coordinator_note) =
        coordinator_port(args, &env, master_port, env.has_any(TORCHRUN_MARKERS))?;
    Ok(Placement {
        nnodes: nnodes.value,
        rank: rank.value,
        master_addr,
        master_port,
        job_id: job_id(args, &env),
        expected_hosts: layer.hosts,
        source: layer.source.unwrap_or("flags"),
        coordinator_port,
        coordinator_note,
    })
}

/// The coordinator's port and, when it is not the master port, why (see the module doc for the rule).
fn coordinator_port(
    args: &ClusterArgs,
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

// ----- Slurm hostlist expansion -----

/// One piece of a host pattern: literal text or a bracketed set of numbers.
enum Piece {
    Text(String),
    /// (low, high, zero-padded width), in the order written.
    Numbers(Vec<(u64, u64, usize)>),
}

fn hostlist_err(input: &str, reason: impl Into<String>) -> LauncherError {
    LauncherError::Hostlist {
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// Splits on commas and whitespace outside brackets; rejects unbalanced or nested brackets.
fn split_items(input: &str) -> Result<Vec<&str>, LauncherError> {
    let mut items = Vec::new();
    let mut depth = 0u8;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '[' if depth > 0 => return Err(hostlist_err(input, "nested '['")),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(hostlist_err(input, "']' without '['")),
            ']' => depth = 0,
            ',' | ' ' | '\t' | '\n' | '\r' if depth == 0 => {
                items.push(&input[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(hostlist_err(input, "'[' without ']'"));
    }
    items.push(&input[start..]);
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

fn parse_bound(input: &str, s: &str) -> Result<(u64, usize), LauncherError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(hostlist_err(
            input,
            format!("{s:?} inside brackets is not a number"),
        ));
    }
    let n = s
        .parse()
        .map_err(|_| hostlist_err(input, format!("{s} is too large")))?;
    Ok((n, s.len()))
}

fn parse_ranges(input: &str, inside: &str) -> Result<Vec<(u64, u64, usize)>, LauncherError> {
    if inside.trim().is_empty() {
        return Err(hostlist_err(input, "empty brackets"));
    }
    inside
        .split(',')
        .map(|part| {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let (lo, width) = parse_bound(input, lo)?;
            let (hi, _) = parse_bound(input, hi)?;
            if hi < lo {
                return Err(hostlist_err(
                    input,
                    format!("range {} runs backwards", part.trim()),
                ));
            }
            Ok((lo, hi, width))
        })
        .collect()
}

fn parse_item(input: &str, item: &str) -> Result<Vec<Piece>, LauncherError> {
    let mut pieces = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_string()));
        }
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| hostlist_err(input, "'[' without ']'"))?;
        pieces.push(Piece::Numbers(parse_ranges(input, &rest[open + 1..close])?));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    Ok(pieces)
}

/// How many names a pattern expands to, or None past `limit`.
fn item_count(pieces: &[Piece], limit: u64) -> Option<u64> {
    pieces
        .iter()
        .try_fold(1u64, |acc, p| {
            let Piece::Numbers(ranges) = p else {
                return Some(acc);
            };
            let n = ranges.iter().try_fold(0u64, |sum, (lo, hi, _)| {
                sum.checked_add((hi - lo).checked_add(1)?)
            })?;
            acc.checked_mul(n).filter(|total| *total <= limit)
        })
        .filter(|total| *total <= limit)
}

fn expand_item(pieces: &[Piece], out: &mut Vec<String>) {
    let mut names = vec![String::new()];
    for p in pieces {
        match p {
            Piece::Text(t) => names.iter_mut().for_each(|n| n.push_str(t)),
            Piece::Numbers(ranges) => {
                names = names
                    .iter()
                    .flat_map(|prefix| {
                        ranges.iter().flat_map(move |(lo, hi, width)| {
                            (*lo..=*hi).map(move |i| format!("{prefix}{i:0width$}"))
                        })
                    })
                    .collect();
            }
        }
    }
    out.extend(names);
}

/// Expands Slurm hostlist syntax (`node[1-3]`, `gpu[01-04,07]`, `a[1-2]-ib`, `r[1-2]n[1-2]`, comma lists) in order, keeping duplicates.
pub fn expand_hostlist(s: &str) -> Result<Vec<String>, LauncherError> {
    let mut out: Vec<String> = Vec::new();
    for item in split_items(s)? {
        let pieces = parse_item(s, item)?;
        let room = (MAX_HOSTLIST - out.len()) as u64;
        if item_count(&pieces, room).is_none() {
            return Err(hostlist_err(
                s,
                format!("expands to more than {MAX_HOSTLIST} names"),
            ));
        }
        expand_item(&pieces, &mut out);
    }
    if out.is_empty() {
        return Err(hostlist_err(s, "no host in it"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(flags: &[&str]) -> ClusterArgs {
        let argv = ["preflight", "cluster"].iter().chain(flags.iter());
        match Cli::try_parse_from(argv).expect("flags parse").command {
            Command::Cluster(c) => c,
            other => panic!("not cluster: {other:?}"),
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn me(hostname: &str, addrs: &[&str]) -> LocalIdentity {
        LocalIdentity {
            hostname: hostname.into(),
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    fn nobody() -> LocalIdentity {
        me("somewhere", &[])
    }

    fn ok(flags: &[&str], vars: &[(&str, &str)], who: &LocalIdentity) -> Placement {
        resolve(&args(flags), &env(vars), who).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(flags: &[&str], vars: &[(&str, &str)], who: &LocalIdentity) -> LauncherError {
        match resolve(&args(flags), &env(vars), who) {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => e,
        }
    }

    // ----- expand_hostlist -----

    #[test]
    fn expands_ranges_padding_lists_and_suffixes() {
        assert_eq!(
            expand_hostlist("node[1-3]").unwrap(),
            ["node1", "node2", "node3"]
        );
        assert_eq!(
            expand_hostlist("gpu[01-04,07]").unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
        );
        assert_eq!(expand_hostlist("a[1-2]-ib").unwrap(), ["a1-ib", "a2-ib"]);
        assert_eq!(expand_hostlist("n[08-10]").unwrap(), ["n08", "n09", "n10"]);
        assert_eq!(
            expand_hostlist("node1, node2,gpu[7,9]").unwrap(),
            ["node1", "node2", "gpu7", "gpu9"]
        );
        assert_eq!(
            expand_hostlist("r[1-2]n[1-2]").unwrap(),
            ["r1n1", "r1n2", "r2n1", "r2n2"]
        );
        assert_eq!(
            expand_hostlist("10.0.0.[1-2],host_a").unwrap(),
            ["10.0.0.1", "10.0.0.2", "host_a"]
        );
    }

    #[test]
    fn keeps_order_and_duplicates() {
        assert_eq!(expand_hostlist("b,a,b").unwrap(), ["b", "a", "b"]);
        assert_eq!(expand_hostlist("n[3,1]").unwrap(), ["n3", "n1"]);
    }

    #[test]
    fn rejects_malformed_lists_with_the_reason() {
        for (bad, reason) in [
            ("node[1-3", "without ']'"),
            ("node1-3]", "without '['"),
            ("n[[1]]", "nested"),
            ("n[]", "empty brackets"),
            ("n[a-b]", "not a number"),
            ("n[3-1]", "backwards"),
            ("n[1-]", "not a number"),
            (" , ", "no host"),
            ("n[99999999999999999999]", "too large"),
        ] {
            let e = expand_hostlist(bad).expect_err(bad).to_string();
            assert!(e.contains(reason), "{bad}: {e}");
            assert!(e.contains("Slurm syntax"), "{e}");
        }
    }

    #[test]
    fn caps_the_expansion_without_allocating_it() {
        let e = expand_hostlist("n[0-18446744073709551615]").unwrap_err();
        assert!(e.to_string().contains("more than 100000"), "{e}");
        let e = expand_hostlist("a[1-1000]b[1-1000]").unwrap_err();
        assert!(e.to_string().contains("more than 100000"), "{e}");
        assert_eq!(expand_hostlist("n[1-100000]").unwrap().len(), 100_000);
        assert!(expand_hostlist("n[1-100000],x").is_err());
    }

    // ----- flags -----

    #[test]
    fn torchrun_flags_alone() {
        let p = ok(
            &[
                "--nnodes=3",
                "--node_rank=2",
                "--master-addr=10.0.0.1",
                "--master_port=29600",
                "--rdzv-id=job7",
            ],
            &[],
            &nobody(),
        );
        assert_eq!(
            p,
            Placement {
                nnodes: 3,
                rank: 2,
                master_addr: "10.0.0.1".into(),
                master_port: 29600,
                job_id: Some("job7".into()),
                expected_hosts: vec![],
                source: "flags",
                coordinator_port: 29600,
                coordinator_note: None,
            }
        );
    }

    #[test]
    fn rdzv_endpoint_gives_host_and_port_including_ipv6() {
        let p = ok(
            &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01:29555"],
            &[],
            &nobody(),
        );
        assert_eq!((p.master_addr.as_str(), p.master_port), ("gpu01", 29555));
        let p = ok(
            &[
                "--nnodes=2",
                "--node-rank=1",
                "--rdzv_endpoint=[fd00::1]:29555",
            ],
            &[],
            &nobody(),
        );
        assert_eq!((p.master_addr.as_str(), p.master_port), ("fd00::1", 29555));
        // No port: torchrun's c10d default, not MASTER_PORT.
        let p = ok(
            &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01"],
            &[("MASTER_PORT", "1234")],
            &nobody(),
        );
        assert_eq!(p.master_port, DEFAULT_RDZV_PORT);
        let p = ok(
            &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=fd00::2"],
            &[],
            &nobody(),
        );
        assert_eq!(p.master_addr, "fd00::2");
    }

    #[test]
    fn bad_or_conflicting_endpoints_are_named() {
        let e = err(
            &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01:http"],
            &[],
            &nobody(),
        );
        assert!(e.to_string().contains("--rdzv-endpoint"), "{e}");
        let e = err(
            &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01:0"],
            &[],
            &nobody(),
        );
        assert!(e.to_string().contains("port number"), "{e}");
        let e = err(
            &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=[fd00::1"],
            &[],
            &nobody(),
        );
        assert!(e.to_string().contains("--rdzv-endpoint"), "{e}");
        let e = err(
            &[
                "--nnodes=2",
                "--node-rank=1",
                "--rdzv-endpoint=a:1",
                "--master-addr=b",
            ],
            &[],
            &nobody(),
        );
        assert!(matches!(e, LauncherError::Conflict { .. }), "{e}");
        let e = err(
            &[
                "--nnodes=2",
                "--node-rank=1",
                "--rdzv-endpoint=a:1",
                "--master-port=2",
            ],
            &[],
            &nobody(),
        );
        assert!(e.to_string().contains("--master-port says 2"), "{e}");
    }

    #[test]
    fn one_node_needs_no_rank_or_master() {
        let p = ok(&["--nnodes=1"], &[], &nobody());
        assert_eq!(
            (p.rank, p.master_addr.as_str(), p.master_port),
            (0, "127.0.0.1", 29500)
        );
    }

    #[test]
    fn missing_pieces_say_which_flag_fixes_them() {
        let e = err(&[], &[], &nobody());
        assert_eq!(e, LauncherError::MissingNnodes);
        assert!(e.to_string().contains("--nnodes"));
        let e = err(&["--nnodes=4", "--master-addr=x"], &[], &nobody());
        assert!(e.to_string().contains("--node-rank R (0..3)"), "{e}");
        let e = err(&["--nnodes=4", "--node-rank=1"], &[], &nobody());
        assert!(e.to_string().contains("--master-addr"), "{e}");
    }

    #[test]
    fn rank_must_be_below_nnodes_and_says_where_each_came_from() {
        let e = err(
            &["--nnodes=2", "--node-rank=2", "--master-addr=x"],
            &[],
            &nobody(),
        );
        let s = e.to_string();
        assert!(s.contains("rank 2 (from --node-rank)"), "{s}");
        assert!(s.contains("nodes 2 (from --nnodes)"), "{s}");
        let e = err(
            &["--master-addr=x"],
            &[("NODE_RANK", "5"), ("WORLD_SIZE", "4")],
            &nobody(),
        );
        assert!(e.to_string().contains("from NODE_RANK"), "{e}");
    }

    // ----- --hosts -----

    #[test]
    fn hosts_find_this_node_by_name_short_name_fqdn_or_address() {
        let flags = ["--hosts=gpu[01-03]"];
        let p = ok(&flags, &[], &me("gpu02", &[]));
        assert_eq!((p.rank, p.nnodes, p.source), (1, 3, "--hosts"));
        assert_eq!(p.master_addr, "gpu01");
        assert_eq!(p.expected_hosts, ["gpu01", "gpu02", "gpu03"]);
        // FQDN hostname, short names in the list.
        assert_eq!(ok(&flags, &[], &me("gpu03.cluster.local", &[])).rank, 2);
        // Short hostname, FQDNs in the list.
        let p = ok(&["--hosts=a.x,b.x"], &[], &me("B", &[]));
        assert_eq!(p.rank, 1);
        // Found by address.
        let p = ok(
            &["--hosts=10.0.0.[1-3]"],
            &[],
            &me("unrelated", &["10.0.0.3"]),
        );
        assert_eq!((p.rank, p.master_addr.as_str()), (2, "10.0.0.1"));
        // Different domains are not the same host.
        assert!(resolve(&args(&["--hosts=n1.a,n2.a"]), &env(&[]), &me("n1.b", &[])).is_err());
    }

    #[test]
    fn hosts_port_comes_from_flag_then_master_port_then_default() {
        let who = me("gpu01", &[]);
        assert_eq!(ok(&["--hosts=gpu01,gpu02"], &[], &who).master_port, 29500);
        assert_eq!(
            ok(&["--hosts=gpu01,gpu02"], &[("MASTER_PORT", "29700")], &who).master_port,
            29700
        );
        assert_eq!(
            ok(
                &["--hosts=gpu01,gpu02", "--master-port=29800"],
                &[("MASTER_PORT", "29700")],
                &who
            )
            .master_port,
            29800
        );
        let e = err(&["--hosts=gpu01,gpu02"], &[("MASTER_PORT", "70000")], &who);
        assert!(e.to_string().contains("MASTER_PORT=\"70000\""), "{e}");
    }

    #[test]
    fn hosts_errors_list_the_hosts() {
        let e = err(
            &["--hosts=gpu[01-03]"],
            &[],
            &me("login1", &["192.168.1.5"]),
        );
        let s = e.to_string();
        assert!(s.contains("login1"), "{s}");
        assert!(s.contains("192.168.1.5"), "{s}");
        assert!(s.contains("gpu01,gpu02,gpu03"), "{s}");
        let e = err(&["--hosts=gpu01,gpu02,gpu01"], &[], &me("gpu01", &[]));
        assert!(
            matches!(e, LauncherError::FoundTwice { count: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("ranks 0, 2"), "{e}");
        // --node-rank settles it.
        assert_eq!(
            ok(
                &["--hosts=gpu01,gpu02,gpu01", "--node-rank=2"],
                &[],
                &me("gpu01", &[])
            )
            .rank,
            2
        );
        let e = err(&["--hosts=gpu[1-3", "--node-rank=0"], &[], &nobody());
        assert!(e.to_string().starts_with("--hosts: cannot expand"), "{e}");
        let e = err(&["--hosts=a,b", "--nnodes=3"], &[], &me("a", &[]));
        assert!(matches!(e, LauncherError::Conflict { .. }), "{e}");
    }

    #[test]
    fn hosts_win_over_slurm_and_torchrun_env() {
        let p = ok(
            &["--hosts=x1,x2"],
            &[
                ("SLURM_JOB_NODELIST", "s[1-4]"),
                ("SLURM_NODEID", "3"),
                ("MASTER_ADDR", "m"),
                ("NODE_RANK", "0"),
            ],
            &me("x2", &[]),
        );
        assert_eq!(
            (p.rank, p.nnodes, p.master_addr.as_str(), p.source),
            (1, 2, "x1", "--hosts")
        );
    }

    // ----- Slurm -----

    #[test]
    fn slurm_gives_everything_under_srun() {
        let p = ok(
            &[],
            &[
                ("SLURM_JOB_NODELIST", "gpu[07-09]"),
                ("SLURM_NODEID", "2"),
                ("SLURM_NNODES", "3"),
                ("SLURM_JOB_ID", "4242"),
            ],
            &nobody(),
        );
        assert_eq!(
            p,
            Placement {
                nnodes: 3,
                rank: 2,
                master_addr: "gpu07".into(),
                master_port: 29500,
                job_id: Some("4242".into()),
                expected_hosts: vec!["gpu07".into(), "gpu08".into(), "gpu09".into()],
                source: "slurm",
                coordinator_port: 29500,
                coordinator_note: None,
            }
        );
        // SLURM_NODELIST spelling, and the node finds itself without SLURM_NODEID (sbatch script).
        let p = ok(
            &[],
            &[("SLURM_NODELIST", "a,b"), ("SLURMD_NODENAME", "b")],
            &nobody(),
        );
        assert_eq!((p.rank, p.nnodes), (1, 2));
    }

    #[test]
    fn slurm_errors_name_the_variable() {
        let e = err(
            &[],
            &[("SLURM_JOB_NODELIST", "n[1-2]"), ("SLURM_NODEID", "abc")],
            &nobody(),
        );
        assert!(e.to_string().contains("SLURM_NODEID=\"abc\""), "{e}");
        let e = err(
            &[],
            &[
                ("SLURM_JOB_NODELIST", "n[1-2]"),
                ("SLURM_NODEID", "0"),
                ("SLURM_NNODES", "3"),
            ],
            &nobody(),
        );
        assert!(e.to_string().contains("SLURM_NNODES says 3"), "{e}");
        let e = err(
            &[],
            &[("SLURM_JOB_NODELIST", "n[2-1]"), ("SLURM_NODEID", "0")],
            &nobody(),
        );
        assert!(e.to_string().starts_with("SLURM_JOB_NODELIST:"), "{e}");
    }

    #[test]
    fn flags_override_slurm_values_one_by_one() {
        let vars = [
            ("SLURM_JOB_NODELIST", "n[1-4]"),
            ("SLURM_NODEID", "garbage"),
            ("SLURM_JOB_ID", "77"),
        ];
        let p = ok(
            &["--node-rank=3", "--master-addr=10.9.0.1"],
            &vars,
            &nobody(),
        );
        assert_eq!(
            (p.rank, p.nnodes, p.master_addr.as_str()),
            (3, 4, "10.9.0.1")
        );
        assert_eq!((p.source, p.job_id.as_deref()), ("slurm", Some("77")));
        // --rdzv-id beats SLURM_JOB_ID.
        let p = ok(&["--node-rank=3", "--rdzv-id=mine"], &vars, &nobody());
        assert_eq!(p.job_id.as_deref(), Some("mine"));
    }

    #[test]
    fn complete_flags_do_not_read_the_environment() {
        let p = ok(
            &["--nnodes=2", "--node-rank=0", "--master-addr=h"],
            &[
                ("SLURM_JOB_NODELIST", "n[1-"),
                ("NODE_RANK", "abc"),
                ("WORLD_SIZE", "x"),
            ],
            &nobody(),
        );
        assert_eq!((p.source, p.rank), ("flags", 0));
        assert!(p.expected_hosts.is_empty());
    }

    // ----- torchrun / Kubernetes env -----

    #[test]
    fn kubernetes_style_env() {
        let p = ok(
            &[],
            &[
                ("MASTER_ADDR", "trainer-0"),
                ("MASTER_PORT", "23456"),
                ("RANK", "1"),
                ("WORLD_SIZE", "2"),
            ],
            &nobody(),
        );
        assert_eq!(
            (
                p.nnodes,
                p.rank,
                p.master_addr.as_str(),
                p.master_port,
                p.source
            ),
            (2, 1, "trainer-0", 23456, "torchrun-env")
        );
        // NODE_RANK beats RANK.
        let p = ok(
            &[],
            &[
                ("MASTER_ADDR", "m"),
                ("NODE_RANK", "0"),
                ("RANK", "1"),
                ("WORLD_SIZE", "2"),
            ],
            &nobody(),
        );
        assert_eq!(p.rank, 0);
    }

    #[test]
    fn under_torchrun_world_size_counts_processes() {
        let p = ok(
            &[],
            &[
                ("TORCHELASTIC_RUN_ID", "run9"),
                ("MASTER_ADDR", "m"),
                ("GROUP_RANK", "1"),
                ("RANK", "13"),
                ("WORLD_SIZE", "16"),
                ("LOCAL_WORLD_SIZE", "8"),
            ],
            &nobody(),
        );
        assert_eq!(
            (p.nnodes, p.rank, p.job_id.as_deref()),
            (2, 1, Some("run9"))
        );
        let e = err(
            &[],
            &[
                ("TORCHELASTIC_RUN_ID", "r"),
                ("MASTER_ADDR", "m"),
                ("GROUP_RANK", "0"),
                ("WORLD_SIZE", "16"),
            ],
            &nobody(),
        );
        assert!(e.to_string().contains("LOCAL_WORLD_SIZE"), "{e}");
        let e = err(
            &[],
            &[
                ("TORCHELASTIC_RUN_ID", "r"),
                ("MASTER_ADDR", "m"),
                ("GROUP_RANK", "0"),
                ("WORLD_SIZE", "12"),
                ("LOCAL_WORLD_SIZE", "8"),
            ],
            &nobody(),
        );
        assert!(
            e.to_string().contains("WORLD_SIZE / LOCAL_WORLD_SIZE"),
            "{e}"
        );
        // torchrun's placeholder id is no id.
        let p = ok(
            &["--nnodes=2"],
            &[
                ("TORCHELASTIC_RUN_ID", "none"),
                ("MASTER_ADDR", "m"),
                ("GROUP_RANK", "1"),
            ],
            &nobody(),
        );
        assert_eq!(p.job_id, None);
    }

    #[test]
    fn torchrun_is_detected_by_any_of_its_markers() {
        // No TORCHELASTIC_RUN_ID (torch.distributed.launch of some versions): GROUP_RANK and
        // LOCAL_WORLD_SIZE still say WORLD_SIZE counts processes.
        let p = ok(
            &[],
            &[
                ("MASTER_ADDR", "m"),
                ("MASTER_PORT", "29500"),
                ("GROUP_RANK", "1"),
                ("RANK", "5"),
                ("WORLD_SIZE", "8"),
                ("LOCAL_WORLD_SIZE", "4"),
            ],
            &nobody(),
        );
        assert_eq!((p.nnodes, p.rank), (2, 1));
        assert_eq!(p.coordinator_port, 29501);
        assert!(under_torchrun(&env(&[("LOCAL_WORLD_SIZE", "4")])));
        assert!(!under_torchrun(&env(&[("RANK", "4"), ("WORLD_SIZE", "8")])));
    }

    #[test]
    fn coordinator_port_rule() {
        let torch = [
            ("TORCHELASTIC_RUN_ID", "r"),
            ("MASTER_ADDR", "m"),
            ("MASTER_PORT", "29500"),
            ("GROUP_RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_WORLD_SIZE", "1"),
        ];
        // Under torchrun: MASTER_PORT + 1, and the note says why and how to change it.
        let p = ok(&[], &torch, &nobody());
        assert_eq!((p.master_port, p.coordinator_port), (29500, 29501));
        let note = p.coordinator_note.clone().unwrap();
        assert!(note.contains("MASTER_PORT + 1"), "{note}");
        assert!(note.contains("--coordinator-port"), "{note}");
        assert_eq!(p.for_rendezvous().master_port, 29501);
        // Elsewhere: the master port itself, no note.
        let p = ok(
            &["--nnodes=2", "--node-rank=0", "--master-addr=m"],
            &[],
            &nobody(),
        );
        assert_eq!((p.coordinator_port, p.coordinator_note), (29500, None));
        // The flag, then the variable, override both.
        let p = ok(&["--coordinator-port=30000"], &torch, &nobody());
        assert_eq!(p.coordinator_port, 30000);
        assert!(p.coordinator_note.unwrap().contains("--coordinator-port"));
        let mut with_var = torch.to_vec();
        with_var.push((COORDINATOR_PORT_VAR, "30001"));
        assert_eq!(ok(&[], &with_var, &nobody()).coordinator_port, 30001);
        let p = ok(&["--nnodes=1", "--coordinator-port=29500"], &[], &nobody());
        assert_eq!(p.coordinator_note, None);
        // Garbage, and no room above 65535.
        let mut bad = torch.to_vec();
        bad.push((COORDINATOR_PORT_VAR, "x"));
        assert!(
            err(&[], &bad, &nobody())
                .to_string()
                .contains(COORDINATOR_PORT_VAR)
        );
        let mut top = torch.to_vec();
        top.retain(|(k, _)| *k != "MASTER_PORT");
        top.push(("MASTER_PORT", "65535"));
        let e = err(&[], &top, &nobody());
        assert!(e.to_string().contains("--coordinator-port"), "{e}");
    }

    #[test]
    fn kubernetes_indexed_job_rank_and_nnodes() {
        let p = ok(
            &[],
            &[
                ("JOB_COMPLETION_INDEX", "2"),
                ("NNODES", "3"),
                ("MASTER_ADDR", "pf-0.pf"),
            ],
            &nobody(),
        );
        assert_eq!(
            (p.nnodes, p.rank, p.master_addr.as_str(), p.source),
            (3, 2, "pf-0.pf", "torchrun-env")
        );
        // A rank the user set explicitly wins over the pod index; NNODES wins over WORLD_SIZE.
        let p = ok(
            &[],
            &[
                ("JOB_COMPLETION_INDEX", "2"),
                ("NODE_RANK", "1"),
                ("NNODES", "3"),
                ("WORLD_SIZE", "24"),
                ("MASTER_ADDR", "m"),
            ],
            &nobody(),
        );
        assert_eq!((p.nnodes, p.rank), (3, 1));
        let e = err(
            &[],
            &[
                ("JOB_COMPLETION_INDEX", "x"),
                ("NNODES", "3"),
                ("MASTER_ADDR", "m"),
            ],
            &nobody(),
        );
        assert!(e.to_string().contains("JOB_COMPLETION_INDEX=\"x\""), "{e}");
    }

    #[test]
    fn torchrun_pet_variables_are_read() {
        let p = ok(
            &[],
            &[
                ("PET_NNODES", "3:3"),
                ("PET_NODE_RANK", "2"),
                ("PET_MASTER_ADDR", "h0"),
                ("PET_MASTER_PORT", "29511"),
            ],
            &nobody(),
        );
        assert_eq!(
            (p.nnodes, p.rank, p.master_addr.as_str(), p.master_port),
            (3, 2, "h0", 29511)
        );
        let e = err(
            &[],
            &[
                ("PET_NNODES", "1:4"),
                ("PET_NODE_RANK", "0"),
                ("MASTER_ADDR", "m"),
            ],
            &nobody(),
        );
        assert!(e.to_string().contains("PET_NNODES"), "{e}");
    }

    #[test]
    fn flag_plus_env_combine_and_the_flag_wins() {
        let p = ok(
            &["--nnodes=4"],
            &[
                ("NODE_RANK", "3"),
                ("MASTER_ADDR", "m"),
                ("WORLD_SIZE", "99"),
            ],
            &nobody(),
        );
        assert_eq!((p.nnodes, p.rank, p.source), (4, 3, "torchrun-env"));
        let p = ok(
            &["--nnodes=4", "--master-addr=flag"],
            &[("NODE_RANK", "1"), ("MASTER_ADDR", "env")],
            &nobody(),
        );
        assert_eq!(p.master_addr, "flag");
    }

    #[test]
    fn garbage_env_numbers_name_the_variable() {
        let e = err(
            &["--nnodes=2", "--master-addr=m"],
            &[("NODE_RANK", "abc")],
            &nobody(),
        );
        assert_eq!(
            e.to_string(),
            "NODE_RANK=\"abc\" is not a node rank (a whole number from 0): set it to this node's rank, or give --node-rank"
        );
        let e = err(
            &[],
            &[
                ("NODE_RANK", "0"),
                ("MASTER_ADDR", "m"),
                ("WORLD_SIZE", "-1"),
            ],
            &nobody(),
        );
        assert!(e.to_string().contains("WORLD_SIZE=\"-1\""), "{e}");
        let e = err(
            &[],
            &[
                ("NODE_RANK", "0"),
                ("MASTER_ADDR", "m"),
                ("WORLD_SIZE", "0"),
            ],
            &nobody(),
        );
        assert!(e.to_string().contains("WORLD_SIZE=\"0\""), "{e}");
        let e = err(
            &[],
            &[
                ("NODE_RANK", "0"),
                ("MASTER_ADDR", "m"),
                ("WORLD_SIZE", "100000"),
            ],
            &nobody(),
        );
        assert!(matches!(e, LauncherError::TooManyNodes { .. }), "{e}");
        let e = err(&["--nnodes=1"], &[("MASTER_PORT", "http")], &nobody());
        assert!(e.to_string().contains("MASTER_PORT=\"http\""), "{e}");
        // Empty values count as unset.
        let e = err(
            &["--nnodes=2", "--node-rank=1"],
            &[("MASTER_ADDR", " ")],
            &nobody(),
        );
        assert_eq!(e, LauncherError::MissingMaster);
    }
}
