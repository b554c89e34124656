//! preflight's own flags written after a quoted torchrun line (`preflight torchrun --no-run
//! 'torchrun ... ok.py' --history off`) are read as preflight's, as if written before the line;
//! words there that are no preflight flag are refused with the command that works.

use crate::cli::{Cli, Command};
use clap::{CommandFactory, Parser};
use std::ffi::OsString;

/// Parses argv; on bad flags clap prints the error and exits with code 2.
pub fn parse() -> Cli {
    match parse_from(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    }
}

/// [`parse`] over given words (the first is the program's name).
pub fn parse_from(argv: Vec<OsString>) -> Result<Cli, clap::Error> {
    let cli = Cli::try_parse_from(&argv)?;
    let Command::Torchrun(a) = &cli.command else {
        return Ok(cli);
    };
    let [line, after @ ..] = a.args.as_slice() else {
        return Ok(cli);
    };
    if after.is_empty() || !line.trim().contains(char::is_whitespace) {
        return Ok(cli);
    }
    // trailing_var_arg took the line and every word after it: they are argv's last words.
    let cut = argv.len().saturating_sub(after.len() + 1);
    let mut moved: Vec<OsString> = argv[..cut].to_vec();
    moved.extend(after.iter().map(OsString::from));
    moved.push("--".into());
    moved.push(line.into());
    match Cli::try_parse_from(&moved) {
        // Every word after the line was a flag of preflight's: the line alone is left.
        Ok(again) if matches!(&again.command, Command::Torchrun(b) if b.args == [line.clone()]) => {
            Ok(again)
        }
        _ => Err(refuse(&argv[..cut], line, after)),
    }
}

/// The error for words after the quoted line that are not preflight's: the line that works.
fn refuse(before: &[OsString], line: &str, after: &[String]) -> clap::Error {
    let shown = |w: &[OsString]| {
        w.iter()
            .skip(1)
            .map(|s| crate::shell::quote(&s.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let after_text = after.join(" ");
    let inside = format!("{line} {after_text}");
    Cli::command().error(
        clap::error::ErrorKind::UnknownArgument,
        format!(
            "`{after_text}` after the quoted torchrun command is not a preflight flag; put preflight's flags before the command and the script's arguments inside the quotes:\n  preflight {} {}",
            shown(before),
            crate::shell::quote(&inside)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn preflight_flags_after_the_quoted_line_are_preflights() {
        let cli = parse_from(argv(&[
            "preflight",
            "torchrun",
            "--no-run",
            "torchrun --standalone --nproc-per-node=1 ok.py",
            "--history",
            "off",
            "--format=json",
        ]))
        .unwrap();
        let Command::Torchrun(a) = cli.command else {
            panic!("not torchrun")
        };
        assert!(a.no_run);
        assert_eq!(a.probe.history.as_deref(), Some("off"));
        assert_eq!(a.format, crate::cli::Format::Json);
        assert_eq!(
            a.args,
            vec!["torchrun --standalone --nproc-per-node=1 ok.py"]
        );
    }

    #[test]
    fn other_words_after_the_quoted_line_are_refused_with_the_line_that_works() {
        let e = parse_from(argv(&[
            "preflight",
            "torchrun",
            "--no-run",
            "torchrun --standalone ok.py",
            "--epochs",
            "5",
        ]))
        .err()
        .unwrap();
        let text = e.to_string();
        assert!(
            text.contains("preflight torchrun --no-run 'torchrun --standalone ok.py --epochs 5'"),
            "{text}"
        );
        // The argv form is untouched: torchrun's words, unquoted.
        let cli = parse_from(argv(&[
            "preflight",
            "torchrun",
            "torchrun",
            "--nproc-per-node=2",
            "t.py",
            "--history",
            "off",
        ]))
        .unwrap();
        let Command::Torchrun(a) = cli.command else {
            panic!("not torchrun")
        };
        assert_eq!(a.args.len(), 5);
    }
}
