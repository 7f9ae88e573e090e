//! Wire types of the amber protocol (PROTOCOL.md v1): methods, params and results,
//! events, error codes. Serde only — no runtime, no transport.

pub mod message;

pub use message::{Message, Role, ToolCall};

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Agent mode: what may run without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Only read-only tools run.
    Read,
    /// File tools inside the workspace and benign commands run.
    #[default]
    Write,
    /// Nothing asks; workspace confinement still holds.
    Yolo,
}

/// Token accounting, for one LLM call or a session total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub cached_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// Outcome of one tool call, as the model and the clients see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Denied,
}
