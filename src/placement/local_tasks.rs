//! Several tasks on one node: this task's local rank and the node's task count from the launcher's variables (torchrun, Open MPI, MPICH/Intel MPI/PMI, Slurm).
//!
//! The innermost launcher wins: torchrun (`LOCAL_RANK`, `LOCAL_WORLD_SIZE`), then Open MPI
//! (`OMPI_COMM_WORLD_LOCAL_RANK`, `OMPI_COMM_WORLD_LOCAL_SIZE`), then MPICH/Intel MPI/PMI
//! (`MPI_LOCALRANKID`, `MPI_LOCALNRANKS`, `PMI_LOCAL_RANK`, `PMI_LOCAL_SIZE`), then Slurm in a
//! step started by srun (not the batch script, which has the job's list) (`SLURM_LOCALID`; the node's count from `SLURM_STEP_TASKS_PER_NODE`, else
//! `SLURM_TASKS_PER_NODE`, in Slurm's `2(x3),1` syntax at index `SLURM_NODEID`, else
//! `SLURM_NTASKS_PER_NODE`). `mpirun` inside a Slurm allocation gives its tasks the Slurm
//! variables of its own daemons, so the MPI ones come first. Nothing here reads the process
//! environment: it comes in as a map.
//!
//! A layout that cannot be trusted (a variable missing, not a number, a local rank not below
//! the node's count, two variables of one launcher disagreeing) is a [`LayoutError`] naming
//! the variables and the fix; it is never guessed around.

use std::collections::BTreeMap;
use std::fmt;

/// The launcher that started several tasks on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    Torchrun,
    Slurm,
    OpenMpi,
    Mpich,
}

impl Launcher {
    /// How people call it.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Torchrun => "torchrun",
            Launcher::Slurm => "srun",
            Launcher::OpenMpi => "Open MPI's mpirun",
            Launcher::Mpich => "MPICH/Intel MPI (PMI)",
        }
    }

    /// Process names of the per-node daemon that starts the tasks (for the group's key):
    /// every task of one run on one node has the same one among its ancestors.
    pub fn daemons(self) -> &'static [&'static str] {
        match self {
            Launcher::Torchrun => &[],
            Launcher::Slurm => &["slurmstepd"],
            Launcher::OpenMpi => &["orted", "prted", "mpirun", "orterun", "prterun", "mpiexec"],
            Launcher::Mpich => &["hydra_pmi_proxy", "pmi_proxy", "mpiexec.hydra", "mpiexec"],
        }
    }

    /// The fix that makes the preflight step one task per node.
    pub fn one_per_node(self) -> &'static str {
        match self {
            Launcher::Torchrun => "torchrun --nproc-per-node=1 --no-python preflight cluster",
            Launcher::Slurm => "srun --ntasks-per-node=1 preflight cluster",
            Launcher::OpenMpi => {
                "mpirun --map-by ppr:1:node preflight cluster --hosts HOSTLIST (one task per node)"
            }
            Launcher::Mpich => "mpiexec -ppn 1 preflight cluster --hosts HOSTLIST",
        }
    }
}

/// This task's place among the tasks its launcher started on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalTasks {
    pub launcher: Launcher,
    pub local_rank: u32,
    /// Tasks on this node, as the variables say.
    pub local_size: u32,
    /// The node's index in the job (`SLURM_NODEID`), when the launcher says it.
    pub node_index: Option<u32>,
    /// What names this run (job and step ids), the same for every task of it on this node.
    pub run_id: String,
    /// The variables read, as found (evidence).
    pub vars: BTreeMap<String, String>,
}

/// Why the tasks of this node cannot be told apart: what is wrong, the variables, the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError {
    pub launcher: Launcher,
    pub problem: String,
    pub vars: BTreeMap<String, String>,
    pub fix: String,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vars = if self.vars.is_empty() {
            "none set".to_string()
        } else {
            self.vars
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        write!(
            f,
            "tasks per node under {}: {} (variables: {vars}); {}",
            self.launcher.name(),
            self.problem,
            self.fix
        )
    }
}

impl std::error::Error for LayoutError {}

