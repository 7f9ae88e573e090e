//! `amber-cli run`: create (or continue) a session, send one prompt (with `--output-schema`
//! and `--max-iterations` as `session/prompt`'s `outputSchema` / `maxIterations`), follow
//! that turn's events until its `turn_completed`, and exit with a code that says how it
//! ended. `--timeout` cancels the turn when it runs out (exit 124).

use amber_proto::sync::Locked;
use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use amber_client::{Client, ClientError, RawEventStream};
use amber_proto::{
    Decision, ErrorInfo, EventKind, SessionNewParams, SessionPromptParams, StopReason,
};
use anyhow::Context;
use futures::{FutureExt, StreamExt};
use tokio::signal::unix::{SignalKind, signal};

use crate::UsageError;
use crate::args::{ConnectArgs, RunArgs};
use crate::ask;
use crate::output::{self, connect_options, note};
use crate::reconnect;
use crate::render::{HumanRenderer, Out};
use crate::run_input::{
    prompt_from_stdin, read_output_schema, read_prompt, remote_workspace, workspace,
};
use crate::turn::{
    ResultLine, SessionStartedLine, TurnTracker, denials_summary, exit, exit_code, yes_decision,
    yes_refusal,
};

/// How often a closed subscription is resumed (with `afterSeq`) before giving up.
const MAX_RESUBSCRIBES: u32 = 5;

/// After `--timeout` cancelled the turn, how long its `turn_completed` may take to come.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

pub(crate) async fn run(args: RunArgs, conn: &ConnectArgs) -> anyhow::Result<u8> {
    if !args.standalone {
        return run_on(args, conn).await;
    }
    if conn.remote.is_some() || conn.socket.is_some() {
        return Err(UsageError(
            "--standalone starts a daemon of its own: it takes neither --remote nor --socket"
                .into(),
        )
        .into());
    }
    let begun = Instant::now();
    // On this (the main) thread, which lives as long as the run: the daemon is told to stop
    // when the thread that started it ends.
    let daemon = match amber_client::standalone::PrivateDaemon::start() {
        Ok(daemon) => daemon,
        Err(e) => {
            let e = anyhow::Error::from(e);
            if args.json {
                write_not_started(&args, begun, &e)?;
            }
            return Err(crate::NotStarted(e).into());
        }
    };
    let private = ConnectArgs {
        socket: Some(daemon.socket().to_owned()),
        no_autostart: true,
        remote: None,
    };
    let code = run_on(args, &private).await;
    drop(daemon);
    code
}

