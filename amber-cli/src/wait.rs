//! `amber-cli wait ID`: blocks until a session is idle (no turn running, no prompt queued),
//! then prints its last turn's result — the line `run --json` ends with, or its text — and
//! exits with `run`'s code for how that turn ended.
//!
//! How: a subscription with `afterSeq` a window before the session's `lastSeq` replays only
//! the log's tail; the window widens (×16, then the whole log) until it holds the start of
//! the last turn, so a long session is not replayed whole. Idle is the daemon's word
//! (`session/get` state `idle`) checked after each `turn_completed`, with every turn seen to
//! start also seen to complete. A deleted session ends the subscription: `session/get`
//! then says -32001 and the wait fails (exit 1) instead of hanging.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use amber_client::{Client, ClientError, RawEvent, RawEventStream};
use amber_proto::{EventKind, SessionState, errors};
use anyhow::Context;
use futures::StreamExt;

use crate::args::{ConnectArgs, WaitArgs};
use crate::output::{self, connect_options, note};
use crate::turn::{ResultLine, TurnTracker, denials_summary, exit, exit_code};

/// The first replay window, in durable events before `lastSeq`.
const FIRST_WINDOW: u64 = 256;

/// How much wider each next window is.
const WIDEN: u64 = 16;

/// How often a subscription that closed (the client fell behind) is resumed.
const MAX_RESUBSCRIBES: u32 = 5;

/// The daemon says idle while a turn seen starting has no `turn_completed` yet: it is
/// published just after the state changes, so it is given this long to arrive.
const COMPLETION_GRACE: Duration = Duration::from_secs(1);

/// While the session is busy, its state is asked again this often too: a session can be
/// busy without a turn (a manual compaction), and ends that with no `turn_completed`.
const POLL: Duration = Duration::from_secs(2);

pub(crate) async fn wait(mut args: WaitArgs, conn: &ConnectArgs) -> anyhow::Result<u8> {
    let client = Client::connect(connect_options(conn, false)).await?;
    // The whole id, when given a prefix of it: the result line names the session exactly.
    args.id = client.session_snapshot(&args.id).await?.session.session_id;
    let waiting = wait_idle(&client, &args.id);
    let finished = match args.timeout {
        Some(secs) => match tokio::time::timeout(Duration::from_secs_f64(secs), waiting).await {
            Ok(finished) => finished?,
            Err(_) => {
                note(&format!(
                    "session {} is still busy after {secs} s (it goes on running)",
                    args.id
                ));
                return Ok(exit::TIMED_OUT);
            }
        },
        None => waiting.await?,
    };
    report(&args, finished)
}

/// Prints the last turn's result and gives the exit code.
fn report(args: &WaitArgs, finished: Option<Finished>) -> anyhow::Result<u8> {
    let Some(finished) = finished else {
        // Idle and never prompted: nothing failed, so there is nothing to report but that.
        if args.json {
            let line = ResultLine::no_turn(&args.id);
            output::line(&serde_json::to_string(&line)?)?;
        } else {
            note(&format!("session {} has no turn yet", args.id));
        }
        return Ok(exit::OK);
    };
    let line = ResultLine::of(&finished.tracker, &args.id, finished.duration_ms);
    let stop = finished
        .tracker
        .completion()
        .map_or(amber_proto::StopReason::Error, |c| c.stop_reason);
    if args.json {
        output::line(&serde_json::to_string(&line)?)?;
    } else {
        let text = finished.tracker.text();
        if !text.is_empty() {
            output::line(text)?;
        }
        let mut summary = format!("turn {} ended: {}", line.turn_id, line.stop_reason);
        if let Some(error) = &line.error {
            summary.push_str(&format!(" ({}: {})", error.code, error.message));
        }
        note(&summary);
        if let Some(denials) = denials_summary(finished.tracker.denials()) {
            note(&denials);
        }
    }
    Ok(exit_code(stop, !finished.tracker.denials().is_empty()))
}

/// The last turn of an idle session.
struct Finished {
    tracker: TurnTracker,
    /// From its `turn_started` to its `turn_completed`, by the daemon's clock.
    duration_ms: u64,
}