/// Every variable read here (evidence and the tests' environment lists).
pub const LOCAL_VARS: &[&str] = &[
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "PMI_LOCAL_RANK",
    "PMI_LOCAL_SIZE",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_NTASKS_PER_NODE",
];

/// Most tasks one node may claim (a sanity bound on the variables, far above any real node).
const MAX_LOCAL: u32 = 4096;
/// Most nodes a `SLURM_TASKS_PER_NODE` value may describe.
const MAX_NODES: u64 = 100_000;

struct Vars<'a>(&'a BTreeMap<String, String>);

impl Vars<'_> {
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn any(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.get(k).is_some())
    }

    /// The named variables that are set, as found.
    fn evidence(&self, keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter()
            .filter_map(|k| self.get(k).map(|v| (k.to_string(), v.to_string())))
            .collect()
    }

    fn first(&self, keys: &[&str]) -> String {
        keys.iter()
            .find_map(|k| self.get(k).map(|v| format!("{k}={v}")))
            .unwrap_or_default()
    }
}

/// The local tasks of this node: `None` when no launcher started several tasks here (or none
/// says so), an error when the variables cannot be trusted.
pub fn local_tasks(env: &BTreeMap<String, String>) -> Result<Option<LocalTasks>, LayoutError> {
    let v = Vars(env);
    if super::under_torchrun(env) {
        return torchrun(&v);
    }
    if v.any(&["OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"]) {
        let run = v.first(&["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"]);
        return pair(
            &v,
            Launcher::OpenMpi,
            ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
            run,
        );
    }
    if v.any(&[
        "MPI_LOCALRANKID",
        "MPI_LOCALNRANKS",
        "PMI_LOCAL_RANK",
        "PMI_LOCAL_SIZE",
    ]) {
        return mpich(&v);
    }
    if v.any(&[
        "SLURM_LOCALID",
        "SLURM_STEP_TASKS_PER_NODE",
        "SLURM_TASKS_PER_NODE",
        "SLURM_NTASKS_PER_NODE",
    ]) {
        return slurm(&v);
    }
    Ok(None)
}

fn number(v: &Vars, launcher: Launcher, key: &str, fix: &str) -> Result<Option<u32>, LayoutError> {
    let Some(text) = v.get(key) else {
        return Ok(None);
    };
    text.parse::<u32>()
        .ok()
        .map(Some)
        .ok_or_else(|| LayoutError {
            launcher,
            problem: format!("{key}={text:?} is not a number"),
            vars: v.evidence(&[key]),
            fix: fix.to_string(),
        })
}

/// A rank below a size, or no group when alone on the node.
fn finish(
    v: &Vars,
    launcher: Launcher,
    (rank_var, rank): (&str, u32),
    (size_var, size): (&str, u32),
    node_index: Option<u32>,
    run_id: String,
    read: &[&str],
) -> Result<Option<LocalTasks>, LayoutError> {
    if size == 0 || size > MAX_LOCAL {
        return Err(LayoutError {
            launcher,
            problem: format!(
                "{size_var}={size} is not a number of tasks on one node (1..{MAX_LOCAL})"
            ),
            vars: v.evidence(read),
            fix: format!(
                "unset a stale copy so {} sets it, or run the preflight step with one task per node: {}",
                launcher.name(),
                launcher.one_per_node()
            ),
        });
    }
    if rank >= size {
        return Err(LayoutError {
            launcher,
            problem: format!(
                "this task's local rank {rank} ({rank_var}) is not below the node's {size} tasks ({size_var}): the tasks on this node are not what the variables say"
            ),
            vars: v.evidence(read),
            fix: format!(
                "start preflight with the launcher itself so it sets both (a wrapper must keep them: `exec preflight ...`), or run the preflight step with one task per node: {}",
                launcher.one_per_node()
            ),
        });
    }
    if size == 1 {
        return Ok(None);
    }
    Ok(Some(LocalTasks {
        launcher,
        local_rank: rank,
        local_size: size,
        node_index,
        run_id,
        vars: v.evidence(read),
    }))
}

