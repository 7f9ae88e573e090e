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
//! - [`dial_in`]: the listener for executors that dial in, and their connections.
//! - [`facts`]: the prompt's environment block, of the executor's machine.
//! - [`checkpoints`]: the session's checkpoints, taken and restored on the executor.
//! - [`mirror`]: the workspace's configuration files, mirrored where amberd reads them.

pub(crate) mod checkpoints;
pub mod dial_in;
pub(crate) mod facts;
pub(crate) mod host;
pub(crate) mod link;
pub(crate) mod mirror;
pub mod spec;
pub(crate) mod stream;

pub use spec::{EnvironmentConfig, Target};

/// Starts the listener for executors that dial in, when `[executors] listen` says where
/// (read at start). Returns where it listens.
pub async fn listen_for_executors(
    services: &std::sync::Arc<crate::session::services::Services>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<Option<std::net::SocketAddr>, dial_in::ListenError> {
    let config = services.live().config.executors.clone();
    let live = std::sync::Arc::clone(services);
    // Read at each handshake: a token file replaced (rotated) applies to the next dial.
    let tokens: dial_in::Tokens = std::sync::Arc::new(move |name: &str| {
        let config = live.live();
        let environment = config.config.environments.get(name)?;
        if !environment.dial_in {
            return None;
        }
        let path = environment.token_file.as_ref()?;
        let token = std::fs::read_to_string(path).ok()?;
        Some(token.trim().to_owned()).filter(|t| !t.is_empty())
    });
    let gate = dial_in::Gate {
        executors: tokens,
        fleet: std::sync::Arc::clone(&services.fleet),
    };
    services.fleet.watch_heartbeats(shutdown.clone());
    let local = dial_in::listen(
        &config,
        gate,
        std::sync::Arc::clone(&services.dial_ins),
        shutdown,
    )
    .await?;
    if let Some(addr) = local {
        let _ = services.executor_listener.set(addr);
    }
    Ok(local)
}
