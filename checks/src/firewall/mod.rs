//! `firewall.rules`: would the local firewall let a remote node reach the master port and NCCL's high ports, and let this node's own connections out?
//!
//! The input path is evaluated for a new TCP connection from another host (not
//! loopback), the output path for a new TCP connection this node opens to another
//! host: rules in order, first applicable unconditional verdict wins, else the
//! chain policy; a packet accepted by one nftables base chain must still pass the
//! later ones ([`InputChain::then`]).

pub mod catalog;
pub mod ids;
pub mod probe;

use crate::core::CheckContext;
use crate::core::{
    Finding, FirewallFacts, Fix, FwAction, FwRule, IfAddr, InputChain, NodeFacts, Status,
};
use std::net::{IpAddr, Ipv4Addr};

pub use crate::firewall::ids::RULES as ID;

/// Linux's default ephemeral port range (`net.ipv4.ip_local_port_range`): NCCL's
/// bootstrap and socket transport listen on random ports from it.
pub const NCCL_PORTS: (u16, u16) = (32768, 60999);

const DEFAULT_MASTER_PORT: u16 = 29500;
const SUBNET_PLACEHOLDER: &str = "<cluster-subnet>";

/// Whether a rule decides a new remote TCP connection to one port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applies {
    No,
    Yes,
    /// Only for some sources or interfaces, or with matches we cannot judge.
    Conditional,
}

/// The outcome for one port.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub accepted: bool,
    /// The rule that decided, None when a chain policy did.
    pub rule: Option<FwRule>,
    /// The base chain that decided (the one that dropped, or the first one when accepted).
    pub chain: Option<String>,
}

pub fn check(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let port = master_port(facts, ctx);
    let subnet = subnet_of(facts);
    // A rule that accepts the cluster's network (its fix: `-s <subnet> -j ACCEPT`) decides every
    // connection between the nodes, as if it had no source match.
    let fw = &for_cluster(&facts.firewall, &subnet);
    let finding = match &fw.input {
        Some(input) => judge(fw, input, port, &subnet),
        None => unreadable(fw, port, &subnet),
    };
    vec![finding]
}

/// `fw` as the other nodes of the cluster meet it: an input rule whose only address match is a
/// source covering the cluster's `subnet` (an output rule: a destination covering it) applies
/// to every connection between the nodes, so it is judged without that match.
fn for_cluster(fw: &FirewallFacts, subnet: &str) -> FirewallFacts {
    let Some(net) = parse_v4_net(subnet) else {
        return fw.clone();
    };
    let widen = |chain: &InputChain, pick: fn(&mut FwRule) -> &mut Option<String>| {
        let widen_rules = |rules: &mut Vec<FwRule>| {
            for r in rules {
                let covers = pick(r)
                    .as_deref()
                    .and_then(parse_v4_net)
                    .is_some_and(|outer| contains(outer, net));
                if covers {
                    *pick(r) = None;
                }
            }
        };
        let mut c = chain.clone();
        widen_rules(&mut c.rules);
        for link in c.then.iter_mut() {
            widen_rules(&mut link.rules);
        }
        c
    };
    let mut out = fw.clone();
    out.input = fw.input.as_ref().map(|c| widen(c, |r| &mut r.source));
    out.output = fw.output.as_ref().map(|c| widen(c, |r| &mut r.destination));
    out
}

/// `10.1.0.0/16` (or a bare address, a /32) as (network, prefix).
fn parse_v4_net(s: &str) -> Option<(u32, u32)> {
    let (addr, prefix) = match s.trim().split_once('/') {
        Some((a, p)) => (a, p.parse::<u32>().ok().filter(|p| *p <= 32)?),
        None => (s.trim(), 32),
    };
    let a: Ipv4Addr = addr.parse().ok()?;
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    Some((u32::from(a) & mask, prefix))
}

/// Whether network `outer` holds all of network `inner`.
fn contains(outer: (u32, u32), inner: (u32, u32)) -> bool {
    let mask = u32::MAX.checked_shl(32 - outer.1).unwrap_or(0);
    outer.1 <= inner.1 && inner.0 & mask == outer.0
}

fn master_port(facts: &NodeFacts, ctx: &CheckContext) -> u16 {
    [ctx.master_port, facts.ports.port]
        .into_iter()
        .find(|p| *p != 0)
        .unwrap_or(DEFAULT_MASTER_PORT)
}

/// Does the rule decide a new TCP connection from a remote host to `port`?
pub fn applies(rule: &FwRule, port: u16) -> Applies {
    if rule.protocol.as_deref().is_some_and(|p| p != "tcp") {
        return Applies::No;
    }
    if !rule.dports.is_empty() && !rule.dports.iter().any(|(a, b)| *a <= port && port <= *b) {
        return Applies::No;
    }
    if rule.in_interface.as_deref().is_some_and(is_loopback)
        || rule.out_interface.as_deref().is_some_and(is_loopback)
    {
        return Applies::No;
    }
    if rule.ct_state.as_deref().is_some_and(|s| !includes_new(s)) {
        return Applies::No;
    }
    let conditional = rule.in_interface.is_some()
        || rule.out_interface.is_some()
        || rule.source.as_deref().is_some_and(|s| !is_any_address(s))
        || rule
            .destination
            .as_deref()
            .is_some_and(|d| !is_any_address(d))
        || !rule.conditions.is_empty();
    if conditional {
        Applies::Conditional
    } else {
        Applies::Yes
    }
}

fn is_loopback(iface: &str) -> bool {
    matches!(iface.trim_matches('"'), "lo" | "lo+")
}

fn includes_new(states: &str) -> bool {
    states
        .split(|c: char| c == ',' || c == '{' || c == '}' || c.is_whitespace())
        .any(|s| s.eq_ignore_ascii_case("new"))
}

fn is_any_address(a: &str) -> bool {
    matches!(a, "0.0.0.0/0" | "::/0")
}

fn is_verdict(rule: &FwRule) -> bool {
    matches!(
        rule.action,
        FwAction::Accept | FwAction::Drop | FwAction::Reject
    )
}

fn chains(input: &InputChain) -> impl Iterator<Item = &InputChain> {
    std::iter::once(input).chain(input.then.iter())
}

