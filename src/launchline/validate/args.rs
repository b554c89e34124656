//! `launch.args` and `launch.unknown-flag`: whether torchrun accepts the command's words at all.

use super::{CommandShape, Correction, finding};
use crate::launchline::args::{Parsed, Problem, suggest};
use preflight_checks::model::{Finding, Fix, Status};

pub(super) fn args(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let mut bad = Vec::new();
    for problem in &p.problems {
        match problem {
            Problem::MissingValue { word, .. } => bad.push(format!("{word} needs a value")),
            Problem::ValueOnFlag { word, .. } => bad.push(format!(
                "{word}: {} is a flag and takes no value (torchrun: \"ignored explicit argument\")",
                word.split('=').next().unwrap_or(word)
            )),
            Problem::BadValue { message, .. } => bad.push(format!("torchrun: \"{message}\"")),
            Problem::NoScript => bad.push(
                "no training script: torchrun needs the script (or module with -m) after its options"
                    .into(),
            ),
            _ => {}
        }
    }
    if bad.is_empty() {
        let what = if p.has("module") { "module" } else { "script" };
        let f = finding(
            preflight_checks::launch::ids::ARGS,
            Status::Pass,
            plan.rank,
            p.script().unwrap_or_default(),
            format!(
                "torchrun reads the command: {what} {} with {} argument(s) of its own{}",
                p.script().unwrap_or_default(),
                p.script_args().len(),
                around(p)
            ),
        )
        .with("script", p.script())
        .with("script_args", p.script_args())
        .with("launcher", format!("{:?}", p.launcher))
        .with("wrappers", &p.head.wrappers)
        .with(
            "env",
            p.head
                .env
                .iter()
                .map(|e| e.name.clone())
                .collect::<Vec<_>>(),
        );
        return (f, None);
    }
    let f = finding(
        preflight_checks::launch::ids::ARGS,
        Status::Fail,
        plan.rank,
        "command",
        format!(
            "torchrun on rank {} would reject this command: {}",
            plan.rank,
            bad.join("; ")
        ),
    )
    .with("problems", &bad)
    .fix(Fix::new(
        "give every option that takes one a value (--flag=value), and put the script after the options",
    ));
    (f, None)
}

/// "; --nproc-per is --nproc-per-node" for the options written as a prefix, or nothing.
fn prefixes(p: &Parsed) -> String {
    let read: Vec<String> = p
        .opts
        .iter()
        .filter_map(|o| {
            let spec = p.spec(o.name)?;
            (!spec.spellings.contains(&o.spelled.as_str()))
                .then(|| format!("{} is {}", o.spelled, full_name(spec, &o.spelled)))
        })
        .collect();
    if read.is_empty() {
        String::new()
    } else {
        format!(
            "; {}: torchrun takes a prefix that only one option starts with",
            read.join(", ")
        )
    }
}

/// The spelling a prefix stands for (`--max_restart` -> `--max_restarts`).
fn full_name(spec: &crate::launchline::args::OptSpec, prefix: &str) -> &'static str {
    spec.spellings
        .iter()
        .find(|s| s.starts_with(prefix))
        .copied()
        .or_else(|| spec.spellings.first().copied())
        .unwrap_or(spec.name)
}

/// "; through srun, sudo; environment NCCL_SOCKET_IFNAME" for the summary, or nothing.
fn around(p: &Parsed) -> String {
    let mut parts = Vec::new();
    if !p.head.wrappers.is_empty() {
        parts.push(format!("run through {}", p.head.wrappers.join(", ")));
    }
    if !p.head.env.is_empty() {
        parts.push(format!(
            "with the job's environment {} (judged as this node's)",
            p.head
                .env
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join("; "))
    }
}

pub(super) fn unknown_flags(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let mut words = Vec::new();
    let mut hints = Vec::new();
    let mut correction = None;
    // argparse stops at the first ambiguous prefix, before it collects unrecognized words.
    let mut ambiguous = None;
    for problem in &p.problems {
        match problem {
            Problem::Ambiguous {
                index,
                word,
                candidates,
            } => {
                words.push(word.clone());
                let names = candidates.join(", ");
                hints.push(if p.script_index.is_some_and(|s| *index > s) {
                    format!(
                        "{word} is the script's, but torchrun's argparse reads it as a prefix of its own options: put -- before the script (torchrun ... -- {} ...)",
                        p.script().unwrap_or("train.py")
                    )
                } else {
                    format!(
                        "{word}: write the whole name, one of {names} (torchrun takes a prefix only when one option starts with it)"
                    )
                });
                ambiguous.get_or_insert(format!("ambiguous option: {word} could match {names}"));
            }
            Problem::Unknown { word, .. } => {
                words.push(word.clone());
                hints.push(match suggest(word) {
                    Some(s) => format!("{word}: did you mean {s}?"),
                    None => format!("{word}: not a torchrun option; move it after the script if the script takes it"),
                });
            }
            Problem::LaunchOnly { index, word } => {
                words.push(word.clone());
                hints.push(format!(
                    "{word}: only torch.distributed.launch takes it; torchrun always sets LOCAL_RANK, so drop it"
                ));
                correction = Some(Correction::RemoveWord { index: *index });
            }
            _ => {}
        }
    }
    if words.is_empty() {
        let f = finding(
            preflight_checks::launch::ids::UNKNOWN_FLAG,
            Status::Pass,
            plan.rank,
            "options",
            format!(
                "every option before the script is one torchrun knows ({} given{})",
                p.opts.len(),
                prefixes(p)
            ),
        )
        .with(
            "options",
            p.opts.iter().map(|o| o.spelled.clone()).collect::<Vec<_>>(),
        );
        return (f, None);
    }
    let f = finding(
        preflight_checks::launch::ids::UNKNOWN_FLAG,
        Status::Fail,
        plan.rank,
        words.join(" "),
        format!(
            "torchrun on rank {} stops with \"{}\"",
            plan.rank,
            ambiguous.unwrap_or_else(|| format!("unrecognized arguments: {}", words.join(" ")))
        ),
    )
    .with("unknown", &words)
    .fix(Fix::new(hints.join("; ")));
    (f, correction)
}
