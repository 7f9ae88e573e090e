//! The session list through the real daemon: paging newest first with a cursor that does
//! not shift when sessions are created between pages, and sessions that never vanish from
//! `session/list`, `session/get` or `session/verify` while idle ones unload and reload.
//! Session names are `names.rs`.

mod names;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use amber_mock_llm::MockLlm;
use amber_tests::TestDaemon;
use amber_tests::steps::{FAST_RETRIES, spawn, spawn_config};
use serde_json::{Value, json};

fn create(daemon: &TestDaemon) -> String {
    let info = daemon.rpc_ok(
        "session/new",
        json!({ "cwd": daemon.workspace.display().to_string() }),
    );
    info["sessionId"].as_str().unwrap().to_owned()
}

fn ids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn list_pages_newest_first_and_a_new_session_does_not_shift_the_next_page() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let mut created: Vec<String> = (0..5).map(|_| create(&daemon)).collect();
    // Newest first: by createdAt, then by id (creations can share a millisecond).
    let all = daemon.rpc_ok("session/list", json!({}));
    let order = ids(&all);
    assert!(all.get("nextCursor").is_none(), "{all}");
    let mut sorted = created.clone();
    sorted.sort();
    let mut listed_sorted = order.clone();
    listed_sorted.sort();
    assert_eq!(listed_sorted, sorted);
    let created_at: Vec<&str> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["createdAt"].as_str().unwrap())
        .collect();
    assert!(
        created_at.windows(2).all(|w| w[0] >= w[1]),
        "{created_at:?}"
    );
    assert_eq!(order[0], created.pop().unwrap(), "the newest comes first");

    let first = daemon.rpc_ok("session/list", json!({ "limit": 2 }));
    assert_eq!(ids(&first), order[..2]);
    let cursor = first["nextCursor"].as_str().expect("more pages").to_owned();
    // A session created between pages lands before the cursor: nothing shifts.
    let newcomer = create(&daemon);
    let second = daemon.rpc_ok("session/list", json!({ "limit": 2, "cursor": cursor }));
    assert_eq!(ids(&second), order[2..4]);
    let cursor = second["nextCursor"].as_str().expect("one more page");
    let last = daemon.rpc_ok("session/list", json!({ "limit": 2, "cursor": cursor }));
    assert_eq!(ids(&last), order[4..]);
    assert!(last.get("nextCursor").is_none(), "{last}");
    // The newcomer is on a fresh first page.
    assert_eq!(
        ids(&daemon.rpc_ok("session/list", json!({ "limit": 1 })))[0],
        newcomer
    );

    for bad in ["garbage", "2", ""] {
        let response = daemon.rpc("session/list", json!({ "cursor": bad }));
        assert_eq!(response["error"]["code"], -32602, "{bad:?}: {response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains("cursor"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_stay_findable_while_idle_ones_unload_and_reload() {
    const SESSIONS: usize = 40;
    let mock = MockLlm::start(Vec::new()).await;
    let config = format!("{FAST_RETRIES}[sessions]\nidle_unload_secs = 1\n");
    let daemon = spawn_config(&mock, &config);
    let sessions: Vec<String> = (0..SESSIONS).map(|_| create(&daemon)).collect();
    let known: HashSet<&String> = sessions.iter().collect();
    let stop = AtomicBool::new(false);
    let unloads_seen = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(6);
    std::thread::scope(|s| {
        // Lists: always every session, once.
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let page = daemon.rpc_ok("session/list", json!({ "limit": 1000 }));
                let listed = ids(&page);
                assert_eq!(listed.len(), SESSIONS, "{page}");
                assert_eq!(listed.iter().collect::<HashSet<_>>(), known);
            }
        });
        // Verifies (never loads) sessions as they come and go, as fast as it can.
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let id = &sessions[i % SESSIONS];
                let response = daemon.rpc("session/verify", json!({ "sessionId": id }));
                assert!(response.get("error").is_none(), "verify {id}: {response}");
                i += 1;
            }
        });
        // Gets (loads again) each session about once a second: about when it unloads.
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let id = &sessions[i % SESSIONS];
                let response = daemon.rpc("session/get", json!({ "sessionId": id }));
                assert!(response.get("error").is_none(), "get {id}: {response}");
                i += 1;
                std::thread::sleep(Duration::from_millis(27));
            }
        });
        // Watches sessions leave memory while the others hammer.
        s.spawn(|| {
            while Instant::now() < deadline {
                let status = daemon.rpc_ok("daemon/status", json!({}));
                assert_eq!(status["sessions"], SESSIONS as u64, "{status}");
                if status["sessionsLoaded"].as_u64().unwrap() < SESSIONS as u64 {
                    unloads_seen.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    assert!(
        unloads_seen.load(Ordering::Relaxed) > 0,
        "no session was ever unloaded"
    );
    let log = daemon.log();
    assert!(!log.contains("already open for writing"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_unload_secs_zero_keeps_sessions_in_memory() {
    let mock = MockLlm::start(Vec::new()).await;
    let config = format!("{FAST_RETRIES}[sessions]\nidle_unload_secs = 0\n");
    let daemon = spawn_config(&mock, &config);
    create(&daemon);
    // 0 used to mean one second: well past it, the session is still loaded.
    std::thread::sleep(Duration::from_millis(2500));
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(
        (
            status["sessions"].as_u64(),
            status["sessionsLoaded"].as_u64()
        ),
        (Some(1), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_running_from_the_moment_its_prompt_is_accepted() {
    use amber_mock_llm::MockTurn;
    // A slow first reply keeps the turn going while the state is read.
    let mock = MockLlm::start(vec![
        MockTurn::Delay {
            ms: 800,
            then: Box::new(MockTurn::text("done")),
        },
        MockTurn::text("DONE"),
    ])
    .await;
    let daemon = spawn(&mock);
    let session = create(&daemon);
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": session, "text": "take your time"}),
    );
    // No window in which a client polling for idle would think the turn is over.
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_eq!(got["session"]["state"], "running", "{got}");
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["state"], "running", "{listed}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
        if got["session"]["state"] == "idle" {
            break;
        }
        assert!(Instant::now() < deadline, "the turn never ended: {got}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
