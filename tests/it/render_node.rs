//! The node report as a person reads it: `preflight check --facts FILE` for every saved node,
//! at 80 and 120 columns (`COLUMNS`, stdout not a terminal), as snapshots; every fix command
//! of the JSON report on a line of its own, whole; prose within the width; a verdict last.
//! And the same run in a real terminal (tmux, 80 columns): what the terminal shows.

use crate::common::{bin, fixture, json_of};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NODES: [&str; 5] = [
    "ib-node",
    "docker-bond-host",
    "k8s-pod",
    "plain-vm",
    "roce-node",
];

/// `preflight check --facts` of a saved node, as the binary prints it to a pipe.
fn check_text(node: &str, columns: u16, extra: &[&str]) -> String {
    let out = bin()
        .args(["check", "--facts"])
        .arg(fixture(&format!("facts/{node}.json")))
        .args(extra)
        .env("COLUMNS", columns.to_string())
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_CTYPE")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().replace(
        concat!("preflight ", env!("CARGO_PKG_VERSION"), " "),
        "preflight [version] ",
    )
}

/// The JSON report of the same run.
fn check_json(node: &str) -> Value {
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(fixture(&format!("facts/{node}.json")))
        .output()
        .unwrap();
    json_of(&out.stdout)
}

/// Every fix command of the report's warn/fail/error findings, and the launch commands.
fn commands(report: &Value) -> (Vec<String>, Vec<String>) {
    let fixes = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] != "pass" && f["status"] != "skip")
        .flat_map(|f| f["fix"]["commands"].as_array().cloned().unwrap_or_default())
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let rec = &report["recommendation"];
    let mut launch: Vec<String> = rec["launch"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| l["command"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    launch.extend(rec["standalone"].as_str().map(String::from));
    (fixes, launch)
}

#[test]
fn snapshots_of_node_reports_at_80_and_120_columns() {
    for node in NODES {
        let report = check_json(node);
        let (fixes, launch) = commands(&report);
        let failing = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["status"] == "fail" || f["status"] == "error");
        for width in [80u16, 120] {
            let text = check_text(node, width, &[]);
            insta::assert_snapshot!(format!("node_{node}_{width}cols"), text);
            let ctx = || format!("--- {node} at {width} ---\n{text}");
            for c in &fixes {
                assert!(
                    text.lines().any(|l| l == format!("        {c}")),
                    "fix command missing, cut or wrapped: {c}\n{}",
                    ctx()
                );
            }
            for c in &launch {
                let shown = text.lines().any(|l| l.trim() == c);
                assert_eq!(shown, !failing, "launch command {c}\n{}", ctx());
            }
            for l in text.lines() {
                let is_command = fixes.iter().chain(&launch).any(|c| l.trim() == c);
                assert!(
                    is_command || l.chars().count() <= width as usize,
                    "line wider than {width}: {l}\n{}",
                    ctx()
                );
            }
            let verdict = text.trim_end().rsplit("\n\n").next().unwrap();
            let expected = if failing {
                "✗ do not launch: "
            } else {
                "✓ ready to launch"
            };
            assert!(verdict.starts_with(expected), "{}", ctx());
            assert!(!text.contains('\u{1b}'), "colour in a pipe\n{}", ctx());
        }
    }
}

/// A node with one failure and two warnings reads on one screen: at most 45 lines at 80
/// columns, each fix command whole on a line of its own, no line wider than the terminal.
#[test]
fn a_node_with_three_problems_fits_in_45_lines_at_80_columns() {
    let text = check_text("three-problems", 80, &[]);
    assert!(text.contains("\n1 problem, 2 warnings:\n"), "{text}");
    let lines = text.lines().count();
    assert!(lines <= 45, "{lines} lines:\n{text}");
    let (fixes, _) = commands(&check_json("three-problems"));
    assert!(fixes.len() >= 3, "{fixes:?}");
    for c in &fixes {
        assert!(
            text.lines().any(|l| l == format!("        {c}")),
            "fix command missing, cut or wrapped: {c}\n{text}"
        );
    }
    for l in text.lines() {
        let is_command = fixes.iter().any(|c| l.trim() == c);
        assert!(is_command || l.chars().count() <= 80, "{l}\n{text}");
    }
}

#[test]
fn verbose_shows_what_passed_and_ascii_without_utf8() {
    let quiet = check_text("ib-node", 80, &[]);
    let loud = check_text("ib-node", 80, &["-v"]);
    assert!(!quiet.contains("✓ gpu.count"), "{quiet}");
    assert!(
        loud.contains("✓ gpu.count: 8 of 8 GPU(s) visible"),
        "{loud}"
    );
    let healthy = check_text("plain-vm", 80, &["--verbose"]);
    assert!(healthy.contains("Why:"), "{healthy}");
    assert!(quiet.contains("-v shows each"), "{quiet}");
    // The evidence the summaries already state is left to -v (and the JSON), whole there.
    assert!(!quiet.contains("evidence:"), "{quiet}");
    assert!(
        loud.contains("evidence: devices mlx5_0, mlx5_1; memlock_hard 8388608; memlock_soft"),
        "{loud}"
    );
    assert!(
        loud.contains("uuid GPU-5f1c2a3b-0000-4000-8000-000000000003"),
        "{loud}"
    );
    let out = bin()
        .args(["check", "--facts"])
        .arg(fixture("facts/ib-node.json"))
        .env("LANG", "C")
        .env_remove("LC_ALL")
        .env_remove("LC_CTYPE")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.is_ascii(), "{text}");
    assert!(text.contains("[xx] FAIL env.socket-ifname"), "{text}");
}

