//! Local firewall: nftables / iptables rulesets, ufw and firewalld state.
//!
//! Rules are read only on the live system (`nft -j list ruleset`, else
//! `iptables-save`), each command under a timeout. The parsers are pure
//! functions over the tools' text, tested on captured output. Both flatten the
//! input path into one ordered list of [`FwRule`]s: jumps into user chains are
//! inlined, carrying the jump's own matches into every inlined rule.

use crate::model::{FirewallFacts, FwAction, FwRule, InputChain};
use crate::root::Root;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest time any external command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// Deepest chain nesting followed when flattening (firewalld nests three deep).
const MAX_DEPTH: usize = 12;
const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

pub fn probe(root: &Root) -> FirewallFacts {
    let mut facts = FirewallFacts {
        ufw: ufw_state(root),
        firewalld: firewalld_state(root),
        ..Default::default()
    };
    if !root.is_system() {
        facts.read_error =
            Some("firewall rules are read only on the live system, not from a fixture root".into());
        return facts;
    }
    match read_live_rules() {
        Ok((backend, chain)) => {
            facts.backend = Some(backend.into());
            facts.input = Some(chain);
        }
        Err(why) => facts.read_error = Some(why),
    }
    facts
}

/// `active`/`inactive` from `/etc/ufw/ufw.conf` (`ENABLED=yes`); None when ufw is not installed.
fn ufw_state(root: &Root) -> Option<String> {
    let conf = root.read("/etc/ufw/ufw.conf").ok()?;
    let enabled = conf.lines().any(|l| {
        let l = l.trim();
        !l.starts_with('#')
            && l.split_once('=').is_some_and(|(k, v)| {
                k.trim() == "ENABLED" && v.trim().trim_matches('"').eq_ignore_ascii_case("yes")
            })
    });
    Some(if enabled { "active" } else { "inactive" }.into())
}

/// `running` when firewalld's pid file names a live process; else `firewall-cmd --state`
/// (live system only); None when firewalld is not installed.
fn firewalld_state(root: &Root) -> Option<String> {
    let pid = root
        .attr("/var/run/firewalld/firewalld.pid")
        .or_else(|| root.attr("/run/firewalld/firewalld.pid"));
    if let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) {
        if root.exists(format!("/proc/{pid}")) {
            return Some("running".into());
        }
    }
    if !root.is_system() {
        return root
            .exists("/usr/lib/firewalld")
            .then(|| "not running".to_string());
    }
    let cmd = find_tool("firewall-cmd")?;
    let out = run_with_timeout(&cmd, &["--state"]).ok()?;
    let state = if out.stdout.trim().is_empty() {
        out.stderr.trim()
    } else {
        out.stdout.trim()
    };
    Some(
        if state.is_empty() {
            "not running"
        } else {
            state
        }
        .to_string(),
    )
}

