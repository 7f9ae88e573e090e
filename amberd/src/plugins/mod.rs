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

pub mod bridge;
pub mod bundled;
pub mod config;
pub mod contrib;
pub mod external;
pub mod host;
pub mod registry;
pub mod runtime;

#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod tests;

pub use config::PluginsConfig;
pub use contrib::{Command, CommandError, Contributions, Panel, StatusSegment, View};
pub use host::{Host, HostError, SessionView};
pub use registry::Registries;
pub use runtime::{PluginError, PluginRuntime};
