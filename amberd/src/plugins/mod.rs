//! The plugin runtime (SEED.md "microkernel" and "plugin lifecycle"): everything the
//! agent can use is contributed by a plugin and recorded in a capability ledger, so a
//! plugin can be switched off and leaves nothing behind.
//!
//! - [`contrib`]: what a plugin contributes (tools, providers, commands, status segments,
//!   panels) and the ports commands, segments and panels implement.
//! - [`registry`]: the registries and the ledger; the only way anyone sees contributions.
//! - [`runtime`]: lifecycle states and the enable / disable / fail transitions.
//! - [`bundled`]: the plugins compiled in (core tools, providers, commands, status
//!   segments, panels, and `hello`, the example for plugin authors).
//! - [`host`]: the daemon and a session as plugins see them ([`Host`], [`SessionView`]);
//!   plugins never hold the daemon itself.
//! - [`bridge`]: MCP servers' tools and prompts into the registries, their status into sessions.
//! - [`config`]: `[plugins]` of config.toml.
//! - [`external`]: plugins that are child processes speaking JSON-RPC over stdio (tools only).

pub(crate) mod bridge;
pub(crate) mod bundled;
pub(crate) mod config;
pub(crate) mod contrib;
pub(crate) mod external;
pub(crate) mod host;
pub(crate) mod registry;
pub(crate) mod runtime;

#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod tests;

pub(crate) use config::PluginsConfig;
pub(crate) use contrib::{Command, CommandError, Contributions, Panel, StatusSegment, View};
pub(crate) use host::{Host, HostError, SessionView};
pub(crate) use registry::Registries;
pub(crate) use runtime::{PluginError, PluginRuntime};
