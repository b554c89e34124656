//! `preflight simulate`: the real schedule and judgment over a modelled cluster (see
//! `runtime::sim`), for sizes no machine here can run as real processes.

use super::Outcome;
use crate::config::SimulateJob;

pub fn simulate(job: SimulateJob) -> Outcome {
    let f = &job.fabric;
    let sim = crate::runtime::sim::simulate(f, job.timing);
    let heading = format!(
        "simulated {} nodes on a modelled {} Gbit/s, {} us fabric ({} dead, {} slow, {} bad links, {} lossy links; seed {}); computed in {:.1} s",
        f.nodes,
        f.gbit,
        f.latency_us,
        f.dead,
        f.slow,
        f.bad_links,
        f.lossy_links,
        f.seed,
        sim.compute_seconds
    );
    Outcome::Simulated {
        report: Box::new(sim.report),
        heading,
        output: job.report,
    }
}
