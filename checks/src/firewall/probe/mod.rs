//! Local firewall: nftables / iptables rulesets, ufw and firewalld state.
//!
//! Rules are read only on the live system (`nft -j list ruleset`, else
//! `iptables-save`), each command under a timeout. The parsers are pure
//! functions over the tools' text, tested on captured output. Both flatten the
//! input path, and the output path (the connections this node opens), into one
//! ordered list of [`FwRule`]s each: jumps into user chains are inlined,
//! carrying the jump's own matches into every inlined rule.
//!
//! This module holds the probe and the flattening both parsers share; the
//! parsers live in `iptables_save` and `nft`, the command runner in
//! `runner`, the ufw/firewalld state in `ufw_firewalld`.

mod iptables_save;
mod nat;
mod nft;
pub(crate) mod runner;
mod ufw_firewalld;

pub use iptables_save::{parse_iptables_save, parse_iptables_save_chain};
pub use nat::{parse_iptables_save_nat, parse_nft_nat};
pub use nft::{parse_nft_json, parse_nft_json_family, parse_nft_json_hook};

use crate::core::{FirewallFacts, FwAction, FwRule, InputChain};
use crate::infra::root::Root;
use runner::{command_failure, find_tool, run_with_timeout};
use std::collections::HashMap;
use ufw_firewalld::{firewalld_state, ufw_outgoing, ufw_state};

/// Deepest chain nesting followed when flattening (firewalld nests three deep).
const MAX_DEPTH: usize = 12;
/// Most work spent flattening one base chain: rules visited plus port ranges intersected.
/// Real rulesets take a few hundred; without a cap, a chain jumping to itself (which the
/// kernel refuses, but a dump need not show a loadable ruleset) or port lists crossed at
/// every jump grow as branches^MAX_DEPTH: four `-A INPUT -j INPUT` lines took minutes.
const MAX_FLATTEN_WORK: usize = 10_000;

pub fn probe(root: &Root) -> FirewallFacts {
    let mut facts = FirewallFacts {
        ufw: ufw_state(root),
        ufw_outgoing: ufw_outgoing(root),
        firewalld: firewalld_state(root),
        ..Default::default()
    };
    if !root.is_system() {
        facts.read_error =
            Some("firewall rules are read only on the live system, not from a fixture root".into());
        return facts;
    }
    match read_live_rules() {
        Ok(rules) => {
            facts.backend = Some(rules.backend.into());
            facts.input = Some(rules.input);
            facts.output = Some(rules.output);
            facts.input6 = rules.input6;
            facts.output6 = rules.output6;
        }
        Err(why) => facts.read_error = Some(why),
    }
    facts.nat = read_nat_rules();
    facts
}

/// The nat table's REDIRECT and DNAT rules: `iptables-save -t nat` (it prints iptables-nft's
/// rules with their target options), else nftables' nat chains; none when neither tool runs.
fn read_nat_rules() -> Vec<crate::core::NatRule> {
    let from_iptables = find_tool("iptables-save")
        .and_then(|t| run_with_timeout(&t, &["-t", "nat"]).ok())
        .filter(|o| o.success)
        .map(|o| parse_iptables_save_nat(&o.stdout))
        .unwrap_or_default();
    if !from_iptables.is_empty() {
        return from_iptables;
    }
    find_tool("nft")
        .and_then(|t| run_with_timeout(&t, &["-j", "list", "ruleset"]).ok())
        .filter(|o| o.success)
        .map(|o| parse_nft_nat(&o.stdout))
        .unwrap_or_default()
}

/// The input and output paths as one tool showed them.
struct LiveRules {
    backend: &'static str,
    input: InputChain,
    output: InputChain,
    /// IPv6 paths: None when ip6tables-save is missing or failed.
    input6: Option<InputChain>,
    output6: Option<InputChain>,
}