fn missing(
    v: &Vars,
    launcher: Launcher,
    absent: &str,
    present: &str,
    read: &[&str],
) -> LayoutError {
    LayoutError {
        launcher,
        problem: format!(
            "{present} is set but {absent} is missing, so this task cannot tell whether it is the node's first"
        ),
        vars: v.evidence(read),
        fix: format!(
            "set {absent} as {} does (or unset {present}), or run the preflight step with one task per node: {}",
            launcher.name(),
            launcher.one_per_node()
        ),
    }
}

fn torchrun(v: &Vars) -> Result<Option<LocalTasks>, LayoutError> {
    let (Some(_), Some(_)) = (v.get("LOCAL_WORLD_SIZE"), v.get("LOCAL_RANK")) else {
        return Ok(None);
    };
    let fix = "torchrun sets it: run preflight as torchrun's entry point (torchrun --no-python ... preflight cluster)";
    let l = Launcher::Torchrun;
    let size = number(v, l, "LOCAL_WORLD_SIZE", fix)?.unwrap_or(1);
    let rank = number(v, l, "LOCAL_RANK", fix)?.unwrap_or(0);
    let run = format!(
        "{} {}",
        v.get("TORCHELASTIC_RESTART_COUNT").unwrap_or("0"),
        v.get("TORCHELASTIC_RUN_ID").unwrap_or("none")
    );
    let read = ["LOCAL_RANK", "LOCAL_WORLD_SIZE"];
    finish(
        v,
        l,
        ("LOCAL_RANK", rank),
        ("LOCAL_WORLD_SIZE", size),
        None,
        run,
        &read,
    )
}

/// A launcher that gives both the local rank and the local size.
fn pair(
    v: &Vars,
    launcher: Launcher,
    (rank_var, size_var): (&str, &str),
    run_id: String,
) -> Result<Option<LocalTasks>, LayoutError> {
    let read = [rank_var, size_var];
    let fix = format!("{} sets it for every task", launcher.name());
    let rank = number(v, launcher, rank_var, &fix)?;
    let size = number(v, launcher, size_var, &fix)?;
    match (rank, size) {
        (Some(r), Some(s)) => finish(
            v,
            launcher,
            (rank_var, r),
            (size_var, s),
            None,
            run_id,
            &read,
        ),
        (None, _) => Err(missing(v, launcher, rank_var, size_var, &read)),
        (_, None) => Err(missing(v, launcher, size_var, rank_var, &read)),
    }
}

