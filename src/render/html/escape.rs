//! HTML escaping of every string a report carries (peers, the OS, a saved file wrote them).
//!
//! Text and attribute values get the same treatment: first [`sanitize`](super::super::sanitize)
//! (control characters and bidi overrides made visible as a shell user writes them, `\n`,
//! `\e`, `\u202e`, the value cut at a bound),
//! then `& < > " '` as character references. A hostname `<script>` is text on the page, never
//! markup, and a value cannot leave its quoted attribute.

use crate::render::sanitize::{line, shown};

/// `s` escaped for HTML text or a double- or single-quoted attribute value; nothing else.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One field from the report (a hostname, a summary, a value): sanitized, cut, escaped.
pub fn text(s: &str) -> String {
    html(&shown(s))
}

/// A command or a line (a fix, a launch command, a reason): sanitized, cut at the line bound, escaped.
pub fn cmd(s: &str) -> String {
    html(&line(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_become_references() {
        assert_eq!(
            text(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn control_characters_and_bidi_overrides_are_visible() {
        assert_eq!(text("a\nb\u{1b}[31m\u{202e}"), r"a\nb\e[31m\u202e");
        assert_eq!(cmd("ls\t-l"), r"ls\t-l");
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(text("gpu01.cluster.local"), "gpu01.cluster.local");
        assert_eq!(cmd("sudo ufw allow 29500/tcp"), "sudo ufw allow 29500/tcp");
    }
}
