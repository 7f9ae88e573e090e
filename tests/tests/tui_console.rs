//! End-to-end: the TUI as a console for background agents, the real `amber` in
//! tmux against the real daemon and the mock endpoint — a reply written as one long paragraph
//! grows on screen as it streams (80×24 and 120×40) and survives a detach and re-attach with
//! each word once; the session switcher lists every session with its state, a background
//! session waiting for an approval first, and answers it after Enter switches to it; and a
//! bell with an OSC 9 desktop notification goes out exactly once per approval while the
//! terminal is unfocused (focus reports simulated) or the session is not the attached one.

use std::path::Path;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{done, spawn};
use serde_json::{Value, json};

use crate::support::tmux;
use tmux::{SCREEN_TIMEOUT, Tmux};

const WORDS: usize = 40;
const CHUNK_MS: u64 = 150;

/// `word01 word02 … word40`: one paragraph, no newline, one word per chunk.
fn paragraph_chunks() -> Vec<String> {
    (1..=WORDS).map(|i| format!("word{i:02} ")).collect()
}

/// How many of the paragraph's words are on `screen`.
fn words_on(screen: &str) -> usize {
    (1..=WORDS)
        .filter(|i| screen.contains(&format!("word{i:02}")))
        .count()
}

fn state_of(daemon: &TestDaemon, id: &str) -> String {
    let got = daemon.rpc_ok("session/get", json!({"sessionId": id, "messagesLimit": 1}));
    got["session"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn newest_session(daemon: &TestDaemon) -> String {
    let list = daemon.rpc_ok("session/list", json!({}));
    list["sessions"][0]["sessionId"]
        .as_str()
        .expect("a session")
        .to_owned()
}

/// Streams the paragraph into a fresh TUI of `size` and checks it grows on screen.
fn paragraph_streams_at(size: (u16, u16)) {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks: paragraph_chunks(),
            interval_ms: CHUNK_MS,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let tmux = Tmux::new(&format!("para{}", size.0));
    tmux.start_in("p", &daemon, &[], &daemon.workspace, size);
    tmux.wait("p", "the welcome screen", |s| s.contains("Type a prompt"));
    tmux.type_text("p", "write one long paragraph");
    tmux.keys("p", &["Enter"]);

    // The first word is on screen within 500 ms of the endpoint being asked (it answers at
    // once with the first chunk; the mock records a request's frame times only at its end).
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    let mut asked = None;
    let screen = loop {
        if asked.is_none() && mock.request_count() > 0 {
            asked = Some(Instant::now());
        }
        let screen = tmux.screen("p");
        if screen.contains("word01") {
            break screen;
        }
        assert!(Instant::now() < deadline, "no words on screen:\n{screen}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let lag = asked.map(|t| t.elapsed()).unwrap_or_default();
    assert!(
        lag < Duration::from_millis(500),
        "first words shown {lag:?} after the request:\n{screen}"
    );
    assert!(
        words_on(&screen) < WORDS / 2,
        "too late to see it grow:\n{screen}"
    );
    assert!(
        !screen.contains("0 tok"),
        "the status says 0 tok:\n{screen}"
    );

    // It keeps growing while the session runs.
    let id = newest_session(&daemon);
    let mut last = words_on(&screen);
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(4 * CHUNK_MS));
        let screen = tmux.screen("p");
        let now = words_on(&screen);
        if now == WORDS {
            break;
        }
        assert_eq!(state_of(&daemon, &id), "running");
        assert!(now > last, "stopped growing at {now} words:\n{screen}");
        assert!(screen.contains("working"), "{screen}");
        last = now;
    }

    let screen = tmux.wait("p", "the finished reply", |s| {
        s.contains("word40") && !s.contains("working")
    });
    for i in 1..=WORDS {
        let word = format!("word{i:02}");
        assert_eq!(screen.matches(&word).count(), 1, "{word}:\n{screen}");
    }
    tmux.keys("p", &["C-d"]);
    tmux.wait("p", "amber to exit", |s| s.contains("[amber exited 0]"));
}

#[test]
fn a_one_line_paragraph_grows_on_screen_at_80x24() {
    paragraph_streams_at((80, 24));
}

#[test]
fn a_one_line_paragraph_grows_on_screen_at_120x40() {
    paragraph_streams_at((120, 40));
}

#[test]
fn detaching_mid_paragraph_and_reattaching_shows_it_once() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks: paragraph_chunks(),
            interval_ms: CHUNK_MS,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let tmux = Tmux::new("reattach");
    tmux.start("a", &daemon, &[]);
    tmux.wait("a", "the welcome screen", |s| s.contains("Type a prompt"));
    tmux.type_text("a", "write one long paragraph");
    tmux.keys("a", &["Enter"]);
    tmux.wait("a", "a few words", |s| s.contains("word05"));
    tmux.keys("a", &["C-d"]);
    tmux.wait("a", "amber to exit", |s| s.contains("[amber exited 0]"));
    let id = newest_session(&daemon);
    assert_eq!(state_of(&daemon, &id), "running", "detaching stopped it");

    tmux.start("b", &daemon, &["--session", &id]);
    let screen = tmux.wait("b", "the finished reply", |s| {
        s.contains("word40") && !s.contains("working")
    });
    for i in 1..=WORDS {
        let word = format!("word{i:02}");
        assert_eq!(screen.matches(&word).count(), 1, "{word}:\n{screen}");
    }
    assert_eq!(
        screen.matches("› write one long paragraph").count(),
        1,
        "{screen}"
    );
}

/// A second workspace under the daemon's directory, with a `build` directory to remove.
fn other_workspace(daemon: &TestDaemon) -> std::path::PathBuf {
    let dir = daemon.dir.path().join("other-repo");
    std::fs::create_dir_all(dir.join("build")).unwrap();
    dir
}

/// A session in `cwd` (write mode) prompted with `text`; returns its id.
fn prompt_in(daemon: &TestDaemon, cwd: &Path, text: &str) -> String {
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": cwd.display().to_string(), "mode": "write", "title": "other repo"}),
    );
    let id = info["sessionId"].as_str().unwrap().to_owned();
    daemon.rpc_ok("session/prompt", json!({"sessionId": id, "text": text}));
    id
}

