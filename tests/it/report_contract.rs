//! The report as CI reads it: the committed JSON Schema, each finding's action, JUnit and CTRF
//! output (CTRF validated against its published schema), the finding catalog (every emitted id
//! explained, README's table generated from it) and `preflight explain`.

use preflight_checks::catalog;
use preflight_checks::core::FindingId;
use preflight_checks::model::{
    CollectiveResult, CollectiveRow, Finding, Fix, LaunchCommand, LinkOutcome, LinkResult, Mode,
    NodeEntry, NodeFacts, Recommendation, Report, SCHEMA, Status, Tool, overall_status,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FACTS: [&str; 5] = [
    "ib-node",
    "docker-bond-host",
    "k8s-pod",
    "plain-vm",
    "roce-node",
];

use crate::common::bin;

fn root() -> PathBuf {
    crate::common::repo("")
}

fn facts_fixture(name: &str) -> PathBuf {
    root().join(format!("tests/fixtures/facts/{name}.json"))
}

fn check_output(facts: &Path, format: &str) -> std::process::Output {
    bin()
        .args(["check", "--format", format, "--facts"])
        .arg(facts)
        .output()
        .unwrap()
}

// ------------------------------------------------------------------ finding ids vs the catalog

/// Source text without `#[cfg(test)]` modules (tests build findings with made-up ids).
fn non_test_source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Every string literal in `text`, in order (no escapes are needed for ids).
fn string_literals(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else { break };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

/// Ids the code can emit: literal first arguments of `Finding::new(`, consts and `let`s they
/// name, and id-shaped consts. A first argument that names neither (a function parameter)
/// counts every id-shaped literal of that file.
fn emitted_ids() -> (BTreeMap<String, String>, Vec<String>) {
    // A finding takes a `FindingId` (the compiler checks it), and a `FindingId` is made only in
    // a concern's `ids.rs`: every id the code can emit is one of those constants.
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("checks/src"), &mut files);
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut unresolved = Vec::new();
    for path in files {
        let text = non_test_source(&path);
        let rel = path
            .strip_prefix(root())
            .unwrap_or(&path)
            .display()
            .to_string();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name == "tests.rs" || name.ends_with("_tests.rs") || name.ends_with("_test.rs") {
            continue;
        }
        let in_ids_file = name == "ids.rs";
        for (at, _) in text.match_indices("FindingId::new(") {
            let arg = text[at + "FindingId::new(".len()..].trim_start();
            let line = text[..at].lines().count() + 1;
            match string_literals(arg).first() {
                Some(lit) if in_ids_file && arg.starts_with('"') => {
                    ids.insert(lit.to_string(), format!("{rel}:{line}"));
                }
                _ if rel.ends_with("core/id.rs") => {}
                _ => unresolved.push(format!(
                    "{rel}:{line}: a FindingId made outside a concern's ids.rs"
                )),
            }
        }
    }
    (ids, unresolved)
}

#[test]
fn every_emitted_finding_id_is_in_the_catalog() {
    let (ids, unresolved) = emitted_ids();
    assert!(
        unresolved.is_empty(),
        "finding ids are constants in a concern's ids.rs:\n{}",
        unresolved.join("\n")
    );
    // The scan must see the code: these ids are emitted as literals, consts and `let`s.
    for known in [
        "cluster.rendezvous",
        "port.in-use",
        "net.hostname-loopback",
        "gpu.visible-devices",
        "env.master",
    ] {
        assert!(ids.contains_key(known), "scan missed {known}: {ids:?}");
    }
    let missing: Vec<String> = ids
        .iter()
        .filter(|(id, _)| catalog::get(id).is_none())
        .map(|(id, at)| format!("{id} (emitted at {at})"))
        .collect();
    assert!(
        missing.is_empty(),
        "finding ids missing from checks/src/catalog.rs (add an entry, then paste the README \
         table the readme test prints):\n{}",
        missing.join("\n")
    );
}

/// The files that carry the finding-id table generated from the catalog: the README (the
/// project lists every id there) and the guide's chapter on finding ids.
const FINDING_TABLES: [&str; 2] = ["README.md", "docs/src/findings.md"];

#[test]
fn readme_finding_table_is_the_catalog() {
    let expected = catalog::markdown_table();
    let update = std::env::var_os("PREFLIGHT_UPDATE_README").is_some_and(|v| v == "1");
    for file in FINDING_TABLES {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let start = text
            .find("| id | fires as | action | meaning |")
            .unwrap_or_else(|| panic!("{file} has the finding-id table"));
        let table: String = text[start..]
            .lines()
            .take_while(|l| l.starts_with('|'))
            .map(|l| format!("{l}\n"))
            .collect();
        if table != expected && update {
            let updated = text.replacen(&table, &expected, 1);
            std::fs::write(root().join(file), updated).unwrap();
            continue;
        }
        assert!(
            table == expected,
            "{file}'s finding-id table differs from checks/src/catalog.rs; run \
             `PREFLIGHT_UPDATE_README=1 cargo test --test it readme_finding_table` or replace it with:\n\n{expected}"
        );
        // One line per id: every id of the catalog is listed, by its own row.
        for entry in catalog::all() {
            assert!(
                table.contains(&format!("| `{}` |", entry.id)),
                "{file} does not list {}",
                entry.id
            );
        }
    }
}

// ------------------------------------------------------------------ JSON Schema

fn committed_schema_path() -> PathBuf {
    root().join("schema/preflight.report.v1.json")
}

#[test]
fn committed_schema_matches_the_types() {
    let generated = preflight_checks::schema::report_schema_text();
    let path = committed_schema_path();
    if std::env::var_os("PREFLIGHT_UPDATE_SCHEMA").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from the report types. If the change is intended (fields added, none \
         renamed or dropped), regenerate it with\n  PREFLIGHT_UPDATE_SCHEMA=1 cargo test --test it \
         committed_schema_matches_the_types\nand commit the file.",
        path.display()
    );
    let printed = bin().arg("schema").output().unwrap();
    assert_eq!(printed.status.code(), Some(0));
    assert_eq!(String::from_utf8(printed.stdout).unwrap(), generated);
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(committed_schema_path()).expect("committed schema");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn assert_valid(v: &jsonschema::Validator, report: &Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not validate:\n{}",
        errors.join("\n")
    );
}

