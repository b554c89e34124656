//! Hold under hostile peers and hostile files: text from another node or a saved report is
//! escaped wherever a person reads it and shown in linear time; `preflight launch` builds
//! commands from structured fields and never runs what a report smuggles in; input files must
//! be regular files under a cap, and a FIFO or a device never hangs the tool.

use crate::common::{INHERITED_ENV_TO_CLEAR, bin, fixture, json_of};
use preflight::render::Style;
use preflight_checks::model::Report;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// ESC sequences (colour, window title, OSC 8 link), BEL, C1 CSI, DEL and bidi overrides.
const HOSTILE: &str = "x\u{1b}[31mred\u{1b}]0;pwned\u{7}\u{1b}]8;;http://e/\u{1b}\\\u{9b}2J\u{7f}\u{202e}gnp.exe\u{2066}\r\n\t";

fn report_value(name: &str) -> Value {
    let path = fixture(&format!("reports/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn report_of(v: &Value) -> Report {
    serde_json::from_value(v.clone()).expect("still a report")
}

/// Control characters other than the renderer's own newlines, and bidi overrides.
fn unsafe_chars(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| *c != '\n' && preflight::shell::is_control(*c))
        .collect()
}

/// The healthy 3-node report with hostile text in every field the table shows.
fn hostile_cluster_report() -> Report {
    let mut v = report_value("cluster-3-healthy");
    for n in v["nodes"].as_array_mut().unwrap() {
        n["hostname"] = HOSTILE.into();
        let f = &mut n["facts"];
        f["hostname"] = HOSTILE.into();
        f["gpu"]["driver_version"] = HOSTILE.into();
        f["nccl"]["version"] = HOSTILE.into();
        for i in f["net"]["interfaces"].as_array_mut().unwrap() {
            i["name"] = HOSTILE.into();
        }
    }
    for l in v["links"].as_array_mut().unwrap() {
        l["address"] = HOSTILE.into();
    }
    for f in v["findings"].as_array_mut().unwrap() {
        f["status"] = "fail".into();
        f["subject"] = HOSTILE.into();
        f["summary"] = HOSTILE.into();
        f["evidence"] = serde_json::json!({ HOSTILE: HOSTILE, "list": [HOSTILE, 1] });
        f["fix"] = serde_json::json!({ "hint": HOSTILE, "commands": [HOSTILE] });
    }
    let rec = &mut v["recommendation"];
    rec["env"][HOSTILE] = HOSTILE.into();
    rec["node_env"]["1"][HOSTILE] = HOSTILE.into();
    rec["reasons"] = serde_json::json!([HOSTILE]);
    rec["standalone"] = HOSTILE.into();
    for l in rec["launch"].as_array_mut().unwrap() {
        l["command"] = HOSTILE.into();
    }
    for c in v["collectives"].as_array_mut().unwrap() {
        c["network"] = HOSTILE.into();
        c["error"] = HOSTILE.into();
        c["env"][HOSTILE] = HOSTILE.into();
        c["transport"] = HOSTILE.into();
    }
    report_of(&v)
}

#[test]
fn table_and_junit_escape_control_and_bidi_characters_from_peers() {
    let report = hostile_cluster_report();
    for rank in [0, 1] {
        for width in [80, 120] {
            let style = Style {
                width,
                verbose: true,
                ..Style::plain()
            };
            let text = preflight::render::doctor::render_for_rank(&report, style, rank);
            assert!(unsafe_chars(&text).is_empty(), "rank {rank}:\n{text}");
            assert!(text.contains(r"x\e[31mred\e]0;pwned\x07"), "{text}");
            assert!(text.contains(r"\u202egnp.exe\u2066\r\n\t"), "{text}");
        }
    }
    // With colour on, the only ESC bytes are comfy-table's own SGR sequences.
    let style = Style {
        color: true,
        width: 120,
        verbose: true,
        ..Style::plain()
    };
    let text = preflight::render::doctor::render(&report, style);
    assert!(!text.contains("\u{1b}]"), "an OSC sequence got through");
    assert!(
        !text.contains("\u{1b}[31mred"),
        "a peer's colour got through"
    );
    // JUnit: XML keeps line breaks and tabs in element content as they are (the rest of a
    // peer's CR, LF and tab are character references); everything else is escaped.
    let xml = preflight::render::junit::render(&report);
    assert!(unsafe_chars(&xml).iter().all(|c| *c == '\t'), "{xml}");
    assert!(xml.contains(r"\u009b2J\x7f\u202egnp.exe\u2066"), "{xml}");
    roxmltree::Document::parse(&xml).expect("still XML 1.0");
    // JSON is serde's: it escapes control characters itself and keeps the exact value.
    let json = preflight::render::json::render(&report);
    assert!(!json.chars().any(|c| c < ' ' && c != '\n'));
    assert_eq!(
        json_of(json.as_bytes())["nodes"][0]["hostname"],
        Value::from(HOSTILE)
    );
}

#[test]
fn serde_errors_quoting_a_file_are_escaped_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let mut facts: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("facts/ib-node.json")).unwrap())
            .unwrap();
    // An unknown enum variant: serde's message quotes it as it is.
    facts["net"]["interfaces"][0]["kind"] = HOSTILE.into();
    let path = dir.path().join("facts.json");
    std::fs::write(&path, facts.to_string()).unwrap();
    let out = bin()
        .args(["check", "--facts"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown variant"), "{err}");
    assert!(err.contains(r"x\e[31mred"), "{err}");
    assert_eq!(unsafe_chars(&err), Vec::<char>::new(), "{err}");
}

/// A frame from an unauthenticated peer: its text reaches rank 0's log escaped.
#[test]
fn escape_sequences_in_a_peers_frame_do_not_reach_stderr() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("preflight"))
        .args(["cluster", "--no-gpu", "--quick", "--allreduce", "off"])
        .args([
            "--nnodes",
            "2",
            "--node-rank",
            "0",
            "--master-addr",
            "127.0.0.1",
        ])
        .args(["--master-port", &port.to_string(), "--timeout", "3"])
        .args(["--format", "json"])
        .env("NO_COLOR", "1")
        .env_remove("PREFLIGHT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stream = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("rank 0 never listened on {port}: {e}"),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The challenge (u32 length, then JSON), then our garbage hello.
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).unwrap();
    let hello = serde_json::json!({ "type": HOSTILE }).to_string();
    stream
        .write_all(&(hello.len() as u32).to_be_bytes())
        .unwrap();
    stream.write_all(hello.as_bytes()).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    child.wait().unwrap();
    assert!(err.contains("dropped connection from"), "{err}");
    assert!(err.contains(r"x\e[31mred"), "{err}");
    assert_eq!(unsafe_chars(&err), Vec::<char>::new(), "{err}");
}