#[test]
fn a_node_with_no_gpu_and_none_expected_does_not_warn_about_nccl() {
    for node in ["plain-vm", "k8s-pod"] {
        let r = check_json(node);
        let nccl: Vec<&Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] == "nccl.library")
            .collect();
        assert_eq!(nccl.len(), 1);
        assert_eq!(nccl[0]["status"], "skip", "{node}: {:#}", nccl[0]);
    }
    // Expecting GPUs brings the warning back.
    let out = bin()
        .args([
            "check",
            "--format",
            "json",
            "--nproc-per-node",
            "2",
            "--facts",
        ])
        .arg(fixture("facts/plain-vm.json"))
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    let status = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "nccl.library")
        .map(|f| f["status"].clone());
    assert_eq!(status, Some(Value::from("warn")));
}

// ------------------------------------------------------------------------- a real terminal

/// tmux, or None (a skip; a failure under `PREFLIGHT_REQUIRE_NETNS=1`, as CI runs).
fn tmux() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("tmux"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("PREFLIGHT_REQUIRE_NETNS").as_deref() == Ok("1") {
            panic!("PREFLIGHT_REQUIRE_NETNS=1 but tmux is missing (apt-get install -y tmux)");
        }
        eprintln!("skipped: needs tmux");
    }
    found
}

/// A tmux server of its own (its socket in a temp dir), killed on drop.
struct Tmux {
    tmux: PathBuf,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn new(tmux: PathBuf) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tmux.sock");
        Tmux {
            tmux,
            socket,
            _dir: dir,
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.tmux);
        c.arg("-S").arg(&self.socket).arg("-f").arg("/dev/null");
        c
    }

    /// Runs `script` in a new 80x50 window and waits (at most 60 s) until it writes `done`.
    fn run(&self, script: &str, done: &Path) {
        let out = self
            .cmd()
            .args(["new-session", "-d", "-x", "80", "-y", "50", "-s", "pf"])
            .args(["sh", "-c", script])
            .env("TERM", "xterm-256color")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let t = Instant::now();
        while !done.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the run in tmux did not finish"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(300));
    }

    /// The pane's whole history: `-J` joins lines the terminal wrapped, `-e` keeps colours.
    fn capture(&self, flags: &[&str]) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-S", "-", "-t", "pf"])
            .args(flags)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// In a real 80-column terminal, each fix command of a failing node is intact on one line:
/// those up to 80 columns on a screen line of their own; a longer one only wrapped by the
/// terminal (joined back by `capture-pane -J`, never broken by preflight). Colour is on in
/// the terminal, and off with NO_COLOR.
#[test]
fn a_real_terminal_at_80_columns_shows_every_fix_whole() {
    let Some(tmux) = tmux() else { return };
    for node in ["ib-node", "three-problems", "plain-vm"] {
        let report = check_json(node);
        let (fixes, _) = commands(&report);
        for no_color in [false, true] {
            let t = Tmux::new(tmux.clone());
            let done = t._dir.path().join("done");
            let bin_path = assert_cmd::cargo::cargo_bin("preflight");
            let script = format!(
                "env -u COLUMNS -u LC_ALL -u LC_CTYPE {} LANG=C.UTF-8 '{}' check --facts '{}'; \
                 touch '{}'; sleep 60",
                if no_color {
                    "NO_COLOR=1"
                } else {
                    "-u NO_COLOR"
                },
                bin_path.display(),
                fixture(&format!("facts/{node}.json")).display(),
                done.display()
            );
            t.run(&script, &done);
            let screen = t.capture(&[]);
            let joined = t.capture(&["-J"]);
            let ctx = || format!("--- {node} in tmux (NO_COLOR: {no_color}) ---\n{screen}");
            assert!(screen.lines().all(|l| l.chars().count() <= 80), "{}", ctx());
            for c in &fixes {
                let indented = format!("        {c}");
                if indented.chars().count() <= 80 {
                    assert!(
                        screen.lines().any(|l| l.trim_end() == indented),
                        "not on one line: {c}\n{}",
                        ctx()
                    );
                }
                assert!(
                    joined.lines().any(|l| l.trim_end() == indented),
                    "broken by preflight: {c}\n{}",
                    ctx()
                );
            }
            // Wrapped by preflight at words within 80 columns: the verdict is a screen line.
            assert!(
                screen
                    .lines()
                    .any(|l| l.starts_with("✗ do not launch: ")
                        || l.starts_with("✓ ready to launch")),
                "{}",
                ctx()
            );
            let coloured = t.capture(&["-e"]).contains('\u{1b}');
            assert_eq!(coloured, !no_color, "{}", ctx());
            drop(t);
        }
    }
}
