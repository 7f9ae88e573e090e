//! The seam between the session kernel and the features that extend a session.
//!
//! The kernel (the actor, the manager, the builder, restore, the gate) knows a session's
//! life — created, restored, a turn begins, a tool runs, files are about to change, the turn
//! ends, the session stops, is forked or deleted — and tells every attached feature at
//! those fixed points, in the order the daemon composed them ([`Services::new`]). It never
//! names a feature: a capability is one module implementing [`Feature`] (daemon level) and
//! [`SessionFeature`] (one per session, holding that session's state), plus one line where
//! the daemon composes its features. Code outside the kernel (an RPC handler) that needs a
//! feature's own operations finds its per-session part with [`SessionShared::feature`].
//!
//! **Invariant:** no kernel module imports a feature module (test: `walls::`).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use amber_proto::{
    Approval, Mode, SessionInfo, SessionNewParams, StopReason, ToolCall, ToolStatus, Usage,
    WorktreeInfo,
};
use amber_store::SessionMeta;
use amber_store::context::Context;
use amber_tools::ToolRegistry;
use amber_tools::gate::GateCall;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::services::Services;
use super::{SessionError, SessionShared};
use crate::agent::TurnOutcome;
use crate::agent::ledger::Spent;
use crate::agent::metered::{Refusal, RequestMeta};

/// What a feature reads when it attaches to a session (new or restored).
pub(crate) struct Attach<'a> {
    /// The session itself, for a feature's background work (it is being built: upgrade
    /// it only later).
    pub session: Weak<SessionShared>,
    pub id: &'a str,
    pub workspace: &'a Path,
    pub services: &'a Arc<Services>,
    /// What the store keeps of the session (for a new one: what it will keep).
    pub meta: &'a SessionMeta,
}

/// A `session/new` (or a fork) before anything is made: a feature may fill in what the
/// caller left out and say what the new session's metadata keeps of it.
pub(crate) struct Draft<'a> {
    pub params: &'a mut SessionNewParams,
    /// The validated `cwd`.
    pub workspace: &'a Path,
    pub services: &'a Services,
    /// The metadata being made: a feature sets its own part (read back by `attach`).
    pub meta: &'a mut SessionMeta,
}

/// A session being made by `session/new` (or a fork).
pub(crate) struct NewSession<'a> {
    pub id: &'a str,
    pub params: &'a SessionNewParams,
    /// The validated `cwd`.
    pub workspace: &'a Path,
    pub services: &'a Services,
}

/// Where a new session runs instead of its `cwd`: a place a feature made for it.
pub(crate) struct Placement {
    /// The session's workspace root there (canonical).
    pub cwd: PathBuf,
    /// What `SessionInfo.worktree` reports of it.
    pub worktree: Option<WorktreeInfo>,
    /// Takes the place away again if the session cannot be made after all.
    pub undo: Box<dyn FnOnce() + Send>,
}

/// A feature at the daemon level: attaches its per-session part to each session.
pub(crate) trait Feature: Send + Sync {
    /// The feature's part of one session; `None`: it keeps nothing per session.
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>>;

    /// Checks `session/new`'s parameters the feature owns, before anything is made.
    fn check_new(&self, _params: &SessionNewParams) -> Result<(), String> {
        Ok(())
    }

    /// Shapes a new session before anything is made (the params' defaults, the feature's
    /// part of the metadata).
    fn prepare(&self, _draft: &mut Draft<'_>) -> Result<(), SessionError> {
        Ok(())
    }

    /// Completes a new session's info once its model is known (the caps it keeps); an error
    /// refuses the session before anything is made.
    fn shape_info(
        &self,
        _new: &NewSession<'_>,
        _info: &mut SessionInfo,
    ) -> Result<(), SessionError> {
        Ok(())
    }

    /// Completes the info of a session only in the store (not loaded), as listed.
    fn describe_stored(&self, _meta: &mut SessionMeta, _services: &Services) {}

