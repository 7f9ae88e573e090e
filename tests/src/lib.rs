//! Test kit for amber's end-to-end suites: a harness for the real `amberd`/`amber-cli` binaries
//! ([`daemon`]) and a minimal HTTP-over-Unix-socket client ([`unix_http`]). The scripted
//! endpoint they run against is the `amber-mock-llm` crate (re-exported here for convenience).

// Test support: a panic with a clear message is how the kit reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod daemon;
pub mod e2e;
pub mod e2e3;
pub mod e2e5;
pub mod unix_http;

pub use amber_mock_llm::{MockLlm, MockToolCall, MockTurn, RecordedRequest};
pub use daemon::{DaemonOptions, TestDaemon, bin_path};
