//! Text from a process table, the environment or a peer, written the way a shell user writes
//! it: a control character as `\n`, `\t`, `\e`, `\x7f` or `\u202e` (bash's `$'...'` escapes),
//! never a programming language's debug escape (`\u{a}`).

use std::fmt::Write;

/// True for a character no printed command or terminal line may carry as it is: a control
/// character (C0, DEL, C1) or a Unicode bidi override or isolate (U+202A..U+202E,
/// U+2066..U+2069), which can make text read differently from what runs.
pub fn is_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// One character as it is written inside `$'...'`: `\n`, `\t`, `\r`, `\e`, `\x01`, `\u009b`.
pub fn escaped_char(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\u{1b}' => out.push_str("\\e"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) <= 0xffff => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// `s` with each [`is_control`] character escaped as inside `$'...'`; the rest unchanged.
pub fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) {
            escaped_char(c, &mut out);
        } else {
            out.push(c);
        }
    }
    out
}

/// One word for a POSIX shell: as it is when safe, else in single quotes, else (a control
/// character in it) in bash's `$'...'` with the character escaped.
pub fn quote(word: &str) -> String {
    if is_plain(word) {
        word.to_string()
    } else if word.chars().any(is_control) {
        let mut out = String::from("$'");
        for c in word.chars() {
            match c {
                '\'' => out.push_str("\\'"),
                '\\' => out.push_str("\\\\"),
                c if is_control(c) => escaped_char(c, &mut out),
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    } else {
        single_quoted(word)
    }
}

/// One word for a script a shell reads from a file (a TaskProlog, a launch script): as it is
/// when safe, else in single quotes with any newline kept as it is, so the script reads as
/// written (the terminal report escapes it when it shows the script).
pub fn quote_verbatim(word: &str) -> String {
    if is_plain(word) {
        word.to_string()
    } else {
        single_quoted(word)
    }
}

/// A word no shell reads specially: letters, digits and `-_./=:,+@%^`.
fn is_plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c))
}

/// `'word'`, each `'` in it written `'\''`.
fn single_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A value quoted for a sentence: `"0,1"` as before, or `$'0\n1'` when it holds a control
/// character (a shell user's form, never `"0\u{a}1"`).
pub fn quoted(value: &str) -> String {
    if value.chars().any(is_control) {
        quote(value)
    } else {
        format!("{value:?}")
    }
}

/// A command line from its arguments (`/proc/PID/cmdline`), each quoted as a shell user
/// would type it: `python3 -c $'\nimport socket'`.
pub fn command_line<'a>(args: impl IntoIterator<Item = &'a str>) -> String {
    args.into_iter().map(quote).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_as_a_shell_user_writes_them() {
        assert_eq!(quote("eth0"), "eth0");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("\nimport socket"), r"$'\nimport socket'");
        assert_eq!(quote("a'\\\u{1b}[31m\t"), r"$'a\'\\\e[31m\t'");
        assert_eq!(
            quote("\u{0}\u{7f}\u{9b}\u{202e}"),
            r"$'\x00\x7f\u009b\u202e'"
        );
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn values_keep_their_quotes_unless_a_control_character_needs_dollar_quotes() {
        assert_eq!(quoted("0,1"), "\"0,1\"");
        assert_eq!(quoted("0\n1"), r"$'0\n1'");
        assert!(!quoted("x\ny").contains("\\u{"));
    }

    #[test]
    fn a_command_line_is_its_quoted_arguments() {
        assert_eq!(
            command_line(["python3", "-c", "\nimport socket; s=socket.socket()"]),
            r"python3 -c $'\nimport socket; s=socket.socket()'"
        );
        assert_eq!(command_line(["sleep", "60"]), "sleep 60");
    }

    #[test]
    fn controls_are_escaped_and_the_rest_left_alone() {
        assert_eq!(escape_controls("l1\nl2\tx\r"), r"l1\nl2\tx\r");
        assert_eq!(escape_controls("back\\slash é"), "back\\slash é");
    }
}
