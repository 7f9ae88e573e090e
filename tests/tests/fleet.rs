//! The runner fleet end to end, on one host: amberd on the host, real `amber-exec runner`
//! processes each in a network namespace of its own ("machines"), a bare git repository
//! they clone over `file://`, and the scripted model.
//!
//! - Thirty sessions queued at once run to completion across three runners, none holding
//!   more than its capacity, each session's work in its own fresh clone.
//! - A runner with a wrong token, or of a pool amberd does not know, gets nothing; a session
//!   asking for a label waits for a runner that has it.
//! - SIGKILL to a busy runner: its sessions are queued again, say so, and finish on another
//!   runner from their newest checkpoint.
//! - SIGTERM drains a runner: no new work, its running turn finishes, then it exits.
//! - amberd killed with SIGKILL: queued sessions are still queued after the restart, and
//!   finish.
//! - A fleet session's call that needs a person waits for one, and runs only if allowed.
//! - A session follows its repository's instructions, rules and skills; a clone made while
//!   another session's command runs is out of that command's reach.
//! - A session that asked for a branch has each completed turn pushed there by its runner,
//!   on top of its last push, never over a branch that moved, and nothing it planted in its
//!   git directory runs.

use std::collections::BTreeMap;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::SessionNewParams;
use amber_tests::daemon::{DaemonOptions, TestDaemon};
use amber_tests::fleet::FleetKit;
use amber_tests::steps::{Events, FAST_RETRIES, connect, eventually, git, of_type};
use amber_tests::tool_calls::bash;
use serde_json::Value;

/// The scripted model: a prompt `task N [sleep S]` writes `out.txt` (N) in the workspace
/// and appends to `src/lib.txt`, sleeping S seconds first; once it has the result it says
/// `done N`; a call its runner took down runs again; `twice` adds a second call, which
/// appends `second-N`.
fn worker(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    if last["content"]
        .as_str()
        .is_some_and(|c| c.contains("Are you finished"))
    {
        return MockTurn::text("DONE");
    }
    let asked = messages
        .iter()
        .rposition(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("task "))
        })
        .unwrap_or(0);
    let prompt = messages[asked]["content"].as_str().unwrap_or("").to_owned();
    let task = prompt.split_whitespace().nth(1).unwrap_or("0").to_owned();
    let sleep = prompt
        .split_whitespace()
        .skip_while(|w| *w != "sleep")
        .nth(1)
        .unwrap_or("0.2")
        .to_owned();
    let results: Vec<&Value> = messages[asked..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    let command =
        format!("sleep {sleep} && echo {task} > out.txt && echo task-{task} >> src/lib.txt");
    match results.last() {
        None => bash(&format!("c{task}"), &command),
        // `twice`: a second call after the first.
        Some(_) if prompt.contains("twice") && results.len() == 1 => bash(
            &format!("c{task}-second"),
            &format!("echo second-{task} >> src/lib.txt"),
        ),
        // Its runner went down under it: the call runs again (on the next runner).
        Some(result)
            if result["content"]
                .as_str()
                .is_some_and(|c| c.contains("executor lost")) =>
        {
            let again = results.len();
            bash(
                &format!("c{task}-{again}"),
                &format!("{command} # again {again}"),
            )
        }
        Some(_) => MockTurn::text(format!("done {task}")),
    }
}

fn daemon(mock: &MockLlm, kit: &FleetKit, extra: &str) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!("{FAST_RETRIES}\n{}", kit.config(extra)),
        env: Vec::new(),
    })
}

/// A fleet of `machines` with amberd (its config with `extra` in `[fleet]`), the scripted
/// model answering as [`worker`], and a client.
struct Setup {
    kit: FleetKit,
    _mock: MockLlm,
    daemon: TestDaemon,
    client: amber_client::Client,
}

async fn setup(machines: u32, extra: &str) -> Setup {
    setup_with(machines, extra, worker).await
}

/// [`setup`] with the scripted model answering as `responder`.
async fn setup_with(machines: u32, extra: &str, responder: fn(&Value) -> MockTurn) -> Setup {
    let kit = FleetKit::new(machines);
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder);
    let daemon = daemon(&mock, &kit, extra);
    let client = connect(&daemon).await;
    Setup {
        kit,
        _mock: mock,
        daemon,
        client,
    }
}

