//! Dispatch of one assistant turn's tool calls: validate (known tool, JSON
//! object arguments) → duplicate check against the previous turn → mode policy
//! → gate (policy, approvals) → parallel execution (read-only tools and bash concurrently, writers
//! serialized per target path) → results in the original order, one per call,
//! each wrapped in the `{"status", "output"}` envelope.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use amber_policy::confine;
use amber_proto::{ToolCall, ToolStatus};
use futures::FutureExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::args::describe;
use super::gate::{Gate, GateCall, GateVerdict};
use super::sandbox::Unsandboxed;
use super::truncate::truncate_middle;
use super::{OutputChunk, SessionTools, Tool, ToolContext, ToolLimits, ToolOutcome, ToolRegistry};

/// What happens during a dispatch, for the session's event stream.
#[derive(Debug, Clone, PartialEq)]
pub enum DispatchEvent {
    /// Every call starts, denied ones included. `arguments` is the parsed
    /// object, or `{"_raw": text}` when the text was not a JSON object.
    Started {
        call_id: String,
        name: String,
        arguments: Value,
    },
    /// A live chunk of a running call's output.
    Output(OutputChunk),
    /// The call's final status and the output exactly as the model sees it.
    Completed {
        call_id: String,
        status: ToolStatus,
        output: String,
        duration_ms: u64,
        /// The unified diff of the files the call changed (`ToolOutcome::diff`).
        diff: Option<String>,
    },
}

/// Where a dispatch reports its events. Called synchronously, in order: a call's `Started`
/// is delivered before the gate is asked about it and before it runs, so a client sees a
/// call before its approval request or anything its tool publishes (sub-agents).
pub trait DispatchSink: Sync {
    fn send(&self, event: DispatchEvent);
}

impl DispatchSink for UnboundedSender<DispatchEvent> {
    fn send(&self, event: DispatchEvent) {
        // Nobody listening is fine: results are returned anyway.
        let _ = UnboundedSender::send(self, event);
    }
}

impl<F: Fn(DispatchEvent) + Sync> DispatchSink for F {
    fn send(&self, event: DispatchEvent) {
        self(event);
    }
}

/// One turn's calls and everything needed to run them.
pub struct DispatchRequest<'a> {
    pub registry: &'a ToolRegistry,
    pub calls: &'a [ToolCall],
    /// The calls of the previous assistant turn, for the duplicate check.
    pub previous_calls: &'a [ToolCall],
    /// Policy and approvals: asked, in call order, about every call that passed validation.
    pub gate: &'a dyn Gate,
    /// The session's tool state.
    pub session: &'a Arc<SessionTools>,
    pub workspace: &'a Path,
    pub cancel: &'a CancellationToken,
    pub limits: &'a ToolLimits,
    pub events: &'a dyn DispatchSink,
}

/// The result of one call, ready to become a tool message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchResult {
    pub call_id: String,
    pub status: ToolStatus,
    /// The tool message content: `{"status":"ok"|"error"|"denied","output":"…"}`.
    pub envelope: String,
}

#[derive(Serialize)]
struct Envelope<'a> {
    status: ToolStatus,
    output: &'a str,
}

/// The envelope the model sees for a result.
pub fn envelope(status: ToolStatus, output: &str) -> String {
    serde_json::to_string(&Envelope { status, output })
        .unwrap_or_else(|_| r#"{"status":"error","output":"unencodable tool output"}"#.to_owned())
}

/// A call that passed the checks and will run.
struct Prepared<'a> {
    index: usize,
    call: &'a ToolCall,
    tool: Arc<dyn Tool>,
    args: Value,
    /// The gate allowed this call to run without the OS sandbox.
    unsandboxed: Option<Unsandboxed>,
}

/// Shared, per-dispatch state for running calls.
struct Runner<'a> {
    gate: &'a dyn Gate,
    session: &'a Arc<SessionTools>,
    workspace: &'a Path,
    cancel: &'a CancellationToken,
    limits: &'a ToolLimits,
    events: &'a dyn DispatchSink,
}

