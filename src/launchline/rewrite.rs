//! The user's own command printed back: the recommended environment in front and the corrected
//! flags, every other word unchanged (same order, same spelling, same script arguments).

use super::args::{Launcher, Parsed, ValueForm, Word};

/// A change to the user's command that fixes a finding on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Correction {
    /// Give the last occurrence of option `name` this value (add the option when absent).
    SetValue { name: &'static str, value: String },
    /// Drop every occurrence of option `name`.
    Remove { name: &'static str },
    /// Drop the word at this index (an option torchrun rejects).
    RemoveWord { index: usize },
}
use std::collections::BTreeMap;

/// What happens to one original word.
#[derive(Clone, Debug)]
enum Edit {
    Keep,
    Replace(Word),
    Drop,
}

/// The spelling for a flag the user did not write: dashes, or underscores if the user writes those.
fn new_spelling(p: &Parsed, name: &str) -> String {
    let s = p
        .spec(name)
        .and_then(|s| s.spellings.iter().find(|w| w.starts_with("--")).copied())
        .unwrap_or("--");
    let s = if s == "--" {
        format!("--{name}")
    } else {
        s.to_string()
    };
    if p.prefers_underscores() {
        format!("--{}", s.trim_start_matches("--").replace('-', "_"))
    } else {
        s
    }
}

/// A word that came out of a split `$VAR` (its text is the variable, or nothing).
fn from_variable(w: &Word) -> bool {
    w.raw
        .as_deref()
        .is_some_and(|r| r.is_empty() || (r.starts_with('$') && r != w.value))
}

/// The command's words after the corrections.
pub fn apply(p: &Parsed, fixes: &[Correction]) -> Vec<Word> {
    let mut edits = vec![Edit::Keep; p.words.len()];
    let mut inserted: Vec<Word> = Vec::new();
    for fix in fixes {
        match fix {
            Correction::RemoveWord { index } => {
                if let Some(e) = edits.get_mut(*index) {
                    *e = Edit::Drop;
                }
            }
            Correction::Remove { name } => {
                for o in p.opts.iter().filter(|o| o.name == *name) {
                    edits[o.index] = Edit::Drop;
                    if o.form == ValueForm::Separate {
                        edits[o.index + 1] = Edit::Drop;
                    }
                }
            }
            Correction::SetValue { name, value } => {
                let takes_value = p.spec(name).is_some_and(|s| s.takes_value);
                let in_var = p.last(name).is_some_and(|o| {
                    let end = if o.form == ValueForm::Separate {
                        o.index + 1
                    } else {
                        o.index
                    };
                    (o.index..=end).any(|i| p.words.get(i).is_some_and(from_variable))
                });
                match p.last(name) {
                    Some(_) if !takes_value => {}
                    // Inside a `$VAR` the user's text cannot be edited: the corrected flag goes
                    // after it (argparse: the last occurrence wins).
                    Some(o) if in_var => {
                        inserted.push(Word::plain(format!("{}={value}", o.spelled)))
                    }
                    Some(o) if o.form == ValueForm::Separate => {
                        edits[o.index + 1] = Edit::Replace(Word::plain(value.clone()));
                    }
                    Some(o) => {
                        edits[o.index] =
                            Edit::Replace(Word::plain(format!("{}={value}", o.spelled)));
                    }
                    None if !takes_value => inserted.push(Word::plain(new_spelling(p, name))),
                    None => {
                        inserted.push(Word::plain(format!("{}={value}", new_spelling(p, name))))
                    }
                }
            }
        }
    }
    // Before the script, and before a `--` that ends the options.
    let insert_at = match p.script_index {
        Some(i) if i > p.options_start() && p.words[i - 1].value == "--" => i - 1,
        Some(i) => i,
        None => p.words.len(),
    };
    let mut out = Vec::with_capacity(p.words.len() + inserted.len());
    for (i, (word, edit)) in p.words.iter().zip(edits).enumerate() {
        if i == insert_at {
            out.append(&mut inserted);
        }
        match edit {
            Edit::Keep => out.push(word.clone()),
            Edit::Replace(w) => out.push(w),
            Edit::Drop => {}
        }
    }
    out.append(&mut inserted);
    out
}

/// The deprecated `python -m torch.distributed.launch ...` as the torchrun line that does the
/// same: the launcher words become `torchrun`, `--use-env` goes (torchrun always sets LOCAL_RANK);
/// the environment, wrappers, options and script stay as written.
pub fn as_torchrun(p: &Parsed) -> String {
    let start = p.head.start;
    let end = p.options_start();
    let use_env: Vec<usize> = p
        .opts
        .iter()
        .filter(|o| o.name == "use-env")
        .map(|o| o.index)
        .collect();
    let mut words: Vec<Word> = Vec::with_capacity(p.words.len());
    for (i, w) in p.words.iter().enumerate() {
        if i == start {
            words.push(Word::plain("torchrun"));
        }
        if (start..end).contains(&i) || use_env.contains(&i) {
            continue;
        }
        words.push(w.clone());
    }
    render(&words, &BTreeMap::new())
}

/// Words as one shell line, with `KEY=value ...` in front when `env` is not empty.
pub fn render(words: &[Word], env: &BTreeMap<String, String>) -> String {
    let prefix = crate::shell::env_prefix(env);
    // A field of a split `$VAR` carries no text of its own: the first field prints `$VAR`.
    let body = words
        .iter()
        .filter(|w| w.raw.as_deref() != Some(""))
        .map(Word::shell_text)
        .collect::<Vec<_>>()
        .join(" ");
    if prefix.is_empty() {
        body
    } else {
        format!("{prefix} {body}")
    }
}

/// One of the line's own `NAME=value` words that the recommended environment changes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EnvChange {
    pub name: String,
    pub yours: String,
    pub recommended: String,
}

