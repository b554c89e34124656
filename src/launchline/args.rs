//! torchrun's argument surface, parsed as torch's argparse does, keeping every original token.
//!
//! Accepts `torchrun ...`, `python -m torch.distributed.run ...`, `python3 -m
//! torch.distributed.launch ...` or the bare arguments. Options come in
//! `--flag=value` and `--flag value` forms, dash or underscore spellings; the
//! first token that is not an option is the script (or module with `-m`) and
//! everything after it belongs to the script, untouched. Nothing here fails:
//! what torchrun would reject is recorded as a [`Problem`] for the checks.
//! The option table follows `torch/distributed/run.py` (`get_args_parser`) and
//! `torch/distributed/launch.py` (`--use-env`).

use super::head::Head;
pub use super::head::{Launcher, Word};
pub use super::options::{ACCELERATE, DEEPSPEED, OPTIONS, OptSpec, spec};
use super::options::{ACCELERATE_FLAGS, DEEPSPEED_FLAGS, Named, resolve};

/// How an option's value was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueForm {
    /// `--flag=value` (or `-r3`): the value is inside the option's token.
    Inline,
    /// `--flag value`: the value is the next token.
    Separate,
    /// A flag without a value.
    None,
}

/// One recognised option occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedOpt {
    /// Canonical name ("nproc-per-node").
    pub name: &'static str,
    /// The spelling used, without any `=value` ("--nproc_per_node").
    pub spelled: String,
    /// The value, with one pair of surrounding quotes removed (`'192.168.1.2'` -> 192.168.1.2).
    pub value: Option<String>,
    pub form: ValueForm,
    /// Index of the option's token in [`Parsed::words`].
    pub index: usize,
}

/// Something torchrun would reject or misread; becomes a finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// An option torchrun does not know (before the script).
    Unknown { index: usize, word: String },
    /// A prefix of several options (`--nproc`): argparse stops with "ambiguous option".
    Ambiguous {
        index: usize,
        word: String,
        candidates: Vec<&'static str>,
    },
    /// An option torchrun knows only under `torch.distributed.launch` (`--use-env` under torchrun).
    LaunchOnly { index: usize, word: String },
    /// An option that needs a value got none.
    MissingValue { index: usize, word: String },
    /// A value torch's argparse refuses for the option's type or choices (`--master-port=abc`):
    /// argparse's own message, "argument --master-port/--master_port: invalid int value: 'abc'".
    BadValue {
        index: usize,
        word: String,
        message: String,
    },
    /// A store-true flag was given a value (`--standalone=1`).
    ValueOnFlag { index: usize, word: String },
    /// No script after the options.
    NoScript,
}

/// A parsed launch command. `words` is the whole command as given, launcher words included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub words: Vec<Word>,
    pub launcher: Launcher,
    /// The environment and wrappers in front of the launcher, and where it starts.
    pub head: Head,
    /// Number of launcher words (`torchrun` = 1, `python -m torch.distributed.run` = 3), from `head.start`.
    pub launcher_len: usize,
    pub opts: Vec<ParsedOpt>,
    /// Index of the script (or module) in `words`.
    pub script_index: Option<usize>,
    pub problems: Vec<Problem>,
}

