//! `launch.legacy`: `python -m torch.distributed.launch` and the `--local-rank` argument it passes.

use super::{CommandShape, Correction, finding};
use crate::launchline::args::{Launcher, Parsed};
use preflight_checks::model::{Finding, Fix, Status};

pub(super) fn legacy(
    p: &Parsed,
    plan: &CommandShape,
    script: Option<&str>,
) -> Option<(Finding, Option<Correction>)> {
    if p.launcher != Launcher::Launch {
        return None;
    }
    let rank = plan.rank;
    let subject = "torch.distributed.launch";
    let line = crate::launchline::rewrite::as_torchrun(p);
    let with_line = |f: Finding| -> Finding {
        let mut f = f.with("torchrun_command", &line);
        if let Some(fix) = f.fix.as_mut() {
            fix.hint = format!("{}; the torchrun line that does the same: {line}", fix.hint);
            fix.commands.push(line.clone());
        }
        f
    };
    let out = legacy_finding(p, script, rank, subject);
    out.map(|(f, c)| (with_line(f), c))
}

fn legacy_finding(
    p: &Parsed,
    script: Option<&str>,
    rank: u32,
    subject: &str,
) -> Option<(Finding, Option<Correction>)> {
    if p.has("use-env") {
        return Some((
            finding(preflight_checks::launch::ids::LEGACY, Status::Warn, rank, subject, "torch.distributed.launch is deprecated; with --use-env it behaves as torchrun (LOCAL_RANK in the environment)".into())
                .fix(Fix::new("replace `python -m torch.distributed.launch --use-env` with `torchrun`")),
            None,
        ));
    }
    let reads_arg = script.map(|s| s.contains("local_rank") || s.contains("local-rank"));
    let script_name = p.script().unwrap_or_default();
    match reads_arg {
        Some(false) => Some((
            finding(
                preflight_checks::launch::ids::LEGACY,
                Status::Fail,
                rank,
                subject,
                format!("torch.distributed.launch without --use-env passes --local-rank=N to {script_name}, which never mentions local_rank: its argument parser stops with \"unrecognized arguments: --local-rank=0\""),
            )
            .with("script", script_name)
            .fix(Fix::new("add --use-env (the script then reads LOCAL_RANK from the environment), or switch to torchrun")),
            Some(Correction::SetValue { name: "use-env", value: String::new() }),
        )),
        Some(true) => Some((
            finding(preflight_checks::launch::ids::LEGACY, Status::Warn, rank, subject, format!("torch.distributed.launch is deprecated; {script_name} reads local_rank, so --local-rank=N works"))
                .with("script", script_name)
                .fix(Fix::new("switch to torchrun and read LOCAL_RANK from the environment")),
            None,
        )),
        None => Some((
            finding(
                preflight_checks::launch::ids::LEGACY,
                Status::Warn,
                rank,
                subject,
                format!("torch.distributed.launch without --use-env passes --local-rank=N to {script_name} (torch < 2.0: --local_rank=N); the script must accept it"),
            )
            .with("script", script_name)
            .fix(Fix::new("make the script accept --local-rank (parser.add_argument(\"--local-rank\", \"--local_rank\", type=int)), or add --use-env and read LOCAL_RANK")),
            None,
        )),
    }
}