// ---------------------------------------------------------------- linear time

/// A node report from `facts` (edited by `edit`) through the real `check --format json`.
fn node_report(edit: impl FnOnce(&mut Value)) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let mut facts: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("facts/ib-node.json")).unwrap())
            .unwrap();
    edit(&mut facts);
    let path = dir.path().join("facts.json");
    std::fs::write(&path, facts.to_string()).unwrap();
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(&path)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).expect("a report")
}

/// Renders the table and returns it with the time it took.
fn timed_table(report: &Report, rank: u32) -> (String, Duration) {
    let t = Instant::now();
    let text = preflight::render::doctor::render_for_rank(report, Style::plain(), rank);
    (text, t.elapsed())
}

/// Before: a 1 MiB hostname took over 120 s and 32k CUDA_VISIBLE_DEVICES entries 4.9 s
/// (release): comfy-table wraps an unbroken word by copying its rest once per line.
#[test]
fn huge_hostname_and_visible_devices_render_in_linear_time() {
    const LIMIT: Duration = Duration::from_secs(2);
    let host = "h".repeat(1 << 20);
    let marker = "… (1048576 bytes, shown 2048)";

    let report = node_report(|f| f["hostname"] = host.clone().into());
    let (text, took) = timed_table(&report, 0);
    assert!(took < LIMIT, "1 MiB hostname, node table: {took:?}");
    // (The marker is prose: the report may wrap it at its space.)
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains(marker), "{}", &text[..4000.min(text.len())]);
    assert!(text.len() < 200_000, "{} bytes", text.len());
    // JSON keeps everything.
    let json = preflight::render::json::render(&report);
    assert!(json.contains(&host));

    let mut v = report_value("cluster-3-healthy");
    for n in v["nodes"].as_array_mut().unwrap() {
        n["hostname"] = host.clone().into();
    }
    let report = report_of(&v);
    for rank in [0, 1] {
        let (text, took) = timed_table(&report, rank);
        assert!(
            took < LIMIT,
            "1 MiB hostnames, cluster rank {rank}: {took:?}"
        );
        // Rank 0's node table folds the three alike nodes into one row: the hostlist of one
        // name too long to print is `1 host`, and the text stays small, not 1 MiB.
        assert!(text.len() < 100_000, "rank {rank}: {} bytes", text.len());
        assert!(rank != 0 || text.contains("┆ 1 host (0-2)"), "{text}");
    }

    let cvd: Vec<String> = (0..32768).map(|i| (i % 8).to_string()).collect();
    let cvd = cvd.join(",");
    let report = node_report(|f| f["env"]["CUDA_VISIBLE_DEVICES"] = cvd.clone().into());
    let (text, took) = timed_table(&report, 0);
    assert!(took < LIMIT, "32k CUDA_VISIBLE_DEVICES entries: {took:?}");
    // The value (65535 bytes, in the summary and the evidence) is cut in the table.
    assert!(text.len() < 100_000, "{} bytes", text.len());
    assert!(preflight::render::json::render(&report).contains(&cvd));
}