fn eventually_state(daemon: &TestDaemon, id: &str, want: &str) {
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    loop {
        let state = state_of(daemon, id);
        if state == want {
            return;
        }
        assert!(Instant::now() < deadline, "{id} stayed {state}, not {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn rm_build() -> MockTurn {
    MockTurn::tool_call("bash", &json!({"command": "rm -rf build"}))
}

#[test]
fn the_switcher_lists_every_session_and_answers_a_background_approval() {
    let mock = MockLlm::start_blocking(vec![
        rm_build(),
        MockTurn::text("Removed the build directory."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let other = other_workspace(&daemon);
    let tmux = Tmux::new("switch");
    tmux.start("s", &daemon, &[]);
    tmux.wait("s", "the welcome screen", |s| s.contains("Type a prompt"));
    let here = newest_session(&daemon);

    // A session in another workspace asks for an approval nobody attached to it can give:
    // the TUI's watch keeps it waiting, and the rule says so.
    let bg = prompt_in(&daemon, &other, "clean the build");
    eventually_state(&daemon, &bg, "waiting_approval");
    tmux.wait("s", "the hint in the rule", |s| {
        s.contains("1 other waiting for approval")
    });

    tmux.keys("s", &["C-s"]);
    let screen = tmux.wait("s", "the switcher", |s| {
        s.contains("sessions (2)") && s.contains("other repo")
    });
    let row = |needle: &str| {
        screen
            .lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no row with {needle}:\n{screen}"))
    };
    let (bg_row, here_row) = (row("other repo"), row("(here)"));
    assert!(
        bg_row < here_row,
        "the waiting session is listed first:\n{screen}"
    );
    assert!(
        screen.lines().nth(bg_row).unwrap().contains("approval"),
        "{screen}"
    );
    assert!(
        screen.lines().nth(here_row).unwrap().contains("idle"),
        "{screen}"
    );

    // The attached session is selected: up once, Enter switches.
    tmux.keys("s", &["Up", "Enter"]);
    tmux.wait("s", "the approval of the other session", |s| {
        s.contains("rm -rf build") && !s.contains("sessions (2)")
    });
    tmux.keys("s", &["y"]);
    tmux.wait("s", "the other session's reply", |s| {
        s.contains("Removed the build directory.") && !s.contains("working")
    });
    assert!(!other.join("build").exists(), "the approved command ran");
    assert_eq!(state_of(&daemon, &bg), "idle");
    assert_eq!(state_of(&daemon, &here), "idle");

    // Ctrl-S again: both listed, the one on screen now is `here`.
    tmux.keys("s", &["C-s"]);
    let screen = tmux.wait("s", "the switcher again", |s| s.contains("sessions (2)"));
    let here_line = screen.lines().find(|l| l.contains("(here)")).unwrap();
    assert!(here_line.contains("other repo"), "{screen}");
    tmux.keys("s", &["Escape"]);
    tmux.wait("s", "the switcher closed", |s| !s.contains("sessions (2)"));
}

/// Reads what the pane's program wrote so far.
fn raw(file: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(file).unwrap_or_default()).into_owned()
}

/// Desktop notifications (OSC 9, wrapped for tmux) in `raw` that mention `what`.
fn notifications(raw: &str, what: &str) -> usize {
    raw.split("]9;amber: ")
        .skip(1)
        .filter(|n| n.split('\x07').next().unwrap_or_default().contains(what))
        .count()
}

#[test]
fn an_approval_rings_once_while_unfocused_or_elsewhere() {
    let mock = MockLlm::start_blocking(vec![
        rm_build(),
        MockTurn::text("Removed it."),
        done(),
        rm_build(),
        MockTurn::text("Removed it again."),
        done(),
        rm_build(),
        MockTurn::text("Removed the other one."),
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let other = other_workspace(&daemon);
    let out = daemon.dir.path().join("pane-output");
    let tmux = Tmux::new("notify");
    tmux.start("n", &daemon, &[]);
    tmux.run(&["set-option", "-g", "focus-events", "on"]);
    tmux.pipe_output("n", &out);
    tmux.wait("n", "the welcome screen", |s| s.contains("Type a prompt"));

    // Focus out (`ESC [ O`, as a terminal reports it), then an approval: one bell, one OSC 9.
    tmux.run(&["send-keys", "-t", "n", "-H", "1b", "5b", "4f"]);
    tmux.type_text("n", "clean the build");
    tmux.keys("n", &["Enter"]);
    tmux.wait("n", "the approval", |s| s.contains("rm -rf build"));
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    while notifications(&raw(&out), "approval needed") == 0 {
        assert!(
            Instant::now() < deadline,
            "no notification:\n{:?}",
            raw(&out)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let text = raw(&out);
    assert_eq!(notifications(&text, "approval needed"), 1, "{text:?}");
    assert!(
        text.contains("\x07\x1bPtmux;"),
        "a bell before the OSC: {text:?}"
    );
    tmux.keys("n", &["y"]);
    tmux.wait("n", "the reply", |s| {
        s.contains("Removed it.") && !s.contains("working")
    });

    // Focus in: the attached session's next approval is seen on screen, no notification.
    tmux.run(&["send-keys", "-t", "n", "-H", "1b", "5b", "49"]);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    tmux.type_text("n", "again");
    tmux.keys("n", &["Enter"]);
    tmux.wait("n", "the second approval", |s| s.contains("rm -rf build"));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        notifications(&raw(&out), "approval needed"),
        1,
        "notified while focused"
    );
    tmux.keys("n", &["y"]);
    tmux.wait("n", "the second reply", |s| {
        s.contains("Removed it again.") && !s.contains("working")
    });

    // Focused, but another session asks: that notifies (once).
    let bg = prompt_in(&daemon, &other, "clean the other build");
    eventually_state(&daemon, &bg, "waiting_approval");
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    while notifications(&raw(&out), "other repo: approval needed") == 0 {
        assert!(
            Instant::now() < deadline,
            "no notification for the other session"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        notifications(&raw(&out), "other repo: approval needed"),
        1,
        "{:?}",
        raw(&out)
    );
    let answered: Value =
        daemon.rpc_ok("session/get", json!({"sessionId": bg, "messagesLimit": 1}));
    let request = answered["pendingApprovals"][0]["requestId"].clone();
    assert!(request.is_string(), "{answered}");
}
