//! Helpers every CLI-level test module shares: the binary, repository paths, JSON output.

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

/// The built `preflight`, without colour and without a token inherited from the caller.
pub fn bin() -> Command {
    let mut c = Command::cargo_bin("preflight").expect("binary built");
    c.env("NO_COLOR", "1").env_remove("PREFLIGHT_TOKEN");
    c
}

/// A path inside the repository.
pub fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A path under `tests/fixtures`.
pub fn fixture(rel: &str) -> PathBuf {
    repo("tests/fixtures").join(rel)
}

/// stdout parsed as JSON; panics with the text when it is not.
pub fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}