/// nftables first (it sees iptables-nft rules too); iptables-save when nft is missing,
/// shows no input or output hook, or shows iptables-nft rules only as opaque `xt` matches.
fn read_live_rules() -> Result<LiveRules, String> {
    let mut problems = Vec::new();
    match find_tool("nft") {
        Some(nft) => match run_with_timeout(&nft, &["-j", "list", "ruleset"]) {
            Ok(out) if out.success => {
                let parse = |hook: &str, v6: bool| parse_nft_json_family(&out.stdout, hook, v6);
                match (
                    parse("input", false),
                    parse("output", false),
                    parse("input", true),
                    parse("output", true),
                ) {
                    (Ok(input), Ok(output), Ok(input6), Ok(output6)) => {
                        let all = [&input, &output, &input6, &output6];
                        if all.iter().all(|c| c.name.is_none()) {
                            problems.push("nft: no input hook chain".to_string())
                        } else if all.iter().any(|c| uses_xtables_compat(c)) {
                            problems.push("nft: iptables-nft rules (xt matches)".to_string())
                        } else {
                            return Ok(LiveRules {
                                backend: "nftables",
                                input,
                                output,
                                input6: Some(input6),
                                output6: Some(output6),
                            });
                        }
                    }
                    (Err(e), ..) | (_, Err(e), ..) | (.., Err(e), _) | (.., Err(e)) => {
                        problems.push(format!("nft: {e}"))
                    }
                }
            }
            Ok(out) => problems.push(command_failure("nft", &out)),
            Err(e) => problems.push(format!("nft: {e}")),
        },
        None => problems.push("nft not found".into()),
    }
    match find_tool("iptables-save") {
        Some(save) => match run_with_timeout(&save, &["-t", "filter"]) {
            Ok(out) if out.success => {
                let v6 = find_tool("ip6tables-save")
                    .and_then(|t| run_with_timeout(&t, &["-t", "filter"]).ok())
                    .filter(|o| o.success)
                    .map(|o| o.stdout);
                let chain6 = |base: &str| {
                    v6.as_deref()
                        .map(|t| parse_iptables_save_chain(t, base).unwrap_or_else(no_rules))
                };
                Ok(LiveRules {
                    backend: "iptables",
                    input: parse_iptables_save(&out.stdout).unwrap_or_else(no_rules),
                    output: parse_iptables_save_chain(&out.stdout, "OUTPUT")
                        .unwrap_or_else(no_rules),
                    input6: chain6("INPUT"),
                    output6: chain6("OUTPUT"),
                })
            }
            Ok(out) => {
                problems.push(command_failure("iptables-save", &out));
                Err(problems.join("; "))
            }
            Err(e) => {
                problems.push(format!("iptables-save: {e}"));
                Err(problems.join("; "))
            }
        },
        None if problems.iter().any(|p| p.contains("no input hook")) => Ok(LiveRules {
            backend: "nftables",
            input: no_rules(),
            output: no_rules(),
            input6: Some(no_rules()),
            output6: Some(no_rules()),
        }),
        None => {
            problems.push("iptables-save not found".into());
            Err(problems.join("; "))
        }
    }
}

/// An empty ruleset: nothing filters input.
fn no_rules() -> InputChain {
    InputChain {
        policy: "accept".into(),
        ..Default::default()
    }
}

/// True when nftables shows iptables-nft rules whose matches it cannot print (`xt match conntrack`).
pub fn uses_xtables_compat(chain: &InputChain) -> bool {
    let own = chain
        .rules
        .iter()
        .any(|r| r.conditions.iter().any(|c| c.starts_with("xt ")) || r.text.contains("xt "));
    own || chain.then.iter().any(uses_xtables_compat)
}

/// Normalises protocol names: "6" and "TCP" are "tcp"; "all"/"0" is any.
fn normalize_protocol(p: &str) -> Option<String> {
    match p.to_ascii_lowercase().as_str() {
        "all" | "0" => None,
        "6" => Some("tcp".into()),
        "17" => Some("udp".into()),
        other => Some(other.to_string()),
    }
}

fn intersect_ports(a: &[(u16, u16)], b: &[(u16, u16)]) -> Option<Vec<(u16, u16)>> {
    if a.is_empty() {
        return Some(b.to_vec());
    }
    if b.is_empty() {
        return Some(a.to_vec());
    }
    let out: Vec<(u16, u16)> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| (x.0.max(y.0), x.1.min(y.1))))
        .filter(|(lo, hi)| lo <= hi)
        .collect();
    (!out.is_empty()).then_some(out)
}