/// A yolo fleet session's params: the kit's repository at `main`.
fn fleet_params(kit: &FleetKit) -> SessionNewParams {
    SessionNewParams {
        cwd: String::new(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some("fleet".to_owned()),
        repo: Some(kit.repo_url.clone()),
        git_ref: Some("main".to_owned()),
        ..SessionNewParams::default()
    }
}

/// Makes the session `params` describe; its id.
async fn create(client: &amber_client::Client, params: &SessionNewParams) -> String {
    client
        .session_new(params)
        .await
        .expect("a fleet session")
        .session_id
}

/// A yolo fleet session on the kit's repository (`labels` asked of its runner).
async fn fleet_session(
    client: &amber_client::Client,
    kit: &FleetKit,
    labels: &[(&str, &str)],
) -> String {
    let params = SessionNewParams {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..fleet_params(kit)
    };
    create(client, &params).await
}

/// Every durable event of `session` so far.
async fn history(client: &amber_client::Client, session: &str) -> Vec<Value> {
    let mut events = Events::subscribe(client, session, Some(0)).await;
    let mut all = Vec::new();
    loop {
        let event = events.next().await;
        if event["type"] == "synced" {
            return all;
        }
        all.push(event);
    }
}

/// Waits until `session`'s last turn completed; returns its history.
async fn finished(client: &amber_client::Client, session: &str, timeout: Duration) -> Vec<Value> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let all = history(client, session).await;
        if !of_type(&all, "turn_completed").is_empty() {
            return all;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "session {session} did not finish: {all:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The runners that held `session`, in order, from its `fleet_changed` events.
fn runners_of(events: &[Value]) -> Vec<String> {
    of_type(events, "fleet_changed")
        .iter()
        .filter(|e| e["environment"]["fleet"]["state"] == "assigned")
        .filter_map(|e| {
            e["environment"]["fleet"]["runner"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// The most sessions a runner's log says it held at once.
fn most_held(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("assigned"))
        .filter_map(|l| {
            l.split("held=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// The turn's own diff of `session`, through the CLI.
fn diff_of(daemon: &TestDaemon, session: &str) -> String {
    let out = daemon
        .cli()
        .args(["--no-autostart", "diff", session])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "amber-cli diff: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_sessions_queued_at_once_run_to_completion_across_three_runners_at_their_capacity() {
    let Setup {
        kit,
        _mock,
        daemon,
        client,
    } = setup(3, "").await;

    let mut sessions = Vec::new();
    for n in 0..30 {
        let id = fleet_session(&client, &kit, &[]).await;
        client
            .session_prompt(&id, &format!("task {n} sleep 0.3"))
            .await
            .expect("prompt");
        sessions.push((n, id));
    }
    // Queued before any runner exists: nothing ran yet.
    let listed = client.session_list_all().await.unwrap();
    let queued = listed
        .iter()
        .filter(|s| {
            s.environment
                .as_ref()
                .and_then(|e| e.fleet.as_ref())
                .is_some_and(|f| f.state == amber_proto::FleetState::Queued)
        })
        .count();
    assert_eq!(queued, 30, "every fleet session waits for a runner");

    let runners: Vec<_> = (0..3)
        .map(|m| kit.runner(m, &format!("r{m}"), 2, &[]))
        .collect();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    for (n, id) in &sessions {
        let events = finished(&client, id, Duration::from_secs(120)).await;
        let completed = of_type(&events, "turn_completed");
        assert_eq!(completed[0]["stopReason"], "end_turn", "{events:#?}");
        let held = runners_of(&events);
        assert_eq!(held.len(), 1, "held by one runner: {held:?}");
        *used.entry(held[0].clone()).or_default() += 1;
        // Its own workspace, cloned fresh: the turn's diff is its change and no other's.
        let diff = diff_of(&daemon, id);
        assert!(diff.contains("out.txt"), "{id}: {diff:?} {events:#?}");
        assert!(diff.contains(&format!("+task-{n}")), "{diff}");
        assert_eq!(diff.matches("+task-").count(), 1, "{diff}");
    }
    assert_eq!(used.len(), 3, "every runner took work: {used:?}");
    for runner in &runners {
        let most = most_held(&runner.log());
        assert!(most <= 2, "runner {} held {most} at once", runner.id);
    }
    assert!(
        runners.iter().any(|r| most_held(&r.log()) == 2),
        "some runner ran two at once"
    );
    // Released when idle: nothing is held and every workspace is gone.
    eventually("every workspace removed", Duration::from_secs(20), || {
        std::fs::read_dir(&kit.work).unwrap().count() == 0
    })
    .await;
    let listed = client.session_list_all().await.unwrap();
    assert!(listed.iter().all(|s| {
        s.environment
            .as_ref()
            .and_then(|e| e.fleet.as_ref())
            .is_some_and(|f| f.state == amber_proto::FleetState::Parked)
    }));
}

/// The fleet state of `session` as `session/list` shows it.
async fn fleet_state(
    client: &amber_client::Client,
    session: &str,
) -> Option<amber_proto::FleetInfo> {
    client
        .session_list_all()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.session_id == session)?
        .environment?
        .fleet
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_token_or_a_foreign_pool_gets_nothing_and_labels_choose_the_runner() {
    let Setup {
        kit,
        _mock,
        daemon,
        client,
    } = setup(2, "").await;
    let plain = fleet_session(&client, &kit, &[]).await;
    let gpu = fleet_session(&client, &kit, &[("gpu", "a100")]).await;
    client.session_prompt(&plain, "task 1").await.unwrap();
    client.session_prompt(&gpu, "task 2").await.unwrap();

    // A wrong token; the right token under a pool amberd does not know.
    let wrong = kit.tls.dir.path().join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let _impostor = kit.runner_with(0, "impostor", 4, "default", &wrong, &[]);
    let _foreign = kit.runner_with(1, "foreign", 4, "other", &kit.tls.token_file, &[]);
    eventually("both refused", Duration::from_secs(20), || {
        daemon.log().matches("refused a dialling executor").count() >= 2
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for session in [&plain, &gpu] {
        let state = fleet_state(&client, session).await.unwrap();
        assert_eq!(state.state, amber_proto::FleetState::Queued, "{state:?}");
        assert_eq!(state.attempts, 0);
    }
    assert!(
        !daemon.log().contains("a runner said hello"),
        "{}",
        daemon.log()
    );
    assert!(
        std::fs::read_dir(&kit.work).unwrap().next().is_none(),
        "nothing was cloned"
    );

    // A runner of the pool takes the plain session; the one asking for a GPU waits for a
    // runner that has one.
    let _plain_runner = kit.runner(0, "plain", 2, &[]);
    let events = finished(&client, &plain, Duration::from_secs(60)).await;
    assert_eq!(runners_of(&events), ["plain"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        fleet_state(&client, &gpu).await.unwrap().state,
        amber_proto::FleetState::Queued
    );
    let _gpu_runner = kit.runner(1, "gpu", 1, &["--label", "gpu=a100"]);
    let events = finished(&client, &gpu, Duration::from_secs(60)).await;
    assert_eq!(runners_of(&events), ["gpu"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_to_a_busy_runner_queues_its_session_again_and_it_finishes_elsewhere_from_its_checkpoint()
 {
    let Setup {
        kit,
        _mock,
        daemon,
        client,
    } = setup(2, "").await;
    let session = fleet_session(&client, &kit, &[]).await;
    let doomed = kit.runner(0, "doomed", 1, &[]);
    // A first turn leaves a checkpoint: out.txt and task-1 in src/lib.txt.
    client.session_prompt(&session, "task 1").await.unwrap();
    finished(&client, &session, Duration::from_secs(60)).await;
    // The second runs long on the same runner, which dies in the middle of it.
    client
        .session_prompt(&session, "task 2 sleep 5")
        .await
        .unwrap();
    calls_started(&client, &session, 2).await;
    let mut doomed = doomed;
    doomed.signal(libc::SIGKILL);
    doomed.wait_exit(Duration::from_secs(10));
    let _rescuer = kit.runner(1, "rescuer", 1, &[]);
    let all = finished_turns(&client, &session, 2, Duration::from_secs(60)).await;
    // Queued again, saying why, and taken by the other runner.
    let requeued = of_type(&all, "fleet_changed")
        .into_iter()
        .find(|e| {
            e["environment"]["fleet"]["state"] == "queued"
                && e["environment"]["fleet"]["attempts"].as_u64() >= Some(2)
        })
        .expect("queued again");
    assert!(
        requeued["reason"].as_str().unwrap().contains("doomed"),
        "{requeued}"
    );
    assert_eq!(runners_of(&all).last().map(String::as_str), Some("rescuer"));
    // The fresh clone got the newest checkpoint before the call went on there.
    let restored = of_type(&all, "environment_connected")
        .into_iter()
        .rev()
        .find_map(|e| e["restoredFiles"].as_u64());
    assert!(restored.is_some_and(|n| n >= 2), "{all:#?}");
    let last = of_type(&all, "turn_completed").pop().unwrap().clone();
    assert_eq!(last["stopReason"], "end_turn", "{all:#?}");
    // The call the runner took down failed as lost; the model ran it again on the rescuer,
    // over the first turn's work.
    let diff = diff_of(&daemon, &session);
    assert!(diff.contains("+task-2"), "{diff}");
    assert!(
        !diff.contains("+task-1"),
        "task-1 came from the checkpoint: {diff}"
    );
}

/// Waits until `session`'s history holds `n` `tool_call_started` events (read from the
/// log, so one that came before the wait began counts).
async fn calls_started(client: &amber_client::Client, session: &str, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let all = history(client, session).await;
        if of_type(&all, "tool_call_started").len() >= n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{all:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_drains_a_runner_its_turn_finishes_and_new_work_goes_elsewhere() {
    let Setup {
        kit,
        _mock,
        daemon: _daemon,
        client,
    } = setup(2, "").await;
    let mut leaving = kit.runner(0, "leaving", 1, &["--grace", "60"]);
    let busy = fleet_session(&client, &kit, &[]).await;
    client
        .session_prompt(&busy, "task 1 sleep 3")
        .await
        .unwrap();
    calls_started(&client, &busy, 1).await;
    leaving.signal(libc::SIGTERM);
    // Work queued now is not given to the draining runner.
    let later = fleet_session(&client, &kit, &[]).await;
    client.session_prompt(&later, "task 2").await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        fleet_state(&client, &later).await.unwrap().state,
        amber_proto::FleetState::Queued
    );
    let _staying = kit.runner(1, "staying", 1, &[]);
    let events = finished(&client, &busy, Duration::from_secs(60)).await;
    assert_eq!(
        of_type(&events, "turn_completed")[0]["stopReason"],
        "end_turn"
    );
    assert_eq!(runners_of(&events), ["leaving"], "it finished where it ran");
    let events = finished(&client, &later, Duration::from_secs(60)).await;
    assert_eq!(runners_of(&events), ["staying"]);
    assert_eq!(
        leaving.wait_exit(Duration::from_secs(30)),
        Some(0),
        "the drained runner exits: {}",
        leaving.log()
    );
    assert!(leaving.log().contains("drained"), "{}", leaving.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amberd_killed_mid_run_keeps_its_queue_and_the_sessions_on_runners() {
    let Setup {
        kit,
        _mock,
        mut daemon,
        client,
    } = setup(1, "").await;
    let runner = kit.runner(0, "steady", 1, &[]);
    let running = fleet_session(&client, &kit, &[]).await;
    client
        .session_prompt(&running, "task 0 sleep 3")
        .await
        .unwrap();
    calls_started(&client, &running, 1).await;
    // Three more wait for the one slot; their prompts are acknowledged.
    let mut waiting = Vec::new();
    for n in 1..=3 {
        let id = fleet_session(&client, &kit, &[]).await;
        let turn = client
            .session_prompt_with(&amber_proto::SessionPromptParams {
                session_id: id.clone(),
                text: format!("task {n}"),
                output_schema: None,
                max_iterations: None,
            })
            .await
            .unwrap()
            .turn_id;
        waiting.push((id, turn));
    }
    drop(client);
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(10));
    daemon.restart();
    let client = connect(&daemon).await;
    // Each acknowledged prompt's own turn completes, on the runner.
    for (id, turn) in &waiting {
        let events = finished(&client, id, Duration::from_secs(90)).await;
        let completed = of_type(&events, "turn_completed");
        let last = completed.last().unwrap();
        assert_eq!(last["turnId"], turn.as_str(), "{events:#?}");
        assert_eq!(last["stopReason"], "end_turn", "{events:#?}");
        assert_eq!(
            runners_of(&events).last().map(String::as_str),
            Some("steady")
        );
    }
    // The session on the runner kept its place: attached again, not queued again.
    let events = history(&client, &running).await;
    let requeued = of_type(&events, "fleet_changed")
        .into_iter()
        .any(|e| e["reason"].as_str().is_some_and(|r| r.contains("runner")));
    assert!(!requeued, "{events:#?}");
    client.session_prompt(&running, "task 9").await.unwrap();
    let events = finished_turns(&client, &running, 2, Duration::from_secs(60)).await;
    assert_eq!(
        of_type(&events, "turn_completed").last().unwrap()["stopReason"],
        "end_turn"
    );
    drop(runner);
}

/// Waits until `session` has `n` completed turns; returns its history.
async fn finished_turns(
    client: &amber_client::Client,
    session: &str,
    n: usize,
    timeout: Duration,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let all = history(client, session).await;
        if of_type(&all, "turn_completed").len() >= n {
            return all;
        }
        assert!(std::time::Instant::now() < deadline, "{all:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draining_runner_out_of_grace_parks_its_turn_at_a_tool_boundary_and_it_goes_on_elsewhere()
{
    let Setup {
        kit,
        _mock,
        daemon,
        client,
    } = setup(2, "").await;
    let mut leaving = kit.runner(0, "leaving", 1, &["--grace", "1"]);
    let session = fleet_session(&client, &kit, &[]).await;
    client
        .session_prompt(&session, "task 1 sleep 4 twice")
        .await
        .unwrap();
    calls_started(&client, &session, 1).await;
    leaving.signal(libc::SIGTERM);
    // Past the grace the first call still runs; the session moves before the second.
    assert_eq!(
        leaving.wait_exit(Duration::from_secs(30)),
        Some(0),
        "{}",
        leaving.log()
    );
    let _staying = kit.runner(1, "staying", 1, &[]);
    let events = finished(&client, &session, Duration::from_secs(60)).await;
    assert_eq!(
        of_type(&events, "turn_completed")[0]["stopReason"],
        "end_turn",
        "{events:#?}"
    );
    assert_eq!(runners_of(&events), ["leaving", "staying"]);
    let parked = of_type(&events, "fleet_changed").into_iter().any(|e| {
        e["reason"]
            .as_str()
            .is_some_and(|r| r.contains("parked at a tool boundary"))
    });
    assert!(parked, "{events:#?}");
    // No call failed: the first finished on the leaving runner, the second ran on the
    // staying one, over the first one's work.
    for done in of_type(&events, "tool_call_completed") {
        assert_eq!(done["status"], "ok", "{done}");
    }
    let diff = diff_of(&daemon, &session);
    assert!(diff.contains("+task-1"), "{diff}");
    assert!(diff.contains("+second-1"), "{diff}");
}

/// The newest user prompt whose first line starts with `word`: that first line (a mode
/// reminder may follow it in the message).
fn prompt_of(messages: &[Value], word: &str) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str()?.lines().next())
        .find(|line| line.starts_with(word))
        .map(str::to_owned)
}

/// The scripted model for the spying session: `spy A B` reads A's README and B, then stops.
fn spy(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let prompt = prompt_of(&messages, "spy ");
    match prompt {
        Some(prompt) if !messages.iter().any(|m| m["role"] == "tool") => {
            let words: Vec<&str> = prompt.split_whitespace().collect();
            bash(
                "spy",
                &format!(
                    "cat {}/README.md; cat {}; echo end-of-spying",
                    words[1], words[2]
                ),
            )
        }
        Some(_) => MockTurn::text("seen"),
        None => worker(request),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_on_a_runner_reads_neither_another_sessions_workspace_nor_the_pool_token() {
    let Setup {
        kit,
        _mock,
        daemon: _daemon,
        client,
    } = setup_with(1, "", spy).await;
    let _runner = kit.runner(0, "shared", 2, &[]);
    // The victim holds its workspace (a long call) while the spy runs beside it.
    let victim = fleet_session(&client, &kit, &[]).await;
    client
        .session_prompt(&victim, "task 1 sleep 5")
        .await
        .unwrap();
    calls_started(&client, &victim, 1).await;
    let victim_workspace = kit.work.join(&victim);
    assert!(
        victim_workspace.join("README.md").exists(),
        "the victim's clone is there"
    );
    let spy_session = fleet_session(&client, &kit, &[]).await;
    client
        .session_prompt(
            &spy_session,
            &format!(
                "spy {} {}",
                victim_workspace.display(),
                kit.tls.token_file.display()
            ),
        )
        .await
        .unwrap();
    let events = finished(&client, &spy_session, Duration::from_secs(60)).await;
    assert_eq!(runners_of(&events), ["shared"], "both on one runner");
    let done = of_type(&events, "tool_call_completed")[0].clone();
    let output = done["output"].as_str().unwrap();
    assert!(output.contains("end-of-spying"), "{output}");
    assert!(
        !output.contains("# app"),
        "another session's clone was read: {output}"
    );
    let token = std::fs::read_to_string(&kit.tls.token_file).unwrap();
    assert!(
        !output.contains(token.trim()),
        "the pool's token was read: {output}"
    );
    finished(&client, &victim, Duration::from_secs(60)).await;
}

/// A free TCP port on the host.
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET http://{addr}/metrics`'s body.
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_runs_on_the_fleet_detached_lists_where_and_metrics_count_it() {
    let kit = FleetKit::new(1);
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(worker);
    let metrics_port = free_port();
    let daemon = daemon(
        &mock,
        &kit,
        &format!("\n[metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n"),
    );
    let amberd_metrics = format!("127.0.0.1:{metrics_port}");
    // Queued from the command line, detached: the id comes back at once.
    let out = daemon
        .cli()
        .args(["--no-autostart", "run", "--fleet", "--repo", &kit.repo_url])
        .args([
            "--ref",
            "main",
            "--label",
            "os=linux",
            "--push=cli/result",
            "--yes",
            "--detach",
            "task 5",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(session.len(), 36, "a session id: {session}");
    let listed = daemon
        .cli()
        .args(["--no-autostart", "sessions", "--fleet"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("queued"), "{listed}");
    assert!(
        listed.contains(&format!("{}@main", kit.repo_url)),
        "{listed}"
    );
    let text = scrape(&amberd_metrics);
    assert!(
        text.contains("amber_fleet_queue_depth{pool=\"default\"} 1"),
        "{text}"
    );

    let runner_port = free_port();
    let runner_metrics = format!("{}:{runner_port}", kit.machines[0].addr);
    let _runner = kit.runner(
        0,
        "metered",
        1,
        &["--metrics-listen", &format!("0.0.0.0:{runner_port}")],
    );
    let waited = daemon
        .cli()
        .args(["--no-autostart", "wait", "--timeout", "60", &session])
        .output()
        .unwrap();
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(String::from_utf8_lossy(&waited.stdout).contains("done 5"));
    let client = connect(&daemon).await;
    let events = finished(&client, &session, Duration::from_secs(30)).await;
    assert_eq!(runners_of(&events), ["metered"]);
    let listed = daemon
        .cli()
        .args(["--no-autostart", "sessions", "--fleet", "--json"])
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(rows[0]["environment"]["fleet"]["attempts"], 1, "{rows}");
    // `--push=BRANCH`: the result is on the branch, as the session's info says.
    let pushed = rows[0]["environment"]["fleet"]["push"].clone();
    assert_eq!(pushed["branch"], "cli/result", "{rows}");
    assert_eq!(
        git_in(&kit.repo, &["rev-parse", "refs/heads/cli/result"]),
        pushed["commit"].as_str().unwrap(),
        "{rows}"
    );

    let text = scrape(&amberd_metrics);
    for line in [
        "amber_tool_calls_total{tool=\"bash\",outcome=\"ok\"} 1",
        "amber_turn_seconds_count 1",
        "amber_runners{pool=\"default\",state=\"connected\"} 1",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    assert!(text.contains("amber_tokens_total{model="), "{text}");
    let text = scrape(&runner_metrics);
    for line in [
        "amber_runner_assigned_total{runner=\"metered\",pool=\"default\"} 1",
        "amber_runner_capacity{runner=\"metered\",pool=\"default\"} 1",
        "amber_runner_draining{runner=\"metered\",pool=\"default\"} 0",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
}

/// A yolo fleet session whose runners run `setup` after each clone.
async fn fleet_session_with_setup(
    client: &amber_client::Client,
    kit: &FleetKit,
    setup: &[&str],
) -> String {
    let params = SessionNewParams {
        setup: setup.iter().map(|c| (*c).to_owned()).collect(),
        ..fleet_params(kit)
    };
    create(client, &params).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn setup_runs_sandboxed_after_the_clone_and_one_that_fails_fails_the_session() {
    let Setup {
        kit,
        _mock,
        daemon: _daemon,
        client,
    } = setup(1, "").await;
    let _runner = kit.runner(0, "builder", 2, &[]);
    let prepared = fleet_session_with_setup(
        &client,
        &kit,
        &[
            "test -f README.md && echo ready > prepared.txt",
            "cat prepared.txt",
        ],
    )
    .await;
    client.session_prompt(&prepared, "task 1").await.unwrap();
    let events = finished(&client, &prepared, Duration::from_secs(60)).await;
    let setup = of_type(&events, "fleet_setup");
    assert_eq!(setup.len(), 2, "{events:#?}");
    assert_eq!(setup[0]["exitCode"], 0);
    assert_eq!(setup[1]["exitCode"], 0);
    assert!(setup[1]["output"].as_str().unwrap().contains("ready"));
    assert_eq!(
        of_type(&events, "turn_completed")[0]["stopReason"],
        "end_turn"
    );

    // Setup is a command of the session: its sandbox keeps it in the workspace.
    let outside = kit.tls.dir.path().join("escaped-by-setup");
    let command = format!("touch {}", outside.display());
    let refused = fleet_session_with_setup(&client, &kit, &[&command]).await;
    client.session_prompt(&refused, "task 2").await.unwrap();
    let events = finished(&client, &refused, Duration::from_secs(60)).await;
    assert!(!outside.exists(), "setup wrote outside the workspace");
    let setup = of_type(&events, "fleet_setup");
    assert_ne!(setup[0]["exitCode"], 0, "{events:#?}");
    let failed = of_type(&events, "fleet_changed")
        .into_iter()
        .any(|e| e["environment"]["fleet"]["state"] == "failed");
    assert!(failed, "{events:#?}");
    let completed = of_type(&events, "turn_completed");
    assert_eq!(completed[0]["error"]["code"], "fleet_failed", "{events:#?}");
    assert!(
        of_type(&events, "tool_call_started").is_empty(),
        "nothing ran after a failed setup"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rewinding_a_parked_session_queues_it_and_restores_its_files_on_the_next_runner() {
    let Setup {
        kit,
        _mock,
        daemon,
        client,
    } = setup(1, "").await;
    let _runner = kit.runner(0, "only", 1, &[]);
    let session = fleet_session(&client, &kit, &[]).await;
    client.session_prompt(&session, "task 1").await.unwrap();
    finished(&client, &session, Duration::from_secs(60)).await;
    client.session_prompt(&session, "task 2").await.unwrap();
    finished_turns(&client, &session, 2, Duration::from_secs(60)).await;
    eventually("parked after its turns", Duration::from_secs(20), || {
        std::fs::read_dir(&kit.work).unwrap().next().is_none()
    })
    .await;
    // Back to before turn 2: the files need the workspace, so a runner takes it again.
    let rewound = daemon
        .cli()
        .args(["--no-autostart", "rewind", &session, "2", "--json"])
        .output()
        .unwrap();
    assert!(
        rewound.status.success(),
        "{}",
        String::from_utf8_lossy(&rewound.stderr)
    );
    let answer: Value = serde_json::from_slice(&rewound.stdout).unwrap();
    let restored: Vec<&str> = answer["restored"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(restored.contains(&"src/lib.txt"), "{answer}");
    // The next turn works from there: task 1's line, not task 2's.
    client.session_prompt(&session, "task 3").await.unwrap();
    let events = finished_turns(&client, &session, 3, Duration::from_secs(60)).await;
    assert_eq!(
        of_type(&events, "turn_completed").last().unwrap()["stopReason"],
        "end_turn"
    );
    let diff = diff_of(&daemon, &session);
    assert!(diff.contains("+task-3"), "{diff}");
    assert!(diff.contains(" task-1"), "{diff}");
    assert!(!diff.contains("task-2"), "{diff}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spent_fleet_budget_assigns_no_more_work() {
    let kit = FleetKit::new(1);
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(worker);
    // The mock model at $1 per million prompt tokens: one turn costs well over $0.001.
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "{FAST_RETRIES}\n[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\noutput = 2.0\n{}",
            kit.config("budget_usd = 0.001")
        ),
        env: Vec::new(),
    });
    let client = connect(&daemon).await;
    let _runner = kit.runner(0, "thrifty", 1, &[]);
    let first = fleet_session(&client, &kit, &[]).await;
    client.session_prompt(&first, "task 1").await.unwrap();
    let events = finished(&client, &first, Duration::from_secs(60)).await;
    let spent = of_type(&events, "turn_completed")[0]["sessionCostUsd"]
        .as_f64()
        .unwrap();
    assert!(spent > 0.001, "the first turn spent the budget: {spent}");
    let second = fleet_session(&client, &kit, &[]).await;
    client.session_prompt(&second, "task 2").await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let state = fleet_state(&client, &second).await.unwrap();
    assert_eq!(state.state, amber_proto::FleetState::Queued, "{state:?}");
    assert_eq!(state.attempts, 0);
    assert!(
        daemon.log().contains("the fleet's budget is spent"),
        "{}",
        daemon.log()
    );
}

/// `git --git-dir REPO ARGS`'s trimmed stdout (empty when git fails).
fn git_in(repo: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A yolo fleet session that pushes its result to `branch` of the kit's repository.
async fn pushing_session(client: &amber_client::Client, kit: &FleetKit, branch: &str) -> String {
    pushing_session_in(client, kit, branch, None).await
}

/// [`pushing_session`] with its commands' sandbox in `mode` (`None`: the config's).
async fn pushing_session_in(
    client: &amber_client::Client,
    kit: &FleetKit,
    branch: &str,
    mode: Option<amber_proto::SandboxMode>,
) -> String {
    let params = SessionNewParams {
        sandbox: mode.map(|mode| amber_proto::SandboxRequest {
            mode: Some(mode),
            ..Default::default()
        }),
        push: Some(amber_proto::PushParams {
            branch: Some(branch.to_owned()),
        }),
        ..fleet_params(kit)
    };
    create(client, &params).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completed_turn_is_pushed_as_a_branch_on_top_of_the_last_push_never_over_a_moved_branch()
{
    let Setup {
        kit,
        _mock,
        daemon: _daemon,
        client,
    } = setup(1, "").await;
    let _runner = kit.runner(0, "pusher", 2, &[]);
    let main = git_in(&kit.repo, &["rev-parse", "refs/heads/main"]);
    let session = pushing_session(&client, &kit, "amber/result").await;

    client.session_prompt(&session, "task 1").await.unwrap();
    let events = finished_turns(&client, &session, 1, Duration::from_secs(60)).await;
    let pushed = of_type(&events, "fleet_pushed");
    assert_eq!(pushed.len(), 1, "{events:#?}");
    assert_eq!(pushed[0]["branch"], "amber/result");
    assert_eq!(pushed[0]["changed"], true, "{pushed:#?}");
    let first = pushed[0]["commit"].as_str().unwrap().to_owned();
    // Told before the turn's end, so a client that waits for the turn knows.
    let at = |kind: &str| events.iter().position(|e| e["type"] == kind).unwrap();
    assert!(at("fleet_pushed") < at("turn_completed"));
    assert_eq!(
        git_in(&kit.repo, &["rev-parse", "refs/heads/amber/result"]),
        first
    );
    assert_eq!(
        git_in(&kit.repo, &["rev-parse", &format!("{first}^")]),
        main
    );
    assert_eq!(
        git_in(&kit.repo, &["show", &format!("{first}:out.txt")]),
        "1"
    );
    assert_eq!(
        git_in(&kit.repo, &["show", &format!("{first}:src/lib.txt")]),
        "one\ntwo\ntask-1"
    );
    assert_eq!(
        git_in(&kit.repo, &["log", "-1", "--format=%s", &first]),
        "task 1"
    );

    // The next turn goes on top of the first push; `main` is untouched.
    client.session_prompt(&session, "task 2").await.unwrap();
    let events = finished_turns(&client, &session, 2, Duration::from_secs(60)).await;
    let pushed = of_type(&events, "fleet_pushed");
    let second = pushed[1]["commit"].as_str().unwrap().to_owned();
    assert_ne!(second, first);
    assert_eq!(
        git_in(&kit.repo, &["rev-parse", &format!("{second}^")]),
        first
    );
    assert_eq!(
        git_in(&kit.repo, &["show", &format!("{second}:out.txt")]),
        "2"
    );
    assert_eq!(git_in(&kit.repo, &["rev-parse", "refs/heads/main"]), main);
    let info = fleet_state(&client, &session).await.unwrap();
    assert_eq!(info.push.unwrap().commit.as_deref(), Some(second.as_str()));

    // A branch someone else moved is left alone: the push fails, saying why.
    git(&kit.repo, &["update-ref", "refs/heads/taken", &first]);
    let other = pushing_session(&client, &kit, "taken").await;
    client.session_prompt(&other, "task 3").await.unwrap();
    let events = finished_turns(&client, &other, 1, Duration::from_secs(60)).await;
    let pushed = of_type(&events, "fleet_pushed");
    assert_eq!(pushed[0]["changed"], false, "{pushed:#?}");
    let error = pushed[0]["error"].as_str().unwrap();
    assert!(error.contains("moved"), "{error}");
    assert_eq!(git_in(&kit.repo, &["rev-parse", "refs/heads/taken"]), first);
    assert_eq!(
        of_type(&events, "turn_completed")[0]["stopReason"],
        "end_turn",
        "a failed push does not fail the turn"
    );
}

/// The scripted model for the hostile workspace: `hostile SENTINEL` rewrites the
/// workspace's git configuration, hooks and attributes so that any git run on it outside
/// the sandbox would write SENTINEL (the sandbox cannot), and points its remote elsewhere.
fn hostile(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let prompt = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let Some(sentinel) = prompt.strip_prefix("hostile ") else {
        return worker(request);
    };
    if messages.iter().any(|m| m["role"] == "tool") {
        return MockTurn::text("planted");
    }
    let run = format!("touch {sentinel}");
    let script = [
        // What git would run: hooks, fsmonitor, filters, helpers, ssh, pagers.
        format!("printf '#!/bin/sh\\n{run}\\n' > .git/evil.sh && chmod +x .git/evil.sh"),
        "for h in pre-commit post-commit pre-push reference-transaction post-checkout; do cp .git/evil.sh .git/hooks/$h; done".to_owned(),
        "git config core.hooksPath .git/hooks".to_owned(),
        "git config core.fsmonitor \"$PWD/.git/evil.sh\"".to_owned(),
        "git config credential.helper \"!$PWD/.git/evil.sh\"".to_owned(),
        "git config core.sshCommand \"$PWD/.git/evil.sh\"".to_owned(),
        "git config filter.evil.clean \"$PWD/.git/evil.sh\"".to_owned(),
        "git config filter.evil.smudge \"$PWD/.git/evil.sh\"".to_owned(),
        "git config filter.evil.required true".to_owned(),
        "git config core.pager \"$PWD/.git/evil.sh\"".to_owned(),
        "git config gpg.program \"$PWD/.git/evil.sh\"".to_owned(),
        "git config commit.gpgSign true".to_owned(),
        "git config remote.origin.url /tmp/amber-evil-remote.git".to_owned(),
        "git config url./tmp/amber-evil-remote.git.insteadOf file://".to_owned(),
        "echo '* filter=evil' > .gitattributes".to_owned(),
        "echo payload > payload.txt".to_owned(),
        // A nested repository with its own hostile configuration.
        "mkdir -p nested && git -C nested init -q && git -C nested config core.fsmonitor \"$PWD/.git/evil.sh\"".to_owned(),
        // The git directory sent elsewhere.
        "mkdir -p elsewhere && echo ../elsewhere > .git/commondir".to_owned(),
        "echo planted".to_owned(),
    ]
    .join(" ; ");
    bash("plant", &script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_push_runs_nothing_the_session_planted_in_its_git_directory() {
    let Setup {
        kit,
        _mock,
        daemon: _daemon,
        client,
    } = setup_with(1, "", hostile).await;
    let _runner = kit.runner(0, "pusher", 1, &[]);
    // Sandboxed, most of the planting is refused; unsandboxed (a person allowed it), all
    // of it lands in `.git`: the push is the only wall left, and it must hold alone.
    for (name, mode) in [
        ("sandboxed", None),
        ("unsandboxed", Some(amber_proto::SandboxMode::Off)),
    ] {
        let sentinel = kit.tls.dir.path().join(format!("ran-{name}"));
        let branch = format!("amber/hostile-{name}");
        let session = pushing_session_in(&client, &kit, &branch, mode).await;
        client
            .session_prompt(&session, &format!("hostile {}", sentinel.display()))
            .await
            .unwrap();
        let events = finished_turns(&client, &session, 1, Duration::from_secs(60)).await;
        let planted = of_type(&events, "tool_call_completed")[0]["output"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(planted.contains("planted"), "{name}: {planted}");
        if mode.is_some() {
            assert!(
                !planted.contains("could not write") && !planted.contains("Read-only"),
                "{name}: everything was planted: {planted}"
            );
        }
        let pushed = of_type(&events, "fleet_pushed");
        assert_eq!(pushed.len(), 1, "{name}: {events:#?}");
        assert_eq!(pushed[0]["changed"], true, "{name}: {pushed:#?}");
        assert!(
            !sentinel.exists(),
            "{name}: a program the session planted ran when its result was pushed"
        );
        assert!(!std::path::Path::new("/tmp/amber-evil-remote.git").exists());
        // Pushed to the session's repository, its files as data.
        let commit = pushed[0]["commit"].as_str().unwrap();
        assert_eq!(
            git_in(&kit.repo, &["rev-parse", &format!("refs/heads/{branch}")]),
            commit,
            "{name}"
        );
        assert_eq!(
            git_in(&kit.repo, &["show", &format!("{commit}:payload.txt")]),
            "payload"
        );
        assert_eq!(
            git_in(&kit.repo, &["show", &format!("{commit}:.gitattributes")]),
            "* filter=evil"
        );
        let files = git_in(&kit.repo, &["ls-tree", "-r", "--name-only", commit]);
        assert!(
            !files.lines().any(|f| f.starts_with(".git/")),
            "{name}: the git directory was pushed: {files}"
        );
    }
}

/// The scripted model for a configured repository: `configured` reports whether its request
/// carried the repository's instructions and skill, then runs a command the repository's
/// rules deny; `edit` appends to `AGENTS.md`; `check` loads the repository's skill, then
/// reports whether the request carried what was appended.
fn configured(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    // The prompt is its message's first line (a mode reminder may follow).
    let first_line = |m: &Value| {
        m["content"]
            .as_str()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    };
    let asked = messages.iter().rposition(|m| {
        m["role"] == "user" && ["configured", "edit", "check"].contains(&first_line(m).as_str())
    });
    let Some(asked) = asked else {
        return worker(request);
    };
    let prompt = first_line(&messages[asked]);
    let whole = request.to_string();
    let ran = messages[asked..].iter().any(|m| m["role"] == "tool");
    match (prompt.as_str(), ran) {
        ("configured", false) => bash("forbidden", "touch forbidden.txt"),
        ("configured", true) => MockTurn::text(format!(
            "instructions={} skill={}",
            whole.contains("MARKER-FROM-AGENTS"),
            whole.contains("deploy-skill-description")
        )),
        ("edit", false) => bash("append", "echo SECOND-MARKER >> AGENTS.md"),
        ("edit", true) => MockTurn::text("edited"),
        ("check", false) => amber_tests::tool_calls::calls(vec![amber_tests::tool_calls::call(
            "skill",
            "skills",
            &serde_json::json!({"action": "load", "name": "deploy"}),
        )]),
        ("check", true) => MockTurn::text(format!("second={}", whole.contains("SECOND-MARKER"))),
        _ => worker(request),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_session_follows_its_repositorys_instructions_rules_and_skills() {
    let kit = FleetKit::new(1);
    // A branch whose tree holds the configuration.
    let work = kit.tls.dir.path().join("configure");
    git(
        kit.tls.dir.path(),
        &["clone", "-q", &kit.repo_url, work.to_str().unwrap()],
    );
    std::fs::create_dir_all(work.join(".amber/skills/deploy")).unwrap();
    std::fs::write(work.join("AGENTS.md"), "MARKER-FROM-AGENTS: be brief.\n").unwrap();
    std::fs::write(
        work.join(".amber/rules.toml"),
        "[[rules]]\ntool = \"bash\"\npattern = \"touch*\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    std::fs::write(
        work.join(".amber/skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: deploy-skill-description\n---\nShip it.\n",
    )
    .unwrap();
    git(&work, &["checkout", "-q", "-b", "configured"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "configure"]);
    git(&work, &["push", "-q", "origin", "configured"]);

    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(configured);
    let daemon = daemon(&mock, &kit, "");
    let client = connect(&daemon).await;
    let _runner = kit.runner(0, "configured", 1, &[]);
    let params = SessionNewParams {
        git_ref: Some("configured".to_owned()),
        ..fleet_params(&kit)
    };
    let session = create(&client, &params).await;

    client.session_prompt(&session, "configured").await.unwrap();
    let events = finished_turns(&client, &session, 1, Duration::from_secs(60)).await;
    let denied = of_type(&events, "tool_call_completed");
    assert_eq!(denied[0]["status"], "denied", "{denied:#?}");
    assert!(!kit.work.join(&session).join("forbidden.txt").exists());
    let said = of_type(&events, "message_completed");
    let said = said.last().unwrap()["text"].to_string();
    assert!(said.contains("instructions=true skill=true"), "{said}");

    // A change to the instructions made in the workspace applies from the next turn.
    client.session_prompt(&session, "edit").await.unwrap();
    finished_turns(&client, &session, 2, Duration::from_secs(60)).await;
    client.session_prompt(&session, "check").await.unwrap();
    let events = finished_turns(&client, &session, 3, Duration::from_secs(60)).await;
    let said = of_type(&events, "message_completed");
    let said = said.last().unwrap()["text"].to_string();
    assert!(said.contains("second=true"), "{said}");
    // The skill is loaded from the mirror, as the prompt listed it.
    let (status, output) = amber_tests::tool_calls::result_of(&events, "skill");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("Ship it."), "{output}");
}

/// The scripted model for a long-running look around: `later ROOT` waits for a file `go` in
/// its workspace, then lists the runner's workspaces folder and counts the clones' READMEs
/// it can read.
fn later(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let prompt = prompt_of(&messages, "later ");
    match prompt {
        Some(prompt) if !messages.iter().any(|m| m["role"] == "tool") => {
            let root = prompt.trim_start_matches("later ").trim().to_owned();
            bash(
                "look",
                &format!(
                    "for i in $(seq 300); do [ -e go ] && break; sleep 0.1; done; echo listed: $(ls -A {root}); echo readable: $(cat {root}/*/README.md 2>/dev/null | grep -c app)"
                ),
            )
        }
        Some(_) => MockTurn::text("looked"),
        None => worker(request),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clone_made_while_another_sessions_command_runs_stays_out_of_its_reach() {
    let Setup {
        kit,
        _mock,
        daemon: _daemon,
        client,
    } = setup_with(1, "", later).await;
    let _runner = kit.runner(0, "shared", 2, &[]);
    // The looker's command starts while it is alone on the runner.
    let looker = fleet_session(&client, &kit, &[]).await;
    client
        .session_prompt(&looker, &format!("later {}", kit.work.display()))
        .await
        .unwrap();
    calls_started(&client, &looker, 1).await;
    // Then a second session is cloned beside it, while that command still runs.
    let other = fleet_session(&client, &kit, &[]).await;
    client.session_prompt(&other, "task 1").await.unwrap();
    let other_readme = kit.work.join(&other).join("README.md");
    eventually("the second clone is made", Duration::from_secs(10), || {
        other_readme.exists()
    })
    .await;
    std::fs::write(kit.work.join(&looker).join("go"), "").unwrap();
    let events = finished(&client, &looker, Duration::from_secs(60)).await;
    let output = of_type(&events, "tool_call_completed")[0]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.contains(&format!("listed: {looker}\n")), "{output}");
    assert!(
        output.contains("readable: 1"),
        "only its own clone: {output}"
    );
    finished(&client, &other, Duration::from_secs(60)).await;
}

/// The scripted model asking for something that needs a person: `remove` writes a note
/// into the clone's `.amber/` (a protected path: write mode asks).
fn remover(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let asked = messages.iter().any(|m| {
        m["role"] == "user"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("remove"))
    });
    if !asked {
        return worker(request);
    }
    if messages.iter().any(|m| m["role"] == "tool") {
        return MockTurn::text("after");
    }
    amber_tests::tool_calls::calls(vec![amber_tests::tool_calls::call(
        "rm1",
        "write",
        &serde_json::json!({"path": ".amber/note.md", "content": "noted\n"}),
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_sessions_call_waits_for_a_person_and_runs_only_if_allowed() {
    let Setup {
        kit,
        _mock,
        daemon,
        client: _plain,
    } = setup_with(1, "", remover).await;
    let client = amber_tests::tool_calls::connect_approver(&daemon).await;
    let _runner = kit.runner(0, "asked", 2, &[]);
    for (decision, ran) in [
        (amber_proto::Decision::AllowOnce, true),
        (amber_proto::Decision::Deny, false),
    ] {
        let params = SessionNewParams {
            mode: Some(amber_proto::Mode::Write),
            ..fleet_params(&kit)
        };
        let session = create(&client, &params).await;
        let mut events = Events::live(&client, &session).await;
        client.session_prompt(&session, "remove").await.unwrap();
        let (_, approval) = amber_tests::tool_calls::next_approval(&mut events).await;
        assert_eq!(approval["tool"], "write", "{approval}");
        let id = amber_tests::tool_calls::request_id(&approval);
        assert!(
            amber_tests::tool_calls::respond(&client, &session, &id, decision)
                .await
                .unwrap()
        );
        let events = finished(&client, &session, Duration::from_secs(60)).await;
        let (status, output) = amber_tests::tool_calls::result_of(&events, "rm1");
        assert_eq!(status, if ran { "ok" } else { "denied" }, "{output}");
        assert_eq!(
            of_type(&events, "approval_resolved").len(),
            1,
            "one question, answered: {events:#?}"
        );
    }
}

/// A routine on the fleet: at its fire time (the test's clock) it makes a fleet session on
/// the kit's repository, whichever runner takes it runs the prompt, and the result is
/// recorded (`routine_finished`, `routine/list`).
#[tokio::test(flavor = "multi_thread")]
async fn a_routine_fires_on_the_fleet_and_records_its_result() {
    let kit = FleetKit::new(1);
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(worker);
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("now");
    std::fs::write(&clock, "2026-12-07T06:59:00Z").unwrap();
    let routines = format!(
        "\n[[routines]]\nname = \"nightly\"\ncron = \"0 7 * * *\"\ncwd = \"\"\n\
         environment = \"fleet\"\nrepo = \"{}\"\nref = \"main\"\nprompt = \"task 7\"\n",
        kit.repo_url
    );
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!("{FAST_RETRIES}\n{}{routines}", kit.config("")),
        env: vec![
            (
                "AMBER_TEST_NOW_FILE".to_owned(),
                clock.display().to_string(),
            ),
            ("TZ".to_owned(), "UTC".to_owned()),
        ],
    });
    let client = connect(&daemon).await;
    let _runner = kit.runner(0, "r1", 1, &[]);
    std::fs::write(&clock, "2026-12-07T07:00:20Z").unwrap();
    let fired = daemon.rpc_ok("routine/tick", serde_json::json!({}));
    let session = fired["fired"][0]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("nothing fired: {fired}"))
        .to_owned();
    let mut events = Events::subscribe(&client, &session, Some(0)).await;
    let seen = events.until("routine_finished").await;
    let completed = of_type(&seen, "turn_completed");
    assert_eq!(
        completed.last().unwrap()["stopReason"],
        "end_turn",
        "{seen:#?}"
    );
    assert!(
        !runners_of(&seen).is_empty(),
        "no runner held it: {seen:#?}"
    );
    let info =
        daemon.rpc_ok("session/get", serde_json::json!({"sessionId": session}))["session"].clone();
    assert_eq!(info["routine"]["name"], "nightly", "{info}");
    assert!(info["environment"]["fleet"].is_object(), "{info}");
    let listed = daemon.rpc_ok("routine/list", serde_json::json!({}));
    let row = listed["routines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "nightly")
        .cloned()
        .unwrap();
    assert_eq!(row["lastSessionId"], session.as_str(), "{row}");
    assert_eq!(row["lastStopReason"], "end_turn", "{row}");
}

/// `[budget.pools.NAME]` binds the requests of the fleet sessions assigned to that pool:
/// once its day's cap is spent, the session's turn stops before its next request, the pool
/// named in types.
#[tokio::test(flavor = "multi_thread")]
async fn a_spent_pool_budget_stops_its_fleet_sessions_requests() {
    let kit = FleetKit::new(1);
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(worker);
    let pool = amber_tests::fleet::POOL;
    // One request of the mock model costs well over the pool's day.
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "{FAST_RETRIES}\n[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\n\
             output = 2.0\n\n[budget.pools.{pool}]\ndaily_usd = 0.0001\n{}",
            kit.config("")
        ),
        env: Vec::new(),
    });
    let client = connect(&daemon).await;
    let _runner = kit.runner(0, "r1", 1, &[]);
    let session = fleet_session(&client, &kit, &[]).await;
    client.session_prompt(&session, "task 1").await.unwrap();
    let events = finished(&client, &session, Duration::from_secs(60)).await;
    let completed = of_type(&events, "turn_completed");
    let last = completed.last().unwrap();
    assert_eq!(last["stopReason"], "budget_exceeded", "{events:#?}");
    assert_eq!(last["error"]["limit"]["scope"], "pool", "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("[budget.pools.{pool}] daily_usd")),
        "{last}"
    );
    let status = daemon.rpc_ok("daemon/status", serde_json::json!({}));
    assert_eq!(status["budget"][0]["scope"], "pool", "{status}");
    assert_eq!(status["budget"][0]["key"], pool, "{status}");
}
