//! Sessions that message each other, as a session feature: `session/send` and the
//! `session_send` tool put a message into another session as a prompt, `list_sessions`
//! shows whom a session may message, and `notify_when_idle` (`session/notifyWhenIdle`)
//! sends a watcher a message with a session's last reply when it next goes idle.
//!
//! **Every message is a durable event on both sides:** `message_sent` in the sender
//! (before anything reaches the receiver), `message_received` in the receiver, then the
//! receiver's `prompt_queued` (on disk before the send answers).
//!
//! **A message is a prompt, so it is fenced:** a session messages only sessions of its own
//! project (the same workspace or git repository, or a path under `[agents]
//! message_allow`), never itself, and never one whose mode is wider than its own — a
//! read-only session cannot drive a session that writes. A background sub-agent has none
//! of these tools.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use amber_proto::sync::Locked;
use amber_proto::{EventKind, Mode, SessionInfo, StopReason};
use amber_tools::{Tool, ToolContext, ToolOutcome, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::agent::TurnOutcome;
use crate::session::SessionShared;
use crate::session::directory::Directory;
use crate::session::feature::{Attach, Feature, SessionFeature, Turn};
use crate::session::services::Services;

/// The feature: per session, its idle watchers and its last reply.
pub(crate) struct MessagesFeature;

impl Feature for MessagesFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionMessages {
            shared: session.session.clone(),
            services: session.services.clone(),
            is_child: session.meta.info.parent.is_some(),
            watchers: Mutex::new(Vec::new()),
            last_reply: Mutex::new(String::new()),
        }))
    }
}

/// One session's part: who waits for it to go idle, and what it last said.
pub(crate) struct SessionMessages {
    shared: Weak<SessionShared>,
    services: Arc<Services>,
    is_child: bool,
    watchers: Mutex<Vec<String>>,
    last_reply: Mutex<String>,
}

impl SessionMessages {
    /// `watcher` gets a message when this session next goes idle (once).
    pub(crate) fn notify_when_idle(&self, watcher: &str) {
        let mut watchers = self.watchers.locked();
        if !watchers.iter().any(|w| w == watcher) {
            watchers.push(watcher.to_owned());
        }
    }
}

impl SessionFeature for SessionMessages {
    fn offer_tools(&self, tools: &mut ToolRegistry) {
        if self.is_child {
            return;
        }
        let port = Port {
            shared: self.shared.clone(),
            services: self.services.clone(),
        };
        tools.register(Arc::new(SessionSendTool(port.clone())));
        tools.register(Arc::new(ListSessionsTool(port.clone())));
        tools.register(Arc::new(NotifyWhenIdleTool(port)));
    }

    fn turn_ending<'a>(
        &'a self,
        _turn: &'a Turn<'a>,
        outcome: &'a TurnOutcome,
    ) -> BoxFuture<'a, ()> {
        outcome.text.clone_into(&mut self.last_reply.locked());
        Box::pin(std::future::ready(()))
    }

    /// Idle now (no prompt waits): each watcher gets the last reply, once.
    fn turn_ended(&self, turn: &Turn<'_>, stop: StopReason) {
        if turn.shared.queued() > 0 {
            return;
        }
        let watchers = std::mem::take(&mut *self.watchers.locked());
        if watchers.is_empty() {
            return;
        }
        let Some(directory) = self.services.directory.get().cloned() else {
            return;
        };
        let from = turn.shared.id.clone();
        let title = turn.shared.info().title;
        let reply = self.last_reply.locked().clone();
        let text = format!(
            "[amber] Session {from} ({title}) is idle; its turn ended {}. Its last reply:\n\n{reply}",
            stop.as_str()
        );
        // Off this actor: a watcher may have to be loaded.
        tokio::task::spawn_blocking(move || {
            for watcher in watchers {
                if let Err(err) = deliver(directory.as_ref(), Some(&from), &watcher, &text) {
                    tracing::warn!(session = %from, %watcher, %err, "cannot send the idle notice");
                }
            }
        });
    }
}

/// What a message became: its id and the receiver's turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    pub message_id: String,
    pub turn_id: String,
}

/// Whether session `from` may message session `to`: the fence of the module docs.
pub(crate) fn may_message(
    from: &SessionInfo,
    to: &SessionInfo,
    allowed: &[PathBuf],
) -> Result<(), String> {
    if from.session_id == to.session_id {
        return Err("a session cannot message itself".into());
    }
    if wider(to.mode, from.mode) {
        return Err(format!(
            "session {} runs in {} mode, wider than this session's {} mode: a message is a \
             prompt, so only a person may send it one",
            to.session_id,
            to.mode.as_str(),
            from.mode.as_str()
        ));
    }
    let (a, b) = (Path::new(&from.cwd), Path::new(&to.cwd));
    let same_project = a == b
        || repository_of(a).is_some_and(|root| Some(root) == repository_of(b))
        || allowed.iter().any(|dir| b.starts_with(dir));
    if !same_project {
        return Err(format!(
            "session {} works in {}, outside this session's project (its workspace or git \
             repository); [agents] message_allow can allow more",
            to.session_id, to.cwd
        ));
    }
    Ok(())
}

