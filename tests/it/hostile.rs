//! Hold under hostile peers: text from another node or a saved report is escaped wherever a
//! person reads it and shown in linear time.

use crate::common::{bin, fixture, json_of};
use preflight::render::Style;
use preflight_checks::model::Report;
use serde_json::Value;
use std::io::{Read, Write};
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
                color: false,
                width,
            };
            let text = preflight::render::table::render_for_rank(&report, style, rank);
            assert!(unsafe_chars(&text).is_empty(), "rank {rank}:\n{text}");
            assert!(
                text.contains("x\\u{1b}[31mred\\u{1b}]0;pwned\\u{7}"),
                "{text}"
            );
            assert!(
                text.contains("\\u{202e}gnp.exe\\u{2066}\\u{d}\\u{a}\\u{9}"),
                "{text}"
            );
        }
    }
    // With colour on, the only ESC bytes are comfy-table's own SGR sequences.
    let style = Style {
        color: true,
        width: 120,
    };
    let text = preflight::render::table::render(&report, style);
    assert!(!text.contains("\u{1b}]"), "an OSC sequence got through");
    assert!(
        !text.contains("\u{1b}[31mred"),
        "a peer's colour got through"
    );
    // JUnit: XML keeps line breaks and tabs in element content as they are (the rest of a
    // peer's CR, LF and tab are character references); everything else is escaped.
    let xml = preflight::render::junit::render(&report);
    assert!(unsafe_chars(&xml).iter().all(|c| *c == '\t'), "{xml}");
    assert!(
        xml.contains("\\u{9b}2J\\u{7f}\\u{202e}gnp.exe\\u{2066}"),
        "{xml}"
    );
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
    assert!(err.contains("x\\u{1b}[31mred"), "{err}");
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
    assert!(err.contains("x\\u{1b}[31mred"), "{err}");
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
    let text = preflight::render::table::render_for_rank(report, Style::plain(), rank);
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
    assert!(text.contains(marker), "{}", &text[..4000.min(text.len())]);
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
        // Rank 0's node table shows 2 KiB of each (wrapped in its cell), not 1 MiB.
        assert!(text.len() < 100_000, "rank {rank}: {} bytes", text.len());
        assert!(rank != 0 || text.contains("┆ hhhhhhhh"), "{text}");
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