// ---------------------------------------------------------------- preflight launch

/// Payloads that would run `touch FILE` if pasted into a shell unquoted.
fn payloads(file: &Path) -> Vec<(&'static str, String)> {
    let f = file.display();
    vec![
        ("semicolon", format!("x; touch {f} #")),
        ("command substitution", format!("$(touch {f})")),
        ("backticks", format!("`touch {f}`")),
        ("newline", format!("x\ntouch {f}")),
        ("and", format!("x && touch {f}")),
        ("quote break", format!("x' ; touch {f} ; echo '")),
        ("unbalanced quote", format!("x ' ; touch {f}")),
    ]
}

/// What `preflight launch` does with the edited report in each format.
enum Launched {
    Ok(Vec<(String, String)>),
    Refused(String),
}

fn launch_all(report: &Value, dir: &Path) -> Launched {
    let path = dir.join("report.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let mut outs = Vec::new();
    for format in ["torchrun", "sbatch", "k8s-env"] {
        let out = bin()
            .args(["launch", "--format", format, "--report"])
            .arg(&path)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        match out.status.code() {
            Some(1) | Some(0) => {
                outs.push((format.to_string(), String::from_utf8(out.stdout).unwrap()))
            }
            Some(2) => {
                assert!(out.stdout.is_empty(), "{format}: refused but printed");
                return Launched::Refused(err);
            }
            other => panic!("{format}: exit {other:?}: {err}"),
        }
    }
    Launched::Ok(outs)
}

fn bash(dir: &Path, script: &str) -> std::process::Output {
    std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The launch text parses, and runs (torchrun a shell function that prints its arguments, and
/// for sbatch's `exec torchrun` a script doing the same; srun runs its command here) without
/// creating `file`; the k8s list is still only name/value pairs.
fn assert_inert(outs: &[(String, String)], dir: &Path, file: &Path, what: &str) {
    let shim_dir = dir.join("bin");
    std::fs::create_dir_all(&shim_dir).unwrap();
    let shim = shim_dir.join("torchrun");
    std::fs::write(
        &shim,
        "#!/bin/bash\nprintf '[%s]' \"$@\" >> args.txt; echo >> args.txt\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (format, text) in outs {
        assert!(unsafe_chars(text).is_empty(), "{what}, {format}:\n{text}");
        let saved = dir.join(format!("launch.{format}"));
        std::fs::write(&saved, text).unwrap();
        match format.as_str() {
            "torchrun" | "sbatch" => {
                let parse = bash(dir, &format!("bash -n {}", saved.display()));
                assert!(
                    parse.status.success(),
                    "{what}, {format}: bash -n failed:\n{text}"
                );
                let shims = format!(
                    "export PATH={}:$PATH SLURMD_NODENAME=gpu01; \
                     torchrun() {{ printf '[%s]' \"$@\" >> args.txt; echo >> args.txt; }}; \
                     srun() {{ shift; \"$@\"; }}",
                    shim_dir.display()
                );
                let run = bash(dir, &format!("{shims}; source {}", saved.display()));
                let args = std::fs::read_to_string(dir.join("args.txt")).unwrap_or_default();
                assert!(
                    run.status.success(),
                    "{what}, {format}: {}\n{text}",
                    String::from_utf8_lossy(&run.stderr)
                );
                assert!(args.contains("[--master-port="), "{what}, {format}: {args}");
                let _ = std::fs::remove_file(dir.join("args.txt"));
            }
            _ => {
                if let Some(list) = yaml_list(&saved) {
                    for e in &list {
                        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
                        assert_eq!(keys, ["name", "value"], "{what}: {text}");
                        assert!(e["value"].is_string(), "{what}: {text}");
                    }
                }
            }
        }
        assert!(!file.exists(), "{what}, {format} ran the payload:\n{text}");
    }
}

/// The k8s-env text as a JSON list through python3's yaml module; None when it is missing.
fn yaml_list(path: &Path) -> Option<Vec<Value>> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(path)
        .output()
        .ok()?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("No module named"), "not YAML: {err}");
        eprintln!("skipped: python3 has no yaml module");
        return None;
    }
    Some(
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .expect("a list")
            .clone(),
    )
}

