//! Test helpers shared by the unit tests: paths into `tests/fixtures`.

use crate::root::Root;

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
