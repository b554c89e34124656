//! What to do about a finding, and whose problem it is: the `action` and `problem` fields of
//! every finding, and the action each catalog entry gives its id.
//!
//! The actions run from the least to the most costly, so the larger of two is the one to take.
//! `problem` says who acts: `node` (the cluster's operators: the node is drained for it) or
//! `user` (the job's launch or environment: the node is fine), as Nebius' soperator marks its
//! drain reasons `[node_problem]` / `[user_problem]`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to do about a finding, from the least to the most costly.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Nothing: it passes, or it is information only.
    None,
    /// Change the job's launch line or environment (the fix commands say how).
    FixConfig,
    /// Stop what is left of the job and start it again.
    RestartJob,
    /// Reset the GPU (`nvidia-smi -r`) with nothing running on it.
    ResetGpu,
    /// Reboot the node.
    Reboot,
    /// Take the node out of service and repair it (its configuration, a cable, a port).
    DrainAndRepair,
    /// Replace the part: contact the vendor.
    Replace,
}

impl Action {
    /// Every action, cheapest first.
    pub const ALL: [Action; 7] = [
        Action::None,
        Action::FixConfig,
        Action::RestartJob,
        Action::ResetGpu,
        Action::Reboot,
        Action::DrainAndRepair,
        Action::Replace,
    ];

    /// The JSON spelling: `none`, `fix-config`, `restart-job`, `reset-gpu`, `reboot`,
    /// `drain-and-repair`, `replace`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::FixConfig => "fix-config",
            Action::RestartJob => "restart-job",
            Action::ResetGpu => "reset-gpu",
            Action::Reboot => "reboot",
            Action::DrainAndRepair => "drain-and-repair",
            Action::Replace => "replace",
        }
    }

    /// The next step for a node where this action did not help (a lemon: the same finding again
    /// and again): a transient or the user's fix becomes a repair of the node, a restarted job a
    /// GPU reset when the finding is a GPU's (`on_gpu`) and a reboot otherwise (a port or a
    /// process that keeps coming back is no GPU's), a GPU reset a reboot, a reboot a repair, a
    /// repair a replacement. `replace` stays.
    pub fn escalate(self, on_gpu: bool) -> Action {
        match self {
            Action::None | Action::FixConfig => Action::DrainAndRepair,
            Action::RestartJob if on_gpu => Action::ResetGpu,
            Action::RestartJob => Action::Reboot,
            Action::ResetGpu => Action::Reboot,
            Action::Reboot => Action::DrainAndRepair,
            Action::DrainAndRepair | Action::Replace => Action::Replace,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose problem a finding is.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Problem {
    /// The node's: its operators fix it, and a Slurm health check drains it meanwhile.
    Node,
    /// The job's launch or environment: the node is fine and is not left drained.
    User,
}

impl Problem {
    pub fn as_str(self) -> &'static str {
        match self {
            Problem::Node => "node",
            Problem::User => "user",
        }
    }

    /// The tag a Slurm drain reason carries: `[node_problem]` or `[user_problem]`.
    pub fn tag(self) -> &'static str {
        match self {
            Problem::Node => "[node_problem]",
            Problem::User => "[user_problem]",
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of fault a finding id reports, which decides how far a fault that keeps coming
/// back escalates (NVIDIA's XID catalog and NVSentinel escalate hardware; nobody replaces a
/// node for its configuration).
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// The user's job or launch: never a node's lemon.
    User,
    /// The node's configuration or software: files, sysctls, limits, drivers, services, a
    /// process. A fix that does not hold is restored by something (a config manager, the
    /// image, a cron job): it escalates to finding that, never to a repair.
    Config,
    /// The node's hardware: a GPU, a NIC or rail, a link that moves with the node. It escalates
    /// towards a repair and a replacement.
    Hardware,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::User => "user",
            Fault::Config => "config",
            Fault::Hardware => "hardware",
        }
    }

    /// The next step when `action` did not help with a fault of this kind that keeps coming
    /// back: hardware as [`Action::escalate`]; a configuration fault stays a change of
    /// configuration (a process that keeps coming back: a reboot); a user's fault stays the
    /// user's action.
    pub fn escalate(self, action: Action, on_gpu: bool) -> Action {
        match self {
            Fault::Hardware => action.escalate(on_gpu),
            Fault::Config => match action {
                Action::RestartJob | Action::ResetGpu | Action::Reboot => Action::Reboot,
                _ => Action::FixConfig,
            },
            Fault::User => action,
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An action with whose problem it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Remedy {
    pub action: Action,
    pub problem: Problem,
}

impl Remedy {
    pub const fn node(action: Action) -> Remedy {
        Remedy {
            action,
            problem: Problem::Node,
        }
    }

    pub const fn user(action: Action) -> Remedy {
        Remedy {
            action,
            problem: Problem::User,
        }
    }

    /// [`Action::escalate`]; a problem that keeps coming back on one node is the node's.
    pub fn escalate(self, on_gpu: bool) -> Remedy {
        Remedy::node(self.action.escalate(on_gpu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_match_serde_and_order_is_by_cost() {
        for a in Action::ALL {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        assert!(Action::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(serde_json::to_value(Problem::User).unwrap(), "user");
        assert_eq!(Problem::Node.tag(), "[node_problem]");
    }

    #[test]
    fn escalation_never_goes_down_and_ends_at_replace() {
        for a in Action::ALL {
            for gpu in [false, true] {
                assert!(a.escalate(gpu) > a || a == Action::Replace, "{a}");
            }
        }
        assert_eq!(Action::ResetGpu.escalate(true), Action::Reboot);
        assert_eq!(Action::RestartJob.escalate(true), Action::ResetGpu);
        assert_eq!(Action::RestartJob.escalate(false), Action::Reboot);
        assert_eq!(
            Remedy::user(Action::FixConfig).escalate(false),
            Remedy::node(Action::DrainAndRepair)
        );
    }

    #[test]
    fn only_hardware_escalates_to_a_repair_or_a_replacement() {
        for a in Action::ALL {
            for gpu in [false, true] {
                let c = Fault::Config.escalate(a, gpu);
                assert!(
                    matches!(c, Action::FixConfig | Action::Reboot),
                    "{a} -> {c}"
                );
                assert_eq!(Fault::User.escalate(a, gpu), a);
                assert_eq!(Fault::Hardware.escalate(a, gpu), a.escalate(gpu));
            }
        }
        assert_eq!(
            Fault::Config.escalate(Action::RestartJob, false),
            Action::Reboot
        );
        assert_eq!(
            Fault::Config.escalate(Action::DrainAndRepair, false),
            Action::FixConfig
        );
    }
}