/// MPICH's hydra (`MPI_LOCALRANKID`, `MPI_LOCALNRANKS`) and PMI (`PMI_LOCAL_RANK`,
/// `PMI_LOCAL_SIZE`); Intel MPI sets the first pair. Both pairs set must agree.
fn mpich(v: &Vars) -> Result<Option<LocalTasks>, LayoutError> {
    let l = Launcher::Mpich;
    let run = v.first(&["PMI_KVSNAME", "PMIX_NAMESPACE", "PMI_JOBID", "I_MPI_JOB_ID"]);
    let hydra = ("MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    let pmi = ("PMI_LOCAL_RANK", "PMI_LOCAL_SIZE");
    let has_hydra = v.any(&[hydra.0, hydra.1]);
    let has_pmi = v.any(&[pmi.0, pmi.1]);
    // An error names every variable of both pairs that is set.
    let all = |mut e: LayoutError| {
        e.vars = v.evidence(&[hydra.0, hydra.1, pmi.0, pmi.1]);
        e
    };
    let a = has_hydra
        .then(|| pair(v, l, hydra, run.clone()))
        .transpose()
        .map_err(all)?;
    let b = has_pmi
        .then(|| pair(v, l, pmi, run.clone()))
        .transpose()
        .map_err(all)?;
    match (a, b) {
        (Some(a), Some(b)) => {
            let key = |t: &Option<LocalTasks>| {
                t.as_ref().map_or((0, 1), |t| (t.local_rank, t.local_size))
            };
            if key(&a) != key(&b) {
                let read = [hydra.0, hydra.1, pmi.0, pmi.1];
                let (ar, asz) = key(&a);
                let (br, bsz) = key(&b);
                return Err(LayoutError {
                    launcher: l,
                    problem: format!(
                        "the variables disagree: {}/{} say local rank {ar} of {asz}, {}/{} say local rank {br} of {bsz}",
                        hydra.0, hydra.1, pmi.0, pmi.1
                    ),
                    vars: v.evidence(&read),
                    fix: format!(
                        "unset the pair the launcher did not set (a wrapper or a module file may export stale values), or run the preflight step with one task per node: {}",
                        l.one_per_node()
                    ),
                });
            }
            Ok(a)
        }
        (Some(a), None) => Ok(a),
        (None, Some(b)) => Ok(b),
        (None, None) => Ok(None),
    }
}

/// Slurm: `SLURM_LOCALID` and the node's count from the step's (else the job's) per-node list.
fn slurm(v: &Vars) -> Result<Option<LocalTasks>, LayoutError> {
    let l = Launcher::Slurm;
    let read = [
        "SLURM_LOCALID",
        "SLURM_NODEID",
        "SLURM_STEP_TASKS_PER_NODE",
        "SLURM_TASKS_PER_NODE",
        "SLURM_NTASKS_PER_NODE",
    ];
    // The batch script (and a Prolog, salloc's shell) is no task of a step: it has
    // SLURM_LOCALID=0 and the job's SLURM_TASKS_PER_NODE, and runs once per node at most.
    if !in_slurm_step(v) {
        return Ok(None);
    }
    let fix = "srun sets it for every task";
    let local = number(v, l, "SLURM_LOCALID", fix)?;
    let node = number(v, l, "SLURM_NODEID", fix)?;
    let list = ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]
        .iter()
        .find_map(|k| v.get(k).map(|text| (*k, text)));
    let size: Option<(String, u32)> = match list {
        Some((key, text)) => {
            let counts = parse_tasks_per_node(text).map_err(|why| LayoutError {
                launcher: l,
                problem: format!("{key}={text:?} is not Slurm's tasks-per-node list: {why}"),
                vars: v.evidence(&read),
                fix: "srun sets it (syntax: 2(x3),1); unset a stale copy".into(),
            })?;
            let all_same = counts.windows(2).all(|w| w[0] == w[1]);
            match node {
                Some(i) => match counts.get(i as usize) {
                    Some(c) => Some((format!("{key} at SLURM_NODEID={i}"), *c)),
                    None => {
                        return Err(LayoutError {
                            launcher: l,
                            problem: format!(
                                "SLURM_NODEID={i} is past the {} nodes {key}={text} describes",
                                counts.len()
                            ),
                            vars: v.evidence(&read),
                            fix: "run preflight as a task of srun (srun ... preflight cluster) so the step's own variables reach it; unset stale copies of SLURM_NODEID or the list".into(),
                        });
                    }
                },
                None if all_same => counts.first().map(|c| (key.to_string(), *c)),
                None => {
                    return Err(missing(v, l, "SLURM_NODEID", key, &read));
                }
            }
        }
        None => number(v, l, "SLURM_NTASKS_PER_NODE", fix)?
            .map(|n| ("SLURM_NTASKS_PER_NODE".to_string(), n)),
    };
    let run_id = format!(
        "{} {} {}",
        v.get("SLURM_JOB_ID").unwrap_or("-"),
        v.get("SLURM_STEP_ID")
            .or(v.get("SLURM_STEPID"))
            .unwrap_or("-"),
        node.map_or("-".to_string(), |n| n.to_string())
    );
    match (local, size) {
        (Some(r), Some((size_var, s))) => finish(
            v,
            l,
            ("SLURM_LOCALID", r),
            (&size_var, s),
            node,
            run_id,
            &read,
        ),
        // No count: only a local rank 0 may go on alone.
        (Some(0), None) => Ok(None),
        (Some(r), None) => Err(missing(
            v,
            l,
            "SLURM_STEP_TASKS_PER_NODE",
            &format!("SLURM_LOCALID={r}"),
            &read,
        )),
        (None, Some((_, s))) if s > 1 => Err(missing(
            v,
            l,
            "SLURM_LOCALID",
            "a tasks-per-node count above 1",
            &read,
        )),
        (None, _) => Ok(None),
    }
}