/// Run one turn's tool calls. Returns exactly one result per call, in the
/// order of `req.calls`.
pub async fn dispatch(req: DispatchRequest<'_>) -> Vec<DispatchResult> {
    let runner = Runner {
        gate: req.gate,
        session: req.session,
        workspace: req.workspace,
        cancel: req.cancel,
        limits: req.limits,
        events: req.events,
    };
    let previous: HashSet<(&str, String)> = req
        .previous_calls
        .iter()
        .map(|call| (call.name.as_str(), normalized_arguments(&call.arguments)))
        .collect();

    let mut results: Vec<Option<DispatchResult>> = vec![None; req.calls.len()];
    let mut runnable = Vec::new();
    for (index, call) in req.calls.iter().enumerate() {
        let parsed = parse_arguments(&call.name, &call.arguments);
        let shown = match &parsed {
            Ok(args) => args.clone(),
            Err(_) => json!({ "_raw": call.arguments }),
        };
        runner.send(DispatchEvent::Started {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: shown,
        });
        match preflight(&req, &previous, call, parsed) {
            Ok((tool, args)) => runnable.push(Prepared {
                index,
                call,
                tool,
                args,
                unsandboxed: None,
            }),
            Err(reason) => {
                let outcome = ToolOutcome::denied(reason);
                results[index] = Some(runner.complete(call, outcome, 0));
            }
        }
    }

    // Ask the gate in call order, one at a time: an approval answered for one call (say,
    // allow for this session) already covers the next call of the same scope.
    let mut allowed = Vec::with_capacity(runnable.len());
    for mut prepared in runnable {
        let verdict = req
            .gate
            .check(GateCall {
                call: prepared.call,
                tool: prepared.tool.as_ref(),
                args: &prepared.args,
            })
            .await;
        match verdict {
            GateVerdict::Allow => allowed.push(prepared),
            GateVerdict::AllowUnsandboxed(leave) => {
                prepared.unsandboxed = Some(leave);
                allowed.push(prepared);
            }
            GateVerdict::AllowWith {
                arguments,
                unsandboxed,
            } => {
                prepared.args = arguments;
                prepared.unsandboxed = unsandboxed;
                allowed.push(prepared);
            }
            GateVerdict::Deny(reason) => {
                let outcome = ToolOutcome::denied(reason);
                results[prepared.index] = Some(runner.complete(prepared.call, outcome, 0));
            }
        }
    }
    let runnable = allowed;

    // Lanes run concurrently; the calls inside one lane run in order. A call writing several
    // files (a patch) joins every lane of those files into one.
    let mut lanes: Vec<Vec<Prepared<'_>>> = Vec::new();
    let mut lane_of_path: HashMap<PathBuf, usize> = HashMap::new();
    for prepared in runnable {
        let targets = runner.writer_targets(&prepared);
        let mut joined: Vec<usize> = targets
            .iter()
            .filter_map(|t| lane_of_path.get(t).copied())
            .collect();
        joined.sort_unstable();
        joined.dedup();
        let lane = match joined.split_first() {
            None => {
                lanes.push(Vec::new());
                lanes.len() - 1
            }
            Some((&first, others)) => {
                for &other in others {
                    let moved = std::mem::take(&mut lanes[other]);
                    lanes[first].extend(moved);
                    for lane in lane_of_path.values_mut().filter(|l| **l == other) {
                        *lane = first;
                    }
                }
                // Merged lanes keep the calls in call order.
                lanes[first].sort_by_key(|p| p.index);
                first
            }
        };
        for target in targets {
            lane_of_path.insert(target, lane);
        }
        lanes[lane].push(prepared);
    }
    lanes.retain(|lane| !lane.is_empty());
    let runner = &runner;
    let lane_runs = lanes.into_iter().map(|lane| async move {
        let mut done = Vec::with_capacity(lane.len());
        for prepared in lane {
            let index = prepared.index;
            done.push((index, runner.run(prepared).await));
        }
        done
    });
    for (index, result) in futures::future::join_all(lane_runs)
        .await
        .into_iter()
        .flatten()
    {
        results[index] = Some(result);
    }

    results
        .into_iter()
        .zip(req.calls)
        .map(|(result, call)| {
            result.unwrap_or_else(|| {
                let output = "internal error: the call produced no result";
                DispatchResult {
                    call_id: call.id.clone(),
                    status: ToolStatus::Error,
                    envelope: envelope(ToolStatus::Error, output),
                }
            })
        })
        .collect()
}

/// Parse the raw argument text into a JSON object. Empty text counts as `{}`.
fn parse_arguments(tool: &str, raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!(
            "the arguments of `{tool}` must be a JSON object, got {}",
            describe(&other)
        )),
        Err(err) => Err(format!(
            "the arguments of `{tool}` are not valid JSON ({err}); send one JSON object"
        )),
    }
}

