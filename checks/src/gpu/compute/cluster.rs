//! `gpu.compute-slow` and `gpu.compute-wrong` across the nodes: each GPU against every GPU of
//! its model in the cluster (a node whose GPUs all run slow has no fast peer at home), and
//! each checksum against the cluster's. What a node's own judgment already names is not
//! repeated.

use crate::core::ClusterInput;
use crate::core::{Finding, Status};
use crate::gpu::compute::{Sample, Slow, Wrong};
use std::collections::{BTreeMap, HashMap, HashSet};

pub fn gpu_compute(input: &ClusterInput) -> Vec<Finding> {
    let measured: Vec<(u32, &crate::core::NodeFacts)> = input
        .nodes
        .iter()
        .filter(|(_, f)| {
            f.gpu
                .compute
                .as_ref()
                .is_some_and(|c| c.skipped.is_none() && !c.gpus.is_empty())
        })
        .map(|(r, f)| (*r, *f))
        .collect();
    if measured.len() < 2 {
        return Vec::new();
    }
    let all: Vec<Sample> = measured
        .iter()
        .flat_map(|(r, f)| crate::gpu::compute::node_samples(*r, f))
        .collect();
    let (named_slow, named_wrong) = named_by_nodes(&measured);
    let slow: Vec<Slow> = crate::gpu::compute::slow_gpus(&all)
        .into_iter()
        .filter(|s| s.reference.is_some())
        .filter(|s| !named_slow.contains(&(s.rank, s.gpu, s.dtype.clone())))
        .collect();
    let wrong: Vec<Wrong> = crate::gpu::compute::wrong_gpus(&all)
        .into_iter()
        .filter(|w| !named_wrong.contains(&(w.rank, w.gpu, w.dtype.clone())))
        .collect();
    let hosts: HashMap<u32, &str> = measured
        .iter()
        .map(|(r, f)| (*r, f.hostname.as_str()))
        .collect();
    let host = |rank: u32| hosts.get(&rank).copied().unwrap_or("?");
    let by_gpu: HashMap<(u32, u32), &crate::core::GpuGemm> =
        all.iter().map(|s| ((s.rank, s.gpu.gpu), s.gpu)).collect();
    let gpu_of = |rank: u32, gpu: u32| by_gpu.get(&(rank, gpu)).copied();
    let mut per_node: HashMap<u32, usize> = HashMap::new();
    for s in &all {
        *per_node.entry(s.rank).or_default() += 1;
    }
    let mut out = Vec::new();
    let mut slow_by_node: BTreeMap<u32, Vec<&Slow>> = BTreeMap::new();
    for s in &slow {
        slow_by_node.entry(s.rank).or_default().push(s);
    }
    for (rank, list) in &slow_by_node {
        let total = per_node.get(rank).copied().unwrap_or(0);
        out.push(slow_node(*rank, host(*rank), total, list, &by_gpu));
    }
    for w in &wrong {
        let Some(g) = gpu_of(w.rank, w.gpu) else {
            continue;
        };
        let h = host(w.rank);
        out.push(
            crate::gpu::compute::gpu_finding(
                crate::gpu::ids::COMPUTE_WRONG,
                Status::Fail,
                g,
                h,
                crate::gpu::compute::wrong_text(w, &g.model, h),
            )
            .on_node(Some(w.rank))
            .with("dtype", &w.dtype)
            .with("checksum", &w.checksum)
            .with("usual_checksum", &w.usual)
            .fix(crate::gpu::compute::wrong_fix(g)),
        );
    }
    if out.is_empty() {
        out.push(
            Finding::new(
                crate::gpu::ids::COMPUTE_SLOW,
                Status::Pass,
                "gpus",
                format!(
                    "{} GPUs on {} nodes multiply at their model's pace and agree bit for bit ({})",
                    all.len(),
                    measured.len(),
                    crate::gpu::compute::rate_summary(&all).join("; ")
                ),
            )
            .with("nodes", measured.len())
            .with("gpus", all.len()),
        );
    }
    out
}

/// What a node's own (gpu.compute-slow, gpu.compute-wrong) already name: (rank, GPU, type).
type Named = HashSet<(u32, u32, String)>;