/// nftables first (it sees iptables-nft rules too); iptables-save when nft is missing,
/// shows no input hook, or shows iptables-nft rules only as opaque `xt` matches.
fn read_live_rules() -> Result<(&'static str, InputChain), String> {
    let mut problems = Vec::new();
    match find_tool("nft") {
        Some(nft) => match run_with_timeout(&nft, &["-j", "list", "ruleset"]) {
            Ok(out) if out.success => match parse_nft_json(&out.stdout) {
                Ok(chain) if chain.name.is_some() && !uses_xtables_compat(&chain) => {
                    return Ok(("nftables", chain));
                }
                Ok(chain) if chain.name.is_none() => {
                    problems.push("nft: no input hook chain".to_string())
                }
                Ok(_) => problems.push("nft: iptables-nft rules (xt matches)".to_string()),
                Err(e) => problems.push(format!("nft: {e}")),
            },
            Ok(out) => problems.push(command_failure("nft", &out)),
            Err(e) => problems.push(format!("nft: {e}")),
        },
        None => problems.push("nft not found".into()),
    }
    match find_tool("iptables-save") {
        Some(save) => match run_with_timeout(&save, &["-t", "filter"]) {
            Ok(out) if out.success => Ok((
                "iptables",
                parse_iptables_save(&out.stdout).unwrap_or_else(no_rules),
            )),
            Ok(out) => {
                problems.push(command_failure("iptables-save", &out));
                Err(problems.join("; "))
            }
            Err(e) => {
                problems.push(format!("iptables-save: {e}"));
                Err(problems.join("; "))
            }
        },
        None if problems.iter().any(|p| p.contains("no input hook")) => {
            Ok(("nftables", no_rules()))
        }
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

fn command_failure(tool: &str, out: &CommandOutput) -> String {
    let msg = out.stderr.trim();
    let lower = msg.to_ascii_lowercase();
    if lower.contains("permission denied") || lower.contains("operation not permitted") {
        format!("not root: {tool} was denied ({msg}); run as root to read the firewall rules")
    } else if msg.is_empty() {
        format!("{tool} failed")
    } else {
        format!("{tool} failed: {msg}")
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

fn find_tool(name: &str) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

struct CommandOutput {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs a command with `LC_ALL=C`, killing it after [`COMMAND_TIMEOUT`]. Output is read on
/// threads so a large ruleset cannot fill the pipe and stall the child.
fn run_with_timeout(program: &Path, args: &[&str]) -> Result<CommandOutput, String> {
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = child.stdout.take().map(read_on_thread);
    let stderr = child.stderr.take().map(read_on_thread);
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for {}: {e}", program.display())),
        }
    };
    let collect = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    match status {
        Some(s) => Ok(CommandOutput {
            success: s.success(),
            stdout,
            stderr,
        }),
        None => Err(format!(
            "{} timed out after {} s",
            program.display(),
            COMMAND_TIMEOUT.as_secs()
        )),
    }
}

fn read_on_thread<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

// ----- matches shared by both parsers -----

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
    let source = pick("source", &outer.source, &inner.source);
    let destination = pick("destination", &outer.destination, &inner.destination);
    let ct_state = pick("ct-state", &outer.ct_state, &inner.ct_state);
    conditions.extend(inner.conditions.iter().cloned());
    Some(FwRule {
        action: inner.action,
        protocol,
        dports: intersect_ports(&outer.dports, &inner.dports)?,
        in_interface,
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

/// Inlines `chain` (and the chains it jumps to) into `out`, each rule combined with `outer`.
/// Returns false when an unconditional RETURN/goto ended the chain early.
fn flatten(
    chain: &str,
    outer: &FwRule,
    chains: &HashMap<String, Vec<ParsedRule>>,
    base: &str,
    depth: usize,
    out: &mut Vec<FwRule>,
) {
    let Some(rules) = chains.get(chain) else {
        return;
    };
    for rule in rules {
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
                flatten(next, &merged, chains, base, depth + 1, out)
            }
            Target::Goto(next) if depth < MAX_DEPTH => {
                flatten(next, &merged, chains, base, depth + 1, out);
                if matches_everything(&rule.matches) {
                    return;
                }
            }
            Target::Return if matches_everything(&rule.matches) => return,
            _ => {}
        }
    }
}

// ----- iptables-save -----

/// The `filter` table's INPUT chain from `iptables-save` output, with user chains
/// jumped to from INPUT (ufw-before-input, ...) flattened in order. None when the
/// output has no filter table or no INPUT chain.
pub fn parse_iptables_save(text: &str) -> Option<InputChain> {
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
            if name == "INPUT" {
                policy = parts.next().map(str::to_ascii_lowercase);
            }
            chains.entry(name).or_default();
        } else if let Some((chain, rule)) = parse_iptables_rule(line) {
            chains.entry(chain).or_default().push(rule);
        }
    }
    let policy = policy?;
    let mut rules = Vec::new();
    flatten("INPUT", &FwRule::default(), &chains, "INPUT", 0, &mut rules);
    Some(InputChain {
        policy,
        rules,
        name: Some("filter INPUT".into()),
        then: Vec::new(),
    })
}

/// Splits an iptables-save line into words, honouring "quoted strings" with \" escapes.
fn split_words(line: &str) -> Vec<String> {
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
fn parse_iptables_rule(line: &str) -> Option<(String, ParsedRule)> {
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
            "-o" | "--out-interface" => {}
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

// ----- nftables JSON -----

type ChainKey = (String, String, String);

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
            if let Some(base) = nft_input_base_chain(chain) {
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

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn nft_input_base_chain(chain: &Value) -> Option<NftBaseChain> {
    let family = str_field(chain, "family")?;
    if str_field(chain, "hook")? != "input" || !matches!(family.as_str(), "ip" | "inet") {
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
    let mut out = Vec::new();
    flatten(name, &FwRule::default(), &chains, name, 0, &mut out);
    InputChain {
        policy: base.policy.to_ascii_lowercase(),
        rules: out,
        name: Some(format!("{family} {table} {name}")),
        then: Vec::new(),
    }
}

/// Named sets of ports (`set cluster_ports { type inet_service; ... }`), by (family, table, name).
fn nft_port_sets(items: &[Value]) -> HashMap<ChainKey, Vec<(u16, u16)>> {
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
    if let Some(p) = left.get("payload") {
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

fn parse_nft_rule(
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
    if !matches!(op, "==" | "in") {
        m.conditions.push(text.clone());
        return text;
    }
    let payload = left.get("payload");
    let proto = payload.and_then(|p| str_field(p, "protocol"));
    let field = payload.and_then(|p| str_field(p, "field"));
    let meta = left.get("meta").and_then(|x| str_field(x, "key"));
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
        (_, _, Some("nfproto"), _) if right.as_str() == Some("ipv4") => {}
        (_, _, _, Some("state")) => m.ct_state = Some(nft_value_text(right)),
        _ => m.conditions.push(text.clone()),
    }
    text
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

    fn fixture(name: &str) -> String {
        crate::testutil::fixture_text(&format!("firewall/{name}"))
    }

    fn texts(chain: &InputChain) -> Vec<&str> {
        chain.rules.iter().map(|r| r.text.as_str()).collect()
    }

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
    fn several_base_chains_are_kept_in_priority_order() {
        let json = r#"{"nftables":[
            {"chain":{"family":"inet","table":"late","name":"input","hook":"input","prio":10,"policy":"accept"}},
            {"chain":{"family":"ip6","table":"six","name":"input","hook":"input","prio":-5,"policy":"drop"}},
            {"chain":{"family":"ip","table":"early","name":"INPUT","hook":"input","prio":0,"policy":"drop"}}]}"#;
        let c = parse_nft_json(json).expect("parses");
        assert_eq!(c.name.as_deref(), Some("ip early INPUT"));
        assert_eq!(c.then.len(), 1);
        assert_eq!(c.then[0].name.as_deref(), Some("inet late input"));
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
    fn ufw_and_firewalld_state_from_files() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = Root::at(d.path());
        assert_eq!(ufw_state(&root), None);
        assert_eq!(firewalld_state(&root), None);
        std::fs::create_dir_all(d.path().join("etc/ufw")).expect("mkdir");
        std::fs::write(
            d.path().join("etc/ufw/ufw.conf"),
            "# /etc/ufw/ufw.conf\n#\n\n# Set to yes to start on boot.\nENABLED=yes\n\nLOGLEVEL=low\n",
        )
        .expect("write");
        assert_eq!(ufw_state(&root).as_deref(), Some("active"));
        std::fs::write(
            d.path().join("etc/ufw/ufw.conf"),
            "#ENABLED=yes\nENABLED=no\n",
        )
        .expect("write");
        assert_eq!(ufw_state(&root).as_deref(), Some("inactive"));
        std::fs::create_dir_all(d.path().join("var/run/firewalld")).expect("mkdir");
        std::fs::create_dir_all(d.path().join("proc/812")).expect("mkdir");
        std::fs::write(d.path().join("var/run/firewalld/firewalld.pid"), "812\n").expect("write");
        assert_eq!(firewalld_state(&root).as_deref(), Some("running"));
        let facts = probe(&root);
        assert!(facts.read_error.is_some());
        assert_eq!(facts.input, None);
    }

    #[test]
    fn commands_time_out_and_report_failures() {
        let Some(sleep) = find_tool("sleep") else {
            return;
        };
        let started = Instant::now();
        let err = run_with_timeout(&sleep, &["30"]).err().expect("timed out");
        assert!(err.contains("timed out"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let out = CommandOutput {
            success: false,
            stdout: String::new(),
            stderr: "iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)\n".into(),
        };
        assert!(command_failure("iptables-save", &out).starts_with("not root"));
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
