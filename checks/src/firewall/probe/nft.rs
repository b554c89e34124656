//! Parses `nft -j list ruleset` into the input-hook (or output-hook) base chains, in priority order, jumps inlined and named port sets resolved.

use super::{ParsedRule, Target, flatten_base, no_rules, normalize_protocol};
use crate::core::{FwAction, FwRule, InputChain};
use serde_json::Value;
use std::collections::HashMap;

pub(super) type ChainKey = (String, String, String);

#[derive(Debug)]
struct NftBaseChain {
    key: ChainKey,
    prio: i64,
    policy: String,
}

/// The input-hook base chains of families `ip` and `inet` from `nft -j list ruleset`,
/// in priority order: the first is returned with the others in [`InputChain::then`].
/// An empty ruleset yields an accepting chain with no rules and no name.
pub fn parse_nft_json(text: &str) -> Result<InputChain, String> {
    parse_nft_json_hook(text, "input")
}

/// The base chains on `hook` ("input", "output") of families `ip` and `inet`, as
/// [`parse_nft_json`] returns the input ones.
pub fn parse_nft_json_hook(text: &str, hook: &str) -> Result<InputChain, String> {
    parse_nft_json_family(text, hook, false)
}

/// [`parse_nft_json_hook`] for IPv6 (`v6`: families `ip6` and `inet`) or IPv4 (`ip`, `inet`).
pub fn parse_nft_json_family(text: &str, hook: &str, v6: bool) -> Result<InputChain, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not nft JSON: {e}"))?;
    let items = doc
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or("nft JSON has no \"nftables\" array")?;
    let sets = nft_port_sets(items);
    let mut bases = Vec::new();
    let mut rules: HashMap<(String, String), Vec<ParsedRule>> = HashMap::new();
    for item in items {
        if let Some(chain) = item.get("chain") {
            if let Some(base) = nft_base_chain(chain, hook, v6) {
                bases.push(base);
            }
        } else if let Some(rule) = item.get("rule") {
            let (Some(family), Some(table), Some(chain)) = (
                str_field(rule, "family"),
                str_field(rule, "table"),
                str_field(rule, "chain"),
            ) else {
                continue;
            };
            let empty = Vec::new();
            let exprs = rule.get("expr").and_then(Value::as_array).unwrap_or(&empty);
            let parsed = parse_nft_rule(exprs, &sets, &(family.clone(), table.clone()));
            rules
                .entry((format!("{family} {table}"), chain))
                .or_default()
                .push(parsed);
        }
    }
    bases.sort_by_key(|b| b.prio);
    let mut chains: Vec<InputChain> = bases.iter().map(|b| flatten_nft_base(b, &rules)).collect();
    if chains.is_empty() {
        return Ok(no_rules());
    }
    let mut first = chains.remove(0);
    first.then = chains;
    Ok(first)
}

pub(super) fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn nft_base_chain(chain: &Value, hook: &str, v6: bool) -> Option<NftBaseChain> {
    let family = str_field(chain, "family")?;
    let own = if v6 { "ip6" } else { "ip" };
    if str_field(chain, "hook")? != hook || !(family == own || family == "inet") {
        return None;
    }
    // Only filter chains decide whether a connection passes; a nat chain on the same hook
    // (`type nat hook output`) rewrites where it goes, and is read as such (see `nat`).
    if str_field(chain, "type").is_some_and(|t| t != "filter") {
        return None;
    }
    let prio = match chain.get("prio") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => named_priority(s),
        _ => 0,
    };
    Some(NftBaseChain {
        key: (
            family,
            str_field(chain, "table")?,
            str_field(chain, "name")?,
        ),
        prio,
        policy: str_field(chain, "policy").unwrap_or_else(|| "accept".into()),
    })
}

fn named_priority(name: &str) -> i64 {
    match name {
        "raw" => -300,
        "mangle" => -150,
        "dstnat" => -100,
        "security" => 50,
        "srcnat" => 100,
        _ => 0,
    }
}

fn flatten_nft_base(
    base: &NftBaseChain,
    rules: &HashMap<(String, String), Vec<ParsedRule>>,
) -> InputChain {
    let (family, table, name) = &base.key;
    let scope = format!("{family} {table}");
    // Chains of one table, by name: jumps stay inside their table.
    let chains: HashMap<String, Vec<ParsedRule>> = rules
        .iter()
        .filter(|((s, _), _)| *s == scope)
        .map(|((_, c), r)| (c.clone(), r.clone()))
        .collect();
    InputChain {
        policy: base.policy.to_ascii_lowercase(),
        rules: flatten_base(name, &chains),
        name: Some(format!("{family} {table} {name}")),
        then: Vec::new(),
    }
}

