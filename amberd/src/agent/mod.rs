//! The agent loop (SEED.md "agent loop"): one prompt in, events out, the context grown by
//! exactly the messages the model should see next time.
//!
//! **Invariants:** the system prompt is always the first message; every assistant message
//! with tool calls is followed by exactly one tool message per call before any other
//! message; a failed or cancelled LLM call pushes nothing; the silent confirm exchange is
//! popped again when the model confirms it is finished, and is never sent after a reply
//! that ends with the finish signal (`finish_signal.rs`); a turn with an output schema ends
//! with `end_turn` only with a valid `output` (one repair round, else `invalid_output`).

pub(crate) mod compact;
pub(crate) mod delivery;
pub(crate) mod finish_signal;
pub(crate) mod goal;
pub(crate) mod guards;
pub(crate) mod ledger;
pub(crate) mod metered;
pub(crate) mod output_schema;
pub(crate) mod prompt;
pub(crate) mod tool_search;

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use amber_llm::{ApiError, ChatRequest, ChatResponse, LlmClient, StreamEvent, ToolSpec};
use amber_proto::{
    ErrorInfo, EventKind, Message, Mode, Role, StopReason, ToolCall, ToolStatus, Usage,
    UsagePurpose,
};
use amber_store::context::{Context, PushKind};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactionError, CompactionSettings, estimate_tokens};
use amber_tools::dispatch::{DispatchEvent, DispatchRequest, dispatch};
use amber_tools::gate::Gate;
use amber_tools::{SessionTools, ToolLimits, ToolRegistry};
use compact::{CompactEnv, CompactionGate, compact_context};
use guards::{Guards, Verdict};
use metered::{Metered, Refusal, RequestError, RequestMeta, Reservation};
use output_schema::OutputSchema;

