//! The launch as the user wrote it: `launch.*` ids (the binary's launch-line validator emits
//! most of them through these constants) and `launch.as-written`, judged across the cluster.

pub mod as_written;
pub mod catalog;
pub mod ids;
