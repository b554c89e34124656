//! The healthy set as advice: from a failing cluster report, `recommendation.healthy_set` (the set, the nodes to leave out, the environment, the master and the launch on the set).
//!
//! The set itself is `preflight_checks::cluster::healthy_set` (a pure function of the
//! report); here it becomes launch commands: the set's nodes are renumbered (the master
//! first, as torchrun's static rendezvous hosts its store on node rank 0), the measured links
//! among them are judged again, and `advise_cluster` gives the environment and the commands.

use crate::advise::{ClusterAdviceInput, advise_cluster};
use preflight_checks::cluster::healthy_set::{self, HealthyOptions, HealthySet};
use preflight_checks::hostlist::compress;
use preflight_checks::model::Links;
use preflight_checks::model::{
    Finding, Fix, HealthyConstraints, HealthyExclusion, HealthyLaunch, HealthySetAdvice, NodeFacts,
    Report, Status,
};
use preflight_checks::networks;
use std::collections::HashMap;

/// What the healthy-set advice needs beyond the report.
#[derive(Clone, Debug, Default)]
pub struct HealthyInput {
    pub opts: HealthyOptions,
    pub nproc_per_node: Option<u32>,
    pub script: Vec<String>,
}

impl HealthyInput {
    pub fn new(
        opts: &HealthyOptions,
        nnodes: u32,
        nproc_per_node: Option<u32>,
        script: &[String],
    ) -> Self {
        HealthyInput {
            opts: HealthyOptions {
                nnodes: Some(nnodes),
                ..opts.clone()
            },
            nproc_per_node,
            script: script.to_vec(),
        }
    }
}

/// Sets `recommendation.healthy_set` on a failing cluster report, and adds the
/// `cluster.healthy-set` failure when the set misses the constraints the user gave
/// (`--min-nodes`, `--nodes-multiple-of`). A passing report is left as it is.
pub fn attach(report: &mut Report, input: &HealthyInput) {
    let links = std::mem::take(&mut report.links);
    attach_with(report, &Links::borrowed(&links), input);
    report.links = links;
}

/// [`attach`] with the links given apart from the report (the coordinator's, held compactly:
/// see `preflight_checks::links`).
pub fn attach_with(report: &mut Report, links: &Links, input: &HealthyInput) {
    let Some(set) = healthy_set::healthy_set_of(report, links, &input.opts) else {
        return;
    };
    let advice = advise_with(report, links, &set, input);
    // A failure of its own only for the constraints the user set: with none, the set's `why`
    // says what is missing, and the findings already fail the cluster.
    let asked = input.opts.min_nodes > 1 || input.opts.multiple_of > 1;
    if let Some(why) = advice.why.as_ref().filter(|_| asked) {
        preflight_checks::registry::add_findings(report, [shortfall_finding(&set, &advice, why)]);
    }
    if let Some(rec) = report.recommendation.as_mut() {
        rec.healthy_set = Some(advice);
    }
}

/// True when the report carries a healthy set that meets its constraints.
pub fn usable(report: &Report) -> bool {
    report
        .recommendation
        .as_ref()
        .and_then(|r| r.healthy_set.as_ref())
        .is_some_and(|h| h.constraints.met && h.count > 0 && h.master_addr.is_some())
}

fn shortfall_finding(set: &HealthySet, advice: &HealthySetAdvice, why: &str) -> Finding {
    let top: Vec<&str> = set.cost.iter().take(3).map(|(id, _)| id.as_str()).collect();
    let explain: Vec<String> = top
        .iter()
        .map(|id| format!("preflight explain {id}"))
        .collect();
    let mut fix = Fix::new(format!(
        "Fix the findings that cost the most nodes ({}) on the nodes they name, or lower --min-nodes / --nodes-multiple-of, then rerun preflight on every node",
        if top.is_empty() {
            "none".to_string()
        } else {
            top.join(", ")
        }
    ));
    for c in explain {
        fix = fix.command(c);
    }
    Finding::new(
        healthy_set::ID,
        Status::Fail,
        "healthy set",
        format!("the cluster cannot train now even without its failing nodes: {why}"),
    )
    .with("count", advice.count)
    .with("total", advice.total)
    .with("min_nodes", set.min_nodes)
    .with("multiple_of", set.multiple_of)
    .with("excluded", advice.excluded.len())
    .with(
        "cost",
        set.cost
            .iter()
            .map(|(id, n)| serde_json::json!({"id": id, "nodes": n}))
            .collect::<Vec<_>>(),
    )
    .fix(fix)
}

/// The set's excluded nodes, as the advice reports them.
fn exclusions(set: &HealthySet) -> Vec<HealthyExclusion> {
    set.excluded
        .iter()
        .map(|e| HealthyExclusion {
            node: e.rank,
            hostname: e.hostname.clone(),
            reasons: e.reasons.clone(),
            idle: e.idle,
            why: e.why.clone(),
        })
        .collect()
}

