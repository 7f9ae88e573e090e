//! The runner fleet's control plane (docs/fleet.md), on daemons of this KPI's own with real
//! `amber-exec runner` processes on loopback (TLS, the pool's token) that clone a one-commit
//! bare repository over `file://`. Opt-in (`--only fleet`): it starts 21 runners and makes
//! 1,200 sessions.
//!
//! - **Assignment on an idle runner.** One runner of capacity 1 whose poll is waiting. Per
//!   run a yolo fleet session is made and subscribed to (from seq 0) as soon as `session/new`
//!   answers, as `amber-cli run --fleet` does: `session/new` sent → its `fleet_changed
//!   {assigned}` received, and → `environment_connected` (cloned there and attached: the
//!   session can run). An event published before the subscription comes in its replay, so
//!   the client's figure is an upper bound; amberd's own timestamp on the event (1 ms
//!   resolution, same clock) is reported beside it. With `idle_release_secs = 0` the session
//!   leaves the runner once connected; the next run waits until the runner's `/metrics`
//!   says it holds nothing.
//! - **One amberd under load.** [`LOAD_RUNNERS`] runners of [`LOAD_CAPACITY`] and
//!   [`LOAD_QUEUED`] more sessions than their slots, made [`CREATE_CONNECTIONS`] at a time
//!   with no prompt; an idle session keeps its runner (`idle_release_secs = 3600`), so the
//!   slots stay full and the rest stay queued. Sessions/s, the time until every slot is
//!   assigned and connected, amberd's RSS then, `session/list` under that load, and a durable
//!   event's round trip: `session/prompt` on one connection → its `prompt_queued` on another
//!   connection's subscription. No method without a turn makes a durable event, so each
//!   prompt runs a turn (one scripted text answer from this KPI's own endpoint), let finish
//!   before the next.
//!
//! Where a session stands is read from amberd's fleet (`/metrics`), not from the sessions'
//! info alone: a new session's `queued` can overtake its `assigned` ([`STALE_NOTE`]). Both
//! parts count the sessions it happened to.

mod kit;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use amber_client::{Client, RawEventStream};
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{
    EnvironmentState, EventKind, FleetState, Mode, SessionInfo, SessionNewParams, StopReason,
};
use futures::StreamExt;

use crate::daemon::{DaemonProc, DaemonSpec, rss_kib, sibling};
use crate::error::BenchError;
use crate::report::Report;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;
use kit::{FleetKit, POOL, Ports, Runners, metric, scrape};

/// Assignments measured on the idle runner (`--runs`).
const ASSIGN_RUNS: usize = 20;
/// Assignments before those, not measured: the first clone warms git and the page cache.
const ASSIGN_WARMUP: usize = 2;
/// The load: runners, the sessions each holds, and sessions queued beyond all their slots.
const LOAD_RUNNERS: u32 = 20;
const LOAD_CAPACITY: u32 = 10;
const LOAD_QUEUED: usize = 1_000;
/// `session/new` calls in flight while the load is made, each on a connection of its own.
const CREATE_CONNECTIONS: usize = 4;
/// Assigned sessions whose event round trip is timed.
const EVENT_SESSIONS: usize = 50;
/// Prompts each of them gets (`--runs`, at most this).
const EVENT_ROUNDS: usize = 4;
/// `session/list` calls timed under the load (`--runs`).
const LIST_RUNS: usize = 20;
/// An idle session under load keeps its runner this long: longer than the KPI.
const KEEP_IDLE_SECS: u64 = 3600;
/// How long the runners may take to dial in, and the load to be in place (its clones
/// share 2 cores with amberd).
const RUNNERS_TIMEOUT: Duration = Duration::from_secs(60);
const LOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one session's events (or a turn) may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for allocations to settle before RSS is read.
const SETTLE: Duration = Duration::from_millis(500);
/// After the idle runner holds nothing: time for its next poll to reach amberd.
const POLL_SETTLE: Duration = Duration::from_millis(100);
/// How often the load's progress is read: amberd's `/metrics` (cheap) and `session/list`.
const METRICS_EVERY: Duration = Duration::from_millis(100);
const LIST_EVERY: Duration = Duration::from_millis(500);
/// The prompt of the event round trips; the endpoint answers it with one short text.
const PING: &str = "fleet bench ping";