async fn run_on(mut args: RunArgs, conn: &ConnectArgs) -> anyhow::Result<u8> {
    let begun = Instant::now();
    args.settle_worktree(std::io::stdin().is_terminal());
    // `--json` always ends with a result line, even when no turn began; a failed write of
    // it (a closed pipe) is what the run reports then.
    let not_started = |e: anyhow::Error| -> anyhow::Error {
        match args.json.then(|| write_not_started(&args, begun, &e)) {
            Some(Err(write)) => write,
            _ if e.downcast_ref::<UsageError>().is_some() => e,
            _ => crate::NotStarted(e).into(),
        }
    };
    let prompt = read_prompt(&args.prompt).map_err(|e| not_started(e.into()))?;
    let schema = match &args.output_schema {
        Some(path) => Some(read_output_schema(path).map_err(|e| not_started(e.into()))?),
        None => None,
    };
    let turn = start(&args, conn, &prompt, schema)
        .await
        .map_err(not_started)?;
    if args.detach {
        // The prompt is the daemon's now: it runs whether anyone follows it or not.
        if args.json {
            let line = serde_json::json!({
                "type": "detached",
                "sessionId": turn.session_id,
                "turnId": turn.turn_id,
            });
            output::line(&line.to_string())?;
        } else {
            output::line(&turn.session_id)?;
        }
        return Ok(0);
    }
    let Started {
        client,
        session_id,
        events,
        turn_id,
        after_seq,
        interactive,
        started,
    } = turn;
    let mut interrupts = signal(SignalKind::interrupt()).context("cannot watch Ctrl-C")?;
    // Redirected, stdout carries the final answer alone (as `codex exec` and `claude -p`);
    // on a terminal both streams show on one screen, so the text streams where it is read.
    let answer_only = !args.json && !std::io::stdout().is_terminal();

    let mut follow = Follow {
        client: Arc::new(Mutex::new(client)),
        opts: connect_options(conn, args.yes || interactive),
        session_id: &session_id,
        json: args.json,
        yes: args.yes,
        interactive,
        prompted: Arc::default(),
        tracker: TurnTracker::new(turn_id),
        renderer: match answer_only {
            true => HumanRenderer::new(false).text_on_stderr(),
            false => HumanRenderer::new(false),
        },
        last_seq: after_seq,
        stdout: String::new(),
        deadline: args
            .timeout
            .map(|secs| started + Duration::from_secs_f64(secs)),
        timed_out: false,
        turn_started: false,
    };
    let result = follow.follow(events, &mut interrupts).await;
    follow.flush()?;
    if args.ephemeral {
        // However the turn ended; a session that is already gone is fine.
        let client = follow.client.locked().clone();
        if let Err(e) = client.session_delete(&session_id).await
            && e.code() != Some(amber_proto::errors::SESSION_NOT_FOUND)
        {
            note(&format!(
                "could not delete the ephemeral session {session_id}: {e}"
            ));
        }
    }
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if !args.json {
        output::emit(follow.renderer.finish())?;
        if answer_only && !follow.tracker.text().is_empty() {
            output::line(follow.tracker.text().trim_end_matches('\n'))?;
        }
        // Before the denials: a run that had some ends with their line (scripts read it).
        if let Some(completion) = follow.tracker.completion() {
            if let Some(cost) = cost_summary(completion.cost_usd, completion.session_cost_usd) {
                note(&cost);
            }
            if let Some(confirm) = completion.confirm_usage.as_ref().and_then(confirm_summary) {
                note(&confirm);
            }
        }
        if let Some(line) = crate::turn::NetworkSummary::of(follow.tracker.network())
            .and_then(|summary| summary.refusals_line())
        {
            note(&line);
        }
        if let Some(summary) = denials_summary(follow.tracker.denials()) {
            note(&summary);
        }
    }
    let timeout_note = args
        .timeout
        .map(|secs| format!("the run timed out after {secs} s and its turn was cancelled"));
    match result {
        Ok(Ended::Completed) => {
            let stop = follow
                .tracker
                .completion()
                .map(|c| c.stop_reason)
                .unwrap_or(StopReason::Error);
            // Timed out: the cancel it sent is how the turn ended (a turn that ended on its
            // own as the cancel went out keeps its own code).
            let timed_out = follow.timed_out && stop == StopReason::Cancelled;
            if args.json {
                let mut line = ResultLine::of(&follow.tracker, &session_id, elapsed);
                if timed_out && line.error.is_none() {
                    line.error = Some(ErrorInfo::new(
                        "timeout",
                        timeout_note.clone().unwrap_or_default(),
                    ));
                }
                output::line(&serde_json::to_string(&line)?)?;
            }
            if timed_out {
                note(&timeout_note.unwrap_or_default());
                return Ok(exit::TIMED_OUT);
            }
            Ok(exit_code(stop, !follow.tracker.denials().is_empty()))
        }
        Ok(Ended::Abandoned) => Ok(exit::CANCELLED),
        Ok(Ended::TimedOutQueued) => {
            let message = format!(
                "the run timed out after {} s before its turn started (another turn of the \
                 session ran); the prompt stays queued",
                args.timeout.unwrap_or_default()
            );
            if args.json {
                let mut line =
                    ResultLine::failed(&follow.tracker, &session_id, elapsed, message.clone());
                line.error = Some(ErrorInfo::new("timeout", message.clone()));
                output::line(&serde_json::to_string(&line)?)?;
            }
            note(&message);
            Ok(exit::TIMED_OUT)
        }
        Err(e) => {
            if args.json {
                let line =
                    ResultLine::failed(&follow.tracker, &session_id, elapsed, format!("{e:#}"));
                output::line(&serde_json::to_string(&line)?)?;
            }
            if follow.timed_out {
                note(&format!("{e:#}"));
                return Ok(exit::TIMED_OUT);
            }
            Err(e)
        }
    }
}