/// How the loop reports to the session that runs it.
pub(crate) trait TurnHost: Send + Sync {
    /// Publishes an event of the running turn.
    fn emit(&self, kind: EventKind);
    /// The session's mode right now (it may change mid-turn).
    fn mode(&self) -> Mode;
    /// Adds one LLM call's usage (a request to `model`) to the session total and returns
    /// the new total.
    fn add_usage(&self, usage: &Usage, model: &str) -> Usage;
    /// The context changed; readers may refresh their snapshot.
    fn context_changed(&self, context: &Context);
    /// Policy and approvals for tool calls.
    fn gate(&self) -> &dyn Gate;
    /// What the `user_prompt` hooks added to this turn's model input: restated in the tail
    /// of every request of the turn, never pushed into the context. None by default.
    fn extra_context(&self) -> Option<&str> {
        None
    }
    /// A batch about to run has a call that may change files: the turn's checkpoint is
    /// taken now if it was not yet. Nothing by default (sub-agents: their
    /// parent's `task` call already took it).
    fn before_changes(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
    /// That batch is done: what changed since `before_changes` was the turn's tools'. A
    /// change outside these windows was made by someone else during the turn, and a rewind
    /// leaves it alone. Nothing by default.
    fn after_changes(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
    /// The price of the loop's model, when known: each call's usage then carries its cost.
    /// None by default.
    fn price(&self) -> Option<amber_llm::Price> {
        None
    }
    /// Why no further model request may be made (the session's budget is spent), if so.
    /// Asked before each round, so a spent budget starts nothing (compaction included).
    /// Never by default.
    fn budget_exceeded(&self) -> Option<ledger::Spent> {
        None
    }
    /// The session's goal, while one is to be met: a turn asks the model whether it is met
    /// before it ends (`goal.rs`). None by default.
    fn goal(&self) -> Option<String> {
        None
    }
    /// The model answered the goal question: `met`, and its summary or what remains.
    fn goal_checked(&self, _met: bool, _note: &str) {}
    /// Results that reached the session since the last round (background sub-agents'),
    /// taken: the loop pushes them before its next request (`delivery.rs`). None by
    /// default.
    fn deliveries(&self) -> Vec<delivery::Delivery> {
        Vec::new()
    }
    /// Reserves the session's budget for one request expected to cost `estimate`, waiting
    /// while requests in flight hold what is left; refused once the budget is spent.
    /// Every request is reserved (`metered.rs`). Unmetered by default.
    fn reserve<'a>(
        &'a self,
        _request: RequestMeta<'a>,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Reservation<'a>, Refusal>> {
        Box::pin(std::future::ready(Ok(Reservation::unmetered())))
    }
}

/// The error code (and `error` event) of a turn stopped by its session's budget.
pub(crate) const BUDGET_EXCEEDED: &str = "budget_exceeded";
/// The error code of a turn whose environment went away during a tool call (the same code
/// a turn cut short by a daemon crash ends with).
pub(crate) const INTERRUPTED: &str = "interrupted";

/// Everything one turn needs besides the context.
pub(crate) struct TurnEnv<'a> {
    /// The session's id: the provider's prompt-cache key.
    pub session_id: &'a str,
    /// The client, or why there is none (no endpoint configured).
    pub llm: Result<&'a LlmClient, &'a str>,
    pub model: &'a str,
    pub tools: &'a ToolRegistry,
    /// The session's tools taken again, for a turn whose `tool_search` loaded tools (a
    /// lazy server it started brings new ones); `None`: `tools` for the whole turn.
    pub refresh_tools: Option<&'a (dyn Fn() -> ToolRegistry + Send + Sync)>,
    pub session_tools: &'a Arc<SessionTools>,
    /// The head of every request (`prompt::PromptHead::head` of the context's system
    /// prompt): the same bytes for the whole turn.
    pub head: &'a str,
    pub workspace: &'a Path,
    pub limits: &'a ToolLimits,
    /// Model requests of the turn at most (the session's cap, or the prompt's
    /// `maxIterations`, which replaces it).
    pub max_iterations: u32,
    /// The prompt's output schema: the final answer must be valid against it.
    pub output_schema: Option<&'a OutputSchema>,
    pub confirm_finish: bool,
    /// The cap on the confirm exchange's reply (`[agent] confirm_max_tokens`; 0: none).
    pub confirm_max_tokens: u32,
    pub compaction: &'a CompactionSettings,
    /// Where skills extracted by compaction are saved.
    pub skills_dir: Option<&'a Path>,
    pub cancel: &'a CancellationToken,
    pub host: &'a dyn TurnHost,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TurnOutcome {
    pub stop: StopReason,
    pub error: Option<ErrorInfo>,
    pub usage: Usage,
    /// The final answer parsed and valid against the prompt's output schema, if it had one.
    pub output: Option<serde_json::Value>,
    /// The part of `usage` the confirm exchange spent, when the turn sent one.
    pub confirm_usage: Option<Usage>,
    /// The text of the last reply shown: the final answer when the turn ended `end_turn`.
    pub text: String,
}

/// Runs one prompt to completion. The caller has already ensured the system prompt.
pub(crate) async fn run_turn(
    context: &mut Context,
    prompt: &str,
    env: &TurnEnv<'_>,
) -> TurnOutcome {
    let mut turn = Turn {
        env,
        usage: Usage::default(),
        guards: Guards::new(),
        items: 0,
        confirm_at: None,
        confirm_usage: None,
        steers: Vec::new(),
        rounds: 0,
        final_text: String::new(),
        output_instruction: env.output_schema.map(OutputSchema::instruction),
        tools: env.tools.clone(),
    };
    context.push(Message::user(prompt));
    env.host.context_changed(context);
    let (mut stop, mut error) = turn.run(context, env.max_iterations).await;
    let mut output = None;
    if let (Some(schema), StopReason::EndTurn) = (env.output_schema, stop) {
        (stop, error, output) = turn.final_output(context, schema).await;
    }
    // Not by text alone: a user may well type the confirm question as a prompt.
    let unanswered = turn.confirm_at.is_some_and(|at| at + 1 == context.len())
        && context.last().is_some_and(|m| {
            m.role == Role::User
                && (m.content == prompt::CONFIRM_PROMPT
                    || m.content.starts_with(goal::QUESTION_START))
        });
    if unanswered {
        // An unanswered confirm prompt (error, cancel, iteration cap) must not linger.
        context.pop();
        env.host.context_changed(context);
    }
    TurnOutcome {
        stop,
        error,
        usage: turn.usage,
        output,
        confirm_usage: turn.confirm_usage,
        text: turn.final_text,
    }
}

/// One running turn; `output_schema.rs` adds its final-answer check.
struct Turn<'e, 'a> {
    env: &'e TurnEnv<'a>,
    usage: Usage,
    guards: Guards,
    items: u64,
    /// Where the confirm question was pushed, while it awaits an answer that calls tools.
    confirm_at: Option<usize>,
    /// What the confirm exchange's requests spent, once one was sent.
    confirm_usage: Option<Usage>,
    /// This turn's steers, restated in the tail of every later request.
    steers: Vec<String>,
    /// Model requests made so far.
    rounds: u32,
    /// The text of the last reply shown to the user: the final answer once the turn ends.
    final_text: String,
    /// The output schema as an instruction, for providers without structured output.
    output_instruction: Option<String>,
    /// The turn's tools: `env.tools`, taken again (`env.refresh_tools`) when `tool_search`
    /// loaded tools, so a server it started is callable in the same turn.
    tools: ToolRegistry,
}

/// Whether the model's reply is streamed to clients or is the silent confirm exchange.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Visibility {
    Streamed,
    Silent,
}

