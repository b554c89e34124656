//! The demo a newcomer runs first, `examples/two-hosts-netns.sh --firewall`, run as written:
//! its two test hosts have their own hostnames (UTS namespaces) and /etc/hosts, so the report
//! names two distinct hosts, as two real nodes would (issue 37: both were called `vm`).

use crate::common::repo;
use std::process::Command;

#[test]
fn the_demo_names_its_two_hosts_apart() {
    if !crate::netns::usable(&["ip", "unshare", "hostname", "iptables", "timeout"]) {
        return;
    }
    let preflight = env!("CARGO_BIN_EXE_preflight");
    // Issue 55 (8): the demo keeps no history, whatever store the environment names.
    let store = tempfile::tempdir().unwrap();
    let history = store.path().join("history.db");
    let out = Command::new("timeout")
        .arg("150")
        .arg("bash")
        .arg(repo("examples/two-hosts-netns.sh"))
        .arg("--firewall")
        .env("PREFLIGHT", preflight)
        .env("PREFLIGHT_HISTORY", &history)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .output()
        .expect("the demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The firewalled host fails: rank 0 exits 1 and says so.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(stdout.contains("rank 0 exited 1"), "{text}");
    // Two hostnames, one per host, each where a person reads it.
    assert!(stdout.contains("this is rank 0 (demo-a)"), "{text}");
    assert!(stdout.contains("rank 1 (demo-b)"), "{text}");
    assert!(
        stdout.contains("Train now on 1 of 2 nodes: demo-a"),
        "{text}"
    );
    assert!(stdout.contains("Leave out 1: demo-b"), "{text}");
    let names: std::collections::BTreeSet<&str> = stdout
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("demo-") && w.len() == 6)
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["demo-a", "demo-b"],
        "{text}"
    );
    // The script left nothing behind: no history store either.
    assert!(!history.exists(), "the demo wrote {}", history.display());
    for ns in ["pf-demo-a", "pf-demo-b"] {
        assert!(
            !std::path::Path::new("/etc/netns").join(ns).exists(),
            "/etc/netns/{ns} left behind"
        );
        assert!(
            !std::path::Path::new("/run/netns").join(ns).exists(),
            "namespace {ns} left behind"
        );
    }
}

/// Issue 55 (8): without a preflight to run, the demo says how to build one in this checkout.
#[test]
fn the_demo_without_preflight_says_how_to_build_it() {
    if !crate::netns::usable(&["ip"]) {
        return;
    }
    let out = Command::new("bash")
        .arg(repo("examples/two-hosts-netns.sh"))
        .env("PREFLIGHT", "/nonexistent/preflight")
        .output()
        .expect("the demo runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`cargo build --release`"), "{err}");
    assert!(err.contains("target/release/preflight"), "{err}");
}
