//! The sources below the flags, each read only for what the flags left open: `--hosts`, Slurm, and the torchrun/Kubernetes environment.

use super::hostlist::expand_hostlist;
use super::values::*;
use super::*;

/// What the flags left open; the layers parse only that.
#[derive(Clone, Copy)]
pub(super) struct Need {
    pub(super) nnodes: bool,
    pub(super) rank: bool,
    pub(super) master: bool,
}

/// Values from one source below the flags.
#[derive(Default)]
pub(super) struct Layer {
    pub(super) source: Option<&'static str>,
    pub(super) nnodes: Option<Sourced<u32>>,
    pub(super) rank: Option<Sourced<u32>>,
    pub(super) master: Option<Sourced<String>>,
    pub(super) hosts: Vec<String>,
}

pub(super) fn in_var(name: &str) -> impl FnOnce(LauncherError) -> LauncherError + '_ {
    move |e| LauncherError::In {
        name: name.to_string(),
        inner: Box::new(e),
    }
}

pub(super) fn hosts_count(hosts: &[String], from: &str) -> Result<u32, LauncherError> {
    u32::try_from(hosts.len())
        .ok()
        .filter(|n| *n <= MAX_NODES)
        .ok_or(LauncherError::TooManyNodes {
            nnodes: hosts.len() as u64,
            from: from.to_string(),
            max: MAX_NODES,
        })
}

pub(super) fn hosts_layer(
    list: &str,
    need: Need,
    me: &LocalIdentity,
) -> Result<Layer, LauncherError> {
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

pub(super) const SLURM_NODELISTS: &[&str] = &[
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
];

/// Slurm's node list when it is set, valid and as long as `nnodes`: the expected host per rank
/// when the flags gave everything else. Empty otherwise (the flags win; nothing fails here).
pub(super) fn slurm_hosts(env: &Env, nnodes: Option<u32>) -> Vec<String> {
    let Some((_, list)) = env.first(SLURM_NODELISTS) else {
        return Vec::new();
    };
    match expand_hostlist(list) {
        Ok(hosts) if nnodes.is_some_and(|n| hosts.len() == n as usize) => hosts,
        _ => Vec::new(),
    }
}

pub(super) fn slurm_layer(
    env: &Env,
    need: Need,
    me: &LocalIdentity,
) -> Result<Option<Layer>, LauncherError> {
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

pub(super) const TORCH_VARS: &[&str] = &[
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
pub(super) fn pet_nnodes(env: &Env) -> Result<Option<Sourced<u32>>, LauncherError> {
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
pub(super) fn torchrun_nnodes(env: &Env) -> Result<Option<Sourced<u32>>, LauncherError> {
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

pub(super) fn torch_layer(env: &Env, need: Need) -> Result<Option<Layer>, LauncherError> {
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
