//! Sets of nodes as a person names them: Slurm hostlist syntax (`node[001-063,065]`) with the
//! ranks, and a fix command that is the same on many nodes given once, in a form that runs it
//! on all of them (`pdsh -w`, with `clush -w` and `srun -w` alternatives).

use super::super::sanitize::shown;
use preflight_checks::hostlist::compress_within;
use preflight_checks::model::Report;
use std::collections::HashMap;

/// Longest host list written out before "and N more".
pub const HOSTLIST_MAX: usize = 48;

/// Hostnames of the report's ranks, by rank.
pub fn names(report: &Report) -> HashMap<u32, &str> {
    report
        .nodes
        .iter()
        .map(|n| (n.rank, n.hostname.as_str()))
        .collect()
}

/// `node[01-08]`: the hosts of `ranks` in hostlist syntax, cut after about `max` characters.
pub fn hostlist(report: &Report, ranks: &[u32], max: usize) -> String {
    let by_rank = names(report);
    let hosts: Vec<String> = ranks
        .iter()
        .map(|r| {
            by_rank
                .get(r)
                .map(|h| shown(h).into_owned())
                .unwrap_or_else(|| format!("rank{r}"))
        })
        .collect();
    compress_within(&hosts, max)
}

/// A fix command split from its `   # on rank 3 (node04)` (or `# on rank 3`) note: the command
/// and the rank it names.
pub fn split_on_rank(command: &str) -> Option<(&str, u32)> {
    let (cmd, note) = command.rsplit_once("# on rank ")?;
    let cmd = cmd.trim_end();
    let digits: String = note.chars().take_while(char::is_ascii_digit).collect();
    let rest = note[digits.len()..].trim();
    let rank = digits.parse().ok()?;
    // Only the note itself may follow: nothing, or the host in parentheses.
    (!cmd.is_empty() && (rest.is_empty() || (rest.starts_with('(') && rest.ends_with(')'))))
        .then_some((cmd, rank))
}

/// The fix commands of a group of findings, each once: a command given for three nodes or
/// more (`ethtool eno1   # on rank N`) becomes one `pdsh -w HOSTS 'CMD'` line, the first such
/// line followed by its `clush` and `srun` alternatives (as comments, so every line pastes).
pub fn commands(report: &Report, commands: &[&str]) -> Vec<String> {
    let mut per_cmd: Vec<(&str, Vec<u32>)> = Vec::new();
    for c in commands {
        if let Some((cmd, rank)) = split_on_rank(c) {
            match per_cmd.iter_mut().find(|(k, _)| *k == cmd) {
                Some((_, ranks)) => ranks.push(rank),
                None => per_cmd.push((cmd, vec![rank])),
            }
        }
    }
    let mut out = Vec::new();
    let mut done: Vec<&str> = Vec::new();
    let mut alternatives = true;
    for c in commands {
        let Some((cmd, _)) = split_on_rank(c).filter(|(cmd, _)| {
            per_cmd
                .iter()
                .any(|(k, ranks)| k == cmd && ranks.len() >= 3)
        }) else {
            out.push((*c).to_string());
            continue;
        };
        if done.contains(&cmd) {
            continue;
        }
        done.push(cmd);
        let ranks = &per_cmd
            .iter()
            .find(|(k, _)| *k == cmd)
            .map(|(_, r)| r.clone());
        let ranks = ranks.as_deref().unwrap_or_default();
        let hosts = crate::shell::quote(&hostlist(report, ranks, usize::MAX));
        let quoted = crate::shell::quote(cmd);
        out.push(format!("pdsh -w {hosts} {quoted}"));
        if alternatives {
            alternatives = false;
            out.push(format!("# or: clush -w {hosts} {quoted}"));
            out.push(format!(
                "# or: srun -w {hosts} -N {} sh -c {quoted}",
                ranks.len()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_naming_a_rank_is_split_off() {
        assert_eq!(
            split_on_rank("ethtool eno1   # on rank 3 (node04)"),
            Some(("ethtool eno1", 3))
        );
        assert_eq!(
            split_on_rank("export NCCL_HOSTID=preflight-rank2   # on rank 2"),
            Some(("export NCCL_HOSTID=preflight-rank2", 2))
        );
        assert_eq!(split_on_rank("ethtool eno1"), None);
        assert_eq!(split_on_rank("x # on rank 3 and more"), None);
    }
}