/// The set, its exclusions and the launch on it, as the report carries them.
pub fn advise(report: &Report, set: &HealthySet, input: &HealthyInput) -> HealthySetAdvice {
    advise_with(report, &Links::borrowed(&report.links), set, input)
}

/// [`advise`] with the links given apart from the report (see [`attach`]).
pub fn advise_with(
    report: &Report,
    links: &Links,
    set: &HealthySet,
    input: &HealthyInput,
) -> HealthySetAdvice {
    let facts: HashMap<u32, &NodeFacts> = report.nodes.iter().map(|n| (n.rank, &n.facts)).collect();
    let hostnames: HashMap<u32, &str> = report
        .nodes
        .iter()
        .map(|n| (n.rank, n.hostname.as_str()))
        .collect();
    let host = |r: u32| -> String {
        hostnames
            .get(&r)
            .filter(|h| !h.is_empty())
            .map_or_else(|| format!("rank{r}"), |h| h.to_string())
    };
    // New rank = position in the set's order (the master first).
    let new_rank: HashMap<u32, u32> = set
        .order
        .iter()
        .enumerate()
        .map(|(i, r)| (*r, i as u32))
        .collect();
    let nodes: Vec<(u32, &NodeFacts)> = set
        .order
        .iter()
        .enumerate()
        .filter_map(|(i, r)| facts.get(r).map(|f| (i as u32, *f)))
        .collect();
    let evals = set_networks(set, &facts, links, &new_rank);
    let rec = advise_cluster(
        &nodes,
        &evals,
        &ClusterAdviceInput {
            nnodes: set.count() as u32,
            master_port: set.master_port,
            nproc_per_node: input.nproc_per_node,
            script: input.script.clone(),
            ..Default::default()
        },
    );
    let old = |r: u32| set.order.get(r as usize).copied().unwrap_or(r);
    let mut names: Vec<String> = set.order.iter().map(|r| host(*r)).collect();
    names.sort();
    let hosts = compress(&names);
    let excluded_names: Vec<String> = set
        .excluded
        .iter()
        .map(|e| e.hostname.clone())
        .filter(|h| !h.is_empty())
        .collect();
    let met = set.met && rec.master_addr.is_some();
    let why = if !set.met {
        set.shortfall()
    } else if rec.master_addr.is_none() {
        Some("no network connects every node of the set in the measurements".into())
    } else {
        None
    };
    HealthySetAdvice {
        count: set.count() as u32,
        total: set.total,
        hosts: hosts.clone(),
        ranks: set.order.clone(),
        excluded: exclusions(set),
        exclude_hosts: compress(&excluded_names),
        master_addr: rec.master_addr.clone(),
        master_port: rec.master_port,
        master_reason: set.master_reason.clone(),
        env: rec.env.clone(),
        node_env: rec
            .node_env
            .iter()
            .filter_map(|(k, v)| Some((old(k.parse().ok()?).to_string(), v.clone())))
            .collect(),
        launch: rec
            .launch
            .iter()
            .map(|l| HealthyLaunch {
                node: old(l.node_rank),
                hostname: host(old(l.node_rank)),
                node_rank: l.node_rank,
                command: l.command.clone(),
            })
            .collect(),
        largest: set.largest,
        constraints: HealthyConstraints {
            min_nodes: set.min_nodes,
            multiple_of: set.multiple_of,
            met,
        },
        network: evals
            .first()
            .filter(|e| e.fully_connected)
            .map(|e| e.network.id.clone())
            .or_else(|| set.network.clone()),
        recheck: format!(
            "preflight cluster --hosts {} --master-port={} -o healthy.json",
            crate::shell::quote(&hosts),
            rec.master_port
        ),
        why,
    }
}

/// The networks among the set's nodes, judged on their own ranks from the links as they are
/// (no renumbered copy of every link: 16.7 million at 4096 nodes), then renumbered.
fn set_networks(
    set: &HealthySet,
    facts: &HashMap<u32, &NodeFacts>,
    links: &Links,
    new_rank: &HashMap<u32, u32>,
) -> Vec<networks::NetworkEval> {
    let old_nodes: Vec<(u32, &NodeFacts)> = set
        .order
        .iter()
        .filter_map(|r| facts.get(r).map(|f| (*r, *f)))
        .collect();
    let old_ranks: Vec<u32> = old_nodes.iter().map(|(r, _)| *r).collect();
    let mut evals = networks::evaluate(&networks::discover(&old_nodes, links), links, &old_ranks);
    for e in &mut evals {
        e.network.members = std::mem::take(&mut e.network.members)
            .into_iter()
            .filter_map(|(r, m)| Some((*new_rank.get(&r)?, m)))
            .collect();
        for l in &mut e.failures {
            if let (Some(f), Some(t)) = (new_rank.get(&l.from), new_rank.get(&l.to)) {
                (l.from, l.to) = (*f, *t);
            }
        }
    }
    evals
}
