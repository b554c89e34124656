//! Flight Recorder pickles, read safely: an opcode pass bounds what serde-pickle will build
//! (nesting depth, values after memo references are expanded, opcodes known to c10d's writer)
//! and writes the same pickle with every memo get replaced by the value's own opcodes, then
//! serde-pickle decodes it and the value becomes JSON, so pickle and JSON dumps share one path.
//!
//! The memo is expanded here because serde-pickle 1.2 refuses some of c10d's real dumps with
//! "recursive structure found" (its memo reference counts go wrong on torch's pickler output,
//! seen on every gloo dump of torch 2.11); a pickle without memo opcodes decodes cleanly.
//!
//! c10d writes its dump with torch's own pickler (protocol 2): dicts, lists, tuples, strings,
//! ints, floats, bools and None, with memo puts and gets. A pickle that names Python objects
//! (GLOBAL, REDUCE, BUILD ...) is not a Flight Recorder dump and is refused before decoding.

use serde_json::Value;

/// What one pickle may hold.
#[derive(Clone, Copy, Debug)]
pub struct PickleBudget {
    /// Containers nested inside each other.
    pub depth: usize,
    /// Values once every memo reference is expanded (a memo get copies its value).
    pub values: u64,
    /// Bytes of the pickle once every memo reference is expanded.
    pub bytes: usize,
}

/// Why a pickle was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickleError {
    /// Ends before STOP: a dump cut short (the writer died, the disk filled).
    Truncated(usize),
    /// An opcode c10d never writes: another kind of pickle.
    Foreign(String),
    /// Past a budget.
    TooBig(String),
    /// The pre-scan passed but serde-pickle refused it.
    Decode(String),
}

impl std::fmt::Display for PickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PickleError::Truncated(at) => write!(
                f,
                "truncated: it ends at byte {at} before the pickle's STOP"
            ),
            PickleError::Foreign(w) => write!(f, "not a Flight Recorder pickle: {w}"),
            PickleError::TooBig(w) => write!(f, "over the budget: {w}"),
            PickleError::Decode(w) => write!(f, "not a readable pickle: {w}"),
        }
    }
}

/// One item on the simulated stack: its nesting depth and the values it expands to.
#[derive(Clone, Copy)]
struct Item {
    depth: usize,
    size: u64,
    /// Where its opcodes start in the rewritten pickle.
    start: usize,
    /// Which value it is: the same for a container while it is filled, and for its copies.
    id: u64,
}

/// A memoized value as it stands now: a container put in the memo before it was filled (as
/// Python's pickler does) grows until its last SETITEMS or APPENDS.
#[derive(Clone, Copy)]
struct Memoized {
    item: Item,
    /// Where its opcodes end in the rewritten pickle.
    end: usize,
    /// Its place on the stack when it was put.
    pos: usize,
}

struct Scan<'a> {
    b: &'a [u8],
    at: usize,
    stack: Vec<Item>,
    /// (stack length, offset in `out`) at each MARK.
    marks: Vec<(usize, usize)>,
    /// Each memo index and the value put there.
    memo: std::collections::HashMap<u64, u64>,
    /// Each memoized value, by its id.
    memoized: std::collections::HashMap<u64, Memoized>,
    next_id: u64,
    budget: PickleBudget,
    /// The pickle rewritten without memo opcodes.
    out: Vec<u8>,
    /// Where the current opcode starts in `out`.
    op_at: usize,
}