    /// Places a new session elsewhere than its `cwd` (a worktree it makes). Asked last of
    /// the checks, since it makes something; the first feature that places it wins.
    fn place(&self, _new: &NewSession<'_>) -> Result<Option<Placement>, SessionError> {
        Ok(None)
    }

    /// A config file edit is in force from now on: the feature's own section with it.
    fn config_replaced(&self, _config: &crate::config::Config) {}

    /// Every session that had work when the daemon last stopped is loaded again (their
    /// actors finish what a crash interrupted first).
    fn resumed(&self, _services: &Services) {}

    /// Session `id` was deleted (loaded or only stored); its actor has stopped.
    fn deleted(&self, _id: &str, _services: &Services) {}

    /// Whether a session with `info` must stay loaded though idle (it waits for something
    /// outside any turn: a fleet session in the queue or on a runner). Such a stored session
    /// is loaded again when the daemon starts.
    fn keeps_loaded(&self, _info: &SessionInfo) -> bool {
        false
    }

    /// Whether a turn of a session with `info` may wait, before its prompt reaches the model,
    /// for something outside the daemon (a fleet session, for a runner): one the daemon's
    /// stop interrupted while it only waited runs again when the session is loaded.
    fn turns_wait(&self, _info: &SessionInfo) -> bool {
        false
    }
}

/// A running turn, as a feature sees it.
pub(crate) struct Turn<'a> {
    pub shared: &'a SessionShared,
    pub services: &'a Services,
    pub turn_id: &'a str,
    pub cancel: &'a CancellationToken,
}

/// A turn about to put its prompt to the model.
pub(crate) struct TurnStart<'a> {
    pub turn: Turn<'a>,
    pub prompt: &'a str,
    /// The seq of the turn's `turn_started` event.
    pub started_seq: u64,
    /// Where the conversation stands before the prompt is pushed: its length and the
    /// chain hash of its last message.
    pub context_len: usize,
    pub context_head: u64,
}

/// A feature's answer to a turn about to start.
#[derive(Debug, Default)]
pub(crate) enum Admission {
    /// Go on; `context`, if any, is added to this turn's model input (never to the history).
    #[default]
    Proceed,
    ProceedWith {
        context: String,
    },
    /// The turn ends at once with an error naming `reason`; later features are not asked.
    Blocked {
        code: &'static str,
        reason: String,
    },
}

/// A feature's advice on one tool call, before policy decides.
#[derive(Debug, Default)]
pub(crate) struct ToolAdvice {
    pub verdict: AdvisedVerdict,
    /// Arguments the call runs with instead of the model's.
    pub arguments: Option<Value>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum AdvisedVerdict {
    #[default]
    NoOpinion,
    /// Allowed as far as this feature goes (policy's deny and a person's ask still hold).
    Allow,
    /// Put to the approvers with this reason, where policy would allow.
    Ask(String),
    Deny(String),
}

/// The opinion that stands of `held` and `next`: a deny settles it (`Break`), else an ask over
/// an allow over none; of two asks the first.
fn stronger(
    held: AdvisedVerdict,
    next: AdvisedVerdict,
) -> std::ops::ControlFlow<AdvisedVerdict, AdvisedVerdict> {
    use std::ops::ControlFlow::{Break, Continue};
    match (held, next) {
        (_, deny @ AdvisedVerdict::Deny(_)) => Break(deny),
        (ask @ AdvisedVerdict::Ask(_), _) | (_, ask @ AdvisedVerdict::Ask(_)) => Continue(ask),
        (AdvisedVerdict::Allow, _) | (_, AdvisedVerdict::Allow) => Continue(AdvisedVerdict::Allow),
        (held, AdvisedVerdict::NoOpinion) => Continue(held),
    }
}

#[cfg(test)]
mod advice_tests {
    use super::AdvisedVerdict::{Allow, Ask, Deny, NoOpinion};
    use super::*;
    use std::ops::ControlFlow::{Break, Continue};