/// Named sets of ports (`set cluster_ports { type inet_service; ... }`), by (family, table, name).
pub(super) fn nft_port_sets(items: &[Value]) -> HashMap<ChainKey, Vec<(u16, u16)>> {
    items
        .iter()
        .filter_map(|i| i.get("set"))
        .filter_map(|s| {
            let key = (
                str_field(s, "family")?,
                str_field(s, "table")?,
                str_field(s, "name")?,
            );
            let elems = s.get("elem").map(nft_ports).unwrap_or_default();
            Some((key, elems))
        })
        .collect()
}

/// Ports from a JSON right-hand side: 22, {"range": [a, b]}, {"set": [...]}, [..].
fn nft_ports(v: &Value) -> Vec<(u16, u16)> {
    let port = |v: &Value| v.as_u64().and_then(|n| u16::try_from(n).ok());
    match v {
        Value::Number(_) => port(v).map(|p| vec![(p, p)]).unwrap_or_default(),
        Value::Array(items) => items.iter().flat_map(nft_ports).collect(),
        Value::Object(o) => {
            if let Some(Value::Array(r)) = o.get("range") {
                match (r.first().and_then(port), r.get(1).and_then(port)) {
                    (Some(a), Some(b)) => vec![(a, b)],
                    _ => Vec::new(),
                }
            } else if let Some(s) = o.get("set") {
                nft_ports(s)
            } else if let Some(e) = o.get("elem") {
                nft_ports(e.get("val").unwrap_or(e))
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// Renders a JSON value the way `nft list ruleset` prints it (close enough to read).
fn nft_value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => items
            .iter()
            .map(nft_value_text)
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(o) => {
            if let Some(Value::Array(r)) = o.get("range") {
                r.iter().map(nft_value_text).collect::<Vec<_>>().join("-")
            } else if let Some(Value::Array(s)) = o.get("set") {
                let inner: Vec<String> = s.iter().map(nft_value_text).collect();
                format!("{{ {} }}", inner.join(", "))
            } else if let Some(p) = o.get("prefix") {
                format!(
                    "{}/{}",
                    p.get("addr").map(nft_value_text).unwrap_or_default(),
                    p.get("len").map(nft_value_text).unwrap_or_default()
                )
            } else {
                Value::Object(o.clone()).to_string()
            }
        }
        Value::Null => String::new(),
    }
}

/// The left side of a match as nft prints it: "tcp dport", "iifname", "ct state".
fn nft_left_text(left: &Value) -> String {
    if let Some([a, b]) = left.get("&").and_then(Value::as_array).map(Vec::as_slice) {
        let mask = match b {
            Value::Array(items) => items
                .iter()
                .map(nft_value_text)
                .collect::<Vec<_>>()
                .join(" | "),
            other => nft_value_text(other),
        };
        format!("{} & ({mask})", nft_left_text(a))
    } else if let Some(p) = left.get("payload") {
        format!(
            "{} {}",
            str_field(p, "protocol").unwrap_or_default(),
            str_field(p, "field").unwrap_or_default()
        )
    } else if let Some(key) = left.get("meta").and_then(|m| str_field(m, "key")) {
        match key.as_str() {
            "iifname" | "oifname" | "iif" | "oif" => key,
            _ => format!("meta {key}"),
        }
    } else if let Some(key) = left.get("ct").and_then(|m| str_field(m, "key")) {
        format!("ct {key}")
    } else {
        left.to_string()
    }
}

pub(super) fn parse_nft_rule(
    exprs: &[Value],
    sets: &HashMap<ChainKey, Vec<(u16, u16)>>,
    scope: &(String, String),
) -> ParsedRule {
    let mut m = FwRule::default();
    let mut target = Target::None;
    let mut words = Vec::new();
    for expr in exprs {
        let Some((kind, body)) = expr.as_object().and_then(|o| o.iter().next()) else {
            continue;
        };
        match kind.as_str() {
            "match" => words.push(apply_nft_match(&mut m, body, sets, scope)),
            "accept" | "drop" | "reject" => {
                target = Target::Verdict(match kind.as_str() {
                    "accept" => FwAction::Accept,
                    "drop" => FwAction::Drop,
                    _ => FwAction::Reject,
                });
                words.push(kind.clone());
            }
            "jump" | "goto" => {
                let to = body
                    .get("target")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                target = if kind == "jump" {
                    Target::Jump(to.to_string())
                } else {
                    Target::Goto(to.to_string())
                };
                words.push(format!("{kind} {to}"));
            }
            "return" => {
                target = Target::Return;
                words.push("return".into());
            }
            "xt" => {
                let name = str_field(body, "name").unwrap_or_default();
                let xt_kind = str_field(body, "type").unwrap_or_default();
                words.push(format!("xt {xt_kind} {name}"));
                match (xt_kind.as_str(), name.as_str()) {
                    ("target", "REJECT") => target = Target::Verdict(FwAction::Reject),
                    ("target", _) => {}
                    _ => m.conditions.push(format!("xt match {name}")),
                }
            }
            "counter" | "log" | "comment" => {}
            other => {
                m.conditions.push(other.to_string());
                words.push(other.to_string());
            }
        }
    }
    m.text = words.join(" ");
    ParsedRule { matches: m, target }
}

/// Applies one `{"match": {op, left, right}}` to the rule; returns its text.
fn apply_nft_match(
    m: &mut FwRule,
    body: &Value,
    sets: &HashMap<ChainKey, Vec<(u16, u16)>>,
    scope: &(String, String),
) -> String {
    let null = Value::Null;
    let left = body.get("left").unwrap_or(&null);
    let right = body.get("right").unwrap_or(&null);
    let op = body.get("op").and_then(Value::as_str).unwrap_or("==");
    let left_text = nft_left_text(left);
    let op_text = if matches!(op, "==" | "in") {
        String::new()
    } else {
        format!("{op} ")
    };
    let text = format!("{left_text} {op_text}{}", nft_value_text(right));
    let meta = left.get("meta").and_then(|x| str_field(x, "key"));
    if !matches!(op, "==" | "in") {
        // `iifname != "lo"`: every packet from another host, the only ones judged.
        let not_loopback = op == "!="
            && matches!(meta.as_deref(), Some("iifname" | "oifname"))
            && right.as_str() == Some("lo");
        if !not_loopback {
            m.conditions.push(text.clone());
        }
        return text;
    }
    if is_syn_only(left, right) {
        m.protocol = Some("tcp".into());
        m.ct_state.get_or_insert_with(|| "new".into());
        return text;
    }
    let payload = left.get("payload");
    let proto = payload.and_then(|p| str_field(p, "protocol"));
    let field = payload.and_then(|p| str_field(p, "field"));
    let ct = left.get("ct").and_then(|x| str_field(x, "key"));
    match (
        proto.as_deref(),
        field.as_deref(),
        meta.as_deref(),
        ct.as_deref(),
    ) {
        (Some(p @ ("tcp" | "udp" | "sctp" | "dccp")), Some("dport"), _, _) => {
            m.protocol = Some(p.to_string());
            m.dports = match right.as_str().and_then(|s| s.strip_prefix('@')) {
                Some(set) => sets
                    .get(&(scope.0.clone(), scope.1.clone(), set.to_string()))
                    .cloned()
                    .unwrap_or_default(),
                None => nft_ports(right),
            };
            if m.dports.is_empty() {
                m.conditions.push(text.clone());
            }
        }
        (Some(p @ ("tcp" | "udp" | "sctp" | "dccp")), _, _, _) => {
            m.protocol = Some(p.to_string());
            m.conditions.push(text.clone());
        }
        (Some("ip" | "ip6"), Some("saddr"), _, _) => m.source = Some(nft_value_text(right)),
        (Some("ip" | "ip6"), Some("daddr"), _, _) => m.destination = Some(nft_value_text(right)),
        (Some("ip"), Some("protocol"), _, _) | (_, _, Some("l4proto"), _) => {
            m.protocol = nft_protocol(right)
        }
        (_, _, Some("iifname" | "iif"), _) => m.in_interface = Some(nft_value_text(right)),
        (_, _, Some("oifname" | "oif"), _) => m.out_interface = Some(nft_value_text(right)),
        (_, _, Some("nfproto"), _) if right.as_str() == Some("ipv4") => {}
        (_, _, _, Some("state")) => m.ct_state = Some(nft_value_text(right)),
        _ => m.conditions.push(text.clone()),
    }
    text
}

/// `tcp flags & (fin | syn | rst | ack) == syn` (iptables-nft's `--syn`): a new connection.
fn is_syn_only(left: &Value, right: &Value) -> bool {
    let Some([flags, mask]) = left.get("&").and_then(Value::as_array).map(Vec::as_slice) else {
        return false;
    };
    let is_flags = flags.get("payload").is_some_and(|p| {
        str_field(p, "protocol").as_deref() == Some("tcp")
            && str_field(p, "field").as_deref() == Some("flags")
    });
    let names: Vec<String> = match mask {
        Value::Array(a) => a.iter().map(nft_value_text).collect(),
        Value::Object(o) => o
            .get("|")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(nft_value_text).collect())
            .unwrap_or_default(),
        v => vec![nft_value_text(v)],
    };
    is_flags
        && right.as_str() == Some("syn")
        && names.iter().any(|n| n == "syn")
        && names.iter().any(|n| n == "ack")
}

/// `meta l4proto tcp` or `{ tcp, udp }`: tcp when the set has it, else its first member.
fn nft_protocol(right: &Value) -> Option<String> {
    let names: Vec<String> = match right {
        Value::Object(o) => o
            .get("set")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(nft_value_text).collect())
            .unwrap_or_default(),
        v => vec![nft_value_text(v)],
    };
    if names.iter().any(|n| n == "tcp" || n == "6") {
        Some("tcp".into())
    } else {
        names.first().and_then(|n| normalize_protocol(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall::probe::tests::{fixture, texts};
    use crate::firewall::probe::{matches_everything, uses_xtables_compat};

    #[test]
    fn nft_plain_ruleset_with_sets_and_named_set() {
        let c = parse_nft_json(&fixture("nft-allow.json")).expect("parses");
        assert_eq!(c.name.as_deref(), Some("inet filter input"));
        assert_eq!(c.policy, "drop");
        assert!(c.then.is_empty());
        let t = texts(&c);
        assert_eq!(t[0], "ct state established,related accept");
        assert_eq!(t[2], "iif lo accept");
        assert_eq!(t[3], "tcp dport { 22, 29500 } accept");
        assert_eq!(c.rules[3].dports, vec![(22, 22), (29500, 29500)]);
        assert_eq!(
            c.rules[4].dports,
            vec![(29400, 29600)],
            "named set resolved"
        );
        assert_eq!(c.rules[5].source.as_deref(), Some("10.1.0.0/16"));
        assert_eq!(c.rules[6].protocol.as_deref(), Some("icmp"));
        assert_eq!(c.rules[7].action, FwAction::Reject);
        assert!(matches_everything(&c.rules[7]));
        assert!(!uses_xtables_compat(&c));
    }

    #[test]
    fn nft_firewalld_zones_are_flattened() {
        let c = parse_nft_json(&fixture("nft-firewalld.json")).expect("parses");
        assert_eq!(c.name.as_deref(), Some("inet firewalld filter_INPUT"));
        assert_eq!(c.policy, "accept");
        let ssh: Vec<&FwRule> = c
            .rules
            .iter()
            .filter(|r| r.dports == vec![(22, 22)] && r.action == FwAction::Accept)
            .collect();
        // Once through `iifname "eth0" goto`, once through the default zone's plain goto.
        assert_eq!(ssh.len(), 2);
        assert_eq!(ssh[0].in_interface.as_deref(), Some("eth0"));
        assert_eq!(ssh[1].in_interface, None);
        assert_eq!(ssh[1].ct_state.as_deref(), Some("{ new, untracked }"));
        assert_eq!(ssh[1].chain.as_deref(), Some("filter_IN_public_allow"));
        let last = c.rules.last().expect("rules");
        assert_eq!(last.action, FwAction::Reject);
        assert_eq!(last.text, "reject");
        // prerouting chains are not on the input path.
        assert!(c.rules.iter().all(|r| !r.text.contains("fib")));
    }

    #[test]
    fn nft_iptables_nft_rules_are_flagged_as_xt() {
        let c = parse_nft_json(&fixture("nft-iptables-nft.json")).expect("parses");
        assert_eq!(c.name.as_deref(), Some("ip filter INPUT"));
        assert!(uses_xtables_compat(&c));
        assert_eq!(c.rules[2].dports, vec![(22, 22)]);
        assert_eq!(c.rules[5].dports, vec![(6000, 6100)]);
        assert_eq!(c.rules[5].action, FwAction::Reject);
    }

    #[test]
    fn nft_empty_and_broken_input() {
        let c = parse_nft_json(&fixture("nft-empty.json")).expect("parses");
        assert_eq!(c.policy, "accept");
        assert!(c.rules.is_empty());
        assert_eq!(c.name, None);
        assert!(parse_nft_json("not json").is_err());
        assert!(parse_nft_json("{\"x\": 1}").is_err());
        let odd = r#"{"nftables":[{"chain":{"family":"ip","table":"t","name":"in","hook":"input","prio":"filter"}},
            {"rule":{"family":"ip","table":"t","chain":"in","expr":[{"match":{"op":"!=","left":{"payload":{"protocol":"tcp","field":"dport"}},"right":22}},{"drop":null}]}},
            {"rule":{"family":"ip","table":"t","chain":"in","expr":"garbage"}},
            {"rule":{"family":"ip","table":"t","chain":"in","expr":[{"jump":{"target":"in"}}]}}]}"#;
        let c = parse_nft_json(odd).expect("parses");
        assert_eq!(c.policy, "accept");
        assert_eq!(c.rules[0].conditions, vec!["tcp dport != 22"]);
    }

    #[test]
    fn an_iptables_nft_output_syn_drop_is_read_from_the_output_hook() {
        let json = r#"{"nftables":[{"metainfo":{"version":"1.0.6"}},{"table":{"family":"ip","name":"filter"}},
            {"chain":{"family":"ip","table":"filter","name":"OUTPUT","type":"filter","hook":"output","prio":0,"policy":"accept"}},
            {"rule":{"family":"ip","table":"filter","chain":"OUTPUT","expr":[
                {"match":{"op":"!=","left":{"meta":{"key":"oifname"}},"right":"lo"}},
                {"match":{"op":"==","left":{"&":[{"payload":{"protocol":"tcp","field":"flags"}},["fin","syn","rst","ack"]]},"right":"syn"}},
                {"match":{"op":"==","left":{"payload":{"protocol":"tcp","field":"dport"}},"right":{"range":[1024,65535]}}},
                {"counter":{"packets":0,"bytes":0}},{"drop":null}]}}]}"#;
        let out = parse_nft_json_hook(json, "output").expect("parses");
        assert_eq!(out.name.as_deref(), Some("ip filter OUTPUT"));
        let r = &out.rules[0];
        assert_eq!(r.action, FwAction::Drop);
        assert_eq!(r.ct_state.as_deref(), Some("new"));
        assert!(r.conditions.is_empty(), "{r:?}");
        assert_eq!(r.dports, vec![(1024, 65535)]);
        assert!(!uses_xtables_compat(&out));
        assert_eq!(
            r.text,
            "oifname != lo tcp flags & (fin | syn | rst | ack) syn tcp dport 1024-65535 drop"
        );
        // No input hook: the input side accepts.
        let input = parse_nft_json(json).expect("parses");
        assert_eq!(input.name, None);
        assert_eq!(input.policy, "accept");
    }

    #[test]
    fn several_base_chains_are_kept_in_priority_order() {
        let json = r#"{"nftables":[
            {"chain":{"family":"inet","table":"late","name":"input","hook":"input","prio":10,"policy":"accept"}},
            {"chain":{"family":"ip6","table":"six","name":"input","hook":"input","prio":-5,"policy":"drop"}},
            {"chain":{"family":"ip","table":"early","name":"INPUT","hook":"input","prio":0,"policy":"drop"}}]}"#;
        let c = parse_nft_json(json).expect("parses");
        assert_eq!(c.name.as_deref(), Some("ip early INPUT"));
        assert_eq!(c.then.len(), 1);
        assert_eq!(c.then[0].name.as_deref(), Some("inet late input"));
        // The IPv6 path: ip6 and inet chains, not ip ones.
        let c6 = parse_nft_json_family(json, "input", true).expect("parses");
        assert_eq!(c6.name.as_deref(), Some("ip6 six input"));
        assert_eq!(c6.then[0].name.as_deref(), Some("inet late input"));
    }
}