impl Parsed {
    /// The spec of a canonical option name in this launcher's table.
    pub fn spec(&self, name: &str) -> Option<&'static OptSpec> {
        self.launcher.table().iter().find(|o| o.name == name)
    }

    /// Index of the first word after the launcher words.
    pub fn options_start(&self) -> usize {
        self.head.start + self.launcher_len
    }

    /// The job's environment as the line gives it (`VAR=value` words, `env VAR=value`), last wins.
    pub fn line_env(&self) -> std::collections::BTreeMap<String, String> {
        self.head
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect()
    }

    /// Every unset `$VAR` in the line, with the word it is in.
    pub fn unset_vars(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for w in &self.words {
            for v in &w.unset {
                if !out.iter().any(|(n, _)| n == v) {
                    out.push((v.clone(), w.shell_text()));
                }
            }
        }
        out
    }

    /// The value of the last occurrence of an option (argparse: last wins).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.last(name).and_then(|o| o.value.as_deref())
    }

    /// The last occurrence of an option.
    pub fn last(&self, name: &str) -> Option<&ParsedOpt> {
        self.opts.iter().rev().find(|o| o.name == name)
    }

    /// Whether a flag or option was given.
    pub fn has(&self, name: &str) -> bool {
        self.opts.iter().any(|o| o.name == name)
    }

    /// The script (or module with `-m`).
    pub fn script(&self) -> Option<&str> {
        self.script_index
            .and_then(|i| self.words.get(i))
            .map(|w| w.value.as_str())
    }

    /// Everything after the script, untouched.
    pub fn script_args(&self) -> Vec<String> {
        match self.script_index {
            Some(i) => self.words[i + 1..]
                .iter()
                .map(|w| w.value.clone())
                .collect(),
            None => Vec::new(),
        }
    }

    /// The script and its arguments.
    pub fn script_and_args(&self) -> Vec<String> {
        match self.script_index {
            Some(i) => self.words[i..].iter().map(|w| w.value.clone()).collect(),
            None => Vec::new(),
        }
    }

    /// Whether the user writes underscores (`--nproc_per_node`) rather than dashes.
    pub fn prefers_underscores(&self) -> bool {
        let under = self.opts.iter().filter(|o| o.spelled.contains('_')).count();
        let dash = self
            .opts
            .iter()
            .filter(|o| o.spelled.trim_start_matches('-').contains('-'))
            .count();
        under > dash
    }
}

