//! Test kit for amber's end-to-end suites: a scripted OpenAI-compatible endpoint
//! ([`mock_llm`]), a harness for the real `amberd`/`amber-cli` binaries ([`daemon`]), the
//! steps the suites share ([`steps`]; [`tool_calls`] for scripted tool calls and their
//! approvals; [`mcp_plugins`] for MCP servers and plugins) and a minimal HTTP-over-Unix-socket
//! client ([`unix_http`]).

// Test support: a panic with a clear message is how the kit reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod daemon;
pub mod mcp_plugins;
pub mod mock_llm;
pub mod steps;
pub mod tool_calls;
pub mod unix_http;

pub use daemon::{DaemonOptions, TestDaemon, bin_path};
pub use mock_llm::{MockLlm, MockToolCall, MockTurn, RecordedRequest};
