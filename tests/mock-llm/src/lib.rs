//! amber-mock-llm: the scripted OpenAI-compatible endpoint of amber's end-to-end suites
//! ([`MockLlm`]): a script of [`MockTurn`]s answered one per request, every request recorded.

// Test support: a panic with a clear message is how the kit reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chat;
mod server;

pub use server::{MockLlm, MockToolCall, MockTurn, RecordedRequest, Responder};
