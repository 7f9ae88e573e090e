//! What the model is sent, through the real daemon and the scripted endpoint's recorded
//! requests: the head (the system prompt, the environment block, the project's `AGENTS.md`
//! files, in order, with headers, capped, re-read when edited, skipped with a note when they
//! cannot be read or are symlinks leading outside the workspace) byte-identical across the
//! requests and turns of a session and after a restart, and the tail (`<system-reminder>`
//! with the todo list and the mode) on the copy only — `session/get` shows the context as
//! stored.

use std::path::Path;
use std::process::Command;

use amber_client::Client;
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::SessionNewParams;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, last_message, messages, new_session, prompt_turn, spawn,
    spawn_config, within,
};
use amber_tests::tool_calls::{call, calls};
use serde_json::{Value, json};

/// The head of a recorded request: its first message, which must be the system message.
fn head(request: &Value) -> String {
    let first = &messages(request)[0];
    assert_eq!(first["role"], "system", "{first}");
    first["content"].as_str().unwrap().to_owned()
}

/// `git ARGS` in `dir`, which must succeed.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=amber-tests",
            "-c",
            "user.email=tests@amber.invalid",
        ])
        .args([
            "-c",
            "init.defaultBranch=trunk",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A session whose cwd is `cwd` (inside the daemon's workspace).
async fn session_at(client: &Client, cwd: &Path, system_prompt: Option<&str>) -> String {
    let params = SessionNewParams {
        cwd: cwd.display().to_string(),
        system_prompt: system_prompt.map(str::to_owned),
        ..SessionNewParams::default()
    };
    within("session/new", client.session_new(&params))
        .await
        .expect("session/new")
        .session_id
}

fn two_plain_turns() -> Vec<MockTurn> {
    vec![MockTurn::text("one"), done(), MockTurn::text("two"), done()]
}

#[tokio::test(flavor = "multi_thread")]
async fn nested_agents_files_come_root_first_with_headers_and_an_edit_applies_next_turn() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let daemon = spawn(&mock);
    let root = &daemon.workspace;
    git(root, &["init", "-q"]);
    let cwd = root.join("crates/app");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(root.join("AGENTS.md"), "ROOT-RULES: run cargo test\n").unwrap();
    std::fs::write(root.join("crates/AGENTS.md"), "CRATES-RULES\n").unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "APP-RULES: version one\n").unwrap();
    // The user's global file (the daemon's XDG_CONFIG_HOME is `<dir>/home/.config`).
    let global = daemon.dir.path().join("home/.config/amber");
    std::fs::create_dir_all(&global).unwrap();
    std::fs::write(global.join("AGENTS.md"), "GLOBAL-RULES\n").unwrap();
    // Below the session's cwd: not read.
    std::fs::create_dir_all(cwd.join("src")).unwrap();
    std::fs::write(cwd.join("src/AGENTS.md"), "DEEPER-RULES\n").unwrap();

    let client = connect(&daemon).await;
    let sid = session_at(&client, &cwd, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "first").await;
    let first = head(&mock.requests()[0]);
    let at = |needle: &str| {
        first
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing: {first}"))
    };
    assert!(first.starts_with("You are amber"), "{first}");
    assert!(at("# Environment") < at("# Project instructions"));
    // Named by its path under the daemon's HOME, and the most general: first.
    assert!(at("## ~/.config/amber/AGENTS.md\n\nGLOBAL-RULES") < at("## ../../AGENTS.md"));
    assert!(
        at("## ../../AGENTS.md\n\nROOT-RULES: run cargo test")
            < at("## ../AGENTS.md\n\nCRATES-RULES")
    );
    assert!(at("## ../AGENTS.md") < at("## AGENTS.md\n\nAPP-RULES: version one"));
    assert!(!first.contains("DEEPER-RULES"), "{first}");

    // Edited between turns (a different size, so the stamp changes whatever the clock).
    std::fs::write(cwd.join("AGENTS.md"), "APP-RULES: version two, edited\n").unwrap();
    prompt_turn(&client, &mut events, &sid, "second").await;
    let requests = mock.requests();
    let second = head(&requests[requests.len() - 2]);
    assert!(
        second.contains("APP-RULES: version two, edited"),
        "{second}"
    );
    assert!(!second.contains("version one"), "{second}");

    // The context keeps only the stored system prompt: the head is on the copy.
    let got = within("get", client.session_get(&sid)).await.unwrap();
    let stored = &got.messages[0].content;
    assert!(stored.starts_with("You are amber"), "{stored}");
    assert!(
        !stored.contains("# Environment") && !stored.contains("RULES"),
        "{stored}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn instructions_are_capped_nearest_first_and_the_cut_is_marked() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let config = format!("{FAST_RETRIES}[agent]\ninstructions_max_bytes = 100\n");
    let daemon = spawn_config(&mock, &config);
    let root = &daemon.workspace;
    git(root, &["init", "-q"]);
    let cwd = root.join("sub");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(root.join("AGENTS.md"), format!("FAR{}", "f".repeat(200))).unwrap();
    std::fs::write(cwd.join("AGENTS.md"), format!("NEAR{}", "n".repeat(76))).unwrap();

    let client = connect(&daemon).await;
    let sid = session_at(&client, &cwd, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "go").await;
    let text = head(&mock.requests()[0]);
    // The nearest file whole (80 bytes), then 20 bytes of the farther one, marked.
    assert!(
        text.contains(&format!("## AGENTS.md\n\nNEAR{}", "n".repeat(76))),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "## ../AGENTS.md\n\nFAR{}\n\n[amber: cut here: the remaining 183 bytes",
            "f".repeat(17)
        )),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_instruction_file_is_skipped_with_a_note_and_a_warning() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let daemon = spawn(&mock);
    let root = &daemon.workspace;
    git(root, &["init", "-q"]);
    let cwd = root.join("pkg");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(root.join("AGENTS.md"), [b'b', b'a', b'd', 0xff, 0xfe]).unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "GOOD-RULES\n").unwrap();

    let client = connect(&daemon).await;
    let sid = session_at(&client, &cwd, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    let text = head(&mock.requests()[0]);
    assert!(
        text.contains("[amber: `../AGENTS.md` was skipped: not valid UTF-8]"),
        "{text}"
    );
    assert!(text.contains("## AGENTS.md\n\nGOOD-RULES"), "{text}");
    assert!(
        daemon.log().contains("instruction file skipped"),
        "{}",
        daemon.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlinked_agents_file_pointing_outside_the_workspace_is_not_followed() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let daemon = spawn(&mock);
    let outside = daemon.dir.path().join("outside.md");
    std::fs::write(&outside, "OUTSIDE-SECRET\n").unwrap();
    std::os::unix::fs::symlink(&outside, daemon.workspace.join("AGENTS.md")).unwrap();

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "go").await;
    let text = head(&mock.requests()[0]);
    assert!(!text.contains("OUTSIDE-SECRET"), "{text}");
    assert!(
        text.contains("[amber: `AGENTS.md` was skipped: not followed: a symlink to"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_block_names_branch_changed_files_and_last_commit_in_a_repository() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let daemon = spawn(&mock);
    let root = &daemon.workspace;
    git(root, &["init", "-q"]);
    std::fs::write(root.join("tracked.txt"), "v1\n").unwrap();
    git(root, &["add", "tracked.txt"]);
    git(root, &["commit", "-q", "-m", "Teach the parser about tabs"]);
    git(root, &["checkout", "-q", "-b", "feature/prompt"]);
    std::fs::write(root.join("tracked.txt"), "v2\n").unwrap();
    std::fs::write(root.join("new.txt"), "new\n").unwrap();

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "go").await;
    let text = head(&mock.requests()[0]);
    assert!(text.contains("# Environment (at session start)"), "{text}");
    assert!(text.contains("- Git branch: feature/prompt"), "{text}");
    assert!(text.contains("- Changed files (git status): 2"), "{text}");
    assert!(
        text.contains("- Last commit: Teach the parser about tabs"),
        "{text}"
    );
    assert!(
        text.contains(&format!("- Workspace root: {}", root.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("- OS: {} (", std::env::consts::OS)),
        "{text}"
    );
    assert!(text.contains("- Shell: /"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_a_repository_the_environment_block_says_so() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "go").await;
    let text = head(&mock.requests()[0]);
    assert!(text.contains("- Git: not a git repository"), "{text}");
    assert!(!text.contains("Git branch"), "{text}");
    let date = text
        .lines()
        .find_map(|l| l.strip_prefix("- Date: "))
        .unwrap_or_else(|| panic!("no date: {text}"));
    let day = &date[..10];
    assert!(
        day.chars().enumerate().all(|(i, c)| if i == 4 || i == 7 {
            c == '-'
        } else {
            c.is_ascii_digit()
        }),
        "{date}"
    );
    assert!(
        !text.contains("# Project instructions"),
        "no files, no block: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_head_is_byte_identical_across_requests_and_turns_and_the_tail_is_on_the_copy() {
    let mock = MockLlm::start(vec![
        calls(vec![call("r1", "read", &json!({"path": "notes.txt"}))]),
        MockTurn::text("read it"),
        done(),
        MockTurn::text("two"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(daemon.workspace.join("AGENTS.md"), "STABLE-RULES\n").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "first").await;
    prompt_turn(&client, &mut events, &sid, "second").await;

    let requests = mock.requests();
    assert_eq!(
        requests.len(),
        5,
        "tool round, reply, confirm, reply, confirm"
    );
    let first = head(&requests[0]);
    assert!(first.contains("STABLE-RULES"), "{first}");
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(head(request), first, "request {i} has another head");
    }
    // One system message, first; the tail joins the prompt as a user block.
    for request in &requests {
        let systems = messages(request)
            .iter()
            .filter(|m| m["role"] == "system")
            .count();
        assert_eq!(systems, 1, "{request}");
    }
    let asked = last_message(&requests[0]);
    assert_eq!(asked["role"], "user");
    let content = asked["content"].as_str().unwrap();
    assert!(
        content.starts_with("first\n\n<system-reminder>\n"),
        "{content}"
    );
    assert!(
        content.contains("this session is in write mode"),
        "{content}"
    );
    // After a tool result the tail is a user message of its own.
    let after_tool = messages(&requests[1]);
    let n = after_tool.len();
    assert_eq!(after_tool[n - 2]["role"], "tool");
    assert_eq!(after_tool[n - 1]["role"], "user");
    assert!(
        after_tool[n - 1]["content"]
            .as_str()
            .unwrap()
            .starts_with("<system-reminder>")
    );
    // An earlier prompt goes back as it was typed.
    let later = messages(&requests[3]);
    assert!(later.iter().any(|m| m["content"] == "first"), "{later:#?}");

    // The stored context has neither head nor tail.
    let got = within("get", client.session_get(&sid)).await.unwrap();
    for message in &got.messages {
        assert!(
            !message.content.contains("<system-reminder>"),
            "{message:?}"
        );
        assert!(!message.content.contains("STABLE-RULES"), "{message:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_todo_list_is_in_the_tail_after_todowrite() {
    let todos = json!({"todos": [
        {"id": "1", "text": "write the lexer", "status": "done"},
        {"id": "2", "text": "test the lexer", "status": "in_progress"},
    ]});
    let mock = MockLlm::start(vec![
        calls(vec![call("t1", "todowrite", &todos)]),
        MockTurn::text("planned"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "plan it").await;
    let requests = mock.requests();
    let before = last_message(&requests[0])["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!before.contains("todo list"), "{before}");
    let tail = last_message(&requests[1])["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        tail.starts_with("<system-reminder>\nYour todo list"),
        "{tail}"
    );
    assert!(
        tail.contains("[x] write the lexer (1)\n[~] test the lexer (2)"),
        "{tail}"
    );
    // The head did not change with the todo list.
    assert_eq!(head(&requests[0]), head(&requests[1]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_system_prompt_still_gets_the_environment_and_instructions() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("AGENTS.md"), "CUSTOM-SESSION-RULES\n").unwrap();
    let client = connect(&daemon).await;
    let sid = session_at(
        &client,
        &daemon.workspace,
        Some("You are a terse reviewer."),
    )
    .await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "go").await;
    let text = head(&mock.requests()[0]);
    assert!(
        text.starts_with("You are a terse reviewer.\n\n# Environment"),
        "{text}"
    );
    assert!(text.contains("CUSTOM-SESSION-RULES"), "{text}");
    assert!(!text.contains("You are amber"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_system_prompt_replaces_the_built_in_one_and_a_session_s_beats_it() {
    let mock = MockLlm::start(vec![
        MockTurn::text("one"),
        done(),
        MockTurn::text("two"),
        done(),
    ])
    .await;
    let config = format!("{FAST_RETRIES}[agent]\nsystem_prompt = \"You follow CONFIG-PROMPT.\"\n");
    let daemon = spawn_config(&mock, &config);
    std::fs::write(daemon.workspace.join("AGENTS.md"), "CONFIG-RULES\n").unwrap();
    let client = connect(&daemon).await;

    let configured = session_at(&client, &daemon.workspace, None).await;
    let mut events = Events::live(&client, &configured).await;
    prompt_turn(&client, &mut events, &configured, "go").await;
    let text = head(&mock.requests()[0]);
    assert!(
        text.starts_with("You follow CONFIG-PROMPT.\n\n# Environment"),
        "{text}"
    );
    assert!(text.contains("CONFIG-RULES"), "{text}");
    assert!(!text.contains("You are amber"), "{text}");

    let own = session_at(&client, &daemon.workspace, Some("SESSION-PROMPT")).await;
    let mut events = Events::live(&client, &own).await;
    prompt_turn(&client, &mut events, &own, "go").await;
    let text = head(mock.requests().last().unwrap());
    assert!(
        text.starts_with("SESSION-PROMPT\n\n# Environment"),
        "{text}"
    );
    assert!(!text.contains("CONFIG-PROMPT"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_session_sends_the_same_head() {
    let mock = MockLlm::start(two_plain_turns()).await;
    let mut daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("AGENTS.md"), "RESTORED-RULES\n").unwrap();
    let sid = {
        let client = connect(&daemon).await;
        let sid = new_session(&client, &daemon, None).await;
        let mut events = Events::live(&client, &sid).await;
        prompt_turn(&client, &mut events, &sid, "before").await;
        sid
    };
    daemon.restart();
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "after").await;
    let requests = mock.requests();
    let without_date = |text: String| -> String {
        text.lines()
            .filter(|l| !l.starts_with("- Date: "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let before = head(&requests[0]);
    assert!(before.contains("RESTORED-RULES"), "{before}");
    assert_eq!(without_date(head(&requests[2])), without_date(before));
}
