//! Utilities every concern uses, naming nothing else in the crate: the OS read through a root
//! path, budgets on JSON before parsing, host lists, the one shell quoter, statistics, units.

pub mod budget;
pub mod child;
pub mod date;
pub mod endpoint;
pub mod hostlist;
pub mod root;
pub mod shellword;
pub mod stats;
pub mod sysctl;
#[cfg(test)]
pub mod testutil;
pub mod units;

pub use endpoint::host_port;
pub use units::{format_bytes, parse_hex_u32};
