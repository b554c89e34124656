//! `preflight explain ID` / `--list`: looks the id up in the finding catalog.

use super::Outcome;
use crate::config::ExplainJob;
use preflight_checks::catalog;

/// The entry or the list; an unknown id is an error (exit 2) naming the closest ids.
pub fn explain(job: &ExplainJob) -> anyhow::Result<Outcome> {
    match job {
        ExplainJob::List => Ok(Outcome::ExplainList),
        ExplainJob::One(id) => catalog::get(id)
            .map(Outcome::Explain)
            .ok_or_else(|| anyhow::anyhow!("{}", unknown_id_message(id))),
    }
}

/// What to say about an id the catalog does not know.
pub fn unknown_id_message(id: &str) -> String {
    let near = catalog::closest(id, 5);
    let hint = if near.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", near.join(", "))
    };
    format!("unknown finding id {id:?}{hint} (`preflight explain --list` lists every id)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_id_suggests_the_closest() {
        let m = unknown_id_message("port.inuse");
        assert!(m.contains("did you mean port.in-use"), "{m}");
        assert!(!unknown_id_message("qqqqqqqqqq").contains("did you mean"));
    }
}
