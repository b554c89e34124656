//! `preflight simulate`: the real schedule and judgment over a modelled cluster (see
//! `runtime::sim`), for sizes no machine here can run as real processes.

use super::Outcome;
use crate::config::SimulateJob;

pub fn simulate(mut job: SimulateJob) -> anyhow::Result<Outcome> {
    if let Some(path) = &job.facts {
        job.fabric.node_template = Some(Box::new(super::load_facts(path)?));
    }
    let f = &job.fabric;
    let sim = crate::runtime::sim::simulate(f, job.timing);
    let memory = peak_rss_mib().map_or_else(String::new, |m| {
        format!(
            "; peak memory {m} MiB (it holds what rank 0 holds: every node's facts{}, every link, the report)",
            if f.node_template.is_some() { " as given" } else { ", bare" }
        )
    });
    let heading = format!(
        "simulated {} nodes on a modelled {} Gbit/s, {} us fabric ({} dead, {} slow, {} slow pairs, {} behind a slow uplink, {} bad links, {} lossy links; seed {}); computed in {:.2} s{memory}",
        f.nodes,
        f.gbit,
        f.latency_us,
        f.dead,
        f.slow,
        sim.faults.slow_pairs.len(),
        sim.faults.cut.len(),
        f.bad_links,
        f.lossy_links,
        f.seed,
        sim.compute_seconds
    );
    Ok(Outcome::Simulated {
        report: Box::new(sim.report),
        heading,
        output: job.report,
    })
}

/// This process's peak resident memory (VmHWM), MiB, where /proc says it.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}
