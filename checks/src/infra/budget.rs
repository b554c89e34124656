//! Budgets on JSON before it is parsed: a streaming scan that counts bytes, values, items per
//! list or object, string lengths and depth as the bytes arrive, and stops at the first limit.
//!
//! A JSON document of a few MiB can describe millions of empty objects, and parsing it into
//! typed data costs hundreds of bytes each. Every input a peer or a file hands us is scanned
//! here first (on the wire while it is inflated, on disk while it is read), so what is parsed
//! afterwards is bounded by the budget, not by what the sender chose. The scan is not a JSON
//! validator: serde still rejects malformed text; the scan only bounds the work.

use std::fmt;

/// What one input may hold. Every count is a ceiling; the first one crossed ends the scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// What the input is, for the message ("a join message", "facts file").
    pub what: &'static str,
    /// Bytes of JSON text (after inflation).
    pub bytes: usize,
    /// Values of any kind (objects, lists, strings, numbers, literals; object keys count too).
    pub values: usize,
    /// Items in any one list or entries in any one object.
    pub items: usize,
    /// Bytes in any one string.
    pub string: usize,
    /// Lists and objects nested inside each other.
    pub depth: usize,
    /// Tighter item limits for named paths: `("facts.net.interfaces", 256)`. A path is the
    /// object keys from the top joined with `.`, a list's items adding `[]`.
    pub paths: &'static [(&'static str, usize)],
}

impl Budget {
    /// A budget of `bytes`, with the other limits derived from it: a value per 2 bytes (a
    /// JSON value takes at least one byte and a separator), every list and string as long
    /// as the whole, depth 64.
    pub const fn of_bytes(what: &'static str, bytes: usize) -> Budget {
        Budget {
            what,
            bytes,
            values: bytes / 2 + 16,
            items: bytes / 2 + 16,
            string: bytes,
            depth: 64,
            paths: &[],
        }
    }
}

/// The limit an input crossed, with where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exceeded {
    pub what: &'static str,
    /// Which limit: "bytes", "values", "items", "string", "depth".
    pub limit: &'static str,
    pub cap: usize,
    /// The path of the list, object or string that crossed it (empty for the whole input).
    pub path: String,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" at {}", self.path)
        };
        match self.limit {
            "bytes" => write!(f, "{} is larger than {} bytes", self.what, self.cap),
            "values" => write!(f, "{} holds more than {} JSON values", self.what, self.cap),
            "items" => write!(
                f,
                "{} has a list or object of more than {} items{at}",
                self.what, self.cap
            ),
            "string" => write!(
                f,
                "{} has a string longer than {} bytes{at}",
                self.what, self.cap
            ),
            _ => write!(
                f,
                "{} nests lists and objects deeper than {}{at}",
                self.what, self.cap
            ),
        }
    }
}

impl std::error::Error for Exceeded {}

/// Longest object key kept for paths; longer keys are cut (the path is only for messages).
const KEY_KEPT: usize = 64;

struct Frame {
    object: bool,
    items: usize,
    /// An item has started since the last `[`, `{` or `,`.
    started: bool,
    /// The next string in this object is a key.
    expect_key: bool,
    key: String,
    cap: usize,
}

/// The scan's state between chunks.
pub struct Scanner {
    budget: Budget,
    bytes: usize,
    values: usize,
    stack: Vec<Frame>,
    in_string: bool,
    escaped: bool,
    string_len: usize,
    capturing_key: bool,
    in_scalar: bool,
}

impl Scanner {
    pub fn new(budget: Budget) -> Scanner {
        Scanner {
            budget,
            bytes: 0,
            values: 0,
            stack: Vec::new(),
            in_string: false,
            escaped: false,
            string_len: 0,
            capturing_key: false,
            in_scalar: false,
        }
    }

    /// The path of the innermost list or object, for messages and path limits.
    fn path(&self) -> String {
        let mut p = String::new();
        for parent in self.stack.iter().take(self.stack.len().saturating_sub(1)) {
            if parent.object {
                if !p.is_empty() {
                    p.push('.');
                }
                p.push_str(&parent.key);
            } else {
                p.push_str("[]");
            }
        }
        p
    }

