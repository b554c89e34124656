//! Marks (✓ ! ✗, or ASCII) and ANSI colour, applied only when the style allows them.

use super::super::Style;
use preflight_checks::model::Status;

/// The mark of a status: `✓` pass, `!` warn, `✗` fail/error, `-` skip; `[ok]`-style in ASCII.
pub fn mark(s: Status, style: Style) -> String {
    let text = match (s, style.unicode) {
        (Status::Pass, true) => "✓",
        (Status::Warn, true) => "!",
        (Status::Fail | Status::Error, true) => "✗",
        (Status::Skip, true) => "-",
        (Status::Pass, false) => "[ok]",
        (Status::Warn, false) => "[!!]",
        (Status::Fail | Status::Error, false) => "[xx]",
        (Status::Skip, false) => "[--]",
    };
    color(s, text, style)
}

/// `text` in the colour of a status (green, yellow, red, dim), or as it is without colour.
pub fn color(s: Status, text: &str, style: Style) -> String {
    if !style.color {
        return text.to_string();
    }
    let code = match s {
        Status::Pass => "32",
        Status::Warn => "1;33",
        Status::Fail | Status::Error => "1;31",
        Status::Skip => "2",
    };
    format!("\u{1b}[{code}m{text}\u{1b}[0m")
}

/// `text` in bold, when colour is on.
pub fn bold(text: &str, style: Style) -> String {
    if style.color {
        format!("\u{1b}[1m{text}\u{1b}[0m")
    } else {
        text.to_string()
    }
}

/// The separator between parts of a heading: `·`, or `-` in ASCII.
pub fn dot(style: Style) -> &'static str {
    if style.unicode { "·" } else { "-" }
}

/// What a status is called in a problem's heading.
pub fn word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Skip => "skip",
        Status::Warn => "warning",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
    }
}