fn policy_drops(chain: &InputChain) -> bool {
    matches!(chain.policy.as_str(), "drop" | "reject")
}

/// One base chain: first applicable unconditional verdict, else the policy.
fn decide_chain(chain: &InputChain, port: u16) -> (bool, Option<FwRule>) {
    chain
        .rules
        .iter()
        .find(|r| is_verdict(r) && applies(r, port) == Applies::Yes)
        .map(|r| (r.action == FwAction::Accept, Some(r.clone())))
        .unwrap_or((!policy_drops(chain), None))
}

/// The whole input path for one port.
pub fn decide(input: &InputChain, port: u16) -> Verdict {
    let mut first_accept: Option<Verdict> = None;
    for chain in chains(input) {
        let (accepted, rule) = decide_chain(chain, port);
        let verdict = Verdict {
            accepted,
            rule,
            chain: chain.name.clone(),
        };
        if !accepted {
            return verdict;
        }
        let better = first_accept
            .as_ref()
            .is_none_or(|v| v.rule.is_none() && verdict.rule.is_some());
        if better {
            first_accept = Some(verdict);
        }
    }
    first_accept.unwrap_or(Verdict {
        accepted: true,
        rule: None,
        chain: None,
    })
}

/// True when anything filters input: a drop policy or any drop/reject rule.
pub fn is_filtered(input: &InputChain) -> bool {
    chains(input).any(|c| {
        policy_drops(c)
            || c.rules
                .iter()
                .any(|r| matches!(r.action, FwAction::Drop | FwAction::Reject))
    })
}

/// Every port in lo..=hi is accepted. Verdicts only change at rule port-range
/// edges, so checking each distinct edge inside the range is exact.
pub fn range_open(input: &InputChain, lo: u16, hi: u16) -> bool {
    let mut points = vec![lo];
    for rule in chains(input).flat_map(|c| c.rules.iter()) {
        for (a, b) in &rule.dports {
            points.push(*a);
            points.push(b.saturating_add(1));
        }
    }
    // Flattened chains repeat a user chain's ranges once per jump into it.
    points.sort_unstable();
    points.dedup();
    points
        .into_iter()
        .filter(|p| (lo..=hi).contains(p))
        .all(|p| decide(input, p).accepted)
}

/// Accept rules that would let the port in only for some sources or interfaces.
fn conditional_allows(input: &InputChain, port: u16) -> Vec<String> {
    chains(input)
        .flat_map(|c| c.rules.iter())
        .filter(|r| r.action == FwAction::Accept && applies(r, port) == Applies::Conditional)
        .map(|r| r.text.clone())
        .collect()
}

fn judge(fw: &FirewallFacts, input: &InputChain, port: u16, subnet: &str) -> Finding {
    let master = decide(input, port);
    let high_open = range_open(input, NCCL_PORTS.0, NCCL_PORTS.1);
    let egress = fw.output.as_ref().map(|o| Egress::judge(o, port));
    let egress_blocked = egress.as_ref().is_some_and(Egress::blocks);
    let out_note = match &egress {
        Some(e) if !e.filtered => "; outgoing connections are not filtered",
        Some(_) => "; it lets this node's new connections out",
        None => "",
    };
    let finding = if !is_filtered(input) && !egress_blocked {
        Finding::new(
            ID,
            Status::Pass,
            port.to_string(),
            format!(
                "the local firewall does not filter input ({} policy accept, no drop or reject rules){out_note}",
                backend_name(fw)
            ),
        )
    } else if master.accepted && high_open && !egress_blocked {
        Finding::new(
            ID,
            Status::Pass,
            port.to_string(),
            format!(
                "the {} rules allow port {port}/tcp and NCCL's ports {}-{}{out_note}",
                backend_name(fw),
                NCCL_PORTS.0,
                NCCL_PORTS.1
            ),
        )
    } else {
        blocked(fw, input, port, subnet, &master, high_open, egress.as_ref())
    };
    let mut finding = finding
        .with("backend", &fw.backend)
        .with("policy", &input.policy)
        .with("chain", &input.name)
        .with("master_port", port)
        .with("master_port_allowed", master.accepted)
        .with("deciding_rule", deciding_text(&master))
        .with("deciding_chain", &master.chain)
        .with("nccl_ports", format!("{}-{}", NCCL_PORTS.0, NCCL_PORTS.1))
        .with("nccl_ports_allowed", high_open)
        .with("ufw", &fw.ufw)
        .with("firewalld", &fw.firewalld);
    if let (Some(e), Some(out)) = (&egress, &fw.output) {
        finding = finding
            .with("output_chain", &out.name)
            .with("output_policy", &out.policy)
            .with("output_master_port_allowed", e.master.accepted)
            .with("output_deciding_rule", deciding_text(&e.master))
            .with("output_nccl_ports_allowed", e.high_open);
    }
    finding.with("ufw_outgoing", &fw.ufw_outgoing)
}

/// The output path's verdicts for a new connection this node opens.
struct Egress {
    filtered: bool,
    master: Verdict,
    high_open: bool,
    chain: Option<String>,
}

impl Egress {
    fn judge(output: &InputChain, port: u16) -> Egress {
        Egress {
            filtered: is_filtered(output),
            master: decide(output, port),
            high_open: range_open(output, NCCL_PORTS.0, NCCL_PORTS.1),
            chain: output.name.clone(),
        }
    }

    fn blocks(&self) -> bool {
        self.filtered && (!self.master.accepted || !self.high_open)
    }
}

/// Which side of a connection a firewall rule acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// New connections arriving at this node (INPUT, input hooks).
    Incoming,
    /// New connections this node opens (OUTPUT, output hooks).
    Outgoing,
}

impl Direction {
    /// "incoming" / "outgoing".
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Incoming => "incoming",
            Direction::Outgoing => "outgoing",
        }
    }

    /// The iptables chain a rule for this direction goes in.
    pub fn iptables_chain(self) -> &'static str {
        match self {
            Direction::Incoming => "INPUT",
            Direction::Outgoing => "OUTPUT",
        }
    }
}

