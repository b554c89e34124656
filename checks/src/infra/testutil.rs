//! Test helpers shared by the unit tests: paths into `tests/fixtures`.

use crate::infra::root::Root;

/// A node fixture tree (`tests/fixtures/<name>`) standing in for `/`.
pub fn fixture_root(name: &str) -> Root {
    Root::at(format!(
        "{}/../tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// The text of a fixture file (`tests/fixtures/<rel>`); panics with the path when missing.
pub fn fixture_text(rel: &str) -> String {
    let path = format!("{}/../tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The property tests' config: 256 cases, unless `PROPTEST_CASES` says otherwise (an explicit
/// `cases` would override the variable, so it is set only when the variable is not).
pub fn proptest_config() -> proptest::test_runner::Config {
    let mut c = proptest::test_runner::Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = 256;
    }
    c.failure_persistence = None;
    c
}

/// The most one input may take a parser (debug build, shared CI cores): generous on purpose.
pub const PROP_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Arbitrary text up to 64 KiB (mostly short): arbitrary bytes read lossily, or arbitrary chars.
pub fn arbitrary_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::collection::vec;
    use proptest::prelude::*;
    prop_oneof![
        6 => vec(any::<u8>(), 0..256).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        2 => vec(any::<u8>(), 0..=64 << 10).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        2 => vec(any::<char>(), 0..1024).prop_map(String::from_iter),
    ]
}

/// Lines of `fixture` (repeated, reordered), lines of its words with noise, arbitrary lines.
pub fn near_lines(fixture: &str) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::select;
    let lines: Vec<String> = fixture.lines().map(str::to_string).collect();
    let mut words: Vec<String> = fixture.split_whitespace().map(str::to_string).collect();
    words.sort();
    words.dedup();
    let word = prop_oneof![6 => select(words), 1 => "[ -~]{0,8}"];
    let line = prop_oneof![
        3 => select(lines),
        3 => vec(word, 0..14).prop_map(|w| w.join(" ")),
        1 => "[ -~]{0,40}",
        1 => vec(any::<char>(), 0..40).prop_map(String::from_iter),
    ];
    prop_oneof![
        4 => vec(line, 0..60).prop_map(|l| l.join("\n")),
        1 => arbitrary_text(),
    ]
}
