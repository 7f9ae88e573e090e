//! End-to-end: the real `amber` TUI in tmux against the real daemon and the mock endpoint —
//! a prompt whose streamed markdown shows rendered (no raw `**` or `#`), an approval denied
//! with `n`, a detach with Ctrl-D in the middle of a turn (the agent keeps going), and a
//! re-attach with `amber --session ID` that shows the finished reply exactly once and recalls
//! the session's prompts with Up, and a session deleted by another client while on screen
//! (amber says so and exits 1). All at 80×24, the size the TUI must be readable at.

use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{done, spawn};
use serde_json::json;

use crate::support::tmux;
use tmux::{SCREEN_TIMEOUT, Tmux};

const MARKDOWN: &str = "# Release plan\n\nShip **three fixes** and `cargo test` first.\n\n- update the changelog\n- tag the release\n";

/// A reply of one-line paragraphs, so each shows as soon as it is complete.
fn story_chunks() -> Vec<String> {
    let mut chunks = vec!["Once upon a time.\n\n".to_owned()];
    // Short enough that the whole reply and its prompt fit on an 80×24 screen.
    chunks.extend((1..=6).map(|i| format!("Chapter {i} of the story.\n\n")));
    chunks.push("THE END.".to_owned());
    chunks
}

#[test]
fn prompt_approve_detach_and_reattach_in_tmux() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text(MARKDOWN),
        done(),
        MockTurn::tool_call("bash", &json!({"command": "rm -rf build"})),
        MockTurn::text("I left the build directory alone."),
        done(),
        MockTurn::Slow {
            chunks: story_chunks(),
            interval_ms: 400,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let tmux = Tmux::new("main");

    tmux.start("one", &daemon, &[]);
    tmux.wait("one", "the welcome screen", |s| s.contains("Type a prompt"));

    // 1. A prompt; the streamed markdown is on screen rendered.
    tmux.type_text("one", "plan the release");
    tmux.keys("one", &["Enter"]);
    let screen = tmux.wait("one", "the rendered reply", |s| {
        s.contains("tag the release") && !s.contains("working")
    });
    assert!(screen.contains("› plan the release"), "{screen}");
    assert!(
        screen.contains("Release plan") && screen.contains("three fixes"),
        "{screen}"
    );
    assert!(
        !screen.contains("**") && !screen.contains("# Release"),
        "raw markdown on screen:\n{screen}"
    );

    // 2. A destructive command asks; `n` denies it.
    tmux.type_text("one", "clean the build");
    tmux.keys("one", &["Enter"]);
    let screen = tmux.wait("one", "the approval overlay", |s| {
        s.contains("Approval needed")
    });
    assert!(screen.contains("rm -rf build"), "{screen}");
    tmux.keys("one", &["n"]);
    let screen = tmux.wait("one", "the denied call and the reply", |s| {
        s.contains("build directory alone")
    });
    assert!(screen.contains("denied"), "{screen}");
    assert!(
        daemon.workspace.join("build").is_dir(),
        "the denied command ran"
    );

    // 3. Detach with Ctrl-D while a reply streams; the turn goes on in the daemon.
    tmux.type_text("one", "tell a story");
    tmux.keys("one", &["Enter"]);
    let screen = tmux.wait("one", "the story streaming", |s| s.contains("Once upon"));
    assert!(
        !screen.contains("THE END."),
        "not mid-turn any more:\n{screen}"
    );
    tmux.keys("one", &["C-d"]);
    let screen = tmux.wait("one", "amber to exit", |s| s.contains("[amber exited"));
    assert!(screen.contains("[amber exited 0]"), "{screen}");
    assert!(screen.contains("detached from"), "{screen}");
    let sessions = daemon.rpc_ok("session/list", json!({}));
    let id = sessions["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    while daemon.rpc_ok("session/get", json!({"sessionId": id}))["session"]["state"] != "idle" {
        assert!(
            Instant::now() < deadline,
            "the turn did not finish after the detach"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        mock.remaining(),
        0,
        "the agent stopped when the TUI detached"
    );

    // 4. Re-attach: the whole history, the finished story exactly once.
    tmux.start("two", &daemon, &["--session", &id]);
    let screen = tmux.wait("two", "the finished story", |s| s.contains("THE END."));
    assert_eq!(screen.matches("Once upon").count(), 1, "{screen}");
    assert_eq!(screen.matches("THE END.").count(), 1, "{screen}");
    assert!(
        !screen.contains("turn ended"),
        "the turn did not end normally:\n{screen}"
    );
    tmux.keys("two", &["PageUp", "PageUp"]);
    let screen = tmux.wait("two", "the history above", |s| s.contains("Release plan"));
    assert_eq!(screen.matches("› plan the release").count(), 1, "{screen}");

    // 5. Up recalls the session's prompts, sent by the first `amber`, in the editor (the row
    //    above the status line).
    tmux.keys("two", &["C-End", "Up"]);
    tmux.wait("two", "the last prompt recalled", |s| {
        editor_row(s).starts_with("› tell a story")
    });
    tmux.keys("two", &["Up"]);
    tmux.wait("two", "the prompt before it", |s| {
        editor_row(s).starts_with("› clean the build")
    });
    tmux.keys("two", &["C-u", "C-d"]);
    tmux.wait("two", "amber to exit", |s| s.contains("[amber exited 0]"));
}

#[test]
fn attaching_mid_reply_shows_what_streamed_before() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks: story_chunks(),
            interval_ms: 500,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    let id = info["sessionId"].as_str().unwrap().to_owned();
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": id, "text": "tell a story"}),
    );
    // Let a few paragraphs stream before anyone watches.
    let deadline = Instant::now() + SCREEN_TIMEOUT;
    while mock.request_count() == 0 {
        assert!(Instant::now() < deadline, "the model was never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    let tmux = Tmux::new("late");
    tmux.start("late", &daemon, &["--session", &id]);
    // The start of the reply is there although its deltas went out before the attach.
    let screen = tmux.wait("late", "the reply so far", |s| s.contains("Chapter 1"));
    assert!(screen.contains("Once upon"), "{screen}");
    assert!(
        !screen.contains("THE END."),
        "attached too late to test the seam:\n{screen}"
    );
    let screen = tmux.wait("late", "the finished reply", |s| {
        s.contains("THE END.") && !s.contains("working")
    });
    assert_eq!(screen.matches("Once upon").count(), 1, "{screen}");
    assert_eq!(screen.matches("Chapter 4 of").count(), 1, "{screen}");
    assert_eq!(screen.matches("THE END.").count(), 1, "{screen}");
    assert_eq!(screen.matches("› tell a story").count(), 1, "{screen}");
    tmux.keys("late", &["C-d"]);
    tmux.wait("late", "amber to exit", |s| s.contains("[amber exited 0]"));
}

/// The editor's row of a captured 80×24 screen: the one above the status line.
fn editor_row(screen: &str) -> &str {
    let rows: Vec<&str> = screen.lines().collect();
    rows.len()
        .checked_sub(2)
        .and_then(|i| rows.get(i))
        .copied()
        .unwrap_or("")
}

#[test]
fn a_session_deleted_elsewhere_ends_amber_cleanly() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Hello **there**."), done()]);
    let daemon = spawn(&mock);
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    let id = info["sessionId"].as_str().unwrap().to_owned();
    let tmux = Tmux::new("deleted");
    tmux.start("gone", &daemon, &["--session", &id]);
    tmux.wait("gone", "the welcome screen", |s| {
        s.contains("Type a prompt")
    });
    tmux.type_text("gone", "hi");
    tmux.keys("gone", &["Enter"]);
    tmux.wait("gone", "the reply", |s| {
        s.contains("Hello there.") && !s.contains("working")
    });

    // Another client deletes it: amber says why and exits 1 instead of reconnecting forever.
    daemon.rpc_ok("session/delete", json!({"sessionId": id}));
    let screen = tmux.wait("gone", "amber to exit", |s| s.contains("[amber exited"));
    assert!(screen.contains("[amber exited 1]"), "{screen}");
    assert!(
        screen.contains(&format!("session {id} was deleted")),
        "{screen}"
    );
    assert!(!screen.contains("reconnecting"), "{screen}");
}

