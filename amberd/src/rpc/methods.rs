//! The method table: every v1 method this daemon serves, bound to the session manager.

use std::sync::Arc;

use amber_proto::{self as proto, errors, methods};
use jsonrpsee::RpcModule;

use super::gate::WsConn;
use super::params::{error, prompt_options};
use super::subscribe;
use super::table::MethodTable;

// Declared here rather than in `rpc/mod.rs`: `session/get` is one method of this table.
#[path = "session_get.rs"]
pub(crate) mod session_get;
use crate::daemon::Daemon;
use crate::session::features::{checkpoints, custom_agents, worktree};
use crate::{NAME, VERSION};

/// How long `sandbox/selftest` waits for the start-up probe before its checks.
const SELFTEST_PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Builds the module served on every connection.
pub(crate) fn module(
    daemon: Arc<Daemon>,
) -> Result<RpcModule<Arc<Daemon>>, jsonrpsee::core::RegisterMethodError> {
    let mut m = MethodTable::new(daemon);

    m.method::<methods::Initialize>(|p, _, ext| {
        // A client asking for a version this daemon does not speak learns it here, and its
        // connection stays uninitialized (it may retry with a supported version).
        if p.protocol_version != proto::PROTOCOL_VERSION {
            return Err(error(
                errors::INVALID_PARAMS,
                format!(
                    "invalid params: protocolVersion: {} is not supported; this daemon speaks \
                     protocol version {}",
                    p.protocol_version,
                    proto::PROTOCOL_VERSION
                ),
            ));
        }
        if let Some(conn) = ext.get::<Arc<WsConn>>() {
            conn.mark_initialized(p.capabilities.approvals);
        }
        tracing::debug!(client = %p.client_info.name, version = p.protocol_version, "initialize");
        Ok(proto::InitializeResult {
            protocol_version: proto::PROTOCOL_VERSION,
            server_info: proto::PeerInfo {
                name: NAME.to_owned(),
                version: VERSION.to_owned(),
            },
            capabilities: proto::ServerCapabilities {
                methods: SERVED.iter().map(|m| (*m).to_owned()).collect(),
            },
        })
    })?;

    m.method::<methods::DaemonStatus>(|proto::Empty {}, d, _| {
        Ok(proto::DaemonStatus {
            budget: d.sessions.services().budget_use(),
            version: VERSION.to_owned(),
            pid: std::process::id(),
            uptime_ms: u64::try_from(d.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            sessions: d.sessions.count() as u64,
            connections: d.connections(),
            sessions_loaded: Some(d.sessions.loaded() as u64),
            provider: Some(d.provider_status()),
            sandbox: Some(d.sandbox_status()),
            config_error: d.sessions.services().config_error(),
            autostarted: Some(d.autostarted()),
            busy: Some(d.sessions.busy() as u64),
            environments: d.sessions.environments(),
            executor_listener: d
                .sessions
                .services()
                .executor_listener
                .get()
                .map(ToString::to_string),
        })
    })?;

    m.async_method::<methods::SandboxSelftest, _, _>(|proto::Empty {}, d, _| async move {
        let services = d.sessions.services();
        services.start_sandbox_probe();
        Ok(services.sandbox_probe.selftest(SELFTEST_PROBE_WAIT).await)
    })?;

    m.method::<methods::DaemonShutdown>(|proto::Empty {}, d, _| {
        tracing::info!("shutdown requested over RPC");
        d.shutdown.cancel();
        Ok(proto::Empty {})
    })?;

    m.method::<methods::SessionNew>(|p, d, _| Ok(d.sessions.create(p)?))?;

    m.method::<methods::SessionList>(|p, d, _| {
        let (sessions, next_cursor) = match &p.parent {
            Some(parent) => d
                .sessions
                .list_children(parent, p.cursor.as_deref(), p.limit)?,
            None => d.sessions.list(p.cursor.as_deref(), p.limit)?,
        };
        Ok(proto::SessionListResult {
            sessions,
            next_cursor,
        })
    })?;

    m.method::<methods::SessionGet>(|p, d, _| session_get::handle(d, p))?;

    m.async_method::<methods::SessionDelete, _, _>(|p, d, _| async move {
        let remove = p.remove_worktree.unwrap_or(false);
        worktree::delete(&d.sessions, &p.session_id, remove, p.force).await?;
        Ok(proto::Empty {})
    })?;

    m.method::<methods::SessionPrompt>(|p, d, _| {
        if p.text.trim().is_empty() {
            return Err(error(
                errors::INVALID_PARAMS,
                "invalid params: text: must not be empty",
            ));
        }
        let options = prompt_options(p.output_schema, p.max_iterations)?;
        let turn_id = d.sessions.prompt_with(&p.session_id, p.text, options)?;
        Ok(proto::SessionPromptResult { turn_id })
    })?;

    m.async_method::<methods::SessionCompact, _, _>(|p, d, _| async move {
        match d.sessions.compact(&p.session_id).await? {
            Ok(result) => Ok(result),
            Err(message) => Err(error(
                errors::INTERNAL_ERROR,
                format!("compaction failed: {message}"),
            )),
        }
    })?;

    m.method::<methods::SessionVerify>(|p, d, _| Ok(d.sessions.verify(&p.session_id)?))?;

    m.method::<methods::CheckpointList>(|p, d, _| {
        let handle = d.sessions.get(&p.session_id)?;
        Ok(proto::CheckpointListResult {
            checkpoints: checkpoints::list(&handle, p.all)?,
        })
    })?;
    m.async_method::<methods::CheckpointDiff, _, _>(|p, d, _| async move {
        Ok(checkpoints::diff(&d.sessions, p).await?)
    })?;
    m.async_method::<methods::SessionRewind, _, _>(|p, d, _| async move {
        Ok(checkpoints::rewind(&d.sessions, p).await?)
    })?;
    m.method::<methods::SessionFork>(|p, d, _| {
        let at = match p.turn_id.as_deref() {
            Some(turn_id) => {
                let source = d.sessions.get(&p.session_id)?;
                Some(checkpoints::fork_point(&source.shared, turn_id)?)
            }
            None => None,
        };
        Ok(d.sessions.fork(&p.session_id, at)?)
    })?;

    m.method::<methods::SessionSend>(|p, d, _| Ok(super::agents::send(d, p)?))?;
    m.method::<methods::SessionNotifyWhenIdle>(|p, d, _| {
        Ok(super::agents::notify_when_idle(d, p)?)
    })?;
    m.method::<methods::SessionSetGoal>(|p, d, _| Ok(super::agents::set_goal(d, p)?))?;

    m.method::<methods::SessionCancel>(|p, d, _| {
        let cancelled = d.sessions.get(&p.session_id)?.shared.cancel();
        Ok(proto::SessionCancelResult { cancelled })
    })?;

    m.method::<methods::AgentList>(|p, d, _| {
        let agents = custom_agents::list(&d.sessions, p.cwd.as_deref())?;
        Ok(proto::AgentListResult { agents })
    })?;

    m.method::<methods::TrustList>(|p, d, _| Ok(d.sessions.trust_list(&p.cwd)?))?;
    m.method::<methods::TrustRespond>(|p, d, _| Ok(d.sessions.trust_respond(&p)?))?;

    m.method::<methods::SessionSetMode>(|p, d, _| {
        Ok(d.sessions.get(&p.session_id)?.shared.set_mode(p.mode))
    })?;

    m.method::<methods::SessionRename>(|p, d, _| Ok(d.sessions.rename(&p.session_id, p.name)?))?;

    m.method::<methods::ApprovalRespond>(|p, d, ext| {
        let approver = ext.get::<Arc<WsConn>>().is_some_and(|c| c.is_approver());
        if !approver {
            return Err(error(
                errors::INVALID_REQUEST,
                "only an approver can answer approvals: connect over WebSocket and send \
                 `initialize` with capabilities.approvals: true",
            ));
        }
        let shared = d.sessions.get(&p.session_id)?.shared.clone();
        match shared
            .approvals
            .respond_with(&p.request_id, p.decision, p.feedback, p.content)
        {
            Ok(accepted) => Ok(proto::ApprovalRespondResult { accepted }),
            Err(err) => Err(error(errors::APPROVAL_NOT_FOUND, err.to_string())),
        }
    })?;

    super::plugins::register(&mut m)?;
    super::mcp::register(&mut m)?;
    super::routines::register(&mut m)?;
    subscribe::register(&mut m)?;
    super::watch::register(&mut m)?;
    Ok(m.into_module())
}

/// Methods this daemon version serves (reported in `initialize`).
pub(crate) const SERVED: &[&str] = &[
    methods::INITIALIZE,
    methods::DAEMON_STATUS,
    methods::DAEMON_SHUTDOWN,
    methods::SESSION_NEW,
    methods::SESSION_LIST,
    methods::SESSION_GET,
    methods::SESSION_DELETE,
    methods::SESSION_PROMPT,
    methods::SESSION_CANCEL,
    methods::SESSION_SET_MODE,
    methods::SESSION_COMPACT,
    methods::SESSION_VERIFY,
    methods::SESSION_SUBSCRIBE,
    methods::SESSION_UNSUBSCRIBE,
    methods::APPROVAL_RESPOND,
    methods::TOOL_LIST,
    methods::MCP_ADD,
    methods::MCP_LIST,
    methods::MCP_REMOVE,
    methods::MCP_LOGIN,
    methods::MCP_LOGOUT,
    methods::PLUGIN_LIST,
    methods::PLUGIN_ENABLE,
    methods::PLUGIN_DISABLE,
    methods::COMMAND_LIST,
    methods::COMMAND_RUN,
    methods::STATUS_GET,
    methods::PANEL_LIST,
    methods::PANEL_GET,
    methods::PROVIDER_LIST,
    methods::PROVIDER_CHECK,
    methods::SESSION_SET_MODEL,
    methods::SESSION_RENAME,
    methods::SESSION_SEND,
    methods::SESSION_NOTIFY_WHEN_IDLE,
    methods::SESSION_SET_GOAL,
    methods::AGENT_LIST,
    methods::TRUST_LIST,
    methods::TRUST_RESPOND,
    methods::SANDBOX_SELFTEST,
    methods::CHECKPOINT_LIST,
    methods::CHECKPOINT_DIFF,
    methods::SESSION_REWIND,
    methods::SESSION_FORK,
    methods::SESSION_WATCH,
    methods::SESSION_UNWATCH,
    methods::ROUTINE_ADD,
    methods::ROUTINE_LIST,
    methods::ROUTINE_REMOVE,
    methods::ROUTINE_RUN,
    methods::ROUTINE_TICK,
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn serves_exactly_the_protocol_and_its_extensions() {
        let served: BTreeSet<&str> = SERVED.iter().copied().collect();
        let defined: BTreeSet<&str> = methods::ALL
            .iter()
            .chain(methods::EXTENSIONS)
            .copied()
            .collect();
        assert_eq!(served, defined);
        assert_eq!(served.len(), SERVED.len(), "no method listed twice");
    }

    /// Registration goes through `MethodTable` only, one `amber_proto` `Method` type at a
    /// time, so the names registered are exactly the typed methods this daemon serves.
    #[tokio::test]
    async fn registers_exactly_the_served_methods() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let services = crate::session::services::Services::new(
            crate::config::Config::default(),
            &|_| None,
            dir.path().to_owned(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let module = module(Daemon::new(services)).unwrap_or_else(|e| panic!("{e}"));
        let registered: BTreeSet<&str> = module.method_names().collect();
        let served: BTreeSet<&str> = SERVED.iter().copied().collect();
        assert_eq!(registered, served);
    }
}
