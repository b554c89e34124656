//! Local firewall: nftables / iptables rulesets, ufw and firewalld state.

use crate::model::FirewallFacts;
use crate::root::Root;

pub fn probe(_root: &Root) -> FirewallFacts {
    FirewallFacts::default()
}