#[test]
fn amber_agent_and_sandbox_flags_shape_the_new_session() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Looks fine."), done()]);
    let daemon = spawn(&mock);
    let tmux = Tmux::new("agentflag");
    tmux.start(
        "review",
        &daemon,
        &["--agent", "review", "--sandbox", "read-only"],
    );
    tmux.wait("review", "the welcome screen", |s| {
        s.contains("Type a prompt")
    });
    tmux.type_text("review", "review my changes");
    tmux.keys("review", &["Enter"]);
    tmux.wait("review", "the reply", |s| {
        s.contains("Looks fine.") && !s.contains("working")
    });

    let list = daemon.rpc_ok("session/list", json!({}));
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{list}");
    let session = &sessions[0];
    assert_eq!(session["agent"], "review", "{session}");
    assert_eq!(session["mode"], "read", "{session}");
    assert_eq!(session["sandbox"]["mode"], "read-only", "{session}");
    // The bundled review agent's body is the system prompt the model gets.
    let request = &mock.requests()[0];
    let system = request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are amber's code review agent."),
        "{system}"
    );
}

#[test]
fn opening_and_closing_amber_without_a_prompt_leaves_no_session_behind() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Kept."), done()]);
    let daemon = spawn(&mock);
    let sessions = || {
        daemon.rpc_ok("session/list", json!({}))["sessions"]
            .as_array()
            .unwrap()
            .len()
    };
    let tmux = Tmux::new("untouched");
    tmux.start("empty", &daemon, &[]);
    tmux.wait("empty", "the welcome screen", |s| {
        s.contains("Type a prompt")
    });
    assert_eq!(sessions(), 1, "the session exists while amber is open");
    tmux.keys("empty", &["C-d"]);
    let screen = tmux.wait("empty", "amber to exit", |s| s.contains("[amber exited"));
    assert!(screen.contains("[amber exited 0]"), "{screen}");
    assert!(!screen.contains("detached from"), "{screen}");
    assert_eq!(sessions(), 0, "the untouched session went with amber");

    // One that was prompted stays, to come back to.
    tmux.start("kept", &daemon, &[]);
    tmux.wait("kept", "the welcome screen", |s| {
        s.contains("Type a prompt")
    });
    tmux.type_text("kept", "hi");
    tmux.keys("kept", &["Enter"]);
    tmux.wait("kept", "the reply", |s| {
        s.contains("Kept.") && !s.contains("working")
    });
    tmux.keys("kept", &["C-d"]);
    let screen = tmux.wait("kept", "amber to exit", |s| s.contains("[amber exited"));
    assert!(screen.contains("detached from"), "{screen}");
    // The conversation stays in the terminal once the TUI's screen is gone, above the note.
    let prompt = screen
        .find("› hi")
        .unwrap_or_else(|| panic!("no prompt left:\n{screen}"));
    let reply = screen
        .find("• Kept.")
        .unwrap_or_else(|| panic!("no reply left:\n{screen}"));
    let note = screen.find("detached from").unwrap();
    assert!(prompt < reply && reply < note, "{screen}");
    assert_eq!(sessions(), 1);
}

