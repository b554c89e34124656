//! Text from a peer, the OS or a saved report, made safe and bounded for a person to read.
//!
//! Hostnames, interface names, environment values, finding texts and log messages can come
//! from another node (or a file someone edited). Every renderer passes such text through
//! [`shown`] (a table cell's field, a name) or [`line`] (a whole line outside a table: a
//! command, a log or error line on stderr) at the point where it enters the output, before the
//! renderer adds its own newlines, tabs, borders and colours.
//!
//! - **Escaping** ([`escape`]). A control character (C0, tab and newline included; DEL; C1) or a
//!   Unicode bidi override or isolate (U+202A..U+202E, U+2066..U+2069) is written the way a
//!   shell user writes it inside bash's `$'...'`: a newline `\n`, a tab `\t`, ESC `\e`, DEL
//!   `\x7f`, U+202E `\u202e` ([`preflight_checks::shellword`]). Nothing else changes (a
//!   backslash stays a backslash), so ordinary text reads exactly as before. JUnit uses the
//!   same form; the JSON output is serde's, which escapes C0 itself and carries the exact value.
//! - **Bounding** ([`cut`]). A field shows at most [`MAX_SHOWN`] bytes and a line
//!   [`MAX_LINE`], then `… (N bytes, shown M)`; the JSON report keeps the whole value. This is
//!   what keeps the table linear: comfy-table wraps an unbroken word by copying its remainder
//!   once per output line, quadratic in the word's length (a 1 MiB hostname took minutes).

use std::borrow::Cow;

/// Bytes of one field (a hostname, a finding's summary, an interface name) shown before it is cut.
pub const MAX_SHOWN: usize = 2048;

/// Bytes of one line outside a table (a launch command, a log or error line) shown before it is cut.
pub const MAX_LINE: usize = 16 * 1024;

/// True for what [`escape`] rewrites: control characters and bidi overrides/isolates
/// ([`crate::shell::is_control`], the same test `preflight launch` refuses a report by).
pub fn needs_escape(c: char) -> bool {
    crate::shell::is_control(c)
}

/// `s` with every [`needs_escape`] character written as inside `$'...'` (`\n`, `\e`, `\u202e`); borrowed when clean.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(preflight_checks::shellword::escape_controls(s))
}

/// At most `max` bytes of `s` (on a char boundary), then `… (N bytes, shown M)` when cut.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes, shown {end})", &s[..end], s.len()))
}

/// One field for display: cut to [`MAX_SHOWN`] bytes, then escaped.
pub fn shown(s: &str) -> Cow<'_, str> {
    match cut(s, MAX_SHOWN) {
        Cow::Borrowed(b) => escape(b),
        Cow::Owned(o) => Cow::Owned(escape(&o).into_owned()),
    }
}

/// One line outside a table (a command, a log line): cut to [`MAX_LINE`] bytes, then escaped.
pub fn line(s: &str) -> Cow<'_, str> {
    match cut(s, MAX_LINE) {
        Cow::Borrowed(b) => escape(b),
        Cow::Owned(o) => Cow::Owned(escape(&o).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_and_leaves_the_rest() {
        assert_eq!(escape("gpu01.cluster-local_2"), "gpu01.cluster-local_2");
        assert!(matches!(escape("plain é µs ·"), Cow::Borrowed(_)));
        assert_eq!(escape("a\u{1b}[31mb"), r"a\e[31mb");
        assert_eq!(escape("l1\nl2\tx\r"), r"l1\nl2\tx\r");
        assert_eq!(escape("\u{0}\u{7f}\u{85}\u{9b}"), r"\x00\x7f\u0085\u009b");
        assert_eq!(
            escape("\u{202a}\u{202e}\u{2066}\u{2069}"),
            r"\u202a\u202e\u2066\u2069"
        );
        // Never a language's debug escape.
        assert!(!escape("python3 -c \nimport socket").contains("\\u{"));
        // Neighbours of the bidi ranges are ordinary text.
        assert_eq!(escape("\u{2029}\u{202f}\u{2065}\u{206a}").len(), 12);
        assert_eq!(escape("back\\slash"), "back\\slash");
    }

    #[test]
    fn long_fields_are_cut_with_a_marker_on_a_char_boundary() {
        let s = "h".repeat(1 << 20);
        let c = shown(&s);
        assert!(c.starts_with(&"h".repeat(MAX_SHOWN)));
        assert!(
            c.ends_with("… (1048576 bytes, shown 2048)"),
            "{}",
            &c[MAX_SHOWN..]
        );
        let s = "é".repeat(MAX_SHOWN); // 2 bytes each
        let c = cut(&s, 2047);
        assert!(c.ends_with(&format!("… ({} bytes, shown 2046)", 2 * MAX_SHOWN)));
        assert_eq!(cut("short", 10), "short");
        // Escaping happens after cutting, so an escape is never split.
        let s = "\u{1b}".repeat(MAX_SHOWN + 1);
        assert!(shown(&s).contains("\\e… ("));
        assert!(!line(&"\u{1b}".repeat(10)).contains('\u{1b}'));
    }
}