/// Removes one pair of matching surrounding quotes: `'x'` or `"x"`.
pub fn unquote(v: &str) -> &str {
    for q in ['\'', '"'] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// Is this word an option (rather than the script or a value)? A lone `-` and negative numbers are not.
fn looks_like_option(w: &str) -> bool {
    w.starts_with('-') && w.len() > 1 && w.parse::<f64>().is_err()
}

/// Splits an option word into its spelling and an inline value: `--a=b`, `-r3`, `-r=3`.
fn split_option(word: &str) -> (String, Option<String>) {
    if let Some(rest) = word.strip_prefix("--") {
        return match rest.split_once('=') {
            Some((name, v)) => (format!("--{name}"), Some(v.to_string())),
            None => (word.to_string(), None),
        };
    }
    // Single dash: -m, -r, -t; the rest of the word is the value (argparse allows -r3 and -r=3).
    let mut chars = word.chars();
    chars.next();
    match chars.next() {
        Some(c) => {
            let rest: String = chars.collect();
            let v = rest.strip_prefix('=').unwrap_or(&rest).to_string();
            (format!("-{c}"), (!rest.is_empty()).then_some(v))
        }
        None => (word.to_string(), None),
    }
}

/// Parses a launch command (argv words or [`split_shell_words`] output).
pub fn parse(words: Vec<Word>) -> Parsed {
    let (launcher, head) = super::head::read(&words);
    let launcher_len = head.len;
    let table = launcher.table();
    let mut opts = Vec::new();
    let mut problems = Vec::new();
    let mut script_index = None;
    let mut i = head.start + launcher_len;
    if launcher == Launcher::Other {
        // Not a launcher preflight reads: only a python script is known.
        return Parsed {
            script_index: head.python_script,
            words,
            launcher,
            head,
            launcher_len,
            opts,
            problems,
        };
    }
    while i < words.len() {
        let word = words[i].value.as_str();
        if word == "--" {
            // argparse: everything after `--` is positional; the script follows.
            script_index = (i + 1 < words.len()).then_some(i + 1);
            break;
        }
        if !looks_like_option(word) {
            script_index = Some(i);
            break;
        }
        let (spelling, inline) = split_option(word);
        let spec = match resolve(table, launcher, &spelling) {
            Named::One(spec) => Some(spec),
            Named::Ambiguous(candidates) => {
                problems.push(Problem::Ambiguous {
                    index: i,
                    word: word.to_string(),
                    candidates,
                });
                i += 1;
                continue;
            }
            Named::Unknown => None,
        };
        let Some(spec) = spec else {
            if !launcher.is_torch() {
                // accelerate/deepspeed have many options of their own: known flags take no
                // value, every other one takes the next word unless it is inline or an option.
                let (long, inline) = match word.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (word, None),
                };
                let next = words.get(i + 1).map(|w| w.value.as_str());
                let flag = launcher.known_flags().contains(&long)
                    || inline.is_some()
                    || next.is_none_or(|n| looks_like_option(n) || n.ends_with(".py"));
                i += if flag { 1 } else { 2 };
                continue;
            }
            problems.push(Problem::Unknown {
                index: i,
                word: word.to_string(),
            });
            i += 1;
            continue;
        };
        if spec.launch_only && launcher != Launcher::Launch {
            problems.push(Problem::LaunchOnly {
                index: i,
                word: word.to_string(),
            });
            i += 1;
            continue;
        }
        let (value, form, used) = if !spec.takes_value {
            if inline.is_some() {
                problems.push(Problem::ValueOnFlag {
                    index: i,
                    word: word.to_string(),
                });
            }
            (None, ValueForm::None, 1)
        } else if let Some(v) = inline {
            (Some(unquote(&v).to_string()), ValueForm::Inline, 1)
        } else {
            match words.get(i + 1).map(|w| w.value.as_str()) {
                Some(next) if !looks_like_option(next) || next.parse::<f64>().is_ok() => {
                    (Some(unquote(next).to_string()), ValueForm::Separate, 2)
                }
                _ => {
                    problems.push(Problem::MissingValue {
                        index: i,
                        word: word.to_string(),
                    });
                    (None, ValueForm::None, 1)
                }
            }
        };
        if let Some(message) = value
            .as_deref()
            // `$VAR` not expanded here is the shell's to fill in: judged once it is.
            .filter(|v| launcher.is_torch() && !v.contains(['$', '`']))
            .and_then(|v| bad_value(spec, v))
        {
            problems.push(Problem::BadValue {
                index: i,
                word: word.to_string(),
                message,
            });
        }
        opts.push(ParsedOpt {
            name: spec.name,
            spelled: spelling,
            value,
            form,
            index: i,
        });
        i += used;
    }
    match script_index {
        None => problems.push(Problem::NoScript),
        Some(at)
            if launcher.is_torch()
                && at
                    .checked_sub(1)
                    .and_then(|k| words.get(k))
                    .is_none_or(|w| w.value != "--") =>
        {
            problems.extend(ambiguous_in_script(&words, at, table, launcher));
        }
        Some(_) => {}
    }
    Parsed {
        words,
        launcher,
        head,
        launcher_len,
        opts,
        script_index,
        problems,
    }
}

/// argparse sorts every word before the first `--` into option or not before it hands the
/// script its arguments, and stops at an ambiguous prefix there too: `torchrun train.py
/// --nproc=9` fails ("ambiguous option: --nproc=9 could match ..."), while `--nproc-per=9`
/// (one match) and exact names go to the script untouched.
fn ambiguous_in_script(
    words: &[Word],
    script: usize,
    table: &'static [OptSpec],
    launcher: Launcher,
) -> Vec<Problem> {
    let mut out = Vec::new();
    for (index, w) in words.iter().enumerate().skip(script + 1) {
        if w.value == "--" {
            break;
        }
        if !w.value.starts_with("--") {
            continue;
        }
        let (spelling, _) = split_option(&w.value);
        if let Named::Ambiguous(candidates) = resolve(table, launcher, &spelling) {
            out.push(Problem::Ambiguous {
                index,
                word: w.value.clone(),
                candidates,
            });
        }
    }
    out
}

