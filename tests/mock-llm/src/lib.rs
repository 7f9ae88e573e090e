//! amber-mock-llm: the one scripted OpenAI-compatible endpoint, for the end-to-end suites and
//! for amber-bench. [`MockLlm`] serves chat completions, the Responses API and Anthropic's
//! Messages API on `127.0.0.1`, records every request ([`RecordedRequest`]: headers, body, and the times the
//! bench subtracts), and answers from, in order:
//!
//! - a **script** of [`MockTurn`]s, one per request: text, reasoning, tool calls, and the
//!   quirks of real endpoints — error statuses with `Retry-After`, model latency, paced or
//!   slow streams, a connection cut mid-body, raw bodies, a connection held open after the
//!   final event, endless streams. Rendered for each request;
//! - a **responder** called with the request body ([`MockLlm::set_responder`]);
//! - **conversations** ([`Conversation`]): stateless scripts found by their prompt in the
//!   request, rendered once at start so that answering costs the bench nothing but picking
//!   and streaming.
//!
//! ```no_run
//! # async fn example() {
//! use amber_mock_llm::{MockLlm, MockTurn};
//! let mock = MockLlm::start(vec![
//!     MockTurn::tool_call("bash", &serde_json::json!({"command": "ls"})),
//!     MockTurn::text("done"),
//! ])
//! .await;
//! // point the client at mock.base_url(), then look at mock.requests()
//! # }
//! ```

mod chat;
mod conversation;
mod ctx;
mod error;
mod fault;
mod messages;
mod record;
mod reply;
mod responses;
mod server;
mod stream;
mod turn;

pub use conversation::Conversation;
pub use error::MockError;
pub use record::RecordedRequest;
pub use responses::encrypted_reasoning;
pub use server::{MockLlm, MockLlmBuilder, Responder};
pub use turn::{MockToolCall, MockTurn, pieces};