#[test]
fn launch_never_runs_what_a_report_smuggles_in() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("PWNED");
    let base = report_value("cluster-2-nodes");
    for (name, payload) in payloads(&file) {
        // The command: split into shell words and quoted again; any payload is arguments.
        let mut v = base.clone();
        for l in v["recommendation"]["launch"].as_array_mut().unwrap() {
            let c = l["command"].as_str().unwrap().to_string();
            l["command"] = format!("{c} {payload}").into();
        }
        let what = format!("{name} in the command");
        match launch_all(&v, dir.path()) {
            Launched::Ok(outs) => {
                assert_inert(&outs, dir.path(), &file, &what);
                // The words reach torchrun as arguments (the newline only separates words).
                let run = &outs[0].1;
                assert!(run.contains("train.py --config 'my run.yaml' "), "{run}");
            }
            Launched::Refused(err) => {
                // An unbalanced quote does not split: refused, naming the field.
                assert_eq!(name, "unbalanced quote", "{what}: {err}");
                assert!(err.contains("recommendation.launch[0].command"), "{err}");
                assert!(err.contains("does not split into shell words"), "{err}");
            }
        }

        // An env value: always quoted; a control character is refused.
        let mut v = base.clone();
        v["recommendation"]["env"]["NCCL_IB_HCA"] = payload.clone().into();
        v["recommendation"]["node_env"]["1"]["NCCL_DEBUG"] = payload.clone().into();
        let what = format!("{name} in an env value");
        match launch_all(&v, dir.path()) {
            Launched::Ok(outs) => {
                assert_inert(&outs, dir.path(), &file, &what);
                let k8s = yaml_list(&dir.path().join("launch.k8s-env"));
                if let Some(list) = k8s {
                    assert!(
                        // The kubelet turns `$$` back into `$` (and would expand a bare `$(`).
                        list.iter().any(|e| e["name"] == "NCCL_IB_HCA"
                            && e["value"].as_str().map(|v| v.replace("$$", "$"))
                                == Some(payload.clone())),
                        "{list:?}"
                    );
                }
            }
            Launched::Refused(err) => {
                assert_eq!(name, "newline", "{what}: {err}");
                assert!(err.contains("recommendation.env.NCCL_IB_HCA"), "{err}");
                assert!(err.contains("control character"), "{err}");
            }
        }

        // A hostname and the master address go in unquoted places: refused.
        let mut v = base.clone();
        v["nodes"][1]["hostname"] = payload.clone().into();
        let Launched::Refused(err) = launch_all(&v, dir.path()) else {
            panic!("{name} in a hostname was accepted");
        };
        assert!(err.contains("the hostname of rank 1"), "{err}");
        assert!(err.contains("preflight cluster"), "{err}");
        let mut v = base.clone();
        v["recommendation"]["master_addr"] = payload.clone().into();
        let Launched::Refused(err) = launch_all(&v, dir.path()) else {
            panic!("{name} in the master address was accepted");
        };
        assert!(err.contains("recommendation.master_addr"), "{err}");
        assert!(unsafe_chars(&err).is_empty(), "{err}");
        assert!(!file.exists());
    }
    // A variable name that is not one is refused too.
    let mut v = base.clone();
    v["recommendation"]["env"]["A;touch X"] = "1".into();
    let Launched::Refused(err) = launch_all(&v, dir.path()) else {
        panic!("a bad variable name was accepted");
    };
    assert!(
        err.contains("recommendation.env") && err.contains("not a shell variable name"),
        "{err}"
    );
}