/// A task of a job step started by srun: the step's own list, or a step id that is not one of
/// Slurm's special ids (batch, extern, interactive: 0xFFFFFFF0 and up; SLURM_BATCH_SCRIPT is
/// 0xFFFFFFFE).
fn in_slurm_step(v: &Vars) -> bool {
    v.get("SLURM_STEP_TASKS_PER_NODE").is_some()
        || v.get("SLURM_STEP_ID")
            .or(v.get("SLURM_STEPID"))
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|id| id < 0xFFFF_FFF0)
}

/// Slurm's tasks-per-node list: `2(x3),1` is 2, 2, 2, 1 (one count per node, in node order).
pub fn parse_tasks_per_node(text: &str) -> Result<Vec<u32>, String> {
    let mut counts = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (count, times) = match part.split_once('(') {
            Some((c, rest)) => {
                let inner = rest
                    .strip_suffix(')')
                    .and_then(|r| r.strip_prefix('x'))
                    .ok_or_else(|| format!("{part:?} is not N or N(xM)"))?;
                let times: u64 = inner
                    .parse()
                    .map_err(|_| format!("{part:?}: {inner:?} is not a repeat count"))?;
                (c, times)
            }
            None => (part, 1),
        };
        let count: u32 = count
            .parse()
            .map_err(|_| format!("{part:?}: {count:?} is not a number of tasks"))?;
        if times == 0 || counts.len() as u64 + times > MAX_NODES {
            return Err(format!("{part:?}: a repeat count of 1..{MAX_NODES} nodes"));
        }
        counts.extend(std::iter::repeat_n(count, times as usize));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn tasks(pairs: &[(&str, &str)]) -> LocalTasks {
        local_tasks(&env(pairs)).unwrap().unwrap()
    }

    fn error(pairs: &[(&str, &str)]) -> String {
        local_tasks(&env(pairs)).unwrap_err().to_string()
    }

    #[test]
    fn slurm_task_lists_expand() {
        assert_eq!(parse_tasks_per_node("2(x3),1").unwrap(), vec![2, 2, 2, 1]);
        assert_eq!(parse_tasks_per_node("8").unwrap(), vec![8]);
        assert_eq!(parse_tasks_per_node("1,4(x2)").unwrap(), vec![1, 4, 4]);
        for bad in ["", "2(3)", "2(x)", "x", "2(x0)", "2(x999999999999)", "-1"] {
            assert!(parse_tasks_per_node(bad).is_err(), "{bad}");
        }
    }

    /// As srun -N3 --ntasks-per-node=2 sets them (read on the real Slurm of slurm-netns).
    #[test]
    fn slurm_step_of_two_tasks_per_node() {
        let t = tasks(&[
            ("SLURM_JOB_ID", "1"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "2"),
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS_PER_NODE", "2"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3)"),
            ("SLURM_TASKS_PER_NODE", "2(x3)"),
        ]);
        assert_eq!(
            (t.launcher, t.local_rank, t.local_size, t.node_index),
            (Launcher::Slurm, 1, 2, Some(2))
        );
        assert_eq!(t.run_id, "1 0 2");
        // srun -N2 -n3: the last node has one task, whatever SLURM_NTASKS_PER_NODE says.
        let last = [
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "1"),
            ("SLURM_NTASKS_PER_NODE", "2"),
            ("SLURM_STEP_TASKS_PER_NODE", "2,1"),
        ];
        assert_eq!(local_tasks(&env(&last)).unwrap(), None);
        // One task per node: no group.
        let one = [
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "1(x3)"),
        ];
        assert_eq!(local_tasks(&env(&one)).unwrap(), None);
        // Only SLURM_NTASKS_PER_NODE.
        let t = tasks(&[
            ("SLURM_STEP_ID", "2"),
            ("SLURM_LOCALID", "3"),
            ("SLURM_NTASKS_PER_NODE", "4"),
        ]);
        assert_eq!((t.local_rank, t.local_size), (3, 4));
        // The batch script of `sbatch -N2 --ntasks-per-node=4` (read on the real Slurm): no
        // step, so no group, whatever the job's list says.
        let batch = [
            ("SLURM_JOB_ID", "1"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "0"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_NTASKS_PER_NODE", "4"),
            ("SLURM_PROCID", "0"),
            ("SLURM_TASKS_PER_NODE", "4(x2)"),
        ];
        assert_eq!(local_tasks(&env(&batch)).unwrap(), None);
        let mut batch = batch.to_vec();
        batch.push(("SLURM_STEP_ID", "4294967294"));
        assert_eq!(local_tasks(&env(&batch)).unwrap(), None);
        // The same variables in a task of step 0 are a group of 4.
        batch.pop();
        batch.push(("SLURM_STEP_ID", "0"));
        let t = tasks(&batch);
        assert_eq!((t.local_rank, t.local_size), (0, 4));
    }

    #[test]
    fn slurm_layouts_that_cannot_be_trusted_name_the_variables() {
        let e = error(&[
            ("SLURM_LOCALID", "2"),
            ("SLURM_NODEID", "3"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
        ]);
        assert!(e.contains("local rank 2 (SLURM_LOCALID)"), "{e}");
        assert!(e.contains("not below the node's 1 tasks"), "{e}");
        assert!(e.contains("srun --ntasks-per-node=1"), "{e}");
        let e = error(&[
            ("SLURM_NODEID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "4(x2)"),
        ]);
        assert!(e.contains("SLURM_LOCALID is missing"), "{e}");
        let e = error(&[
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "5"),
            ("SLURM_STEP_TASKS_PER_NODE", "4(x2)"),
        ]);
        assert!(e.contains("SLURM_NODEID=5 is past the 2 nodes"), "{e}");
        let e = error(&[("SLURM_LOCALID", "1"), ("SLURM_STEP_TASKS_PER_NODE", "4,2")]);
        assert!(e.contains("SLURM_NODEID is missing"), "{e}");
        let e = error(&[
            ("SLURM_STEP_ID", "0"),
            ("SLURM_LOCALID", "x"),
            ("SLURM_NTASKS_PER_NODE", "4"),
        ]);
        assert!(e.contains("SLURM_LOCALID=\"x\" is not a number"), "{e}");
        let e = error(&[
            ("SLURM_STEPID", "0"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_TASKS_PER_NODE", "2(3)"),
        ]);
        assert!(e.contains("not Slurm's tasks-per-node list"), "{e}");
        // No firewall, no /etc/hosts: the cause is the layout.
        assert!(!e.contains("firewall") && !e.contains("/etc/hosts"), "{e}");
    }

    /// As Open MPI 4.1's mpirun --host node1:2,node2:2 sets them (read under ns-rsh).
    #[test]
    fn open_mpi_local_ranks() {
        let t = tasks(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("OMPI_COMM_WORLD_NODE_RANK", "1"),
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_MCA_ess_base_jobid", "571539457"),
            // mpirun inside an allocation: its daemons' Slurm variables do not count.
            ("SLURM_LOCALID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
        ]);
        assert_eq!(
            (t.launcher, t.local_rank, t.local_size),
            (Launcher::OpenMpi, 1, 2)
        );
        assert_eq!(t.run_id, "OMPI_MCA_ess_base_jobid=571539457");
        let e = error(&[("OMPI_COMM_WORLD_LOCAL_RANK", "1")]);
        assert!(e.contains("OMPI_COMM_WORLD_LOCAL_SIZE is missing"), "{e}");
        let e = error(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ]);
        assert!(e.contains("not below the node's 4 tasks"), "{e}");
    }

    #[test]
    fn mpich_and_pmi_variables() {
        let t = tasks(&[("MPI_LOCALRANKID", "2"), ("MPI_LOCALNRANKS", "8")]);
        assert_eq!(
            (t.launcher, t.local_rank, t.local_size),
            (Launcher::Mpich, 2, 8)
        );
        let t = tasks(&[("PMI_LOCAL_RANK", "0"), ("PMI_LOCAL_SIZE", "4")]);
        assert_eq!((t.local_rank, t.local_size), (0, 4));
        // Intel MPI sets both pairs: agreeing is fine.
        let t = tasks(&[
            ("MPI_LOCALRANKID", "3"),
            ("MPI_LOCALNRANKS", "4"),
            ("PMI_LOCAL_RANK", "3"),
            ("PMI_LOCAL_SIZE", "4"),
        ]);
        assert_eq!((t.local_rank, t.local_size), (3, 4));
        assert_eq!(
            local_tasks(&env(&[("PMI_LOCAL_RANK", "0"), ("PMI_LOCAL_SIZE", "1")])).unwrap(),
            None
        );
    }

    #[test]
    fn mpich_and_pmi_mismatches_fail_with_both_pairs_named() {
        let e = error(&[
            ("MPI_LOCALRANKID", "1"),
            ("MPI_LOCALNRANKS", "4"),
            ("PMI_LOCAL_RANK", "1"),
            ("PMI_LOCAL_SIZE", "2"),
        ]);
        assert!(
            e.contains("MPI_LOCALRANKID/MPI_LOCALNRANKS say local rank 1 of 4"),
            "{e}"
        );
        assert!(
            e.contains("PMI_LOCAL_RANK/PMI_LOCAL_SIZE say local rank 1 of 2"),
            "{e}"
        );
        assert!(e.contains("mpiexec -ppn 1"), "{e}");
        let e = error(&[("MPI_LOCALNRANKS", "4")]);
        assert!(e.contains("MPI_LOCALRANKID is missing"), "{e}");
        let e = error(&[("PMI_LOCAL_RANK", "0"), ("PMI_LOCAL_SIZE", "0")]);
        assert!(
            e.contains("PMI_LOCAL_SIZE=0 is not a number of tasks on one node"),
            "{e}"
        );
        let e = error(&[("PMI_LOCAL_RANK", "0"), ("PMI_LOCAL_SIZE", "4294967295")]);
        assert!(e.contains("(1..4096)"), "{e}");
        let e = error(&[("PMI_LOCAL_RANK", "5"), ("PMI_LOCAL_SIZE", "4")]);
        assert!(e.contains("local rank 5 (PMI_LOCAL_RANK)"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Whatever the variables hold: a group whose rank is below its size, none, or an error.
        #[test]
        fn any_values_give_a_sound_group_none_or_an_error(
            values in proptest::collection::vec("[0-9]{1,3}|[0-9x(),-]{0,14}|\\PC{0,6}", LOCAL_VARS.len()),
            mask in 0u32..(1 << 13),
        ) {
            let mut e: BTreeMap<String, String> = LOCAL_VARS
                .iter()
                .zip(&values)
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, (k, v))| (k.to_string(), v.clone()))
                .collect();
            e.insert("SLURM_STEP_ID".into(), "0".into());
            e.insert("TORCHELASTIC_RUN_ID".into(), "x".into());
            for torchrun in [true, false] {
                if !torchrun {
                    e.remove("TORCHELASTIC_RUN_ID");
                    e.remove("LOCAL_WORLD_SIZE");
                }
                if let Ok(Some(t)) = local_tasks(&e) {
                    proptest::prop_assert!(t.local_rank < t.local_size);
                    proptest::prop_assert!((2..=MAX_LOCAL).contains(&t.local_size));
                }
            }
        }

        #[test]
        fn any_text_as_a_tasks_per_node_list_is_parsed_or_refused(text in "\\PC{0,40}") {
            if let Ok(counts) = parse_tasks_per_node(&text) {
                proptest::prop_assert!(counts.len() as u64 <= MAX_NODES);
            }
        }
    }

    #[test]
    fn torchrun_wins_and_keeps_its_old_rules() {
        let t = tasks(&[
            ("TORCHELASTIC_RUN_ID", "job1"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NTASKS_PER_NODE", "1"),
        ]);
        assert_eq!(
            (t.launcher, t.local_rank, t.local_size),
            (Launcher::Torchrun, 1, 4)
        );
        assert_eq!(
            local_tasks(&env(&[("LOCAL_WORLD_SIZE", "2")])).unwrap(),
            None
        );
        assert_eq!(local_tasks(&env(&[])).unwrap(), None);
    }
}
