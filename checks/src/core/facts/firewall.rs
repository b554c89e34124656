//! Firewall facts: the rules of each tool found (iptables, nftables, ufw, firewalld) and NAT.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct FirewallFacts {
    /// "nftables" or "iptables" when rules were read.
    pub backend: Option<String>,
    /// Why the rules could not be read (not root, tool missing).
    pub read_error: Option<String>,
    /// The INPUT hook chain(s) in evaluation order, flattened.
    pub input: Option<InputChain>,
    /// `ufw status` first line ("active"/"inactive") when ufw is installed.
    pub ufw: Option<String>,
    /// firewalld state ("running"/"not running") when installed.
    pub firewalld: Option<String>,
    /// The OUTPUT hook chain(s) in evaluation order, flattened: what decides the new
    /// connections this node opens (iptables OUTPUT, nftables output hooks; ufw's and
    /// firewalld's egress rules live there too). None when not read (old facts files).
    pub output: Option<InputChain>,
    /// The IPv6 input path (ip6tables INPUT, nftables `ip6`/`inet` input hooks); None when not read.
    pub input6: Option<InputChain>,
    /// The IPv6 output path (ip6tables OUTPUT, nftables `ip6`/`inet` output hooks); None when not read.
    pub output6: Option<InputChain>,
    /// ufw's default outgoing policy (`DEFAULT_OUTPUT_POLICY` in /etc/default/ufw:
    /// "accept", "drop", "reject") when ufw is installed.
    pub ufw_outgoing: Option<String>,
    /// The nat table's REDIRECT and DNAT rules on the output and prerouting hooks, in order:
    /// what sends this node's own connections (output) or the connections arriving at it
    /// (prerouting) somewhere other than where they were addressed (a mesh sidecar, a
    /// transparent proxy). Empty when none, or when not read (`read_error`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nat: Vec<NatRule>,
}

/// One REDIRECT or DNAT rule of the nat table.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NatRule {
    /// "output" (connections this node opens) or "prerouting" (connections arriving).
    pub hook: String,
    /// "REDIRECT" (to a port of this node) or "DNAT" (to another address).
    pub target: String,
    /// The rule's matches (protocol, ports, addresses, conditions); its action is `other`.
    pub matches: FwRule,
    /// Where it sends the connection (`--to-ports 15001`, `--to-destination 10.0.0.9:80`), when shown.
    pub to: Option<String>,
}

/// A simplified view of the input path: the policy and the rules that can decide a TCP packet.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct InputChain {
    /// "accept" or "drop".
    pub policy: String,
    pub rules: Vec<FwRule>,
    /// The base chain as the tool names it: "filter INPUT" (iptables), "inet filter input" (nftables).
    pub name: Option<String>,
    /// Further input-hook base chains (other nftables tables, later priority). A packet this
    /// chain accepts must still pass each of them; a drop anywhere is final.
    pub then: Vec<InputChain>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum FwAction {
    Accept,
    Drop,
    Reject,
    #[default]
    Other,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct FwRule {
    pub action: FwAction,
    /// "tcp", "udp", or None for any protocol.
    pub protocol: Option<String>,
    /// Destination port ranges (inclusive); empty means any port.
    pub dports: Vec<(u16, u16)>,
    /// Input interface match, if any ("lo", "eth0").
    pub in_interface: Option<String>,
    /// Output interface match, if any (OUTPUT chains: "lo", "eth0").
    pub out_interface: Option<String>,
    /// Source match, if any.
    pub source: Option<String>,
    /// Connection-tracking states matched ("ESTABLISHED,RELATED"), if any.
    pub ct_state: Option<String>,
    /// The rule as the tool printed it (nftables: rebuilt from `nft -j` in nft syntax).
    pub text: String,
    /// Destination address match, if any.
    pub destination: Option<String>,
    /// Other matches the checker cannot judge (`-m limit`, `--sport 67`, negations,
    /// `xt match conntrack`): a rule with any of them is conditional.
    pub conditions: Vec<String>,
    /// The user chain this rule was flattened from (`ufw-user-input`), None for the base chain.
    pub chain: Option<String>,
}