/// Blocks until the session is idle; its last completed turn (`None`: it has had none).
async fn wait_idle(client: &Client, id: &str) -> anyhow::Result<Option<Finished>> {
    let last_seq = client.session_snapshot(id).await?.last_seq;
    let mut window = FIRST_WINDOW;
    let (mut turns, events) = loop {
        let after = last_seq.saturating_sub(window);
        // The session existed a moment ago: not found now means it was deleted since.
        let mut events = client
            .subscribe_raw(id, Some(after))
            .await
            .map_err(|e| deleted_or(e, id))?;
        let mut turns = Turns::default();
        replay(&mut events, &mut turns, id).await?;
        if after == 0 || turns.holds_last_turn() {
            break (turns, events);
        }
        // The last turn began before the window: a wider one (the whole log at last).
        let _ = events.unsubscribe().await;
        window = window.saturating_mul(WIDEN);
        if window > last_seq / 2 {
            window = u64::MAX;
        }
    };
    follow(client, id, &mut turns, events).await
}

/// Feeds the replayed events up to `synced`.
async fn replay(events: &mut RawEventStream, turns: &mut Turns, id: &str) -> anyhow::Result<()> {
    loop {
        match events.next().await {
            Some(Ok(raw)) => {
                if matches!(
                    raw.event.as_ref().map(|e| &e.kind),
                    Some(EventKind::Synced { .. })
                ) {
                    return Ok(());
                }
                turns.observe(&raw);
            }
            Some(Err(e)) => return Err(closed(events.client(), id, e).await),
            None => anyhow::bail!("the event stream of session {id} ended"),
        }
    }
}

/// Follows live events until the session is idle.
async fn follow(
    client: &Client,
    id: &str,
    turns: &mut Turns,
    mut events: RawEventStream,
) -> anyhow::Result<Option<Finished>> {
    // Checked at once (the session may be idle already), then after each turn's end.
    let mut check_at = Some(Instant::now());
    let mut grace_used = false;
    let mut resubscribes = 0;
    loop {
        tokio::select! {
            () = sleep_until(check_at) => {
                if !is_idle(client, id).await? {
                    check_at = Some(Instant::now() + POLL);
                    continue;
                }
                if turns.open == 0 || grace_used {
                    return Ok(turns.last.take());
                }
                grace_used = true;
                check_at = Some(Instant::now() + COMPLETION_GRACE);
            }
            item = events.next() => match item {
                Some(Ok(raw)) => {
                    if turns.observe(&raw) {
                        check_at = Some(Instant::now());
                        grace_used = false;
                    }
                }
                Some(Err(ClientError::SubscriptionClosed { reason }))
                    if resubscribes < MAX_RESUBSCRIBES && client.is_connected() =>
                {
                    if !session_exists(client, id).await? {
                        anyhow::bail!("session {id} was deleted while waiting for it");
                    }
                    resubscribes += 1;
                    note(&format!("event stream closed ({reason}); resuming after seq {}", turns.last_seq));
                    events = client
                        .subscribe_raw(id, Some(turns.last_seq))
                        .await
                        .map_err(|e| deleted_or(e, id))?;
                }
                Some(Err(e)) => return Err(closed(client, id, e).await),
                None => anyhow::bail!("the event stream of session {id} ended"),
            }
        }
    }
}

/// The error for a subscription that ended: the session deleted, else `err` itself.
async fn closed(client: &Client, id: &str, err: ClientError) -> anyhow::Error {
    match session_exists(client, id).await {
        Ok(false) => anyhow::anyhow!("session {id} was deleted while waiting for it"),
        _ if !client.is_connected() => {
            anyhow::Error::new(err).context(format!("amberd went away while waiting for {id}"))
        }
        _ => anyhow::Error::new(err).context(format!("waiting for session {id}")),
    }
}

/// `err` of a call about a session known to exist when the wait began: -32001 says it
/// was deleted since.
fn deleted_or(err: ClientError, id: &str) -> anyhow::Error {
    if err.code() == Some(errors::SESSION_NOT_FOUND) {
        anyhow::anyhow!("session {id} was deleted while waiting for it")
    } else {
        err.into()
    }
}