/// Whether mode `a` allows more than mode `b`.
fn wider(a: Mode, b: Mode) -> bool {
    amber_policy::narrower_mode(a, b) == b && a != b
}

/// The nearest directory at or above `dir` holding `.git`.
fn repository_of(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|d| d.join(".git").exists())
}

/// Sends `text` from `from` (a session, or a client when absent) to `to`: the events on
/// both sides, then the receiver's prompt. `from` and `to` are session ids (resolved by the
/// caller).
pub(crate) fn deliver(
    directory: &dyn Directory,
    from: Option<&str>,
    to: &str,
    text: &str,
) -> Result<Sent, String> {
    let to = to.to_owned();
    let receiver = directory.info(&to).map_err(|e| e.to_string())?;
    let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let header = match from {
        Some(from) => {
            let sender = directory.info(from).map_err(|e| e.to_string())?;
            directory
                .publish(
                    from,
                    EventKind::MessageSent {
                        message_id: message_id.clone(),
                        to: to.clone(),
                        text: text.to_owned(),
                    },
                )
                .map_err(|e| e.to_string())?;
            format!("[message from session {from} ({})]", sender.title)
        }
        None => "[message from a client]".to_owned(),
    };
    directory
        .publish(
            &to,
            EventKind::MessageReceived {
                message_id: message_id.clone(),
                from: from.map(str::to_owned),
                text: text.to_owned(),
            },
        )
        .map_err(|e| e.to_string())?;
    // An untitled receiver is titled after the message, not after its header.
    if receiver.title.is_empty() {
        let title: String = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .trim()
            .chars()
            .take(60)
            .collect();
        directory
            .edit_info(&to, &mut |info| {
                if info.title.is_empty() {
                    info.title.clone_from(&title);
                }
            })
            .map_err(|e| e.to_string())?;
    }
    let turn_id = directory
        .prompt(&to, format!("{header}\n\n{text}"))
        .map_err(|e| e.to_string())?;
    tracing::debug!(%to, %message_id, "message queued");
    Ok(Sent {
        message_id,
        turn_id,
    })
}

/// What the message tools reach: their session and the daemon's sessions.
#[derive(Clone)]
struct Port {
    shared: Weak<SessionShared>,
    services: Arc<Services>,
}

impl Port {
    fn parts(&self) -> Result<(Arc<SessionShared>, Arc<dyn Directory>), ToolOutcome> {
        let shared = self
            .shared
            .upgrade()
            .ok_or_else(|| ToolOutcome::error("the session is closing"))?;
        let directory = self
            .services
            .directory
            .get()
            .cloned()
            .ok_or_else(|| ToolOutcome::error("messages are not available yet"))?;
        Ok((shared, directory))
    }

    fn allowed(&self) -> Vec<PathBuf> {
        self.services.live().config.agents.message_allow.clone()
    }

    /// The session `to` names, once this session may message it.
    fn reachable(
        &self,
        shared: &SessionShared,
        directory: &dyn Directory,
        to: &str,
    ) -> Result<String, String> {
        let to = directory.resolve(to).map_err(|e| e.to_string())?;
        let receiver = directory.info(&to).map_err(|e| e.to_string())?;
        may_message(&shared.info(), &receiver, &self.allowed())?;
        Ok(to)
    }
}

fn string_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolOutcome> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ToolOutcome::error(format!("`{key}` must be a non-empty string")))
}

struct SessionSendTool(Port);

impl Tool for SessionSendTool {
    fn name(&self) -> &str {
        "session_send"
    }

    fn description(&self) -> &str {
        "Send a message to another session of this project (`to`: its id, name or id \
         prefix, from `list_sessions`): it arrives there as a prompt led by who sent it, and \
         that session works on it in its own turn. Its answer comes back only if it sends \
         one (or use `notify_when_idle`)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "text": {"type": "string"}
            },
            "required": ["to", "text"]
        })
    }

    fn read_only(&self) -> bool {
        // It changes nothing here; what the receiver may do is fenced by `may_message`.
        true
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let (shared, directory) = match self.0.parts() {
                Ok(parts) => parts,
                Err(outcome) => return outcome,
            };
            let (to, text) = match (string_arg(&args, "to"), string_arg(&args, "text")) {
                (Ok(to), Ok(text)) => (to.to_owned(), text.to_owned()),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            let to = match self.0.reachable(&shared, directory.as_ref(), &to) {
                Ok(to) => to,
                Err(message) => return ToolOutcome::error(message),
            };
            let from = shared.id.clone();
            let sent = tokio::task::spawn_blocking(move || {
                deliver(directory.as_ref(), Some(&from), &to, &text).map(|sent| (sent, to))
            })
            .await;
            match sent {
                Ok(Ok((sent, to))) => ToolOutcome::ok(format!(
                    "Sent to session {to} as message {}; it runs as turn {} there.",
                    sent.message_id, sent.turn_id
                )),
                Ok(Err(message)) => ToolOutcome::error(message),
                Err(err) => ToolOutcome::error(err.to_string()),
            }
        })
    }
}

