//! One tool call of `amber-cli mcp-server`: connect to amberd (as every client, a new
//! connection per call so a restarted daemon is picked up), open or create the session,
//! subscribe, prompt, and follow that turn (amber-client's `turn::TurnTracker`) to its
//! `turn_completed`, sending progress and answering approvals (`--yes`) on the way. A
//! cancelled MCP request cancels the turn. Every failure becomes an `isError` tool result:
//! the server itself never goes down with a call.

use std::time::Duration;

use amber_client::{Client, ClientError, ConnectOptions, EventStream};
use amber_proto::{EventKind, SessionNewParams, SessionPromptParams, StopReason};
use futures::StreamExt;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::tools::{ReplyArgs, RunArgs};
use amber_client::turn::{TurnTracker, yes_decision};

/// JSON-RPC code of amberd's "session not found".
const SESSION_NOT_FOUND: i32 = -32001;

/// After a cancel went out, how long the turn's `turn_completed` may take to come.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// What a tool call asks for.
pub(crate) enum Target {
    New(RunArgs),
    Reply(ReplyArgs),
}

/// How the call behaves.
pub(crate) struct Call {
    pub opts: ConnectOptions,
    /// `--yes`: answer approvals of the session with allow_once.
    pub yes: bool,
    pub progress: Progress,
    /// Cancelled when the client cancels the request.
    pub ct: CancellationToken,
}

/// Runs one turn; the tool result says how it ended.
pub(crate) async fn run(call: Call, target: Target) -> CallToolResult {
    match run_inner(call, target).await {
        Ok(result) => result,
        Err(message) => error_result(message, None),
    }
}

/// A turn that was prompted.
struct Prompted {
    client: Client,
    session_id: String,
    events: EventStream,
    turn_id: String,
    last_seq: u64,
}

async fn run_inner(mut call: Call, target: Target) -> Result<CallToolResult, String> {
    let client = Client::connect(call.opts.clone())
        .await
        .map_err(|e| format!("cannot reach amberd: {e}"))?;
    let prompted = start(client, target).await?;
    let Prompted {
        client,
        session_id,
        mut events,
        turn_id,
        mut last_seq,
    } = prompted;
    let mut tracker = TurnTracker::new(turn_id);
    let mut turn_started = false;
    let mut cancel_deadline: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            item = events.next() => match item {
                Some(Ok(event)) => {
                    if let Some(seq) = event.seq {
                        if seq <= last_seq {
                            continue;
                        }
                        last_seq = seq;
                    }
                    if call.yes
                        && let EventKind::ApprovalRequested(amber_proto::Approval { request_id, unsandboxed, person_only, .. }) = &event.kind
                    {
                        answer(&client, &session_id, request_id, yes_decision(*unsandboxed, *person_only));
                    }
                    if !tracker.is_mine(&event) {
                        continue;
                    }
                    if matches!(event.kind, EventKind::TurnStarted { .. }) {
                        turn_started = true;
                    }
                    tracker.observe(&event);
                    call.progress.on_event(&event).await;
                    if tracker.completion().is_some() {
                        break;
                    }
                }
                Some(Err(e)) => return Err(lost(&session_id, &e)),
                None => return Err(lost(&session_id, &ClientError::Transport("the event stream ended".into()))),
            },
            () = call.ct.cancelled(), if cancel_deadline.is_none() => {
                if !turn_started {
                    // Queued behind another turn of the session: a cancel would end that one.
                    return Ok(error_result(
                        format!("cancelled before the turn started; the prompt stays queued in amber session {session_id}"),
                        Some(structured(&session_id, StopReason::Cancelled, &amber_proto::Usage::default())),
                    ));
                }
                cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                if let Err(e) = client.session_cancel(&session_id).await {
                    return Err(format!("cancelling amber session {session_id} failed: {e}"));
                }
            },
            () = sleep_until(cancel_deadline) => {
                return Err(format!(
                    "the turn of amber session {session_id} did not end within {} s of its cancel",
                    CANCEL_GRACE.as_secs()
                ));
            }
        }
    }
    Ok(finished(&session_id, &tracker))
}

/// Opens (or creates) the session, subscribes and sends the prompt.
async fn start(client: Client, target: Target) -> Result<Prompted, String> {
    let (session_id, last_seq, prompt, created) = match target {
        Target::New(args) => {
            let cwd = args
                .cwd
                .into_os_string()
                .into_string()
                .map_err(|p| format!("cwd is not UTF-8: {}", p.to_string_lossy()))?;
            let params = SessionNewParams {
                cwd: cwd.clone(),
                mode: args.mode,
                model: args.model,
                ..SessionNewParams::default()
            };
            let info = client
                .session_new(&params)
                .await
                .map_err(|e| format!("cannot start an amber session in {cwd}: {e}"))?;
            (info.session_id, 0, args.prompt, true)
        }
        Target::Reply(args) => {
            let got = client
                .session_snapshot(&args.session_id)
                .await
                .map_err(|e| match e.code() {
                    Some(SESSION_NOT_FOUND) => format!(
                        "no amber session `{}` (start one with amber_run)",
                        args.session_id
                    ),
                    _ => format!("cannot open amber session `{}`: {e}", args.session_id),
                })?;
            (args.session_id, got.last_seq, args.prompt, false)
        }
    };
    // Subscribed before the prompt: the turn's first events must not be missed.
    let events = client
        .subscribe(&session_id, Some(last_seq))
        .await
        .map_err(|e| format!("cannot follow amber session {session_id}: {e}"))?;
    let params = SessionPromptParams {
        session_id: session_id.clone(),
        text: prompt,
        output_schema: None,
        max_iterations: None,
    };
    let turn_id = match client.session_prompt_with(&params).await {
        Ok(result) => result.turn_id,
        Err(e) => {
            if created {
                let _ = client.session_delete(&session_id).await;
            }
            return Err(format!("amber refused the prompt: {e}"));
        }
    };
    Ok(Prompted {
        client,
        session_id,
        events,
        turn_id,
        last_seq,
    })
}

