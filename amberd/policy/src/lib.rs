//! amber's approval policy: what a tool call may do. [`decide`] answers allow / deny / ask
//! for one call from the session's mode, the stored [`Rules`] (`rules`, `command_rules` for
//! commands), the session's [`Grants`] and the `shell` classification of commands, with
//! `target` describing what the call touches; [`confine`] keeps file arguments inside the
//! workspace; `protected` names the paths whose writes always ask, `secrets` the locations
//! whose reads always ask, `escalation` what a command run without the OS sandbox needs,
//! [`net`] which addresses are not public and which hosts an allowlist lets through.
//! The approval round trip itself lives in amberd (`session::gate`).
//!
//! The crate does no I/O beyond resolving paths (`canonicalize`, reading symlinks) and the
//! workspace's own rules file ([`WorkspaceRules`]); shell classification touches no file
//! system at all. Everything but the items re-exported here is crate-private.

mod command_rules;
mod engine;
mod escalation;
mod grants;
mod in_force;
mod mode;
pub mod net;
mod patch_paths;
mod paths;
mod protected;
mod rules;
mod secrets;
mod shell;
mod target;

pub use engine::{PersonOnly, Request, Rules, Verdict, decide};
pub use escalation::SessionSandbox;
pub use grants::{Grants, Scope};
pub use mode::{mode_allows, narrower_mode};
pub use patch_paths::{PatchHeader, patch_header};
pub use paths::{PathError, confine};
pub use rules::{Appended, LoadedRules, Rule, RuleDecision, RuleError, RuleSet, WorkspaceRules};
pub use secrets::SecretLocations;
pub use target::{UrlError, rules_for, url_host};