struct ListSessionsTool(Port);

impl Tool for ListSessionsTool {
    fn name(&self) -> &str {
        "list_sessions"
    }

    fn description(&self) -> &str {
        "The other sessions of this project that this session may message: id, name, \
         title, state, mode and model."
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let (shared, directory) = match self.0.parts() {
                Ok(parts) => parts,
                Err(outcome) => return outcome,
            };
            let me = shared.info();
            let allowed = self.0.allowed();
            let rows: Vec<Value> = directory
                .all()
                .iter()
                .filter(|info| info.parent.is_none())
                .filter(|info| may_message(&me, info, &allowed).is_ok())
                .map(|info| {
                    json!({
                        "sessionId": info.session_id,
                        "name": info.name,
                        "title": info.title,
                        "state": info.state,
                        "mode": info.mode,
                        "model": info.model,
                    })
                })
                .collect();
            if rows.is_empty() {
                return ToolOutcome::ok("No other session of this project may be messaged.");
            }
            ToolOutcome::ok(serde_json::to_string_pretty(&rows).unwrap_or_default())
        })
    }
}

struct NotifyWhenIdleTool(Port);

impl Tool for NotifyWhenIdleTool {
    fn name(&self) -> &str {
        "notify_when_idle"
    }

    fn description(&self) -> &str {
        "Get a message with another session's last reply when it next goes idle \
         (`session`: its id, name or id prefix). Once; ask again to be told again."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"session": {"type": "string"}},
            "required": ["session"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let (shared, directory) = match self.0.parts() {
                Ok(parts) => parts,
                Err(outcome) => return outcome,
            };
            let watched = match string_arg(&args, "session") {
                Ok(watched) => watched.to_owned(),
                Err(e) => return e,
            };
            let watched = match directory.resolve(&watched) {
                Ok(id) => id,
                Err(err) => return ToolOutcome::error(err.to_string()),
            };
            // The notice is a message to this session from the watched one.
            let watched_info = match directory.info(&watched) {
                Ok(info) => info,
                Err(err) => return ToolOutcome::error(err.to_string()),
            };
            if let Err(message) = may_message(&watched_info, &shared.info(), &self.0.allowed()) {
                return ToolOutcome::error(message);
            }
            match directory.notify_when_idle(&watched, &shared.id) {
                Ok(()) => ToolOutcome::ok(format!(
                    "You will get a message when session {watched} next goes idle."
                )),
                Err(err) => ToolOutcome::error(err.to_string()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, cwd: &str, mode: Mode) -> SessionInfo {
        let mut info: SessionInfo = serde_json::from_value(json!({
            "sessionId": id, "cwd": cwd, "mode": "write", "model": "m", "title": id,
            "state": "idle", "createdAt": "", "updatedAt": ""
        }))
        .unwrap();
        info.mode = mode;
        info
    }

    #[test]
    fn the_fence_keeps_messages_within_the_project_and_the_senders_mode() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        std::fs::create_dir(repo.path().join("sub")).unwrap();
        let root = repo.path().to_string_lossy().into_owned();
        let sub = repo.path().join("sub").to_string_lossy().into_owned();
        let elsewhere = tempfile::tempdir().unwrap();
        let other = elsewhere.path().to_string_lossy().into_owned();
        // (from, to, allowed, Ok or the words of the refusal)
        type Case = (
            SessionInfo,
            SessionInfo,
            Vec<PathBuf>,
            Result<(), &'static str>,
        );
        let table: Vec<Case> = vec![
            (
                info("a", &root, Mode::Write),
                info("b", &root, Mode::Write),
                vec![],
                Ok(()),
            ),
            (
                info("a", &root, Mode::Write),
                info("b", &sub, Mode::Read),
                vec![],
                Ok(()),
            ),
            (
                info("a", &root, Mode::Write),
                info("a", &root, Mode::Write),
                vec![],
                Err("itself"),
            ),
            (
                info("a", &root, Mode::Read),
                info("b", &root, Mode::Write),
                vec![],
                Err("wider"),
            ),
            (
                info("a", &root, Mode::Write),
                info("b", &root, Mode::Yolo),
                vec![],
                Err("wider"),
            ),
            (
                info("a", &root, Mode::Write),
                info("b", &other, Mode::Write),
                vec![],
                Err("outside"),
            ),
            (
                info("a", &root, Mode::Write),
                info("b", &other, Mode::Write),
                vec![elsewhere.path().to_path_buf()],
                Ok(()),
            ),
        ];
        for (from, to, allowed, expected) in table {
            let got = may_message(&from, &to, &allowed);
            match expected {
                Ok(()) => assert!(got.is_ok(), "{} -> {}: {got:?}", from.cwd, to.cwd),
                Err(words) => {
                    let err = got.unwrap_err();
                    assert!(err.contains(words), "{err}");
                }
            }
        }
    }
}