/// Whether the session still exists (`session/get` is not -32001).
async fn session_exists(client: &Client, id: &str) -> anyhow::Result<bool> {
    match client.session_snapshot(id).await {
        Ok(_) => Ok(true),
        Err(e) if e.code() == Some(errors::SESSION_NOT_FOUND) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The daemon's word: no turn running and no prompt queued.
async fn is_idle(client: &Client, id: &str) -> anyhow::Result<bool> {
    match client.session_snapshot(id).await {
        Ok(got) => Ok(got.session.state == SessionState::Idle),
        Err(e) if e.code() == Some(errors::SESSION_NOT_FOUND) => {
            anyhow::bail!("session {id} was deleted while waiting for it")
        }
        Err(e) => Err(e).context(format!("session/get {id}")),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// One turn as far as this wait has seen it.
struct Seen {
    tracker: TurnTracker,
    /// Its `prompt_queued` or `turn_started` was seen: everything after is here too.
    from_start: bool,
    started: Option<SystemTime>,
}

/// The turns in the events seen so far: those not yet completed, and the last completed.
#[derive(Default)]
struct Turns {
    running: HashMap<String, Seen>,
    /// Turns seen to start and not yet to complete.
    open: usize,
    last: Option<Finished>,
    /// Whether `last` was seen from its start.
    last_whole: bool,
    /// Whether any turn was seen to start.
    any_start: bool,
    /// The highest durable seq seen.
    last_seq: u64,
}

impl Turns {
    /// Feeds one event; true when it completed a turn.
    #[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
    fn observe(&mut self, raw: &RawEvent) -> bool {
        let Some(event) = &raw.event else {
            return false;
        };
        if let Some(seq) = event.seq {
            if seq <= self.last_seq {
                return false;
            }
            self.last_seq = seq;
        }
        let Some(turn_id) = event.turn_id.as_deref() else {
            return false;
        };
        // Sub-agents' events carry their parent turn's id; the tracker skips them too.
        let seen = self
            .running
            .entry(turn_id.to_owned())
            .or_insert_with(|| Seen {
                tracker: TurnTracker::new(turn_id),
                from_start: false,
                started: None,
            });
        match &event.kind {
            EventKind::PromptQueued { .. } | EventKind::TurnStarted { .. } => {
                if !seen.from_start {
                    seen.from_start = true;
                    self.any_start = true;
                    self.open += 1;
                }
                if matches!(event.kind, EventKind::TurnStarted { .. }) {
                    seen.started = humantime::parse_rfc3339_weak(&event.time).ok();
                }
            }
            EventKind::MessageDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::MessageCompleted { .. }
            | EventKind::ToolCallStarted { .. }
            | EventKind::ToolOutputDelta { .. }
            | EventKind::Retrying { .. }
            | EventKind::ToolCallCompleted { .. }
            | EventKind::ApprovalRequested(_)
            | EventKind::ApprovalResolved { .. }
            | EventKind::Steer { .. }
            | EventKind::CompactionStarted { .. }
            | EventKind::CompactionCompleted { .. }
            | EventKind::CompactionFailed { .. }
            | EventKind::Usage { .. }
            | EventKind::TodoUpdated { .. }
            | EventKind::SubagentStarted { .. }
            | EventKind::SubagentCompleted { .. }
            | EventKind::McpStatus(_)
            | EventKind::TurnCompleted { .. }
            | EventKind::Error { .. }
            | EventKind::Rewound { .. }
            | EventKind::HookFailed { .. }
            | EventKind::EnvironmentConnected { .. }
            | EventKind::FleetChanged { .. }
            | EventKind::FleetSetup { .. }
            | EventKind::FleetPushed { .. }
            | EventKind::MessageSent { .. }
            | EventKind::MessageReceived { .. }
            | EventKind::GoalSet { .. }
            | EventKind::GoalCheck { .. }
            | EventKind::GoalMet { .. }
            | EventKind::SubagentQueued { .. }
            | EventKind::BudgetWarning { .. }
            | EventKind::NetworkConnection(_)
            | EventKind::RoutineFinished { .. }
            | EventKind::EnvironmentLost { .. }
            | EventKind::EnvironmentResumed { .. }
            | EventKind::Synced { .. } => {}
        }
        seen.tracker.observe(event);
        if !matches!(event.kind, EventKind::TurnCompleted { .. }) {
            return false;
        }
        let Some(seen) = self.running.remove(turn_id) else {
            return false;
        };
        if seen.from_start {
            self.open = self.open.saturating_sub(1);
        }
        let ended = humantime::parse_rfc3339_weak(&event.time).ok();
        let duration_ms = match (seen.started, ended) {
            (Some(start), Some(end)) => end
                .duration_since(start)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            _ => 0,
        };
        self.last_whole = seen.from_start;
        self.last = Some(Finished {
            tracker: seen.tracker,
            duration_ms,
        });
        true
    }

    /// Whether the replay window reached back far enough: every turn still running was
    /// seen from its start, and so was the last completed one unless a later turn runs
    /// (whose end will be the last); and some turn was seen starting at all.
    fn holds_last_turn(&self) -> bool {
        let running_whole = self.running.values().all(|s| s.from_start);
        let later_runs = !self.running.is_empty();
        self.any_start && running_whole && (later_runs || self.last.is_none() || self.last_whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn raw(body: Value) -> RawEvent {
        let mut v = json!({"sessionId": "s1", "time": "2026-01-01T00:00:00.000Z"});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        RawEvent::parse(serde_json::value::to_raw_value(&v).unwrap())
    }

    fn completed(seq: u64, turn: &str, time: &str) -> RawEvent {
        raw(
            json!({"seq": seq, "turnId": turn, "time": time, "type": "turn_completed", "stopReason": "end_turn", "usage": {}}),
        )
    }

    #[test]
    fn a_turn_seen_whole_is_the_last_with_its_duration() {
        let mut turns = Turns::default();
        assert!(!turns.observe(&raw(
            json!({"seq": 4, "turnId": "t1", "type": "prompt_queued", "prompt": "go"})
        )));
        assert!(!turns.observe(&raw(
            json!({"seq": 5, "turnId": "t1", "type": "turn_started", "prompt": "go", "time": "2026-01-01T00:00:01.000Z"})
        )));
        assert_eq!(turns.open, 1);
        assert!(!turns.observe(&raw(
            json!({"seq": 6, "turnId": "t1", "type": "message_completed", "itemId": "m", "role": "assistant", "text": "hi"})
        )));
        assert!(turns.observe(&completed(7, "t1", "2026-01-01T00:00:03.500Z")));
        assert_eq!(turns.open, 0);
        assert!(turns.holds_last_turn());
        let last = turns.last.as_ref().unwrap();
        assert_eq!(last.duration_ms, 2500);
        assert_eq!(last.tracker.text(), "hi");
        // A replayed duplicate changes nothing.
        assert!(!turns.observe(&completed(7, "t1", "2026-01-01T00:00:09.000Z")));
    }

    #[test]
    fn a_window_that_starts_inside_the_last_turn_is_too_short() {
        let mut turns = Turns::default();
        turns.observe(&raw(
            json!({"seq": 9, "turnId": "t1", "type": "message_completed", "itemId": "m", "role": "assistant", "text": "part"}),
        ));
        turns.observe(&completed(10, "t1", "2026-01-01T00:00:03.000Z"));
        assert!(!turns.holds_last_turn(), "t1 began before the window");
        // Nothing at all in the window: too short as well.
        assert!(!Turns::default().holds_last_turn());
        // A running turn seen from its start, after a partial one: long enough.
        turns.observe(&raw(
            json!({"seq": 11, "turnId": "t2", "type": "turn_started", "prompt": "again"}),
        ));
        assert!(turns.holds_last_turn(), "t2's end will be the last");
        turns.observe(&completed(12, "t2", "2026-01-01T00:00:04.000Z"));
        assert!(turns.holds_last_turn());
        assert_eq!(turns.last.as_ref().unwrap().tracker.turn_id(), "t2");
    }
}
