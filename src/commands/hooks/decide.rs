//! What a Slurm hook does to its node, as a pure function of the node's state and the verdict:
//! drain with preflight's reason, resume a node preflight drained, or leave it alone.

use crate::render::drain;

/// A node as `sinfo` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// sinfo's long state (`idle`, `drained`, `draining`, `down`, `maint` ...), lowercase,
    /// without its flag characters (`*`, `~`, `#` ...).
    pub state: String,
    /// The reason set on the node, if any.
    pub reason: Option<String>,
}

impl NodeState {
    pub fn is_drain(&self) -> bool {
        self.state.starts_with("drain")
    }

    /// Down, failed, in maintenance, rebooting, powered off or not yet there: not ours to touch.
    pub fn is_off_limits(&self) -> bool {
        [
            "down", "fail", "maint", "reboot", "power", "future", "unknown", "inval",
        ]
        .iter()
        .any(|p| self.state.starts_with(p))
    }
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Drain {
        reason: String,
    },
    /// Preflight drained it earlier and it passes now.
    Resume {
        was: String,
    },
    /// Nothing; why, in words.
    Leave {
        why: String,
    },
}

/// `want`: the parts of the reason the node's drain-worthy findings make (empty when it
/// passes). A drain preflight set is kept while it holds: its reason (and the time Slurm
/// stamped on it) is not rewritten for the same findings, and a new finding is appended.
pub fn decide(node: &str, state: &NodeState, want: &[drain::Part]) -> Action {
    let reason = state
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty() && *r != "none");
    let ours = reason.is_some_and(drain::is_ours);
    if state.is_off_limits() {
        return Action::Leave {
            why: format!(
                "{node} is {}{}: preflight leaves down and maintenance nodes alone",
                state.state,
                reason
                    .map(|r| format!(" (reason: {r})"))
                    .unwrap_or_default()
            ),
        };
    }
    match (want.is_empty(), reason) {
        (false, Some(r)) if !ours => Action::Leave {
            why: format!(
                "{node} already has a reason preflight did not set ({}, state {}): preflight does not replace it",
                preflight_checks::shellword::quoted(r),
                state.state
            ),
        },
        (false, Some(r)) if state.is_drain() => match drain::appended(r, want) {
            Some(reason) => Action::Drain { reason },
            None => Action::Leave {
                why: format!(
                    "{node} stays drained for {} (the reason and its time are kept while the fault holds)",
                    drain::ids_in(r).join(", ")
                ),
            },
        },
        (false, _) => match drain::reason_of(want) {
            Some(reason) => Action::Drain { reason },
            None => Action::Leave {
                why: format!("{node}: nothing to drain for"),
            },
        },
        (true, Some(r)) if ours && state.is_drain() => Action::Resume { was: r.to_string() },
        (true, Some(r)) if state.is_drain() => Action::Leave {
            why: format!(
                "{node} passes but was drained by someone else ({}): preflight resumes only nodes it drained",
                preflight_checks::shellword::quoted(r)
            ),
        },
        (true, _) => Action::Leave {
            why: format!("{node} passes ({})", state.state),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: &str, reason: Option<&str>) -> NodeState {
        NodeState {
            state: state.into(),
            reason: reason.map(Into::into),
        }
    }

    fn part(id: &str, cause: &str) -> drain::Part {
        drain::Part {
            id: id.into(),
            text: format!("[node_problem] restart-job: {id}: {cause}"),
        }
    }

    const OURS: &str =
        "preflight: [node_problem] restart-job: port.in-use: master port 29500 is already in use";

    fn port() -> Vec<drain::Part> {
        vec![part("port.in-use", "master port 29500 is already in use")]
    }

    #[test]
    fn drains_a_failing_node_once_and_keeps_its_first_reason() {
        assert_eq!(
            decide("n1", &st("idle", None), &port()),
            Action::Drain {
                reason: OURS.into()
            }
        );
        assert_eq!(
            decide("n1", &st("idle", Some("none")), &port()),
            Action::Drain {
                reason: OURS.into()
            }
        );
        assert!(matches!(
            decide("n1", &st("drained", Some(OURS)), &port()),
            Action::Leave { .. }
        ));
        // The same finding with other words (another pid): the first reason and its time stay.
        let later = vec![part("port.in-use", "master port 29500 is in use by pid 99")];
        let Action::Leave { why } = decide("n1", &st("drained", Some(OURS)), &later) else {
            panic!("rewritten")
        };
        assert!(why.contains("stays drained for port.in-use"), "{why}");
        // A reason of the older form (no tag) names its id too.
        assert!(matches!(
            decide(
                "n1",
                &st("drained", Some("preflight: port.in-use: master port 29500")),
                &later
            ),
            Action::Leave { .. }
        ));
        // A new finding is appended.
        let more = vec![later[0].clone(), part("gpu.count", "7 GPUs, 8 expected")];
        assert_eq!(
            decide("n1", &st("drained", Some(OURS)), &more),
            Action::Drain {
                reason: format!(
                    "{OURS} | [node_problem] restart-job: gpu.count: 7 GPUs, 8 expected"
                )
            }
        );
    }

    #[test]
    fn a_reason_stays_within_its_length() {
        let many: Vec<drain::Part> = (0..40)
            .map(|i| part(&format!("x.id{i}"), &"word ".repeat(10)))
            .collect();
        let Action::Drain { reason } = decide("n1", &st("idle", None), &many) else {
            panic!()
        };
        assert!(reason.chars().count() <= drain::MAX_REASON, "{reason}");
        assert!(reason.ends_with(" more)"), "{reason}");
        let Action::Drain { reason: grown } = decide("n1", &st("drained", Some(OURS)), &many)
        else {
            panic!()
        };
        assert!(grown.starts_with(OURS));
        assert!(grown.chars().count() <= drain::MAX_REASON, "{grown}");
        // Full: nothing more fits, the reason is kept.
        assert!(matches!(
            decide("n1", &st("drained", Some(&grown)), &many),
            Action::Leave { .. }
        ));
    }

    #[test]
    fn never_overwrites_a_foreign_reason_and_resumes_only_its_own() {
        let Action::Leave { why } = decide("n1", &st("drained", Some("bad DIMM")), &port()) else {
            panic!("foreign reason replaced")
        };
        assert!(why.contains("bad DIMM"), "{why}");
        assert!(matches!(
            decide("n1", &st("drained", Some("bad DIMM")), &[]),
            Action::Leave { .. }
        ));
        assert_eq!(
            decide("n1", &st("drained", Some(OURS)), &[]),
            Action::Resume { was: OURS.into() }
        );
        assert!(matches!(
            decide("n1", &st("idle", None), &[]),
            Action::Leave { .. }
        ));
    }

    #[test]
    fn down_and_maintenance_nodes_are_left_alone() {
        for s in ["down", "maint", "fail", "reboot_issued", "powered_down"] {
            assert!(
                matches!(decide("n1", &st(s, None), &port()), Action::Leave { .. }),
                "{s}"
            );
            assert!(
                matches!(decide("n1", &st(s, Some(OURS)), &[]), Action::Leave { .. }),
                "{s}"
            );
        }
    }
}