impl Scan<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let end = end.ok_or(PickleError::Truncated(self.b.len()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        let s = self.take(n)?;
        Ok(s.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }

    fn pop(&mut self) -> Result<Item, PickleError> {
        self.stack
            .pop()
            .ok_or_else(|| PickleError::Foreign(format!("stack underflow at byte {}", self.at)))
    }

    /// Pops to the last mark: the items above it.
    fn pop_mark(&mut self) -> Result<Vec<Item>, PickleError> {
        Ok(self.pop_mark_at()?.0)
    }

    /// Pops to the last mark: the items above it, and where the mark was written.
    fn pop_mark_at(&mut self) -> Result<(Vec<Item>, usize), PickleError> {
        let (m, at) = self
            .marks
            .pop()
            .ok_or_else(|| PickleError::Foreign(format!("no mark at byte {}", self.at)))?;
        if m > self.stack.len() {
            return Err(PickleError::Foreign(format!(
                "mark above the stack at byte {}",
                self.at
            )));
        }
        Ok((self.stack.split_off(m), at))
    }

    fn item(&mut self, depth: usize, size: u64, start: usize) -> Item {
        self.next_id += 1;
        Item {
            depth,
            size,
            start,
            id: self.next_id,
        }
    }

    fn leaf(&mut self) -> Result<(), PickleError> {
        let it = self.item(0, 1, self.op_at);
        self.push(it)
    }

    fn push(&mut self, it: Item) -> Result<(), PickleError> {
        if it.depth > self.budget.depth {
            return Err(PickleError::TooBig(format!(
                "nesting deeper than {} levels",
                self.budget.depth
            )));
        }
        if it.size > self.budget.values {
            return Err(PickleError::TooBig(format!(
                "more than {} values once memo references are expanded",
                self.budget.values
            )));
        }
        if self.stack.len() > 1 << 20 {
            return Err(PickleError::TooBig(
                "more than 2^20 values on the stack".into(),
            ));
        }
        self.stack.push(it);
        Ok(())
    }

    /// A container of `items` (already popped) added into the container on top.
    fn fill_top(&mut self, items: &[Item]) -> Result<(), PickleError> {
        let top = self.pop()?;
        let grown = items.iter().fold(top, |acc, i| Item {
            depth: acc.depth.max(i.depth + 1),
            size: acc.size.saturating_add(i.size),
            ..acc
        });
        self.push(grown)
    }

    fn container(&mut self, items: &[Item], start: usize) -> Item {
        let empty = self.item(1, 1, start);
        items.iter().fold(empty, |acc, i| Item {
            depth: acc.depth.max(i.depth + 1),
            size: acc.size.saturating_add(i.size),
            ..acc
        })
    }

    /// Skips a length-prefixed string of `n` length bytes.
    fn sized(&mut self, n: usize) -> Result<(), PickleError> {
        let len = self.uint(n)?;
        let len = usize::try_from(len).map_err(|_| PickleError::Truncated(self.b.len()))?;
        self.take(len)?;
        self.leaf()
    }

    /// One opcode, copied to `out` (memo opcodes replaced); `Ok(true)` at STOP.
    fn step(&mut self) -> Result<bool, PickleError> {
        let from = self.at;
        self.op_at = self.out.len();
        let op = self.take(1)?[0];
        let copy = self.apply(op)?;
        if copy {
            self.out.extend_from_slice(&self.b[from..self.at]);
        }
        if let Some(top) = self.stack.last()
            && let Some(m) = self.memoized.get_mut(&top.id)
        {
            m.item = *top;
            m.end = self.out.len();
        }
        if self.out.len() > self.budget.bytes {
            return Err(PickleError::TooBig(format!(
                "more than {} bytes once memo references are expanded",
                self.budget.bytes
            )));
        }
        Ok(op == b'.')
    }

    /// Applies one opcode to the simulated stack; false when its bytes are not to be copied.
    fn apply(&mut self, op: u8) -> Result<bool, PickleError> {
        match op {
            0x80 => {
                self.take(1)?;
            } // PROTO
            0x95 => {
                self.take(8)?;
                return Ok(false);
            } // FRAME: its lengths no longer hold once rewritten
            b'.' => {} // STOP
            b'(' => self.marks.push((self.stack.len(), self.op_at)),
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let t = *self
                    .stack
                    .last()
                    .ok_or(PickleError::Foreign("DUP on empty stack".into()))?;
                self.push(t)?;
            }
            b'}' | b']' | b')' | 0x8f => {
                let it = self.item(1, 1, self.op_at);
                self.push(it)?
            } // empty dict/list/tuple/set
            b'N' | 0x88 | 0x89 => self.leaf()?, // None, True, False
            b'K' => {
                self.take(1)?;
                self.leaf()?
            }
            b'M' => {
                self.take(2)?;
                self.leaf()?
            }
            b'J' => {
                self.take(4)?;
                self.leaf()?
            }
            b'G' => {
                self.take(8)?;
                self.leaf()?
            } // BINFLOAT
            0x8a => self.sized(1)?,               // LONG1
            0x8b => self.sized(4)?,               // LONG4
            b'X' | b'T' | b'B' => self.sized(4)?, // BINUNICODE, BINSTRING, BINBYTES
            0x8c | b'U' | b'C' => self.sized(1)?, // SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
            0x8d | 0x8e | 0x96 => self.sized(8)?, // BINUNICODE8, BINBYTES8, BYTEARRAY8
            b'q' | b'r' | 0x94 => {
                let i = match op {
                    b'q' => self.uint(1)?,
                    b'r' => self.uint(4)?,
                    _ => self.memo.len() as u64,
                };
                self.memo_put(i)?;
                return Ok(false);
            }
            b'h' | b'j' => {
                let i = if op == b'h' {
                    self.uint(1)?
                } else {
                    self.uint(4)?
                };
                self.memo_get(i)?;
                return Ok(false);
            }
            b'a' => {
                let v = self.pop()?;
                self.fill_top(&[v])?
            } // APPEND
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.fill_top(&[k, v])?
            } // SETITEM
            b'e' | b'u' | 0x90 => {
                let items = self.pop_mark()?;
                self.fill_top(&items)?
            } // APPENDS, SETITEMS, ADDITEMS
            b't' | b'l' | b'd' | 0x91 => {
                let (items, at) = self.pop_mark_at()?;
                let it = self.container(&items, at);
                self.push(it)?
            } // TUPLE, LIST, DICT, FROZENSET
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if self.stack.len() < n {
                    return Err(PickleError::Foreign("tuple of missing items".into()));
                }
                let items = self.stack.split_off(self.stack.len() - n);
                let at = items.first().map_or(self.op_at, |i| i.start);
                let it = self.container(&items, at);
                self.push(it)?
            }
            b'c' | 0x93 | b'R' | b'b' | 0x81 | 0x92 | b'i' | b'o' => {
                return Err(PickleError::Foreign(format!(
                    "it names a Python object (opcode 0x{op:02x} at byte {}), which c10d's dumps never do",
                    self.at - 1
                )));
            }
            _ => {
                return Err(PickleError::Foreign(format!(
                    "opcode 0x{op:02x} at byte {} is not one c10d's pickler writes",
                    self.at - 1
                )));
            }
        }
        Ok(true)
    }

    /// A memo get: the value's own opcodes as they stand now, written again.
    fn memo_get(&mut self, i: u64) -> Result<(), PickleError> {
        let m = self
            .memo
            .get(&i)
            .and_then(|id| self.memoized.get(id))
            .copied()
            .ok_or_else(|| PickleError::Foreign(format!("memo {i} read before it was written")))?;
        // A container right below an open mark waits for that mark's SETITEMS/APPENDS, which
        // would put this very reference inside it: a recursive structure, which c10d never
        // writes.
        let open = self.stack.get(m.pos).is_some_and(|it| it.id == m.item.id)
            && self.marks.iter().any(|(at, _)| *at == m.pos + 1);
        if open {
            return Err(PickleError::Foreign(format!(
                "memo {i} is read inside itself (a recursive structure)"
            )));
        }
        let len = m.end.saturating_sub(m.item.start);
        if self.out.len().saturating_add(len) > self.budget.bytes {
            return Err(PickleError::TooBig(format!(
                "more than {} bytes once memo references are expanded",
                self.budget.bytes
            )));
        }
        let start = self.out.len();
        self.out.extend_from_within(m.item.start..m.end);
        self.push(Item { start, ..m.item })
    }

    fn memo_put(&mut self, i: u64) -> Result<(), PickleError> {
        let top = *self
            .stack
            .last()
            .ok_or(PickleError::Foreign("memo put of an empty stack".into()))?;
        if self.memo.len() > 1 << 22 && !self.memo.contains_key(&i) {
            return Err(PickleError::TooBig("more than 2^22 memo entries".into()));
        }
        self.memo.insert(i, top.id);
        let m = Memoized {
            item: top,
            end: self.out.len(),
            pos: self.stack.len() - 1,
        };
        self.memoized.insert(top.id, m);
        Ok(())
    }
}

