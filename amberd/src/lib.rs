//! The amber daemon library: everything `amberd` runs, so tests and benches can drive the
//! engine in-process too. See docs/ARCHITECTURE.md for the map.

pub(crate) mod acp;
pub(crate) mod agent;
pub(crate) mod agents;
pub mod checkpoints;
pub(crate) mod child_lines;
pub(crate) mod clock;
pub(crate) mod compaction;
pub mod config;
pub mod daemon;
pub mod dirs;
pub(crate) mod elide;
pub mod environment;
pub mod fleet;
pub mod hooks;
pub mod instructions;
pub(crate) mod mcp;
pub mod metrics;
pub(crate) mod plugins;
pub mod reload;
pub mod routines;
pub mod rpc;
pub mod service;
pub mod session;
pub mod telemetry;

pub mod trust;
pub(crate) mod workspace_git;

/// Name reported in `initialize`, `daemon/status` and to plugins.
pub(crate) const NAME: &str = "amberd";
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
