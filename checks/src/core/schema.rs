//! The JSON Schema of the report (`preflight.report.v1`), generated from the Rust types.
//!
//! The committed copy lives in `schema/preflight.report.v1.json`; a test in the
//! binary's suite fails when it differs from [`report_schema`].

use crate::core::{Report, SCHEMA};
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// `$id` of the report schema: a URN, so no validator tries to fetch it.
pub const SCHEMA_ID: &str = "urn:preflight:schema:preflight.report.v1";

/// The JSON Schema (draft 2020-12) every `--format json` report satisfies.
///
/// Generated for what the tool accepts back (`Deserialize`): fields serde fills
/// with a default are optional, `Option` fields are nullable, unknown fields are
/// allowed (fields are added within v1), and `schema` must be exactly
/// `"preflight.report.v1"`.
pub fn report_schema() -> Value {
    let mut v = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Report>()
        .to_value();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("$id".into(), json!(SCHEMA_ID));
        obj.insert("title".into(), json!(SCHEMA));
        if let Some(schema) = obj
            .get_mut("properties")
            .and_then(|p| p.get_mut("schema"))
            .and_then(Value::as_object_mut)
        {
            schema.insert("const".into(), json!(SCHEMA));
        }
    }
    v
}

/// [`report_schema`] as the committed file holds it: pretty JSON and a trailing newline.
pub fn report_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&report_schema()).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_contract_and_pins_the_schema_field() {
        let s = report_schema();
        assert_eq!(s["$id"], SCHEMA_ID);
        assert_eq!(s["title"], "preflight.report.v1");
        assert_eq!(s["properties"]["schema"]["const"], "preflight.report.v1");
        let required: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for key in ["schema", "tool", "mode", "status", "nodes", "findings"] {
            assert!(required.contains(&key), "{key} not required: {required:?}");
        }
    }

    #[test]
    fn statuses_are_lowercase_strings() {
        let s = report_schema();
        let status = &s["$defs"]["Status"];
        let text = status.to_string();
        for name in ["skip", "pass", "warn", "fail", "error"] {
            assert!(text.contains(&format!("\"{name}\"")), "{status}");
        }
        assert!(!text.contains("\"Skip\""), "{status}");
    }
}
