//! The user's own launch line: its words, what torchrun will do with it, how it fares against
//! this node, and the command printed back fixed (`preflight torchrun`).

pub mod args;
#[cfg(test)]
mod corpus_tests;
pub mod head;
pub mod options;
pub mod rewrite;
pub mod validate;

use crate::advise::{AdviceInput, advise_node};
pub use crate::placement::resolve_host;
use args::{Parsed, Word};
use preflight_checks::model::{self, Finding, NodeFacts, Recommendation, Status};
use std::collections::BTreeMap;
use validate::{CommandShape, Context, Correction, LineJob, Resolved, ScriptFile};

/// Largest script read for the legacy `--local-rank` check.
const SCRIPT_READ_LIMIT: u64 = 4 << 20;

/// The command's words: argv as given, or one pasted line split as a shell would, its `$VAR`s
/// expanded from `env` (the shell already expanded argv).
pub fn words_of(raw: &[String], env: &BTreeMap<String, String>) -> anyhow::Result<Vec<Word>> {
    match raw {
        [line] if line.trim().contains(char::is_whitespace) => args::split_line(line, Some(env))
            .map_err(|e| anyhow::anyhow!("cannot split the pasted command line: {e}")),
        _ => Ok(raw.iter().map(Word::plain).collect()),
    }
}