/// How a turn ended: the stop reason and, when it is `error`, what went wrong.
type TurnEnd = (StopReason, Option<ErrorInfo>);

/// What a step of the loop decided: go on, or end the turn.
type Step = ControlFlow<TurnEnd>;

/// What the loop carries from one model request to the next.
#[derive(Default)]
struct LoopState {
    compaction: CompactionGate,
    /// A context-length rejection compacts and retries once per turn.
    overflow_retried: bool,
    /// The confirm question is out: the next reply is the silent confirm exchange.
    confirming: bool,
    /// The question out is the goal's, not the confirm question.
    goal_question: bool,
    /// The capped confirm reply was cut short (the model had more to say than DONE): it
    /// is asked again without the cap.
    confirm_uncapped: bool,
    /// The previous round's calls, for dispatch's duplicate check.
    previous_calls: Vec<ToolCall>,
}

impl Turn<'_, '_> {
    /// The loop: at most `budget` rounds of one model request each.
    async fn run(&mut self, context: &mut Context, budget: u32) -> TurnEnd {
        let env = self.env;
        let llm = match env.llm {
            Ok(llm) => llm,
            Err(hint) => return self.fail("not_configured", hint.to_owned(), false),
        };
        let loaded = &env.session_tools.loaded_tools;
        let mut generation = loaded.generation();
        let mut specs = offered_tool_specs(&self.tools, loaded);
        let metered = Metered::new(llm, env.host);
        let mut state = LoopState::default();
        for _ in 0..budget {
            // `tool_search` loaded tools: offered from this request on.
            if loaded.generation() != generation {
                generation = loaded.generation();
                if let Some(refresh) = env.refresh_tools {
                    self.tools = refresh();
                }
                specs = offered_tool_specs(&self.tools, loaded);
            }
            let compact_env = CompactEnv {
                llm: &metered,
                model: env.model,
                tools: &specs,
                head: env.head,
                settings: env.compaction,
                skills_dir: env.skills_dir,
                cancel: env.cancel,
                host: env.host,
            };
            self.rounds += 1;
            let round = self.round(context, &compact_env, &mut state).await;
            if let ControlFlow::Break(end) = round {
                return end;
            }
        }
        (StopReason::MaxIterations, None)
    }

