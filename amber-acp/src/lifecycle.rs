//! The ACP session lifecycle on amberd's sessions: `session/new`, `session/load` (the
//! history, then live), `session/resume` (live, no history), `session/fork` (amberd's
//! `session/fork` of the whole history, followed live) and `session/list`. Every session
//! the editor follows gets its commands and, past its first turn, its usage right after the
//! answer.

use std::path::PathBuf;
use std::sync::Arc;

use amber_client::Client;
use amber_proto::{CostUsd, SessionForkParams, SessionMcpServer, SessionNewParams, methods};
use serde::Deserialize;
use serde_json::{Value, json};

use super::session::{self, Followed, Start};
use super::wire::{self, RpcError};
use super::{Answer, Bridge, commands, modes, usage};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionParams {
    cwd: PathBuf,
    #[serde(default)]
    mcp_servers: Vec<SessionMcpServer>,
}

/// Params of `session/load`, `session/resume` and `session/fork`. Their `cwd` is not read:
/// an amber session keeps the workspace it was made in.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExistingSessionParams {
    session_id: String,
    #[serde(default)]
    mcp_servers: Vec<SessionMcpServer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListParams {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

/// How `session/load` and `session/resume` attach to a session.
#[derive(Clone, Copy, PartialEq)]
enum Attach {
    /// The history first.
    Load,
    /// Live only.
    Resume,
}

impl Bridge {
    /// Follows a session amberd just made (`session/new`, `session/fork`) live, with its mode.
    async fn follow_new(
        self: &Arc<Self>,
        client: &Client,
        info: &amber_proto::SessionInfo,
    ) -> Result<(), RpcError> {
        Followed::start(
            self.clone(),
            client.clone(),
            info.session_id.clone(),
            PathBuf::from(&info.cwd),
            Start::Live,
        )
        .await?;
        self.follow_mode(client, &info.session_id, info.mode).await;
        Ok(())
    }

    pub(crate) async fn session_new(
        self: Arc<Self>,
        p: NewSessionParams,
    ) -> Result<Answer, RpcError> {
        if !p.cwd.is_absolute() {
            return Err(RpcError::invalid_params("cwd must be an absolute path"));
        }
        let client = self.daemon.client().await?;
        self.ensure_watch(&client).await;
        let params = SessionNewParams {
            cwd: p.cwd.to_string_lossy().into_owned(),
            // The editor's servers, for this session only (amberd connects them).
            mcp_servers: p.mcp_servers,
            ..Default::default()
        };
        let info = client.session_new(&params).await?;
        self.follow_new(&client, &info).await?;
        Ok(Answer {
            result: json!({"sessionId": info.session_id, "modes": modes::state(info.mode)}),
            then: self.commands_update(&client, &info.session_id).await,
        })
    }

    pub(crate) async fn session_load(
        self: Arc<Self>,
        p: ExistingSessionParams,
    ) -> Result<Answer, RpcError> {
        self.attach(p, Attach::Load).await
    }

    pub(crate) async fn session_resume(
        self: Arc<Self>,
        p: ExistingSessionParams,
    ) -> Result<Answer, RpcError> {
        self.attach(p, Attach::Resume).await
    }

    /// `session/load` (the history as updates before the answer, then live) or
    /// `session/resume` (live only; approvals waiting now are asked).
    async fn attach(
        self: Arc<Self>,
        p: ExistingSessionParams,
        how: Attach,
    ) -> Result<Answer, RpcError> {
        let client = self.daemon.client().await?;
        self.ensure_watch(&client).await;
        // Unknown session: amberd's -32001, ACP's resource not found.
        let got = client.session_snapshot(&p.session_id).await?;
        join_servers(&client, &p.session_id, p.mcp_servers).await?;
        let cwd = PathBuf::from(&got.session.cwd);
        let sid = p.session_id;
        let followed = self.followed(&sid).is_ok();
        match (how, followed) {
            (Attach::Load, false) => {
                Followed::start(
                    self.clone(),
                    client.clone(),
                    sid.clone(),
                    cwd,
                    Start::History,
                )
                .await?;
            }
            // Followed already: its history again, the running follower stays.
            (Attach::Load, true) => {
                session::replay(self.clone(), client.clone(), sid.clone(), cwd).await?;
            }
            (Attach::Resume, false) => {
                let start = Start::After {
                    seq: got.last_seq,
                    waiting: got.pending_approvals,
                };
                Followed::start(self.clone(), client.clone(), sid.clone(), cwd, start).await?;
            }
            (Attach::Resume, true) => {}
        }
        self.follow_mode(&client, &sid, got.session.mode).await;
        Ok(Answer {
            result: json!({"modes": modes::state(got.session.mode)}),
            then: self
                .attached(&client, &sid, got.session.usage.cost_usd)
                .await,
        })
    }

    /// `session/fork`: a new amber session whose conversation is the whole history of
    /// `sessionId` (amberd's `session/fork`: same workspace, mode, model and servers, and
    /// what the source's budgets have left), followed live like a new one.
    pub(crate) async fn session_fork(
        self: Arc<Self>,
        p: ExistingSessionParams,
    ) -> Result<Answer, RpcError> {
        let client = self.daemon.client().await?;
        self.ensure_watch(&client).await;
        let params = SessionForkParams {
            session_id: p.session_id,
            turn_id: None,
        };
        let info = client.request::<methods::SessionFork>(&params).await?;
        join_servers(&client, &info.session_id, p.mcp_servers).await?;
        self.follow_new(&client, &info).await?;
        Ok(Answer {
            result: json!({"sessionId": info.session_id, "modes": modes::state(info.mode)}),
            then: self
                .attached(&client, &info.session_id, info.usage.cost_usd)
                .await,
        })
    }

    /// `session/list`: amberd's sessions (every client's), one page per call, filtered by
    /// `cwd` when given.
    pub(crate) async fn session_list(
        self: Arc<Self>,
        p: Option<ListParams>,
    ) -> Result<Value, RpcError> {
        let p = p.unwrap_or(ListParams {
            cwd: None,
            cursor: None,
        });
        let client = self.daemon.client().await?;
        let params = amber_proto::SessionListParams {
            parent: None,
            cursor: p.cursor,
            limit: None,
        };
        let page = client.session_list(&params).await?;
        let sessions: Vec<Value> = page
            .sessions
            .iter()
            .filter(|s| p.cwd.as_deref().is_none_or(|cwd| s.cwd == cwd))
            .map(|s| {
                json!({
                    "sessionId": s.session_id,
                    "cwd": s.cwd,
                    "title": s.title,
                    "updatedAt": s.updated_at,
                })
            })
            .collect();
        let mut result = json!({"sessions": sessions});
        if let Some(cursor) = page.next_cursor {
            result["nextCursor"] = json!(cursor);
        }
        Ok(result)
    }

    /// The session's `available_commands_update`, as a line to send after the answer.
    pub(crate) async fn commands_update(&self, client: &Client, session_id: &str) -> Vec<String> {
        match commands::offered(client).await {
            Ok(offered) => vec![wire::notification(
                "session/update",
                json!({"sessionId": session_id, "update": commands::update(&offered)}),
            )],
            Err(e) => {
                tracing::warn!("acp: command/list: {}", e.message);
                Vec::new()
            }
        }
    }

    /// What follows the answer for a session that has a past: its commands, then its
    /// `usage_update` (`cost`: the session's total so far).
    async fn attached(
        &self,
        client: &Client,
        session_id: &str,
        cost: Option<CostUsd>,
    ) -> Vec<String> {
        let mut then = self.commands_update(client, session_id).await;
        if let Some(update) = usage::now(client, session_id, cost).await {
            then.push(wire::notification(
                "session/update",
                json!({"sessionId": session_id, "update": update}),
            ));
        }
        then
    }
}

/// The editor's MCP servers join the session's own (`mcp/add {sessionId}`; one it already
/// has stays connected).
async fn join_servers(
    client: &Client,
    session_id: &str,
    servers: Vec<SessionMcpServer>,
) -> Result<(), RpcError> {
    for server in servers {
        let params = amber_proto::McpAddParams {
            name: server.name,
            transport: server.transport,
            session_id: Some(session_id.to_owned()),
        };
        client.request::<methods::McpAdd>(&params).await?;
    }
    Ok(())
}
