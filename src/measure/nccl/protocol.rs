//! The JSON lines between the parent and `preflight nccl-worker` (one object per line).
//!
//! Worker to parent: `{"unique_id":"<256 hex>"}` (creator only), `{"phase":"init"}`,
//! `{"phase":"allreduce","bytes":N}`, `{"row":{"bytes":..,"time_us":..,"wrong":..}}` per size,
//! `{"done":true}` at the end, or `{"error":"what failed: detail"}` and a non-zero exit.
//! Parent to worker: one line `{"unique_id":"<256 hex>"}`.

pub use crate::measure::RankRow;
use serde::Deserialize;

/// Bytes in an `ncclUniqueId`.
pub const ID_BYTES: usize = 128;
/// Longest line either side accepts.
pub const MAX_LINE: usize = 64 * 1024;

/// One line from the worker.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    UniqueId(String),
    Phase(String),
    Row(RankRow),
    Done,
    Error(String),
    /// Not a line of the protocol (shown shortened).
    Garbage(String),
}

#[derive(Deserialize)]
struct Line {
    unique_id: Option<String>,
    phase: Option<String>,
    bytes: Option<u64>,
    row: Option<RankRow>,
    done: Option<bool>,
    error: Option<String>,
}

/// Parses one worker line; anything unexpected is `Garbage`.
pub fn parse_line(line: &str) -> Event {
    let Ok(l) = serde_json::from_str::<Line>(line) else {
        return Event::Garbage(shorten(line));
    };
    if let Some(e) = l.error {
        Event::Error(e)
    } else if let Some(id) = l.unique_id {
        match decode_id(&id) {
            Ok(_) => Event::UniqueId(id),
            Err(e) => Event::Garbage(format!("bad unique_id: {e}")),
        }
    } else if let Some(row) = l.row {
        Event::Row(row)
    } else if let Some(p) = l.phase {
        Event::Phase(match l.bytes {
            Some(b) => format!("{p} of {b} bytes"),
            None => p,
        })
    } else if l.done == Some(true) {
        Event::Done
    } else {
        Event::Garbage(shorten(line))
    }
}

/// The line that hands the unique id to a worker.
pub fn id_line(hex: &str) -> String {
    serde_json::json!({ "unique_id": hex }).to_string()
}

pub fn encode_id(id: &[u8; ID_BYTES]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// 256 hex digits to 128 bytes.
pub fn decode_id(hex: &str) -> Result<[u8; ID_BYTES], String> {
    let hex = hex.trim();
    if hex.len() != ID_BYTES * 2 {
        return Err(format!(
            "expected {} hex digits, got {}",
            ID_BYTES * 2,
            hex.len()
        ));
    }
    let mut out = [0u8; ID_BYTES];
    for (i, o) in out.iter_mut().enumerate() {
        let pair = hex.get(2 * i..2 * i + 2).ok_or("not ASCII hex")?;
        *o = u8::from_str_radix(pair, 16).map_err(|_| format!("{pair:?} is not hex"))?;
    }
    Ok(out)
}

/// The first 200 characters, for messages.
pub fn shorten(s: &str) -> String {
    let t: String = s.chars().take(200).collect();
    if t.len() < s.len() {
        format!("{t}...")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_round_trips_and_rejects_bad_hex() {
        let mut id = [0u8; ID_BYTES];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let hex = encode_id(&id);
        assert_eq!(hex.len(), 256);
        assert_eq!(decode_id(&hex), Ok(id));
        assert!(decode_id("abc").is_err());
        assert!(decode_id(&"zz".repeat(128)).is_err());
        assert!(decode_id(&"é".repeat(128)).is_err());
    }

    #[test]
    fn lines_parse_to_events() {
        assert_eq!(parse_line(r#"{"done":true}"#), Event::Done);
        assert_eq!(
            parse_line(r#"{"row":{"bytes":1024,"time_us":12.5,"wrong":0}}"#),
            Event::Row(RankRow {
                bytes: 1024,
                time_us: 12.5,
                wrong: 0
            })
        );
        assert_eq!(
            parse_line(r#"{"error":"init: x"}"#),
            Event::Error("init: x".into())
        );
        assert_eq!(
            parse_line(r#"{"phase":"allreduce","bytes":8}"#),
            Event::Phase("allreduce of 8 bytes".into())
        );
        assert!(matches!(parse_line("hello"), Event::Garbage(_)));
        assert!(matches!(
            parse_line(r#"{"unique_id":"00"}"#),
            Event::Garbage(_)
        ));
        assert!(matches!(
            parse_line(r#"{"row":{"bytes":-1}}"#),
            Event::Garbage(_)
        ));
        assert!(matches!(parse_line("{}"), Event::Garbage(_)));
    }
}