/// A cluster report with everything filled: links, collectives, recommendation, node_env.
fn full_cluster_report() -> Report {
    let mut facts = NodeFacts {
        hostname: "gpu01".into(),
        host_id: "gpu01-boot".into(),
        ..Default::default()
    };
    facts
        .env
        .insert("NCCL_SOCKET_IFNAME".into(), "bond0".into());
    let findings = vec![
        Finding::new(
            FindingId::new("link.unreachable"),
            Status::Fail,
            "0->1 10.0.0.2",
            "rank 0 cannot connect to rank 1",
        )
        .on_node(Some(1))
        .with("results", vec!["timeout"])
        .with("rtt_us", Option::<f64>::None)
        .fix(Fix::new("accept the subnet").command("ufw allow from 10.0.0.0/24")),
        Finding::new(
            FindingId::new("collective.busbw"),
            Status::Warn,
            "allreduce tcp",
            "busbw low",
        )
        .with("busbw_gb_s", 0.4),
        Finding::new(
            FindingId::new("cluster.gpus"),
            Status::Skip,
            "gpus",
            "no GPUs",
        ),
    ];
    let mut node_env = BTreeMap::new();
    node_env.insert(
        "1".to_string(),
        BTreeMap::from([("NCCL_SOCKET_IFNAME".to_string(), "=eno1".to_string())]),
    );
    Report {
        schema: SCHEMA.into(),
        tool: Tool {
            name: "preflight".into(),
            version: "0.1.0".into(),
        },
        mode: Mode::Cluster,
        status: overall_status(&findings),
        nodes: vec![
            NodeEntry {
                rank: 0,
                hostname: "gpu01".into(),
                facts: facts.clone(),
            },
            NodeEntry {
                rank: 1,
                hostname: "gpu02".into(),
                facts,
            },
        ],
        findings,
        links: vec![LinkResult {
            from: 0,
            to: 1,
            interface: "bond0".into(),
            address: "10.0.0.2".into(),
            port: 41234,
            result: LinkOutcome::Timeout,
            rtt_us: Some(52.5),
            rtt_p99_us: None,
            throughput_gbit_s: Some(9.4),
            mtu: Some(9000),
            error: Some("timed out".into()),
            retries: 0,
            stalled: false,
            handshake: Some(preflight_checks::model::HandshakeFailure::Silent),
        }],
        collectives: vec![CollectiveResult {
            op: "allreduce".into(),
            transport: "tcp".into(),
            ranks: 2,
            net: Some("NET/Socket bond0".into()),
            rows: vec![CollectiveRow {
                bytes: 1 << 20,
                time_us: 812.5,
                algbw_gb_s: 1.29,
                busbw_gb_s: 1.29,
                wrong: 0,
            }],
            ..Default::default()
        }],
        recommendation: Some(Recommendation {
            env: BTreeMap::from([("NCCL_SOCKET_IFNAME".to_string(), "bond0".to_string())]),
            node_env,
            master_addr: Some("10.0.0.1".into()),
            master_port: 29500,
            launch: vec![LaunchCommand {
                node_rank: 0,
                command: "torchrun --nnodes=2 ...".into(),
            }],
            reasons: vec!["bond0 reached by all".into()],
            standalone: None,
            healthy_set: None,
            faster_set: None,
        }),
        placement: None,
        trimmed: None,
        measurement: None,
        link_matrix: None,
        run_id: None,
    }
}

