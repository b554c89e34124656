//! Explanations: the catalog of every finding id, and a failed job's log read for its known errors.

pub mod catalog;
pub mod log;