    /// One round: the compaction gate, one model request, then what its reply asks for.
    /// `compact_env` holds the turn's client and tool schemas, which every request shares.
    async fn round(
        &mut self,
        context: &mut Context,
        compact_env: &CompactEnv<'_>,
        state: &mut LoopState,
    ) -> Step {
        let env = self.env;
        if env.cancel.is_cancelled() {
            return ControlFlow::Break((StopReason::Cancelled, None));
        }
        // Never between the confirm question and its answer: the exchange is popped whole.
        if !state.confirming {
            delivery::push_all(context, env.host.deliveries(), env.host);
        }
        // Before the round, compaction's included: a spent budget starts nothing more.
        // (Each request also reserves its share as it goes out: `metered.rs`.)
        if let Some(spent) = env.host.budget_exceeded() {
            return ControlFlow::Break(self.budget_stop(spent));
        }
        let (snapshot, estimated) = self
            .compaction_gate(context, compact_env, &mut state.compaction)
            .await?;
        let visibility = if state.confirming {
            Visibility::Silent
        } else {
            Visibility::Streamed
        };
        // The tail: the todo list, the mode right now, this turn's steers.
        let todos = env.session_tools.todos();
        // The output schema: `response_format` where the provider takes it (not on the
        // confirm exchange, whose answer is DONE), else an instruction in the tail.
        let structured = compact_env.llm.structured_output();
        let response_format = env
            .output_schema
            .filter(|_| structured && visibility == Visibility::Streamed)
            .map(OutputSchema::response_format);
        let tail = prompt::Tail {
            todos: &todos,
            mode: env.host.mode(),
            steers: &self.steers,
            output_instruction: self.output_instruction.as_deref().filter(|_| !structured),
            hook_context: env.host.extra_context(),
        };
        // The confirm question's answer is DONE, or tool calls that a truncated reply
        // would lose: those are asked for again without the cap.
        let capped = visibility == Visibility::Silent
            && !state.confirm_uncapped
            && env.confirm_max_tokens > 0;
        let request = ChatRequest {
            model: env.model.to_owned(),
            messages: prompt::assemble(snapshot, env.head, &tail),
            tools: compact_env.tools.to_vec(),
            response_format,
            cache_key: Some(env.session_id.to_owned()),
            max_tokens: capped.then_some(env.confirm_max_tokens),
        };
        let item_id = self.next_item();
        let reply = match self
            .call_llm(compact_env.llm, &request, &item_id, visibility)
            .await
        {
            Ok(reply) => reply,
            Err(err) => return self.request_failed(err, context, compact_env, state).await,
        };
        if let Some(usage) = &reply.usage {
            state.compaction.observed(usage.prompt_tokens, estimated);
        }
        if capped && truncated_past_done(&reply) {
            state.confirm_uncapped = true;
            return ControlFlow::Continue(());
        }
        if reply.tool_calls.is_empty() {
            self.text_reply(context, reply, &item_id, state)
        } else {
            self.tool_round(context, reply, &item_id, visibility, state)
                .await
        }
    }

    /// The compression gate, before every call (SEED.md): over the threshold of the
    /// window, compact first. Gives the context to send and its estimated tokens.
    async fn compaction_gate(
        &mut self,
        context: &mut Context,
        compact_env: &CompactEnv<'_>,
        gate: &mut CompactionGate,
    ) -> ControlFlow<TurnEnd, (Vec<Message>, u64)> {
        let env = self.env;
        let mut snapshot = context.snapshot();
        let mut estimated = estimate_tokens(&snapshot, compact_env.tools);
        if gate.should_compact(estimated, env.compaction) {
            match compact_context(context, compact_env, &mut self.usage).await {
                Ok((_, after)) => {
                    snapshot = context.snapshot();
                    estimated = after;
                }
                // The turn's own request would be refused too: stop here, said once.
                Err(CompactionError::BudgetExceeded(message)) => {
                    return ControlFlow::Break(self.budget_stop(message));
                }
                Err(_) => {}
            }
            gate.attempted(estimated, env.compaction);
            if env.cancel.is_cancelled() {
                return ControlFlow::Break((StopReason::Cancelled, None));
            }
        }
        ControlFlow::Continue((snapshot, estimated))
    }