/// The chain(s) of one side and family: IPv6 connections are judged by the IPv6 rules only.
fn side_chain(fw: &FirewallFacts, dir: Direction, v6: bool) -> Option<&InputChain> {
    match (dir, v6) {
        (Direction::Incoming, false) => fw.input.as_ref(),
        (Direction::Outgoing, false) => fw.output.as_ref(),
        (Direction::Incoming, true) => fw.input6.as_ref(),
        (Direction::Outgoing, true) => fw.output6.as_ref(),
    }
}

/// What this node's rules decide for a new TCP connection to `port` in `dir` (`v6`: an IPv6 one); None when
/// the rules of that side were not read. Where only ufw's outgoing default is known
/// (rules unreadable, ufw active), a deny or reject default decides.
pub fn path_verdict(fw: &FirewallFacts, dir: Direction, port: u16, v6: bool) -> Option<Verdict> {
    let chain = side_chain(fw, dir, v6);
    if let Some(chain) = chain {
        return Some(decide(chain, port));
    }
    let ufw_denies_out = dir == Direction::Outgoing
        && fw.ufw.as_deref() == Some("active")
        && matches!(fw.ufw_outgoing.as_deref(), Some("deny" | "drop" | "reject"));
    ufw_denies_out.then(|| Verdict {
        accepted: false,
        rule: None,
        chain: Some("ufw default outgoing policy".into()),
    })
}

/// The rule (or policy) a verdict came from, as text: "policy drop", "-A OUTPUT ... -j DROP".
pub fn verdict_text(v: &Verdict) -> String {
    let text = deciding_text(v);
    match &v.chain {
        Some(c) if v.rule.is_none() => format!("{c} {text}"),
        _ => text,
    }
}

/// Commands that make a node accept every new connection with `peer` (a prefix) in
/// `dir`: from it (incoming) or to it (outgoing), for the firewall the node runs and
/// the address family. Without facts: plain iptables/ip6tables.
pub fn accept_peer_commands(fw: Option<&FirewallFacts>, dir: Direction, peer: &str) -> Vec<String> {
    let v6 = peer.contains(':');
    let iptables = if v6 { "ip6tables" } else { "iptables" };
    let flag = match dir {
        Direction::Incoming => "-s",
        Direction::Outgoing => "-d",
    };
    let plain = vec![format!(
        "{iptables} -I {} {flag} {peer} -j ACCEPT",
        dir.iptables_chain()
    )];
    let Some(fw) = fw else {
        return plain;
    };
    let family = if v6 { "ipv6" } else { "ipv4" };
    match (FixTool::pick_for(fw, dir, v6), dir) {
        (FixTool::Ufw, Direction::Incoming) => vec![format!("ufw allow from {peer}")],
        (FixTool::Ufw, Direction::Outgoing) => vec![format!("ufw allow out to {peer}")],
        (FixTool::Firewalld, Direction::Incoming) => vec![
            format!("firewall-cmd --zone=trusted --add-source={peer}"),
            format!("firewall-cmd --permanent --zone=trusted --add-source={peer}"),
        ],
        (FixTool::Firewalld, Direction::Outgoing) => vec![
            format!(
                "firewall-cmd --direct --add-rule {family} filter OUTPUT 0 -d {peer} -j ACCEPT"
            ),
            format!(
                "firewall-cmd --permanent --direct --add-rule {family} filter OUTPUT 0 -d {peer} -j ACCEPT"
            ),
        ],
        (FixTool::Nft(chain), _) => {
            let nft_family = if v6 { "ip6" } else { "ip" };
            let field = match dir {
                Direction::Incoming => "saddr",
                Direction::Outgoing => "daddr",
            };
            vec![format!(
                "nft insert rule {chain} {nft_family} {field} {peer} accept"
            )]
        }
        (FixTool::Iptables, _) => plain,
    }
}

fn deciding_text(v: &Verdict) -> String {
    match &v.rule {
        Some(r) => r.text.clone(),
        None if v.accepted => "policy accept".into(),
        None => "policy drop".into(),
    }
}

fn backend_name(fw: &FirewallFacts) -> &str {
    fw.backend.as_deref().unwrap_or("firewall")
}

