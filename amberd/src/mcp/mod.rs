//! The MCP host: connections to MCP servers (stdio child processes and streamable HTTP),
//! owned by the daemon and shared by every session, and the adapters that put their
//! tools, resources and prompts onto amber's ports.
//!
//! **rmcp is used only inside this module**; everything public here speaks amber's own
//! types (`Tool`, `McpServerInfo`, [`McpPrompt`]). **Connecting happens in background
//! tasks and never blocks a caller**: [`McpHost::add`] returns at once with status
//! `connecting`, and every later change reaches the daemon through [`McpSink`].
//!
//! - `config.rs`: `[mcp]` and `[mcp.servers.NAME]`, name and transport validation.
//! - `host.rs`: [`McpHost`], the registry of servers (add, remove, list, prompts, shutdown).
//! - `supervisor.rs`: one task per server: connect, list, follow `list_changed`, ping,
//!   reconnect with backoff, close.
//! - `client.rs`: the rmcp side of one connection (transports, handshake, listings).
//! - `adapters.rs` + `render.rs`: MCP tools and resources as [`Tool`]s, results as text.
//! - `tasks.rs`: a call the server turned into a task (the Tasks extension), followed to
//!   its end.
//! - `error_text.rs`: rmcp's errors as one line (root cause, no Rust type names).

mod adapters;
pub(crate) mod asks;
mod client;
pub(crate) mod config;
mod error_text;
mod host;
pub(crate) mod oauth;
mod render;
mod supervisor;
mod tasks;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_http;
#[cfg(test)]
mod tests_support;

use std::sync::Arc;

use amber_proto::{McpServerInfo, errors};

use amber_tools::Tool;

pub(crate) use adapters::tool_name;
pub(crate) use config::McpConfig;
pub(crate) use host::McpHost;

/// Errors of the host's operations. [`McpError::code`] is the JSON-RPC code to answer with.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("invalid MCP server name `{name}`: {problem}")]
    InvalidName { name: String, problem: &'static str },
    #[error("an MCP server named `{0}` already exists")]
    NameTaken(String),
    #[error("invalid transport for MCP server `{name}`: {message}")]
    InvalidTransport { name: String, message: String },
    #[error("no MCP server named `{name}` ({})", known_servers(.known))]
    UnknownServer { name: String, known: Vec<String> },
    #[error("MCP server `{server}` has no prompt `{prompt}`")]
    UnknownPrompt { server: String, prompt: String },
    /// Connecting, reconnecting after a failure, or closed.
    #[error("{0}")]
    NotReady(String),
    #[error("MCP server `{server}` did not answer `{method}` within {timeout_ms} ms")]
    Timeout {
        server: String,
        method: &'static str,
        timeout_ms: u64,
    },
    /// The server answered with an error, or the transport failed.
    #[error("MCP server `{server}`: {method} failed: {message}")]
    Server {
        server: String,
        method: &'static str,
        message: String,
    },
    #[error("the MCP host is shutting down")]
    ShuttingDown,
}

impl McpError {
    /// -32602 for requests that could never succeed as written, -32006 for the rest.
    pub fn code(&self) -> i32 {
        match self {
            McpError::InvalidName { .. }
            | McpError::InvalidTransport { .. }
            | McpError::NameTaken(_)
            | McpError::UnknownServer { .. } => errors::INVALID_PARAMS,
            _ => errors::MCP_SERVER_ERROR,
        }
    }
}

fn known_servers(known: &[String]) -> String {
    if known.is_empty() {
        "there are none".to_owned()
    } else {
        format!("known: {}", known.join(", "))
    }
}

/// One argument of an MCP prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptArgument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

/// An MCP prompt, offered to users as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    pub server: String,
    pub name: String,
    pub description: Option<String>,
    pub arguments: Vec<McpPromptArgument>,
}

/// Where the host reports. Called from background tasks, never under the host's locks,
/// so an implementation may call back into [`McpHost`].
pub trait McpSink: Send + Sync {
    /// Every status change of a server (`mcp_status` events, `mcp/list`).
    fn status(&self, info: &McpServerInfo);
    /// The server's full current set of tools and prompts, replacing what it contributed
    /// before. Sent after each (re)listing and `list_changed`; empty lists on removal.
    /// While a server reconnects its last set stays (calls answer "reconnecting").
    fn contributions(&self, server: &str, tools: Vec<Arc<dyn Tool>>, prompts: Vec<McpPrompt>);
}

/// A sink that only logs; for tests that have nowhere else to send.
#[cfg(test)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LogSink;

#[cfg(test)]
impl McpSink for LogSink {
    fn status(&self, info: &McpServerInfo) {
        tracing::info!(
            server = %info.name,
            status = ?info.status,
            tools = info.tools,
            resources = info.resources,
            prompts = info.prompts,
            error = info.error.as_deref().unwrap_or(""),
            "mcp server status"
        );
    }

    fn contributions(&self, server: &str, tools: Vec<Arc<dyn Tool>>, prompts: Vec<McpPrompt>) {
        tracing::debug!(
            server,
            tools = tools.len(),
            prompts = prompts.len(),
            "mcp contributions"
        );
    }
}