/// A turn that has been prompted, with its event stream.
struct Started {
    client: Client,
    session_id: String,
    events: RawEventStream,
    turn_id: String,
    after_seq: u64,
    interactive: bool,
    /// When the prompt was sent.
    started: Instant,
}

/// Connects, opens or creates the session, subscribes and sends the prompt.
async fn start(
    args: &RunArgs,
    conn: &ConnectArgs,
    prompt: &str,
    output_schema: Option<serde_json::Value>,
) -> anyhow::Result<Started> {
    // On a terminal (and with the prompt not read from stdin) approvals are asked inline;
    // otherwise only `--yes` answers them, and denials show in the result.
    let interactive =
        !args.yes && std::io::stdin().is_terminal() && !prompt_from_stdin(&args.prompt);
    let opts = connect_options(conn, args.yes || interactive);
    let client = Client::connect(opts.clone()).await?;
    let (client, notes) = amber_client::drift::follow(client, &opts).await?;
    for note in notes {
        crate::output::note(&note);
    }
    let remote = client.remote().is_some();

    let (info, after_seq) = match &args.session {
        Some(id) => {
            let got = client.session_snapshot(id).await?;
            let info = match args.mode {
                Some(mode) => client.session_set_mode(id, mode.into()).await?,
                None => got.session,
            };
            (info, got.last_seq)
        }
        None => {
            let environment = match args.fleet {
                true => Some("fleet".to_owned()),
                false => args.environment.clone(),
            };
            let elsewhere = environment
                .as_deref()
                .is_some_and(|e| !e.trim().is_empty() && e.trim() != "local");
            let cwd = match (elsewhere, remote) {
                // A path on the executor's machine, as given (or the environment's own).
                (true, _) => args
                    .cwd
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                (false, true) => remote_workspace(args.cwd.as_deref())?,
                (false, false) => workspace(args.cwd.as_deref())?,
            };
            let params = SessionNewParams {
                cwd,
                mode: args.mode.map(Into::into),
                model: args.model.clone(),
                provider: args.provider.clone(),
                agent: args.agent.clone(),
                sandbox: args.sandbox_request(),
                worktree: args.worktree_request(),
                max_budget_usd: args.max_budget_usd,
                max_tokens_total: args.max_tokens_total,
                name: args.name.clone(),
                environment,
                repo: args.repo.clone(),
                git_ref: args.git_ref.clone(),
                setup: args.setup.clone(),
                labels: args.labels.iter().cloned().collect(),
                priority: args.priority,
                push: args.push.as_ref().map(|branch| amber_proto::PushParams {
                    branch: Some(branch.trim().to_owned()).filter(|b| !b.is_empty()),
                }),
                ..SessionNewParams::default()
            };
            (client.session_new(&params).await?, 0)
        }
    };
    let session_id = info.session_id.clone();
    if args.json {
        // Liberal: a daemon that cannot list tools still runs the prompt.
        let tools = client
            .tool_list(Some(&session_id))
            .await
            .map_or_else(|_| Vec::new(), |listed| listed.tools);
        let line = SessionStartedLine::new(
            &info,
            args.session.is_some(),
            tools.into_iter().map(|t| t.name).collect(),
        );
        output::line(&serde_json::to_string(&line)?)?;
    }

    // Subscribed before the prompt is sent: live deltas are never replayed, so a turn's
    // first ones would be lost to a subscription the daemon set up after it began.
    let events = client.subscribe_raw(&session_id, Some(after_seq)).await?;
    let started = Instant::now();
    let params = SessionPromptParams {
        session_id: session_id.clone(),
        text: prompt.to_owned(),
        output_schema,
        max_iterations: args.max_iterations,
    };
    let turn_id = match client.session_prompt_with(&params).await {
        Ok(result) => result.turn_id,
        Err(e) => {
            // Refused (an invalid schema): a session made for this run goes again.
            if args.session.is_none() {
                let _ = client.session_delete(&session_id).await;
            }
            return Err(e.into());
        }
    };
    Ok(Started {
        client,
        session_id,
        events,
        turn_id,
        after_seq,
        interactive,
        started,
    })
}

/// How following a turn ended.
enum Ended {
    /// Its `turn_completed` arrived.
    Completed,
    /// A second Ctrl-C: leave at once.
    Abandoned,
    /// `--timeout` ran out while the prompt still waited behind another turn: nothing of
    /// ours to cancel (`session/cancel` would end the other turn).
    TimedOutQueued,
}