fn blocked(
    fw: &FirewallFacts,
    input: &InputChain,
    port: u16,
    subnet: &str,
    master: &Verdict,
    high_open: bool,
    egress: Option<&Egress>,
) -> Finding {
    let mut problems = Vec::new();
    let in_blocks = !master.accepted || !high_open;
    if !master.accepted {
        let conditional = conditional_allows(input, port);
        let only = if conditional.is_empty() {
            String::new()
        } else {
            format!(" (allowed only conditionally: {})", conditional.join("; "))
        };
        problems.push(format!(
            "drops new connections to master port {port}/tcp from other nodes (decided by `{}`){only}; the rendezvous would time out after 900 s",
            deciding_text(master)
        ));
    }
    if !high_open {
        problems.push(format!(
            "does not plainly allow NCCL's random high ports ({}-{}), so NCCL's connections between nodes would time out",
            NCCL_PORTS.0, NCCL_PORTS.1
        ));
    }
    let egress = egress.filter(|e| e.blocks());
    if let Some(e) = egress {
        let chain = e.chain.as_deref().unwrap_or("output");
        if !e.master.accepted {
            problems.push(format!(
                "drops this node's new outgoing connections to port {port}/tcp in its output path ({chain}, decided by `{}`), so this node could not reach the master",
                deciding_text(&e.master)
            ));
        }
        if !e.high_open {
            problems.push(format!(
                "does not plainly let this node's new outgoing connections to NCCL's random high ports ({}-{}) out ({chain}), so its NCCL connections to the other nodes would time out",
                NCCL_PORTS.0, NCCL_PORTS.1
            ));
        }
    }
    let summary = format!(
        "the {} firewall {}",
        backend_name(fw),
        problems.join("; and it ")
    );
    let tool = FixTool::pick(fw, master.chain.as_deref().or(input.name.as_deref()));
    let mut fix = if in_blocks {
        tool.fix(port, subnet, !master.accepted, !high_open)
    } else {
        Fix::new(String::new())
    };
    if let Some(e) = egress {
        let out_tool = FixTool::pick(fw, e.master.chain.as_deref().or(e.chain.as_deref()));
        let hint = format!(
            "Let this node's new connections out to the other nodes: {} (its output path drops them{}).",
            if e.master.accepted {
                format!(
                    "the whole cluster subnet ({subnet}), since NCCL connects to random high ports"
                )
            } else {
                format!("port {port}/tcp and the whole cluster subnet ({subnet})")
            },
            if in_blocks {
                ""
            } else {
                "; incoming connections are allowed"
            }
        );
        fix.hint = [fix.hint.as_str(), hint.as_str()]
            .iter()
            .filter(|h| !h.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let mut out_cmds = Vec::new();
        if !e.master.accepted {
            out_cmds.push(out_tool.allow_out_port(port));
        }
        out_cmds.push(out_tool.allow_out_subnet(subnet));
        // The rules first (the input side's, then these), then what keeps them all.
        let keeps = |c: &String| {
            c.contains(" >> /etc/") || c.contains(" > /etc/") || c.starts_with("nft -c ")
        };
        let mut rules: Vec<String> = fix.commands.iter().filter(|c| !keeps(c)).cloned().collect();
        rules.extend(out_cmds);
        let mut all = rules.clone();
        if matches!(out_tool, FixTool::Nft(_) | FixTool::Iptables) {
            all.extend(out_tool.persist(&rules));
        }
        fix.commands = all;
    }
    Finding::new(ID, Status::Warn, port.to_string(), summary).fix(fix)
}

/// Rules unreadable: warn when a firewall manager is known to be active, else skip.
fn unreadable(fw: &FirewallFacts, port: u16, subnet: &str) -> Finding {
    let why = fw
        .read_error
        .clone()
        .unwrap_or_else(|| "no firewall facts were collected".into());
    let active = active_manager(fw);
    let out_denied =
        path_verdict(fw, Direction::Outgoing, port, false).is_some_and(|v| !v.accepted);
    let finding = match active {
        Some(_) if out_denied => Finding::new(
            ID,
            Status::Warn,
            port.to_string(),
            format!(
                "ufw is active with default outgoing policy {} and its rules could not be read ({why}): it drops this node's new outgoing connections (to port {port}/tcp and NCCL's high ports) unless a rule allows them, and by default incoming ones too",
                fw.ufw_outgoing.as_deref().unwrap_or("deny")
            ),
        )
        .fix({
            let mut fix = FixTool::Ufw.fix(port, subnet, true, true);
            fix.hint.push_str(&format!(
                " Let this node's connections to the other nodes out too ({subnet})."
            ));
            fix.commands.push(FixTool::Ufw.allow_out_subnet(subnet));
            fix
        }),
        Some(manager) => Finding::new(
            ID,
            Status::Warn,
            port.to_string(),
            format!(
                "{manager} is active but its rules could not be read ({why}); by default it drops incoming connections, including port {port}/tcp and NCCL's high ports"
            ),
        )
        .fix(FixTool::pick(fw, None).fix(port, subnet, true, true)),
        None => Finding::new(
            ID,
            Status::Skip,
            port.to_string(),
            format!("firewall rules could not be read: {why}"),
        ),
    };
    finding
        .with("read_error", &fw.read_error)
        .with("ufw_outgoing", &fw.ufw_outgoing)
        .with("master_port", port)
        .with("ufw", &fw.ufw)
        .with("firewalld", &fw.firewalld)
}

fn active_manager(fw: &FirewallFacts) -> Option<&'static str> {
    if fw.ufw.as_deref() == Some("active") {
        Some("ufw")
    } else if fw.firewalld.as_deref() == Some("running") {
        Some("firewalld")
    } else {
        None
    }
}

/// Which tool the fix commands are written for.
#[derive(Clone, Debug, PartialEq)]
enum FixTool {
    Ufw,
    Firewalld,
    /// "family table chain" to insert into.
    Nft(String),
    Iptables,
}

impl FixTool {
    /// The tool for a fix in `dir`: nftables commands go into that side's base chain.
    fn pick_for(fw: &FirewallFacts, dir: Direction, v6: bool) -> FixTool {
        let chain = side_chain(fw, dir, v6).and_then(|c| c.name.as_deref());
        match (FixTool::pick(fw, chain), dir) {
            (FixTool::Nft(c), Direction::Outgoing) if c == "inet filter input" => {
                FixTool::Nft("inet filter output".into())
            }
            (tool, _) => tool,
        }
    }

    fn pick(fw: &FirewallFacts, chain: Option<&str>) -> FixTool {
        match active_manager(fw) {
            Some("ufw") => FixTool::Ufw,
            Some(_) => FixTool::Firewalld,
            None if fw.backend.as_deref() == Some("nftables") => FixTool::Nft(
                chain
                    .filter(|c| c.split_whitespace().count() == 3)
                    .unwrap_or("inet filter input")
                    .to_string(),
            ),
            None => FixTool::Iptables,
        }
    }

    fn fix(&self, port: u16, subnet: &str, master: bool, high: bool) -> Fix {
        let hint = format!(
            "Allow port {port}/tcp{} from the other nodes; NCCL listens on random high ports, so allow the whole cluster subnet ({subnet}: the network your nodes share).",
            if master { "" } else { " (already allowed)" }
        );
        let mut fix = Fix::new(hint);
        let mut commands = Vec::new();
        if master {
            commands.push(self.allow_port(port));
        }
        if high {
            commands.push(self.allow_subnet(subnet));
        }
        if matches!(self, FixTool::Nft(_) | FixTool::Iptables) {
            let kept = self.persist(&commands);
            commands.extend(kept);
        }
        for c in commands {
            fix = fix.command(c);
        }
        fix
    }

    fn allow_port(&self, port: u16) -> String {
        match self {
            FixTool::Ufw => format!("ufw allow {port}/tcp"),
            FixTool::Firewalld => {
                format!("firewall-cmd --permanent --add-port={port}/tcp && firewall-cmd --reload")
            }
            FixTool::Nft(chain) => format!("nft insert rule {chain} tcp dport {port} accept"),
            FixTool::Iptables => format!("iptables -I INPUT -p tcp --dport {port} -j ACCEPT"),
        }
    }