    /// A request that failed (nothing was pushed): a cancel ends the turn; the first
    /// context-length rejection compacts and retries in the next round; anything else
    /// fails the turn.
    async fn request_failed(
        &mut self,
        err: RequestError,
        context: &mut Context,
        compact_env: &CompactEnv<'_>,
        state: &mut LoopState,
    ) -> Step {
        let err = match err {
            RequestError::BudgetExceeded(message) => {
                return ControlFlow::Break(self.budget_stop(message));
            }
            RequestError::Api(err) => err,
        };
        match err {
            ApiError::Cancelled => ControlFlow::Break((StopReason::Cancelled, None)),
            ApiError::ContextLengthExceeded { .. } if !state.overflow_retried => {
                state.overflow_retried = true;
                let compacted = compact_context(context, compact_env, &mut self.usage).await;
                match compacted {
                    Ok((_, after)) => {
                        state.compaction.attempted(after, self.env.compaction);
                        return ControlFlow::Continue(());
                    }
                    Err(CompactionError::BudgetExceeded(message)) => {
                        return ControlFlow::Break(self.budget_stop(message));
                    }
                    Err(_) => {}
                }
                let message = "the request exceeds the model's context window and \
                               compaction failed";
                ControlFlow::Break(self.fail("context_length_exceeded", message.to_owned(), false))
            }
            err => {
                // Which URL, model and key variable, and what to check: the error alone does
                // not say what was asked of whom.
                let explained = self.env.llm.ok().and_then(|llm| {
                    let mut settings = llm.settings().clone();
                    settings.model = self.env.model.to_owned();
                    err.explain(&settings)
                });
                let message = match explained {
                    Some(why) => format!("{err} ({why})"),
                    None => err.to_string(),
                };
                ControlFlow::Break(self.fail(err.code(), message, err.is_retryable()))
            }
        }
    }

    /// A reply without tool calls: the end of the confirm exchange, or a reply shown to
    /// the user, then the guards, then the end of the turn or the confirm question.
    fn text_reply(
        &mut self,
        context: &mut Context,
        reply: ChatResponse,
        item_id: &str,
        state: &mut LoopState,
    ) -> Step {
        let env = self.env;
        if state.confirming {
            // Answered: the silent exchange leaves no trace in the context. Only the
            // question was pushed; the answer never was.
            context.pop();
            env.host.context_changed(context);
            if state.goal_question {
                state.confirming = false;
                state.goal_question = false;
                self.confirm_at = None;
                let (met, note) = goal::parse(&reply.text);
                env.host.goal_checked(met, &note);
                if met {
                    return ControlFlow::Break((StopReason::EndTurn, None));
                }
                // Not met: the turn goes on, with what remains in the tail of each request.
                let text =
                    format!("The session's goal is not met yet: {note}. Keep working on it.");
                context.push(Message::user(format!("[amber] {text}")));
                self.steers.push(text);
                env.host.context_changed(context);
                return ControlFlow::Continue(());
            }
            return ControlFlow::Break((StopReason::EndTurn, None));
        }
        // The finish signal is amber's, not the user's: the reply is kept without it.
        // A refusal says its text instead of an answer: shown and kept as the reply.
        let answer = match &reply.refusal {
            Some(refusal) if reply.text.trim().is_empty() => refusal.as_str(),
            _ => reply.text.as_str(),
        };
        let signalled = finish_signal::strip(answer);
        let text = signalled.unwrap_or(answer);
        context.push(
            Message::assistant(text.to_owned(), Vec::new())
                .with_reasoning_items(reply.reasoning_items.clone()),
        );
        text.clone_into(&mut self.final_text);
        self.emit_message(item_id, text);
        env.host.context_changed(context);
        if let Some(end) = cut_or_refused(&reply) {
            return ControlFlow::Break(end);
        }
        match self.guards.on_reply(text, &[]) {
            Verdict::Stop(reason) => return ControlFlow::Break((reason, None)),
            Verdict::Steer { reason, text } => {
                // Steered: the model answers the note instead of the confirm question.
                self.steer(context, reason, text);
                return ControlFlow::Continue(());
            }
            Verdict::Continue => {}
        }
        // A goal to be met: its question takes the confirm question's place.
        if let Some(goal) = env.host.goal() {
            self.confirm_at = Some(context.len());
            context.push_kind(Message::user(goal::question(&goal)), PushKind::Confirm);
            state.confirming = true;
            state.goal_question = true;
            state.confirm_uncapped = false;
            return ControlFlow::Continue(());
        }
        if !env.confirm_finish || signalled.is_some() {
            return ControlFlow::Break((StopReason::EndTurn, None));
        }
        self.confirm_at = Some(context.len());
        context.push_kind(Message::user(prompt::CONFIRM_PROMPT), PushKind::Confirm);
        state.confirming = true;
        state.confirm_uncapped = false;
        ControlFlow::Continue(())
    }

