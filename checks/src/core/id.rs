//! Typed finding ids: one constant per id, owned by the concern that emits it.
//!
//! The JSON carries the id as a plain string (`findings[].id`); code names it through its
//! concern's constant (`link::ids::SLOW`), so a misspelt id fails to compile.

use std::fmt;

/// A finding id, `area.name` (`link.slow`). Made only by a concern's `ids` module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FindingId(&'static str);

impl FindingId {
    /// The id as written; only a concern's `ids` module (and tests) should call this.
    pub const fn new(id: &'static str) -> Self {
        FindingId(id)
    }

    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The part before the dot: `gpu`, `net`, `cluster`, ...
    pub fn area(self) -> &'static str {
        self.0.split_once('.').map_or(self.0, |(area, _)| area)
    }
}

impl fmt::Display for FindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl PartialEq<str> for FindingId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for FindingId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for FindingId {
    fn eq(&self, other: &String) -> bool {
        self.0 == other.as_str()
    }
}

impl PartialEq<FindingId> for String {
    fn eq(&self, other: &FindingId) -> bool {
        self.as_str() == other.0
    }
}

impl PartialEq<FindingId> for &str {
    fn eq(&self, other: &FindingId) -> bool {
        *self == other.0
    }
}

impl From<FindingId> for String {
    fn from(id: FindingId) -> String {
        id.0.to_string()
    }
}

impl AsRef<str> for FindingId {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl serde::Serialize for FindingId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}