/// The script's text when it is a readable local file (bounded read).
fn read_script(p: &Parsed) -> Option<String> {
    use std::io::Read;
    if p.has("module") {
        return None;
    }
    let file = std::fs::File::open(p.script()?).ok()?;
    let mut text = String::new();
    file.take(SCRIPT_READ_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The script as found in the working directory: there, and executable (a module is not looked up).
pub fn script_file(p: &Parsed) -> Option<ScriptFile> {
    use std::os::unix::fs::PermissionsExt;
    if p.has("module") {
        return None;
    }
    let script = p.script()?;
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".into());
    let meta = std::fs::metadata(script).ok().filter(|m| m.is_file());
    Some(ScriptFile {
        cwd,
        exists: meta.is_some(),
        executable: meta.is_some_and(|m| m.permissions().mode() & 0o111 != 0),
    })
}

/// The recommended environment for `rank`: the shared values, then the node's own.
pub fn env_for_rank(rec: Option<&Recommendation>, rank: u32) -> BTreeMap<String, String> {
    let Some(rec) = rec else {
        return BTreeMap::new();
    };
    let mut env = rec.env.clone();
    if let Some(own) = rec.node_env.get(&rank.to_string()) {
        env.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env
}

/// Everything judged about the command on this node.
pub struct Judged {
    pub parsed: Parsed,
    pub shape: CommandShape,
    pub findings: Vec<Finding>,
    pub fixes: Vec<Correction>,
    pub resolved: Option<Resolved>,
}

/// Parses and validates the command against `facts`; the fixed command (without environment)
/// goes into the fix of every finding that has a correction.
pub fn judge(
    parsed: Parsed,
    facts: &NodeFacts,
    resolved: Option<Resolved>,
    job: LineJob,
) -> Judged {
    let mut shape = validate::shape_of(&parsed);
    if let Some(rank) = job.rank {
        shape.rank = rank;
    }
    let this_addr = advise_node(facts, &AdviceInput::default()).master_addr;
    let ctx = Context {
        facts,
        resolved: resolved.clone(),
        script_text: if parsed.launcher.is_legacy() {
            read_script(&parsed)
        } else {
            None
        },
        this_addr,
        job,
    };
    let pairs = validate::check(&parsed, &ctx);
    let fixes: Vec<Correction> = pairs.iter().filter_map(|(_, c)| c.clone()).collect();
    let fixed = rewrite::rewrite(&parsed, &fixes, &BTreeMap::new());
    let findings = pairs
        .into_iter()
        .map(|(mut f, c)| {
            if c.is_some() {
                if let Some(fix) = f.fix.as_mut() {
                    fix.commands.push(fixed.clone());
                }
            }
            f
        })
        .collect();
    Judged {
        parsed,
        shape,
        findings,
        fixes,
        resolved,
    }
}

/// The `launch.command` finding: the command to run on this node, fixed, environment in front.
/// Also returns which of the line's own `NAME=value` words the advice replaced ("NCCL_SOCKET_IFNAME=bond0 -> eth0").
pub fn command_finding(j: &Judged, rec: Option<&Recommendation>) -> (Finding, String, Vec<String>) {
    let rank = j.shape.rank;
    let env = env_for_rank(rec, rank);
    let command = rewrite::rewrite(&j.parsed, &j.fixes, &env);
    let changed = rewrite::env_changes(&j.parsed, &env);
    let kept = if j.parsed.head.env.is_empty() {
        String::new()
    } else if changed.is_empty() {
        format!(
            "; your own {} kept as written",
            j.parsed
                .head
                .env
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!(
            "; of your own environment, {} replaced (the rest kept as written)",
            changed
                .iter()
                .map(|c| format!("{}={} -> {}", c.name, c.yours, c.recommended))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let f = Finding::new(
        preflight_checks::launch::ids::COMMAND,
        Status::Pass,
        format!("rank {rank}"),
        format!(
            "the command for rank {rank}: the recommended environment merged in, {} corrected flag(s), nothing else changed{kept}",
            j.fixes.len()
        ),
    )
    .with("command", &command)
    .with("env", &env)
    .with("env_replaced", &changed)
    .with("corrections", j.fixes.len())
    .on_node(Some(rank));
    let replaced = changed
        .iter()
        .map(|c| format!("{}={} -> {}", c.name, c.yours, c.recommended))
        .collect();
    (f, command, replaced)
}

/// The port to probe: the endpoint's (the one this node may have to bind).
pub fn probe_port(shape: &CommandShape) -> u16 {
    shape
        .endpoint
        .as_ref()
        .map(|(_, p)| *p)
        .filter(|p| *p != 0)
        .unwrap_or(crate::placement::DEFAULT_MASTER_PORT)
}

/// Failed findings that would make a multi-node rendezvous wait for nothing (wrong ranks, endpoint, node count).
pub fn blocking_failures(j: &Judged) -> Vec<String> {
    const BLOCKING: [preflight_checks::core::FindingId; 5] = [
        preflight_checks::launch::ids::ARGS,
        preflight_checks::launch::ids::NNODES,
        preflight_checks::launch::ids::NODE_RANK,
        preflight_checks::launch::ids::ENDPOINT,
        preflight_checks::launch::ids::STANDALONE,
    ];
    if j.shape.max_nodes() <= 1 {
        return Vec::new();
    }
    j.findings
        .iter()
        .filter(|f| f.status == Status::Fail && BLOCKING.iter().any(|id| f.id == *id))
        .map(|f| f.id.clone())
        .collect()
}

/// A port on 127.0.0.1 that was free a moment ago, for a 1-node run.
pub fn free_local_port() -> Option<u16> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .ok()
}

pub fn port_free(facts: &NodeFacts, port: u16) -> bool {
    facts.ports.port == port && facts.ports.ipv4.status == model::BindStatus::Free
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (source, expect line, command) of every entry in tests/fixtures/torchrun/commands.txt.
    fn fixture_commands() -> Vec<(String, String, String)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/torchrun/commands.txt"
        );
        let text = std::fs::read_to_string(path).expect("fixture file");
        let mut out = Vec::new();
        for entry in text.split("\n\n") {
            let (mut source, mut expect, mut command) = (None, None, String::new());
            for line in entry.lines() {
                if let Some(s) = line.strip_prefix("# source: ") {
                    source = Some(s.to_string());
                } else if let Some(e) = line.strip_prefix("# expect: ") {
                    expect = Some(e.to_string());
                } else if !line.starts_with('#') {
                    command.push_str(line);
                    command.push('\n');
                }
            }
            if let (Some(s), Some(e)) = (source, expect) {
                out.push((s, e, command.trim_end().to_string()));
            }
        }
        out
    }

    #[test]
    fn real_world_commands_parse_and_round_trip() {
        let commands = fixture_commands();
        assert!(
            commands.len() >= 14,
            "only {} fixture commands",
            commands.len()
        );
        for (source, expect, line) in commands {
            let words = args::split_shell_words(&line).unwrap_or_else(|e| panic!("{source}: {e}"));
            let p = args::parse(words.clone());
            let fields: Vec<&str> = expect.split(" | ").collect();
            assert_eq!(p.script(), Some(fields[0]), "{source}: script");
            assert_eq!(
                p.script_args().len().to_string(),
                fields[1],
                "{source}: script args"
            );
            let names: Vec<&str> = p.opts.iter().map(|o| o.name).collect();
            assert_eq!(
                names,
                fields[2].split(' ').collect::<Vec<_>>(),
                "{source}: options"
            );
            // A placeholder from a doc (`--master-port [port]`) is what torchrun would refuse.
            let real: Vec<_> = p
                .problems
                .iter()
                .filter(|x| !matches!(x, args::Problem::BadValue { message, .. } if message.ends_with("'[port]'")))
                .collect();
            assert!(real.is_empty(), "{source}: {:?}", p.problems);
            assert_ne!(p.launcher, args::Launcher::Bare, "{source}");
            // Printed back with no correction and no environment: the same words, as written.
            let printed = rewrite::rewrite(&p, &[], &BTreeMap::new());
            let as_written: Vec<String> = words.iter().filter_map(|w| w.raw.clone()).collect();
            assert_eq!(printed, as_written.join(" "), "{source}");
            assert_eq!(
                args::split_shell(&printed).unwrap(),
                args::split_shell(&line).unwrap(),
                "{source}"
            );
        }
    }

    #[test]
    fn one_pasted_line_is_split_and_argv_is_kept() {
        let w = words_of(
            &["torchrun --nnodes=2 'a b.py'".to_string()],
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w[2].value, "a b.py");
        let w = words_of(&["--nnodes=2".into(), "a b.py".into()], &BTreeMap::new()).unwrap();
        assert_eq!(w[1].value, "a b.py");
        assert!(words_of(&["torchrun 'x".to_string()], &BTreeMap::new()).is_err());
    }

    #[test]
    fn literal_addresses_resolve_without_a_lookup() {
        let r = resolve_host("[::1]");
        assert_eq!(r.addrs, vec!["::1".parse::<std::net::IpAddr>().unwrap()]);
        assert!(resolve_host("127.0.0.1").error.is_none());
        assert!(
            resolve_host("localhost")
                .addrs
                .iter()
                .all(|a| a.is_loopback())
        );
    }

    #[test]
    fn node_env_overrides_the_shared_env_for_that_rank() {
        let mut rec = Recommendation::default();
        rec.env.insert("NCCL_SOCKET_IFNAME".into(), "eth0".into());
        rec.env.insert("NCCL_IB_DISABLE".into(), "1".into());
        let mut own = BTreeMap::new();
        own.insert("NCCL_SOCKET_IFNAME".to_string(), "eno1".to_string());
        rec.node_env.insert("1".into(), own);
        assert_eq!(env_for_rank(Some(&rec), 1)["NCCL_SOCKET_IFNAME"], "eno1");
        assert_eq!(env_for_rank(Some(&rec), 0)["NCCL_SOCKET_IFNAME"], "eth0");
        assert!(env_for_rank(None, 0).is_empty());
    }
}