/// What each node's own judgment names already, slow and wrong.
fn named_by_nodes(measured: &[(u32, &crate::core::NodeFacts)]) -> (Named, Named) {
    let mut named_slow: HashSet<(u32, u32, String)> = HashSet::new();
    let mut named_wrong: HashSet<(u32, u32, String)> = HashSet::new();
    for (r, f) in measured {
        let own = crate::gpu::compute::node_samples(*r, f);
        named_slow.extend(
            crate::gpu::compute::slow_gpus(&own)
                .into_iter()
                .map(|s| (s.rank, s.gpu, s.dtype)),
        );
        named_wrong.extend(
            crate::gpu::compute::wrong_gpus(&own)
                .into_iter()
                .map(|w| (w.rank, w.gpu, w.dtype)),
        );
    }
    (named_slow, named_wrong)
}

/// One node's GPUs slower than their model across the cluster: all of them (the node) or some.
fn slow_node(
    rank: u32,
    h: &str,
    total: usize,
    list: &[&Slow],
    by_gpu: &HashMap<(u32, u32), &crate::core::GpuGemm>,
) -> Finding {
    let mut gpus: Vec<u32> = list.iter().map(|s| s.gpu).collect();
    gpus.dedup();
    let whole = gpus.len() == total && total > 1;
    // Per data type: the range of the node's slow GPUs against the reference.
    let mut types: Vec<&str> = list.iter().map(|s| s.dtype.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    let rates = rates_text(&types, list);
    // The slowest GPU's state read while it multiplied.
    let slowest = list
        .iter()
        .min_by(|a, b| {
            (a.tflops / a.reference.unwrap_or(1.0))
                .total_cmp(&(b.tflops / b.reference.unwrap_or(1.0)))
        })
        .map(|s| s.gpu)
        .unwrap_or(gpus[0]);
    let state = by_gpu
        .get(&(rank, slowest))
        .copied()
        .map(|g| format!("; GPU {slowest}: {}", crate::gpu::compute::state_text(g)))
        .unwrap_or_default();
    let first = by_gpu.get(&(rank, slowest)).copied();
    let named: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
    let summary = if whole {
        format!(
            "all {total} GPUs of {h} multiply slower than the same model on the other nodes: the node (its power limit, clocks or cooling) holds the job back; {}{state}",
            rates.join("; ")
        )
    } else {
        format!(
            "{} {} of {h} {} slower than the same model across the cluster: {}{state}",
            if gpus.len() == 1 { "GPU" } else { "GPUs" },
            crate::gpu::compute::listed(&named),
            if gpus.len() == 1 {
                "multiplies"
            } else {
                "multiply"
            },
            rates.join("; ")
        )
    };
    let f = Finding::new(crate::gpu::ids::COMPUTE_SLOW, Status::Fail, "gpus", summary)
        .on_node(Some(rank))
        .with("host", h)
        .with("gpus", &gpus)
        .with(
            "rates",
            list.iter()
                .map(|s| (s.gpu, s.dtype.clone(), s.tflops, s.reference))
                .collect::<Vec<_>>(),
        );
    match first {
        Some(g) => f.fix(crate::gpu::compute::slow_fix(g)),
        None => f,
    }
}

/// Per data type: the range of the node's slow GPUs against the reference.
fn rates_text(types: &[&str], list: &[&Slow]) -> Vec<String> {
    types
        .iter()
        .map(|t| {
            let of: Vec<&&Slow> = list.iter().filter(|s| s.dtype == *t).collect();
            let lo = of.iter().map(|s| s.tflops).fold(f64::INFINITY, f64::min);
            let hi = of.iter().map(|s| s.tflops).fold(0.0, f64::max);
            let reference = of.iter().find_map(|s| s.reference).unwrap_or_default();
            let range = if (hi - lo).abs() < 0.5 {
                format!("{lo:.0}")
            } else {
                format!("{lo:.0} to {hi:.0}")
            };
            format!(
                "{t} {range} TFLOP/s against the model's reference {reference:.0} (upper quartile of {} GPUs), {:.0}%",
                of[0].peers,
                100.0 * hi / reference.max(1e-9)
            )
        })
        .collect()
}