    #[test]
    fn a_deny_settles_and_an_ask_outweighs_an_allow_in_either_order() {
        let ask = || Ask("hook asks".into());
        let deny = || Deny("hook denies".into());
        let cases = [
            (NoOpinion, NoOpinion, Continue(NoOpinion)),
            (NoOpinion, Allow, Continue(Allow)),
            (Allow, NoOpinion, Continue(Allow)),
            (Allow, ask(), Continue(ask())),
            (ask(), Allow, Continue(ask())),
            (ask(), Ask("second".into()), Continue(ask())),
            (Allow, deny(), Break(deny())),
            (ask(), deny(), Break(deny())),
        ];
        for (held, next, want) in cases {
            let shown = format!("{held:?} then {next:?}");
            assert_eq!(stronger(held, next), want, "{shown}");
        }
    }
}

/// What a feature installs as a mode takes force, run under the session's lock together
/// with the mode's own change (so nothing sees the new mode with the old installation).
pub(crate) type ModeStep<'a> = Box<dyn FnOnce(&mut SessionInfo) + 'a>;

/// One tool call that ran.
pub(crate) struct ToolRan<'a> {
    pub call: &'a ToolCall,
    pub arguments: &'a Value,
    pub status: ToolStatus,
    /// The output as the model saw it.
    pub output: &'a str,
}

/// A feature's part of one session. Every point has a default that does nothing, so a
/// feature implements only the points it uses.
pub(crate) trait SessionFeature: Any + Send + Sync {
    /// The session started: `restored` when it came back from the store, not new.
    fn started(&self, _shared: &Arc<SessionShared>, _restored: bool) {}

