//! The faster set as advice: `recommendation.faster_set` (the set without the nodes `link.slow` names slow, the predicted gain, and the launch on it) on any cluster report where leaving them out pays for their share of the work.
//!
//! The set and the prediction are `preflight_checks::cluster::healthy_set::faster` (a pure
//! function of the report, the model documented there); the launch on the set is the healthy
//! set's (`advise::healthy::advise`), so `preflight launch --report FILE --healthy-set
//! --exclude-slow` prints the same lines.

use crate::advise::healthy::{HealthyInput, advise_with};
use preflight_checks::cluster::healthy_set::faster::{Faster, faster_set_with};
use preflight_checks::hostlist::compress;
use preflight_checks::model::Links;
use preflight_checks::model::{FasterSetAdvice, Report};

/// Sets `recommendation.faster_set` when the report's slow nodes cost the all-reduce more than
/// their share of the work; leaves the report as it is otherwise.
pub fn attach(report: &mut Report, input: &HealthyInput) {
    let links = std::mem::take(&mut report.links);
    attach_with(report, &Links::borrowed(&links), input);
    report.links = links;
}

/// [`attach`] with the links given apart from the report (the coordinator's, held compactly).
pub fn attach_with(report: &mut Report, links: &Links, input: &HealthyInput) {
    let Some(faster) = faster_set_with(report, links, &input.opts) else {
        return;
    };
    let advice = advice_with(report, links, &faster, input);
    if let Some(rec) = report.recommendation.as_mut() {
        rec.faster_set = Some(advice);
    }
}

/// The advice for a computed faster set.
pub fn advice(report: &Report, f: &Faster, input: &HealthyInput) -> FasterSetAdvice {
    advice_with(report, &Links::borrowed(&report.links), f, input)
}

/// [`advice`] with the links given apart from the report.
pub fn advice_with(
    report: &Report,
    links: &Links,
    f: &Faster,
    input: &HealthyInput,
) -> FasterSetAdvice {
    let set = advise_with(report, links, &f.set, input);
    let names: Vec<String> = f
        .slow
        .iter()
        .map(|r| {
            report
                .hostname(*r)
                .filter(|h| !h.is_empty())
                .map_or_else(|| format!("rank{r}"), str::to_string)
        })
        .collect();
    let slow_hosts = compress(&names);
    let summary = format!(
        "faster without {slow_hosts}: ~{:.1}x the all-reduce's bus bandwidth ({} {:.3} GB/s, predicted {:.3} GB/s without), ~{:.1}x the samples per second on {} of {} nodes when the all-reduce sets the step's pace",
        f.speedup(),
        if f.measured { "measured" } else { "ring bound" },
        f.busbw_with_gb_s,
        f.busbw_without_gb_s,
        f.throughput_gain(),
        f.nodes_without(),
        f.nodes_with,
    );
    FasterSetAdvice {
        summary,
        slow: f.slow.clone(),
        slow_hosts,
        nodes_with: f.nodes_with,
        nodes_without: f.nodes_without(),
        ring_gbit_s_with: f.ring_with_gbit_s,
        ring_gbit_s_without: f.ring_without_gbit_s,
        busbw_gb_s_with: f.busbw_with_gb_s,
        busbw_gb_s_without: f.busbw_without_gb_s,
        measured: f.measured,
        seconds_per_gb_with: f.seconds_per_gb_with(),
        seconds_per_gb_without: f.seconds_per_gb_without(),
        speedup: f.speedup(),
        break_even: f.break_even(),
        throughput_gain: f.throughput_gain(),
        set,
    }
}
