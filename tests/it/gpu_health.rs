//! GPU node health (issue 22) through the real CLI: fixture node trees whose NVML snapshot,
//! kernel log and sysfs stand in for the machine (`--root`), `--xid-window`, `explain`, and
//! the terminal report of a saved HGX node with faults as a person reads it (snapshot).

use crate::common::{bin, fixture, json_of};
use serde_json::Value;

/// `preflight check --root tests/fixtures/gpu/<case> --format json`.
fn check_tree(case: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let out = bin()
        .args([
            "check",
            "--format",
            "json",
            "--master-port",
            "29500",
            "--root",
        ])
        .arg(fixture(&format!("gpu/{case}")))
        .args(extra)
        .output()
        .unwrap();
    (out.status.code(), json_of(&out.stdout))
}

/// The findings of `id` in a report.
fn with_id<'a>(r: &'a Value, id: &str) -> Vec<&'a Value> {
    r["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["id"] == id).collect())
        .unwrap_or_default()
}

fn worst(r: &Value, id: &str) -> String {
    let order = ["skip", "pass", "warn", "fail", "error"];
    with_id(r, id)
        .iter()
        .filter_map(|f| f["status"].as_str())
        .max_by_key(|s| order.iter().position(|o| o == s))
        .unwrap_or_else(|| panic!("no {id} in {:#}", r["findings"]))
        .to_string()
}

#[test]
fn every_fixture_case_fires_its_finding_through_the_cli() {
    let cases = [
        ("x8-at-p0", "gpu.pcie-link", "warn"),
        ("x8-at-p8", "gpu.pcie-link", "warn"),
        ("gen1-at-p8", "gpu.pcie-link", "pass"),
        ("xid79-recent", "gpu.xid", "fail"),
        ("xid79-old", "gpu.xid", "pass"),
        ("row-remap-pending", "gpu.row-remap", "fail"),
        ("nvlink-down", "gpu.nvlink", "fail"),
        ("no-fabric-manager", "gpu.fabric-manager", "fail"),
        ("ib-no-peermem", "gpu.peermem", "warn"),
        ("acs-bridge", "pcie.acs", "warn"),
        ("acs-in-vm", "pcie.acs", "skip"),
        ("hw-slowdown", "gpu.clocks", "warn"),
    ];
    for (case, id, status) in cases {
        let (_, r) = check_tree(case, &[]);
        assert_eq!(worst(&r, id), status, "{case}: {:#?}", with_id(&r, id));
    }
    let (code, r) = check_tree("healthy-h100", &[]);
    assert!(matches!(code, Some(0) | Some(1)), "{code:?}");
    for id in [
        "gpu.pcie-link",
        "gpu.pcie-replay",
        "gpu.xid",
        "gpu.ecc",
        "gpu.row-remap",
        "gpu.nvlink",
        "gpu.fabric-manager",
        "gpu.peermem",
        "pcie.acs",
        "gpu.clocks",
        "gpu.persistence",
    ] {
        assert_eq!(worst(&r, id), "pass", "{id}: {:#?}", with_id(&r, id));
    }
    // The bandwidth is never measured on a fixture tree's GPUs, and says why.
    let bw = with_id(&r, "gpu.bandwidth");
    assert_eq!(bw[0]["status"], "skip");
    assert!(
        bw[0]["summary"]
            .as_str()
            .unwrap_or("")
            .contains("fixture tree"),
        "{bw:#?}"
    );
    // The facts carry what was read, per GPU and per node.
    let gpu = &r["nodes"][0]["facts"]["gpu"];
    assert_eq!(gpu["gpus"][1]["health"]["pcie"]["max_width"], 16);
    assert_eq!(gpu["node_health"]["nvswitches"], 4);
}

#[test]
fn xid_window_flag_widens_and_narrows_what_counts() {
    let (_, r) = check_tree("xid79-old", &["--xid-window", "6h"]);
    assert_eq!(worst(&r, "gpu.xid"), "fail");
    let (_, r) = check_tree("xid79-recent", &["--xid-window", "5m"]);
    assert_eq!(worst(&r, "gpu.xid"), "pass");
    let out = bin()
        .args(["check", "--xid-window", "0h"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a window between 1s and 30d"), "{err}");
}

#[test]
fn explain_describes_every_new_id() {
    for id in [
        "gpu.pcie-link",
        "gpu.pcie-replay",
        "gpu.xid",
        "gpu.ecc",
        "gpu.row-remap",
        "gpu.retired-pages",
        "gpu.nvlink",
        "gpu.fabric-manager",
        "gpu.peermem",
        "pcie.acs",
        "gpu.clocks",
        "gpu.persistence",
        "gpu.bandwidth",
        "cluster.gpu-health",
    ] {
        let out = bin().args(["explain", id]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(id), "{id}: {text}");
    }
}

#[test]
fn saved_hgx_node_with_faults_reads_as_a_person_sees_it() {
    let out = bin()
        .args(["check", "--facts"])
        .arg(fixture("facts/gpu-hgx-faults.json"))
        .env("COLUMNS", "80")
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_CTYPE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap().replace(
        concat!("preflight ", env!("CARGO_PKG_VERSION"), " "),
        "preflight [version] ",
    );
    insta::assert_snapshot!("gpu_hgx_faults_80cols", text);
}
