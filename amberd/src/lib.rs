//! The amber daemon library: everything `amberd` runs, so tests and benches can drive the
//! engine in-process too. See docs/ARCHITECTURE.md for the map.

pub mod agent;
pub mod compaction;
pub mod config;
pub mod daemon;
pub mod elide;
pub mod llm;
pub mod mcp;
pub mod plugins;
pub mod policy;
pub mod rpc;
pub mod service;
pub mod session;
pub mod tools;
pub mod util;
