//! Prose wrapped at word boundaries to a width; a word longer than the line stays whole.

/// Display width of `s` in columns (one per char: the report's text is escaped, so no controls).
pub fn width_of(s: &str) -> usize {
    s.chars().count()
}

/// `text` wrapped to `width` columns: the first line starts with `first`, the others with
/// `rest`. Breaks only at spaces; a word wider than the room left (a path, a URL) goes on a
/// line of its own, whole. Every line ends with a newline; none has trailing spaces.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(first);
    let mut line_w = width_of(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        let w = width_of(word);
        if !empty && line_w + 1 + w > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from(rest);
            line_w = width_of(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
            line_w += 1;
        }
        line.push_str(word);
        line_w += w;
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_with_indents() {
        let s = wrap("aaa bbb ccc ddd", 9, "- ", "  ");
        assert_eq!(s, "- aaa bbb\n  ccc ddd\n");
    }

    #[test]
    fn a_long_word_is_never_cut() {
        let long = "x".repeat(30);
        let s = wrap(&format!("a {long} b"), 10, "", "  ");
        assert_eq!(s, format!("a\n  {long}\n  b\n"));
    }

    #[test]
    fn empty_text_gives_the_prefix_line() {
        assert_eq!(wrap("", 10, "  x", ""), "  x\n");
    }
}
