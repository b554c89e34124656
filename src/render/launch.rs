//! The recommended launch as torchrun commands, an sbatch script, an srun line, a hostfile, a Kubernetes `env:` list, or (healthy set) the hosts to exclude.

use crate::cli::LaunchFormat;
use crate::recipe::{C10dLaunch, LaunchNode, LaunchPlan};

/// The launch in `format`.
pub fn render(plan: &LaunchPlan, format: LaunchFormat) -> String {
    match format {
        LaunchFormat::Torchrun => torchrun(plan),
        LaunchFormat::Sbatch => sbatch(plan),
        LaunchFormat::K8sEnv => match &plan.healthy {
            Some(h) => k8s_healthy(plan, h),
            None => k8s_env(plan),
        },
        LaunchFormat::Srun => srun(plan),
        LaunchFormat::Hostfile => hostfile(plan),
        LaunchFormat::Exclude => plan
            .healthy
            .as_ref()
            .map(|h| format!("{}\n", h.exclude))
            .unwrap_or_default(),
    }
}

/// One line per line of the healthy set's header, when the launch is on the set.
fn healthy_note(plan: &LaunchPlan) -> String {
    let Some(h) = &plan.healthy else {
        return String::new();
    };
    let left: Vec<String> = h
        .excluded
        .iter()
        .map(|(host, ids, _)| {
            let host = if host.is_empty() {
                "(unknown host)"
            } else {
                host
            };
            if ids.is_empty() {
                format!("{host} (idle)")
            } else {
                format!("{host} ({})", ids.join(", "))
            }
        })
        .collect();
    format!(
        "# The healthy set: {} of {} nodes ({}); node ranks are ranks within the set.\n# Left out: {}\n",
        plan.nodes.len(),
        h.total,
        h.hosts,
        if left.is_empty() {
            "none".to_string()
        } else {
            left.join(", ")
        }
    )
}

/// Every value from the report reaches this file checked (`recipe::plan` refuses control
/// characters and anything but plain names and hosts) and shell-quoted where it is a word.
fn header(plan: &LaunchPlan, format: &str) -> String {
    format!(
        "# preflight launch --format {format}: from {} (status {}, {} node(s) measured)\n",
        super::sanitize::shown(&plan.source),
        plan.status,
        plan.nodes.len()
    )
}

fn node_label(n: &LaunchNode) -> String {
    if n.hostname.is_empty() {
        format!("node rank {}", n.rank)
    } else {
        format!("node rank {} ({})", n.rank, n.hostname)
    }
}

fn torchrun_args(plan: &LaunchPlan, rank: &str, addr: &str, port: &str) -> String {
    if let Some(c) = &plan.c10d {
        // Ranks come from torchrun's c10d rendezvous, as they did in preflight's run.
        let endpoint = crate::shell::quote(&preflight_checks::net::host_port(
            addr,
            port.parse().unwrap_or(0),
        ));
        return format!(
            "torchrun --nnodes={} --nproc-per-node={} --rdzv-backend=c10d --rdzv-endpoint={endpoint}{} {}",
            plan.nnodes,
            plan.nproc_per_node,
            rdzv_id_flag(c),
            plan.script
        );
    }
    format!(
        "torchrun --nnodes={} --nproc-per-node={} --node-rank={rank} --master-addr={addr} --master-port={port} {}",
        plan.nnodes, plan.nproc_per_node, plan.script
    )
}

/// ` --rdzv-id=ID` (quoted), or nothing.
fn rdzv_id_flag(c: &C10dLaunch) -> String {
    c.rdzv_id
        .as_deref()
        .map(|id| format!(" --rdzv-id={}", crate::shell::quote(id)))
        .unwrap_or_default()
}

fn torchrun(plan: &LaunchPlan) -> String {
    let mut out = header(plan, "torchrun");
    out.push_str(&healthy_note(plan));
    out.push_str("# Run each line on its node.\n");
    let port = plan.master_port.to_string();
    for n in &plan.nodes {
        let mut env = plan.env.clone();
        env.extend(n.env.clone());
        let prefix = crate::shell::env_prefix(&env);
        let sep = if prefix.is_empty() { "" } else { " " };
        out.push_str(&format!("# {}\n", node_label(n)));
        out.push_str(&format!(
            "{prefix}{sep}{}\n",
            torchrun_args(plan, &n.rank.to_string(), &plan.master_addr, &port)
        ));
    }
    out
}