/// argparse's complaint about a value of torchrun's typed options (`type=int`, `type=float`,
/// `choices=`), as run.py declares them; None when torchrun takes it.
fn bad_value(spec: &OptSpec, v: &str) -> Option<String> {
    let choices: &[&str] = match spec.name {
        "start-method" => &["spawn", "fork", "forkserver"],
        "numa-binding" => &["node", "socket", "exclusive", "core-complex"],
        _ => &[],
    };
    let kind = match spec.name {
        "max-restarts" | "node-rank" | "master-port" => "int",
        "monitor-interval" => "float",
        _ if !choices.is_empty() => "choice",
        _ => return None,
    };
    let ok = match kind {
        "int" => python_int(v),
        "float" => python_int(v) || v.trim().replace('_', "").parse::<f64>().is_ok(),
        _ => choices.contains(&v),
    };
    let names = spec.spellings.join("/");
    (!ok).then(|| match kind {
        "choice" => format!(
            "argument {names}: invalid choice: '{v}' (choose from {})",
            choices
                .iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => format!("argument {names}: invalid {kind} value: '{v}'"),
    })
}

/// What Python's `int(str)` takes: spaces around, a sign, digits with single `_` between them.
fn python_int(v: &str) -> bool {
    let t = v.trim();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_')
}

/// Parses argv-style strings (what a shell hands over).
pub fn parse_argv(args: &[String]) -> Parsed {
    parse(args.iter().map(Word::plain).collect())
}

/// Why a pasted line could not be split into words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("unterminated {quote} quote starting at character {at}: close it")]
    Unterminated { quote: char, at: usize },
    #[error("the line ends in a lone backslash: remove it or escape the next character")]
    TrailingBackslash,
}

/// Splits one command line as a POSIX shell would (quotes, backslashes, `\`-newline joins),
/// keeping each word's original text. `$VAR` and `$(...)` are left as written, not expanded.
pub fn split_shell_words(line: &str) -> Result<Vec<Word>, SplitError> {
    split_line(line, None)
}

/// A `$NAME`, `${NAME}` or `${NAME:-default}` at `chars[i]` (the `$`): (chars used, value, the
/// variable when it is unset). None when it is not a variable reference (`$(`, `$1`, `$@`).
fn variable_at(
    chars: &[char],
    i: usize,
    env: &std::collections::BTreeMap<String, String>,
) -> Option<(usize, String, Option<String>)> {
    let is_start = |c: &char| c.is_ascii_alphabetic() || *c == '_';
    let is_name = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
    if chars.get(i + 1) == Some(&'{') {
        let close = (i + 2..chars.len()).find(|k| chars[*k] == '}')?;
        let inner: String = chars[i + 2..close].iter().collect();
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n.to_string(), Some(d.to_string())),
            None => (inner.clone(), None),
        };
        if name.is_empty() || !name.chars().all(|c| is_name(&c)) {
            return None;
        }
        let used = close - i + 1;
        return Some(match (env.get(&name).filter(|v| !v.is_empty()), default) {
            (Some(v), _) => (used, v.clone(), None),
            (None, Some(d)) => (used, d, None),
            (None, None) => match env.get(&name) {
                Some(v) => (used, v.clone(), None),
                None => (used, String::new(), Some(name)),
            },
        });
    }
    if !chars.get(i + 1).is_some_and(is_start) {
        return None;
    }
    let end = (i + 1..chars.len())
        .find(|k| !is_name(&chars[*k]))
        .unwrap_or(chars.len());
    let name: String = chars[i + 1..end].iter().collect();
    Some(match env.get(&name) {
        Some(v) => (end - i, v.clone(), None),
        None => (end - i, String::new(), Some(name)),
    })
}

