//! Checks for the ib concern (pure functions of facts).

use crate::CheckContext;
use crate::model::{Finding, NodeFacts};

pub fn check(_facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    Vec::new()
}