#[test]
fn every_json_report_validates_against_the_committed_schema() {
    let v = validator();
    for name in FACTS {
        let out = check_output(&facts_fixture(name), "json");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid(&v, &report, &format!("check --facts {name}.json"));
    }
    for snap in ["json_ib-node", "json_docker-bond-host", "json_k8s-pod"] {
        let text = std::fs::read_to_string(
            root().join(format!("tests/it/snapshots/it__cli__{snap}.snap")),
        )
        .unwrap();
        let body = text.splitn(3, "---\n").nth(2).expect("insta snapshot body");
        let report: Value = serde_json::from_str(body).unwrap();
        assert_valid(&v, &report, snap);
    }
    let cluster = serde_json::to_value(full_cluster_report()).unwrap();
    assert_valid(&v, &cluster, "a full cluster report");
    // Above 64 nodes: links compacted into link_matrix, as `preflight cluster` writes them.
    let large = crate::synthetic::cluster(
        65,
        &crate::synthetic::Faults {
            links_only: true,
            bad_link: Some((1, 2)),
            ..Default::default()
        },
    );
    let m = large
        .link_matrix
        .as_ref()
        .expect("65 nodes have a link matrix");
    assert_eq!(m.networks.len(), 2);
    let large: Value = serde_json::from_str(&preflight::render::json::render(&large)).unwrap();
    assert_valid(&v, &large, "a 65-node cluster report with link_matrix");
    // A slow node that costs the all-reduce more than its share: recommendation.faster_set.
    let slow = crate::synthetic::cluster(
        8,
        &crate::synthetic::Faults {
            slow: Some(5),
            advise_sets: true,
            ..Default::default()
        },
    );
    let faster = slow
        .recommendation
        .as_ref()
        .and_then(|r| r.faster_set.as_ref());
    assert_eq!(faster.map(|f| f.slow.clone()), Some(vec![5]));
    let slow: Value = serde_json::from_str(&preflight::render::json::render(&slow)).unwrap();
    assert!(slow["recommendation"]["faster_set"]["set"]["launch"].is_array());
    assert_valid(&v, &slow, "a cluster report with recommendation.faster_set");
}

