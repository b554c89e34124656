//! What to do about each XID: the "Resolution Bucket (Immediate Action)" column of NVIDIA's Xid
//! catalog for Ampere and newer GPUs
//! (<https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>), as preflight's
//! actions.
//!
//! `RESTART_BM` is a reboot; `RESET_GPU` and the DBE workflow (`WORKFLOW_XID_48`: reset the
//! GPU, and follow XID 63/64 when they come with it) a GPU reset; the NVLink workflow
//! (`WORKFLOW_NVLINK_ERR`, XID 74: decode the registers, reset the GPU, reboot if the links
//! stay down) a GPU reset; `RESTART_APP` a restart of the job (the user's); `IGNORE` nothing.
//! An XID this table does not hold is drained and repaired: the catalog is the place to look.

use crate::core::{Action, Remedy};

/// NVIDIA's immediate action for `xid`, as an action and whose problem it is.
pub fn xid_remedy(xid: u32) -> Remedy {
    match xid {
        // RESTART_BM: the GPU has fallen off the bus.
        79 => Remedy::node(Action::Reboot),
        // WORKFLOW_XID_48 (double-bit ECC), WORKFLOW_NVLINK_ERR (74), and RESET_GPU: 46 (GPU
        // stopped processing), 62 (micro-controller halt), 64 (row remap failure), 95
        // (uncontained ECC error), 109 (context switch timeout), 110 (security fault), 119/120
        // (GSP), 136 (link training), 140 (ECC unrecovered), 143 (initialisation), 158 (fatal
        // timeout).
        48 | 74 | 46 | 62 | 64 | 95 | 109 | 110 | 119 | 120 | 136 | 140 | 143 | 158 => {
            Remedy::node(Action::ResetGpu)
        }
        // RESTART_APP: application faults (8, 11, 13, 25, 31, 32) and a contained ECC error (94).
        8 | 11 | 13 | 25 | 31 | 32 | 94 => Remedy::user(Action::RestartJob),
        // IGNORE: a row remapped (63), a high single-bit ECC rate (92), GPU stopped processing
        // after an application fault (43), and 45, the cleanup after another XID (follow that one).
        63 | 92 | 43 | 45 => Remedy::node(Action::None),
        _ => Remedy::node(Action::DrainAndRepair),
    }
}

/// NVIDIA's words for the immediate action, as the evidence names it.
pub fn nvidia_bucket(xid: u32) -> &'static str {
    match xid {
        79 => "RESTART_BM",
        48 => "WORKFLOW_XID_48",
        74 => "WORKFLOW_NVLINK_ERR",
        45 => "WORKFLOW_XID_45",
        46 | 62 | 64 | 95 | 109 | 110 | 119 | 120 | 136 | 140 | 143 | 158 => "RESET_GPU",
        8 | 11 | 13 | 25 | 31 | 32 | 94 => "RESTART_APP",
        63 | 92 | 43 => "IGNORE",
        _ => "see the catalog",
    }
}

/// The remedy for several XIDs on one GPU: the costliest of theirs (the node's on a tie).
pub fn worst(xids: impl IntoIterator<Item = u32>) -> Remedy {
    xids.into_iter()
        .map(xid_remedy)
        .max_by_key(|r| (r.action, r.problem == crate::core::Problem::Node))
        .unwrap_or(Remedy::node(Action::None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_nvidias_immediate_action_column() {
        assert_eq!(xid_remedy(79), Remedy::node(Action::Reboot));
        for x in [48, 46, 62, 64, 95, 119, 120, 74] {
            assert_eq!(xid_remedy(x), Remedy::node(Action::ResetGpu), "XID {x}");
        }
        assert_eq!(xid_remedy(94), Remedy::user(Action::RestartJob));
        assert_eq!(xid_remedy(63).action, Action::None);
        assert_eq!(xid_remedy(92).action, Action::None);
        assert_eq!(xid_remedy(57), Remedy::node(Action::DrainAndRepair));
        assert_eq!(nvidia_bucket(48), "WORKFLOW_XID_48");
    }

    #[test]
    fn several_xids_take_the_costliest() {
        assert_eq!(worst([63, 48, 79]), Remedy::node(Action::Reboot));
        assert_eq!(worst([92, 63]), Remedy::node(Action::None));
        assert_eq!(worst([]), Remedy::node(Action::None));
    }
}