// ---------------------------------------------------------------- input files

/// Runs the binary, failing when it takes more than a few seconds (a FIFO would hang it).
fn quick(cmd: &mut assert_cmd::Command) -> std::process::Output {
    let t = Instant::now();
    let out = cmd.timeout(Duration::from_secs(10)).output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}: {}",
        t.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn mkfifo(path: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// /dev/zero, a FIFO, a directory and a sparse file over the cap, each with what it is.
fn bad_inputs(dir: &Path) -> Vec<(PathBuf, String)> {
    let fifo = dir.join("fifo.json");
    mkfifo(&fifo);
    let sub = dir.join("a-directory.json");
    std::fs::create_dir(&sub).unwrap();
    let big = dir.join("big.json");
    let size = 3u64 << 30;
    std::fs::File::create(&big).unwrap().set_len(size).unwrap();
    vec![
        (
            "/dev/zero".into(),
            "it is a character device, not a regular file".into(),
        ),
        (fifo, "it is a FIFO (named pipe), not a regular file".into()),
        (sub, "it is a directory, not a regular file".into()),
        (big, format!("it is {size} bytes, over the")),
    ]
}

#[test]
fn facts_and_report_files_must_be_regular_and_under_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    for (path, what) in bad_inputs(dir.path()) {
        let out = quick(bin().args(["check", "--facts"]).arg(&path));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        let want = format!("cannot read facts file {}: {what}", path.display());
        assert!(err.contains(&want), "{err}");
        assert!(!what.ends_with("over the") || err.contains("over the 16 MiB limit"));
        assert!(err.contains("preflight facts -o FILE"), "{err}");

        let out = quick(bin().args(["launch", "--report"]).arg(&path));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        let want = format!("cannot read the report {}: {what}", path.display());
        assert!(err.contains(&want), "{err}");
        assert!(!what.ends_with("over the") || err.contains("over the 512 MiB limit"));
        assert!(err.contains("preflight cluster --format json -o"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_fifo_in_the_root_tree_is_reported_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(&fixture("plain-vm"), &root);
    for p in ["proc/mounts", "etc/hosts"] {
        let at = root.join(p);
        let _ = std::fs::remove_file(&at);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        mkfifo(&at);
    }
    let out = quick(
        bin()
            .args(["check", "--no-gpu", "--format", "json", "--root"])
            .arg(&root),
    );
    let report = json_of(&out.stdout);
    let text = report.to_string();
    for p in ["proc/mounts", "etc/hosts"] {
        let want = format!(
            "{}: it is a FIFO (named pipe), not a regular file",
            root.join(p).display()
        );
        assert!(text.contains(&want), "{p}: {text}");
    }
    assert_eq!(
        out.status.code(),
        Some(1),
        "an error finding fails the check"
    );
    assert!(
        text.contains("preflight reads only regular files"),
        "{text}"
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if t.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Python that runs its arguments as its own child and, when it ends, appends the child's
/// peak RSS (the kernel's `ru_maxrss` from `wait4`) to stderr. A child forked from this small
/// interpreter starts from its few MiB, not from the test binary's RSS (which a child of the
/// test would inherit as its high-water mark until exec). Exact for a run of milliseconds,
/// where sampling `/proc` could miss the peak.
const MEASURE: &str = r#"
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
signal.signal(signal.SIGALRM, lambda *a: os.kill(pid, signal.SIGKILL))
signal.alarm(int(sys.argv[1]))
while True:
    try:
        _, status, ru = os.wait4(pid, 0)
        break
    except InterruptedError:
        pass
sys.stderr.write("\npreflight-test-peak-rss-kib=%d\n" % ru.ru_maxrss)
sys.stderr.flush()
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// Where the measured peak lands in stderr.
fn peak_rss_mib(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("preflight-test-peak-rss-kib="))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
}

/// Runs preflight with `args` to its end under [`MEASURE`] (killed after `limit_s`): exit code,
/// stderr, peak RSS in MiB and time.
fn run_measured(args: &[&str], limit_s: u64) -> (Option<i32>, String, f64, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(MEASURE)
        .arg(limit_s.to_string())
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args(args);
    for v in INHERITED_ENV_TO_CLEAR {
        cmd.env_remove(v);
    }
    let out = cmd
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let peak = peak_rss_mib(&err).expect("peak");
    (out.status.code(), err, peak, took)
}

/// `[]`, `{"schema":1}`, a report, any other object: `check --facts` says what the file is
/// and exits 2; facts files with the schema, and those of older releases without it, load.
#[test]
fn check_facts_accepts_only_a_facts_document() {
    let dir = tempfile::tempdir().unwrap();
    let report = fixture("reports/cluster-2-nodes.json");
    let cases = [
        (
            "list.json",
            "[]".to_string(),
            "it is a JSON list of 0 items",
        ),
        (
            "schema1.json",
            r#"{"schema":1}"#.into(),
            "with schema 1, not preflight.facts.v1",
        ),
        (
            "other.json",
            r#"{"name":"x"}"#.into(),
            "without a facts schema, hostname or net.interfaces (keys: name)",
        ),
        ("string.json", r#""facts""#.into(), "it is a JSON string"),
        (
            "report.json",
            std::fs::read_to_string(&report).unwrap(),
            "it is a preflight cluster report (schema preflight.report.v1)",
        ),
    ];
    for (name, text, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = quick(bin().args(["check", "--facts"]).arg(&path));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains("is not a preflight facts file"),
            "{name}: {err}"
        );
        assert!(err.contains(says), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}");
    }
    // What `preflight facts` writes carries the schema and loads; an older file without it too.
    let fresh = dir.path().join("fresh.json");
    let out = quick(bin().args(["facts", "--no-gpu", "-o"]).arg(&fresh));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&fresh).unwrap()).unwrap();
    assert_eq!(v["schema"], "preflight.facts.v1");
    for path in [fresh, fixture("facts/plain-vm.json")] {
        let out = quick(bin().args(["check", "--format=json", "--facts"]).arg(&path));
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Local files within their byte caps but over their budgets: 2 million empty interfaces in a
/// 6 MiB facts file, a 60 MiB one (over the 16 MiB cap), a 60 MiB report of 20 million empty
/// links. Each is refused with exit 2 naming the limit, within seconds, under 256 MiB.
#[test]
fn local_files_over_their_budget_are_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let empties = |head: &str, n: usize, tail: &str| {
        let mut t = String::with_capacity(head.len() + 3 * n + tail.len());
        t.push_str(head);
        for i in 0..n {
            t.push_str(if i == 0 { "{}" } else { ",{}" });
        }
        t.push_str(tail);
        t
    };
    let facts6 = dir.path().join("facts-6m.json");
    std::fs::write(
        &facts6,
        empties(r#"{"hostname":"x","net":{"interfaces":["#, 2_000_000, "]}}"),
    )
    .unwrap();
    let facts60 = dir.path().join("facts-60m.json");
    std::fs::write(
        &facts60,
        empties(
            r#"{"hostname":"x","net":{"interfaces":["#,
            20_000_000,
            "]}}",
        ),
    )
    .unwrap();
    let report60 = dir.path().join("report-60m.json");
    std::fs::write(
        &report60,
        empties(
            r#"{"schema":"preflight.report.v1","mode":"cluster","links":["#,
            20_000_000,
            "]}",
        ),
    )
    .unwrap();
    let cases: [(&[&str], &Path, &str); 3] = [
        (
            &["check", "--facts"],
            &facts6,
            "a list or object of more than 4096 items at net.interfaces",
        ),
        (&["check", "--facts"], &facts60, "over the 16 MiB limit"),
        (&["render"], &report60, "more than 4194304 items at links"),
    ];
    let mut results = Vec::new();
    for (args, path, says) in cases {
        let mut all: Vec<&str> = args.to_vec();
        all.push(path.to_str().unwrap());
        let (code, err, peak, took) = run_measured(&all, 60);
        eprintln!(
            "{} {}: exit {code:?}, peak RSS {peak:.1} MiB, {took:?}",
            args[0],
            path.display()
        );
        results.push((code, err, says, peak, took, path));
    }
    for (code, err, says, peak, took, path) in results {
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(peak < 256.0, "{} peaked at {peak:.1} MiB", path.display());
        assert!(took < Duration::from_secs(20), "{took:?}");
    }
}
