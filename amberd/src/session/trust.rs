//! A session's side of workspace trust (`crate::trust`): the versions trusted for this turn
//! or this session beyond what the daemon remembers, and the questions that trust them.
//!
//! At the start of every turn, each workspace configuration file that would change
//! something once trusted — a rules file with allow rules, a hooks file with hooks — and
//! whose version is neither trusted nor denied is put to a person through the approval flow
//! (`personOnly`: `--yes` never answers it). `allow_once` trusts it for the turn,
//! `allow_session` for the session, `allow_always` remembers it in the data dir; a denial or
//! no approver leaves it untrusted, and the next turn asks again. A workspace agent is asked
//! about when `task` names it. The hooks file's question keeps its tool name, `hooks`; the
//! others use `trust`.

use amber_proto::sync::Locked;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use amber_proto::{Approval, Decision};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::gate::{Answer, request_approval};
use super::services::Services;
use crate::agents::Pinned;
use crate::trust::{ConfigKind, Stored, WorkspaceFile};

/// The tool name of a trust question about rules or an agent.
pub(crate) const TRUST_TOOL: &str = "trust";
/// The tool name of a trust question about the hooks file (as before it was generalised).
pub(crate) const HOOKS_TRUST_TOOL: &str = "hooks";

/// A file version: its path and hash.
type Version = (PathBuf, String);

#[derive(Debug, Default)]
struct Trusted {
    /// `allow_session` answers: versions trusted until the session ends.
    session: HashSet<Version>,
    /// `allow_once` answers: versions trusted for the running turn.
    turn: HashSet<Version>,
}

/// How far a version is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Turn,
    Session,
    /// Remembered in the data dir.
    Always,
}

/// The trust side of one session.
#[derive(Debug, Default)]
pub(crate) struct SessionTrust {
    trusted: Mutex<Trusted>,
    /// A remote session's files are read in its mirror but trusted under a key of the
    /// workspace they mirror: (the mirror, the key that stands for it).
    keys: std::sync::OnceLock<(PathBuf, PathBuf)>,
}

/// One file version put to a person: what it is, what it would do, why it matters.
pub(crate) struct Question {
    pub kind: ConfigKind,
    pub path: PathBuf,
    /// Workspace-relative, as the request's scope names it.
    pub relative: String,
    pub hash: String,
    /// What the file would do once trusted (the request's arguments beside path and hash).
    pub summary: Value,
    pub reason: String,
}

impl Question {
    fn of(file: WorkspaceFile, summary: Value, reason: String) -> Question {
        Question {
            kind: file.kind,
            path: file.path,
            relative: file.relative,
            hash: file.hash,
            summary,
            reason,
        }
    }
}