#[test]
fn the_schema_rejects_what_breaks_the_contract() {
    let v = validator();
    let good = serde_json::to_value(full_cluster_report()).unwrap();
    let mut breaks: Vec<(&str, Value)> = Vec::new();
    let mut b = good.clone();
    b["status"] = "FAIL".into();
    breaks.push(("status in capitals", b));
    let mut b = good.clone();
    b["schema"] = "preflight.report.v2".into();
    breaks.push(("another schema", b));
    let mut b = good.clone();
    b["findings"][0]["evidence"] = Value::Array(vec![]);
    breaks.push(("evidence not an object", b));
    let mut b = good.clone();
    b["links"][0]["result"] = "lost".into();
    breaks.push(("unknown link result", b));
    let mut b = good.clone();
    b.as_object_mut().unwrap().remove("findings");
    breaks.push(("no findings", b));
    for (what, report) in breaks {
        assert!(!v.is_valid(&report), "schema accepted a report with {what}");
    }
    // Nullable and defaulted fields: null node, null fix, facts with fields left out.
    let mut lax = good;
    lax["findings"][0]["node"] = Value::Null;
    lax["findings"][0]["fix"] = Value::Null;
    lax["nodes"][0]["facts"] = serde_json::json!({"hostname": "gpu01"});
    lax["recommendation"] = Value::Null;
    assert_valid(&v, &lax, "a report with nulls and sparse facts");
}

// ------------------------------------------------------------------ JUnit

fn attr_num(node: roxmltree::Node, name: &str) -> usize {
    node.attribute(name)
        .unwrap_or_else(|| panic!("{} lacks {name}", node.tag_name().name()))
        .parse()
        .unwrap()
}

/// Parses JUnit XML and checks its counts against the JSON report's findings.
fn assert_junit_matches(xml: &str, report: &Value) {
    let doc = roxmltree::Document::parse(xml)
        .unwrap_or_else(|e| panic!("JUnit is not well-formed XML ({e}):\n{xml}"));
    let top = doc.root_element();
    assert_eq!(top.tag_name().name(), "testsuites");
    let findings = report["findings"].as_array().unwrap();
    let count = |s: &str| findings.iter().filter(|f| f["status"] == s).count();
    assert_eq!(attr_num(top, "tests"), findings.len());
    assert_eq!(attr_num(top, "failures"), count("fail") + count("error"));
    assert_eq!(attr_num(top, "errors"), 0);
    assert_eq!(attr_num(top, "skipped"), count("skip"));
    let mut cases = 0;
    for suite in top.children().filter(|n| n.has_tag_name("testsuite")) {
        let tc: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let with = |tag: &str| {
            tc.iter()
                .filter(|c| c.children().any(|x| x.has_tag_name(tag)))
                .count()
        };
        assert_eq!(attr_num(suite, "tests"), tc.len());
        assert_eq!(attr_num(suite, "failures"), with("failure"));
        assert_eq!(attr_num(suite, "errors"), 0);
        assert_eq!(attr_num(suite, "skipped"), with("skipped"));
        cases += tc.len();
    }
    assert_eq!(cases, findings.len());
    // One testcase per finding, named `id subject`: compare the ids as multisets.
    let mut in_xml: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .filter_map(|n| n.attribute("name")?.split(' ').next().map(str::to_string))
        .collect();
    let mut in_json: Vec<String> = findings
        .iter()
        .filter_map(|f| f["id"].as_str().map(str::to_string))
        .collect();
    in_xml.sort();
    in_json.sort();
    assert_eq!(in_xml, in_json);
}

#[test]
fn junit_snapshot_of_the_ib_node() {
    let out = check_output(&facts_fixture("ib-node"), "junit");
    assert_eq!(out.status.code(), Some(1), "fail findings keep exit 1");
    let xml = String::from_utf8(out.stdout).unwrap();
    insta::assert_snapshot!("junit_ib-node", xml);
}

#[test]
fn junit_counts_match_the_json_report_for_every_fixture() {
    for name in FACTS {
        let json = check_output(&facts_fixture(name), "json");
        let report: Value = serde_json::from_slice(&json.stdout).unwrap();
        let junit = check_output(&facts_fixture(name), "junit");
        assert_eq!(junit.status.code(), json.status.code(), "{name}");
        assert_junit_matches(&String::from_utf8(junit.stdout).unwrap(), &report);
    }
    let cluster = full_cluster_report();
    let xml = preflight::render::junit::render(&cluster);
    assert_junit_matches(&xml, &serde_json::to_value(&cluster).unwrap());
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .filter_map(|n| n.attribute("name"))
        .collect();
    assert_eq!(suites, ["cluster", "rank 1 (gpu02)"]);
}

