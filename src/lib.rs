//! preflight: the binary's library half. Layers, top to bottom (a module names only those below it):
//!
//! - `app`: runs a command and is the only caller of `render` and `output`;
//! - `cli` (clap structs) and `config` (clap + environment -> validated jobs);
//! - `commands`: one module per subcommand, each returns an `Outcome`;
//! - `runtime`: the node agent, the coordinator, the measurement phases (one module each);
//! - `launchline` (the user's torchrun line), `placement` (ranks and master), `advise`, `report`;
//! - `measure` (tcp, mtu, ring, NCCL worker) over `transport` (auth, wire, events);
//! - `render` (text, JSON, JUnit, progress) and `shell` (quoting): leaves any layer may format with;
//! - `cleanup`: what an interrupted run must undo (child process groups, temp paths); a leaf.
//!
//! See docs/ARCHITECTURE.md.

pub mod advise;
pub mod app;
pub mod argv;
pub mod cleanup;
pub mod cli;
pub mod commands;
pub mod config;
pub mod history;
pub mod launchline;
pub mod measure;
pub mod output;
pub mod placement;
pub mod recipe;
pub mod render;
pub mod report;
pub mod report_compact;
pub mod runtime;
pub mod shell;
pub mod slurmd;
pub mod transport;

/// No unit test keeps a history (see tests/it/main.rs).
#[cfg(test)]
#[ctor::ctor(unsafe)]
fn no_history_by_default() {
    // SAFETY: runs before main, when no other thread exists to read the environment.
    unsafe { std::env::set_var("PREFLIGHT_HISTORY", "off") };
}
