//! End-to-end: the planning and lookup tools through the daemon — `todowrite` (the
//! `todo_updated` event and `session/get` todos), `skills` (workspace and user skills,
//! list/load, the summary in the system prompt), `search` grep mode (`path:line:text`,
//! .gitignore).

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{
    Events, connect, done, messages, new_session, of_type, prompt_turn, spawn, stop_reason,
};
use amber_tests::tool_calls::{call, calls, envelope_for, get_raw, put, result_of};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn todowrite_replaces_the_list_emits_todo_updated_and_shows_in_session_get() {
    let first = json!([
        {"id": "1", "text": "read the code", "status": "done"},
        {"id": "2", "text": "fix the bug", "status": "in_progress"},
        {"id": "3", "text": "run the tests", "status": "pending"},
    ]);
    let second = json!([{"id": "3", "text": "run the tests", "status": "in_progress"}]);
    let mock = MockLlm::start(vec![
        calls(vec![call("t1", "todowrite", &json!({ "todos": first }))]),
        calls(vec![call("t2", "todowrite", &json!({ "todos": second }))]),
        calls(vec![call(
            "t_bad",
            "todowrite",
            &json!({"todos": [{"id": "x", "text": "dup", "status": "pending"},
                              {"id": "x", "text": "dup", "status": "pending"}]}),
        )]),
        MockTurn::text("Planned."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    assert_eq!(get_raw(&client, &sid).await["todos"], json!([]));
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "plan").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let updates = of_type(&turn, "todo_updated");
    assert_eq!(updates.len(), 2, "one event per accepted list: {turn:#?}");
    assert_eq!(updates[0]["todos"], first);
    assert_eq!(
        updates[1]["todos"], second,
        "the list is replaced, not merged"
    );
    for update in &updates {
        assert!(update["seq"].is_u64(), "todo_updated is durable: {update}");
        assert!(update["turnId"].is_string(), "{update}");
    }
    let (status, output) = result_of(&turn, "t1");
    assert_eq!(status, "ok");
    assert!(output.contains("fix the bug"), "{output}");
    // An invalid list is an error and leaves the todos alone.
    let (status, output) = result_of(&turn, "t_bad");
    assert_eq!(status, "error", "{output}");
    assert!(output.contains("unique"), "{output}");
    let got = get_raw(&client, &sid).await;
    assert_eq!(got["todos"], second, "{got}");

    // Replayed to a late subscriber, and kept across turns.
    let mut replay = Events::subscribe(&client, &sid, Some(0)).await;
    let replayed = replay.until("synced").await;
    assert_eq!(of_type(&replayed, "todo_updated").len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn skills_are_listed_loaded_and_summarised_in_the_system_prompt() {
    let mock = MockLlm::start(vec![
        calls(vec![
            call("s_list", "skills", &json!({"action": "list"})),
            call(
                "s_load",
                "skills",
                &json!({"action": "load", "name": "release-notes"}),
            ),
            call(
                "s_user",
                "skills",
                &json!({"action": "load", "name": "user-helper"}),
            ),
            call(
                "s_missing",
                "skills",
                &json!({"action": "load", "name": "nope"}),
            ),
        ]),
        MockTurn::text("Loaded the skill."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    put(
        &daemon.workspace.join(".amber/skills/notes/SKILL.md"),
        "---\nname: release-notes\ndescription: Writes release notes from the git log\n---\n\
         # Release notes\n\nStep 1: run `git log --oneline` and group by SKILL-BODY-MARKER.\n",
    );
    // A user skill from $XDG_CONFIG_HOME/amber/skills (the daemon's isolated HOME).
    put(
        &daemon
            .dir
            .path()
            .join("home/.config/amber/skills/uh/SKILL.md"),
        "---\nname: user-helper\ndescription: A skill of the user\n---\nUSER-BODY-MARKER\n",
    );
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write release notes").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let (status, list) = result_of(&turn, "s_list");
    assert_eq!(status, "ok", "{list}");
    assert!(list.contains("release-notes"), "{list}");
    assert!(
        list.contains("Writes release notes from the git log"),
        "{list}"
    );
    assert!(list.contains("user-helper"), "{list}");
    let (status, body) = result_of(&turn, "s_load");
    assert_eq!(status, "ok", "{body}");
    assert!(body.contains("SKILL-BODY-MARKER"), "{body}");
    let (status, body) = result_of(&turn, "s_user");
    assert_eq!(status, "ok", "{body}");
    assert!(body.contains("USER-BODY-MARKER"), "{body}");
    let (status, missing) = result_of(&turn, "s_missing");
    assert_eq!(status, "error", "{missing}");
    assert!(missing.contains("nope"), "{missing}");
    assert_eq!(envelope_for(&mock, "s_load")["status"], "ok");

    // The system prompt of the first request summarises the skills.
    let requests = mock.requests();
    let system = &messages(&requests[0])[0];
    assert_eq!(system["role"], "system");
    let text = system["content"].as_str().unwrap();
    assert!(text.contains("release-notes"), "{text}");
    assert!(text.contains("Writes release notes"), "{text}");
    assert!(
        !text.contains("SKILL-BODY-MARKER"),
        "only a summary, not the body: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn search_grep_mode_finds_lines_as_path_line_text_and_respects_gitignore() {
    let mock = MockLlm::start(vec![
        calls(vec![
            call("g_all", "search", &json!({"pattern": "needle_[a-z]+"})),
            call(
                "g_glob",
                "search",
                &json!({"pattern": "needle", "glob": "*.md", "mode": "grep"}),
            ),
            call(
                "g_path",
                "search",
                &json!({"pattern": "needle", "path": "docs"}),
            ),
            call(
                "g_none",
                "search",
                &json!({"pattern": "no_such_string_here"}),
            ),
            call(
                "g_limit",
                "search",
                &json!({"pattern": "repeat", "limit": 2}),
            ),
            call(
                "g_escape",
                "search",
                &json!({"pattern": "x", "path": "../"}),
            ),
        ]),
        MockTurn::text("Found it."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = &daemon.workspace;
    put(
        &ws.join("src/lib.rs"),
        "// header\n\npub fn needle_function() {}\n",
    );
    put(&ws.join("docs/guide.md"), "intro\nthe needle_doc line\n");
    put(&ws.join("target/out.rs"), "needle_ignored\n");
    put(&ws.join(".gitignore"), "target/\n");
    put(&ws.join("many.txt"), &"repeat\n".repeat(10));
    std::fs::write(ws.join("blob.bin"), b"needle_binary\0\x01\x02").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "find the needle").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let (status, all) = result_of(&turn, "g_all");
    assert_eq!(status, "ok", "{all}");
    assert!(
        all.lines()
            .any(|l| l == "src/lib.rs:3:pub fn needle_function() {}"),
        "{all}"
    );
    assert!(
        all.lines()
            .any(|l| l == "docs/guide.md:2:the needle_doc line"),
        "{all}"
    );
    assert!(
        !all.contains("needle_ignored"),
        ".gitignore not respected: {all}"
    );
    assert!(
        !all.contains("needle_binary"),
        "binary file searched: {all}"
    );
    let (_, glob) = result_of(&turn, "g_glob");
    assert!(glob.contains("docs/guide.md:2:"), "{glob}");
    assert!(!glob.contains("src/lib.rs"), "{glob}");
    let (_, path) = result_of(&turn, "g_path");
    assert!(path.contains("guide.md"), "{path}");
    assert!(!path.contains("lib.rs"), "{path}");
    let (status, none) = result_of(&turn, "g_none");
    assert_eq!(status, "ok", "no match is not an error: {none}");
    assert!(
        !none
            .lines()
            .any(|l| l.contains(".rs:") || l.contains(".md:")),
        "{none}"
    );
    let (_, limited) = result_of(&turn, "g_limit");
    let hits = limited
        .lines()
        .filter(|l| l.starts_with("many.txt:"))
        .count();
    assert_eq!(hits, 2, "limit 2: {limited}");
    let (status, escape) = result_of(&turn, "g_escape");
    assert_eq!(status, "error", "search outside the workspace: {escape}");
    assert!(escape.contains("outside the workspace"), "{escape}");
}

#[tokio::test(flavor = "multi_thread")]
async fn search_semantic_mode_ranks_identifiers_and_sees_new_files() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "m_first",
            "search",
            &json!({"pattern": "parse config file", "mode": "semantic"}),
        )]),
        MockTurn::text("Found the parser."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = &daemon.workspace;
    put(
        &ws.join("src/config.rs"),
        "use std::fs;\n\n/// Reads the settings.\npub struct Config;\n\
         pub fn parseConfigFile(path: &str) -> Config {\n    Config\n}\n",
    );
    put(
        &ws.join("src/net.rs"),
        "pub fn open_socket() {}\npub fn close_socket() {}\n",
    );
    put(&ws.join("README.md"), "A tool. It has a config.\n");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "where is the config parser").await;
    let (status, out) = result_of(&turn, "m_first");
    assert_eq!(status, "ok", "{out}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("src/config.rs:5"),
        "parseConfigFile ranks first, at its line: {out}"
    );
    assert!(out.contains("parseConfigFile"), "with a snippet: {out}");
    assert!(!out.contains("src/net.rs"), "{out}");

    // A file added later is found by the next query (the index refreshes by mtime).
    put(
        &ws.join("src/user.rs"),
        "pub fn load_user_profile(id: u32) {}\n",
    );
    mock.push([
        calls(vec![call(
            "m_second",
            "search",
            &json!({"pattern": "loadUserProfile", "mode": "semantic"}),
        )]),
        MockTurn::text("Found the loader."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "where are profiles loaded").await;
    let (status, out) = result_of(&turn, "m_second");
    assert_eq!(status, "ok", "{out}");
    assert!(out.starts_with("src/user.rs:1"), "{out}");
}
