//! `launch.standalone`, `launch.rdzv-backend` and `launch.rdzv-conf`: the kind of rendezvous asked for.

use super::{BACKENDS, CommandShape, Correction, finding, flag};
use crate::launchline::args::{Parsed, edit_distance};
use preflight_checks::model::{Finding, Fix, Status};

pub(super) fn standalone(p: &Parsed, plan: &CommandShape) -> Option<(Finding, Option<Correction>)> {
    if !plan.standalone {
        return None;
    }
    let rank = plan.rank;
    let multi: Vec<String> = [
        "nnodes",
        "node-rank",
        "master-addr",
        "master-port",
        "rdzv-endpoint",
        "rdzv-backend",
        "rdzv-id",
    ]
    .iter()
    .filter_map(|n| p.last(n))
    .filter(|o| o.name != "nnodes" || plan.max_nodes() > 1)
    .map(|o| format!("{}={}", o.spelled, o.value.clone().unwrap_or_default()))
    .collect();
    let points_elsewhere = p.has("rdzv-endpoint") || p.has("master-addr");
    if plan.max_nodes() > 1 {
        let f = finding(
            preflight_checks::launch::ids::STANDALONE,
            Status::Fail,
            rank,
            "--standalone",
            format!(
                "--standalone with {}: each node starts its own local rendezvous on a free port and ignores the others, so the {} nodes never form one job",
                multi.join(" "),
                plan.max_nodes()
            ),
        )
        .with("multi_node_flags", &multi);
        if points_elsewhere {
            return Some((
                f.fix(Fix::new(
                    "drop --standalone; the rendezvous flags already given then apply",
                )),
                Some(Correction::Remove { name: "standalone" }),
            ));
        }
        return Some((
            f.fix(Fix::new("drop --standalone and give --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT (rank 0's address), the same on every node")),
            None,
        ));
    }
    if !multi.is_empty() {
        let f = finding(
            preflight_checks::launch::ids::STANDALONE,
            Status::Warn,
            rank,
            "--standalone",
            format!(
                "--standalone ignores {}: torchrun picks its own local endpoint and id",
                multi.join(" ")
            ),
        )
        .with("ignored", &multi)
        .fix(Fix::new(
            "drop the ignored flags, or drop --standalone if this is meant to be multi-node",
        ));
        return Some((f, None));
    }
    Some((
        finding(
            preflight_checks::launch::ids::STANDALONE,
            Status::Pass,
            rank,
            "--standalone",
            "single node: torchrun hosts its rendezvous locally on a free port".into(),
        ),
        None,
    ))
}

pub(super) fn rdzv_backend(p: &Parsed, plan: &CommandShape) -> Vec<(Finding, Option<Correction>)> {
    let mut out = Vec::new();
    let rank = plan.rank;
    if let Some(v) = p.value("rdzv-backend") {
        let name = flag(p, "rdzv-backend");
        let f = match v {
            "static" | "c10d" => finding(preflight_checks::launch::ids::RDZV_BACKEND, Status::Pass, rank, v, format!("rendezvous backend {v}")),
            "etcd" | "etcd-v2" => finding(
                preflight_checks::launch::ids::RDZV_BACKEND,
                Status::Warn,
                rank,
                v,
                format!("{name}={v} needs an etcd server (v2 API) at the endpoint and the python-etcd package on every node; preflight cannot rendezvous through etcd"),
            )
            .fix(Fix::new(format!("unless you run etcd, use {name}=c10d with --rdzv-endpoint=HOST:PORT on a node (no extra service)"))),
            other => {
                let near = BACKENDS.iter().min_by_key(|b| edit_distance(b, other)).copied().unwrap_or("c10d");
                finding(
                    preflight_checks::launch::ids::RDZV_BACKEND,
                    Status::Fail,
                    rank,
                    other,
                    format!("{name}={other} on rank {rank} is not a rendezvous backend torch registers ({}); torchrun stops unless a plugin registers it", BACKENDS.join(", ")),
                )
                .fix(Fix::new(format!("use {name}={near}")))
            }
        };
        let fix = (!BACKENDS.contains(&v) && edit_distance("c10d", v) <= 2).then_some(
            Correction::SetValue {
                name: "rdzv-backend",
                value: "c10d".into(),
            },
        );
        out.push((f.with("backend", v).with("known", BACKENDS), fix));
    }
    if let Some(v) = p.value("rdzv-conf").filter(|v| !v.is_empty()) {
        let bad: Vec<&str> = v
            .split(',')
            .filter(|kv| !kv.is_empty())
            .filter(|kv| kv.split_once('=').is_none_or(|(k, _)| k.trim().is_empty()))
            .collect();
        let f = if bad.is_empty() {
            finding(
                preflight_checks::launch::ids::RDZV_CONF,
                Status::Pass,
                rank,
                v,
                format!("rendezvous configuration {v}"),
            )
        } else {
            finding(
                preflight_checks::launch::ids::RDZV_CONF,
                Status::Fail,
                rank,
                v,
                format!("{}={v}: {} not KEY=VALUE; torchrun stops with \"The rendezvous configuration string must be in format <key1>=<value1>,...\"", flag(p, "rdzv-conf"), bad.join(", ")),
            )
            .fix(Fix::new(format!("write it as {}=key1=value1,key2=value2", flag(p, "rdzv-conf"))))
        };
        out.push((f.with("rdzv_conf", v), None));
    }
    out
}
