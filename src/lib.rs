//! preflight: the binary's library half (CLI, node and cluster runs, advice, renderers).

pub mod advise;
pub mod app;
pub mod cli;
pub mod cluster;
pub mod explain;
pub mod launch_recipe;
pub mod measure;
pub mod node;
pub mod output;
pub mod progress;
pub mod render;
pub mod torchrun;
