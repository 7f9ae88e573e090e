//! Protocol events → state. Events arrive decoded ([`Incoming`]) and are matched on
//! `amber_proto::EventKind` with one arm per type; an event this build cannot decode becomes a
//! dimmed transcript line. The replay of durable events (subscribe with `afterSeq`) is the
//! transcript's history, `synced` hands over the replies streaming right now (`inProgress`),
//! and live events continue from there; durable events at or below the last `seq` seen are
//! dropped, so a resubscription after a lag never duplicates a cell.
//!
//! Here: the dispatch, turns, errors, compaction and todos; [`stream`] has the assistant's
//! streams and `synced`, [`calls`] tool calls, approvals and sub-agents.

mod calls;
mod stream;

use amber_proto::{ErrorInfo, Event, EventKind, SteerReason, StopReason, Todo};

use super::incoming::{Incoming, UnknownEvent};
use super::{Action, App, NoticeKind};
use crate::transcript::{Cell, InfoKind};

impl App {
    /// Applies one event of the subscription.
    pub fn apply_event(&mut self, event: impl Into<Incoming>) {
        let event = event.into();
        if self.already_applied(event.seq()) {
            return;
        }
        if !event.is_retrying() {
            // The wait it announced is over: this is what came after it.
            self.clear_notice(NoticeKind::Retrying);
        }
        match event {
            Incoming::Known(event) => self.apply_known(event),
            Incoming::Unknown(unknown) => self.unknown_event(unknown),
        }
    }

    /// A durable event at or below the last `seq` applied was applied already (a replay
    /// after a resubscription); a newer one raises the mark.
    fn already_applied(&mut self, seq: Option<u64>) -> bool {
        match seq {
            Some(seq) if seq <= self.last_seq => true,
            Some(seq) => {
                self.last_seq = seq;
                false
            }
            None => false,
        }
    }