#[test]
fn junit_survives_hostile_text_in_evidence() {
    let hostile = "<&>\"' \u{1b}[31m\u{0}\u{7}\r\nend]]>";
    let text = std::fs::read_to_string(facts_fixture("ib-node")).unwrap();
    let mut facts: Value = serde_json::from_str(&text).unwrap();
    facts["env"]["NCCL_SOCKET_IFNAME"] = hostile.into();
    facts["env"]["MASTER_ADDR"] = hostile.into();
    facts["hostname"] = hostile.into();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.json");
    std::fs::write(&path, serde_json::to_string(&facts).unwrap()).unwrap();
    let json = check_output(&path, "json");
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let out = check_output(&path, "junit");
    let xml = String::from_utf8(out.stdout).unwrap();
    assert_junit_matches(&xml, &report);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    // The markup characters come back as text, not as markup.
    let texts: String = doc
        .descendants()
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(texts.contains("<&>\"'"), "{texts}");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert!(
        suite.attribute("hostname").unwrap().starts_with("<&>\"'"),
        "{xml}"
    );
}

// ------------------------------------------------------------------ actions

const ACTIONS: [&str; 7] = [
    "none",
    "fix-config",
    "restart-job",
    "reset-gpu",
    "reboot",
    "drain-and-repair",
    "replace",
];