/// The match part of a jump combined with a rule of the chain it jumps to;
/// None when no packet can match both (tcp vs udp, disjoint ports).
fn merge_matches(outer: &FwRule, inner: &FwRule) -> Option<FwRule> {
    let protocol = match (&outer.protocol, &inner.protocol) {
        (Some(a), Some(b)) if a != b => return None,
        (a, b) => b.clone().or_else(|| a.clone()),
    };
    let mut conditions = outer.conditions.clone();
    let mut pick = |label: &str, o: &Option<String>, i: &Option<String>| match (o, i) {
        (Some(o), Some(i)) if o != i => {
            conditions.push(format!("{label} {o}"));
            Some(i.clone())
        }
        (o, i) => i.clone().or_else(|| o.clone()),
    };
    let in_interface = pick("in-interface", &outer.in_interface, &inner.in_interface);
    let out_interface = pick("out-interface", &outer.out_interface, &inner.out_interface);
    let source = pick("source", &outer.source, &inner.source);
    let destination = pick("destination", &outer.destination, &inner.destination);
    let ct_state = pick("ct-state", &outer.ct_state, &inner.ct_state);
    conditions.extend(inner.conditions.iter().cloned());
    Some(FwRule {
        action: inner.action,
        protocol,
        dports: intersect_ports(&outer.dports, &inner.dports)?,
        in_interface,
        out_interface,
        source,
        destination,
        ct_state,
        conditions,
        text: inner.text.clone(),
        chain: inner.chain.clone(),
    })
}

/// A rule with no matches at all (a plain `-j RETURN`, `goto X`).
fn matches_everything(r: &FwRule) -> bool {
    r.protocol.is_none()
        && r.dports.is_empty()
        && r.in_interface.is_none()
        && r.out_interface.is_none()
        && r.source.is_none()
        && r.destination.is_none()
        && r.ct_state.is_none()
        && r.conditions.is_empty()
}

/// What a rule does once its matches hold.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Verdict(FwAction),
    Jump(String),
    Goto(String),
    Return,
    /// LOG, MARK, counters: no verdict.
    None,
}

#[derive(Clone, Debug)]
struct ParsedRule {
    matches: FwRule,
    target: Target,
}

/// The base chain `base` with the chains it jumps to inlined, within [`MAX_FLATTEN_WORK`];
/// when that runs out, the rules stop with one that says so (a condition, so never a verdict).
fn flatten_base(base: &str, chains: &HashMap<String, Vec<ParsedRule>>) -> Vec<FwRule> {
    let mut out = Vec::new();
    let mut budget = MAX_FLATTEN_WORK;
    flatten(
        base,
        &FwRule::default(),
        chains,
        base,
        0,
        &mut budget,
        &mut out,
    );
    if budget == 0 {
        let why = format!(
            "more than {MAX_FLATTEN_WORK} rules and port ranges after inlining jumps: the rest was not read"
        );
        out.push(FwRule {
            text: format!("({why})"),
            conditions: vec![why],
            ..Default::default()
        });
    }
    out
}

