//! Parses `iptables-save` output into the filter table's INPUT (or OUTPUT) chain, user chains inlined.

use super::{ParsedRule, Target, flatten_base, normalize_protocol};
use crate::core::{FwAction, FwRule, InputChain};
use std::collections::HashMap;

/// The `filter` table's INPUT chain from `iptables-save` output, with user chains
/// jumped to from INPUT (ufw-before-input, ...) flattened in order. None when the
/// output has no filter table or no INPUT chain.
pub fn parse_iptables_save(text: &str) -> Option<InputChain> {
    parse_iptables_save_chain(text, "INPUT")
}

/// The `filter` table's base chain `base` ("INPUT", "OUTPUT") from `iptables-save` output,
/// user chains inlined; None when the output has no filter table or no such chain.
pub fn parse_iptables_save_chain(text: &str, base: &str) -> Option<InputChain> {
    let mut in_filter = false;
    let mut policy = None;
    let mut chains: HashMap<String, Vec<ParsedRule>> = HashMap::new();
    for line in text.lines().map(str::trim) {
        if let Some(table) = line.strip_prefix('*') {
            in_filter = table == "filter";
            continue;
        }
        if !in_filter || line.starts_with('#') {
            continue;
        }
        if line == "COMMIT" {
            in_filter = false;
        } else if let Some(decl) = line.strip_prefix(':') {
            let mut parts = decl.split_whitespace();
            let name = parts.next().unwrap_or_default().to_string();
            if name == base {
                policy = parts.next().map(str::to_ascii_lowercase);
            }
            chains.entry(name).or_default();
        } else if let Some((chain, rule)) = parse_iptables_rule(line) {
            chains.entry(chain).or_default().push(rule);
        }
    }
    let policy = policy?;
    let rules = flatten_base(base, &chains);
    Some(InputChain {
        policy,
        rules,
        name: Some(format!("filter {base}")),
        then: Vec::new(),
    })
}

/// Splits an iptables-save line into words, honouring "quoted strings" with \" escapes.
pub(super) fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars();
    let mut has_word = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_quotes => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                in_quotes = !in_quotes;
                has_word = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if has_word {
                    words.push(std::mem::take(&mut cur));
                    has_word = false;
                }
            }
            c => {
                cur.push(c);
                has_word = true;
            }
        }
    }
    if has_word {
        words.push(cur);
    }
    words
}