    /// Run by the actor before its first command, with the context (a restored session
    /// finishes what a crash interrupted).
    fn recover<'a>(
        &'a self,
        _shared: &'a Arc<SessionShared>,
        _context: &'a mut Context,
    ) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    /// A turn is about to start; a feature may add to its input or block it.
    fn before_turn<'a>(&'a self, _start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        Box::pin(std::future::ready(Admission::Proceed))
    }

    /// Mode `mode` is taking force (at creation, restore, every switch): what the feature
    /// builds for it now, and the step that installs it.
    fn mode_in_force<'a>(
        &'a self,
        _shared: &'a SessionShared,
        _mode: Mode,
    ) -> Option<ModeStep<'a>> {
        None
    }

    /// The tools this session's turns are offered: a feature may add its own, or withhold.
    fn offer_tools(&self, _tools: &mut ToolRegistry) {}

    /// Whether the session's turns may use `tool` (`tool/list {sessionId}`).
    fn allows_tool(&self, _tool: &str) -> bool {
        true
    }

    /// The iteration cap of the session's turns, given the one so far.
    fn max_iterations(&self, current: u32) -> u32 {
        current
    }

    /// Advice on a tool call before policy decides (in line: the call waits).
    fn before_tool<'a>(
        &'a self,
        _turn: &'a Turn<'a>,
        _call: &'a GateCall<'a>,
    ) -> BoxFuture<'a, ToolAdvice> {
        Box::pin(std::future::ready(ToolAdvice::default()))
    }

    /// The goal the session's turns must meet before they end, if one is active.
    fn turn_goal(&self) -> Option<String> {
        None
    }

    /// A turn's model answered whether the goal is met.
    fn goal_checked(&self, _turn_id: &str, _met: bool, _note: &str) {}

    /// One model request's usage (the session's or a sub-agent's) was recorded.
    fn usage_added(&self, _usage: &Usage, _model: &str) {}

    /// Why the session may make no further model request, if it may not.
    fn refuses_requests(&self) -> Option<Spent> {
        None
    }

    /// A model request is about to be sent: a feature may hold part of it (released when
    /// the returned value drops), make it wait, or refuse it.
    fn reserve<'a>(
        &'a self,
        _request: RequestMeta<'a>,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// A call that may change files is about to run.
    fn before_changes(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// The calls since `before_changes` are done.
    fn after_changes(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// A tool call finished.
    fn after_tool(&self, _turn: &Turn<'_>, _ran: &ToolRan<'_>) {}

    /// An approval is being put to the approvers.
    fn approval_requested(&self, _turn: &Turn<'_>, _approval: &Approval) {}

    /// amberd rewrote the session's workspace rules file (an `allow_always` answer).
    fn rules_rewritten<'a>(&'a self, _shared: &'a SessionShared) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    /// The turn's work is done (it stops for `stop`); its `turn_completed` is not
    /// published yet.
    fn turn_ending<'a>(
        &'a self,
        _turn: &'a Turn<'a>,
        _outcome: &'a TurnOutcome,
    ) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    /// The turn's `turn_completed` is published.
    fn turn_ended(&self, _turn: &Turn<'_>, _stop: StopReason) {}

    /// Writes the feature's part of the session's metadata.
    fn save(&self, _meta: &mut SessionMeta) {}

    /// A fork of this session is being made: the feature's settings it carries over.
    fn fork(&self, _params: &mut SessionNewParams) {}

    /// The session is stopping (deleted, unloaded, the daemon shutting down).
    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The features attached to one session, in the daemon's order.
pub(crate) struct Features(Vec<Arc<dyn SessionFeature>>);

impl Features {
    pub(crate) fn attach(features: &[Arc<dyn Feature>], session: &Attach<'_>) -> Features {
        Features(features.iter().filter_map(|f| f.attach(session)).collect())
    }

    /// The attached feature of type `T`.
    pub(crate) fn get<T: SessionFeature>(&self) -> Option<Arc<T>> {
        self.0.iter().find_map(|feature| {
            let any: Arc<dyn Any + Send + Sync> = feature.clone();
            any.downcast::<T>().ok()
        })
    }

    pub(crate) fn started(&self, shared: &Arc<SessionShared>, restored: bool) {
        for feature in &self.0 {
            feature.started(shared, restored);
        }
    }

    pub(crate) async fn recover(&self, shared: &Arc<SessionShared>, context: &mut Context) {
        for feature in &self.0 {
            feature.recover(shared, context).await;
        }
    }

    /// Asks each feature in turn; the first block ends the asking.
    pub(crate) async fn before_turn(&self, start: &TurnStart<'_>) -> Result<Vec<String>, Blocked> {
        let mut added = Vec::new();
        for feature in &self.0 {
            match feature.before_turn(start).await {
                Admission::Proceed => {}
                Admission::ProceedWith { context } => added.push(context),
                Admission::Blocked { code, reason } => return Err(Blocked { code, reason }),
            }
        }
        Ok(added)
    }

    pub(crate) fn offer_tools(&self, tools: &mut ToolRegistry) {
        for feature in &self.0 {
            feature.offer_tools(tools);
        }
    }

    pub(crate) fn allows_tool(&self, tool: &str) -> bool {
        self.0.iter().all(|feature| feature.allows_tool(tool))
    }

    pub(crate) fn max_iterations(&self, default: u32) -> u32 {
        self.0
            .iter()
            .fold(default, |cap, feature| feature.max_iterations(cap))
    }

    /// The first feature with an opinion decides; arguments rewritten by one are what the
    /// next sees.
    /// The strongest opinion wins: a deny (at once) over an ask over an allow, so one
    /// feature's allow (the network allowlist's) never silences another's ask or deny (a
    /// hook's); of two asks, the first reason stands.
    pub(crate) async fn before_tool(&self, turn: &Turn<'_>, call: &GateCall<'_>) -> ToolAdvice {
        let mut rewritten: Option<Value> = None;
        let mut strongest = AdvisedVerdict::NoOpinion;
        for feature in &self.0 {
            let seen = GateCall {
                call: call.call,
                tool: call.tool,
                args: rewritten.as_ref().unwrap_or(call.args),
            };
            let advice = feature.before_tool(turn, &seen).await;
            if advice.arguments.is_some() {
                rewritten = advice.arguments;
            }
            strongest = match stronger(strongest, advice.verdict) {
                std::ops::ControlFlow::Continue(held) => held,
                std::ops::ControlFlow::Break(deny) => {
                    return ToolAdvice {
                        verdict: deny,
                        arguments: rewritten,
                    };
                }
            };
        }
        ToolAdvice {
            verdict: strongest,
            arguments: rewritten,
        }
    }

    pub(crate) fn mode_in_force<'a>(
        &'a self,
        shared: &'a SessionShared,
        mode: Mode,
    ) -> Vec<ModeStep<'a>> {
        self.0
            .iter()
            .filter_map(|feature| feature.mode_in_force(shared, mode))
            .collect()
    }

    pub(crate) fn usage_added(&self, usage: &Usage, model: &str) {
        for feature in &self.0 {
            feature.usage_added(usage, model);
        }
    }

    pub(crate) fn turn_goal(&self) -> Option<String> {
        self.0.iter().find_map(|feature| feature.turn_goal())
    }

    pub(crate) fn goal_checked(&self, turn_id: &str, met: bool, note: &str) {
        for feature in &self.0 {
            feature.goal_checked(turn_id, met, note);
        }
    }

    pub(crate) fn refuses_requests(&self) -> Option<Spent> {
        self.0.iter().find_map(|feature| feature.refuses_requests())
    }

    /// Every feature's hold on one request, released together when the result drops.
    pub(crate) async fn reserve<'a>(
        &'a self,
        request: RequestMeta<'a>,
        cancel: &'a CancellationToken,
    ) -> Result<Vec<Box<dyn Send + 'a>>, Refusal> {
        let mut holds = Vec::new();
        for feature in &self.0 {
            if let Some(hold) = feature.reserve(request, cancel).await? {
                holds.push(hold);
            }
        }
        Ok(holds)
    }

    pub(crate) async fn before_changes(&self) {
        for feature in &self.0 {
            feature.before_changes().await;
        }
    }

    pub(crate) async fn after_changes(&self) {
        for feature in &self.0 {
            feature.after_changes().await;
        }
    }

    pub(crate) fn after_tool(&self, turn: &Turn<'_>, ran: &ToolRan<'_>) {
        for feature in &self.0 {
            feature.after_tool(turn, ran);
        }
    }

    pub(crate) fn approval_requested(&self, turn: &Turn<'_>, approval: &Approval) {
        for feature in &self.0 {
            feature.approval_requested(turn, approval);
        }
    }

    pub(crate) async fn rules_rewritten(&self, shared: &SessionShared) {
        for feature in &self.0 {
            feature.rules_rewritten(shared).await;
        }
    }

    pub(crate) async fn turn_ending(&self, turn: &Turn<'_>, outcome: &TurnOutcome) {
        for feature in &self.0 {
            feature.turn_ending(turn, outcome).await;
        }
    }

    pub(crate) fn turn_ended(&self, turn: &Turn<'_>, stop: StopReason) {
        for feature in &self.0 {
            feature.turn_ended(turn, stop);
        }
    }

    pub(crate) fn save(&self, meta: &mut SessionMeta) {
        for feature in &self.0 {
            feature.save(meta);
        }
    }

    pub(crate) fn fork(&self, params: &mut SessionNewParams) {
        for feature in &self.0 {
            feature.fork(params);
        }
    }

    pub(crate) async fn stop(&self) {
        for feature in &self.0 {
            feature.stop().await;
        }
    }
}

/// A turn a feature refused to start.
#[derive(Debug)]
pub(crate) struct Blocked {
    pub code: &'static str,
    pub reason: String,
}