/// The line's own environment words the recommendation changes (the rest are kept as written).
pub fn env_changes(p: &Parsed, env: &BTreeMap<String, String>) -> Vec<EnvChange> {
    let own = p.line_env();
    env.iter()
        .filter_map(|(k, v)| {
            own.get(k).filter(|o| *o != v).map(|o| EnvChange {
                name: k.clone(),
                yours: o.clone(),
                recommended: v.clone(),
            })
        })
        .collect()
}

/// The corrected command with the environment merged in: a `NAME=value` the line already has is
/// replaced where it stands; the others go in front (after the line's own last assignment, so
/// they stay in the same `env ...`). Bare arguments get `torchrun` in front so the line runs.
pub fn rewrite(p: &Parsed, fixes: &[Correction], env: &BTreeMap<String, String>) -> String {
    let mut words = apply(p, fixes);
    if p.launcher == Launcher::Bare {
        words.insert(0, Word::plain("torchrun"));
    }
    let own = p.line_env();
    let mut extra = BTreeMap::new();
    for (k, v) in env {
        if !own.contains_key(k) {
            extra.insert(k.clone(), v.clone());
        }
    }
    // Replace in place: the env words come before any inserted word, so indices hold.
    for e in &p.head.env {
        if let Some(v) = env.get(&e.name).filter(|v| **v != e.value) {
            if let Some(w) = words.get_mut(e.index) {
                *w = Word::plain(format!("{}={}", e.name, crate::shell::quote(v)));
                w.raw = Some(w.value.clone());
            }
        }
    }
    match p.head.env.last() {
        Some(last) if !extra.is_empty() => {
            let prefix = crate::shell::env_prefix(&extra);
            let at = (last.index + 1).min(words.len());
            words.insert(
                at,
                Word {
                    raw: Some(prefix.clone()),
                    value: prefix,
                    unset: Vec::new(),
                },
            );
            render(&words, &BTreeMap::new())
        }
        _ => render(&words, &extra),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launchline::args::{parse, split_shell, split_shell_words};

    fn parsed(line: &str) -> Parsed {
        parse(split_shell_words(line).unwrap())
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Word-level diff: (removed, added) between two commands.
    fn diff(a: &[String], b: &[String]) -> (Vec<String>, Vec<String>) {
        let removed = a.iter().filter(|w| !b.contains(w)).cloned().collect();
        let added = b.iter().filter(|w| !a.contains(w)).cloned().collect();
        (removed, added)
    }

    #[test]
    fn no_fix_no_env_prints_the_paste_back_exactly() {
        let line = "torchrun --master_addr='192.168.1.2' --master_port \"29521\" train.py --name \"my run\" $EXTRA";
        assert_eq!(rewrite(&parsed(line), &[], &BTreeMap::new()), line);
    }

    #[test]
    fn only_the_env_prefix_and_corrected_flags_change() {
        let line = "torchrun --nnodes=1 --nproc_per_node 8 --standalone --use_env --master_port=29500 train.py --nproc_per_node 8 --lr=3";
        let p = parsed(line);
        let fixes = [
            Correction::SetValue {
                name: "nproc-per-node",
                value: "4".into(),
            },
            Correction::SetValue {
                name: "master-port",
                value: "29501".into(),
            },
            Correction::Remove { name: "standalone" },
        ];
        let out = rewrite(
            &p,
            &fixes,
            &env(&[("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_DISABLE", "1")]),
        );
        assert!(
            out.starts_with("NCCL_SOCKET_IFNAME=eth0 NCCL_IB_DISABLE=1 torchrun "),
            "{out}"
        );
        let before = split_shell(line).unwrap();
        let after = split_shell(&out).unwrap();
        let (removed, added) = diff(&before, &after[2..]);
        assert_eq!(removed, vec!["--standalone", "--master_port=29500"]);
        assert_eq!(added, vec!["4", "--master_port=29501"]);
        // The script's own --nproc_per_node 8 is untouched, and order is kept.
        assert!(out.ends_with("train.py --nproc_per_node 8 --lr=3"), "{out}");
        assert!(
            out.contains("--nproc_per_node 4 --use_env --master_port=29501"),
            "{out}"
        );
    }

    #[test]
    fn missing_flags_are_added_before_the_script_in_the_users_style() {
        let p = parsed("python -m torch.distributed.launch --nproc_per_node=2 main.py --x");
        let out = rewrite(
            &p,
            &[Correction::SetValue {
                name: "use-env",
                value: String::new(),
            }],
            &BTreeMap::new(),
        );
        assert_eq!(
            out,
            "python -m torch.distributed.launch --nproc_per_node=2 --use_env main.py --x"
        );
        let q = parsed("torchrun --nnodes 2 t.py");
        let out = rewrite(
            &q,
            &[Correction::SetValue {
                name: "master-port",
                value: "29600".into(),
            }],
            &BTreeMap::new(),
        );
        assert_eq!(out, "torchrun --nnodes 2 --master-port=29600 t.py");
    }

    #[test]
    fn removed_words_and_endpoint_ports() {
        let p = parsed("torchrun --use-env --rdzv-endpoint [fd00::1]:29400 t.py");
        let out = rewrite(
            &p,
            &[
                Correction::RemoveWord { index: 1 },
                Correction::SetValue {
                    name: "rdzv-endpoint",
                    value: "[fd00::1]:29401".into(),
                },
            ],
            &BTreeMap::new(),
        );
        assert_eq!(out, "torchrun --rdzv-endpoint '[fd00::1]:29401' t.py");
    }

    #[test]
    fn the_lines_own_environment_is_replaced_in_place_and_kept_otherwise() {
        let p = parsed("NCCL_SOCKET_IFNAME=bond0 NCCL_DEBUG=INFO torchrun t.py");
        let rec = env(&[("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_DISABLE", "1")]);
        assert_eq!(
            rewrite(&p, &[], &rec),
            "NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 torchrun t.py"
        );
        let changes = env_changes(&p, &rec);
        assert_eq!(changes.len(), 1);
        assert_eq!(
            (changes[0].yours.as_str(), changes[0].recommended.as_str()),
            ("bond0", "eth0")
        );
        // Inside `sudo -E env ...` the new values join the line's own assignments.
        let p = parsed("sudo -E env NCCL_DEBUG=INFO torchrun t.py");
        assert_eq!(
            rewrite(&p, &[], &env(&[("NCCL_IB_DISABLE", "1")])),
            "sudo -E env NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 torchrun t.py"
        );
        // A launcher that is not torchrun is printed as it is, never wrapped in torchrun.
        let p = parsed("deepspeed --num_gpus 8 train.py");
        assert_eq!(
            rewrite(&p, &[], &BTreeMap::new()),
            "deepspeed --num_gpus 8 train.py"
        );
        let p = parsed("srun python train.py");
        assert_eq!(
            rewrite(&p, &[], &env(&[("NCCL_IB_DISABLE", "1")])),
            "NCCL_IB_DISABLE=1 srun python train.py"
        );
    }

    #[test]
    fn the_legacy_launcher_as_torchrun() {
        let p = parsed(
            "OMP_NUM_THREADS=1 python3 -u -m torch.distributed.launch --use_env --nproc_per_node 8 main.py --x",
        );
        assert_eq!(
            as_torchrun(&p),
            "OMP_NUM_THREADS=1 torchrun --nproc_per_node 8 main.py --x"
        );
    }
}
