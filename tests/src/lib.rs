//! Test kit for amber's end-to-end suites: a harness for the real `amberd`/`amber-cli` binaries
//! ([`daemon`]), the steps the suites share ([`steps`]; [`tool_calls`] for scripted tool calls
//! and their approvals; [`mcp_plugins`] for MCP servers and plugins) and a minimal
//! HTTP-over-Unix-socket client ([`unix_http`]). The scripted endpoint they run against is the
//! `amber-mock-llm` crate (its main types re-exported here for convenience).

// Test support: a panic with a clear message is how the kit reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The kit starts the real binaries, git and MCP servers as the user.
#![allow(clippy::disallowed_methods)]

pub mod daemon;
pub mod dial;
pub mod fleet;
pub mod mcp_plugins;
pub mod netns;
pub mod sshd;
pub mod steps;
pub mod tool_calls;
pub mod unix_http;

pub use amber_mock_llm::{MockLlm, MockToolCall, MockTurn, RecordedRequest};
pub use daemon::{DaemonOptions, TestDaemon, bin_path};
