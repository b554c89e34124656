//! preflight and torch's own argparse agree on every torchrun line the launch-line tests use:
//! the lines are gathered from those tests' sources and the corpus, handed to
//! `torch.distributed.run.get_args_parser().parse_args` (`torch.distributed.launch.parse_args`
//! for the legacy launcher) in one python3, and each accept or reject must match preflight's.
//! Skips with a message where torch is not installed, unless `PREFLIGHT_REQUIRE_TORCH=1`.

use preflight::launchline::args::{self, Launcher, Problem};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The sources whose string literals hold the launch-line tests' torchrun lines.
const SOURCES: &[&str] = &[
    "src/launchline",
    "tests/it/torchrun.rs",
    "tests/it/launchers.rs",
    "tests/it/c10d.rs",
    "tests/it/as_written.rs",
    "tests/it/master_names.rs",
];

/// Lines added here for the cases the tests above do not spell: prefixes, aliases, ambiguity.
const EXTRA: &[&str] = &[
    "torchrun --standalone --max-restart=3 --nproc-per=1 ok.py",
    "torchrun --nproc=2 ok.py",
    "torchrun --no 2 ok.py",
    "torchrun --st ok.py",
    "torchrun --master 10.0.0.1 ok.py",
    "torchrun --max_restart=2 --rdzv-e=10.0.0.1:29400 ok.py",
    "torchrun --mo ok.py",
    "torchrun --module pkg.train",
    "torchrun --nnodes=2 --nproc_per=4 --node_r=1 --master_a=10.0.0.1 ok.py",
    "torchrun --virtual-local-rank --duplicate_stdout_filters=a,b ok.py",
    "torchrun --duplicate a ok.py",
    "torchrun --use-env ok.py",
    "python -m torch.distributed.launch --use_env --nproc_per_node=2 ok.py",
    "python -m torch.distributed.launch --use --nproc-per-node=2 ok.py",
    "torchrun --nnodes=2 --nproc-per-node 2 ok.py --nproc=9",
    "torchrun --nnodes=2 --nnodesx=3 ok.py",
    "torchrun --standalone=1 ok.py",
    "torchrun --nnodes",
    "torchrun -r3 -t=2 ok.py",
    "torchrun --nnodes=2 ok.py --nproc=9",
    "torchrun --nnodes=2 -- ok.py --nproc=9",
    "torchrun --nnodes=2 ok.py --nproc-per=9 --master",
    "torchrun --master-port=abc --max-restarts=1_0 --monitor-interval=1e-1 ok.py",
    "torchrun --node-rank=-1 --start-method=thread ok.py",
    "torchrun --numa-binding=socket --start_method=fork ok.py",
];

/// Every string literal in a Rust source, unescaped (`\"`, `\\`, `\n`, `\`-newline).
fn literals(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' if chars.get(i + 2) == Some(&'\'') => i += 3,
            '\'' if chars.get(i + 1) == Some(&'\\') && chars.get(i + 3) == Some(&'\'') => i += 4,
            '"' => {
                let mut s = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('\n') => {
                                while chars.get(i + 1).is_some_and(|c| c.is_whitespace()) {
                                    i += 1;
                                }
                            }
                            Some(c) => s.push(*c),
                            None => {}
                        }
                    } else {
                        s.push(chars[i]);
                    }
                    i += 1;
                }
                out.push(s);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A line and the environment its `$VAR`s expand from (the corpus gives one).
type Line = (String, BTreeMap<String, String>);

