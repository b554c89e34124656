//! The corpus of launch lines as people paste them (tests/fixtures/launch-lines.json): each is
//! read as expected (launcher, wrappers, environment, script, script arguments, nodes, node
//! rank, endpoint, unset variables), and every rewrite keeps the user's words apart from the
//! environment and the corrected flags.

use super::args::{self, Launcher, Parsed, split_line, split_shell};
use super::rewrite;
use super::validate::{Correction, shape_of};
use serde_json::Value;
use std::collections::BTreeMap;

struct Entry {
    source: String,
    line: String,
    env: BTreeMap<String, String>,
    expect: Value,
}

fn corpus() -> Vec<Entry> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/launch-lines.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| Entry {
            source: e["source"].as_str().unwrap().to_string(),
            line: e["line"].as_str().unwrap().to_string(),
            env: e["env"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            expect: e["expect"].clone(),
        })
        .collect()
}

fn parsed(e: &Entry) -> Parsed {
    args::parse(split_line(&e.line, Some(&e.env)).unwrap_or_else(|x| panic!("{}: {x}", e.source)))
}

fn launcher_name(l: Launcher) -> &'static str {
    match l {
        Launcher::Torchrun => "torchrun",
        Launcher::RunModule => "run-module",
        Launcher::Launch => "launch",
        Launcher::Accelerate => "accelerate",
        Launcher::Deepspeed => "deepspeed",
        Launcher::Other => "other",
        Launcher::Bare => "bare",
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn corpus_lines_read_as_expected() {
    let all = corpus();
    let real = all
        .iter()
        .filter(|e| !e.source.starts_with("issue"))
        .count();
    assert!(real >= 40, "only {real} lines from public material");
    for e in &all {
        let p = parsed(e);
        let s = shape_of(&p);
        let x = &e.expect;
        let src = &e.source;
        assert_eq!(launcher_name(p.launcher), x["launcher"], "{src}: launcher");
        assert_eq!(p.head.wrappers, strs(&x["wrappers"]), "{src}: wrappers");
        let env: Vec<String> = p.head.env.iter().map(|w| w.name.clone()).collect();
        assert_eq!(env, strs(&x["env"]), "{src}: environment");
        assert_eq!(p.script(), x["script"].as_str(), "{src}: script");
        assert_eq!(
            p.script_args().len() as u64,
            x["script_args"].as_u64().unwrap(),
            "{src}: script args {:?}",
            p.script_args()
        );
        let nnodes = p
            .value("nnodes")
            .map_or(Some(1), |_| s.nnodes.map(|(_, max)| max));
        assert_eq!(nnodes.map(u64::from), x["nnodes"].as_u64(), "{src}: nnodes");
        assert_eq!(
            u64::from(s.rank),
            x["node_rank"].as_u64().unwrap(),
            "{src}: rank"
        );
        let endpoint = if p.launcher == Launcher::Other {
            None
        } else {
            s.endpoint.map(|(h, port)| format!("{h}:{port}"))
        };
        assert_eq!(
            endpoint.as_deref(),
            x["endpoint"].as_str(),
            "{src}: endpoint"
        );
        let unset: Vec<String> = p.unset_vars().into_iter().map(|(n, _)| n).collect();
        assert_eq!(unset, strs(&x["unset"]), "{src}: unset variables");
    }
}

/// Word counts of `a` missing from `b`.
fn missing(a: &[String], b: &[String]) -> Vec<String> {
    let mut left: Vec<&String> = b.iter().collect();
    let mut out = Vec::new();
    for w in a {
        match left.iter().position(|x| *x == w) {
            Some(i) => {
                left.remove(i);
            }
            None => out.push(w.clone()),
        }
    }
    out
}

fn is_env_word(w: &str, names: &[&str]) -> bool {
    super::head::assignment(w).is_some_and(|(n, _)| names.contains(&n))
}

#[test]
fn rewrites_keep_every_word_but_the_environment_and_the_corrected_flags() {
    let rec: BTreeMap<String, String> = [
        ("NCCL_SOCKET_IFNAME", "=eth9"),
        ("NCCL_IB_DISABLE", "1"),
        ("NCCL_DEBUG", "WARN"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let names: Vec<&str> = rec.keys().map(String::as_str).collect();
    for e in corpus() {
        let p = parsed(&e);
        let input = split_shell(&e.line).unwrap();
        // With no correction: only the environment differs.
        let out = rewrite::rewrite(&p, &[], &rec);
        let printed = split_shell(&out).unwrap_or_else(|x| panic!("{}: {x}: {out}", e.source));
        let strip = |v: &[String]| -> Vec<String> {
            v.iter()
                .filter(|w| !is_env_word(w, &names))
                .cloned()
                .collect()
        };
        assert_eq!(strip(&printed), strip(&input), "{}: {out}", e.source);
        for (k, v) in &rec {
            assert!(
                printed.contains(&format!("{k}={v}")),
                "{}: {k} missing from {out}",
                e.source
            );
        }
        // With a corrected worker count: that flag's words change, nothing else.
        if p.launcher == Launcher::Other || p.spec("nproc-per-node").is_none() {
            continue;
        }
        let fix = [Correction::SetValue {
            name: "nproc-per-node",
            value: "3".into(),
        }];
        let out = rewrite::rewrite(&p, &fix, &rec);
        let printed = split_shell(&out).unwrap();
        let spellings = p.spec("nproc-per-node").unwrap().spellings;
        let flag_word = |w: &str| {
            spellings
                .iter()
                .any(|s| w == *s || w.starts_with(&format!("{s}=")))
        };
        let old = p.value("nproc-per-node").map(str::to_string);
        for w in missing(&strip(&input), &strip(&printed)) {
            assert!(
                flag_word(&w) || Some(&w) == old.as_ref() || w.contains('$'),
                "{}: {w:?} was removed: {out}",
                e.source
            );
        }
        for w in missing(&strip(&printed), &strip(&input)) {
            assert!(
                (flag_word(&w) && w.ends_with("=3")) || w == "3",
                "{}: {w:?} was added: {out}",
                e.source
            );
        }
        let reparsed = args::parse(args::split_line(&out, Some(&e.env)).unwrap());
        assert_eq!(
            reparsed.value("nproc-per-node"),
            Some("3"),
            "{}: {out}",
            e.source
        );
    }
}

proptest::proptest! {
    /// Any text, and any soup of wrapper, launcher and variable words, reads without a panic,
    /// and its rewrite splits again.
    #[test]
    fn any_line_reads_and_rewrites(
        text in ".{0,120}",
        soup in proptest::collection::vec(proptest::sample::select(vec![
            "sudo", "-E", "-u", "env", "srun", "-N", "2", "--", "numactl", "-m0", "taskset", "-c",
            "0-3", "timeout", "uv", "run", "conda", "-n", "x", "apptainer", "exec", "img.sif",
            "python3", "-u", "-m", "torch.distributed.launch", "torchrun", "deepspeed",
            "accelerate", "launch", "A=1", "NCCL_IB_DISABLE=0", "$DIST", "${X:-4}", "$NOPE",
            "--nnodes=2", "--nproc_per_node", "$N", "--num_gpus", "--use_env", "t.py", "'a b'",
            "-é", "--x=é", "\\\n",
        ]), 0..14),
    ) {
        let env: BTreeMap<String, String> = [("DIST", "--nnodes 2 --node_rank 1"), ("N", "8")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for line in [text, soup.join(" ")] {
            if let Ok(words) = split_line(&line, Some(&env)) {
                let p = args::parse(words);
                let _ = shape_of(&p);
                let _ = rewrite::as_torchrun(&p);
                let out = rewrite::rewrite(
                    &p,
                    &[Correction::SetValue { name: "nproc-per-node", value: "2".into() }],
                    &env,
                );
                proptest::prop_assert!(split_shell(&out).is_ok(), "{line:?} -> {out:?}");
            }
        }
    }
}