/// Walks every opcode: refuses what c10d never writes and what would exceed the budget, and
/// returns the same pickle with its memo expanded.
pub fn prescan(bytes: &[u8], budget: PickleBudget) -> Result<Vec<u8>, PickleError> {
    let mut s = Scan {
        b: bytes,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Default::default(),
        memoized: Default::default(),
        next_id: 0,
        budget,
        out: Vec::with_capacity(bytes.len().min(budget.bytes)),
        op_at: 0,
    };
    loop {
        if s.at >= bytes.len() {
            return Err(PickleError::Truncated(bytes.len()));
        }
        if s.step()? {
            if s.at < bytes.len() {
                return Err(PickleError::Foreign(format!(
                    "{} bytes after the pickle's STOP",
                    bytes.len() - s.at
                )));
            }
            return Ok(s.out);
        }
    }
}

/// Decodes a pickle into JSON after the pre-scan.
pub fn to_json(bytes: &[u8], budget: PickleBudget) -> Result<Value, PickleError> {
    let plain = prescan(bytes, budget)?;
    let v = serde_pickle::value_from_slice(&plain, serde_pickle::DeOptions::new())
        .map_err(|e| PickleError::Decode(e.to_string()))?;
    Ok(json_of(v))
}

fn json_of(v: serde_pickle::Value) -> Value {
    use serde_pickle::Value as P;
    match v {
        P::None => Value::Null,
        P::Bool(b) => Value::Bool(b),
        P::I64(i) => Value::from(i),
        P::Int(i) => Value::String(i.to_string()),
        P::F64(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        P::Bytes(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
        P::String(s) => Value::String(s),
        P::List(l) | P::Tuple(l) => Value::Array(l.into_iter().map(json_of).collect()),
        P::Set(s) | P::FrozenSet(s) => {
            Value::Array(s.into_iter().map(|h| json_of(h.into_value())).collect())
        }
        P::Dict(d) => Value::Object(
            d.into_iter()
                .map(|(k, v)| (key_of(k.into_value()), json_of(v)))
                .collect(),
        ),
    }
}

fn key_of(k: serde_pickle::Value) -> String {
    match json_of(k) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: PickleBudget = PickleBudget {
        depth: 16,
        values: 1000,
        bytes: 1 << 20,
    };

    #[test]
    fn reads_a_small_dict() {
        // {'a': [1, (2, 'x')], 'b': None}
        let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02X\x01\x00\x00\x00x\x86eX\x01\x00\x00\x00bNu.";
        let v = to_json(p, B).unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, [2, "x"]], "b": null}));
    }

    #[test]
    fn a_container_put_in_the_memo_before_it_is_filled_is_read_whole_when_got_again() {
        // Python's pickle.dumps([f, f], protocol=2) with f = {'n': 'x'}: the dict is put
        // right after EMPTY_DICT, filled by SETITEMS, then got again (c10d's own pickler
        // puts a container after filling it).
        let p = b"\x80\x02]q\x00(}q\x01X\x01\x00\x00\x00nq\x02X\x01\x00\x00\x00xq\x03sh\x01e.";
        let v = to_json(p, B).unwrap();
        assert_eq!(v, serde_json::json!([{"n": "x"}, {"n": "x"}]));
        // A list that holds itself is refused, not expanded.
        let r = b"\x80\x02]q\x00(h\x00e.";
        assert!(
            matches!(to_json(r, B), Err(PickleError::Foreign(_))),
            "{:?}",
            to_json(r, B)
        );
    }

    #[test]
    fn refuses_truncated_foreign_and_exploding_pickles() {
        let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00a";
        assert!(matches!(to_json(p, B), Err(PickleError::Truncated(_))));
        assert!(matches!(to_json(b"", B), Err(PickleError::Truncated(0))));
        let g = b"\x80\x02cos\nsystem\nq\x00.";
        assert!(matches!(to_json(g, B), Err(PickleError::Foreign(_))));
        // A list put in the memo, then a list of two gets of it, repeated: doubles each time.
        let mut b = b"\x80\x02]q\x00".to_vec();
        for i in 1..40u8 {
            b.extend_from_slice(&[b']', b'(', b'h', i - 1, b'h', i - 1, b'e', b'q', i]);
        }
        b.push(b'.');
        assert!(
            matches!(to_json(&b, B), Err(PickleError::TooBig(_))),
            "{:?}",
            to_json(&b, B)
        );
        let deep: Vec<u8> = [b"\x80\x02".as_slice(), &[b']'; 40], &[b'a'; 39], b"."].concat();
        assert!(matches!(to_json(&deep, B), Err(PickleError::TooBig(_))));
    }
}
