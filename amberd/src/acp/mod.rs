//! amber as an Agent Client Protocol client: external ACP agents (another vendor's agent,
//! or another amber's `amber-cli acp`) configured in `[agents.acp.NAME]` serve as
//! sub-agents of the `task` tool.
//!
//! - [`config`]: the `[agents.acp.NAME]` tables.
//! - [`process`]: the agent's process and the JSON-RPC connection on its stdio.
//! - [`run`]: one task as the agent's client (handshake, prompt, updates, its requests),
//!   against an [`AcpHost`] the session implements: `acp/` knows the protocol, never the
//!   session.

pub(crate) mod config;
mod process;
mod run;

pub(crate) use config::AcpAgentConfig;
pub(crate) use run::{AcpHost, PermissionAnswer, PermissionAsk, run};