/// Answers an approval request without holding up the events.
fn answer(client: &Client, session_id: &str, request_id: &str, decision: amber_proto::Decision) {
    let client = client.clone();
    let session_id = session_id.to_owned();
    let request_id = request_id.to_owned();
    tokio::spawn(async move {
        if let Err(e) = client
            .approval_respond(&session_id, &request_id, decision)
            .await
        {
            crate::note(&format!("could not answer approval {request_id}: {e}"));
        }
    });
}

fn lost(session_id: &str, e: &ClientError) -> String {
    format!(
        "lost amberd while following amber session {session_id} ({e}); the turn may still be \
         running there: continue it later with amber_reply"
    )
}

/// The tool result of a completed turn.
fn finished(session_id: &str, tracker: &TurnTracker) -> CallToolResult {
    let Some(done) = tracker.completion() else {
        return error_result(
            format!("amber session {session_id}: the turn did not complete"),
            None,
        );
    };
    let data = structured(session_id, done.stop_reason, &done.usage);
    let text = tracker.text();
    if done.stop_reason == StopReason::Error {
        let why = done.error.as_ref().map_or_else(
            || "unknown error".to_owned(),
            |e| format!("{} ({})", e.message, e.code),
        );
        let mut message = format!("the amber turn failed: {why}");
        if !text.is_empty() {
            message.push_str("\n\n");
            message.push_str(text);
        }
        return error_result(message, Some(data));
    }
    let text = match (text.is_empty(), done.stop_reason) {
        (false, StopReason::EndTurn) => text.to_owned(),
        (false, stop) => format!("{text}\n\n[amber stopped the turn: {}]", stop.as_str()),
        (true, stop) => format!(
            "[amber ended the turn ({}) without a final answer]",
            stop.as_str()
        ),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(data);
    result
}

fn structured(session_id: &str, stop: StopReason, usage: &amber_proto::Usage) -> serde_json::Value {
    json!({"sessionId": session_id, "stopReason": stop.as_str(), "usage": usage})
}

fn error_result(message: String, data: Option<serde_json::Value>) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
    result.structured_content = data;
    result
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn tracker_ending(body: serde_json::Value, text: Option<&str>) -> TurnTracker {
        let mut t = TurnTracker::new("t1");
        let ev = |b: serde_json::Value| {
            let mut v = json!({"sessionId": "s1", "turnId": "t1", "time": "2026-01-01T00:00:00Z"});
            v.as_object_mut()
                .unwrap()
                .extend(b.as_object().unwrap().clone());
            serde_json::from_value(v).unwrap()
        };
        if let Some(text) = text {
            t.observe(&ev(
                json!({"seq": 1, "type": "message_completed", "itemId": "m1", "role": "assistant", "text": text}),
            ));
        }
        t.observe(&ev(body));
        t
    }

    fn text_of(result: &CallToolResult) -> String {
        serde_json::to_value(&result.content[0]).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_finished_turn_gives_its_text_and_structured_content() {
        let t = tracker_ending(
            json!({"seq": 2, "type": "turn_completed", "stopReason": "end_turn", "usage": {"promptTokens": 3, "completionTokens": 2, "cachedTokens": 0, "totalTokens": 5}}),
            Some("All done."),
        );
        let result = finished("s1", &t);
        assert_eq!(result.is_error, Some(false));
        assert_eq!(text_of(&result), "All done.");
        let data = result.structured_content.unwrap();
        assert_eq!(data["sessionId"], "s1");
        assert_eq!(data["stopReason"], "end_turn");
        assert_eq!(data["usage"]["totalTokens"], 5);
    }

    #[test]
    fn a_failed_turn_is_an_error_result_with_the_message() {
        let t = tracker_ending(
            json!({"seq": 2, "type": "turn_completed", "stopReason": "error", "error": {"code": "api", "message": "502 from provider"}, "usage": {}}),
            None,
        );
        let result = finished("s1", &t);
        assert_eq!(result.is_error, Some(true));
        assert!(text_of(&result).contains("502 from provider"));
        assert_eq!(result.structured_content.unwrap()["stopReason"], "error");
    }

    #[test]
    fn other_stops_name_the_reason() {
        let t = tracker_ending(
            json!({"seq": 2, "type": "turn_completed", "stopReason": "max_iterations", "usage": {}}),
            Some("Halfway."),
        );
        let result = finished("s1", &t);
        assert_eq!(result.is_error, Some(false));
        assert!(text_of(&result).ends_with("[amber stopped the turn: max_iterations]"));
    }
}