    /// A reply with tool calls: it is recorded (a confirm exchange that continues stays
    /// in the context), its calls run, then the stop checks.
    async fn tool_round(
        &mut self,
        context: &mut Context,
        reply: ChatResponse,
        item_id: &str,
        visibility: Visibility,
        state: &mut LoopState,
    ) -> Step {
        let env = self.env;
        state.confirming = false;
        state.goal_question = false;
        self.confirm_at = None;
        let calls = reply.tool_calls;
        context.push(
            Message::assistant(reply.text.clone(), calls.clone())
                .with_reasoning_items(reply.reasoning_items),
        );
        if visibility == Visibility::Streamed {
            self.emit_message(item_id, &reply.text);
        }
        env.host.context_changed(context);
        let verdict = self.guards.on_reply(&reply.text, &calls);

        let statuses = self.run_tools(context, &calls, &state.previous_calls).await;
        env.host.context_changed(context);
        state.previous_calls = calls;
        if env.cancel.is_cancelled() {
            return ControlFlow::Break((StopReason::Cancelled, None));
        }
        // The executor went away mid-call: what it did is unknown, so the turn stops here
        // rather than the model going on from a guess.
        if let Some(reason) = env.session_tools.host().and_then(|h| h.take_interruption()) {
            return ControlFlow::Break(self.fail(INTERRUPTED, reason, true));
        }
        self.stop_checks(context, verdict, &statuses)
    }

    /// After a tool round: the reply's guard verdict first, then the results'.
    fn stop_checks(
        &mut self,
        context: &mut Context,
        reply_verdict: Verdict,
        statuses: &[ToolStatus],
    ) -> Step {
        self.follow(context, reply_verdict)?;
        let results_verdict = self.guards.on_results(statuses);
        self.follow(context, results_verdict)
    }

    /// A guard's verdict: stop the turn, or steer (a note to the model) and go on.
    fn follow(&mut self, context: &mut Context, verdict: Verdict) -> Step {
        match verdict {
            Verdict::Stop(reason) => ControlFlow::Break((reason, None)),
            Verdict::Steer { reason, text } => {
                self.steer(context, reason, text);
                ControlFlow::Continue(())
            }
            Verdict::Continue => ControlFlow::Continue(()),
        }
    }

    async fn call_llm(
        &mut self,
        llm: &Metered<'_>,
        request: &ChatRequest,
        item_id: &str,
        visibility: Visibility,
    ) -> Result<ChatResponse, RequestError> {
        let host = self.env.host;
        let mut hold = finish_signal::Hold::default();
        let mut on_event = |event: StreamEvent| match event {
            StreamEvent::TextDelta(delta) if visibility == Visibility::Streamed => {
                let shown = hold.pass(delta);
                if !shown.is_empty() {
                    host.emit(EventKind::MessageDelta {
                        item_id: item_id.to_owned(),
                        delta: shown,
                    });
                }
            }
            StreamEvent::ReasoningDelta(delta) if visibility == Visibility::Streamed => {
                host.emit(EventKind::ReasoningDelta {
                    item_id: item_id.to_owned(),
                    delta,
                });
            }
            // Live, so a client can show the wait (up to `retry_max`) instead of silence.
            event @ StreamEvent::Retrying { .. } => {
                if let Some(retrying) = retrying_event(event) {
                    host.emit(retrying);
                }
            }
            _ => {}
        };
        let purpose = (visibility == Visibility::Silent).then_some(UsagePurpose::Confirm);
        let reply = llm
            .request(request, purpose, self.env.cancel, &mut on_event)
            .await?;
        let held = hold.release(reply.tool_calls.is_empty());
        if !held.is_empty() {
            host.emit(EventKind::MessageDelta {
                item_id: item_id.to_owned(),
                delta: held,
            });
        }
        if let Some(usage) = &reply.usage {
            self.usage.add(usage);
            if purpose.is_some() {
                self.confirm_usage.get_or_insert_default().add(usage);
            }
        }
        Ok(reply)
    }