/// Splits one command line as a POSIX shell would (quotes, backslashes, `\`-newline joins),
/// keeping each word's original text. With `env`, `$VAR`, `${VAR}` and `${VAR:-default}`
/// outside single quotes are expanded from it (an unset one becomes empty, as in a shell, and
/// is named in the word's `unset`); `$(...)` and backquotes are never run.
///
/// Our own rather than `shell-words` or `shlex`: both give only the values, and the rewrite
/// prints every word the user did not change exactly as written (quotes and `$VAR` kept), so
/// each word's source text is needed; neither expands variables with quote awareness either.
pub fn split_line(
    line: &str,
    env: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Vec<Word>, SplitError> {
    let chars: Vec<char> = line.chars().collect();
    let mut words = Vec::new();
    let mut value = String::new();
    let mut raw = String::new();
    let mut unset = Vec::new();
    let mut in_word = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '$' {
            if let Some((used, v, missing)) = env.and_then(|e| variable_at(&chars, i, e)) {
                raw.extend(&chars[i..i + used]);
                value.push_str(&v);
                unset.extend(missing);
                in_word = true;
                i += used;
                continue;
            }
        }
        match c {
            '\\' if chars.get(i + 1) == Some(&'\n') => i += 2,
            '\\' => {
                let next = *chars.get(i + 1).ok_or(SplitError::TrailingBackslash)?;
                value.push(next);
                raw.push(c);
                raw.push(next);
                in_word = true;
                i += 2;
            }
            '\'' | '"' => {
                let start = i;
                raw.push(c);
                i += 1;
                loop {
                    let Some(&d) = chars.get(i) else {
                        return Err(SplitError::Unterminated {
                            quote: c,
                            at: start + 1,
                        });
                    };
                    if c == '"' && d == '$' {
                        if let Some((used, v, missing)) =
                            env.and_then(|e| variable_at(&chars, i, e))
                        {
                            raw.extend(&chars[i..i + used]);
                            value.push_str(&v);
                            unset.extend(missing);
                            i += used;
                            continue;
                        }
                    }
                    i += 1;
                    raw.push(d);
                    if d == c {
                        break;
                    }
                    if c == '"' && d == '\\' {
                        if let Some(&e) = chars.get(i).filter(|e| "$`\"\\\n".contains(**e)) {
                            raw.push(e);
                            if e != '\n' {
                                value.push(e);
                            }
                            i += 1;
                            continue;
                        }
                    }
                    value.push(d);
                }
                in_word = true;
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(Word {
                        value: std::mem::take(&mut value),
                        raw: Some(std::mem::take(&mut raw)),
                        unset: std::mem::take(&mut unset),
                    });
                    in_word = false;
                }
                i += 1;
            }
            c => {
                value.push(c);
                raw.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    if in_word {
        words.push(Word {
            value,
            raw: Some(raw),
            unset,
        });
    }
    if env.is_some() {
        words = words.into_iter().flat_map(field_split).collect();
    }
    Ok(words)
}

/// A word that is one unquoted `$NAME`/`${NAME}` splits into fields on whitespace, as the
/// shell splits `torchrun $DISTRIBUTED_ARGS train.py`. The first field keeps the word's text
/// (`$NAME`); the others carry an empty text, so the line prints back as written.
fn field_split(w: Word) -> Vec<Word> {
    let raw = w.raw.clone().unwrap_or_default();
    let bare = raw
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| raw.strip_prefix('$'))
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if !bare || !w.value.contains(char::is_whitespace) {
        return vec![w];
    }
    w.value
        .split_whitespace()
        .enumerate()
        .map(|(i, f)| Word {
            value: f.to_string(),
            raw: Some(if i == 0 { raw.clone() } else { String::new() }),
            unset: Vec::new(),
        })
        .collect()
}

/// Splits one pasted command line into the words a program would receive.
pub fn split_shell(line: &str) -> Result<Vec<String>, SplitError> {
    Ok(split_shell_words(line)?
        .into_iter()
        .map(|w| w.value)
        .collect())
}

/// The closest known spelling to an unknown option, for "did you mean".
pub fn suggest(word: &str) -> Option<&'static str> {
    let (spelling, _) = split_option(word);
    let norm = |s: &str| s.trim_start_matches('-').replace('_', "-").to_lowercase();
    let want = norm(&spelling);
    if want.is_empty() {
        return None;
    }
    let mut best: Option<(usize, &'static str)> = None;
    for o in OPTIONS.iter() {
        for s in o.spellings.iter().filter(|s| s.starts_with("--")) {
            let have = norm(s);
            let common = want
                .chars()
                .zip(have.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let d = if have.starts_with(&want) && want.len() >= 3 {
                0
            } else if common >= 5 && common * 2 >= want.len() {
                1
            } else {
                edit_distance(&want, &have)
            };
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, o.spellings[0]));
            }
        }
    }
    best.filter(|(d, _)| *d <= 2.max(want.len() / 4))
        .map(|(_, s)| s)
}

pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

impl Launcher {
    /// True for the deprecated `torch.distributed.launch`.
    pub fn is_legacy(self) -> bool {
        self == Launcher::Launch
    }

    /// torchrun's own parser: torchrun, `python -m torch.distributed.{run,launch}`, bare arguments.
    pub fn is_torch(self) -> bool {
        matches!(
            self,
            Launcher::Torchrun | Launcher::RunModule | Launcher::Launch | Launcher::Bare
        )
    }

    /// The options this launcher takes (mapped onto torchrun's canonical names where they mean the same).
    pub fn table(self) -> &'static [OptSpec] {
        match self {
            Launcher::Accelerate => ACCELERATE,
            Launcher::Deepspeed => DEEPSPEED,
            Launcher::Other => &[],
            _ => OPTIONS,
        }
    }

    /// Flags (no value) of a launcher whose table is not exhaustive; every other option takes a value.
    fn known_flags(self) -> &'static [&'static str] {
        match self {
            Launcher::Accelerate => ACCELERATE_FLAGS,
            Launcher::Deepspeed => DEEPSPEED_FLAGS,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Parsed {
        parse(split_shell_words(line).expect("splits"))
    }

    #[test]
    fn issue_example_with_mixed_spellings() {
        let c = p(
            "torchrun --nnodes=2 --nproc_per_node=4 --node-rank=0 --rdzv-endpoint=214.2.5.4:60002 --rdzv-backend=c10d --rdzv_id=123 test.py 50 10",
        );
        assert_eq!(c.launcher, Launcher::Torchrun);
        assert_eq!(c.value("nnodes"), Some("2"));
        assert_eq!(c.value("nproc-per-node"), Some("4"));
        assert_eq!(c.value("node-rank"), Some("0"));
        assert_eq!(c.value("rdzv-endpoint"), Some("214.2.5.4:60002"));
        assert_eq!(c.value("rdzv-backend"), Some("c10d"));
        assert_eq!(c.value("rdzv-id"), Some("123"));
        assert_eq!(c.script(), Some("test.py"));
        assert_eq!(c.script_args(), vec!["50", "10"]);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
    }

    #[test]
    fn quoted_values_from_a_paste_and_from_argv_read_the_same() {
        let pasted = p("torchrun --master_addr='192.168.1.2' --master_port='29521' t.py");
        assert_eq!(pasted.value("master-addr"), Some("192.168.1.2"));
        assert_eq!(
            pasted.words[1].raw.as_deref(),
            Some("--master_addr='192.168.1.2'")
        );
        let argv = parse_argv(&[
            "--master_addr='192.168.1.2'".into(),
            "--master_port".into(),
            "\"29521\"".into(),
            "t.py".into(),
        ]);
        assert_eq!(argv.launcher, Launcher::Bare);
        assert_eq!(argv.value("master-addr"), Some("192.168.1.2"));
        assert_eq!(argv.value("master-port"), Some("29521"));
    }

    #[test]
    fn options_after_the_script_belong_to_the_script() {
        let c = p("torchrun --nproc-per-node 2 train.py --nnodes=5 --standalone -m x");
        assert_eq!(c.value("nnodes"), None);
        assert!(!c.has("standalone"));
        assert_eq!(
            c.script_args(),
            vec!["--nnodes=5", "--standalone", "-m", "x"]
        );
    }

    #[test]
    fn python_module_launchers_and_legacy_use_env() {
        let c = p("python3 -m torch.distributed.launch --use_env --nproc_per_node=8 main.py");
        assert_eq!(c.launcher, Launcher::Launch);
        assert_eq!(c.launcher_len, 3);
        assert!(c.has("use-env"));
        let r = p("/opt/venv/bin/python -m torch.distributed.run --standalone x.py");
        assert_eq!(r.launcher, Launcher::RunModule);
        assert!(r.has("standalone"));
        let t = p("torchrun --use-env x.py");
        assert!(matches!(
            t.problems[0],
            Problem::LaunchOnly { index: 1, .. }
        ));
    }

    #[test]
    fn short_options_module_and_values() {
        let c = p("torchrun -r3 -t=2 --redirects 1 -m pkg.train --lr 1");
        let r: Vec<_> = c.opts.iter().map(|o| (o.name, o.value.clone())).collect();
        assert_eq!(
            r,
            vec![
                ("redirects", Some("3".to_string())),
                ("tee", Some("2".to_string())),
                ("redirects", Some("1".to_string())),
                ("module", None)
            ]
        );
        assert_eq!(c.script(), Some("pkg.train"));
    }

    #[test]
    fn unknown_options_missing_values_and_no_script_are_problems_not_panics() {
        let c = p("torchrun --nprocs=2 --nnodes");
        assert!(matches!(&c.problems[0], Problem::Unknown { word, .. } if word == "--nprocs=2"));
        assert!(matches!(&c.problems[1], Problem::MissingValue { word, .. } if word == "--nnodes"));
        assert!(c.problems.contains(&Problem::NoScript));
        assert_eq!(suggest("--nprocs=2"), Some("--nproc-per-node"));
        assert_eq!(suggest("--master-adr"), Some("--master-addr"));
        assert_eq!(suggest("--totally-unrelated-thing"), None);
        assert!(parse(Vec::new()).problems.contains(&Problem::NoScript));
        let flag = p("torchrun --standalone=1 a.py");
        assert!(matches!(flag.problems[0], Problem::ValueOnFlag { .. }));
    }

    #[test]
    fn elastic_range_and_ipv6_endpoint_are_plain_values() {
        let c =
            p("torchrun --nnodes=1:4 --rdzv-endpoint [fd00::1]:29400 --rdzv-conf k=v,k2=v2 a.py");
        assert_eq!(c.value("nnodes"), Some("1:4"));
        assert_eq!(c.value("rdzv-endpoint"), Some("[fd00::1]:29400"));
        assert_eq!(c.value("rdzv-conf"), Some("k=v,k2=v2"));
    }

    #[test]
    fn shell_splitting_handles_quotes_escapes_and_continuations() {
        let w = split_shell_words(
            "torchrun \\\n  --a=\"x y\" 'it''s' b\\ c \"q\\\"\" $VAR:$(hostname)",
        )
        .unwrap();
        let values: Vec<_> = w.iter().map(|w| w.value.as_str()).collect();
        assert_eq!(
            values,
            vec![
                "torchrun",
                "--a=x y",
                "its",
                "b c",
                "q\"",
                "$VAR:$(hostname)"
            ]
        );
        assert_eq!(w[1].raw.as_deref(), Some("--a=\"x y\""));
        assert!(matches!(
            split_shell("a 'b"),
            Err(SplitError::Unterminated { quote: '\'', .. })
        ));
        assert_eq!(split_shell("a \\"), Err(SplitError::TrailingBackslash));
        assert_eq!(split_shell("  ").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn every_option_has_a_unique_spelling() {
        let mut all: Vec<&str> = OPTIONS
            .iter()
            .flat_map(|o| o.spellings.iter().copied())
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(spec("nproc-per-node").is_some_and(|s| s.takes_value));
        assert!(spec("standalone").is_some_and(|s| !s.takes_value));
    }
}
