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

/// `unfit`: the drain reason when the node has a drain-worthy finding, None when it passes.
pub fn decide(node: &str, state: &NodeState, unfit: Option<&str>) -> Action {
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
    match (unfit, reason) {
        (Some(_), Some(r)) if !ours => Action::Leave {
            why: format!(
                "{node} already has a reason preflight did not set ({}, state {}): preflight does not replace it",
                preflight_checks::shellword::quoted(r),
                state.state
            ),
        },
        (Some(want), Some(r)) if state.is_drain() && r == want => Action::Leave {
            why: format!("{node} is already drained with this reason"),
        },
        (Some(want), _) => Action::Drain {
            reason: want.to_string(),
        },
        (None, Some(r)) if ours && state.is_drain() => Action::Resume { was: r.to_string() },
        (None, Some(r)) if state.is_drain() => Action::Leave {
            why: format!(
                "{node} passes but was drained by someone else ({}): preflight resumes only nodes it drained",
                preflight_checks::shellword::quoted(r)
            ),
        },
        (None, _) => Action::Leave {
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
    const OURS: &str = "preflight: port.in-use: master port 29500 is already in use";

    #[test]
    fn drains_a_failing_node_once() {
        assert_eq!(
            decide("n1", &st("idle", None), Some(OURS)),
            Action::Drain {
                reason: OURS.into()
            }
        );
        assert_eq!(
            decide("n1", &st("idle", Some("none")), Some(OURS)),
            Action::Drain {
                reason: OURS.into()
            }
        );
        assert!(matches!(
            decide("n1", &st("drained", Some(OURS)), Some(OURS)),
            Action::Leave { .. }
        ));
        // A new cause of its own replaces preflight's older reason.
        let other = "preflight: gpu.count: 7 GPUs, 8 expected";
        assert_eq!(
            decide("n1", &st("drained", Some(OURS)), Some(other)),
            Action::Drain {
                reason: other.into()
            }
        );
    }

    #[test]
    fn never_overwrites_a_foreign_reason_and_resumes_only_its_own() {
        let Action::Leave { why } = decide("n1", &st("drained", Some("bad DIMM")), Some(OURS))
        else {
            panic!("foreign reason replaced")
        };
        assert!(why.contains("bad DIMM"), "{why}");
        assert!(matches!(
            decide("n1", &st("drained", Some("bad DIMM")), None),
            Action::Leave { .. }
        ));
        assert_eq!(
            decide("n1", &st("drained", Some(OURS)), None),
            Action::Resume { was: OURS.into() }
        );
        assert!(matches!(
            decide("n1", &st("idle", None), None),
            Action::Leave { .. }
        ));
    }

    #[test]
    fn down_and_maintenance_nodes_are_left_alone() {
        for s in ["down", "maint", "fail", "reboot_issued", "powered_down"] {
            assert!(
                matches!(decide("n1", &st(s, None), Some(OURS)), Action::Leave { .. }),
                "{s}"
            );
            assert!(
                matches!(decide("n1", &st(s, Some(OURS)), None), Action::Leave { .. }),
                "{s}"
            );
        }
    }
}
