//! A short string that a million records share (an interface name, an address): one pointer per
//! record and one allocation per distinct value once interned, written to JSON as a plain string.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An immutable shared string: 8 bytes in the record that holds it.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(Arc<String>);

impl Label {
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl Deref for Label {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<str> for Label {
    fn as_ref(&self) -> &str {
        self.0.as_str()
    }
}

impl std::borrow::Borrow<str> for Label {
    fn borrow(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<String> for Label {
    fn from(s: String) -> Label {
        Label(Arc::new(s))
    }
}

impl From<&str> for Label {
    fn from(s: &str) -> Label {
        Label(Arc::new(s.to_string()))
    }
}

impl From<&String> for Label {
    fn from(s: &String) -> Label {
        Label(Arc::new(s.clone()))
    }
}

impl From<Label> for String {
    fn from(l: Label) -> String {
        Arc::try_unwrap(l.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl PartialEq<str> for Label {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Label {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Label {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Label> for String {
    fn eq(&self, other: &Label) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Label> for &str {
    fn eq(&self, other: &Label) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Label> for str {
    fn eq(&self, other: &Label) -> bool {
        self == other.as_str()
    }
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Label, D::Error> {
        String::deserialize(d).map(Label::from)
    }
}

/// Gives every equal string the same [`Label`], so a million links to one address hold one copy.
#[derive(Default)]
pub struct Labels(HashSet<Label>);

impl Labels {
    /// The shared label equal to `s`.
    pub fn get(&mut self, s: &str) -> Label {
        if let Some(l) = self.0.get(s) {
            return l.clone();
        }
        let l = Label::from(s);
        self.0.insert(l.clone());
        l
    }

    /// Replaces `label` by the shared one equal to it.
    pub fn intern(&mut self, label: &mut Label) {
        *label = self.get(label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_one_pointer_and_json_a_plain_string() {
        assert_eq!(std::mem::size_of::<Label>(), 8);
        let l = Label::from("10.200.0.1");
        assert_eq!(serde_json::to_string(&l).unwrap(), "\"10.200.0.1\"");
        let back: Label = serde_json::from_str("\"eth0\"").unwrap();
        assert_eq!(back, "eth0");
        assert!(serde_json::from_str::<Label>("7").is_err());
    }

    #[test]
    fn interned_labels_share_one_allocation() {
        let mut labels = Labels::default();
        let mut a = Label::from("10.200.0.1");
        let mut b = Label::from("10.200.0.1");
        labels.intern(&mut a);
        labels.intern(&mut b);
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &labels.get("10.200.0.2").0));
    }
}
