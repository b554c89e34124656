//! What an authenticated node may send about itself: counts and string lengths, so one node
//! cannot make the report too big to deliver or too slow to judge. A limit that bites refuses
//! the node with a reason naming the field.

use crate::transport::wire::Listener;
use preflight_checks::model::NodeFacts;
use serde_json::Value;

/// Longest hostname (a fully qualified DNS name is at most 253 bytes).
pub const MAX_HOSTNAME: usize = 255;
/// Most network interfaces on one node.
pub const MAX_INTERFACES: usize = 256;
/// Most data listeners (candidate addresses) one node offers.
pub const MAX_LISTENERS: usize = 64;
/// Longest string anywhere in a node's facts.
pub const MAX_STRING: usize = 64 << 10;
/// Longest list anywhere in a node's facts.
pub const MAX_ITEMS: usize = 4096;

/// Checks one join message; the error names the field and the limit.
pub fn check_join(facts: &NodeFacts, listeners: &[Listener]) -> Result<(), String> {
    if facts.hostname.len() > MAX_HOSTNAME {
        return Err(format!(
            "its hostname has {} bytes (at most {MAX_HOSTNAME})",
            facts.hostname.len()
        ));
    }
    if facts.net.interfaces.len() > MAX_INTERFACES {
        return Err(format!(
            "it reports {} network interfaces (at most {MAX_INTERFACES})",
            facts.net.interfaces.len()
        ));
    }
    if listeners.len() > MAX_LISTENERS {
        return Err(format!(
            "it offers {} data listeners (at most {MAX_LISTENERS})",
            listeners.len()
        ));
    }
    if let Some(l) = listeners
        .iter()
        .find(|l| l.address.len() > 64 || l.interface.len() > 64)
    {
        return Err(format!(
            "a data listener's address or interface name is {} bytes long (at most 64)",
            l.address.len().max(l.interface.len())
        ));
    }
    let value = serde_json::to_value(facts).map_err(|e| format!("its facts do not encode: {e}"))?;
    walk(&value, "facts")
}

/// Every string and list in `v`, depth first; the first one over its limit is named by path.
fn walk(v: &Value, path: &str) -> Result<(), String> {
    match v {
        Value::String(s) if s.len() > MAX_STRING => Err(format!(
            "{path} is a string of {} bytes (at most {MAX_STRING})",
            s.len()
        )),
        Value::Array(items) if items.len() > MAX_ITEMS => Err(format!(
            "{path} lists {} items (at most {MAX_ITEMS})",
            items.len()
        )),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| walk(x, &format!("{path}[{i}]"))),
        Value::Object(map) if map.len() > MAX_ITEMS => Err(format!(
            "{path} has {} entries (at most {MAX_ITEMS})",
            map.len()
        )),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, x)| walk(x, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::Interface;

    #[test]
    fn honest_facts_pass_and_each_limit_names_its_field() {
        let mut f = NodeFacts {
            hostname: "gpu01".into(),
            ..Default::default()
        };
        assert!(check_join(&f, &[]).is_ok());
        f.hostname = "h".repeat(20 << 20);
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("hostname has 20971520 bytes")
        );
        f.hostname = "gpu01".into();
        f.net.interfaces = vec![Interface::default(); 20_000];
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("20000 network interfaces")
        );
        f.net.interfaces.clear();
        f.env.insert("X".into(), "v".repeat(MAX_STRING + 1));
        assert!(
            check_join(&f, &[])
                .unwrap_err()
                .contains("facts.env.X is a string")
        );
        f.env.clear();
        let l = Listener {
            interface: "eth0".into(),
            address: "10.200.0.1".into(),
            port: 1,
        };
        assert!(
            check_join(&f, &vec![l; 65])
                .unwrap_err()
                .contains("65 data listeners")
        );
    }
}
