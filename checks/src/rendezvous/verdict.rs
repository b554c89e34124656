//! `cluster.rendezvous` as other concerns and the renderers read it: the ranks that never
//! joined, with their expected hosts, and the node count. The evidence keys are read here,
//! beside the code that writes them, and nowhere else.

use super::ids::RENDEZVOUS;
use crate::core::Finding;
use serde_json::Value;

/// A rank that never joined.
#[derive(Clone, Debug, PartialEq)]
pub struct Missing {
    pub rank: Option<u32>,
    /// Its expected host, when the host list or the scheduler named one.
    pub host: Option<String>,
}

/// What a `cluster.rendezvous` finding says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rendezvous {
    pub nnodes: Option<u32>,
    pub missing: Vec<Missing>,
}

impl Rendezvous {
    /// The view of `f` when it is a `cluster.rendezvous` finding.
    pub fn of(f: &Finding) -> Option<Rendezvous> {
        if !f.is(RENDEZVOUS) {
            return None;
        }
        let missing = f
            .evidence
            .get("missing")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| Missing {
                rank: m
                    .get("rank")
                    .and_then(Value::as_u64)
                    .and_then(|r| u32::try_from(r).ok()),
                host: m.get("host").and_then(Value::as_str).map(str::to_string),
            })
            .collect();
        Some(Rendezvous {
            nnodes: f
                .evidence
                .get("nnodes")
                .and_then(Value::as_u64)
                .map(|n| n.min(u64::from(u32::MAX)) as u32),
            missing,
        })
    }
}