/// Inlines `chain` (and the chains it jumps to) into `out`, each rule combined with `outer`,
/// each rule and each pair of port ranges crossed taken from `budget`; stops when it is spent.
fn flatten(
    chain: &str,
    outer: &FwRule,
    chains: &HashMap<String, Vec<ParsedRule>>,
    base: &str,
    depth: usize,
    budget: &mut usize,
    out: &mut Vec<FwRule>,
) {
    let Some(rules) = chains.get(chain) else {
        return;
    };
    for rule in rules {
        let cost = outer
            .dports
            .len()
            .saturating_mul(rule.matches.dports.len())
            .saturating_add(1);
        // Spending the last unit counts as running out: 0 left means the rules were cut.
        if cost >= *budget {
            *budget = 0;
            return;
        }
        *budget -= cost;
        let Some(mut merged) = merge_matches(outer, &rule.matches) else {
            continue;
        };
        merged.chain = (chain != base).then(|| chain.to_string());
        match &rule.target {
            Target::Verdict(action) => {
                merged.action = *action;
                out.push(merged);
            }
            Target::Jump(next) if depth < MAX_DEPTH => {
                flatten(next, &merged, chains, base, depth + 1, budget, out)
            }
            Target::Goto(next) if depth < MAX_DEPTH => {
                flatten(next, &merged, chains, base, depth + 1, budget, out);
                if matches_everything(&rule.matches) {
                    return;
                }
            }
            Target::Return if matches_everything(&rule.matches) => return,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn fixture(name: &str) -> String {
        crate::infra::testutil::fixture_text(&format!("firewall/{name}"))
    }

    pub(super) fn texts(chain: &InputChain) -> Vec<&str> {
        chain.rules.iter().map(|r| r.text.as_str()).collect()
    }

    /// Found by the property tests (`checks/tests/props.rs`, `iptables_save_near_grammar`),
    /// shrunk by hand: three lines took 5 s, four 3 minutes and 22 million rules.
    #[test]
    fn a_chain_jumping_to_itself_stops_at_the_work_cap() {
        let mut text = String::from("*filter\n:INPUT DROP [0:0]\n");
        text.push_str(&"-A INPUT -j INPUT\n".repeat(4));
        text.push_str("-A INPUT -p tcp --dport 29500 -j ACCEPT\nCOMMIT\n");
        let start = std::time::Instant::now();
        let chain = parse_iptables_save(&text).expect("a filter INPUT chain");
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert!(chain.rules.len() < MAX_FLATTEN_WORK);
        let last = chain.rules.last().expect("rules");
        assert!(last.text.contains("not read"), "{last:?}");
        assert_eq!(last.action, FwAction::Other);
        assert_eq!(chain.rules[0].dports, vec![(29500, 29500)]);

        let rule = r#"{"rule": {"family": "inet", "table": "f", "chain": "input", "expr": [{"jump": {"target": "input"}}]}}"#;
        let nft = format!(
            r#"{{"nftables": [{{"chain": {{"family": "inet", "table": "f", "name": "input", "hook": "input", "prio": 0, "policy": "drop"}}}}, {r}, {r}, {r}, {r}]}}"#,
            r = rule
        );
        let start = std::time::Instant::now();
        let chain = parse_nft_json(&nft).expect("parses");
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert!(chain.rules.last().expect("rules").text.contains("not read"));
    }

    /// Port lists are crossed at every jump: 30 ranges through three chains would be 27,000.
    #[test]
    fn crossing_port_lists_is_capped() {
        let ports: Vec<String> = (0..30).map(|i| format!("{i}:65535")).collect();
        let ports = ports.join(",");
        let text = format!(
            "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp -m multiport --dports {ports} -j a\n-A a -p tcp -m multiport --dports {ports} -j b\n-A b -p tcp -m multiport --dports {ports} -j ACCEPT\nCOMMIT\n"
        );
        let chain = parse_iptables_save(&text).expect("a filter INPUT chain");
        assert_eq!(chain.rules.len(), 1);
        assert!(chain.rules[0].text.contains("not read"));
        // Within the cap nothing is cut.
        let ufw = parse_iptables_save(&fixture("iptables-ufw.txt")).expect("ufw");
        assert!(ufw.rules.iter().all(|r| !r.text.contains("not read")));
    }

    #[test]
    fn merging_a_jump_narrows_or_excludes() {
        let tcp139 = FwRule {
            protocol: Some("tcp".into()),
            dports: vec![(139, 139)],
            ..Default::default()
        };
        let udp = FwRule {
            protocol: Some("udp".into()),
            ..Default::default()
        };
        assert_eq!(merge_matches(&tcp139, &udp), None);
        let merged = merge_matches(&tcp139, &FwRule::default()).expect("merges");
        assert_eq!(merged.dports, vec![(139, 139)]);
        let other_ports = FwRule {
            dports: vec![(200, 300)],
            ..Default::default()
        };
        assert_eq!(merge_matches(&tcp139, &other_ports), None);
    }

    #[test]
    fn live_probe_never_panics() {
        let facts = probe(&Root::system());
        assert!(
            facts.input.is_some() || facts.read_error.is_some(),
            "{facts:?}"
        );
    }
}