fn short(host: &str) -> &str {
    host.split('.').next().unwrap_or(host)
}

fn sbatch(plan: &LaunchPlan) -> String {
    let mut out = String::from("#!/bin/bash\n");
    out.push_str(&format!("#SBATCH --nodes={}\n", plan.nnodes));
    out.push_str("#SBATCH --ntasks-per-node=1\n");
    out.push_str(&format!(
        "#SBATCH --gpus-per-node={}\n",
        plan.nproc_per_node
    ));
    let hosts: Vec<&str> = plan
        .nodes
        .iter()
        .map(|n| short(&n.hostname))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.len() == plan.nodes.len() && !hosts.is_empty() {
        out.push_str(&format!("#SBATCH --nodelist={}\n", hosts.join(",")));
    }
    if let Some(h) = plan.healthy.as_ref().filter(|h| !h.exclude.is_empty()) {
        out.push_str(&format!("#SBATCH --exclude={}\n", h.exclude));
    }
    out.push_str(&header(plan, "sbatch"));
    out.push_str(&healthy_note(plan));
    out.push_str(
        "# The environment was measured on the nodes in --nodelist; on other nodes run\n\
         # examples/slurm/preflight.sbatch there first. Node ranks follow preflight's ranks:\n\
         # rank 0 must be the host that owns MASTER_ADDR.\n\
         set -euo pipefail\n\n",
    );
    for (k, v) in &plan.env {
        out.push_str(&format!("export {k}={}\n", crate::shell::quote(v)));
    }
    out.push_str(&format!(
        "export MASTER_ADDR={}\nexport MASTER_PORT={}\n\n",
        crate::shell::quote(&plan.master_addr),
        plan.master_port
    ));
    out.push_str(&format!(
        "srun --kill-on-bad-exit=1 bash -c {} bash {}\n",
        crate::shell::quote(&node_body(plan)),
        plan.script
    ));
    out
}

/// One `srun` line for inside an existing allocation: the set's node count, the excluded
/// hosts (healthy set), one task per node, each node finding its rank by its name.
fn srun(plan: &LaunchPlan) -> String {
    let mut out = header(plan, "srun");
    out.push_str(&healthy_note(plan));
    out.push_str(
        "# Run inside the allocation (salloc, or a batch script) that holds these nodes.\n",
    );
    let mut env = plan.env.clone();
    env.insert("MASTER_ADDR".into(), plan.master_addr.clone());
    env.insert("MASTER_PORT".into(), plan.master_port.to_string());
    let exclude = plan
        .healthy
        .as_ref()
        .filter(|h| !h.exclude.is_empty())
        .map(|h| format!(" --exclude={}", crate::shell::quote(&h.exclude)))
        .unwrap_or_default();
    out.push_str(&format!(
        "{} srun --nodes={} --ntasks={} --ntasks-per-node=1{exclude} --kill-on-bad-exit=1 bash -c {} bash {}\n",
        crate::shell::env_prefix(&env),
        plan.nnodes,
        plan.nnodes,
        crate::shell::quote(&node_body(plan)),
        plan.script
    ));
    out
}

/// One host per line, in node-rank order.
fn hostfile(plan: &LaunchPlan) -> String {
    let mut nodes: Vec<&LaunchNode> = plan.nodes.iter().collect();
    nodes.sort_by_key(|n| n.rank);
    nodes.iter().map(|n| format!("{}\n", n.hostname)).collect()
}