    /// Dispatches one batch of calls, forwards its events live, and pushes exactly one
    /// tool message per call in the original order.
    async fn run_tools(
        &mut self,
        context: &mut Context,
        calls: &[ToolCall],
        previous_calls: &[ToolCall],
    ) -> Vec<ToolStatus> {
        let env = self.env;
        // Events are published as dispatch reports them, not through a queue read later:
        // a call's `tool_call_started` must precede its approval request and whatever its
        // tool publishes (a `task` call's `subagent_started`).
        let host = env.host;
        let sink = move |event: DispatchEvent| host.emit(dispatch_event_kind(event));
        let tools = &self.tools;
        let request = DispatchRequest {
            registry: tools,
            calls,
            previous_calls,
            gate: env.host.gate(),
            session: env.session_tools,
            workspace: env.workspace,
            cancel: env.cancel,
            limits: env.limits,
            events: &sink,
        };
        let changes = may_change_files(tools, calls);
        if changes {
            env.host.before_changes().await;
        }
        let results = dispatch(request).await;
        if changes {
            env.host.after_changes().await;
        }
        let mut statuses = Vec::with_capacity(results.len());
        for result in results {
            statuses.push(result.status);
            context.push(Message::tool(result.call_id, result.envelope));
        }
        statuses
    }

    fn emit_message(&self, item_id: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        self.env.host.emit(EventKind::MessageCompleted {
            item_id: item_id.to_owned(),
            role: Role::Assistant,
            text: text.to_owned(),
        });
    }

    fn steer(&mut self, context: &mut Context, reason: amber_proto::SteerReason, text: String) {
        context.push(Message::user(format!("[amber] {text}")));
        self.steers.push(text.clone());
        self.env.host.context_changed(context);
        self.env.host.emit(EventKind::Steer { reason, text });
    }

    /// The session's budget is spent: an `error` event naming it, and the turn (or the
    /// sub-agent) ends `budget_exceeded`.
    fn budget_stop(&self, spent: ledger::Spent) -> TurnEnd {
        let (_, error) = self.fail(BUDGET_EXCEEDED, spent.message, false);
        let error = error.map(|error| ErrorInfo {
            limit: spent.limit,
            ..error
        });
        (StopReason::BudgetExceeded, error)
    }

    fn fail(&self, code: &str, message: String, retryable: bool) -> TurnEnd {
        self.env.host.emit(EventKind::Error {
            code: code.to_owned(),
            message: message.clone(),
            retryable,
        });
        (StopReason::Error, Some(ErrorInfo::new(code, message)))
    }

    fn next_item(&mut self) -> String {
        self.items += 1;
        format!("msg_{}_{}", short_id(), self.items)
    }
}

/// Accounts one LLM call's usage, with its cost when the model has a price: the session
/// total and a durable `usage` event. Every request goes through here (`metered.rs`);
/// the priced usage is returned for the caller's turn total.
pub(crate) fn record_usage(
    host: &dyn TurnHost,
    mut usage: Usage,
    purpose: Option<UsagePurpose>,
    model: &str,
) -> Usage {
    // Priced here, once, so that every sum of it (turn, sub-agents, session) adds costs.
    if let Some(price) = host.price() {
        usage.cost_usd = Some(price.cost(&usage));
    }
    let total = host.add_usage(&usage, model);
    host.emit(EventKind::usage_of(usage, total, purpose));
    usage
}

