//! The error formats read from the sources (NCCL, gloo, CUDA, c10d, torch's rendezvous,
//! errno): the scanner's patterns made from them, and the coverage `preflight explain
//! --coverage` reports. The data is generated (`generated.rs`, by
//! `scripts/explain-sources/extract.py`); this module holds its types and the matching.

pub use super::generated::{LEFT_OUT, PATTERNS, SOURCES, VERSIONS};

/// The inventory (`sources/inventory.tsv`): every format string read, with its versions, its
/// place, its group and its mapping; `preflight explain --coverage --format json` prints it,
/// since a binary's user has no checkout to read it in.
pub const INVENTORY_TSV: &str = include_str!("sources/inventory.tsv");

/// One row of [`INVENTORY_TSV`].
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Format<'a> {
    pub source: &'a str,
    pub versions: &'a str,
    #[serde(rename = "where")]
    pub place: &'a str,
    pub kind: &'a str,
    pub group: &'a str,
    /// `sig:ID`, `job:WHAT`, `errno:CALL`, `cuda:code` or `unmapped`.
    pub mapping: &'a str,
    /// Why it is unmapped; empty when mapped.
    pub why: &'a str,
    pub format: &'a str,
}

/// Every row of the inventory (its comment and header lines left out).
pub fn formats() -> Vec<Format<'static>> {
    INVENTORY_TSV
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("source\t"))
        .filter_map(|l| {
            let c: Vec<&str> = l.splitn(8, '\t').collect();
            match c.as_slice() {
                [source, versions, place, kind, group, mapping, why, format] => Some(Format {
                    source,
                    versions,
                    place,
                    kind,
                    group,
                    mapping,
                    why,
                    format,
                }),
                _ => None,
            }
        })
        .collect()
}

/// One format string mapped to a signature: its literal pieces, in order, between the
/// printf conversions (each conversion matches any text, an empty one too).
#[derive(Clone, Copy, Debug)]
pub struct Pattern {
    pub signature: &'static str,
    pub pieces: &'static [&'static str],
    /// The line must also hold one of these (a CUDA error string needs a CUDA word beside
    /// it: "out of memory" alone is not CUDA's); empty: no condition.
    pub context: &'static [&'static str],
    /// Source, versions and place the format was read at.
    pub source: &'static str,
}

impl Pattern {
    /// The longest piece: the literal the scanner's automaton looks for.
    pub fn anchor(&self) -> &'static str {
        self.pieces
            .iter()
            .copied()
            .max_by_key(|p| p.len())
            .unwrap_or("")
    }

    /// True when `msg` holds every piece, in order, and the context.
    pub fn matches(&self, msg: &str) -> bool {
        if !self.context.is_empty() && !self.context.iter().any(|c| msg.contains(c)) {
            return false;
        }
        let mut at = 0;
        for p in self.pieces {
            match msg.get(at..).and_then(|rest| rest.find(p)) {
                Some(i) => at += i + p.len(),
                None => return false,
            }
        }
        true
    }
}

/// One source read: how many format strings it has and where they went.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SourceCoverage {
    pub source: &'static str,
    pub what: &'static str,
    pub versions: &'static [&'static str],
    pub formats: u32,
    /// Mapped to a finding: through a signature, or by the errno or CUDA error in the text.
    pub to_finding: u32,
    /// Mapped to the job itself: its own CUDA error, mismatched collectives, API usage.
    pub to_job: u32,
    pub unmapped: u32,
    /// Scanner patterns made from this source's formats.
    pub patterns: u32,
    /// Mapped formats with no literal piece long enough to anchor a pattern.
    pub too_short: u32,
}

/// One version of a source: the format strings found in it and where they went (a format
/// found in several versions counts in each).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct VersionCoverage {
    pub source: &'static str,
    pub version: &'static str,
    pub formats: u32,
    pub to_finding: u32,
    pub to_job: u32,
    pub unmapped: u32,
}

/// Formats left unmapped, by source and group, with the reason.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct LeftOut {
    pub source: &'static str,
    pub group: &'static str,
    pub why: &'static str,
    pub count: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inventory_printed_holds_every_format_the_coverage_counts() {
        let rows = formats();
        let counted: u32 = SOURCES.iter().map(|s| s.formats).sum();
        assert_eq!(rows.len() as u32, counted);
        for s in SOURCES {
            let mapped = rows
                .iter()
                .filter(|r| r.source == s.source && r.mapping != "unmapped")
                .count() as u32;
            assert_eq!(mapped, s.to_finding + s.to_job, "{}", s.source);
        }
        assert!(rows.iter().any(|r| r.mapping == "sig:gloo.no-interface"
            && r.format.ends_with("Unable to find address for: %s")));
    }
    use crate::explain::log::signatures;

    #[test]
    fn every_pattern_names_a_signature_and_has_an_anchor() {
        assert!(PATTERNS.len() > 100, "{} patterns", PATTERNS.len());
        for p in PATTERNS {
            assert!(signatures::get(p.signature).is_some(), "{}", p.signature);
            assert!(p.anchor().trim().len() >= 10, "{:?}", p.pieces);
        }
    }

    #[test]
    fn conversions_match_any_text_in_order() {
        let p = Pattern {
            signature: "nccl.socket-family",
            pieces: &[
                "ncclSocketInit: connecting to address ",
                " with family ",
                " is neither AF_INET(",
            ],
            context: &[],
            source: "",
        };
        assert!(p.matches(
            "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)"
        ));
        assert!(!p.matches("with family 2 ncclSocketInit: connecting to address x"));
        let cuda = Pattern {
            context: &["CUDA", "cuda", "Cuda"],
            pieces: &["out of memory"],
            ..p
        };
        assert!(cuda.matches("RuntimeError: CUDA error: out of memory"));
        assert!(!cuda.matches("kernel: Out of memory: Killed process 7 (python) out of memory"));
    }

    #[test]
    fn the_coverage_adds_up() {
        for s in SOURCES {
            assert_eq!(
                s.formats,
                s.to_finding + s.to_job + s.unmapped,
                "{}",
                s.source
            );
            assert!(!s.versions.is_empty(), "{}", s.source);
        }
        let nccl = SOURCES.iter().find(|s| s.source == "nccl").unwrap();
        assert!(nccl.versions.len() >= 10, "{:?}", nccl.versions);
        for l in LEFT_OUT {
            assert!(!l.why.is_empty(), "{l:?}");
        }
        for s in SOURCES {
            let read: Vec<_> = VERSIONS.iter().filter(|v| v.source == s.source).collect();
            assert_eq!(read.len(), s.versions.len(), "{}", s.source);
            for v in read {
                assert!(s.versions.contains(&v.version), "{v:?}");
                assert_eq!(v.formats, v.to_finding + v.to_job + v.unmapped, "{v:?}");
                assert!(v.formats > 0 && v.formats <= s.formats, "{v:?}");
            }
        }
    }
}