    /// One arm per event type, and no catch-all: a new event in `amber_proto` does not
    /// compile here until the TUI decides what it shows.
    #[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
    fn apply_known(&mut self, event: Event) {
        let Event {
            turn_id,
            agent_id,
            time,
            kind,
            ..
        } = event;
        match kind {
            // Counted in the status (prompts of every client wait behind the running turn);
            // this client's prompts are on screen as queued from the moment they are sent
            // (`send_prompt`), and every prompt appears with its `turn_started`.
            EventKind::PromptQueued { .. } => self.live.prompt_queued(turn_id.as_deref()),
            EventKind::TurnStarted { prompt } => {
                self.live.turn_started(turn_id.as_deref(), &time);
                self.turn_started(turn_id.unwrap_or_default(), prompt)
            }
            EventKind::MessageDelta { item_id, delta } => {
                self.live.streamed(&delta);
                self.message_delta(&item_id, &delta)
            }
            EventKind::ReasoningDelta { item_id, delta } => {
                self.live.streamed(&delta);
                self.reasoning_delta(&item_id, &delta)
            }
            EventKind::MessageCompleted { item_id, text, .. } => {
                self.message_completed(item_id, text)
            }
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
                ..
            } => self.tool_call_started(call_id, name, arguments, agent_id),
            EventKind::ToolOutputDelta { call_id, chunk } => {
                self.tool_output_delta(&call_id, &chunk)
            }
            EventKind::Retrying {
                delay_ms, reason, ..
            } => self.show_retry(delay_ms, &reason),
            EventKind::ToolCallCompleted {
                call_id,
                status,
                output,
                duration_ms,
                diff,
            } => self.tool_call_completed(&call_id, status, output, duration_ms, diff),
            EventKind::ApprovalRequested(approval) => {
                self.alert_live(
                    format!("approval:{}", approval.request_id),
                    format!(
                        "approval needed for {} ({})",
                        approval.tool, approval.reason
                    ),
                );
                self.approval_requested(approval)
            }
            EventKind::ApprovalResolved {
                request_id,
                decision,
                by,
            } => self.approval_resolved(&request_id, decision, by),
            EventKind::Steer { reason, text } => {
                self.transcript.push(Cell::Steer {
                    reason: steer_words(reason).to_owned(),
                    text,
                });
            }
            EventKind::CompactionStarted { tokens_before } => {
                self.compaction_started(tokens_before)
            }
            EventKind::CompactionCompleted {
                tokens_before,
                tokens_after,
            } => self.compaction_ended(tokens_before, Some(tokens_after), None),
            EventKind::CompactionFailed {
                tokens_before,
                error,
            } => self.compaction_ended(tokens_before, None, Some(error)),
            EventKind::Usage { call, total, .. } => {
                self.live.usage(&call, &total);
                self.refresh_status_and_panel()
            }
            EventKind::McpStatus(_) => self.refresh_status_and_panel(),
            EventKind::TodoUpdated { todos } => self.todos_updated(todos),
            EventKind::SubagentStarted { agent_id, task } => {
                self.subagent(agent_id, task, None, false)
            }
            EventKind::SubagentCompleted {
                agent_id,
                task,
                result,
                ..
            } => self.subagent(agent_id, task, result, true),
            EventKind::TurnCompleted {
                stop_reason, error, ..
            } => {
                self.alert_live(
                    format!("turn:{}", turn_id.as_deref().unwrap_or_default()),
                    format!("turn ended ({})", stop_reason.as_str().replace('_', " ")),
                );
                self.live.turn_completed(turn_id.as_deref());
                self.turn_completed(stop_reason, error)
            }
            EventKind::Error { code, message, .. } => self.error_event(code, message),
            EventKind::Rewound {
                restored,
                conflicts,
                removed_turns,
                ..
            } => self.rewound(&restored, &conflicts, removed_turns),
            EventKind::EnvironmentConnected {
                environment,
                restored_files,
            } => {
                let (mut text, kind) = environment_line(&environment);
                if let Some(files) = restored_files {
                    text.push_str(&format!(
                        "; its workspace was empty: {files} file(s) restored from the newest checkpoint"
                    ));
                }
                self.transcript.push(Cell::Info { text, kind });
            }
            EventKind::EnvironmentLost { environment }
            | EventKind::EnvironmentResumed { environment, .. } => {
                let (text, kind) = environment_line(&environment);
                self.transcript.push(Cell::Info { text, kind });
            }
            EventKind::FleetChanged {
                environment,
                reason,
            } => {
                if let Some(fleet) = &environment.fleet {
                    // Failed, or queued again because its runner went: worth a warning.
                    let requeued = fleet.state == amber_proto::FleetState::Queued
                        && fleet.attempts > 0
                        && reason.is_some();
                    let kind = if fleet.state == amber_proto::FleetState::Failed || requeued {
                        InfoKind::Warn
                    } else {
                        InfoKind::Note
                    };
                    self.transcript.push(Cell::Info {
                        text: format!("fleet: {}", fleet.describe(reason.as_deref())),
                        kind,
                    });
                }
            }
            EventKind::FleetSetup {
                command, exit_code, ..
            } => {
                let (text, kind) = match exit_code {
                    Some(0) => (format!("setup `{command}` done"), InfoKind::Note),
                    Some(code) => (
                        format!("setup `{command}` failed (exit {code})"),
                        InfoKind::Warn,
                    ),
                    None => (format!("setup `{command}` did not finish"), InfoKind::Warn),
                };
                self.transcript.push(Cell::Info { text, kind });
            }
            EventKind::FleetPushed {
                branch,
                commit,
                changed,
                error,
            } => {
                let text = amber_proto::describe_push(
                    &branch,
                    commit.as_deref(),
                    changed,
                    error.as_deref(),
                );
                let kind = if error.is_some() {
                    InfoKind::Warn
                } else {
                    InfoKind::Note
                };
                self.transcript.push(Cell::Info { text, kind });
            }
            // Messages between sessions and the goal's course: a line each.
            EventKind::MessageSent { to, text, .. } => {
                self.transcript.push(Cell::Info {
                    text: format!("→ message to {to}: {text}"),
                    kind: InfoKind::Note,
                });
            }
            EventKind::MessageReceived { from, text, .. } => {
                let from = from.as_deref().unwrap_or("a client");
                self.transcript.push(Cell::Info {
                    text: format!("← message from {from}: {text}"),
                    kind: InfoKind::Note,
                });
            }
            EventKind::GoalSet { goal } => {
                let text = match goal {
                    Some(goal) => format!("goal: {goal}"),
                    None => "goal cleared".to_owned(),
                };
                self.transcript.push(Cell::Info {
                    text,
                    kind: InfoKind::Note,
                });
            }
            EventKind::GoalCheck { met, note } => {
                let text = if met {
                    format!("goal met: {note}")
                } else {
                    format!("goal not met yet: {note}")
                };
                self.transcript.push(Cell::Info {
                    text,
                    kind: InfoKind::Note,
                });
            }
            EventKind::SubagentQueued { task, .. } => {
                self.transcript.push(Cell::Info {
                    text: format!("sub-agent waits for a slot: {task}"),
                    kind: InfoKind::Note,
                });
            }
            EventKind::GoalMet { summary } => {
                self.transcript.push(Cell::Info {
                    text: format!("✓ goal met: {summary}"),
                    kind: InfoKind::Note,
                });
            }
            EventKind::NetworkConnection(connection) => {
                let kind = match connection.verdict {
                    amber_proto::ConnectionVerdict::Allowed => InfoKind::Note,
                    amber_proto::ConnectionVerdict::Denied
                    | amber_proto::ConnectionVerdict::Failed => InfoKind::Warn,
                };
                self.transcript.push(Cell::Info {
                    text: amber_proto::describe_connection(&connection),
                    kind,
                });
            }
            EventKind::BudgetWarning {
                scope,
                key,
                period,
                spent_usd,
                cap_usd,
            } => {
                self.transcript.push(Cell::Info {
                    text: amber_proto::describe_budget(
                        scope,
                        key.as_deref(),
                        &period,
                        spent_usd,
                        cap_usd,
                    ),
                    kind: InfoKind::Warn,
                });
            }
            EventKind::RoutineFinished {
                name,
                fire_time,
                stop_reason,
            } => {
                self.transcript.push(Cell::Info {
                    text: format!(
                        "routine {name} ({fire_time}) finished: {}",
                        stop_reason.as_str().replace('_', " ")
                    ),
                    kind: InfoKind::Note,
                });
            }
            // A hook's failure is worth a line but not the turn's error list.
            EventKind::HookFailed {
                hook_event,
                command,
                reason,
                ..
            } => {
                self.transcript.push(Cell::Error {
                    code: "hook_failed".into(),
                    message: format!("{hook_event} hook `{}`: {reason}", command.join(" ")),
                });
            }
            EventKind::Synced {
                last_seq,
                in_progress,
            } => self.synced(last_seq, in_progress),
        }
    }

    /// A live event (not the replay) the user may want to hear about when not looking: the
    /// runtime decides, knowing the focus ([`crate::notify`]).
    fn alert_live(&mut self, key: String, what: String) {
        if !self.synced {
            return;
        }
        let name = self
            .session
            .as_ref()
            .map_or_else(|| self.session_id.clone(), super::session_label);
        self.alerts.push(crate::notify::Alert {
            key,
            text: format!("{name}: {what}"),
        });
    }

    /// `rewound`: one line saying what the rewind did (the transcript keeps the history as
    /// it happened, as replay does).
    fn rewound(&mut self, restored: &[String], conflicts: &[String], removed_turns: u32) {
        let mut text = format!(
            "rewound: {removed_turns} turn(s) removed from the conversation, {} file(s) restored",
            restored.len()
        );
        if !conflicts.is_empty() {
            text.push_str(&format!(
                ", {} conflict(s) left alone: {}",
                conflicts.len(),
                conflicts.join(", ")
            ));
        }
        self.transcript.push(Cell::Info {
            text,
            kind: InfoKind::Note,
        });
        self.request(Action::RefreshStatus);
    }

    /// An event this build cannot read: one dimmed line says so (a run of the same type
    /// is counted on one line, so a newer daemon's stream of them does not flood the view).
    fn unknown_event(&mut self, unknown: UnknownEvent) {
        let last = self.transcript.len().checked_sub(1);
        let same_as_last = last.filter(|&idx| {
            matches!(
                self.transcript.get(idx).map(|slot| &slot.cell),
                Some(Cell::Unknown { type_name, .. }) if *type_name == unknown.type_name
            )
        });
        if let Some(Cell::Unknown { count, .. }) =
            same_as_last.and_then(|idx| self.transcript.cell_mut(idx))
        {
            *count += 1;
            return;
        }
        self.transcript.push(Cell::Unknown {
            type_name: unknown.type_name,
            count: 1,
        });
    }

    fn turn_started(&mut self, turn_id: String, prompt: String) {
        self.running = true;
        // The queued entry is this turn's: by id, or (the answer to `session/prompt` may come
        // after the event) the oldest entry without an id and with the same text.
        let pos = self
            .queued
            .iter()
            .position(|q| q.turn_id.as_deref() == Some(turn_id.as_str()))
            .or_else(|| {
                self.queued
                    .iter()
                    .position(|q| q.turn_id.is_none() && q.text == prompt)
            });
        if let Some(pos) = pos {
            self.queued.remove(pos);
        }
        self.started_turns.insert(turn_id);
        self.turn_errors.clear();
        if !self.synced && !self.history_seeded {
            // Replayed history: Up recalls this session's earlier prompts after a re-attach.
            self.input.remember(&prompt);
        }
        self.transcript.push(Cell::User { text: prompt });
        self.request(Action::RefreshStatus);
    }

    fn turn_completed(&mut self, stop_reason: StopReason, error: Option<ErrorInfo>) {
        self.running = false;
        self.finish_reasoning();
        self.clear_notice(NoticeKind::Cancelling);
        if stop_reason == StopReason::Refusal {
            // What the model said is its reply, already in the transcript: name the stop only.
            self.transcript.push(Cell::Info {
                text: "turn ended: the model refused to answer".to_owned(),
                kind: InfoKind::Warn,
            });
        } else if stop_reason != StopReason::EndTurn {
            let mut text = format!("turn ended: {}", stop_reason.as_str().replace('_', " "));
            if let Some(ErrorInfo { code, message, .. }) = error {
                // An `error` event of this turn already shows it as a cell: say it once.
                let shown = self
                    .turn_errors
                    .iter()
                    .any(|(c, m)| *c == code && *m == message);
                if !shown {
                    text.push_str(&format!(" — {code}: {message}"));
                }
            }
            self.transcript.push(Cell::Info {
                text,
                kind: InfoKind::Warn,
            });
        }
        self.refresh_status_and_panel();
    }

    fn error_event(&mut self, code: String, message: String) {
        self.turn_errors.push((code.clone(), message.clone()));
        self.transcript.push(Cell::Error { code, message });
    }

    fn compaction_started(&mut self, tokens_before: u64) {
        let idx = self.transcript.push(Cell::Compaction {
            before: tokens_before,
            after: None,
            error: None,
        });
        self.transcript.compaction = Some(idx);
    }

    /// `compaction_completed` (`after`) or `compaction_failed` (`error`): the outcome takes
    /// the place of the cell its start made.
    fn compaction_ended(&mut self, before: u64, after: Option<u64>, error: Option<String>) {
        let cell = Cell::Compaction {
            before,
            after,
            error,
        };
        match self
            .transcript
            .compaction
            .take()
            .and_then(|i| self.transcript.cell_mut(i))
        {
            Some(slot) => *slot = cell,
            None => {
                self.transcript.push(cell);
            }
        }
        self.request(Action::RefreshStatus);
    }

    fn todos_updated(&mut self, todos: Vec<Todo>) {
        self.todos = todos;
        self.refresh_status_and_panel();
    }

    /// The status segments and the open panel show what the event changed.
    fn refresh_status_and_panel(&mut self) {
        self.request(Action::RefreshStatus);
        self.refresh_panel();
    }
}