/// A reply the model refused or its output limit cut: the turn ends on it, typed, with
/// what the model said (the refusal text is the reply shown, and the error's message).
fn cut_or_refused(reply: &ChatResponse) -> Option<TurnEnd> {
    let finish = reply.finish_reason.as_deref();
    if reply.refusal.is_some() || matches!(finish, Some("refusal" | "content_filter")) {
        let said = reply
            .refusal
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .or(Some(reply.text.as_str()).filter(|t| !t.trim().is_empty()));
        let message = said.map_or_else(
            || "the model declined to answer".to_owned(),
            |text| text.trim().to_owned(),
        );
        return Some((
            StopReason::Refusal,
            Some(ErrorInfo::new("refusal", message)),
        ));
    }
    (finish == Some("length")).then(|| {
        let message = "the reply was cut at the model's output limit (max_tokens): ask it to \
                       go on, or raise the limit";
        (
            StopReason::MaxTokens,
            Some(ErrorInfo::new("max_tokens", message.to_owned())),
        )
    })
}

/// A capped confirm reply the cap cut short, unless it had already said DONE: the model
/// meant to go on (tool calls whose arguments were cut, or more to say).
fn truncated_past_done(reply: &ChatResponse) -> bool {
    let done = reply.tool_calls.is_empty() && finish_signal::begins_with_signal(&reply.text);
    reply.finish_reason.as_deref() == Some("length") && !done
}

/// The live `retrying` event for a retry wait (logged with the whole error); `None` for
/// any other stream event. Shared by the loop's calls and compaction's.
pub(crate) fn retrying_event(event: StreamEvent) -> Option<EventKind> {
    let StreamEvent::Retrying {
        attempt,
        max_attempts,
        delay,
        reason,
        error,
    } = event
    else {
        return None;
    };
    let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    tracing::warn!(attempt, delay_ms, %error, "retrying LLM request");
    Some(EventKind::Retrying {
        attempt,
        max_attempts,
        delay_ms,
        reason,
    })
}

/// The session event for a dispatch event.
pub(crate) fn dispatch_event_kind(event: DispatchEvent) -> EventKind {
    match event {
        DispatchEvent::Started {
            call_id,
            name,
            arguments,
        } => EventKind::ToolCallStarted {
            item_id: format!("tool_{call_id}"),
            call_id,
            name,
            arguments,
        },
        DispatchEvent::Output(chunk) => EventKind::ToolOutputDelta {
            call_id: chunk.call_id,
            chunk: chunk.chunk,
        },
        DispatchEvent::Completed {
            call_id,
            status,
            output,
            duration_ms,
            diff,
        } => EventKind::ToolCallCompleted {
            call_id,
            status,
            output,
            duration_ms,
            diff,
        },
    }
}

/// Whether any of `calls` may change files (unknown tools and unparsable arguments do
/// not run, so they change nothing).
fn may_change_files(tools: &ToolRegistry, calls: &[ToolCall]) -> bool {
    calls.iter().any(|call| {
        tools.get(&call.name).is_some_and(|tool| {
            let args = serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
            tool.may_change_files(&args)
        })
    })
}

/// The tool schemas sent to the model.
pub(crate) fn tool_specs(tools: &ToolRegistry) -> Vec<ToolSpec> {
    to_specs(tools.specs())
}

/// The tool schemas a turn's request offers: deferred tools only once loaded, when the
/// turn defers (it then has `tool_search`).
fn offered_tool_specs(
    tools: &ToolRegistry,
    loaded: &amber_tools::deferred::LoadedTools,
) -> Vec<ToolSpec> {
    let deferring = tools.get(tool_search::NAME).is_some();
    to_specs(amber_tools::deferred::offered_specs(
        tools, deferring, loaded,
    ))
}

fn to_specs(specs: Vec<(String, String, serde_json::Value)>) -> Vec<ToolSpec> {
    specs
        .into_iter()
        .map(|(name, description, parameters)| ToolSpec {
            name,
            description,
            parameters,
        })
        .collect()
}

/// Eight hex digits, enough to keep item ids of different turns apart.
fn short_id() -> String {
    format!("{:08x}", fastrand::u32(..))
}
