//! Slurm hostlist expansion (`node[1-3,07],gpu01`), capped, order and duplicates kept so ranks never shift.

use super::{LauncherError, MAX_HOSTLIST};

/// Longest name a pattern may expand to (a DNS name has at most 253 characters). With the cap
/// on the number of names it bounds the expansion: 100,000 names of 64 KiB would be 6 GiB.
const MAX_NAME: usize = 255;

/// One piece of a host pattern: literal text or a bracketed set of numbers.
pub(super) enum Piece {
    Text(String),
    /// (low, high, zero-padded width), in the order written.
    Numbers(Vec<(u64, u64, usize)>),
}

pub(super) fn hostlist_err(input: &str, reason: impl Into<String>) -> LauncherError {
    LauncherError::Hostlist {
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// Splits on commas and whitespace outside brackets; rejects unbalanced or nested brackets.
pub(super) fn split_items(input: &str) -> Result<Vec<&str>, LauncherError> {
    let mut items = Vec::new();
    let mut depth = 0u8;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '[' if depth > 0 => return Err(hostlist_err(input, "nested '['")),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(hostlist_err(input, "']' without '['")),
            ']' => depth = 0,
            ',' | ' ' | '\t' | '\n' | '\r' if depth == 0 => {
                items.push(&input[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(hostlist_err(input, "'[' without ']'"));
    }
    items.push(&input[start..]);
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

pub(super) fn parse_bound(input: &str, s: &str) -> Result<(u64, usize), LauncherError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(hostlist_err(
            input,
            format!("{s:?} inside brackets is not a number"),
        ));
    }
    let n = s
        .parse()
        .map_err(|_| hostlist_err(input, format!("{s} is too large")))?;
    Ok((n, s.len()))
}

pub(super) fn parse_ranges(
    input: &str,
    inside: &str,
) -> Result<Vec<(u64, u64, usize)>, LauncherError> {
    if inside.trim().is_empty() {
        return Err(hostlist_err(input, "empty brackets"));
    }
    inside
        .split(',')
        .map(|part| {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let (lo, width) = parse_bound(input, lo)?;
            let (hi, _) = parse_bound(input, hi)?;
            if hi < lo {
                return Err(hostlist_err(
                    input,
                    format!("range {} runs backwards", part.trim()),
                ));
            }
            Ok((lo, hi, width))
        })
        .collect()
}

pub(super) fn parse_item(input: &str, item: &str) -> Result<Vec<Piece>, LauncherError> {
    let mut pieces = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_string()));
        }
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| hostlist_err(input, "'[' without ']'"))?;
        pieces.push(Piece::Numbers(parse_ranges(input, &rest[open + 1..close])?));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    Ok(pieces)
}

/// The length of the longest name a pattern expands to.
pub(super) fn longest_name(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.len(),
            Piece::Numbers(ranges) => ranges
                .iter()
                .map(|(_, hi, width)| (*width).max(hi.to_string().len()))
                .max()
                .unwrap_or(0),
        })
        .sum()
}

/// How many names a pattern expands to, or None past `limit`.
pub(super) fn item_count(pieces: &[Piece], limit: u64) -> Option<u64> {
    pieces
        .iter()
        .try_fold(1u64, |acc, p| {
            let Piece::Numbers(ranges) = p else {
                return Some(acc);
            };
            let n = ranges.iter().try_fold(0u64, |sum, (lo, hi, _)| {
                sum.checked_add((hi - lo).checked_add(1)?)
            })?;
            acc.checked_mul(n).filter(|total| *total <= limit)
        })
        .filter(|total| *total <= limit)
}

pub(super) fn expand_item(pieces: &[Piece], out: &mut Vec<String>) {
    let mut names = vec![String::new()];
    for p in pieces {
        match p {
            Piece::Text(t) => names.iter_mut().for_each(|n| n.push_str(t)),
            Piece::Numbers(ranges) => {
                names = names
                    .iter()
                    .flat_map(|prefix| {
                        ranges.iter().flat_map(move |(lo, hi, width)| {
                            (*lo..=*hi).map(move |i| format!("{prefix}{i:0width$}"))
                        })
                    })
                    .collect();
            }
        }
    }
    out.extend(names);
}

/// Expands Slurm hostlist syntax (`node[1-3]`, `gpu[01-04,07]`, `a[1-2]-ib`, `r[1-2]n[1-2]`, comma lists) in order, keeping duplicates.
pub fn expand_hostlist(s: &str) -> Result<Vec<String>, LauncherError> {
    let mut out: Vec<String> = Vec::new();
    for item in split_items(s)? {
        let pieces = parse_item(s, item)?;
        if longest_name(&pieces) > MAX_NAME {
            return Err(hostlist_err(
                s,
                format!("a name in it would be longer than {MAX_NAME} characters"),
            ));
        }
        let room = (MAX_HOSTLIST - out.len()) as u64;
        if item_count(&pieces, room).is_none() {
            return Err(hostlist_err(
                s,
                format!("expands to more than {MAX_HOSTLIST} names"),
            ));
        }
        expand_item(&pieces, &mut out);
    }
    if out.is_empty() {
        return Err(hostlist_err(s, "no host in it"));
    }
    Ok(out)
}
