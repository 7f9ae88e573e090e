//! Where a session's tools run. `local` (the default) is amberd's own process: the tools
//! act on this machine's files, as they always did. Any other environment is an executor
//! (`amber-exec`, docs/executors.md) on this or another machine: the session's workspace
//! tools (`read`, `write`, `edit`, `apply_patch`, `bash`, `process`, `search`) run there as
//! jobs, while amberd keeps the conversation, the gate and approvals, the journal and the
//! budgets.
//!
//! - [`spec`]: what `session/new {environment}` and `[environments.NAME]` name, and the
//!   commands that start or attach to an executor.
//! - [`link`]: the connection to one executor, attaching again after a drop.
//! - [`stream`]: one job's output in order, once.
//! - [`host`]: the session's `ToolHost` over the link.

pub(crate) mod host;
pub(crate) mod link;
pub mod spec;
pub(crate) mod stream;

pub use spec::{EnvironmentConfig, Target};
