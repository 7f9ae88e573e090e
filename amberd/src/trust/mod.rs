//! Workspace configuration is code, and runs only once the user trusted it.
//!
//! Everything under a workspace's `.amber/` that changes what runs or what is allowed —
//! the rules (`.amber/rules.toml`), the hooks (`.amber/hooks.toml`) and the agents
//! (`.amber/agents/NAME.md`) — is a [`WorkspaceFile`]: read once into bytes, pinned by the
//! blake3 hash of exactly those bytes, and parsed from those same bytes, so what was trusted
//! is what applies. A version is trusted by a person: through the approval flow (a
//! person-only request at the start of a turn, or when `task` names a workspace agent), or
//! through `trust/respond` (`amber-cli trust`). The daemon remembers trusted and denied
//! versions in [`TrustStore`]; a changed file is a new version, untrusted until asked again.
//!
//! Until trusted: a rules file's deny and ask rules apply (they only narrow what runs) and
//! its allow rules (and so every `sandbox = false` rule) do not; a hooks file runs nothing;
//! an agent cannot be used. Other workspace content amber reads (skills, `AGENTS.md`) is
//! instructions to the model, not configuration: it changes no rule and runs nothing. MCP
//! servers and plugins come only from the user's config file, never from a workspace.

pub mod files;
pub mod report;
pub mod store;

pub use files::{ConfigKind, TrustFileError, WorkspaceFile, discover, read};
pub use store::{Stored, TrustStore};
