//! The nat table's REDIRECT and DNAT rules on the output and prerouting hooks, from `iptables-save -t nat` or `nft -j list ruleset`, user chains followed.

use super::iptables_save::{parse_iptables_rule, split_words};
use super::nft::{nft_port_sets, parse_nft_rule, str_field};
use super::{Target, merge_matches};
use crate::core::{FwRule, NatRule};
use serde_json::Value;
use std::collections::HashMap;

/// Rules kept at most (a mesh's ruleset has a few dozen).
const MAX_RULES: usize = 256;
/// Jumps followed at most from a base chain.
const MAX_DEPTH: usize = 8;

/// The base chains read, with the hook each is on.
const BASES: [(&str, &str); 2] = [("OUTPUT", "output"), ("PREROUTING", "prerouting")];

fn is_nat_target(name: &str) -> bool {
    matches!(name, "REDIRECT" | "DNAT")
}

/// One rule of a nat chain: its matches, and what it does.
#[derive(Clone, Debug)]
enum NatStep {
    Rewrite {
        matches: FwRule,
        target: String,
        to: Option<String>,
    },
    Jump(FwRule, String),
    Other,
}

/// Walks `chain` (jumps inlined, each rule's matches merged with the jumps' above it) and
/// pushes every rewrite it reaches.
fn walk(
    chain: &str,
    outer: &FwRule,
    chains: &HashMap<String, Vec<NatStep>>,
    hook: &str,
    depth: usize,
    out: &mut Vec<NatRule>,
) {
    let Some(steps) = chains.get(chain) else {
        return;
    };
    for step in steps {
        if out.len() >= MAX_RULES {
            return;
        }
        match step {
            NatStep::Rewrite {
                matches,
                target,
                to,
            } => {
                if let Some(mut m) = merge_matches(outer, matches) {
                    m.chain = Some(chain.to_string());
                    out.push(NatRule {
                        hook: hook.to_string(),
                        target: target.clone(),
                        matches: m,
                        to: to.clone(),
                    });
                }
            }
            NatStep::Jump(matches, next) if depth < MAX_DEPTH => {
                if let Some(m) = merge_matches(outer, matches) {
                    walk(next, &m, chains, hook, depth + 1, out);
                }
            }
            _ => {}
        }
    }
}

fn walk_bases(chains: &HashMap<String, Vec<NatStep>>, bases: &[(String, String)]) -> Vec<NatRule> {
    let mut out = Vec::new();
    for (chain, hook) in bases {
        walk(chain, &FwRule::default(), chains, hook, 0, &mut out);
    }
    out
}

/// The value after `opt` among the words after the target (`--to-ports 15001`).
fn target_option(words: &[String], opts: &[&str]) -> Option<String> {
    let at = words.iter().position(|w| w == "-j" || w == "--jump")?;
    let rest = &words[at..];
    rest.iter()
        .position(|w| opts.contains(&w.as_str()))
        .and_then(|i| rest.get(i + 1))
        .cloned()
}

/// REDIRECT and DNAT rules from `iptables-save` text (only its `*nat` table is read).
pub fn parse_iptables_save_nat(text: &str) -> Vec<NatRule> {
    let mut in_nat = false;
    let mut chains: HashMap<String, Vec<NatStep>> = HashMap::new();
    for line in text.lines().map(str::trim) {
        if let Some(table) = line.strip_prefix('*') {
            in_nat = table == "nat";
            continue;
        }
        if !in_nat || line.starts_with('#') || line.starts_with(':') {
            if line == "COMMIT" {
                in_nat = false;
            }
            continue;
        }
        if line == "COMMIT" {
            in_nat = false;
            continue;
        }
        let Some((chain, rule)) = parse_iptables_rule(line) else {
            continue;
        };
        let step = match &rule.target {
            Target::Jump(t) | Target::Goto(t) if is_nat_target(t) => {
                let words = split_words(line);
                NatStep::Rewrite {
                    matches: rule.matches.clone(),
                    target: t.clone(),
                    to: target_option(&words, &["--to-ports", "--to-destination", "--to"]),
                }
            }
            Target::Jump(t) | Target::Goto(t) => NatStep::Jump(rule.matches.clone(), t.clone()),
            _ => NatStep::Other,
        };
        chains.entry(chain).or_default().push(step);
    }
    let bases: Vec<(String, String)> = BASES
        .iter()
        .map(|(c, h)| (c.to_string(), h.to_string()))
        .collect();
    walk_bases(&chains, &bases)
}