impl SessionTrust {
    fn lock(&self) -> MutexGuard<'_, Trusted> {
        self.trusted.locked()
    }

    /// Files under `mirror` are trusted as files under `key` (once; later calls are
    /// ignored): a remote workspace's versions trusted in one session are trusted in the
    /// next session on that workspace, whichever mirror reads them.
    pub(crate) fn key_mirror(&self, mirror: &Path, key: PathBuf) {
        let _ = self.keys.set((mirror.to_path_buf(), key));
    }

    /// The path trust is kept under for `path`.
    fn key(&self, path: &Path) -> PathBuf {
        match self.keys.get() {
            Some((mirror, key)) => match path.strip_prefix(mirror) {
                Ok(rest) => key.join(rest),
                Err(_) => path.to_path_buf(),
            },
            None => path.to_path_buf(),
        }
    }

    /// What the daemon remembers of the version of `path` with `hash`.
    pub(crate) fn stored(&self, services: &Services, path: &Path, hash: &str) -> Stored {
        services.trust.stored(&self.key(path), hash)
    }

    /// How far the version of `path` with `hash` is trusted, if at all: the widest level
    /// that holds (remembered beats this session beats this turn).
    pub(crate) fn level(&self, services: &Services, path: &Path, hash: &str) -> Option<Level> {
        let path = &self.key(path);
        if services.trust.is_trusted(path, hash) {
            return Some(Level::Always);
        }
        let version = (path.to_path_buf(), hash.to_owned());
        let trusted = self.lock();
        if trusted.session.contains(&version) {
            Some(Level::Session)
        } else if trusted.turn.contains(&version) {
            Some(Level::Turn)
        } else {
            None
        }
    }

    pub(crate) fn is_trusted(&self, services: &Services, path: &Path, hash: &str) -> bool {
        self.level(services, path, hash).is_some()
    }

    /// Trusts a version as far as `level` (the daemon's own rewrite of a file it trusted:
    /// an `allow_always` rule appended to the rules file).
    pub(crate) fn trust(&self, services: &Services, path: &Path, hash: &str, level: Level) {
        let path = &self.key(path);
        let version = (path.to_path_buf(), hash.to_owned());
        match level {
            Level::Turn => {
                self.lock().turn.insert(version);
            }
            Level::Session => {
                self.lock().session.insert(version);
            }
            Level::Always => {
                if let Err(err) = services.trust.remember(path, hash) {
                    tracing::warn!(%err, path = %path.display(), "cannot remember a trusted workspace file; trusted for this session");
                }
                self.lock().session.insert(version);
            }
        }
    }

    /// At the start of a turn: forgets the last turn's answers, then asks about every
    /// untrusted file that would change something once trusted.
    pub(crate) async fn trust_for_turn(
        &self,
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        cancel: &CancellationToken,
    ) {
        self.lock().turn.clear();
        for question in turn_questions(&shared.config_root) {
            if cancel.is_cancelled() {
                return;
            }
            if self.is_trusted(services, &question.path, &question.hash)
                || self.stored(services, &question.path, &question.hash) == Stored::Denied
            {
                continue;
            }
            self.ask(shared, services, turn_id, cancel, question).await;
        }
    }

    /// Puts one file version to a person; whether they trusted it (for the turn at least).
    pub(crate) async fn ask(
        &self,
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        cancel: &CancellationToken,
        question: Question,
    ) -> bool {
        let Question {
            kind,
            path,
            relative,
            hash,
            summary,
            reason,
        } = question;
        let mut arguments = json!({
            "trust": path.display().to_string(),
            "kind": kind.as_str(),
            "hash": hash,
        });
        if let (Value::Object(arguments), Value::Object(summary)) = (&mut arguments, summary) {
            arguments.extend(summary);
        }
        let tool = match kind {
            ConfigKind::Hooks => HOOKS_TRUST_TOOL,
            ConfigKind::Rules | ConfigKind::Agent => TRUST_TOOL,
        };
        let approval = Approval {
            request_id: format!("apr_{}", uuid::Uuid::new_v4().simple()),
            call_id: format!("trust_{}_{}", kind.as_str(), &hash[..12.min(hash.len())]),
            tool: tool.to_owned(),
            arguments,
            reason,
            scope: format!("this version of {relative}"),
            unsandboxed: false,
            person_only: true,
            mcp: None,
        };
        let answer = request_approval(shared, services, turn_id, cancel, approval, true).await;
        let level = match answer {
            Answer::Decided(Decision::AllowOnce) => Level::Turn,
            Answer::Decided(Decision::AllowSession) => Level::Session,
            Answer::Decided(Decision::AllowAlways) => Level::Always,
            Answer::Decided(Decision::Deny)
            | Answer::NoApprover
            | Answer::ApproverLeft
            | Answer::Cancelled => {
                tracing::info!(session = %shared.id, path = %path.display(), ?answer, "workspace configuration not trusted");
                return false;
            }
        };
        self.trust(services, &path, &hash, level);
        true
    }
}

/// The questions a turn's start may ask: the rules file when it has allow rules, the hooks
/// file when it has hooks. A file that cannot be read or parsed asks nothing (a broken rules
/// file makes writes ask; a broken hooks file is reported by the hooks).
fn turn_questions(workspace: &Path) -> Vec<Question> {
    let mut questions = Vec::new();
    if let Ok(Some(file)) =
        crate::trust::read(workspace, ConfigKind::Rules, crate::trust::files::RULES)
        && let Some(question) = rules_question(file)
    {
        questions.push(question);
    }
    if let Ok(Some(hooks)) = crate::hooks::trust::read_workspace(workspace)
        && !hooks.hooks.is_empty()
        && let Ok(Some(file)) =
            crate::trust::read(workspace, ConfigKind::Hooks, crate::trust::files::HOOKS)
        && file.hash == hooks.hash
    {
        questions.push(hooks_question(file, &hooks.hooks));
    }
    questions
}

