//! What one finding id means: the catalog entry each concern keeps beside its ids.
//!
//! `preflight explain ID` prints an entry; README's finding-id table lists them in
//! the explain catalog's order.

use super::{Action, Fault, FindingId, Problem, Remedy};

/// What one finding id means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Stable id, `area.name`.
    pub id: FindingId,
    /// The status(es) it has when it fires: "warn", "warn / fail".
    pub fires: &'static str,
    /// One line, as README's table shows it.
    pub meaning: &'static str,
    /// Why it matters: what the job does without the fix, with the error users see.
    pub why: &'static str,
    /// How to fix it, with commands.
    pub fix: &'static str,
    /// The evidence keys the summary does not already state: the terminal shows these (and
    /// only these) under the summary; `-v` shows every key, JSON and HTML keep all of it.
    /// Empty (the default) when the summary says everything the evidence holds.
    pub terminal_evidence: &'static [&'static str],
    /// What to do when it fires and whose problem it is ([`Entry::node`], [`Entry::user`]);
    /// every registered entry has one (the registry's test says so).
    pub remedy: Option<Remedy>,
    /// What kind of fault it reports, where it is hardware ([`Entry::hardware`]); else
    /// [`Entry::fault`] derives it from whose problem it is.
    pub hardware: bool,
}

/// An entry; the area is the id's part before the dot.
pub const fn entry(
    id: FindingId,
    fires: &'static str,
    meaning: &'static str,
    why: &'static str,
    fix: &'static str,
) -> Entry {
    Entry {
        id,
        fires,
        meaning,
        why,
        fix,
        terminal_evidence: &[],
        remedy: None,
        hardware: false,
    }
}

impl Entry {
    /// The entry with `keys` as its [`Entry::terminal_evidence`]: evidence the summary omits.
    pub const fn terminal_evidence(self, keys: &'static [&'static str]) -> Entry {
        Entry {
            terminal_evidence: keys,
            ..self
        }
    }

    /// When it fires, the node's operators act: `action` on the node.
    pub const fn node(mut self, action: Action) -> Entry {
        self.remedy = Some(Remedy::node(action));
        self
    }

    /// When it fires, the job's user acts: `action` on the launch or environment.
    pub const fn user(mut self, action: Action) -> Entry {
        self.remedy = Some(Remedy::user(action));
        self
    }

    /// Its fault is in the node's hardware (a GPU, a NIC or rail, a link that moves with the
    /// node): one that keeps coming back escalates to a repair and a replacement.
    pub const fn hardware(mut self) -> Entry {
        self.hardware = true;
        self
    }

    /// What kind of fault it reports: hardware where marked so, else the user's for a user
    /// problem and the node's configuration or software for a node problem.
    pub fn fault(&self) -> Fault {
        match (self.hardware, self.remedy.map(|r| r.problem)) {
            (true, _) => Fault::Hardware,
            (false, Some(Problem::User)) => Fault::User,
            _ => Fault::Config,
        }
    }

    /// The part before the dot: `gpu`, `net`, `cluster`, ...
    pub fn area(&self) -> &'static str {
        self.id.area()
    }
}
