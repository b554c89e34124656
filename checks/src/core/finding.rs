//! A finding: one judgment (id, status, node, subject, summary, evidence, fix), and the worst status of many.

use super::{Action, FindingId, Problem, Remedy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The outcome of one check. Ordered from best to worst, so `max` is the worst.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not applicable here (no InfiniBand, no GPUs expected).
    Skip,
    Pass,
    Warn,
    Fail,
    /// The check itself could not run.
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Skip => "skip",
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Error => "error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to fix a finding: a sentence and the exact commands.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct Fix {
    pub hint: String,
    pub commands: Vec<String>,
}

impl Fix {
    pub fn new(hint: impl Into<String>) -> Self {
        Fix {
            hint: hint.into(),
            commands: Vec::new(),
        }
    }

    pub fn command(mut self, cmd: impl Into<String>) -> Self {
        self.commands.push(cmd.into());
        self
    }
}

/// One judgment about one subject on one node (or the whole cluster when `node` is null).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct Finding {
    /// Stable id, `area.name` (see the README's list).
    pub id: String,
    pub status: Status,
    /// Rank of the node, or null for a cluster-wide finding.
    pub node: Option<u32>,
    /// What the finding is about: "29500", "mlx5_0/1", "eth0", "0->2 data0".
    pub subject: String,
    pub summary: String,
    /// Observed values the judgment rests on.
    pub evidence: Map<String, Value>,
    pub fix: Option<Fix>,
    /// What to do about it (`none` when it passes), from its catalog entry or, where the
    /// finding knows better (`gpu.xid`: per XID), from the check. Filled in for every finding
    /// of a report; absent in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// Whose problem it is: `node` (drained for it) or `user` (the job's launch or environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

impl Finding {
    pub fn new(
        id: FindingId,
        status: Status,
        subject: impl Into<String>,
        summary: impl Into<String>,
    ) -> Self {
        Finding {
            id: id.as_str().to_string(),
            status,
            node: None,
            subject: subject.into(),
            summary: summary.into(),
            evidence: Map::new(),
            fix: None,
            action: None,
            problem: None,
        }
    }

    /// Sets what to do and whose problem it is (a check that knows better than its catalog).
    pub fn remedy(mut self, r: Remedy) -> Self {
        self.action = Some(r.action);
        self.problem = Some(r.problem);
        self
    }

    /// The action and problem, when set.
    pub fn remedy_of(&self) -> Option<Remedy> {
        Some(Remedy {
            action: self.action?,
            problem: self.problem?,
        })
    }

    /// Adds one evidence value.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.evidence.insert(key.to_string(), v);
        self
    }

    pub fn fix(mut self, fix: Fix) -> Self {
        self.fix = Some(fix);
        self
    }

    pub fn on_node(mut self, rank: Option<u32>) -> Self {
        self.node = rank;
        self
    }

    /// Whether this finding carries `id`.
    pub fn is(&self, id: FindingId) -> bool {
        self.id == id.as_str()
    }
}

/// Worst status of the findings, with `skip` counting as `pass`.
pub fn overall_status(findings: &[Finding]) -> Status {
    findings
        .iter()
        .map(|f| f.status)
        .max()
        .map(|s| if s == Status::Skip { Status::Pass } else { s })
        .unwrap_or(Status::Pass)
}