/// The transcript's words for why the daemon steered (the wire name, spaced).
fn steer_words(reason: SteerReason) -> &'static str {
    match reason {
        SteerReason::RepeatedText => "repeated text",
        SteerReason::ToolFailures => "tool failures",
    }
}

/// The transcript's line for a change of the session's executor link.
fn environment_line(environment: &amber_proto::EnvironmentInfo) -> (String, InfoKind) {
    use amber_proto::EnvironmentState;
    let host = environment
        .executor
        .as_ref()
        .map(|e| format!(" on {}", e.hostname))
        .unwrap_or_default();
    let reason = environment
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    match environment.state {
        EnvironmentState::Connected => (
            format!("tools run in {}{host}", environment.spec),
            InfoKind::Note,
        ),
        EnvironmentState::Connecting => (
            format!("connecting to {}", environment.spec),
            InfoKind::Note,
        ),
        EnvironmentState::Lost => (
            format!(
                "lost the link to {}{reason}; attaching again",
                environment.spec
            ),
            InfoKind::Warn,
        ),
        EnvironmentState::Gone => (
            format!(
                "the executor of {} is gone{reason}; the next tool call starts a new one",
                environment.spec
            ),
            InfoKind::Warn,
        ),
        EnvironmentState::Queued => (
            format!("waiting for a runner of {}", environment.spec),
            InfoKind::Note,
        ),
    }
}
