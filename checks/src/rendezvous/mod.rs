//! The join and the master's names: ranks that never joined or were refused, how the master's
//! name resolved (FQDN, elsewhere, late), the launcher's master, two ranks on one host and
//! software versions that differ across the nodes.

pub mod catalog;
pub mod fqdn;
pub mod hosts;
pub mod ids;
pub mod joining;
pub mod launcher_master;
pub mod master_name;
pub mod ranks;
pub mod refused;
pub mod resolution;
pub mod verdict;
pub mod versions;

pub use joining::{Dialed, MasterIsSelf, ThisNode, refused_here};
pub use master_name::master_never_resolved;
pub use ranks::{NOT_PREFLIGHT, master_unreachable, with_reverse_name};

use crate::core::{ClusterInput, Finding};

/// The join's and the names' judgments, in report order.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = vec![ranks::rendezvous(input)];
    out.extend(refused::refused(input));
    out.push(resolution::master_resolution(input));
    out.push(fqdn::fqdn(input));
    out.push(master_name::master_late(input));
    out.push(launcher_master::launcher_master(input));
    out.extend(master_name::master_elsewhere(input));
    out.extend(hosts::duplicate_hosts(input));
    out.extend(versions::versions(input));
    out
}
