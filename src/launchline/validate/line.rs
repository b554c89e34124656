//! The line around the launcher: which program it is (`launch.args` for a line preflight cannot
//! read as torchrun), `$VAR`s that were unset (`launch.variables`), and whether the script is
//! there to run (`launch.script`).

use super::{CommandShape, Context, Correction, finding};
use crate::launchline::args::{Launcher, Parsed};
use preflight_checks::model::{Finding, Fix, Status};

/// What preflight reads of each launcher, for the messages.
fn reading(p: &Parsed) -> String {
    let mut v = vec![format!("launcher {}", p.head.program)];
    if !p.head.wrappers.is_empty() {
        v.push(format!("through {}", p.head.wrappers.join(", ")));
    }
    if !p.head.env.is_empty() {
        v.push(format!(
            "environment {}",
            p.head
                .env
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    v.join("; ")
}

/// `launch.args` for a line whose program is not torchrun's parser: accelerate and deepspeed
/// are read for what maps onto torchrun's flags (warn, saying what is not checked); any other
/// program fails, since nothing of the rendezvous can be read from it.
pub(super) fn program(p: &Parsed, plan: &CommandShape) -> Option<(Finding, Option<Correction>)> {
    let rank = plan.rank;
    let script = p.script().unwrap_or_default().to_string();
    let base = |status, summary: String| {
        finding(
            preflight_checks::launch::ids::ARGS,
            status,
            rank,
            p.head.program.clone(),
            summary,
        )
        .with("launcher", format!("{:?}", p.launcher))
        .with("program", &p.head.program)
        .with("wrappers", &p.head.wrappers)
        .with("script", p.script())
        .with("script_args", p.script_args())
    };
    let f = match p.launcher {
        Launcher::Accelerate => {
            let config = p
                .value("config-file")
                .map(|c| format!(" Values set only in --config_file {c} (or accelerate's default config) are not read."))
                .unwrap_or_default();
            base(
                Status::Warn,
                format!(
                    "accelerate launch ({}): read as torchrun for --num_machines (nodes), --machine_rank (node rank), --main_process_ip/--main_process_port (endpoint, default port 29500) and --num_processes (all machines together); script {script}.{config} Its other options (mixed precision, DeepSpeed/FSDP plugins) are not checked",
                    reading(p)
                ),
            )
            .fix(Fix::new(
                "give --num_machines, --machine_rank, --main_process_ip and --main_process_port on the line (as here) so every node's line can be checked; accelerate passes them to torch.distributed.run",
            ))
        }
        Launcher::Deepspeed => {
            let ssh = p.has("hostfile") && !p.has("no-ssh");
            let how = if ssh {
                format!(
                    " With --hostfile {} deepspeed starts every node from this one over ssh/pdsh: preflight checks this node only, so run it on each host of the hostfile (or `preflight cluster --hosts LIST`).",
                    p.value("hostfile").unwrap_or_default()
                )
            } else {
                String::new()
            };
            base(
                Status::Warn,
                format!(
                    "deepspeed ({}): read as torchrun for --num_nodes (nodes), --node_rank, --master_addr/--master_port (endpoint, default 29500) and --num_gpus (processes per node, default every visible GPU); script {script}.{how} --include/--exclude and the DeepSpeed config are not checked",
                    reading(p)
                ),
            )
            .fix(Fix::new(
                "keep the deepspeed line; check each node with `preflight cluster --hosts LIST` when deepspeed starts them over ssh",
            ))
        }
        Launcher::Other => {
            let what = match p.head.python_script {
                Some(_) => format!(
                    "{} runs {script} directly: no torch launcher on the line, so preflight cannot read nodes, node rank or endpoint from it (the script or the scheduler sets MASTER_ADDR/RANK)",
                    p.head.program
                ),
                None => format!(
                    "{} is not torchrun, python -m torch.distributed.run/launch, accelerate launch or deepspeed: preflight cannot read the rendezvous from it",
                    if p.head.program.is_empty() {
                        "the line"
                    } else {
                        p.head.program.as_str()
                    }
                ),
            };
            base(
                Status::Fail,
                format!(
                    "{what}; only the environment in front of it ({}) and this node were checked",
                    if p.head.env.is_empty() { "none".to_string() } else { reading(p) }
                ),
            )
            .fix(Fix::new(
                "paste the torchrun line the job runs (for a wrapper script, the torchrun line inside it), or check the environment the launcher sets with `preflight check` (it reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)",
            ))
        }
        _ => return None,
    };
    Some((f, None))
}

/// `launch.variables`: `$VAR`s in the pasted line that are not set here (the shell leaves them empty).
pub(super) fn variables(p: &Parsed, plan: &CommandShape) -> Option<(Finding, Option<Correction>)> {
    let unset = p.unset_vars();
    if unset.is_empty() {
        return None;
    }
    let names: Vec<&str> = unset.iter().map(|(n, _)| n.as_str()).collect();
    let words: Vec<&str> = unset.iter().map(|(_, w)| w.as_str()).collect();
    let exports = names
        .iter()
        .map(|n| format!("export {n}=..."))
        .collect::<Vec<_>>()
        .join("; ");
    let f = finding(
        preflight_checks::launch::ids::VARIABLES,
        Status::Warn,
        plan.rank,
        names.join(" "),
        format!(
            "{} unset on rank {} where the line uses {}: the shell puts nothing there, and this reading does the same",
            names.join(", "),
            plan.rank,
            words.join(" ")
        ),
    )
    .with("unset", &names)
    .with("words", &words)
    .fix(Fix::new(format!(
        "set them before the line runs ({exports}), or write the values in; in a Slurm job, request what sets them (e.g. --gpus-per-task for SLURM_GPUS_PER_TASK)"
    )));
    Some((f, None))
}

/// What the caller found of the script on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptFile {
    /// The working directory it was looked up in.
    pub cwd: String,
    pub exists: bool,
    pub executable: bool,
}

/// `launch.script`: the script is missing from the working directory, or cannot be run as given.
pub(super) fn script(
    p: &Parsed,
    plan: &CommandShape,
    ctx: &Context,
) -> Option<(Finding, Option<Correction>)> {
    let file = ctx.job.script_file.as_ref()?;
    let script = p.script()?;
    if p.has("module") || (p.launcher == Launcher::Other && p.head.python_script.is_none()) {
        return None;
    }
    let rank = plan.rank;
    let no_python = p.has("no-python");
    let base = |status, summary: String| {
        finding(
            preflight_checks::launch::ids::SCRIPT,
            status,
            rank,
            script.to_string(),
            summary,
        )
        .with("script", script)
        .with("cwd", &file.cwd)
        .with("exists", file.exists)
        .with("executable", file.executable)
        .with("no_python", no_python)
    };
    let f = if !file.exists {
        base(
            Status::Warn,
            format!(
                "{script} does not exist in {} on rank {rank}: every worker stops at once (\"can't open file\"), on every node that lacks it",
                file.cwd
            ),
        )
        .fix(Fix::new(format!(
            "run from the directory that holds {script} (cd there first), give its full path, or copy it to every node"
        )))
    } else if no_python && !file.executable {
        base(
            Status::Warn,
            format!("--no-python runs {script} as a program, but it is not executable: the workers stop with \"Permission denied\""),
        )
        .fix(Fix::new(format!("chmod +x {script}, or drop --no-python to run it with python")))
    } else if !no_python && !script.ends_with(".py") && !file.executable {
        base(
            Status::Warn,
            format!(
                "{script} is neither a .py file nor executable: torchrun runs it with python, which fails unless it is Python source"
            ),
        )
        .fix(Fix::new(format!(
            "give the .py script, or for a program or shell script add --no-python and chmod +x {script}; for a module use -m"
        )))
    } else {
        base(Status::Pass, format!("{script} is in {}", file.cwd))
    };
    Some((f, None))
}