    fn allow_subnet(&self, subnet: &str) -> String {
        match self {
            FixTool::Ufw => format!("ufw allow from {subnet}"),
            FixTool::Firewalld => format!(
                "firewall-cmd --permanent --zone=trusted --add-source={subnet} && firewall-cmd --reload"
            ),
            FixTool::Nft(chain) => format!("nft insert rule {chain} ip saddr {subnet} accept"),
            FixTool::Iptables => format!("iptables -I INPUT -s {subnet} -j ACCEPT"),
        }
    }

    fn allow_out_port(&self, port: u16) -> String {
        match self {
            FixTool::Ufw => format!("ufw allow out {port}/tcp"),
            FixTool::Firewalld => format!(
                "firewall-cmd --permanent --direct --add-rule ipv4 filter OUTPUT 0 -p tcp --dport {port} -j ACCEPT && firewall-cmd --reload"
            ),
            FixTool::Nft(chain) => format!("nft insert rule {chain} tcp dport {port} accept"),
            FixTool::Iptables => format!("iptables -I OUTPUT -p tcp --dport {port} -j ACCEPT"),
        }
    }

    fn allow_out_subnet(&self, subnet: &str) -> String {
        match self {
            FixTool::Ufw => format!("ufw allow out to {subnet}"),
            FixTool::Firewalld => format!(
                "firewall-cmd --permanent --direct --add-rule ipv4 filter OUTPUT 0 -d {subnet} -j ACCEPT && firewall-cmd --reload"
            ),
            FixTool::Nft(chain) => format!("nft insert rule {chain} ip daddr {subnet} accept"),
            FixTool::Iptables => format!("iptables -I OUTPUT -d {subnet} -j ACCEPT"),
        }
    }

    /// What keeps `commands` (this tool's, just printed) over a reboot, the way the tool does:
    /// nftables' own file gets the same rules appended (the operator's file is kept, and `nft
    /// -c` checks it still loads); iptables-persistent's file is written from the live rules,
    /// as `netfilter-persistent save` writes it.
    fn persist(&self, commands: &[String]) -> Vec<String> {
        match self {
            FixTool::Nft(_) => {
                let mut out: Vec<String> = commands
                    .iter()
                    .filter_map(|c| c.strip_prefix("nft "))
                    .map(|rule| {
                        format!(
                            "echo {} >> /etc/nftables.conf",
                            crate::infra::shellword::quote(rule)
                        )
                    })
                    .collect();
                out.push("nft -c -f /etc/nftables.conf".into());
                out
            }
            _ => vec!["iptables-save > /etc/iptables/rules.v4".into()],
        }
    }
}

/// This node's IPv4 network on its default-route interface (else the first physical
/// one with an address), as "10.1.0.0/16".
fn subnet_of(facts: &NodeFacts) -> String {
    let ifaces = &facts.net.interfaces;
    let with_v4 = |i: &&crate::core::Interface| {
        !i.is_virtual() && i.ipv4.iter().any(|a| crate::net::is_usable_addr(&a.addr))
    };
    // In a container or a network namespace the data NIC is a veth: the node's own network
    // still, where no physical one has an address (never a bridge it hosts, docker0 ...).
    let data_veth = |i: &&crate::core::Interface| {
        i.kind == crate::core::IfKind::Veth
            && !crate::core::is_virtual_name(&i.name)
            && i.ipv4.iter().any(|a| crate::net::is_usable_addr(&a.addr))
    };
    ifaces
        .iter()
        .filter(with_v4)
        .find(|i| i.default_route)
        .or_else(|| ifaces.iter().find(with_v4))
        .or_else(|| ifaces.iter().filter(data_veth).find(|i| i.default_route))
        .or_else(|| ifaces.iter().find(data_veth))
        .and_then(|i| i.ipv4.iter().find(|a| crate::net::is_usable_addr(&a.addr)))
        .and_then(network_of)
        .unwrap_or_else(|| SUBNET_PLACEHOLDER.to_string())
}