/// The per-node part under srun: the node's rank by its name, its own values, then torchrun
/// (the script words travel as "$@").
fn node_body(plan: &LaunchPlan) -> String {
    let mut body = String::from("case \"${SLURMD_NODENAME:-$(hostname -s)}\" in\n");
    for n in &plan.nodes {
        let pattern = if n.hostname.is_empty() {
            format!("rank{}-unknown-host", n.rank)
        } else {
            let s = short(&n.hostname);
            format!("{s}|{s}.*")
        };
        let own: String = n
            .env
            .iter()
            .map(|(k, v)| format!("; export {k}={}", crate::shell::quote(v)))
            .collect();
        body.push_str(&format!("  {pattern}) NODE_RANK={}{own} ;;\n", n.rank));
    }
    body.push_str(
        "  *) echo \"preflight launch: node $(hostname) was not measured by preflight; rerun preflight cluster on this allocation\" >&2; exit 2 ;;\n\
         esac\n",
    );
    body.push_str(&match &plan.c10d {
        // c10d: torchrun assigns the ranks at join; rank 0 is the host owning the endpoint.
        Some(c) => format!(
            "exec torchrun --nnodes={} --nproc-per-node={} --rdzv-backend=c10d --rdzv-endpoint={}{} \"$@\"\n",
            plan.nnodes,
            plan.nproc_per_node,
            crate::shell::quote(&preflight_checks::net::host_port(
                &plan.master_addr,
                plan.master_port
            )),
            rdzv_id_flag(c)
        ),
        None => format!(
            "exec torchrun --nnodes={} --nproc-per-node={} --node-rank=\"$NODE_RANK\" --master-addr=\"$MASTER_ADDR\" --master-port=\"$MASTER_PORT\" \"$@\"\n",
            plan.nnodes, plan.nproc_per_node
        ),
    });
    body
}

fn yaml_str(v: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar.
    serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into())
}

/// An env value as the kubelet reads it: it expands `$(VAR)` in `value:` and turns `$$` into
/// `$`, so every `$` is doubled and the container sees the value unchanged (`$(id)` stays
/// `$(id)`, `$HOME` stays `$HOME`). Then YAML-quoted.
fn k8s_value(v: &str) -> String {
    yaml_str(&v.replace('$', "$$"))
}

fn k8s_env(plan: &LaunchPlan) -> String {
    let mut out = header(plan, "k8s-env");
    out.push_str(
        "# Paste under the container's `env:`. torchrun reads PET_NNODES and PET_NPROC_PER_NODE as\n\
         # --nnodes and --nproc-per-node; give it --node-rank=$(JOB_COMPLETION_INDEX) in an Indexed Job.\n",
    );
    out.push_str(&format!(
        "# MASTER_ADDR: use pod 0's stable name (<job>-0.<headless-service>); preflight measured rank 0 at {}.\n",
        plan.master_addr
    ));
    let mut vars: Vec<(String, String)> = plan
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vars.push(("MASTER_PORT".into(), plan.master_port.to_string()));
    vars.push(("PET_NNODES".into(), plan.nnodes.to_string()));
    vars.push(("PET_NPROC_PER_NODE".into(), plan.nproc_per_node.to_string()));
    if let Some(c) = &plan.c10d {
        // torchrun reads PET_RDZV_* as its --rdzv-* flags: ranks assigned at join, no --node-rank.
        out.push_str("# The ranks were assigned at join (c10d): torchrun reads PET_RDZV_BACKEND, PET_RDZV_ENDPOINT\n# and PET_RDZV_ID as --rdzv-*; give it no --node-rank.\n");
        vars.push(("PET_RDZV_BACKEND".into(), "c10d".into()));
        vars.push((
            "PET_RDZV_ENDPOINT".into(),
            preflight_checks::net::host_port(&plan.master_addr, plan.master_port),
        ));
        if let Some(id) = &c.rdzv_id {
            vars.push(("PET_RDZV_ID".into(), id.clone()));
        }
    }
    for (k, v) in vars {
        out.push_str(&format!("- name: {k}\n  value: {}\n", k8s_value(&v)));
    }
    let own: Vec<&LaunchNode> = plan.nodes.iter().filter(|n| !n.env.is_empty()).collect();
    if !own.is_empty() {
        out.push_str(
            "# Per-node values (these differ between nodes; set them in that pod only, or in a wrapper\n\
             # that switches on JOB_COMPLETION_INDEX):\n",
        );
        for n in own {
            let vals: Vec<String> = n.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("#   {}: {}\n", node_label(n), vals.join(" ")));
        }
    }
    out
}

