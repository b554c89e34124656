//! `cluster.versions`: driver, CUDA, NCCL and torch versions that differ across nodes, with the install command for the odd ones.

use crate::core::ClusterInput;
use crate::core::cluster_common::{most_common, rank_map, ranks_phrase};
use crate::core::{Finding, Fix, NodeFacts, Status};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

struct VersionField {
    key: &'static str,
    label: &'static str,
    get: fn(&NodeFacts) -> Option<&str>,
}

const VERSION_FIELDS: &[VersionField] = &[
    VersionField {
        key: "driver",
        label: "NVIDIA driver",
        get: |f| f.gpu.driver_version.as_deref(),
    },
    VersionField {
        key: "cuda_driver",
        label: "CUDA driver version",
        get: |f| f.gpu.cuda_driver_version.as_deref(),
    },
    VersionField {
        key: "nccl",
        label: "NCCL",
        get: |f| f.nccl.version.as_deref(),
    },
    VersionField {
        key: "torch",
        label: "torch",
        get: |f| f.nccl.torch_version.as_deref(),
    },
];

/// "2.21.5" -> (2, 21).
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.trim().split(['.', '+', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

pub(crate) fn versions(input: &ClusterInput) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut common = Map::new();
    let mut unknown_all = Map::new();
    for field in VERSION_FIELDS {
        let mut values: BTreeMap<u32, String> = BTreeMap::new();
        let mut unknown: Vec<u32> = Vec::new();
        for (rank, facts) in input.nodes {
            match (field.get)(facts).map(str::trim).filter(|v| !v.is_empty()) {
                Some(v) => {
                    values.insert(*rank, v.to_string());
                }
                None => unknown.push(*rank),
            }
        }
        unknown.sort_unstable();
        if !unknown.is_empty() {
            unknown_all.insert(field.key.to_string(), json!(unknown));
        }
        let distinct: BTreeSet<&String> = values.values().collect();
        if distinct.len() <= 1 {
            if let Some(v) = distinct.into_iter().next() {
                common.insert(field.key.to_string(), json!(v));
            }
            continue;
        }
        out.push(version_differs(input, field, &values, &unknown));
    }
    if out.is_empty() {
        let summary = if common.is_empty() {
            "no versions known to compare".to_string()
        } else {
            let parts: Vec<String> = VERSION_FIELDS
                .iter()
                .filter_map(|f| {
                    common
                        .get(f.key)
                        .and_then(Value::as_str)
                        .map(|v| format!("{} {v}", f.label))
                })
                .collect();
            format!("same on every node: {}", parts.join(", "))
        };
        out.push(
            Finding::new(
                crate::rendezvous::ids::VERSIONS,
                Status::Pass,
                "versions",
                summary,
            )
            .with("versions", Value::Object(common))
            .with("unknown", Value::Object(unknown_all)),
        );
    }
    out
}

fn version_differs(
    input: &ClusterInput,
    field: &VersionField,
    values: &BTreeMap<u32, String>,
    unknown: &[u32],
) -> Finding {
    let mut groups: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (r, v) in values {
        groups.entry(v.as_str()).or_default().push(*r);
    }
    let listing: Vec<String> = groups
        .iter()
        .map(|(v, ranks)| format!("{v} on {}", ranks_phrase(ranks)))
        .collect();
    let protocol_split = field.key == "nccl" && {
        let mm: BTreeSet<(u32, u32)> = values.values().filter_map(|v| major_minor(v)).collect();
        mm.len() > 1
    };
    let status = if protocol_split {
        Status::Fail
    } else {
        Status::Warn
    };
    let consequence = if protocol_split {
        " (NCCL major.minor differ: the wire protocol may not match and init can hang)"
    } else {
        ""
    };
    let unknown_text = if unknown.is_empty() {
        String::new()
    } else {
        format!("; unknown on {}", ranks_phrase(unknown))
    };
    let target = most_common(values).unwrap_or_default();
    let odd: Vec<u32> = values
        .iter()
        .filter(|(_, v)| **v != target)
        .map(|(r, _)| *r)
        .collect();
    Finding::new(
        crate::rendezvous::ids::VERSIONS,
        status,
        field.key,
        format!(
            "{} differs across nodes: {}{consequence}{unknown_text}",
            field.label,
            listing.join("; ")
        ),
    )
    .with("field", field.key)
    .with("per_rank", rank_map(values))
    .with("most_common", &target)
    .with("unknown", unknown)
    .fix(version_fix(input, field, &target, &odd))
}

fn version_fix(input: &ClusterInput, field: &VersionField, target: &str, odd: &[u32]) -> Fix {
    let on = ranks_phrase(odd);
    match field.key {
        "driver" | "cuda_driver" => Fix::new(format!(
            "Install the NVIDIA driver most nodes run (the CUDA driver version follows the driver) on {on}, so every node reports {} {target}",
            field.label
        ))
        .command("nvidia-smi --query-gpu=driver_version --format=csv,noheader"),
        "torch" => {
            let mut fix = Fix::new(format!(
                "Install torch {target} (what most nodes have) on {on}, in the environment the job runs"
            ));
            fix = fix.command(pip_torch_command(target));
            fix.command("python -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'")
        }
        _ => {
            let mut fix = Fix::new(format!(
                "Use NCCL {target} (what most nodes have) on {on}: install the same torch/NCCL wheels everywhere and unset LD_LIBRARY_PATH entries that point at another libnccl"
            ));
            let pip_sourced = odd.iter().any(|r| {
                input
                    .facts(*r)
                    .and_then(|f| f.nccl.source.as_deref())
                    .is_some_and(|s| s.starts_with("python"))
            });
            if pip_sourced {
                let cu = odd
                    .iter()
                    .find_map(|r| input.facts(*r).and_then(|f| f.nccl.torch_version.clone()))
                    .map(|t| if t.contains("+cu11") { "cu11" } else { "cu12" })
                    .unwrap_or("cu12");
                fix = fix.command(format!("pip install nvidia-nccl-{cu}=={target}"));
            }
            fix.command("python -c 'import torch; print(torch.cuda.nccl.version())'")
        }
    }
}

/// `pip install torch==2.5.1 --index-url .../cu124` for "2.5.1+cu124".
fn pip_torch_command(version: &str) -> String {
    match version.split_once('+') {
        Some((base, local))
            if local.starts_with("cu") || local == "cpu" || local.starts_with("rocm") =>
        {
            format!(
                "pip install torch=={base} --index-url https://download.pytorch.org/whl/{local}"
            )
        }
        _ => format!("pip install torch=={version}"),
    }
}

#[cfg(test)]
mod tests {
    use crate::core::Status;
    use crate::testkit::*;
    use serde_json::json;

    #[test]
    fn nccl_major_minor_split_fails_patch_split_warns() {
        let mut c = Cluster::healthy(3);
        c.facts[2].nccl.version = Some("2.18.1".into());
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::VERSIONS);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.subject, "nccl");
        assert_eq!(f.evidence["per_rank"]["2"], json!("2.18.1"));
        assert_eq!(f.evidence["most_common"], json!("2.21.5"));
        assert!(f.summary.contains("2.18.1 on rank 2"), "{}", f.summary);
        assert!(commands(f).contains(&"pip install nvidia-nccl-cu12==2.21.5".to_string()));

        c.facts[2].nccl.version = Some("2.21.3".into());
        let fs = c.findings();
        assert_eq!(
            only(&fs, crate::rendezvous::ids::VERSIONS).status,
            Status::Warn
        );
    }

    #[test]
    fn driver_and_torch_differences_warn_each() {
        let mut c = Cluster::healthy(3);
        c.facts[0].gpu.driver_version = Some("535.104.05".into());
        c.facts[1].nccl.torch_version = Some("2.4.0+cu121".into());
        let fs = c.findings();
        let v = with_id(&fs, crate::rendezvous::ids::VERSIONS);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v.iter().all(|f| f.status == Status::Warn));
        let torch = v.iter().find(|f| f.subject == "torch").unwrap();
        assert!(
            commands(torch).contains(
                &"pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124"
                    .to_string()
            )
        );
        let driver = v.iter().find(|f| f.subject == "driver").unwrap();
        assert_eq!(driver.evidence["per_rank"]["0"], json!("535.104.05"));
    }

    #[test]
    fn unknown_versions_are_ignored_and_mentioned() {
        let mut c = Cluster::healthy(3);
        c.facts[1].nccl.version = None;
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::VERSIONS);
        assert_eq!(f.status, Status::Pass);
        assert_eq!(f.evidence["unknown"]["nccl"], json!([1]));
        assert_eq!(f.evidence["versions"]["nccl"], json!("2.21.5"));
    }
}