#[test]
fn help_lists_every_command_shift_tab_cycles_the_mode_and_exit_leaves() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Noted."), done()]);
    let daemon = spawn(&mock);
    let tmux = Tmux::new("basics");
    tmux.start("b", &daemon, &["--mode", "read"]);
    tmux.wait("b", "the welcome screen", |s| s.contains("Type a prompt"));
    let id = daemon.rpc_ok("session/list", json!({}))["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mode = || daemon.rpc_ok("session/get", json!({"sessionId": id}))["session"]["mode"].clone();

    tmux.type_text("b", "/help");
    tmux.keys("b", &["Enter"]);
    let mut seen = tmux.wait("b", "the help", |s| s.contains("/plugins"));
    // Its start, scrolled back to: the TUI's own commands come first.
    tmux.keys("b", &["PPage"]);
    seen.push_str(&tmux.wait("b", "the start of the help", |s| s.contains("/rewind")));
    for command in [
        "/sessions",
        "/rewind",
        "/diff",
        "/fork",
        "/quit",
        "/exit",
        "/init",
        "/copy",
        "/model",
        "/rename",
        "/mode",
        "/plugins",
        "!CMD",
        "Shift-Tab",
    ] {
        assert!(seen.contains(command), "{command} in /help:\n{seen}");
    }
    tmux.keys("b", &["C-End"]);

    // Shift-Tab: read → write → yolo → read.
    for want in ["write", "yolo", "read"] {
        tmux.keys("b", &["BTab"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while mode() != want {
            assert!(
                std::time::Instant::now() < deadline,
                "mode never became {want}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    // Prompted, so the session stays; `/exit` leaves as `/detach` does.
    tmux.type_text("b", "remember this");
    tmux.keys("b", &["Enter"]);
    tmux.wait("b", "the reply", |s| {
        s.contains("Noted.") && !s.contains("working")
    });
    tmux.type_text("b", "/exit");
    tmux.keys("b", &["Enter"]);
    let screen = tmux.wait("b", "amber to exit", |s| s.contains("[amber exited"));
    assert!(screen.contains("[amber exited 0]"), "{screen}");
    assert!(screen.contains("detached from"), "{screen}");
    assert!(!screen.contains("-32602"), "{screen}");
}

#[test]
fn init_asks_the_model_for_an_agents_md_and_copy_puts_the_last_reply_on_the_clipboard() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text("Wrote **AGENTS.md** with the build and test commands."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let tmux = Tmux::new("initcopy");
    tmux.start("i", &daemon, &[]);
    // tmux keeps what a program sets with OSC 52 as a paste buffer.
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    tmux.wait("i", "the welcome screen", |s| s.contains("Type a prompt"));

    tmux.type_text("i", "/copy");
    tmux.keys("i", &["Enter"]);
    tmux.wait("i", "nothing to copy", |s| {
        s.contains("nothing to copy yet")
    });

    tmux.type_text("i", "/init");
    tmux.keys("i", &["Enter"]);
    // (The prompt itself says "working", so the status line's state is what says done.)
    tmux.wait("i", "the reply", |s| {
        s.contains("Wrote AGENTS.md") && s.contains("· idle ·")
    });
    let asked = mock.requests()[0].to_string();
    assert!(
        asked.contains("write an AGENTS.md at its root"),
        "the /init prompt reached the model: {asked}"
    );

    tmux.type_text("i", "/copy");
    tmux.keys("i", &["Enter"]);
    tmux.wait("i", "the copy note", |s| {
        s.contains("copied the last reply")
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let buffer = tmux.run(&["show-buffer"]);
        if buffer.contains("Wrote **AGENTS.md** with the build and test commands.") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the clipboard never got the reply: {buffer:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_denial_with_words_tells_the_model_why() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::tool_call("bash", &json!({"command": "rm -rf build"})),
        MockTurn::text("Understood: I will use make clean."),
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let tmux = Tmux::new("denywhy");
    tmux.start("d", &daemon, &[]);
    tmux.wait("d", "the welcome screen", |s| s.contains("Type a prompt"));
    tmux.type_text("d", "clean the build");
    tmux.keys("d", &["Enter"]);
    let screen = tmux.wait("d", "the approval overlay", |s| {
        s.contains("Approval needed")
    });
    assert!(screen.contains("e deny and say why"), "{screen}");
    tmux.keys("d", &["e"]);
    tmux.wait("d", "the words line", |s| s.contains("why:"));
    tmux.type_text("d", "use make clean instead");
    tmux.keys("d", &["Enter"]);
    tmux.wait("d", "the reply", |s| s.contains("I will use make clean"));
    assert!(
        daemon.workspace.join("build").exists(),
        "the denied call ran"
    );
    // The model got the words with the denied call's result.
    let next = mock.requests()[1].to_string();
    assert!(
        next.contains("the user denied this call and said: use make clean instead"),
        "{next}"
    );
}

#[test]
fn a_bang_command_runs_as_the_user_and_its_output_goes_with_the_next_prompt() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("The file says hello."), done()]);
    let daemon = spawn(&mock);
    std::fs::write(
        daemon.workspace.join("greeting.txt"),
        "hello from the workspace\n",
    )
    .unwrap();
    let tmux = Tmux::new("bang");
    tmux.start("g", &daemon, &[]);
    tmux.wait("g", "the welcome screen", |s| s.contains("Type a prompt"));

    // In the session's directory, as the user: a file outside the workspace is written,
    // which the sandbox would refuse a tool.
    let outside = daemon.workspace.parent().unwrap().join("bang-sentinel");
    tmux.type_text(
        "g",
        &format!("!cat greeting.txt; touch {}; exit 7", outside.display()),
    );
    tmux.keys("g", &["Enter"]);
    let screen = tmux.wait("g", "the command's output", |s| {
        s.contains("hello from the workspace") && s.contains("(exit status 7)")
    });
    assert!(outside.exists(), "it ran as the user:\n{screen}");
    assert_eq!(mock.request_count(), 0, "a ! command is no prompt");

    tmux.type_text("g", "what does it say?");
    tmux.keys("g", &["Enter"]);
    tmux.wait("g", "the reply", |s| s.contains("The file says hello."));
    let asked = mock.requests()[0].to_string();
    assert!(
        asked.contains("$ cat greeting.txt") && asked.contains("hello from the workspace"),
        "the output went with the prompt: {asked}"
    );
    assert!(asked.contains("what does it say?"), "{asked}");

    tmux.type_text("g", "/help");
    tmux.keys("g", &["Enter"]);
    tmux.wait("g", "the help", |s| s.contains("!CMD"));
}

#[test]
fn the_model_picker_offers_the_providers_models_and_pins_the_choice() {
    let mock = MockLlm::start_blocking(vec![]);
    let config = format!(
        "{}\n[providers.second]\nbase_url = \"{}\"\nmodel = \"second-model\"\n",
        amber_tests::steps::FAST_RETRIES,
        mock.base_url()
    );
    let daemon = amber_tests::steps::spawn_config(&mock, &config);
    let tmux = Tmux::new("models");
    tmux.start("m", &daemon, &[]);
    tmux.wait("m", "the welcome screen", |s| s.contains("Type a prompt"));
    let id = daemon.rpc_ok("session/list", json!({}))["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    tmux.type_text("m", "/model");
    tmux.keys("m", &["Enter"]);
    // The session's provider lists its models (the endpoint's `/models`); the other
    // provider offers its default.
    let screen = tmux.wait("m", "the picker", |s| {
        s.contains(" model ") && s.contains("second-model") && s.contains("mock-model")
    });
    assert!(screen.contains("Enter use it"), "{screen}");
    let row = |screen: &str, what: &str| {
        screen
            .lines()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what}:\n{screen}"))
    };
    // From the first row (under the box's top border) down to `second-model`.
    tmux.keys("m", &["Home"]);
    let top = row(&screen, " model ");
    for _ in 0..(row(&screen, "second-model") - top - 1) {
        tmux.keys("m", &["Down"]);
    }
    tmux.keys("m", &["Enter"]);
    tmux.wait("m", "the daemon's answer", |s| {
        s.contains("model: second-model (provider: second)")
    });
    let session = &daemon.rpc_ok("session/get", json!({"sessionId": id}))["session"];
    assert_eq!(session["model"], "second-model", "{session}");
    assert_eq!(session["provider"], "second", "{session}");

    tmux.type_text("m", "/model");
    tmux.keys("m", &["Enter"]);
    tmux.wait("m", "the picker again", |s| s.contains("Enter use it"));
    tmux.keys("m", &["Escape"]);
    tmux.wait("m", "the picker closed", |s| !s.contains("Enter use it"));
    let session = &daemon.rpc_ok("session/get", json!({"sessionId": id}))["session"];
    assert_eq!(
        session["model"], "second-model",
        "Esc changed nothing: {session}"
    );
}

#[test]
fn rename_names_the_session_and_amber_comes_back_to_it_by_name() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Noted."), done()]);
    let daemon = spawn(&mock);
    let tmux = Tmux::new("rename");
    tmux.start("r", &daemon, &[]);
    tmux.wait("r", "the welcome screen", |s| s.contains("Type a prompt"));
    tmux.type_text("r", "remember the login bug");
    tmux.keys("r", &["Enter"]);
    tmux.wait("r", "the reply", |s| {
        s.contains("Noted.") && s.contains("· idle ·")
    });

    tmux.type_text("r", "/rename fix-auth");
    tmux.keys("r", &["Enter"]);
    tmux.wait("r", "the note", |s| {
        s.contains("this session is named fix-auth")
    });
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["name"], "fix-auth", "{listed}");

    // A name the daemon refuses is said in words, and changes nothing.
    tmux.type_text("r", "/rename 3f2a");
    tmux.keys("r", &["Enter"]);
    let screen = tmux.wait("r", "the refusal", |s| s.contains("only hex digits"));
    assert!(!screen.contains("-32602"), "{screen}");

    tmux.keys("r", &["C-d"]);
    tmux.wait("r", "amber to exit", |s| s.contains("[amber exited"));
    tmux.start("r2", &daemon, &["--session", "fix-auth"]);
    tmux.wait("r2", "the session, by its name", |s| {
        s.contains("remember the login bug") && s.contains("Noted.")
    });
}
