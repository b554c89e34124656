//! The link judgments as other concerns and the renderers read them: typed views of a
//! `link.slow` or `link.unreachable` finding. A saved report carries the judgment only in the
//! finding's evidence, so its keys are read here, beside the code that writes them, and
//! nowhere else.

use super::ids::{SLOW, UNREACHABLE};
use crate::core::{Finding, Status};
use serde_json::Value;

/// What a `link.slow` finding says.
#[derive(Clone, Debug, PartialEq)]
pub struct Slow {
    /// A warning (something named slow), not the pass that says all is well.
    pub warned: bool,
    /// The node it is on.
    pub node: Option<u32>,
    /// `node`, `pair`, `direction`, `cut`, ... : the smallest part that explains the pattern.
    pub kind: Option<String>,
    /// The pair's ends, for a pair.
    pub from: Option<u32>,
    pub to: Option<u32>,
    /// The named part in words ("node 3", "3->5").
    pub part: Option<String>,
    /// The cluster's reference throughput the judgment used.
    pub reference_gbit_s: Option<f64>,
}

impl Slow {
    /// The view of `f` when it is a `link.slow` finding.
    pub fn of(f: &Finding) -> Option<Slow> {
        f.is(SLOW).then(|| Slow {
            warned: f.status == Status::Warn,
            node: f.node,
            kind: text(f, "kind"),
            from: rank(f, "from"),
            to: rank(f, "to"),
            part: text(f, "part"),
            reference_gbit_s: f.evidence.get("reference_gbit_s").and_then(Value::as_f64),
        })
    }

    /// The node it names slow with every partner (a straggler), if that is what it names.
    pub fn slow_node(&self) -> Option<u32> {
        (self.warned && self.kind.as_deref() == Some("node"))
            .then_some(self.node)
            .flatten()
    }

    /// The pair it names, smaller rank first.
    pub fn pair(&self) -> Option<(u32, u32)> {
        let (a, b) = (self.from?, self.to?);
        Some((a.min(b), a.max(b)))
    }
}

/// What a `link.unreachable` finding says of its cause.
#[derive(Clone, Debug, PartialEq)]
pub struct Unreachable {
    /// The node whose own firewall or route explains the failures, when one does.
    pub cause_node: Option<u32>,
    /// That node drops connections coming in (not going out).
    pub incoming: bool,
}

impl Unreachable {
    /// The view of `f` when it is a `link.unreachable` finding.
    pub fn of(f: &Finding) -> Option<Unreachable> {
        f.is(UNREACHABLE).then(|| Unreachable {
            cause_node: rank(f, "cause_node"),
            incoming: text(f, "cause_direction").as_deref() == Some("incoming"),
        })
    }
}

fn text(f: &Finding, key: &str) -> Option<String> {
    f.evidence
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn rank(f: &Finding, key: &str) -> Option<u32> {
    f.evidence
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|r| u32::try_from(r).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_node_and_a_slow_pair_read_back() {
        let node = Finding::new(SLOW, Status::Warn, "node 3", "slow")
            .on_node(Some(3))
            .with("kind", "node")
            .with("part", "node 3")
            .with("reference_gbit_s", 9.4);
        let v = Slow::of(&node).unwrap();
        assert_eq!(v.slow_node(), Some(3));
        assert_eq!(v.part.as_deref(), Some("node 3"));
        assert_eq!(v.reference_gbit_s, Some(9.4));
        let pair = Finding::new(SLOW, Status::Warn, "5->2", "slow")
            .with("kind", "pair")
            .with("from", 5)
            .with("to", 2);
        let v = Slow::of(&pair).unwrap();
        assert_eq!((v.slow_node(), v.pair()), (None, Some((2, 5))));
        assert!(Slow::of(&Finding::new(UNREACHABLE, Status::Fail, "x", "y")).is_none());
    }

    #[test]
    fn an_incoming_drop_names_its_node() {
        let f = Finding::new(UNREACHABLE, Status::Fail, "x", "y")
            .with("cause_node", 4)
            .with("cause_direction", "incoming");
        let v = Unreachable::of(&f).unwrap();
        assert_eq!((v.cause_node, v.incoming), (Some(4), true));
    }
}