    fn over(&self, limit: &'static str, cap: usize) -> Exceeded {
        let mut path = self.path();
        if limit == "string" {
            if let Some(top) = self.stack.last() {
                if top.object && !self.capturing_key {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&top.key);
                } else if !top.object {
                    path.push_str("[]");
                }
            }
        }
        Exceeded {
            what: self.budget.what,
            limit,
            cap,
            path,
        }
    }

    /// A value (or key) starts: count it, and count an item in the enclosing container.
    fn value_starts(&mut self) -> Result<(), Exceeded> {
        self.values += 1;
        if self.values > self.budget.values {
            return Err(self.over("values", self.budget.values));
        }
        let over = match self.stack.last_mut() {
            Some(top) if !top.started => {
                top.started = true;
                top.items += 1;
                (top.items > top.cap).then_some(top.cap)
            }
            _ => None,
        };
        match over {
            Some(cap) => Err(self.over("items", cap)),
            None => Ok(()),
        }
    }

    /// Feeds the next bytes; an error is final.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Exceeded> {
        self.bytes += chunk.len();
        if self.bytes > self.budget.bytes {
            return Err(self.over("bytes", self.budget.bytes));
        }
        for &b in chunk {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.capturing_key {
                        self.capturing_key = false;
                        if let Some(top) = self.stack.last_mut() {
                            top.expect_key = false;
                        }
                    }
                    continue;
                }
                self.string_len += 1;
                if self.string_len > self.budget.string {
                    return Err(self.over("string", self.budget.string));
                }
                if self.capturing_key {
                    if let Some(top) = self.stack.last_mut() {
                        if top.key.len() < KEY_KEPT && b.is_ascii_graphic() {
                            top.key.push(b as char);
                        }
                    }
                }
                continue;
            }
            let scalar_byte = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.');
            if self.in_scalar && scalar_byte {
                continue;
            }
            self.in_scalar = false;
            match b {
                b'"' => {
                    let key = self.stack.last().is_some_and(|f| f.object && f.expect_key);
                    self.value_starts()?;
                    self.in_string = true;
                    self.string_len = 0;
                    self.capturing_key = key;
                    if key {
                        if let Some(top) = self.stack.last_mut() {
                            top.key.clear();
                        }
                    }
                }
                b'{' | b'[' => {
                    self.value_starts()?;
                    if self.stack.len() >= self.budget.depth {
                        return Err(self.over("depth", self.budget.depth));
                    }
                    let object = b == b'{';
                    let mut path = self.path();
                    if let Some(top) = self.stack.last() {
                        if top.object {
                            if !path.is_empty() {
                                path.push('.');
                            }
                            path.push_str(&top.key);
                        } else {
                            path.push_str("[]");
                        }
                    }
                    let cap = self
                        .budget
                        .paths
                        .iter()
                        .find(|(p, _)| *p == path)
                        .map_or(self.budget.items, |(_, c)| (*c).min(self.budget.items));
                    self.stack.push(Frame {
                        object,
                        items: 0,
                        started: false,
                        expect_key: object,
                        key: String::new(),
                        cap,
                    });
                }
                b'}' | b']' => {
                    self.stack.pop();
                }
                b',' => {
                    if let Some(top) = self.stack.last_mut() {
                        top.started = false;
                        if top.object {
                            top.expect_key = true;
                        }
                    }
                }
                b':' => {
                    // The value after a key is part of the same entry.
                    if let Some(top) = self.stack.last_mut() {
                        top.expect_key = false;
                        top.started = true;
                    }
                }
                _ if scalar_byte => {
                    self.value_starts()?;
                    self.in_scalar = true;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Scans a whole buffer against `budget`.
pub fn scan(bytes: &[u8], budget: &Budget) -> Result<(), Exceeded> {
    let mut s = Scanner::new(budget.clone());
    s.feed(bytes)
}

/// Reads at most `budget.bytes` from `r`, scanning as it goes; stops at the first limit crossed.
pub fn read_scanned<R: std::io::Read>(r: R, budget: &Budget) -> Result<Vec<u8>, ReadError> {
    let mut scanner = Scanner::new(budget.clone());
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut r = r;
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::Io(e)),
        };
        scanner.feed(&chunk[..n]).map_err(ReadError::Exceeded)?;
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Why [`read_scanned`] stopped.
#[derive(Debug)]
pub enum ReadError {
    Exceeded(Exceeded),
    Io(std::io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Exceeded(e) => e.fmt(f),
            ReadError::Io(e) => e.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const JOIN: Budget = Budget {
        what: "a join",
        bytes: 1 << 20,
        values: 10_000,
        items: 1000,
        string: 100,
        depth: 8,
        paths: &[
            ("facts.net.interfaces", 3),
            ("facts.net.interfaces[].ipv4", 2),
        ],
    };

    #[test]
    fn honest_documents_pass() {
        let doc = br#"{"type":"join","facts":{"hostname":"gpu01","net":{"interfaces":[{"name":"eth0","ipv4":[{"addr":"10.0.0.1","prefix":24}],"up":true,"mtu":1500},{"name":"lo","ipv4":[]}]}},"listeners":[]}"#;
        assert_eq!(scan(doc, &JOIN), Ok(()));
        assert_eq!(scan(b"[]", &JOIN), Ok(()));
        assert_eq!(scan(br#""a \"quoted\" string""#, &JOIN), Ok(()));
    }

    #[test]
    fn a_path_limit_names_the_path() {
        let doc = br#"{"facts":{"net":{"interfaces":[{},{},{},{}]}}}"#;
        let e = scan(doc, &JOIN).unwrap_err();
        assert_eq!(e.limit, "items");
        assert_eq!(e.cap, 3);
        assert_eq!(e.path, "facts.net.interfaces");
        assert!(
            e.to_string()
                .contains("more than 3 items at facts.net.interfaces"),
            "{e}"
        );
        let doc = br#"{"facts":{"net":{"interfaces":[{"ipv4":[1,2,3]}]}}}"#;
        let e = scan(doc, &JOIN).unwrap_err();
        assert_eq!(e.path, "facts.net.interfaces[].ipv4");
        // The same list elsewhere has only the general limit.
        assert_eq!(scan(br#"{"other":[{},{},{},{}]}"#, &JOIN), Ok(()));
    }

    #[test]
    fn strings_depth_values_and_bytes_are_each_bounded() {
        let long = format!(r#"{{"hostname":"{}"}}"#, "h".repeat(101));
        let e = scan(long.as_bytes(), &JOIN).unwrap_err();
        assert_eq!((e.limit, e.path.as_str()), ("string", "hostname"));
        let deep = "[".repeat(9);
        assert_eq!(scan(deep.as_bytes(), &JOIN).unwrap_err().limit, "depth");
        let list = format!("[{}]", vec!["1"; 400].join(","));
        let many = format!("[{}]", vec![list; 30].join(","));
        assert_eq!(scan(many.as_bytes(), &JOIN).unwrap_err().limit, "values");
        let mut b = JOIN.clone();
        b.bytes = 10;
        assert_eq!(scan(b"[1,2,3,4,5,6]", &b).unwrap_err().limit, "bytes");
        // Escaped quotes do not end a string early.
        let esc = format!(r#"["{}\"{}"]"#, "a".repeat(60), "b".repeat(60));
        assert_eq!(scan(esc.as_bytes(), &JOIN).unwrap_err().limit, "string");
    }

    #[test]
    fn read_scanned_stops_at_the_limit_without_reading_the_rest() {
        let endless = std::io::repeat(b'[');
        let e = read_scanned(endless, &JOIN).unwrap_err();
        assert!(
            matches!(e, ReadError::Exceeded(ref x) if x.limit == "depth"),
            "{e}"
        );
        let zeros = std::io::repeat(b' ');
        let e = read_scanned(zeros, &Budget::of_bytes("a file", 1000)).unwrap_err();
        assert!(e.to_string().contains("larger than 1000 bytes"), "{e}");
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z\"\\\\ ,:\\[\\]{}]{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(5, 200, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
                prop::collection::btree_map("[a-z]{0,6}", inner, 0..8)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The true counts of a parsed value, to hold the streaming scan to.
    fn measure(v: &serde_json::Value, depth: usize, m: &mut (usize, usize, usize, usize)) {
        match v {
            serde_json::Value::Array(a) => {
                m.3 = m.3.max(depth + 1);
                m.0 += 1;
                m.1 = m.1.max(a.len());
                a.iter().for_each(|x| measure(x, depth + 1, m));
            }
            serde_json::Value::Object(o) => {
                m.3 = m.3.max(depth + 1);
                m.0 += 1 + o.len();
                m.1 = m.1.max(o.len());
                o.keys().for_each(|k| m.2 = m.2.max(k.len()));
                o.values().for_each(|x| measure(x, depth + 1, m));
            }
            serde_json::Value::String(s) => {
                m.0 += 1;
                m.2 = m.2.max(serde_json::to_string(s).unwrap().len() - 2);
            }
            _ => m.0 += 1,
        }
    }

    proptest! {
        /// Fed in any chunks, the scan passes a document within its budget, and fails it when
        /// any one limit is set one below the document's true count.
        #[test]
        fn the_streaming_scan_matches_the_true_counts(v in json(), split in 0usize..64, pretty in any::<bool>()) {
            let text = if pretty { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }.unwrap();
            let mut m = (0, 0, 0, 0);
            measure(&v, 0, &mut m);
            let (values, items, string, depth) = m;
            let exact = Budget { what: "x", bytes: text.len(), values, items, string, depth, paths: &[] };
            let mut s = Scanner::new(exact.clone());
            let cut = split.min(text.len());
            prop_assert_eq!(s.feed(&text[..cut]).and_then(|_| s.feed(&text[cut..])), Ok(()));
            let tight = [
                Budget { bytes: text.len() - 1, ..exact.clone() },
                Budget { values: values - 1, ..exact.clone() },
            ];
            for b in tight {
                prop_assert!(scan(&text, &b).is_err(), "{:?}", b);
            }
            if items > 0 {
                let b = Budget { items: items - 1, ..exact.clone() };
                prop_assert!(scan(&text, &b).is_err());
            }
            if string > 0 {
                let b = Budget { string: string - 1, ..exact.clone() };
                prop_assert!(scan(&text, &b).is_err());
            }
            if depth > 0 {
                let b = Budget { depth: depth - 1, ..exact.clone() };
                prop_assert!(scan(&text, &b).is_err());
            }
        }
    }
}
