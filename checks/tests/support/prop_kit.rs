//! Shared by the property tests of both crates (`checks/tests/props.rs`, `tests/it/props.rs`):
//! the case count, the input size and the time bound every decoder must keep.

use proptest::collection::vec;
use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Largest input fed to a decoder.
pub const MAX_INPUT: usize = 64 << 10;
/// The most one input may take (debug build, shared CI cores): generous on purpose.
pub const LIMIT: Duration = Duration::from_secs(1);

/// 256 cases per property, unless `PROPTEST_CASES` says otherwise (an explicit `cases` in a
/// config would override the variable, so it is set only when the variable is not).
pub fn config() -> ProptestConfig {
    let mut c = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = 256;
    }
    c.failure_persistence = None;
    c
}

/// Runs `f`, failing the case when it took longer than [`LIMIT`].
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    prop_assert!(took < LIMIT, "{what} took {took:?}");
    Ok(out)
}

/// Arbitrary bytes, mostly short, up to [`MAX_INPUT`].
pub fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => vec(any::<u8>(), 0..256),
        3 => vec(any::<u8>(), 0..4096),
        1 => vec(any::<u8>(), 0..=MAX_INPUT),
    ]
}

/// Arbitrary text: arbitrary bytes read as UTF-8 (lossily), or arbitrary characters.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        bytes().prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        vec(any::<char>(), 0..1024).prop_map(String::from_iter),
    ]
}