/// The healthy set for Kubernetes, as a bash script: `kubectl cordon` for each excluded node
/// whose pod gave its node name, then the `env:` list inside a heredoc (inert when sourced).
fn k8s_healthy(plan: &LaunchPlan, h: &crate::recipe::HealthyPlan) -> String {
    let mut out = header(plan, "k8s-env --healthy-set");
    out.push_str(&healthy_note(plan));
    out.push_str(
        "# 1) Keep the job off the excluded nodes (a bash script: source it or run it).\n",
    );
    for (host, ids, node) in &h.excluded {
        let host = if host.is_empty() {
            "(unknown host)"
        } else {
            host
        };
        let why = if ids.is_empty() {
            "idle".to_string()
        } else {
            ids.join(", ")
        };
        match node {
            Some(n) => out.push_str(&format!(
                "kubectl cordon {}  # {host}: {why}\n",
                crate::shell::quote(n)
            )),
            None => out.push_str(&format!(
                "# {host} ({why}): its pod did not say its node name (a pod's hostname is not one); add\n#   env: [{{name: PREFLIGHT_NODE_NAME, valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}}}]\n#   to the pod, or find it with: kubectl get pod -o wide | grep {host}\n"
            )),
        }
    }
    out.push_str(&format!(
        "# 2) Run {} pods (an Indexed Job with completions={}), with this `env:` list:\n: <<'YAML'\n",
        plan.nnodes, plan.nnodes
    ));
    let body = k8s_env(plan);
    for l in body
        .lines()
        .filter(|l| !l.starts_with("# preflight launch"))
    {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str("YAML\n");
    out
}

/// The user's own command for one node, after the report (`preflight torchrun`).
pub fn your_command(rank: u32, command: &str, corrections: usize, replaced: &[String]) -> String {
    let what = if corrections == 0 {
        "with the recommended environment".to_string()
    } else {
        format!("with the recommended environment and {corrections} corrected flag(s)")
    };
    let mut out = format!(
        "\nYour command for rank {rank}, {what}:\n  {}\n",
        super::sanitize::line(command)
    );
    if !replaced.is_empty() {
        out.push_str(&format!(
            "  (of your own environment, replaced: {}; the rest of your line is as you wrote it)\n",
            super::sanitize::line(&replaced.join(", "))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::torchrun_c10d_command;
    use crate::recipe::plan;
    use preflight_checks::model::{LaunchCommand, Mode, PlacementInfo, Recommendation};
    use std::collections::BTreeMap;
    use std::path::Path;

    fn split(line: &str) -> Result<Vec<String>, String> {
        crate::launchline::args::split_shell(line).map_err(|e| e.to_string())
    }

    /// A report whose ranks were assigned at join: `preflight launch` gives back its own c10d
    /// commands (no --node-rank), and the sbatch script and k8s env keep c10d too.
    #[test]
    fn a_c10d_report_launches_with_c10d_and_no_node_rank() {
        let env = BTreeMap::from([("NCCL_SOCKET_IFNAME".to_string(), "eth0".to_string())]);
        let script = ["train.py".to_string(), "--lr".into(), "3".into()];
        let command = torchrun_c10d_command(&env, "2", 4, "10.0.0.1:29500", Some("job 7"), &script);
        let mut report = crate::report::ReportBuilder::new(Mode::Cluster)
            .node(0, Default::default())
            .node(1, Default::default())
            .recommendation(Some(Recommendation {
                env: env.clone(),
                master_addr: Some("10.0.0.1".into()),
                master_port: 29500,
                launch: (0..2)
                    .map(|r| LaunchCommand {
                        node_rank: r,
                        command: command.clone(),
                    })
                    .collect(),
                ..Default::default()
            }))
            .build();
        report.placement = Some(PlacementInfo {
            source: crate::placement::C10D_JOIN.into(),
            endpoint: Some("10.0.0.1:29500".into()),
            unassigned: false,
        });
        let p = plan(&report, Path::new("r.json"), None, &[], &split).unwrap();
        assert_eq!(p.c10d.as_ref().unwrap().rdzv_id.as_deref(), Some("job 7"));
        let text = render(&p, LaunchFormat::Torchrun);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines, [command.as_str(), command.as_str()], "{text}");
        let sbatch = render(&p, LaunchFormat::Sbatch);
        assert!(
            sbatch.contains("--rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 --rdzv-id="),
            "{sbatch}"
        );
        assert!(!sbatch.contains("--node-rank"), "{sbatch}");
        let k8s = render(&p, LaunchFormat::K8sEnv);
        assert!(
            k8s.contains("PET_RDZV_BACKEND") && k8s.contains("\"job 7\""),
            "{k8s}"
        );
    }

    /// The kubelet's `$(VAR)` expansion of an env value, after Kubernetes'
    /// `third_party/forked/golang/expansion`: `$$` is `$`, `$(NAME)` is looked up, an
    /// unclosed `$(` and any other `$x` stay as written.
    fn kubelet_expand(input: &str, mapping: impl Fn(&str) -> String) -> String {
        let b = input.as_bytes();
        let mut out: Vec<u8> = Vec::new();
        let (mut cursor, mut checkpoint) = (0usize, 0usize);
        while cursor < b.len() {
            if b[cursor] == b'$' && cursor + 1 < b.len() {
                out.extend_from_slice(&b[checkpoint..cursor]);
                let rest = &b[cursor + 1..];
                let advance = match rest[0] {
                    b'$' => {
                        out.push(b'$');
                        1
                    }
                    b'(' => match rest.iter().position(|&c| c == b')') {
                        Some(end) => {
                            let name = std::str::from_utf8(&rest[1..end]).unwrap();
                            out.extend_from_slice(mapping(name).as_bytes());
                            end + 1
                        }
                        None => {
                            out.extend_from_slice(b"$(");
                            1
                        }
                    },
                    c => {
                        out.extend_from_slice(&[b'$', c]);
                        1
                    }
                };
                cursor += advance;
                checkpoint = cursor + 1;
            }
            cursor += 1;
        }
        out.extend_from_slice(&b[checkpoint.min(b.len())..]);
        String::from_utf8(out).unwrap()
    }

    /// `KEY=value` lines of `env` run under `shell` after `setup`.
    fn env_after(shell: &str, setup: &str) -> BTreeMap<String, String> {
        let out = std::process::Command::new(shell)
            .arg("-c")
            .arg(format!("{setup}\nenv"))
            .env_clear()
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Values a report may carry that each consumer would expand if written raw: every format
    /// hands its consumer (sh for the torchrun lines, bash for sbatch, the kubelet for the
    /// env list) exactly the value, through that consumer's own rules.
    #[test]
    fn every_format_hands_its_consumer_the_value_unexpanded() {
        let nasty = [
            "$(touch /tmp/preflight-pwned)",
            "`id`",
            "a'b\"c\\d",
            "$HOME and ${PATH}",
            "$$(x)",
            "x$",
            "$(",
            "* ?[a] ~root",
        ];
        let env: BTreeMap<String, String> = nasty
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("NCCL_V{i}"), v.to_string()))
            .collect();
        let p = LaunchPlan {
            nnodes: 1,
            nproc_per_node: 1,
            master_addr: "10.0.0.1".into(),
            master_port: 29500,
            env: env.clone(),
            nodes: vec![LaunchNode {
                rank: 0,
                hostname: "gpu01".into(),
                env: BTreeMap::new(),
            }],
            script: "train.py".into(),
            status: preflight_checks::model::Status::Pass,
            source: "r.json".into(),
            c10d: None,
            healthy: None,
        };
        let text = render(&p, LaunchFormat::Torchrun);
        let line = text.lines().find(|l| !l.starts_with('#')).unwrap();
        let prefix = line.split(" torchrun ").next().unwrap();
        let got = env_after("sh", &format!("{prefix} env"));
        let sbatch = render(&p, LaunchFormat::Sbatch);
        let exports: Vec<&str> = sbatch
            .lines()
            .filter(|l| l.starts_with("export NCCL_"))
            .collect();
        let got_sbatch = env_after("bash", &exports.join("\n"));
        let k8s = render(&p, LaunchFormat::K8sEnv);
        let lines: Vec<&str> = k8s.lines().collect();
        for (k, v) in &env {
            assert_eq!(got.get(k), Some(v), "torchrun: {line}");
            assert_eq!(got_sbatch.get(k), Some(v), "sbatch: {exports:?}");
            let at = lines
                .iter()
                .position(|l| *l == format!("- name: {k}"))
                .unwrap();
            let yaml = lines[at + 1].strip_prefix("  value: ").unwrap();
            let written: String = serde_json::from_str(yaml).unwrap();
            assert_eq!(
                &kubelet_expand(&written, |_| "EXPANDED".into()),
                v,
                "k8s: {yaml}"
            );
        }
        // The rule itself: a raw `$(id)` is what the kubelet would have expanded.
        assert_eq!(kubelet_expand("$(id)", |_| "EXPANDED".into()), "EXPANDED");
    }
}
