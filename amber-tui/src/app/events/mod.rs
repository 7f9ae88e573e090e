//! Protocol events → state. The replay of durable events (subscribe with `afterSeq`) is the
//! transcript's history, `synced` hands over the replies streaming right now (`inProgress`),
//! and live events continue from there; durable events at or below the last `seq` seen are
//! dropped, so a resubscription after a lag never duplicates a cell.

use amber_proto::Approval;
use serde_json::Value;

use super::{Action, App, NoticeKind};
use crate::markdown::StreamingMarkdown;
use crate::transcript::{Assistant, Cell, InfoKind, ToolCell, tool};

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn streaming(text: &str) -> Cell {
    let mut md = StreamingMarkdown::new();
    md.push(text);
    Cell::Assistant(Assistant::Streaming(Box::new(md)))
}

impl App {
    /// Applies one event object as the daemon sent it.
    pub fn apply_event(&mut self, ev: &Value) {
        if let Some(seq) = ev.get("seq").and_then(Value::as_u64) {
            if seq <= self.last_seq {
                return;
            }
            self.last_seq = seq;
        }
        let ty = s(ev, "type");
        if ty != "retrying" {
            // The wait it announced is over: this is what came after it.
            self.clear_notice(NoticeKind::Retrying);
        }
        match ty {
            "retrying" => self.show_retry(u(ev, "delayMs"), s(ev, "reason")),
            "turn_started" => self.turn_started(ev),
            "message_delta" => self.message_delta(s(ev, "itemId"), s(ev, "delta")),
            "reasoning_delta" => self.reasoning_delta(s(ev, "itemId"), s(ev, "delta")),
            "message_completed" => self.message_completed(s(ev, "itemId"), s(ev, "text")),
            "tool_call_started" => {
                self.finish_reasoning();
                // `agentId` is PROTOCOL.md's name; `agent` is what older daemons send.
                let agent = ev
                    .get("agentId")
                    .or_else(|| ev.get("agent"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let call = ToolCell::new(
                    s(ev, "callId").to_owned(),
                    s(ev, "name").to_owned(),
                    ev.get("arguments").cloned().unwrap_or(Value::Null),
                    agent,
                );
                let idx = self.transcript.push(Cell::Tool(call));
                self.transcript
                    .calls
                    .insert(s(ev, "callId").to_owned(), idx);
            }
            "tool_output_delta" => {
                if let Some(&idx) = self.transcript.calls.get(s(ev, "callId"))
                    && let Some(Cell::Tool(t)) = self.transcript.cell_mut(idx)
                    && t.status.is_none()
                {
                    t.output.push_str(s(ev, "chunk"));
                }
            }
            "tool_call_completed" => {
                let mut process = false;
                if let Some(&idx) = self.transcript.calls.get(s(ev, "callId"))
                    && let Some(Cell::Tool(t)) = self.transcript.cell_mut(idx)
                {
                    t.status = Some(s(ev, "status").to_owned());
                    t.output = s(ev, "output").to_owned();
                    t.duration_ms = ev.get("durationMs").and_then(Value::as_u64);
                    process = t.name == "process";
                }
                self.hide_task_output_shown_by_subagents(s(ev, "callId"));
                if process {
                    // The processes panel and status segment change with it.
                    self.request(Action::RefreshStatus);
                    self.refresh_panel();
                }
            }
            "approval_requested" => self.approval_requested(ev),
            "approval_resolved" => {
                let id = s(ev, "requestId");
                self.approvals.retain(|a| a.request_id != id);
                if let Some(&idx) = self.transcript.requests.get(id)
                    && let Some(Cell::Approval { outcome, .. }) = self.transcript.cell_mut(idx)
                {
                    let decision = s(ev, "decision").replace('_', " ");
                    *outcome = Some(format!("{decision} ({})", s(ev, "by").replace('_', " ")));
                }
            }
            "steer" => {
                self.transcript.push(Cell::Steer {
                    reason: s(ev, "reason").replace('_', " "),
                    text: s(ev, "text").to_owned(),
                });
            }
            "compaction_started" => {
                let idx = self.transcript.push(Cell::Compaction {
                    before: u(ev, "tokensBefore"),
                    after: None,
                    error: None,
                });
                self.transcript.compaction = Some(idx);
            }
            "compaction_completed" | "compaction_failed" => {
                let after = ev.get("tokensAfter").and_then(Value::as_u64);
                let error = ev.get("error").and_then(Value::as_str).map(str::to_owned);
                let cell = Cell::Compaction {
                    before: u(ev, "tokensBefore"),
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
            "subagent_started" | "subagent_completed" => {
                // Two cells: the start where the work begins (its tool calls follow), the
                // result where it ends.
                let result = ev.get("result").and_then(Value::as_str).map(str::to_owned);
                self.transcript.push(Cell::Subagent {
                    agent_id: s(ev, "agentId").to_owned(),
                    task: s(ev, "task").to_owned(),
                    result,
                    done: ty == "subagent_completed",
                });
            }
            "usage" | "mcp_status" => {
                self.request(Action::RefreshStatus);
                self.refresh_panel();
            }
            "todo_updated" => {
                if let Ok(todos) =
                    serde_json::from_value(ev.get("todos").cloned().unwrap_or(Value::Null))
                {
                    self.todos = todos;
                }
                self.request(Action::RefreshStatus);
                self.refresh_panel();
            }
            "turn_completed" => self.turn_completed(ev),
            "error" => {
                self.turn_errors
                    .push((s(ev, "code").to_owned(), s(ev, "message").to_owned()));
                self.transcript.push(Cell::Error {
                    code: s(ev, "code").to_owned(),
                    message: s(ev, "message").to_owned(),
                });
            }
            "synced" => self.synced(ev),
            _ => {}
        }
    }

    fn turn_started(&mut self, ev: &Value) {
        self.running = true;
        let turn_id = s(ev, "turnId").to_owned();
        let prompt = s(ev, "prompt").to_owned();
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

    fn message_delta(&mut self, item: &str, delta: &str) {
        if self.transcript.completed.contains(item) {
            return;
        }
        if let Some(&idx) = self.transcript.items.get(item)
            && let Some(slot) = self.transcript.slot_mut(idx)
            && let Cell::Assistant(Assistant::Streaming(md)) = &mut slot.cell
        {
            md.push(delta);
            return;
        }
        self.finish_reasoning();
        let idx = self.transcript.push(streaming(delta));
        self.transcript.items.insert(item.to_owned(), idx);
    }

    fn reasoning_delta(&mut self, item: &str, delta: &str) {
        if let Some(&idx) = self.transcript.items.get(item) {
            if let Some(Cell::Reasoning { text, done: false }) = self.transcript.cell_mut(idx) {
                text.push_str(delta);
            }
            return;
        }
        let idx = self.transcript.push(Cell::Reasoning {
            text: delta.to_owned(),
            done: false,
        });
        self.transcript.items.insert(item.to_owned(), idx);
        self.transcript.open_reasoning.push(idx);
    }

    fn message_completed(&mut self, item: &str, text: &str) {
        self.finish_reasoning();
        self.transcript.completed.insert(item.to_owned());
        let done = Cell::Assistant(Assistant::Done(text.to_owned()));
        // `text` is authoritative: it replaces whatever streamed.
        match self.transcript.items.get(item).copied() {
            Some(idx) => {
                if let Some(cell) = self.transcript.cell_mut(idx) {
                    *cell = done;
                }
            }
            None => {
                let idx = self.transcript.push(done);
                self.transcript.items.insert(item.to_owned(), idx);
            }
        }
    }

    fn finish_reasoning(&mut self) {
        for idx in std::mem::take(&mut self.transcript.open_reasoning) {
            if let Some(Cell::Reasoning { done, .. }) = self.transcript.cell_mut(idx) {
                *done = true;
            }
        }
    }

    fn approval_requested(&mut self, ev: &Value) {
        let approval = Approval {
            request_id: s(ev, "requestId").to_owned(),
            call_id: s(ev, "callId").to_owned(),
            tool: s(ev, "tool").to_owned(),
            arguments: ev.get("arguments").cloned().unwrap_or(Value::Null),
            reason: s(ev, "reason").to_owned(),
            scope: s(ev, "scope").to_owned(),
        };
        let cell = Cell::Approval {
            tool: approval.tool.clone(),
            summary: tool::summary(&approval.tool, &approval.arguments),
            reason: approval.reason.clone(),
            scope: approval.scope.clone(),
            outcome: None,
        };
        let idx = self.transcript.push(cell);
        self.transcript
            .requests
            .insert(approval.request_id.clone(), idx);
        if !self
            .approvals
            .iter()
            .any(|a| a.request_id == approval.request_id)
        {
            self.approvals.push_back(approval);
        }
    }

    fn turn_completed(&mut self, ev: &Value) {
        self.running = false;
        self.finish_reasoning();
        self.clear_notice(NoticeKind::Cancelling);
        let reason = s(ev, "stopReason");
        let error = ev.get("error");
        if reason != "end_turn" {
            let mut text = format!("turn ended: {}", reason.replace('_', " "));
            if let Some(e) = error {
                let (code, message) = (s(e, "code"), s(e, "message"));
                // An `error` event of this turn already shows it as a cell: say it once.
                let shown = self
                    .turn_errors
                    .iter()
                    .any(|(c, m)| c == code && m == message);
                if !shown {
                    text.push_str(&format!(" — {code}: {message}"));
                }
            }
            self.transcript.push(Cell::Info {
                text,
                kind: InfoKind::Warn,
            });
        }
        self.request(Action::RefreshStatus);
        self.refresh_panel();
    }

    fn synced(&mut self, ev: &Value) {
        self.synced = true;
        self.history_seeded = true;
        if let Some(last) = ev.get("lastSeq").and_then(Value::as_u64) {
            self.last_seq = self.last_seq.max(last);
        }
        if self.last_seq < self.snapshot_seq {
            // The replay must reach what `session/get` saw: say so if the daemon lost events.
            self.note(format!(
                "history incomplete: the replay ended at event {} but the session had {}",
                self.last_seq, self.snapshot_seq
            ));
        }
        let in_progress = ev
            .get("inProgress")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in &in_progress {
            let id = s(item, "itemId");
            let text = s(item, "text");
            if self.transcript.completed.contains(id) {
                continue;
            }
            // The text is everything streamed so far: it replaces a partial cell.
            let cell = if s(item, "kind") == "reasoning" {
                Cell::Reasoning {
                    text: text.to_owned(),
                    done: false,
                }
            } else {
                streaming(text)
            };
            match self.transcript.items.get(id).copied() {
                Some(idx) => {
                    if let Some(slot) = self.transcript.cell_mut(idx) {
                        *slot = cell;
                    }
                }
                None => {
                    let idx = self.transcript.push(cell);
                    self.transcript.items.insert(id.to_owned(), idx);
                    if s(item, "kind") == "reasoning" {
                        self.transcript.open_reasoning.push(idx);
                    }
                }
            }
        }
        if !in_progress.is_empty() {
            self.running = true;
        }
        if let Some(note) = self.reload_note.take() {
            self.transcript.push(Cell::Info {
                text: note,
                kind: InfoKind::Command,
            });
        }
        self.request(Action::RefreshStatus);
    }

    /// A `task` call's output is its sub-agents' results, each already in a sub-agent cell
    /// after the call's cell: the tool cell then shows only its header.
    fn hide_task_output_shown_by_subagents(&mut self, call_id: &str) {
        let Some(&idx) = self.transcript.calls.get(call_id) else {
            return;
        };
        let finished_task = matches!(
            self.transcript.get(idx).map(|slot| &slot.cell),
            Some(Cell::Tool(t)) if t.name == "task" && t.status.as_deref() == Some("ok")
        );
        if !finished_task {
            return;
        }
        let results_shown = self.transcript.cells().skip(idx + 1).any(|c| {
            matches!(c, Cell::Subagent { done: true, result: Some(r), .. } if !r.trim().is_empty())
        });
        if results_shown && let Some(Cell::Tool(t)) = self.transcript.cell_mut(idx) {
            t.output_elsewhere = true;
        }
    }
}
