//! Test kit for amber's end-to-end suites: a scripted OpenAI-compatible endpoint
//! ([`mock_llm`]), a harness for the real `amberd`/`amber-cli` binaries ([`daemon`]) and a
//! minimal HTTP-over-Unix-socket client ([`unix_http`]).

// Test support: a panic with a clear message is how the kit reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod daemon;
pub mod e2e;
pub mod e2e3;
pub mod e2e5;
pub mod mock_llm;
pub mod unix_http;

pub use daemon::{DaemonOptions, TestDaemon, bin_path};
pub use mock_llm::{MockLlm, MockToolCall, MockTurn, RecordedRequest};