/// Milliseconds in a day: event stamps are compared as times of day.
const DAY_MS: u64 = 86_400_000;

/// Both measurements.
pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let amber_exec = sibling(None, "amber-exec", "amber-exec")?;
    let kit = FleetKit::new(s.scratch.path())?;
    // The turns of the event round trips need a model; this KPI's own, whatever --base-url says.
    let endpoint = MockLlm::builder()
        .model(&s.args.model)
        .timings_only()
        .start_blocking()?;
    endpoint.set_responder(|_| MockTurn::text("pong"));
    let spec = DaemonSpec {
        base_url: endpoint.base_url(),
        api_key: Some("amber-bench".to_owned()),
        ..s.spec.clone()
    };
    idle_assignment(s, &kit, &amber_exec, &spec).await?;
    under_load(s, &kit, &amber_exec, &spec).await
}

/// A yolo fleet session on the kit's repository, no labels.
fn fleet_session(repo_url: &str) -> SessionNewParams {
    SessionNewParams {
        cwd: String::new(),
        environment: Some("fleet".to_owned()),
        repo: Some(repo_url.to_owned()),
        git_ref: Some("main".to_owned()),
        mode: Some(Mode::Yolo),
        ..SessionNewParams::default()
    }
}

/// Waits until amberd's `/metrics` counts `want` connected runners.
async fn wait_for_runners(
    kit: &FleetKit,
    runners: &mut Runners,
    metrics_port: u16,
    want: u32,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + RUNNERS_TIMEOUT;
    let mut connected = 0.0;
    while Instant::now() < deadline {
        let page = scrape(metrics_port).await.unwrap_or_default();
        connected = metric(
            &page,
            "amber_runners",
            &[("pool", POOL), ("state", "connected")],
        )
        .unwrap_or(0.0);
        if connected >= f64::from(want) {
            return Ok(());
        }
        if let Some((id, status)) = runners.exited() {
            return Err(BenchError::Failed(format!(
                "runner {id} exited ({status}): {}",
                kit.log_tail(&id)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(BenchError::Failed(format!(
        "{connected} of {want} runners connected in {} s",
        RUNNERS_TIMEOUT.as_secs()
    )))
}

/// One assignment on the idle runner, from `session/new` sent.
#[derive(Debug, Default)]
struct Assignment {
    answered_ms: f64,
    assigned_ms: f64,
    assigned_stamped_ms: f64,
    connected_ms: f64,
    connected_stamped_ms: f64,
    /// A `fleet_changed {queued}` came after `{assigned}` ([`STALE_NOTE`]).
    out_of_order: bool,
}

#[derive(Debug, Default)]
struct AssignSamples {
    answered: Vec<f64>,
    assigned: Vec<f64>,
    assigned_stamped: Vec<f64>,
    connected: Vec<f64>,
    connected_stamped: Vec<f64>,
    out_of_order: usize,
}

impl AssignSamples {
    fn push(&mut self, a: &Assignment) {
        self.answered.push(a.answered_ms);
        self.assigned.push(a.assigned_ms);
        self.assigned_stamped.push(a.assigned_stamped_ms);
        self.connected.push(a.connected_ms);
        self.connected_stamped.push(a.connected_stamped_ms);
        self.out_of_order += usize::from(a.out_of_order);
    }
}

async fn idle_assignment(
    s: &mut Suite,
    kit: &FleetKit,
    amber_exec: &Path,
    spec: &DaemonSpec,
) -> Result<(), BenchError> {
    let runs = s.args.runs(ASSIGN_RUNS);
    let ports = Ports::free()?;
    let runner_metrics = kit::free_port()?;
    let spec = DaemonSpec {
        extra_config: kit.config(ports, 0),
        ..spec.clone()
    };
    let daemon = DaemonProc::start(&spec, "fleet").await?;
    let mut runners = Runners::default();
    let child = kit.runner(amber_exec, ports.executors, "idle", 1, Some(runner_metrics))?;
    runners.push("idle", child);
    wait_for_runners(kit, &mut runners, ports.metrics, 1).await?;
    let client = Client::connect(task::connect_options(&daemon.socket)).await?;
    let mut samples = AssignSamples::default();
    for i in 0..ASSIGN_WARMUP + runs {
        wait_runner_idle(runner_metrics).await?;
        let a = assign_once(&client, kit).await?;
        if i >= ASSIGN_WARMUP {
            samples.push(&a);
        }
    }
    report_assignment(&mut s.report, runs, &samples);
    drop(client);
    drop(runners);
    tokio::task::spawn_blocking(move || daemon.stop())
        .await
        .ok();
    Ok(())
}

/// Waits until the runner serving `/metrics` on `port` holds no session, then for its
/// next poll to reach amberd.
async fn wait_runner_idle(port: u16) -> Result<(), BenchError> {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let page = scrape(port).await.unwrap_or_default();
        if metric(&page, "amber_runner_sessions", &[]) == Some(0.0) {
            tokio::time::sleep(POLL_SETTLE).await;
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Failed(
                "the idle runner still holds a session after 60 s".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Makes a fleet session, follows it until it is parked again (assigned, connected, let
/// go), then deletes it. A session told `queued` after `assigned` is never let go (its
/// info no longer says assigned): it is deleted once connected, and the runner drops it at
/// its next heartbeat.
async fn assign_once(client: &Client, kit: &FleetKit) -> Result<Assignment, BenchError> {
    let params = fleet_session(&kit.repo_url);
    let sent_wall = wall_ms_of_day(SystemTime::now());
    let sent = Instant::now();
    let id = client.session_new(&params).await?.session_id;
    let answered = sent.elapsed();
    let mut events = client.subscribe_raw(&id, Some(0)).await?;
    let mut assigned = None;
    let mut connected = None;
    let mut out_of_order = false;
    let followed = tokio::time::timeout(EVENT_TIMEOUT, async {
        while let Some(item) = events.next().await {
            let at = sent.elapsed();
            let Some(event) = item?.event else { continue };
            let stamped = ms_of_day(&event.time).map(|t| stamped_after(sent_wall, t));
            match event.kind {
                EventKind::FleetChanged {
                    environment,
                    reason,
                } => match environment.fleet.map(|f| f.state) {
                    Some(FleetState::Assigned) => assigned = Some((at, stamped)),
                    Some(FleetState::Queued) if assigned.is_some() => out_of_order = true,
                    Some(FleetState::Parked) => return Ok(()),
                    Some(FleetState::Failed) => {
                        return Err(BenchError::Failed(format!(
                            "fleet session {id} failed: {}",
                            reason.unwrap_or_default()
                        )));
                    }
                    Some(FleetState::Queued) | None => {}
                },
                EventKind::EnvironmentConnected { .. } => connected = Some((at, stamped)),
                _ => {}
            }
            if out_of_order && connected.is_some() {
                return Ok(());
            }
        }
        Err(BenchError::Failed(format!(
            "fleet session {id}: the subscription ended before it was parked"
        )))
    })
    .await;
    drop(events);
    match followed {
        Ok(result) => result?,
        Err(_) => {
            return Err(BenchError::Failed(format!(
                "fleet session {id}: not assigned, connected and let go in 60 s"
            )));
        }
    }
    client.session_delete(&id).await?;
    let (Some((assigned_at, assigned_stamped)), Some((connected_at, connected_stamped))) =
        (assigned, connected)
    else {
        return Err(BenchError::Failed(format!(
            "fleet session {id} was parked without being assigned and connected"
        )));
    };
    Ok(Assignment {
        answered_ms: ms(answered),
        assigned_ms: ms(assigned_at),
        assigned_stamped_ms: assigned_stamped.map_or(f64::NAN, |v| v as f64),
        connected_ms: ms(connected_at),
        connected_stamped_ms: connected_stamped.map_or(f64::NAN, |v| v as f64),
        out_of_order,
    })
}

fn report_assignment(r: &mut Report, runs: usize, m: &AssignSamples) {
    r.section(&format!(
        "Fleet: assignment on an idle runner (1 runner, capacity 1; {runs} sessions one at a time, after {ASSIGN_WARMUP} unmeasured)"
    ));
    let rows: [(&str, &str, &[f64]); 5] = [
        (
            "fleet_session_new_ms",
            "`session/new` of a fleet session, answered",
            &m.answered,
        ),
        (
            "fleet_assign_ms",
            "`session/new` sent → its `fleet_changed {assigned}` received (subscribed once `session/new` answered)",
            &m.assigned,
        ),
        (
            "fleet_assign_stamped_ms",
            "`session/new` sent → amberd's timestamp on that event (1 ms resolution)",
            &m.assigned_stamped,
        ),
        (
            "fleet_connected_ms",
            "`session/new` sent → `environment_connected` received (cloned on the runner and attached)",
            &m.connected,
        ),
        (
            "fleet_connected_stamped_ms",
            "`session/new` sent → amberd's timestamp on `environment_connected`",
            &m.connected_stamped,
        ),
    ];
    for (key, label, values) in rows {
        if let Some(summary) = Summary::of(values) {
            r.put_summary(key, label, &summary);
        }
    }
    r.put(
        "fleet_assign_out_of_order_count",
        "sessions told `fleet_changed {queued}` after `{assigned}` (amberd's race, see the notes)",
        m.out_of_order as f64,
    );
    if m.out_of_order > 0 {
        note_stale(r);
    }
}

/// Notes [`STALE_NOTE`] once.
fn note_stale(r: &mut Report) {
    if !r.notes().iter().any(|n| n == STALE_NOTE) {
        r.note(STALE_NOTE);
    }
}

/// What a stale fleet state means, for the notes.
const STALE_NOTE: &str = "fleet: amberd tells a new session `queued` after unlocking its queue, and a \
runner's poll on another thread can assign it and tell `assigned` first: the late `queued` \
then stands in the session's info (and its metadata) while the fleet has it assigned and its \
runner attached; such a session is never released when idle, and a turn on it waits for a \
runner forever";

/// Where the load's sessions stand, from one `session/list`.
#[derive(Debug, Default)]
struct Tally {
    queued: usize,
    /// Assigned and attached on their runner: the sessions the event round trips use.
    connected: Vec<String>,
    /// Attached on their runner, but their info says `queued` ([`STALE_NOTE`]).
    stale: usize,
    failed: usize,
}

impl Tally {
    fn of(sessions: &[SessionInfo]) -> Tally {
        let mut t = Tally::default();
        for info in sessions {
            let Some(environment) = &info.environment else {
                continue;
            };
            let attached = environment.state == EnvironmentState::Connected;
            match environment.fleet.as_ref().map(|f| f.state) {
                Some(FleetState::Queued) if attached => t.stale += 1,
                Some(FleetState::Queued) => t.queued += 1,
                Some(FleetState::Assigned) if attached => {
                    t.connected.push(info.session_id.clone());
                }
                Some(FleetState::Failed) => t.failed += 1,
                Some(FleetState::Assigned | FleetState::Parked) | None => {}
            }
        }
        t
    }
}

/// What the load measured.
#[derive(Debug, Default)]
struct Load {
    created: usize,
    create_wall: Duration,
    create: Vec<f64>,
    assigned_after: Option<Duration>,
    in_place_after: Duration,
    stale: usize,
    rss_runners_only_kib: u64,
    rss_loaded_kib: u64,
    runner_rss_mib: Vec<f64>,
    list: Vec<f64>,
    events: EventSamples,
}

async fn under_load(
    s: &mut Suite,
    kit: &FleetKit,
    amber_exec: &Path,
    spec: &DaemonSpec,
) -> Result<(), BenchError> {
    let running = (LOAD_RUNNERS * LOAD_CAPACITY) as usize;
    let total = running + LOAD_QUEUED;
    let ports = Ports::free()?;
    let spec = DaemonSpec {
        extra_config: kit.config(ports, KEEP_IDLE_SECS),
        ..spec.clone()
    };
    let daemon = DaemonProc::start(&spec, "fleet load").await?;
    let client = Client::connect(task::connect_options(&daemon.socket)).await?;
    let mut runners = Runners::default();
    for i in 0..LOAD_RUNNERS {
        let id = format!("r{i:02}");
        let child = kit.runner(amber_exec, ports.executors, &id, LOAD_CAPACITY, None)?;
        runners.push(&id, child);
    }
    wait_for_runners(kit, &mut runners, ports.metrics, LOAD_RUNNERS).await?;
    tokio::time::sleep(SETTLE).await;
    let mut load = Load {
        rss_runners_only_kib: rss_kib(daemon.pid)?,
        ..Load::default()
    };

    let mut creators = Vec::with_capacity(CREATE_CONNECTIONS);
    for _ in 0..CREATE_CONNECTIONS {
        creators.push(Client::connect(task::connect_options(&daemon.socket)).await?);
    }
    let params = fleet_session(&kit.repo_url);
    let started = Instant::now();
    let assigned_watch = tokio::spawn(time_until_assigned(ports.metrics, running, started));
    let made: Vec<Result<f64, amber_client::ClientError>> = futures::stream::iter(0..total)
        .map(|i| {
            let (creator, params) = (&creators[i % CREATE_CONNECTIONS], &params);
            async move {
                let t = Instant::now();
                creator.session_new(params).await.map(|_| ms(t.elapsed()))
            }
        })
        .buffer_unordered(CREATE_CONNECTIONS)
        .collect()
        .await;
    load.create_wall = started.elapsed();
    for result in made {
        load.create.push(result?);
    }
    load.created = load.create.len();
    drop(creators);

    let tally = match wait_for_load(&client, ports.metrics, running, started).await {
        Ok(tally) => tally,
        Err(e) => {
            assigned_watch.abort();
            return Err(e);
        }
    };
    load.in_place_after = started.elapsed();
    load.stale = tally.stale;
    let connected = tally.connected;
    load.assigned_after = assigned_watch.await.ok().flatten();
    tokio::time::sleep(SETTLE).await;
    load.rss_loaded_kib = rss_kib(daemon.pid)?;
    for pid in runners.pids() {
        load.runner_rss_mib.push(rss_kib(pid)? as f64 / 1024.0);
    }
    for _ in 0..s.args.runs(LIST_RUNS) {
        let t = Instant::now();
        client.session_list_all().await?;
        load.list.push(ms(t.elapsed()));
    }
    let rounds = s.args.runs(EVENT_ROUNDS).min(EVENT_ROUNDS);
    // Sessions whose info is stale are left out: a turn on one would wait for ever.
    let timed = &connected[..connected.len().min(EVENT_SESSIONS)];
    load.events = event_round_trips(&daemon.socket, timed, rounds).await?;
    report_load(&mut s.report, running, &load);
    drop(client);
    drop(runners);
    tokio::task::spawn_blocking(move || daemon.stop())
        .await
        .ok();
    Ok(())
}

/// How long after `started` amberd's `/metrics` first counted `want` assigned sessions;
/// `None` if not within [`LOAD_TIMEOUT`].
async fn time_until_assigned(port: u16, want: usize, started: Instant) -> Option<Duration> {
    while started.elapsed() < LOAD_TIMEOUT {
        let page = scrape(port).await.unwrap_or_default();
        let assigned = metric(&page, "amber_fleet_sessions", &[("state", "assigned")]);
        if assigned.is_some_and(|n| n >= want as f64) {
            return Some(started.elapsed());
        }
        tokio::time::sleep(METRICS_EVERY).await;
    }
    None
}

/// Waits until amberd's fleet counts `running` sessions assigned and [`LOAD_QUEUED`]
/// queued (its `/metrics`) and `session/list` shows `running` of them attached on their
/// runners; that list's tally. The fleet's own count is the one trusted: a session's info
/// can say `queued` while it is assigned ([`STALE_NOTE`]).
async fn wait_for_load(
    client: &Client,
    metrics_port: u16,
    running: usize,
    started: Instant,
) -> Result<Tally, BenchError> {
    loop {
        let page = scrape(metrics_port).await.unwrap_or_default();
        let count =
            |state| metric(&page, "amber_fleet_sessions", &[("state", state)]).unwrap_or(0.0);
        let (assigned, queued) = (count("assigned"), count("queued"));
        let tally = Tally::of(&client.session_list_all().await?);
        if tally.failed > 0 {
            return Err(BenchError::Failed(format!(
                "{} fleet sessions failed (their workspace could not be made)",
                tally.failed
            )));
        }
        let attached = tally.connected.len() + tally.stale;
        if assigned == running as f64 && queued == LOAD_QUEUED as f64 && attached == running {
            return Ok(tally);
        }
        if started.elapsed() > LOAD_TIMEOUT {
            return Err(BenchError::Failed(format!(
                "after {} s: {assigned} assigned and {queued} queued; expected {running} and {LOAD_QUEUED} \
                 (session/list: {attached} attached on their runners, {} queued)",
                LOAD_TIMEOUT.as_secs(),
                tally.queued,
            )));
        }
        tokio::time::sleep(LIST_EVERY).await;
    }
}

#[derive(Debug, Default)]
struct EventSamples {
    sessions: usize,
    queued: Vec<f64>,
    turn: Vec<f64>,
    failures: usize,
    first_failure: Option<String>,
}

impl EventSamples {
    fn fail(&mut self, why: String) {
        self.failures += 1;
        self.first_failure.get_or_insert(why);
    }
}

/// `rounds` prompts to each of `sessions`, one at a time, from one connection, timed to
/// their `prompt_queued` and `turn_completed` on another connection's subscriptions.
async fn event_round_trips(
    socket: &Path,
    sessions: &[String],
    rounds: usize,
) -> Result<EventSamples, BenchError> {
    let prompter = Client::connect(task::connect_options(socket)).await?;
    let watcher = Client::connect(task::connect_options(socket)).await?;
    let mut streams = Vec::with_capacity(sessions.len());
    for id in sessions {
        streams.push(watcher.subscribe_raw(id, None).await?);
    }
    let mut m = EventSamples {
        sessions: sessions.len(),
        ..EventSamples::default()
    };
    for _ in 0..rounds {
        for (id, stream) in sessions.iter().zip(&mut streams) {
            let sent = Instant::now();
            let (prompted, seen) = tokio::join!(
                prompter.session_prompt(id, PING),
                tokio::time::timeout(EVENT_TIMEOUT, follow_turn(stream, sent))
            );
            prompted?;
            match seen {
                Err(_) => m.fail(format!("session {id}: no turn_completed in 60 s")),
                Ok(Err(e)) => m.fail(format!("session {id}: {e}")),
                Ok(Ok(turn)) => match (turn.queued, turn.error) {
                    (Some(queued), None) => {
                        m.queued.push(ms(queued));
                        m.turn.push(ms(turn.completed));
                    }
                    (None, _) => m.fail(format!(
                        "session {id}: no prompt_queued before the turn ended"
                    )),
                    (_, Some(why)) => m.fail(format!("session {id}: {why}")),
                },
            }
        }
    }
    Ok(m)
}

/// One turn as a subscriber saw it, from the prompt sent.
struct TurnSeen {
    queued: Option<Duration>,
    completed: Duration,
    /// Why it did not end with `end_turn`.
    error: Option<String>,
}

async fn follow_turn(stream: &mut RawEventStream, sent: Instant) -> Result<TurnSeen, BenchError> {
    let mut queued = None;
    while let Some(item) = stream.next().await {
        let at = sent.elapsed();
        let Some(event) = item?.event else { continue };
        match event.kind {
            EventKind::PromptQueued { .. } => queued = Some(at),
            EventKind::TurnCompleted {
                stop_reason, error, ..
            } => {
                let error = (stop_reason != StopReason::EndTurn).then(|| {
                    let detail = error.map(|e| format!(": {}: {}", e.code, e.message));
                    format!("stop {stop_reason:?}{}", detail.unwrap_or_default())
                });
                return Ok(TurnSeen {
                    queued,
                    completed: at,
                    error,
                });
            }
            _ => {}
        }
    }
    Err(BenchError::Failed("the subscription ended mid-turn".into()))
}

fn report_load(r: &mut Report, running: usize, m: &Load) {
    r.section(&format!(
        "Fleet: one amberd holding {LOAD_QUEUED} queued + {running} running sessions across {LOAD_RUNNERS} runners (capacity {LOAD_CAPACITY})"
    ));
    r.put(
        "fleet_load_sessions_count",
        "fleet sessions made",
        m.created as f64,
    );
    r.put(
        "fleet_create_sessions_per_s",
        &format!("sessions made per second ({CREATE_CONNECTIONS} `session/new` in flight)"),
        m.created as f64 / m.create_wall.as_secs_f64(),
    );
    if let Some(summary) = Summary::of(&m.create) {
        r.put_summary(
            "fleet_create_ms",
            "`session/new` while they are made",
            &summary,
        );
    }
    if let Some(after) = m.assigned_after {
        r.put(
            "fleet_load_assigned_ms",
            &format!("first `session/new` sent → {running} assigned (amberd's `/metrics`, read every 100 ms)"),
            ms(after),
        );
    }
    r.put(
        "fleet_load_in_place_ms",
        &format!("first `session/new` sent → {running} assigned and attached on their runners, {LOAD_QUEUED} queued (amberd's `/metrics` and `session/list`, read every 500 ms)"),
        ms(m.in_place_after),
    );
    r.put(
        "fleet_load_stale_count",
        "of those, sessions whose info says `queued` while the fleet has them assigned and attached (amberd's race, see the notes)",
        m.stale as f64,
    );
    if m.stale > 0 {
        note_stale(r);
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    r.put(
        "fleet_rss_runners_only_mib",
        &format!("amberd RSS, {LOAD_RUNNERS} runners connected, no session"),
        mib(m.rss_runners_only_kib),
    );
    r.put(
        "fleet_rss_loaded_mib",
        "amberd RSS holding them all",
        mib(m.rss_loaded_kib),
    );
    r.put(
        "fleet_rss_per_session_kib",
        "amberd RSS per fleet session (loaded − runners only, over the sessions)",
        m.rss_loaded_kib.saturating_sub(m.rss_runners_only_kib) as f64 / m.created.max(1) as f64,
    );
    if let Some(summary) = Summary::of(&m.runner_rss_mib) {
        r.put_median(
            "fleet_runner_rss_mib",
            &format!("a runner's RSS holding {LOAD_CAPACITY} idle sessions"),
            &summary,
        );
    }
    if let Some(summary) = Summary::of(&m.list) {
        r.put_summary(
            "fleet_list_ms",
            "`session/list` of every session (all pages)",
            &summary,
        );
    }
    let e = &m.events;
    if let Some(summary) = Summary::of(&e.queued) {
        r.put_summary(
            "fleet_event_ms",
            &format!("`session/prompt` sent → its `prompt_queued` received on another connection ({} assigned sessions)", e.sessions),
            &summary,
        );
    }
    if let Some(summary) = Summary::of(&e.turn) {
        r.put_summary(
            "fleet_turn_ms",
            "`session/prompt` sent → `turn_completed` (one scripted text answer)",
            &summary,
        );
    }
    r.put(
        "fleet_event_failures_count",
        "prompts whose turn did not end with end_turn, or whose events did not come",
        e.failures as f64,
    );
    if let Some(why) = &e.first_failure {
        r.note(format!("fleet: first failed event round trip: {why}"));
    }
}

/// Milliseconds since midnight UTC of an RFC 3339 UTC time (`…T03:04:05.678Z`, as amberd
/// stamps events); `None` for any other shape.
fn ms_of_day(time: &str) -> Option<u64> {
    let clock = time.split_once('T')?.1.strip_suffix('Z')?;
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
    if parts.next().is_some() || h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Milliseconds: the first three digits of the fraction, padded.
    let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
    let millis: u64 = digits.parse().ok()?;
    Some(((h * 60 + m) * 60 + s) * 1000 + millis)
}

/// Milliseconds since midnight UTC of `t`, truncated as amberd's stamps are.
fn wall_ms_of_day(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| (d.as_millis() % u128::from(DAY_MS)) as u64)
}

/// How long after `sent` an event was stamped (both in ms of the day), across midnight; a
/// stamp before `sent` (a clock step) counts as 0.
fn stamped_after(sent: u64, stamped: u64) -> u64 {
    let after = (stamped + DAY_MS - sent % DAY_MS) % DAY_MS;
    if after > DAY_MS / 2 { 0 } else { after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_stamps_read_as_milliseconds_of_the_day() {
        for (time, want) in [
            (
                "2025-01-02T03:04:05.678Z",
                Some(((3 * 60 + 4) * 60 + 5) * 1000 + 678),
            ),
            ("2025-01-02T00:00:00.000Z", Some(0)),
            ("2025-01-02T23:59:59.999Z", Some(DAY_MS - 1)),
            ("2025-01-02T03:04:05Z", Some(((3 * 60 + 4) * 60 + 5) * 1000)),
            (
                "2025-01-02T03:04:05.5Z",
                Some(((3 * 60 + 4) * 60 + 5) * 1000 + 500),
            ),
            (
                "2025-01-02T03:04:05.123456Z",
                Some(((3 * 60 + 4) * 60 + 5) * 1000 + 123),
            ),
            ("2025-01-02T03:04:05.678+01:00", None),
            ("2025-01-02 03:04:05Z", None),
            ("2025-01-02T24:00:00Z", None),
            ("2025-01-02T03:04Z", None),
        ] {
            assert_eq!(ms_of_day(time), want, "{time}");
        }
    }

    #[test]
    fn stamps_after_the_send_wrap_at_midnight() {
        for (sent, stamped, want) in [
            (1_000, 1_000, 0),
            (1_000, 1_012, 12),
            (DAY_MS - 5, 3, 8),
            (1_000, 999, 0),
            (DAY_MS + 1_000, 1_004, 4),
        ] {
            assert_eq!(stamped_after(sent, stamped), want, "{sent} {stamped}");
        }
    }

    #[test]
    fn the_wall_clock_is_read_in_milliseconds_of_the_day() {
        let t =
            UNIX_EPOCH + Duration::from_millis(3 * DAY_MS + 45_678) + Duration::from_micros(900);
        assert_eq!(wall_ms_of_day(t), 45_678);
    }
}