/// The question about a rules file, when trusting it would allow anything.
pub(crate) fn rules_question(file: WorkspaceFile) -> Option<Question> {
    let loaded = amber_policy::LoadedRules::parse(&file.path, file.utf8()?.as_bytes()).ok()?;
    if !loaded.all().allows_anything() {
        return None;
    }
    let allows: Vec<String> = loaded
        .all()
        .rules()
        .filter(|r| r.decision == amber_policy::RuleDecision::Allow)
        .map(amber_policy::Rule::shown)
        .collect();
    let unsandboxed = allows
        .iter()
        .filter(|r| r.ends_with("(sandbox = false)"))
        .count();
    let mut reason = format!(
        "trust the workspace's rules file {}? Until you do, only its deny and ask rules apply; \
         trusted, its {} allow rule(s) let calls run without asking",
        file.relative,
        allows.len()
    );
    if unsandboxed > 0 {
        reason.push_str(&format!(
            ", and {unsandboxed} of them let commands run WITHOUT the OS sandbox, running \
             whatever the workspace holds then with all of your access"
        ));
    }
    Some(Question::of(file, json!({ "allows": allows }), reason))
}

fn hooks_question(file: WorkspaceFile, hooks: &[crate::hooks::HookSpec]) -> Question {
    let commands: Vec<Value> = hooks
        .iter()
        .map(|h| json!({"event": h.event, "command": h.command, "matcher": h.matcher}))
        .collect();
    let reason = format!(
        "trust the workspace's hooks file {}? Its commands would run around this session's \
         tool calls and turns",
        file.relative
    );
    Question::of(file, json!({ "hooks": commands }), reason)
}

/// The question about a workspace agent a `task` names (`pinned`: the version it was read
/// from).
pub(crate) fn agent_question(agent: &crate::agents::Agent, pinned: &Pinned) -> Question {
    let d = &agent.definition;
    Question {
        kind: ConfigKind::Agent,
        path: pinned.path.clone(),
        relative: pinned.relative.clone(),
        hash: pinned.hash.clone(),
        summary: json!({
            "agent": agent.name,
            "mode": d.mode.map(|m| m.as_str()),
            "model": d.model,
            "tools": d.tools,
        }),
        reason: format!(
            "trust the workspace agent `{}` ({})? It sets the system prompt{}{} of the sub-agent \
             this task runs",
            agent.name,
            pinned.relative,
            d.mode
                .map(|m| format!(", the mode ({})", m.as_str()))
                .unwrap_or_default(),
            d.tools
                .as_ref()
                .map(|t| format!(", the tools ({})", t.join(", ")))
                .unwrap_or_default(),
        ),
    }
}

/// Makes sure every workspace agent of `agents` is trusted, asking a person about each
/// version that is neither trusted nor denied; the error names the first one that is not.
pub(crate) async fn ensure_agents_trusted(
    shared: &SessionShared,
    services: &Services,
    turn_id: &str,
    cancel: &CancellationToken,
    agents: &[Option<crate::agents::Agent>],
) -> Result<(), String> {
    for agent in agents.iter().flatten() {
        let Some(pinned) = &agent.pinned else {
            continue;
        };
        if shared
            .trust
            .is_trusted(services, &pinned.path, &pinned.hash)
        {
            continue;
        }
        let denied = shared.trust.stored(services, &pinned.path, &pinned.hash) == Stored::Denied;
        if denied
            || !shared
                .trust
                .ask(
                    shared,
                    services,
                    turn_id,
                    cancel,
                    agent_question(agent, pinned),
                )
                .await
        {
            return Err(untrusted_agent(&agent.name, &pinned.relative));
        }
    }
    Ok(())
}

/// Why an untrusted workspace agent is not used.
pub(crate) fn untrusted_agent(name: &str, relative: &str) -> String {
    format!(
        "agent `{name}` comes from the workspace ({relative}) and this version of it is not \
         trusted: review it, then trust it with `amber-cli trust {relative}` (or allow the \
         question a `task` naming it asks)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widest_level_holds_and_a_new_version_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let services = Services::new(
            crate::config::Config::default(),
            &|_| None,
            dir.path().to_owned(),
        )
        .unwrap();
        let trust = SessionTrust::default();
        let path = Path::new("/ws/.amber/rules.toml");
        assert_eq!(trust.level(&services, path, "a"), None);
        for level in [Level::Turn, Level::Session, Level::Always] {
            trust.trust(&services, path, "a", level);
            assert_eq!(trust.level(&services, path, "a"), Some(level));
        }
        assert_eq!(trust.level(&services, path, "b"), None, "another version");
        // Another session (or a restarted daemon) knows only what was remembered.
        assert_eq!(
            SessionTrust::default().level(&services, path, "a"),
            Some(Level::Always)
        );
        let other = SessionTrust::default();
        other.trust(&services, path, "c", Level::Session);
        assert_eq!(
            trust.level(&services, path, "c"),
            None,
            "sessions trust apart"
        );
    }
}