/// How this client answers one approval request.
enum Reply {
    Allow,
    Deny,
    /// Ask the user at the terminal, showing this description.
    Ask(String),
}

struct Follow<'a> {
    /// The connection in use: a new one after a reconnection (answers to approvals
    /// still open go out on it).
    client: Arc<Mutex<Client>>,
    /// How to connect again when the connection is lost.
    opts: amber_client::ConnectOptions,
    session_id: &'a str,
    json: bool,
    yes: bool,
    /// Ask approvals on the terminal.
    interactive: bool,
    /// Approval requests with a terminal prompt open: one resolved elsewhere is dismissed.
    prompted: Arc<Mutex<HashSet<String>>>,
    tracker: TurnTracker,
    renderer: HumanRenderer,
    /// Highest durable seq seen; replays after a resubscribe skip up to here.
    last_seq: u64,
    /// Output of the events handled since the last flush: a burst of events costs one
    /// write(2), not one per delta (a 20k-chunk stream was mostly syscalls).
    stdout: String,
    /// `--timeout`: when the turn is cancelled; after that, when following gives up.
    deadline: Option<Instant>,
    /// `--timeout` ran out and the turn was cancelled.
    timed_out: bool,
    /// This run's `turn_started` was seen.
    turn_started: bool,
}

impl Follow<'_> {
    /// The connection in use.
    fn client(&self) -> Client {
        self.client.locked().clone()
    }

    async fn follow(
        &mut self,
        mut events: RawEventStream,
        interrupts: &mut tokio::signal::unix::Signal,
    ) -> anyhow::Result<Ended> {
        let mut cancel_sent = false;
        let mut resubscribes = 0;
        // An item read while draining a burst that is not an event (an error, the end).
        let mut stashed: Option<Option<Result<amber_client::RawEvent, ClientError>>> = None;
        loop {
            tokio::select! {
                item = async { match stashed.take() { Some(item) => item, None => events.next().await } } => match item {
                    Some(Ok(raw)) => {
                        let mut done = self.handle(&raw)?;
                        // Handle what has already arrived, then write it all at once.
                        while !done {
                            match events.next().now_or_never() {
                                Some(Some(Ok(raw))) => done = self.handle(&raw)?,
                                Some(other) => {
                                    stashed = Some(other);
                                    break;
                                }
                                None => break,
                            }
                        }
                        self.flush()?;
                        if done {
                            return Ok(Ended::Completed);
                        }
                    }
                    Some(Err(ClientError::SubscriptionClosed { reason }))
                        if self.client().is_connected() && resubscribes < MAX_RESUBSCRIBES =>
                    {
                        resubscribes += 1;
                        note(&format!("event stream closed ({reason}); resuming after seq {}", self.last_seq));
                        match self.client().subscribe_raw(self.session_id, Some(self.last_seq)).await {
                            Ok(resumed) => events = resumed,
                            // The connection went too: reconnect (the next round).
                            Err(e) if reconnect::is_connection_loss(&e, &self.client()) => {
                                stashed = Some(Some(Err(e)));
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    Some(Err(e)) if reconnect::is_connection_loss(&e, &self.client()) => {
                        self.flush()?;
                        let interrupted = async {
                            interrupts.recv().await;
                        };
                        match reconnect::resume(&self.opts, self.session_id, self.last_seq, &e, interrupted).await? {
                            Some((client, resumed)) => {
                                *self.client.locked() = client;
                                events = resumed;
                                self.renderer.resumed();
                                self.answer_pending().await;
                            }
                            None => return Ok(Ended::Abandoned),
                        }
                    }
                    Some(Err(e)) => return Err(e.into()),
                    None => anyhow::bail!("the event stream ended before the turn completed"),
                },
                () = sleep_until(self.deadline) => {
                    if self.timed_out {
                        anyhow::bail!(
                            "the turn did not end within {} s of its cancel",
                            CANCEL_GRACE.as_secs()
                        );
                    }
                    if !self.turn_started {
                        return Ok(Ended::TimedOutQueued);
                    }
                    self.timed_out = true;
                    self.deadline = Some(Instant::now() + CANCEL_GRACE);
                    if !self.json {
                        let pieces = self.renderer.finish();
                        self.write(pieces)?;
                    }
                    self.flush()?;
                    if let Err(e) = self.client().session_cancel(self.session_id).await {
                        note(&format!("cancel failed: {e}"));
                    }
                }
                _ = interrupts.recv() => {
                    if cancel_sent {
                        return Ok(Ended::Abandoned);
                    }
                    cancel_sent = true;
                    if !self.json {
                        let pieces = self.renderer.finish();
                        self.write(pieces)?;
                    }
                    self.flush()?;
                    note("cancelling the turn (Ctrl-C again to exit at once)");
                    if let Err(e) = self.client().session_cancel(self.session_id).await {
                        note(&format!("cancel failed: {e}"));
                    }
                }
            }
        }
    }

    /// Handles one event; true once this turn's `turn_completed` has been handled.
    fn handle(&mut self, raw: &amber_client::RawEvent) -> anyhow::Result<bool> {
        let Some(event) = &raw.event else {
            // An event type this client does not know: pass it through in JSON mode.
            if self.json
                && output::raw_turn_id(raw.json()).as_deref() == Some(self.tracker.turn_id())
            {
                self.push_line(raw.json());
            }
            return Ok(false);
        };
        if let Some(seq) = event.seq {
            if seq <= self.last_seq {
                return Ok(false);
            }
            self.last_seq = seq;
        }
        if let EventKind::ApprovalRequested(approval) = &event.kind {
            self.on_approval(approval);
        }
        if let EventKind::ApprovalResolved {
            request_id,
            decision,
            ..
        } = &event.kind
            && self.dismiss_prompt(request_id)
        {
            self.flush()?;
            // The prompt's line is still open.
            eprintln!();
            note(&format!(
                "approval {request_id} was answered elsewhere ({}): ignore the prompt above",
                amber_client::turn::decision_name(*decision)
            ));
        }
        if matches!(event.kind, EventKind::Synced { .. }) {
            self.renderer.synced();
        }
        // The replay marker has no turn; `--json` prints every event, so it too.
        if self.json && matches!(event.kind, EventKind::Synced { .. }) {
            self.push_line(raw.json());
            return Ok(false);
        }
        if !self.tracker.is_mine(event) {
            return Ok(false);
        }
        if self.json {
            self.push_line(raw.json());
        } else {
            let pieces = self.renderer.render(event);
            self.write(pieces)?;
        }
        if matches!(event.kind, EventKind::TurnStarted { .. }) {
            self.turn_started = true;
        }
        self.tracker.observe(event);
        Ok(self.tracker.completion().is_some())
    }

    fn push_line(&mut self, line: &str) {
        self.stdout.push_str(line);
        self.stdout.push('\n');
    }

    /// Rendered pieces: stdout text is buffered; stderr goes out at once, after what
    /// stdout had before it, so a terminal shows them in order.
    fn write(&mut self, pieces: Vec<Out>) -> std::io::Result<()> {
        for piece in pieces {
            match piece {
                Out::Stdout(text) => self.stdout.push_str(&text),
                Out::Stderr(_) => {
                    self.flush()?;
                    output::emit(vec![piece])?;
                }
            }
        }
        Ok(())
    }

    /// Writes and flushes what was buffered.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.stdout.is_empty() {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        out.write_all(self.stdout.as_bytes())?;
        self.stdout.clear();
        out.flush()
    }

    /// Answers (or asks about) one approval request, as this run answers them.
    fn on_approval(&self, a: &amber_proto::Approval) {
        if self.yes && yes_decision(a.unsandboxed, a.person_only) == Decision::AllowOnce {
            self.answer(a.request_id.clone(), Reply::Allow);
        } else if self.yes && !self.interactive {
            // `--yes` answers for the policy's questions, never for what only a person may
            // answer: with nobody at a terminal to ask, it is denied.
            note(&format!("denied {}: {}", a.tool, yes_refusal(a)));
            self.answer(a.request_id.clone(), Reply::Deny);
        } else if self.interactive {
            let mut description = ask::describe(&a.tool, &a.arguments, &a.reason, &a.scope);
            if a.unsandboxed {
                description.push_str("\n  ! this runs WITHOUT the OS sandbox: it can write anywhere you can and reach the network");
            }
            if a.person_only {
                description.push_str("\n  ! ");
                description.push_str(amber_client::turn::person_only_note(&a.tool));
            }
            self.answer(a.request_id.clone(), Reply::Ask(description));
        }
    }

    /// After a reconnection: the approval requests still open that this run saw before
    /// (their answer may have been lost with the old connection) are answered again; a
    /// terminal prompt still open answers on the new connection by itself.
    async fn answer_pending(&self) {
        let pending = match self.client().session_snapshot(self.session_id).await {
            Ok(got) => got.pending_approvals,
            Err(e) => {
                note(&format!("cannot read the open approval requests: {e}"));
                return;
            }
        };
        for approval in pending {
            if !lock(&self.prompted).contains(&approval.request_id) {
                self.on_approval(&approval);
            }
        }
    }

    /// Answers an approval request without holding up the events: `allow_once` for
    /// `--yes` (no description), or whatever the user picks at the terminal prompt.
    fn answer(&self, request_id: String, reply: Reply) {
        let client = Arc::clone(&self.client);
        let session_id = self.session_id.to_owned();
        let prompted = Arc::clone(&self.prompted);
        if matches!(reply, Reply::Ask(_)) {
            lock(&prompted).insert(request_id.clone());
        }
        tokio::spawn(async move {
            let decision = match reply {
                Reply::Allow => Decision::AllowOnce,
                Reply::Deny => Decision::Deny,
                Reply::Ask(description) => {
                    let decision = match tokio::task::spawn_blocking(move || {
                        ask::prompt(&description)
                    })
                    .await
                    {
                        Ok(decision) => decision,
                        Err(_) => Decision::Deny,
                    };
                    if !lock(&prompted).remove(&request_id) {
                        // Dismissed: answered elsewhere while the prompt was open.
                        return;
                    }
                    decision
                }
            };
            let client = client.locked().clone();
            match client
                .approval_respond(&session_id, &request_id, decision)
                .await
            {
                Ok(r) if !r.accepted => note("that approval was already answered elsewhere"),
                Ok(_) => {}
                Err(e) => note(&format!("could not answer approval {request_id}: {e}")),
            }
        });
    }
}

impl Follow<'_> {
    /// Forgets an open terminal prompt for `request_id`; true if there was one.
    fn dismiss_prompt(&self, request_id: &str) -> bool {
        lock(&self.prompted).remove(request_id)
    }
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The open-prompt set; a poisoned lock still holds a usable set.
fn lock(set: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    set.locked()
}

/// The result line of a run that failed before its turn began.
fn write_not_started(args: &RunArgs, begun: Instant, e: &anyhow::Error) -> anyhow::Result<()> {
    let elapsed = u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX);
    let code = if e.downcast_ref::<UsageError>().is_some() {
        "usage".to_owned()
    } else {
        e.downcast_ref::<ClientError>()
            .and_then(ClientError::code)
            .map_or_else(|| "client".to_owned(), |c| c.to_string())
    };
    let session_id = args.session.clone().unwrap_or_default();
    let line = ResultLine::not_started(&session_id, elapsed, code, format!("{e:#}"));
    output::line(&serde_json::to_string(&line)?)?;
    Ok(())
}

/// The closing stderr line of a human run: what the turn cost, when the model has a price
/// (a local model has none, and saying so after every run is noise).
fn cost_summary(
    turn: Option<amber_proto::CostUsd>,
    session: Option<amber_proto::CostUsd>,
) -> Option<String> {
    match (turn, session) {
        (Some(turn), Some(session)) if session != turn => {
            Some(format!("cost {turn} (session {session})"))
        }
        (Some(turn), _) => Some(format!("cost {turn}")),
        (None, _) => None,
    }
}

/// The line under the cost: what of it the silent confirm exchange took, when priced (a
/// local model's tokens cost nothing worth a line; `--json` has them in `confirmUsage`).
fn confirm_summary(confirm: &amber_proto::Usage) -> Option<String> {
    let cost = confirm.cost_usd?;
    let cached = match confirm.cached_tokens {
        0 => String::new(),
        n => format!(", {n} cached"),
    };
    Some(format!(
        "  of which the confirm exchange: {cost} ({} prompt tokens{cached})",
        confirm.prompt_tokens
    ))
}