fn network_of(a: &IfAddr) -> Option<String> {
    let IpAddr::V4(v4) = a.addr else {
        return None;
    };
    let prefix = u32::from(a.prefix.min(32));
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    Some(format!(
        "{}/{}",
        Ipv4Addr::from(u32::from(v4) & mask),
        prefix
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IfKind, Interface};
    use crate::firewall::probe::{parse_iptables_save, parse_nft_json};

    fn fixture(name: &str) -> String {
        crate::infra::testutil::fixture_text(&format!("firewall/{name}"))
    }

    /// Found by the property tests (checks/tests/props.rs, `iptables_save_near_grammar`): a
    /// chain jumped to from two rules of a self-jumping INPUT flattened to 1,433 copies of one
    /// rule, and range_open decided every copy's edges again, 2,866 times over every rule.
    #[test]
    fn range_open_decides_each_edge_once() {
        let text = "*filter\n:INPUT DROP [0:0]\n-A INPUT -i eth0 -j b\n-A INPUT  -j INPUT\n-A INPUT  --goto INPUT\n-A b ! -p tcp -m tcp --dport 29500 -g ACCEPT\n:INPUT ACCEPT [0:0]";
        let chain = parse_iptables_save(text).expect("a filter INPUT chain");
        assert!(chain.rules.len() > 1000);
        let copy = FwRule {
            action: FwAction::Accept,
            dports: vec![(29500, 29500)],
            in_interface: Some("eth0".into()),
            ..Default::default()
        };
        let many = InputChain {
            policy: "drop".into(),
            rules: vec![copy; 20_000],
            ..Default::default()
        };
        let start = std::time::Instant::now();
        assert!(
            range_open(&chain, 29400, 29600),
            "the last policy line says accept"
        );
        assert!(!range_open(&many, 29400, 29600));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
    }

    fn iptables(name: &str) -> FirewallFacts {
        FirewallFacts {
            backend: Some("iptables".into()),
            input: parse_iptables_save(&fixture(name)),
            ..Default::default()
        }
    }

    fn nft(name: &str) -> FirewallFacts {
        FirewallFacts {
            backend: Some("nftables".into()),
            input: parse_nft_json(&fixture(name)).ok(),
            ..Default::default()
        }
    }

    fn node(fw: FirewallFacts) -> NodeFacts {
        NodeFacts {
            firewall: fw,
            net: crate::core::NetFacts {
                interfaces: vec![Interface {
                    name: "eno1".into(),
                    kind: IfKind::Physical,
                    up: true,
                    ipv4: vec![IfAddr {
                        addr: "10.1.0.11".parse().expect("ip"),
                        prefix: 16,
                    }],
                    default_route: true,
                    ..Default::default()
                }],
                error: None,
            },
            ..Default::default()
        }
    }

    fn run(fw: FirewallFacts) -> Finding {
        run_on(fw, "10.1.0.11")
    }

    /// The check on a node at `addr`/16 (another network than the fixtures' 10.1.0.0/16 rules).
    fn run_on(fw: FirewallFacts, addr: &str) -> Finding {
        let ctx = CheckContext {
            master_port: 29500,
            ..Default::default()
        };
        let mut n = node(fw);
        n.net.interfaces[0].ipv4[0].addr = addr.parse().expect("ip");
        let out = check(&n, &ctx);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, ID);
        out[0].clone()
    }

    #[test]
    fn empty_rulesets_pass() {
        for fw in [iptables("iptables-empty.txt"), nft("nft-empty.json")] {
            let f = run(fw);
            assert_eq!(f.status, Status::Pass, "{}", f.summary);
            assert!(f.fix.is_none());
            assert_eq!(f.subject, "29500");
        }
    }

    #[test]
    fn drop_policy_with_only_ssh_warns_with_iptables_fix() {
        let f = run(iptables("iptables-drop-ssh.txt"));
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("29500/tcp"), "{}", f.summary);
        assert!(f.summary.contains("high ports"));
        assert_eq!(f.evidence["deciding_rule"], "policy drop");
        assert_eq!(f.evidence["policy"], "drop");
        assert_eq!(f.evidence["backend"], "iptables");
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands,
            vec![
                "iptables -I INPUT -p tcp --dport 29500 -j ACCEPT",
                "iptables -I INPUT -s 10.1.0.0/16 -j ACCEPT",
                "iptables-save > /etc/iptables/rules.v4",
            ]
        );
    }

    #[test]
    fn allowing_the_master_port_still_warns_about_nccl_ports() {
        let f = run(iptables("iptables-allow-29500.txt"));
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["master_port_allowed"], true);
        assert_eq!(
            f.evidence["deciding_rule"],
            "-A INPUT -p tcp -m tcp --dport 29500 -j ACCEPT"
        );
        assert!(!f.summary.contains("master port 29500/tcp"));
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands[0],
            "iptables -I INPUT -s 10.1.0.0/16 -j ACCEPT"
        );
    }

    #[test]
    fn a_range_allows_the_master_port_and_source_allows_are_conditional() {
        let fw = iptables("iptables-range.txt");
        let input = fw.input.clone().expect("chain");
        assert!(decide(&input, 29500).accepted);
        assert!(decide(&input, 29600).accepted);
        assert!(!decide(&input, 29601).accepted);
        let f = run_on(fw.clone(), "10.9.0.11");
        // High ports are open only from 10.1.0.0/16, not this node's network: not plainly
        // allowed. On 10.1.0.0/16 itself that rule lets every other node in.
        assert_eq!(run(fw).status, Status::Pass);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["nccl_ports_allowed"], false);
        assert_eq!(
            f.evidence["deciding_rule"],
            "-A INPUT -p tcp -m multiport --dports 29400:29600 -j ACCEPT"
        );
    }

    #[test]
    fn master_port_allowed_only_from_a_source_is_named() {
        let mut fw = iptables("iptables-range.txt");
        let f = {
            let ctx = CheckContext {
                master_port: 40000,
                ..Default::default()
            };
            let mut n = node(fw.clone());
            n.net.interfaces[0].ipv4[0].addr = "10.9.0.11".parse().expect("ip");
            check(&n, &ctx).remove(0)
        };
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("only conditionally"), "{}", f.summary);
        assert!(f.summary.contains("-s 10.1.0.0/16"));
        // With the subnet rule unconditional everything passes.
        if let Some(input) = fw.input.as_mut() {
            input.rules[4].source = None;
        }
        assert_eq!(run(fw).status, Status::Pass);
    }

    #[test]
    fn the_printed_fix_clears_its_own_warning() {
        // The demo's firewall: the master port accepted, every other new connection dropped.
        for fw in [iptables("iptables-range.txt"), nft("nft-allow.json")] {
            let f = run_on(fw.clone(), "10.9.0.11");
            assert_eq!(f.status, Status::Warn);
            let fix = f.fix.expect("fix");
            let rule = &fix.commands[0];
            let source = "10.9.0.0/16";
            assert!(rule.contains(source), "{rule}");
            // Applied: the accept of the node's network goes first in the chain.
            let mut applied = fw.clone();
            if let Some(input) = applied.input.as_mut() {
                input.rules.insert(
                    0,
                    FwRule {
                        action: FwAction::Accept,
                        source: Some(source.into()),
                        text: rule.clone(),
                        ..Default::default()
                    },
                );
            }
            let after = run_on(applied, "10.9.0.11");
            assert_eq!(after.status, Status::Pass, "{}", after.summary);
        }
        // A source that is one address, or another network, lets only part of the cluster in.
        let mut one = iptables("iptables-range.txt");
        if let Some(input) = one.input.as_mut() {
            input.rules.insert(
                0,
                FwRule {
                    action: FwAction::Accept,
                    source: Some("10.9.0.12".into()),
                    text: "-A INPUT -s 10.9.0.12/32 -j ACCEPT".into(),
                    ..Default::default()
                },
            );
        }
        assert_eq!(run_on(one, "10.9.0.11").status, Status::Warn);
        assert!(contains(
            parse_v4_net("10.0.0.0/8").unwrap(),
            parse_v4_net("10.9.0.0/16").unwrap()
        ));
        assert!(!contains(
            parse_v4_net("10.9.0.0/24").unwrap(),
            parse_v4_net("10.9.0.0/16").unwrap()
        ));
        assert_eq!(parse_v4_net("10.9.1.7/16"), parse_v4_net("10.9.0.0/16"));
        assert_eq!(parse_v4_net("garbage/99"), None);
    }

    #[test]
    fn a_veth_in_a_namespace_or_container_is_the_nodes_own_network() {
        let mut n = node(iptables("iptables-range.txt"));
        n.net.interfaces[0].kind = IfKind::Veth;
        n.net.interfaces[0].name = "eth0".into();
        n.net.interfaces[0].ipv4[0].addr = "10.250.1.2".parse().expect("ip");
        n.net.interfaces[0].ipv4[0].prefix = 24;
        assert_eq!(subnet_of(&n), "10.250.1.0/24");
        n.net.interfaces[0].name = "docker0".into();
        assert_eq!(subnet_of(&n), SUBNET_PLACEHOLDER);
    }

    #[test]
    fn rhel_style_reject_warns() {
        let f = run(iptables("iptables-reject.txt"));
        assert_eq!(f.status, Status::Warn);
        assert_eq!(
            f.evidence["deciding_rule"],
            "-A INPUT -j REJECT --reject-with icmp-host-prohibited"
        );
    }

    #[test]
    fn ufw_default_deny_warns_with_ufw_commands_and_allow_passes() {
        let mut fw = iptables("iptables-ufw.txt");
        fw.ufw = Some("active".into());
        let f = run(fw.clone());
        assert_eq!(f.status, Status::Warn);
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands,
            vec!["ufw allow 29500/tcp", "ufw allow from 10.1.0.0/16"]
        );
        // `ufw allow from 10.1.0.0/16` style rule and `ufw allow 29500/tcp`, unconditional here.
        let text = fixture("iptables-ufw.txt").replace(
            "-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT",
            "-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT\n-A ufw-user-input -p tcp -m tcp --dport 29500 -j ACCEPT\n-A ufw-user-input -p tcp -m multiport --dports 1024:65535 -j ACCEPT",
        );
        fw.input = parse_iptables_save(&text);
        let f = run(fw);
        assert_eq!(f.status, Status::Pass, "{}", f.summary);
    }

    #[test]
    fn firewalld_rules_warn_with_firewall_cmd() {
        let mut fw = nft("nft-firewalld.json");
        fw.firewalld = Some("running".into());
        let f = run(fw);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["deciding_rule"], "reject");
        assert_eq!(f.evidence["chain"], "inet firewalld filter_INPUT");
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands[0],
            "firewall-cmd --permanent --add-port=29500/tcp && firewall-cmd --reload"
        );
        assert!(fix.commands[1].contains("--zone=trusted --add-source=10.1.0.0/16"));
    }

    #[test]
    fn nft_ruleset_allowing_the_port_uses_nft_commands() {
        let f = run_on(nft("nft-allow.json"), "10.9.0.11");
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["master_port_allowed"], true);
        assert_eq!(
            f.evidence["deciding_rule"],
            "tcp dport { 22, 29500 } accept"
        );
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands[0],
            "nft insert rule inet filter input ip saddr 10.9.0.0/16 accept"
        );
        // Kept over a reboot by appending to nftables' own file, which is then checked.
        assert_eq!(
            fix.commands[1..],
            [
                "echo 'insert rule inet filter input ip saddr 10.9.0.0/16 accept' >> /etc/nftables.conf",
                "nft -c -f /etc/nftables.conf"
            ]
        );
        let blocked = {
            let ctx = CheckContext {
                master_port: 29700,
                ..Default::default()
            };
            let mut n = node(nft("nft-allow.json"));
            n.net.interfaces[0].ipv4[0].addr = "10.9.0.11".parse().expect("ip");
            check(&n, &ctx).remove(0)
        };
        assert_eq!(
            blocked.fix.expect("fix").commands[0],
            "nft insert rule inet filter input tcp dport 29700 accept"
        );
    }

    #[test]
    fn a_drop_in_a_later_base_chain_is_final() {
        let accept_all = InputChain {
            policy: "accept".into(),
            name: Some("ip a INPUT".into()),
            ..Default::default()
        };
        let later_drop = InputChain {
            policy: "drop".into(),
            name: Some("inet b input".into()),
            ..Default::default()
        };
        let input = InputChain {
            then: vec![later_drop],
            ..accept_all
        };
        let v = decide(&input, 29500);
        assert!(!v.accepted);
        assert_eq!(v.chain.as_deref(), Some("inet b input"));
    }

    #[test]
    fn applicability_rules() {
        let tcp = |f: fn(&mut FwRule)| {
            let mut r = FwRule {
                action: FwAction::Accept,
                protocol: Some("tcp".into()),
                ..Default::default()
            };
            f(&mut r);
            applies(&r, 29500)
        };
        assert_eq!(tcp(|_| {}), Applies::Yes);
        assert_eq!(tcp(|r| r.protocol = Some("udp".into())), Applies::No);
        assert_eq!(tcp(|r| r.in_interface = Some("lo".into())), Applies::No);
        assert_eq!(
            tcp(|r| r.in_interface = Some("eth0".into())),
            Applies::Conditional
        );
        assert_eq!(
            tcp(|r| r.ct_state = Some("RELATED,ESTABLISHED".into())),
            Applies::No
        );
        assert_eq!(
            tcp(|r| r.ct_state = Some("{ new, untracked }".into())),
            Applies::Yes
        );
        assert_eq!(tcp(|r| r.dports = vec![(1, 29499)]), Applies::No);
        assert_eq!(tcp(|r| r.source = Some("0.0.0.0/0".into())), Applies::Yes);
        assert_eq!(
            tcp(|r| r.conditions = vec!["-m limit".into()]),
            Applies::Conditional
        );
    }

    const OUTPUT_DROP: &str = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT ! -o lo -p tcp -m tcp --dport 29500 -j ACCEPT\n-A OUTPUT ! -o lo -p tcp -m tcp --dport 1024:65535 --tcp-flags FIN,SYN,RST,ACK SYN -j DROP\n-A OUTPUT ! -o lo -p tcp -m tcp --dport 1024:65535 --syn -j DROP\nCOMMIT\n";

    #[test]
    fn an_output_drop_of_high_ports_warns_with_an_output_fix() {
        let fw = FirewallFacts {
            backend: Some("iptables".into()),
            input: parse_iptables_save(OUTPUT_DROP),
            output: crate::firewall::probe::parse_iptables_save_chain(OUTPUT_DROP, "OUTPUT"),
            ..Default::default()
        };
        let f = run(fw.clone());
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(
            f.summary
                .contains("outgoing connections to NCCL's random high ports"),
            "{}",
            f.summary
        );
        assert!(!f.summary.contains("master port 29500"), "{}", f.summary);
        assert_eq!(f.evidence["output_master_port_allowed"], true);
        assert_eq!(f.evidence["output_nccl_ports_allowed"], false);
        assert_eq!(f.evidence["nccl_ports_allowed"], true);
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands,
            vec![
                "iptables -I OUTPUT -d 10.1.0.0/16 -j ACCEPT",
                "iptables-save > /etc/iptables/rules.v4"
            ]
        );
        assert!(fix.hint.contains("output path drops them"), "{}", fix.hint);
        // The same chain read as allowing everything out: pass, saying so.
        let open = FirewallFacts {
            output: parse_iptables_save("*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"),
            ..fw
        };
        let f = run(open);
        assert_eq!(f.status, Status::Pass, "{}", f.summary);
        assert!(
            f.summary.contains("outgoing connections are not filtered"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn an_nft_output_hook_drop_gets_an_nft_output_fix_and_ufw_outgoing_deny_counts() {
        let json = r#"{"nftables":[
            {"chain":{"family":"inet","table":"egress","name":"out","hook":"output","prio":0,"policy":"accept"}},
            {"rule":{"family":"inet","table":"egress","chain":"out","expr":[{"match":{"op":"!=","left":{"meta":{"key":"oifname"}},"right":"lo"}},{"match":{"op":"==","left":{"payload":{"protocol":"tcp","field":"dport"}},"right":{"range":[1024,65535]}}},{"match":{"op":"in","left":{"ct":{"key":"state"}},"right":"new"}},{"drop":null}]}}]}"#;
        let output = crate::firewall::probe::parse_nft_json_hook(json, "output").expect("parses");
        assert_eq!(output.name.as_deref(), Some("inet egress out"));
        assert!(
            output.rules[0].conditions.is_empty(),
            "{:?}",
            output.rules[0]
        );
        let fw = FirewallFacts {
            backend: Some("nftables".into()),
            input: parse_nft_json(json).ok(),
            output: Some(output),
            ..Default::default()
        };
        let f = run(fw);
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(
            f.summary.contains("master port") || f.summary.contains("to port 29500/tcp"),
            "{}",
            f.summary
        );
        let fix = f.fix.expect("fix");
        assert_eq!(
            fix.commands[0],
            "nft insert rule inet egress out tcp dport 29500 accept"
        );
        assert_eq!(
            fix.commands[1],
            "nft insert rule inet egress out ip daddr 10.1.0.0/16 accept"
        );
        // Rules unreadable, ufw active with outgoing deny: the egress is named and fixed.
        let f = run(FirewallFacts {
            ufw: Some("active".into()),
            ufw_outgoing: Some("deny".into()),
            read_error: Some("not root".into()),
            ..Default::default()
        });
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary.contains("default outgoing policy deny"),
            "{}",
            f.summary
        );
        assert!(
            f.fix
                .expect("fix")
                .commands
                .contains(&"ufw allow out to 10.1.0.0/16".to_string())
        );
    }

    #[test]
    fn accept_commands_follow_the_direction() {
        let fw = FirewallFacts::default();
        assert_eq!(
            accept_peer_commands(Some(&fw), Direction::Outgoing, "10.0.0.0/24"),
            vec!["iptables -I OUTPUT -d 10.0.0.0/24 -j ACCEPT"]
        );
        assert_eq!(
            accept_peer_commands(None, Direction::Outgoing, "fd00::/64"),
            vec!["ip6tables -I OUTPUT -d fd00::/64 -j ACCEPT"]
        );
        let ufw = FirewallFacts {
            ufw: Some("active".into()),
            ..Default::default()
        };
        assert_eq!(
            accept_peer_commands(Some(&ufw), Direction::Outgoing, "10.0.0.0/24"),
            vec!["ufw allow out to 10.0.0.0/24"]
        );
        let fwd = FirewallFacts {
            firewalld: Some("running".into()),
            ..Default::default()
        };
        assert!(
            accept_peer_commands(Some(&fwd), Direction::Outgoing, "10.0.0.0/24")[0]
                .contains("--direct --add-rule ipv4 filter OUTPUT 0 -d 10.0.0.0/24 -j ACCEPT")
        );
        let nft = FirewallFacts {
            backend: Some("nftables".into()),
            ..Default::default()
        };
        assert_eq!(
            accept_peer_commands(Some(&nft), Direction::Outgoing, "10.0.0.0/24"),
            vec!["nft insert rule inet filter output ip daddr 10.0.0.0/24 accept"]
        );
    }

    #[test]
    fn unreadable_rules_warn_only_when_a_manager_is_active() {
        let fw = FirewallFacts {
            read_error: Some("not root: iptables-save was denied (Permission denied (you must be root)); run as root to read the firewall rules".into()),
            ..Default::default()
        };
        let f = run(fw.clone());
        assert_eq!(f.status, Status::Skip);
        assert!(f.summary.contains("not root"));
        assert!(f.fix.is_none());
        let f = run(FirewallFacts {
            ufw: Some("active".into()),
            ..fw.clone()
        });
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("ufw is active"));
        assert_eq!(f.fix.expect("fix").commands[0], "ufw allow 29500/tcp");
        let f = run(FirewallFacts {
            firewalld: Some("running".into()),
            ..fw
        });
        assert_eq!(f.status, Status::Warn);
        // No facts at all (old facts file): skip, not a panic.
        assert_eq!(
            check(&NodeFacts::default(), &CheckContext::default())[0].status,
            Status::Skip
        );
    }

    #[test]
    fn subnet_falls_back_to_a_placeholder() {
        assert_eq!(subnet_of(&NodeFacts::default()), SUBNET_PLACEHOLDER);
        let a = IfAddr {
            addr: "192.168.100.11".parse().expect("ip"),
            prefix: 24,
        };
        assert_eq!(network_of(&a).as_deref(), Some("192.168.100.0/24"));
        let zero = IfAddr {
            addr: "10.0.0.1".parse().expect("ip"),
            prefix: 0,
        };
        assert_eq!(network_of(&zero).as_deref(), Some("0.0.0.0/0"));
    }
}