/// What an nft rule's expressions rewrite to: ("REDIRECT" | "DNAT", where), if anything.
fn nft_rewrite(exprs: &[Value]) -> Option<(String, Option<String>)> {
    exprs.iter().find_map(|e| {
        let (kind, body) = e.as_object()?.iter().next()?;
        match kind.as_str() {
            "redirect" => Some((
                "REDIRECT".to_string(),
                body.get("port").map(|p| format!("port {p}")),
            )),
            "dnat" => {
                let addr = body.get("addr").and_then(Value::as_str);
                let port = body.get("port").map(|p| p.to_string());
                let to = match (addr, port) {
                    (Some(a), Some(p)) => Some(format!("{a}:{p}")),
                    (Some(a), None) => Some(a.to_string()),
                    (None, Some(p)) => Some(format!("port {p}")),
                    _ => None,
                };
                Some(("DNAT".to_string(), to))
            }
            "xt" => {
                let name = str_field(body, "name")?;
                (str_field(body, "type").as_deref() == Some("target") && is_nat_target(&name))
                    .then_some((name, None))
            }
            _ => None,
        }
    })
}

/// REDIRECT and DNAT rules of the nat chains on the output and prerouting hooks (families
/// `ip`, `ip6` and `inet`) from `nft -j list ruleset`; an unreadable document gives none.
pub fn parse_nft_nat(text: &str) -> Vec<NatRule> {
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let Some(items) = doc.get("nftables").and_then(Value::as_array) else {
        return Vec::new();
    };
    let sets = nft_port_sets(items);
    // Chains are keyed by "family table name" so jumps stay inside their table.
    let mut bases: Vec<(String, String, i64)> = Vec::new();
    let mut chains: HashMap<String, Vec<NatStep>> = HashMap::new();
    for item in items {
        if let Some(c) = item.get("chain") {
            let (Some(f), Some(t), Some(n)) = (
                str_field(c, "family"),
                str_field(c, "table"),
                str_field(c, "name"),
            ) else {
                continue;
            };
            let hook = str_field(c, "hook").unwrap_or_default();
            if str_field(c, "type").as_deref() == Some("nat")
                && (hook == "output" || hook == "prerouting")
            {
                let prio = c.get("prio").and_then(Value::as_i64).unwrap_or(0);
                bases.push((format!("{f} {t} {n}"), hook, prio));
            }
        } else if let Some(r) = item.get("rule") {
            let (Some(f), Some(t), Some(c)) = (
                str_field(r, "family"),
                str_field(r, "table"),
                str_field(r, "chain"),
            ) else {
                continue;
            };
            let empty = Vec::new();
            let exprs = r.get("expr").and_then(Value::as_array).unwrap_or(&empty);
            let parsed = parse_nft_rule(exprs, &sets, &(f.clone(), t.clone()));
            let step = match (nft_rewrite(exprs), &parsed.target) {
                (Some((target, to)), _) => {
                    let mut matches = parsed.matches.clone();
                    // The rewrite is the rule's action, not one of its conditions.
                    matches
                        .conditions
                        .retain(|c| c != "redirect" && c != "dnat");
                    NatStep::Rewrite {
                        matches,
                        target,
                        to,
                    }
                }
                (None, Target::Jump(n) | Target::Goto(n)) => {
                    NatStep::Jump(parsed.matches.clone(), format!("{f} {t} {n}"))
                }
                _ => NatStep::Other,
            };
            chains.entry(format!("{f} {t} {c}")).or_default().push(step);
        }
    }
    bases.sort_by_key(|b| b.2);
    let bases: Vec<(String, String)> = bases.into_iter().map(|(c, h, _)| (c, h)).collect();
    walk_bases(&chains, &bases)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISTIO: &str = "\
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:ISTIO_INBOUND - [0:0]
:ISTIO_IN_REDIRECT - [0:0]
:ISTIO_OUTPUT - [0:0]
:ISTIO_REDIRECT - [0:0]
-A PREROUTING -p tcp -j ISTIO_INBOUND
-A OUTPUT -p tcp -j ISTIO_OUTPUT
-A ISTIO_INBOUND -p tcp -m tcp --dport 15008 -j RETURN
-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT
-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006
-A ISTIO_OUTPUT -o lo -j RETURN
-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN
-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN
-A ISTIO_OUTPUT -j ISTIO_REDIRECT
-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp -j REDIRECT
COMMIT
";

    #[test]
    fn istio_sidecar_rules_are_read_through_their_chains() {
        let rules = parse_iptables_save_nat(ISTIO);
        assert_eq!(rules.len(), 2, "{rules:#?}");
        let out = rules.iter().find(|r| r.hook == "output").unwrap();
        assert_eq!(out.target, "REDIRECT");
        assert_eq!(out.to.as_deref(), Some("15001"));
        assert_eq!(out.matches.protocol.as_deref(), Some("tcp"));
        assert_eq!(out.matches.chain.as_deref(), Some("ISTIO_REDIRECT"));
        assert!(out.matches.text.contains("--to-ports 15001"));
        let inbound = rules.iter().find(|r| r.hook == "prerouting").unwrap();
        assert_eq!(inbound.to.as_deref(), Some("15006"));
    }

    #[test]
    fn a_dnat_with_a_port_range_and_an_empty_table() {
        let text = "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -d 10.0.0.0/24 -p tcp -m tcp --dport 40000:50000 -j DNAT --to-destination 10.0.0.9:80\nCOMMIT\n";
        let rules = parse_iptables_save_nat(text);
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].target, "DNAT");
        assert_eq!(rules[0].matches.dports, vec![(40000, 50000)]);
        assert_eq!(rules[0].matches.destination.as_deref(), Some("10.0.0.0/24"));
        assert_eq!(rules[0].to.as_deref(), Some("10.0.0.9:80"));
        assert!(parse_iptables_save_nat("*filter\n:INPUT ACCEPT\nCOMMIT\n").is_empty());
        assert!(parse_iptables_save_nat("").is_empty());
    }

    #[test]
    fn nft_nat_chains_native_and_xt() {
        // As `nft -j list ruleset` printed an iptables-nft REDIRECT and a native redirect.
        let text = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
 {"table": {"family": "ip", "name": "nat", "handle": 1}},
 {"chain": {"family": "ip", "table": "nat", "name": "OUTPUT", "handle": 1, "type": "nat", "hook": "output", "prio": -100, "policy": "accept"}},
 {"chain": {"family": "ip", "table": "filter", "name": "OUTPUT", "handle": 9, "type": "filter", "hook": "output", "prio": 0, "policy": "accept"}},
 {"rule": {"family": "ip", "table": "nat", "chain": "OUTPUT", "handle": 2, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": {"prefix": {"addr": "10.200.9.0", "len": 24}}}}, {"counter": {"packets": 0, "bytes": 0}}, {"xt": {"type": "target", "name": "REDIRECT"}}]}},
 {"rule": {"family": "ip", "table": "nat", "chain": "OUTPUT", "handle": 3, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 29500}}, {"redirect": {"port": 15001}}]}}
]}"#;
        let rules = parse_nft_nat(text);
        assert_eq!(rules.len(), 2, "{rules:#?}");
        assert_eq!(rules[0].target, "REDIRECT");
        assert_eq!(
            rules[0].matches.destination.as_deref(),
            Some("10.200.9.0/24")
        );
        assert_eq!(rules[1].to.as_deref(), Some("port 15001"));
        assert_eq!(rules[1].matches.dports, vec![(29500, 29500)]);
        assert!(parse_nft_nat("not json").is_empty());
        // The filter hooks do not take the nat chain for a filter.
        let out = super::super::parse_nft_json_hook(text, "output").unwrap();
        assert_eq!(out.name.as_deref(), Some("ip filter OUTPUT"));
        assert!(out.then.is_empty());
    }
}