#[test]
fn every_finding_in_json_says_what_to_do_and_whose_problem_it_is() {
    let mut seen = std::collections::BTreeSet::new();
    for name in FACTS {
        let out = check_output(&facts_fixture(name), "json");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        for f in report["findings"].as_array().unwrap() {
            let (id, status) = (f["id"].as_str().unwrap(), f["status"].as_str().unwrap());
            let action = f["action"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: {f}"));
            let problem = f["problem"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: {f}"));
            assert!(ACTIONS.contains(&action), "{name}: {f}");
            assert!(["node", "user"].contains(&problem), "{name}: {f}");
            let catalog = preflight_checks::registry::remedy(id).expect("a registered id");
            match status {
                "pass" | "skip" => assert_eq!(action, "none", "{name}: {f}"),
                // gpu.xid takes NVIDIA's action per XID; every other id its catalog's.
                _ if id != "gpu.xid" => {
                    assert_eq!(action, catalog.action.as_str(), "{name}: {f}");
                    assert_eq!(problem, catalog.problem.as_str(), "{name}: {f}");
                }
                _ => {}
            }
            if status != "pass" && status != "skip" {
                seen.insert((problem.to_string(), action.to_string()));
            }
        }
    }
    // The fixtures fail and warn for both kinds of problem.
    assert!(seen.iter().any(|(p, _)| p == "node"), "{seen:?}");
    assert!(seen.iter().any(|(p, _)| p == "user"), "{seen:?}");
}

#[test]
fn actions_are_additive_the_other_fields_keep_their_bytes() {
    let plain = Finding::new(FindingId::new("port.in-use"), Status::Fail, "29500", "held")
        .on_node(Some(0))
        .fix(Fix::new("kill it").command("kill 42"));
    let before = serde_json::to_string(&plain).unwrap();
    let mut with = vec![plain.clone()];
    preflight_checks::registry::assign_remedies(&mut with);
    let after = serde_json::to_string(&with[0]).unwrap();
    assert_eq!(
        after,
        format!(
            "{},\"action\":\"restart-job\",\"problem\":\"node\"}}",
            before.strip_suffix('}').unwrap()
        )
    );
    // A finding of an older release (no action) still loads, and writes no action back.
    let old: Finding = serde_json::from_str(&before).unwrap();
    assert_eq!(old.action, None);
    assert_eq!(serde_json::to_string(&old).unwrap(), before);
    // The schema knows the two fields and their values.
    let v = validator();
    let mut r = serde_json::to_value(full_cluster_report()).unwrap();
    r["findings"][0]["action"] = "reboot".into();
    r["findings"][0]["problem"] = "node".into();
    assert_valid(&v, &r, "a finding with an action");
    r["findings"][0]["action"] = "panic".into();
    assert!(!v.is_valid(&r), "an unknown action validated");
}

#[test]
fn a_saved_report_without_actions_gets_its_catalogs_when_rendered() {
    let cluster = full_cluster_report();
    assert!(cluster.findings.iter().all(|f| f.action.is_none()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.json");
    std::fs::write(&path, serde_json::to_string(&cluster).unwrap()).unwrap();
    let out = bin()
        .args(["render", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let actions: Vec<(&str, &str)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["action"].as_str().unwrap(),
                f["problem"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("drain-and-repair", "node"),
            ("drain-and-repair", "node"),
            ("none", "node")
        ]
    );
}

// ------------------------------------------------------------------ CTRF

/// The published CTRF schema, vendored (tests/fixtures/ctrf/SOURCE.md).
fn ctrf_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("tests/fixtures/ctrf/ctrf.schema.json"))
        .expect("vendored CTRF schema");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("CTRF schema compiles")
}

/// CTRF's counts and tests against the JSON report's findings, one for one.
fn assert_ctrf_matches(ctrf: &Value, report: &Value, what: &str) {
    assert_eq!(ctrf["reportFormat"], "CTRF", "{what}");
    let findings = report["findings"].as_array().unwrap();
    let tests = ctrf["results"]["tests"].as_array().unwrap();
    assert_eq!(tests.len(), findings.len(), "{what}");
    let want = |st: &[&str]| {
        findings
            .iter()
            .filter(|f| st.contains(&f["status"].as_str().unwrap()))
            .count()
    };
    let s = &ctrf["results"]["summary"];
    assert_eq!(s["tests"], findings.len(), "{what}");
    assert_eq!(s["passed"], want(&["pass"]), "{what}");
    assert_eq!(s["failed"], want(&["fail", "error"]), "{what}");
    assert_eq!(s["skipped"], want(&["skip"]), "{what}");
    assert_eq!(s["other"], want(&["warn"]), "{what}");
    for (t, f) in tests.iter().zip(findings) {
        assert_eq!(t["message"], f["summary"], "{what}");
        assert_eq!(t["rawStatus"], f["status"], "{what}");
        assert_eq!(t["labels"]["id"], f["id"], "{what}");
        assert_eq!(t["labels"]["action"], f["action"], "{what}");
        assert_eq!(
            t["labels"].get("rank"),
            f.get("node").filter(|n| !n.is_null()),
            "{what}"
        );
    }
}

#[test]
fn ctrf_output_validates_against_the_published_schema_for_check_and_cluster() {
    let v = ctrf_validator();
    for name in FACTS {
        let json = check_output(&facts_fixture(name), "json");
        let report: Value = serde_json::from_slice(&json.stdout).unwrap();
        let out = check_output(&facts_fixture(name), "ctrf");
        assert_eq!(out.status.code(), json.status.code(), "{name}");
        let ctrf: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid(
            &v,
            &ctrf,
            &format!("check --format ctrf --facts {name}.json"),
        );
        assert_ctrf_matches(&ctrf, &report, name);
        assert_eq!(
            ctrf["results"]["environment"]["reportName"],
            "preflight check"
        );
    }
    let mut cluster = full_cluster_report();
    preflight_checks::registry::assign_remedies(&mut cluster.findings);
    let ctrf: Value = serde_json::from_str(&preflight::render::ctrf::render(&cluster)).unwrap();
    assert_valid(&v, &ctrf, "a cluster report as CTRF");
    assert_ctrf_matches(&ctrf, &serde_json::to_value(&cluster).unwrap(), "cluster");
    let tests = ctrf["results"]["tests"].as_array().unwrap();
    assert_eq!(
        tests[0]["name"],
        "link.unreachable 0->1 10.0.0.2 on rank 1 (gpu02)"
    );
    assert_eq!(tests[0]["status"], "failed");
    assert_eq!(tests[0]["labels"]["node"], "gpu02");
    assert_eq!(
        tests[0]["extra"]["fix"]["commands"][0],
        "ufw allow from 10.0.0.0/24"
    );
    assert_eq!(tests[1]["status"], "other");
    assert_eq!(tests[1]["suite"], serde_json::json!(["cluster"]));
    // The schema is not a rubber stamp: what CTRF forbids is refused.
    let mut bad = ctrf.clone();
    bad["results"]["tests"][0]["status"] = "warn".into();
    assert!(
        !v.is_valid(&bad),
        "a CTRF status outside its enum validated"
    );
    let mut bad = ctrf.clone();
    bad["results"]["summary"]
        .as_object_mut()
        .unwrap()
        .remove("stop");
    assert!(!v.is_valid(&bad), "a summary without stop validated");
}

#[test]
fn ctrf_survives_hostile_text() {
    let hostile = "<&>\"' \u{1b}[31m\u{0}\u{7}\r\nend]]>";
    let mut cluster = full_cluster_report();
    cluster.nodes[1].hostname = hostile.into();
    cluster.findings[0].summary = hostile.into();
    cluster.findings[0].subject = String::new();
    let ctrf: Value = serde_json::from_str(&preflight::render::ctrf::render(&cluster)).unwrap();
    assert_valid(&ctrf_validator(), &ctrf, "hostile CTRF");
    assert_eq!(ctrf["results"]["tests"][0]["message"], hostile);
    assert_eq!(ctrf["results"]["tests"][0]["labels"]["node"], hostile);
}

// ------------------------------------------------------------------ explain and help

#[test]
fn explain_prints_every_section_for_an_id() {
    let out = bin().args(["explain", "port.in-use"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("port.in-use  (fires as: fail)"), "{text}");
    for s in [
        "What it means",
        "Why it matters",
        "How to fix",
        "Address already in use",
    ] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

#[test]
fn explain_list_names_every_id() {
    let out = bin().args(["explain", "--list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let (findings, errors) = text
        .split_once("\n\n")
        .expect("the errors --log names follow");
    let listed: Vec<&str> = findings
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let all: Vec<&str> = catalog::all().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(listed, all);
    // Issue 55 (6): every id `explain --log` prints as a verdict is listed and explained.
    let errors: Vec<&str> = errors
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for sig in preflight_checks::explain_log::SIGNATURES.iter() {
        assert!(errors.contains(&sig.id), "{} not listed:\n{text}", sig.id);
    }
    for id in errors {
        let one = bin().args(["explain", id]).output().unwrap();
        assert_eq!(one.status.code(), Some(0), "explain {id}");
        let shown = String::from_utf8(one.stdout).unwrap();
        assert!(shown.starts_with(id), "{shown}");
        if !id.starts_with("job.") {
            for part in ["What it proves", "Likely causes, in order", "confirm "] {
                assert!(shown.contains(part), "explain {id} lacks {part}:\n{shown}");
            }
        }
    }
}

#[test]
fn explain_unknown_id_exits_2_with_suggestions() {
    let out = bin().args(["explain", "port.inuse"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("unknown finding id"), "{err}");
    assert!(err.contains("did you mean port.in-use"), "{err}");
    assert!(out.stdout.is_empty());
    let none = bin().arg("explain").output().unwrap();
    assert_eq!(none.status.code(), Some(2), "an id or --list is required");
    // Issue 55 (10): the bare command says what it takes.
    let err = String::from_utf8(none.stderr).unwrap();
    for part in [
        "`preflight explain port.in-use`",
        "`--list`",
        "`--log FILE`",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
}

#[test]
fn help_documents_exit_codes_junit_and_explain() {
    let out = bin().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "Exit codes:",
        "0  nothing is fail or error",
        "1  at least one finding",
        "2  the tool could not run",
        "130, 143  interrupted by SIGINT (Ctrl-C) or SIGTERM",
        "--format junit",
        "preflight explain ID",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from --help:\n{text}"
        );
    }
    let check = bin().args(["check", "--help"]).output().unwrap();
    let text = String::from_utf8(check.stdout).unwrap();
    assert!(text.contains("junit"), "{text}");
}
