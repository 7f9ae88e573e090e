//! What the mock remembers of each request ([`RecordedRequest`]): path, headers and body for
//! tests' assertions, and monotonic times taken in this process — received, each content frame
//! handed to the server, the last frame handed over — so a harness in the same process can
//! subtract the endpoint's share from an end-to-end time and measure relay latency against
//! the moment a content byte left.

use std::time::{Duration, Instant};

use serde_json::Value;

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lowercased, in arrival order (empty with
    /// [`MockLlmBuilder::timings_only`](crate::MockLlmBuilder::timings_only)).
    pub headers: Vec<(String, String)>,
    /// The JSON body; a body that is not JSON is kept as a JSON string of its text (`null`
    /// with [`MockLlmBuilder::timings_only`](crate::MockLlmBuilder::timings_only)).
    pub body: Value,
    /// The [`Conversation`](crate::Conversation) it was answered from (`None`: a scripted
    /// turn, amberd's confirm prompt, or no conversation's prompt in it).
    pub conversation: Option<String>,
    pub received: Instant,
    /// When each content frame was handed to the server, in order.
    pub content_times: Vec<Instant>,
    /// When the last frame was handed to the server; `None` if the answer did not finish.
    pub last_byte: Option<Instant>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Request received → last byte handed over: the endpoint's share of a model request
    /// (`None` if the answer did not finish).
    pub fn endpoint_time(&self) -> Option<Duration> {
        self.last_byte.map(|t| t.duration_since(self.received))
    }
}
