//! `--sizes` for the all-reduce: nccl-tests' `-b -e -f` as one `BEGIN:END[:FACTOR]` string, and compact size labels.

/// Largest message size accepted (nccl-tests rarely goes past a few GiB; this bounds memory).
pub const MAX_SIZE: u64 = 16 << 30;
/// Most sizes one range may expand to.
pub const MAX_SIZES: usize = 64;

pub use preflight_checks::collective::human_bytes;

const EXAMPLE: &str =
    "e.g. --sizes 1M:256M (doubling), --sizes 1M:256M:4, --sizes 64M or --sizes 1048576";

/// Parses `1M:256M` (factor 2), `1M:256M:4`, a single `64M`, or plain bytes `1048576`.
///
/// Suffixes K, M, G are 1024-based and case-insensitive, optionally followed by `B` or `iB`.
/// Each size is rounded up to a multiple of 4 bytes (one float32).
pub fn parse_sizes(spec: &str) -> Result<Vec<u64>, String> {
    let parts: Vec<&str> = spec.trim().split(':').collect();
    let (begin, end, factor) = match parts.as_slice() {
        [one] => {
            let s = parse_size(one)?;
            (s, s, 2)
        }
        [b, e] => (parse_size(b)?, parse_size(e)?, 2),
        [b, e, f] => (parse_size(b)?, parse_size(e)?, parse_factor(f)?),
        _ => {
            return Err(format!(
                "--sizes {spec:?} has {} ':'-separated parts; give BEGIN[:END[:FACTOR]], {EXAMPLE}",
                parts.len()
            ));
        }
    };
    if begin > end {
        return Err(format!(
            "--sizes {spec:?}: the first size ({}) is larger than the last ({}); give the smaller first, {EXAMPLE}",
            human_bytes(begin),
            human_bytes(end)
        ));
    }
    expand(begin, end, factor, spec)
}

/// `begin`, `begin*factor`, ... up to `end` inclusive.
fn expand(begin: u64, end: u64, factor: u64, spec: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    let mut s = begin;
    while s <= end {
        if out.len() == MAX_SIZES {
            return Err(format!(
                "--sizes {spec:?} expands to more than {MAX_SIZES} sizes; use a larger factor or a narrower range, {EXAMPLE}"
            ));
        }
        out.push(s);
        match s.checked_mul(factor) {
            Some(next) => s = next,
            None => break,
        }
    }
    Ok(out)
}

fn parse_factor(f: &str) -> Result<u64, String> {
    let f = f.trim();
    match f.parse::<u64>() {
        Ok(v) if v >= 2 => Ok(v),
        Ok(v) => Err(format!(
            "--sizes factor {v} must be at least 2 (each size is the previous one times the factor), {EXAMPLE}"
        )),
        Err(_) => Err(format!(
            "--sizes factor {f:?} is not a whole number; {EXAMPLE}"
        )),
    }
}

/// One size: digits, then optional K/M/G (1024-based), then optional B or iB. Rounded up to 4 bytes.
pub fn parse_size(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "--sizes: {raw:?} is not a size (a whole number of bytes with an optional K, M or G suffix); {EXAMPLE}"
        ));
    }
    let unit = unit_of(suffix).ok_or_else(|| {
        format!("--sizes: {raw:?} is not a size: unknown suffix {suffix:?} (use K, M or G, 1024-based); {EXAMPLE}")
    })?;
    let too_big = || {
        format!(
            "--sizes: {raw:?} is larger than the {} limit; {EXAMPLE}",
            human_bytes(MAX_SIZE)
        )
    };
    let n: u64 = digits.parse().map_err(|_| too_big())?;
    let bytes = n.checked_mul(unit).ok_or_else(too_big)?;
    if bytes == 0 {
        return Err(format!(
            "--sizes: {raw:?} is zero bytes; all-reduce needs at least one float32 (4 bytes); {EXAMPLE}"
        ));
    }
    let rounded = bytes.div_ceil(4) * 4;
    if rounded > MAX_SIZE {
        return Err(too_big());
    }
    Ok(rounded)
}

