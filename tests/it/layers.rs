//! The binary crate's layers (docs/ARCHITECTURE.md), checked from the source: every
//! `crate::` path in production code points to a lower layer, and only app, render and
//! output print.

use crate::common::repo;
use std::collections::BTreeMap;
use std::path::Path;

/// Each top-level module of src/ and its layer; a module may name only lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("output", 0),
    ("cleanup", 0),
    ("shell", 0),
    ("slurmd", 0),
    ("transport", 0),
    ("report_compact", 0),
    ("report", 1),
    ("placement", 0),
    ("measure", 1),
    ("advise", 1),
    ("history", 1),
    ("recipe", 1),
    ("cli", 1),
    ("argv", 2),
    ("launchline", 2),
    ("render", 2),
    ("runtime", 2),
    ("config", 3),
    ("commands", 4),
    ("app", 5),
];

/// (module, file, production text) of every source file under src/ but main.rs and lib.rs.
fn sources() -> Vec<(String, String, String)> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = repo("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|p| {
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().to_string();
            let top = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string();
            if top == "main" || top == "lib" {
                return None;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            // `#[cfg(test)] mod tests;` only names a test file: production code follows it.
            let text = text.replace("#[cfg(test)]\nmod tests;", "");
            let prod = text.split("#[cfg(test)]").next().unwrap().to_string();
            Some((top, rel, prod))
        })
        .collect()
}

#[test]
fn every_module_names_only_lower_layers() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for (top, file, text) in sources() {
        let Some(&mine) = layer.get(top.as_str()) else {
            wrong.push(format!(
                "{file}: module {top} has no layer in tests/it/layers.rs"
            ));
            continue;
        };
        for (i, _) in text.match_indices("crate::") {
            let dep: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if dep == top || dep.is_empty() {
                continue;
            }
            match layer.get(dep.as_str()) {
                Some(&theirs) if theirs < mine => {}
                _ => wrong.push(format!("{file}: {top} (layer {mine}) names crate::{dep}")),
            }
        }
    }
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "upward or unknown edges:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn only_app_render_and_output_print() {
    let printers: Vec<String> = sources()
        .into_iter()
        .filter(|(top, _, _)| !["app", "render", "output"].contains(&top.as_str()))
        .filter(|(_, _, t)| {
            [
                "println!",
                "print!(",
                "eprintln!",
                "eprint!(",
                "io::stdout()",
                "io::stderr()",
            ]
            .iter()
            .any(|p| t.contains(p))
        })
        .map(|(_, f, _)| f)
        .collect();
    assert!(printers.is_empty(), "these files print: {printers:?}");
}
