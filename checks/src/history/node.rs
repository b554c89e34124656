//! The node check of this concern: `history.store` when the node's history store could not be
//! read or written. Silent when it worked or was turned off (`--history off`): the store never
//! adds a line to a healthy report.

use super::ids::STORE;
use crate::core::{CheckContext, Finding, Fix, NodeFacts, Status};

/// `history.store` for a store that failed; nothing otherwise.
pub fn check(facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    let Some(h) = &facts.history else {
        return Vec::new();
    };
    let Some(problem) = &h.problem else {
        return Vec::new();
    };
    let store = h.store.as_deref().unwrap_or("the history store");
    let mut fix = Fix::new(
        "The check itself is not affected. Give the store a folder this user can write, or \
         another path; a corrupt file was set aside beside it (renamed, not deleted).",
    );
    if let Some(dir) = std::path::Path::new(store).parent() {
        fix = fix.command(format!(
            "install -d -m 0755 {}",
            crate::infra::shellword::quote(&dir.display().to_string())
        ));
    }
    fix = fix.command("preflight check --history \"$HOME/.local/state/preflight/history.db\"");
    vec![
        Finding::new(
            STORE,
            Status::Warn,
            store,
            format!(
                "{}'s history store: {problem} (the check itself is not affected; runs the store does not keep cannot name a lemon)",
                facts.hostname
            ),
        )
        .with("store", store)
        .with("problem", problem.as_str())
        .fix(fix),
    ]
}