fn unit_of(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    let (prefix, rest) = match lower.chars().next() {
        Some('k') => (1u64 << 10, &lower[1..]),
        Some('m') => (1 << 20, &lower[1..]),
        Some('g') => (1 << 30, &lower[1..]),
        _ => (1, lower.as_str()),
    };
    match rest {
        "" | "b" => Some(prefix),
        "ib" if prefix > 1 => Some(prefix),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    #[test]
    fn range_doubles_by_default() {
        let s = parse_sizes("1M:256M").unwrap();
        assert_eq!(s.len(), 9);
        assert_eq!(s[0], M);
        assert_eq!(s[8], 256 * M);
        assert!(s.windows(2).all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn explicit_factor_and_end_not_hit_exactly() {
        assert_eq!(
            parse_sizes("1M:256M:4").unwrap(),
            vec![M, 4 * M, 16 * M, 64 * M, 256 * M]
        );
        assert_eq!(
            parse_sizes("1M:100M:4").unwrap(),
            vec![M, 4 * M, 16 * M, 64 * M]
        );
    }

    #[test]
    fn single_sizes_and_suffix_spellings() {
        assert_eq!(parse_sizes("64M").unwrap(), vec![64 * M]);
        assert_eq!(parse_sizes("1048576").unwrap(), vec![M]);
        for s in ["1m", "1MB", "1mib", "1MiB", " 1M ", "1024K", "1048576b"] {
            assert_eq!(parse_sizes(s).unwrap(), vec![M], "{s}");
        }
        assert_eq!(parse_sizes("2g").unwrap(), vec![2 << 30]);
        assert_eq!(parse_sizes("4K:16KB").unwrap(), vec![4096, 8192, 16384]);
    }

    #[test]
    fn sizes_round_up_to_whole_floats() {
        assert_eq!(parse_sizes("1").unwrap(), vec![4]);
        assert_eq!(parse_sizes("1000001").unwrap(), vec![1000004]);
        assert_eq!(parse_sizes("6:24:2").unwrap(), vec![8, 16]);
    }

    #[test]
    fn bad_input_is_refused_with_an_example() {
        for bad in [
            "",
            "0",
            "0M",
            "abc",
            "1X",
            "1.5M",
            "M",
            "-1M",
            "1M:",
            ":1M",
            "1M:2M:1",
            "1M:2M:0",
            "1M:2M:x",
            "1:2:3:4",
            "256M:1M",
            "17G",
            "16385M",
            "99999999999999999999",
            "18446744073709551615G",
            "1iB",
        ] {
            let e = parse_sizes(bad).unwrap_err();
            assert!(e.contains("e.g. --sizes"), "{bad:?}: {e}");
        }
        assert!(
            parse_sizes("256M:1M")
                .unwrap_err()
                .contains("larger than the last")
        );
        assert!(parse_sizes("1M:2M:1").unwrap_err().contains("at least 2"));
        assert!(parse_sizes("0").unwrap_err().contains("zero"));
        assert!(parse_sizes("17G").unwrap_err().contains("16G"));
    }

    #[test]
    fn the_limits_themselves_are_accepted_and_one_more_is_not() {
        assert_eq!(parse_sizes("16G").unwrap(), vec![MAX_SIZE]);
        // 4 bytes doubling 64 times would be 2^65: capped at 16 GiB first.
        assert_eq!(parse_sizes("4:16G").unwrap().len(), 33);
        let many = format!("4:{}:2", 1u64 << 33);
        assert!(parse_sizes(&many).is_ok());
        assert!(parse_sizes("4:1000000000000").unwrap_err().contains("16G"));
    }

    #[test]
    fn the_size_count_stays_bounded() {
        // Under the 16 GiB cap a factor >= 2 gives at most 33 sizes; the expander itself stops at 64.
        assert!(parse_sizes("4:16G").unwrap().len() <= MAX_SIZES);
        assert_eq!(expand(1, u64::MAX, 2, "x").unwrap().len(), MAX_SIZES);
    }

    #[test]
    fn labels_are_compact() {
        assert_eq!(human_bytes(4), "4B");
        assert_eq!(human_bytes(4096), "4K");
        assert_eq!(human_bytes(M), "1M");
        assert_eq!(human_bytes(256 * M), "256M");
        assert_eq!(human_bytes(1 << 30), "1G");
        assert_eq!(human_bytes(1536 * 1024), "1.5M");
        assert_eq!(human_bytes(1000004), "976.6K");
    }
}