/// The torchrun lines: the tests' literals that preflight reads as torch's launchers, the
/// corpus, and [`EXTRA`].
fn lines() -> Vec<Line> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for s in SOURCES {
        rust_files(&root.join(s), &mut files);
    }
    let mut all: Vec<Line> = EXTRA
        .iter()
        .map(|s| (s.to_string(), BTreeMap::new()))
        .collect();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        all.extend(literals(&text).into_iter().map(|l| (l, BTreeMap::new())));
    }
    let corpus: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/fixtures/launch-lines.json")).unwrap(),
    )
    .unwrap();
    for e in corpus["lines"].as_array().unwrap() {
        let env = e["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        all.push((e["line"].as_str().unwrap().to_string(), env));
    }
    let mut lines: Vec<Line> = all
        .into_iter()
        .filter(|l| !l.0.contains(['{', '}', '\n']) && torch_args(l).is_some())
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

/// (legacy launcher, the words torch's parser gets) for a line preflight reads as torchrun,
/// `python -m torch.distributed.run` or `torch.distributed.launch`.
fn torch_args(line: &Line) -> Option<(bool, Vec<String>)> {
    let p = parsed(line)?;
    if !matches!(
        p.launcher,
        Launcher::Torchrun | Launcher::RunModule | Launcher::Launch
    ) {
        return None;
    }
    let words = p.words[p.options_start()..]
        .iter()
        .map(|w| w.value.clone())
        .collect();
    Some((p.launcher == Launcher::Launch, words))
}

fn parsed((line, env): &Line) -> Option<args::Parsed> {
    let env = (!env.is_empty()).then_some(env);
    Some(args::parse(args::split_line(line, env).ok()?))
}

const JUDGE: &str = r#"
import contextlib, io, json, sys, warnings
warnings.filterwarnings("ignore")
import torch.distributed.launch as launch
import torch.distributed.run as run
out = []
for case in json.load(sys.stdin):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            if case["legacy"]:
                launch.parse_args(case["args"])
            else:
                run.get_args_parser().parse_args(case["args"])
        out.append({"ok": True, "error": ""})
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        out.append({"ok": False, "error": lines[-1] if lines else ""})
print(json.dumps(out))
"#;

fn torch_verdicts(cases: &Value) -> Option<Vec<Value>> {
    let has_torch = Command::new("python3")
        .args(["-c", "import torch.distributed.run"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_torch {
        assert!(
            std::env::var("PREFLIGHT_REQUIRE_TORCH").as_deref() != Ok("1"),
            "PREFLIGHT_REQUIRE_TORCH=1 but python3 cannot import torch.distributed.run"
        );
        eprintln!(
            "skipping: python3 with torch is not installed (PREFLIGHT_REQUIRE_TORCH=1 makes this a failure)"
        );
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", JUDGE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(cases.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the torch judge failed");
    Some(serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap())
}

#[test]
fn preflight_accepts_and_rejects_every_test_line_as_torchs_argparse_does() {
    let lines = lines();
    assert!(
        lines.len() >= 100,
        "only {} torchrun lines found",
        lines.len()
    );
    let cases: Vec<Value> = lines
        .iter()
        .filter_map(torch_args)
        .map(|(legacy, args)| json!({"legacy": legacy, "args": args}))
        .collect();
    let Some(torch) = torch_verdicts(&json!(cases)) else {
        return;
    };
    let mut disagree = Vec::new();
    for (l, verdict) in lines.iter().zip(&torch) {
        let line = &l.0;
        let p = parsed(l).unwrap();
        let problems: Vec<&Problem> = p.problems.iter().collect();
        let torch_ok = verdict["ok"].as_bool().unwrap();
        if torch_ok != problems.is_empty() {
            disagree.push(format!(
                "{line}\n    torch: {}\n    preflight: {problems:?}",
                if torch_ok {
                    "accepts"
                } else {
                    verdict["error"].as_str().unwrap()
                }
            ));
        }
        let said = match problems.first() {
            Some(Problem::Ambiguous {
                word, candidates, ..
            }) => Some(format!(
                "ambiguous option: {word} could match {}",
                candidates.join(", ")
            )),
            Some(Problem::BadValue { message, .. }) => Some(message.clone()),
            _ => None,
        };
        if let Some(said) = said {
            assert!(
                verdict["error"].as_str().unwrap().ends_with(&said),
                "{line}: torch says {}, preflight {said}",
                verdict["error"]
            );
        }
    }
    assert!(
        disagree.is_empty(),
        "{} of {} lines judged otherwise than torch:\n{}",
        disagree.len(),
        lines.len(),
        disagree.join("\n")
    );
}