/// Checks before execution; `Err` is the denial reason.
fn preflight(
    req: &DispatchRequest<'_>,
    previous: &HashSet<(&str, String)>,
    call: &ToolCall,
    parsed: Result<Value, String>,
) -> Result<(Arc<dyn Tool>, Value), String> {
    let Some(tool) = req.registry.get(&call.name) else {
        if let Some(reason) = req.registry.withheld(&call.name) {
            return Err(reason.to_owned());
        }
        return Err(format!(
            "unknown tool `{}`; available: {}",
            call.name,
            req.registry.names().join(", ")
        ));
    };
    let args = parsed?;
    if previous.contains(&(call.name.as_str(), normalized_arguments(&call.arguments))) {
        return Err(format!(
            "duplicate of a call made in the previous turn: `{}` with the same arguments; \
             use its result instead of repeating it",
            call.name
        ));
    }
    Ok((Arc::clone(tool), args))
}

/// Arguments in a canonical form (object keys sorted, no whitespace), so that
/// calls differing only in formatting compare equal. Unparsable text stays as is.
/// Shared by the duplicate check here and the loop guard of the agent.
pub fn normalized_arguments(raw: &str) -> String {
    if raw.trim().is_empty() {
        return "{}".to_owned();
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value) => {
            let mut out = String::new();
            canonical(&value, &mut out);
            out
        }
        Err(_) => raw.to_owned(),
    }
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(inner) = map.get(key) {
                    canonical(inner, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

impl Runner<'_> {
    fn send(&self, event: DispatchEvent) {
        self.events.send(event);
    }

    /// The files a call writes (`Tool::written_paths`), resolved.
    fn writer_targets(&self, prepared: &Prepared<'_>) -> Vec<PathBuf> {
        prepared
            .tool
            .written_paths(&prepared.args)
            .iter()
            .map(|path| confine(self.workspace, path).unwrap_or_else(|_| self.workspace.join(path)))
            .collect()
    }

    /// Run one call, forwarding its live output, and complete it.
    async fn run(&self, prepared: Prepared<'_>) -> DispatchResult {
        let started = Instant::now();
        let name = prepared.call.name.as_str();
        let arguments = &prepared.args;
        let outcome = if self.cancel.is_cancelled() {
            ToolOutcome::error("[cancelled] the turn was cancelled before this call ran")
        } else {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let ctx = ToolContext {
                workspace: self.workspace.to_path_buf(),
                call_id: prepared.call.id.clone(),
                cancel: self.cancel.clone(),
                output: Some(tx),
                limits: *self.limits,
                session: self.session.clone(),
                // For this call only: the gate approved running it without the OS sandbox.
                unsandboxed: prepared.unsandboxed,
            };
            let args = prepared.args.clone();
            let run = match self.session.host() {
                Some(host) if prepared.tool.runs_in_workspace() => {
                    host.call(&prepared.tool, args, &ctx)
                }
                _ => prepared.tool.call(args, &ctx),
            };
            let call = AssertUnwindSafe(run).catch_unwind();
            tokio::pin!(call);
            let finished = loop {
                tokio::select! {
                    biased;
                    finished = &mut call => break finished,
                    Some(chunk) = rx.recv() => self.send(DispatchEvent::Output(chunk)),
                }
            };
            while let Ok(chunk) = rx.try_recv() {
                self.send(DispatchEvent::Output(chunk));
            }
            finished.unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(tool = name, %message, "tool panicked");
                ToolOutcome::error(format!("tool `{name}` failed internally: {message}"))
            })
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (result, output) = self.complete_with_output(prepared.call, outcome, duration_ms);
        self.gate
            .after_call(prepared.call, arguments, result.status, &output);
        result
    }

    /// Truncate the output, emit `Completed` and build the result.
    fn complete(&self, call: &ToolCall, outcome: ToolOutcome, duration_ms: u64) -> DispatchResult {
        self.complete_with_output(call, outcome, duration_ms).0
    }

    /// [`Runner::complete`], also giving the output as the model sees it.
    fn complete_with_output(
        &self,
        call: &ToolCall,
        outcome: ToolOutcome,
        duration_ms: u64,
    ) -> (DispatchResult, String) {
        let output = truncate_middle(&outcome.output, self.limits.max_output_bytes).into_owned();
        let envelope = envelope(outcome.status, &output);
        self.send(DispatchEvent::Completed {
            call_id: call.id.clone(),
            status: outcome.status,
            output: output.clone(),
            duration_ms,
            diff: outcome.diff,
        });
        let result = DispatchResult {
            call_id: call.id.clone(),
            status: outcome.status,
            envelope,
        };
        (result, output)
    }
}