/// Parses `-A CHAIN <matches> -j TARGET [target options]`.
pub(super) fn parse_iptables_rule(line: &str) -> Option<(String, ParsedRule)> {
    let words = split_words(line);
    let mut chain = None;
    let mut m = FwRule {
        text: line.to_string(),
        ..Default::default()
    };
    let mut target = Target::None;
    let mut negate = false;
    let mut after_target = false;
    let mut i = 0;
    while i < words.len() {
        let opt = words[i].as_str();
        if opt == "!" {
            negate = true;
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < words.len() && !words[j].starts_with('-') && words[j] != "!" {
            j += 1;
        }
        let values = &words[i + 1..j];
        let value = values.first().cloned().unwrap_or_default();
        i = j;
        if !opt.starts_with('-') || after_target {
            negate = false;
            continue;
        }
        let negation = if negate { "! " } else { "" };
        match opt {
            "-A" | "--append" => chain = Some(value),
            "-j" | "--jump" | "-g" | "--goto" => {
                target = iptables_target(&value, opt.starts_with("-g") || opt == "--goto");
                after_target = true;
            }
            "-m" | "--match" | "--comment" => {}
            "-p" | "--protocol" if !negate => m.protocol = normalize_protocol(&value),
            "-i" | "--in-interface" if !negate => m.in_interface = Some(value),
            "-s" | "--source" if !negate => m.source = Some(value),
            "-d" | "--destination" if !negate => m.destination = Some(value),
            "--dport" | "--dports" | "--destination-port" | "--destination-ports" if !negate => {
                m.dports = parse_port_list(&value, ':')
            }
            "--state" | "--ctstate" if !negate => m.ct_state = Some(value),
            "--dst-type" if !negate && value == "LOCAL" => {}
            "-o" | "--out-interface" if !negate => m.out_interface = Some(value),
            // `! -i lo`: every packet from another host; the checks judge only those.
            "-i" | "--in-interface" | "-o" | "--out-interface" if value == "lo" => {}
            // `--syn`: a new connection's first packet, which is what the checks judge.
            "--syn" if !negate => {
                m.ct_state.get_or_insert_with(|| "NEW".into());
            }
            // How iptables-save prints `--syn`.
            "--tcp-flags" if !negate && is_syn_only(values) => {
                m.ct_state.get_or_insert_with(|| "NEW".into());
            }
            _ => m.conditions.push(
                format!("{negation}{opt} {}", values.join(" "))
                    .trim()
                    .to_string(),
            ),
        }
        negate = false;
    }
    Some((chain?, ParsedRule { matches: m, target }))
}

/// `--tcp-flags FIN,SYN,RST,ACK SYN`: SYN set, ACK (and FIN, RST) clear: a new connection.
fn is_syn_only(values: &[String]) -> bool {
    match values {
        [mask, set] => {
            let mask: Vec<&str> = mask.split(',').collect();
            set == "SYN" && mask.contains(&"SYN") && mask.contains(&"ACK")
        }
        _ => false,
    }
}

fn iptables_target(name: &str, goto: bool) -> Target {
    match name {
        "ACCEPT" => Target::Verdict(FwAction::Accept),
        "DROP" => Target::Verdict(FwAction::Drop),
        "REJECT" => Target::Verdict(FwAction::Reject),
        "RETURN" => Target::Return,
        // Upper-case names are extensions (LOG, MARK, CT); user chains are usually lower case,
        // but any name present in the table is followed by `flatten`.
        other if goto => Target::Goto(other.to_string()),
        other => Target::Jump(other.to_string()),
    }
}

/// "22", "29400:29600,8080" (iptables) or with '-' (nft): inclusive ranges; unparsable items are dropped.
fn parse_port_list(s: &str, range_sep: char) -> Vec<(u16, u16)> {
    s.split(',')
        .filter_map(|item| {
            let item = item.trim();
            match item.split_once(range_sep) {
                Some((a, b)) => {
                    let lo = if a.is_empty() {
                        Some(0)
                    } else {
                        a.parse().ok()
                    };
                    let hi = if b.is_empty() {
                        Some(u16::MAX)
                    } else {
                        b.parse().ok()
                    };
                    Some((lo?, hi?))
                }
                None => item.parse().ok().map(|p| (p, p)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall::probe::matches_everything;
    use crate::firewall::probe::tests::{fixture, texts};

    #[test]
    fn iptables_plain_drop_policy_with_ssh() {
        let c = parse_iptables_save(&fixture("iptables-drop-ssh.txt")).expect("filter table");
        assert_eq!(c.policy, "drop");
        assert_eq!(c.name.as_deref(), Some("filter INPUT"));
        assert_eq!(c.rules.len(), 3);
        assert_eq!(c.rules[0].in_interface.as_deref(), Some("lo"));
        assert_eq!(c.rules[1].ct_state.as_deref(), Some("RELATED,ESTABLISHED"));
        let ssh = &c.rules[2];
        assert_eq!(ssh.protocol.as_deref(), Some("tcp"));
        assert_eq!(ssh.dports, vec![(22, 22)]);
        assert_eq!(ssh.action, FwAction::Accept);
        assert_eq!(ssh.text, "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT");
        assert!(ssh.conditions.is_empty());
    }

    #[test]
    fn iptables_multiport_ranges_and_sources() {
        let c = parse_iptables_save(&fixture("iptables-range.txt")).expect("filter table");
        let range = &c.rules[3];
        assert_eq!(range.dports, vec![(29400, 29600)]);
        assert_eq!(range.action, FwAction::Accept);
        assert_eq!(c.rules[4].source.as_deref(), Some("10.1.0.0/16"));
        assert_eq!(
            parse_port_list("29400:29600,8080,:1023", ':'),
            vec![(29400, 29600), (8080, 8080), (0, 1023)]
        );
    }

    #[test]
    fn iptables_reject_and_state_new() {
        let c = parse_iptables_save(&fixture("iptables-reject.txt")).expect("filter table");
        assert_eq!(c.policy, "accept");
        let last = c.rules.last().expect("rules");
        assert_eq!(last.action, FwAction::Reject);
        assert!(matches_everything(last));
        assert_eq!(c.rules[3].ct_state.as_deref(), Some("NEW"));
        assert_eq!(c.rules[3].dports, vec![(22, 22)]);
        // FORWARD rules are not part of the input path.
        assert_eq!(c.rules.len(), 5);
    }

    #[test]
    fn iptables_empty_ruleset_and_garbage() {
        let c = parse_iptables_save(&fixture("iptables-empty.txt")).expect("filter table");
        assert_eq!(c.policy, "accept");
        assert!(c.rules.is_empty());
        assert_eq!(parse_iptables_save(""), None);
        assert_eq!(
            parse_iptables_save("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"),
            None
        );
        let odd = parse_iptables_save("*filter\n:INPUT DROP\n-A INPUT ! -p\n-A\n-j\nCOMMIT\n")
            .expect("filter");
        assert_eq!(odd.policy, "drop");
    }

    #[test]
    fn iptables_ufw_chains_are_flattened_in_order() {
        let c = parse_iptables_save(&fixture("iptables-ufw.txt")).expect("filter table");
        assert_eq!(c.policy, "drop");
        let ssh = c
            .rules
            .iter()
            .position(|r| r.text == "-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT")
            .expect("user rule inlined");
        assert_eq!(c.rules[ssh].chain.as_deref(), Some("ufw-user-input"));
        // ufw-not-local's final DROP is cut off by its unconditional `--dst-type LOCAL -j RETURN`.
        assert!(!texts(&c).contains(&"-A ufw-not-local -j DROP"));
        // ufw-skip-to-policy-input's DROP inherits the jump's tcp dport 139.
        let skip = c
            .rules
            .iter()
            .find(|r| {
                r.chain.as_deref() == Some("ufw-skip-to-policy-input")
                    && r.dports == vec![(139, 139)]
            })
            .expect("skip-to-policy inlined for 139");
        assert_eq!(skip.action, FwAction::Drop);
        assert_eq!(skip.protocol.as_deref(), Some("tcp"));
        // The BROADCAST one stays conditional.
        assert!(
            c.rules.iter().any(|r| r.action == FwAction::Drop
                && r.conditions.iter().any(|c| c.contains("BROADCAST")))
        );
        assert!(
            c.rules[..ssh]
                .iter()
                .all(|r| r.action != FwAction::Drop || r.ct_state.as_deref() == Some("INVALID"))
        );
    }

    #[test]
    fn the_output_chain_with_syn_and_not_loopback_is_unconditional() {
        let text = "*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT DROP [0:0]\n-A OUTPUT ! -o lo -p tcp -m tcp --dport 1024:65535 --tcp-flags FIN,SYN,RST,ACK SYN -j DROP\n-A OUTPUT -o eth1 -p tcp --syn -j ACCEPT\n-A OUTPUT -p tcp --tcp-flags SYN,RST SYN -j DROP\nCOMMIT\n";
        let c = parse_iptables_save_chain(text, "OUTPUT").expect("an OUTPUT chain");
        assert_eq!(c.name.as_deref(), Some("filter OUTPUT"));
        assert_eq!(c.policy, "drop");
        assert_eq!(c.rules[0].ct_state.as_deref(), Some("NEW"));
        assert!(c.rules[0].conditions.is_empty(), "{:?}", c.rules[0]);
        assert_eq!(c.rules[0].dports, vec![(1024, 65535)]);
        assert_eq!(c.rules[1].out_interface.as_deref(), Some("eth1"));
        assert_eq!(c.rules[1].ct_state.as_deref(), Some("NEW"));
        // SYN without ACK in the mask matches SYN-ACKs too: not a new connection only.
        assert_eq!(c.rules[2].ct_state, None);
        assert!(!c.rules[2].conditions.is_empty());
        assert_eq!(parse_iptables_save(text).expect("INPUT").policy, "accept");
    }

    #[test]
    fn quoted_words_are_kept_whole() {
        assert_eq!(
            split_words(r#"-A x -j LOG --log-prefix "[UFW BLOCK] " --comment "a \"b\"""#),
            vec![
                "-A",
                "x",
                "-j",
                "LOG",
                "--log-prefix",
                "[UFW BLOCK] ",
                "--comment",
                "a \"b\""
            ]
        );
    }
}
