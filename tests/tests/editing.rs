//! End-to-end: the editing tools through the real daemon and the scripted endpoint.
//!
//! - `apply_patch`: one patch adds, updates (several hunks, one located by its `@@` line),
//!   moves and deletes files, and the result lists each with its status; a patch with one bad
//!   hunk, or with a path outside the workspace, changes nothing; a patch touching a protected
//!   path asks in write mode (never grantable) and is denied in read mode; an added file or
//!   a move's destination that exists is overwritten (all or nothing still), and a lone CR
//!   is text, not a line end.
//! - `edit {edits}`: several replacements in order; one that fails writes nothing and shows
//!   the closest region with line numbers; a match differing in indentation is applied with a
//!   note.
//! - `tool_call_completed.diff`: a unified diff for `write`, `edit` and `apply_patch`, absent
//!   for other tools and failed calls.

use std::fs;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, prompt_turn, spawn, stop_reason,
};
use amber_tests::tool_calls::{asked, call, calls, completed, envelope_for, put, result_of};
use serde_json::{Value, json};

fn patch(body: &str) -> Value {
    json!({ "patch": format!("*** Begin Patch\n{body}*** End Patch\n") })
}

/// The numbered lines of a 40-line file, `line N` each.
fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_patch_adds_updates_moves_and_deletes_files_with_a_diff() {
    let several_hunks = "*** Update File: src/lib.rs\n@@\n line 2\n-line 3\n+line three\n line 4\n\
                         @@ line 20\n line 21\n-line 22\n+line twenty-two\n+line 22b\n line 23\n\
                         @@\n line 39\n-line 40\n+line forty\n*** End of File\n";
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "p1",
            "apply_patch",
            &patch(&format!(
                "*** Add File: docs/new.md\n+# New\n+\n+text\n{several_hunks}\
                 *** Update File: old/name.rs\n*** Move to: new/name.rs\n@@\n fn keep() {{}}\n-fn old() {{}}\n+fn renamed() {{}}\n\
                 *** Delete File: gone.txt\n"
            )),
        )]),
        MockTurn::text("Patched."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    put(&ws.join("src/lib.rs"), &numbered(40));
    put(&ws.join("old/name.rs"), "fn keep() {}\nfn old() {}\n");
    put(&ws.join("gone.txt"), "bye\n");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "patch it").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let (status, output) = result_of(&turn, "p1");
    assert_eq!(status, "ok", "{output}");
    assert_eq!(
        output,
        "applied the patch: 4 files\nadded `docs/new.md`\nmodified `src/lib.rs`\n\
         moved `old/name.rs` -> `new/name.rs`\ndeleted `gone.txt`"
    );
    assert_eq!(
        envelope_for(&mock, "p1")["output"],
        output,
        "the model saw the same"
    );
    assert_eq!(
        fs::read_to_string(ws.join("docs/new.md")).unwrap(),
        "# New\n\ntext\n"
    );
    let lib = fs::read_to_string(ws.join("src/lib.rs")).unwrap();
    let expected = numbered(40)
        .replace("line 3\n", "line three\n")
        .replace("line 22\n", "line twenty-two\nline 22b\n")
        .replace("line 40\n", "line forty\n");
    assert_eq!(lib, expected);
    assert_eq!(
        fs::read_to_string(ws.join("new/name.rs")).unwrap(),
        "fn keep() {}\nfn renamed() {}\n"
    );
    assert!(!ws.join("old/name.rs").exists());
    assert!(!ws.join("gone.txt").exists());

    let diff = completed(&turn, "p1")["diff"]
        .as_str()
        .expect("a diff")
        .to_owned();
    for part in [
        "--- /dev/null\n+++ b/docs/new.md\n@@ -0,0 +1,3 @@\n+# New\n+\n+text\n",
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,6 +1,6 @@\n line 1\n line 2\n-line 3\n+line three\n",
        "@@ -19,7 +19,8 @@\n line 19\n line 20\n line 21\n-line 22\n+line twenty-two\n+line 22b\n",
        "-line 40\n+line forty\n",
        "--- a/old/name.rs\n+++ b/new/name.rs\n",
        "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
    ] {
        assert!(diff.contains(part), "{part:?} not in:\n{diff}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_patch_with_one_bad_hunk_or_a_path_outside_changes_nothing() {
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escaped.txt").display().to_string();
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "bad_hunk",
            "apply_patch",
            &patch(
                "*** Add File: added.txt\n+new\n*** Update File: a.rs\n@@\n-line 1\n+LINE 1\n\
                 *** Delete File: b.rs\n*** Update File: c.rs\n@@ line 10\n-line 11 is not here\n+x\n",
            ),
        )]),
        calls(vec![call(
            "outside",
            "apply_patch",
            &patch(&format!(
                "*** Update File: a.rs\n@@\n-line 1\n+LINE 1\n*** Add File: {escape}\n+pwned\n"
            )),
        )]),
        calls(vec![call(
            "dotdot",
            "apply_patch",
            &patch("*** Update File: a.rs\n*** Move to: ../moved-out.rs\n@@\n-line 1\n+LINE 1\n"),
        )]),
        MockTurn::text("Nothing changed."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    for name in ["a.rs", "b.rs", "c.rs"] {
        put(&ws.join(name), &numbered(20));
    }
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "patch").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let (status, output) = result_of(&turn, "bad_hunk");
    assert_eq!(status, "error", "{output}");
    assert!(
        output.starts_with("`c.rs`: hunk 1 (@@ line 10) does not match"),
        "{output}"
    );
    assert!(
        output.contains("  line 11 is not here\n"),
        "what it looked for: {output}"
    );
    assert!(
        output.contains("    11\tline 11\n"),
        "the closest region, numbered: {output}"
    );
    assert!(output.ends_with("Nothing was changed."), "{output}");
    for id in ["outside", "dotdot"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "error", "{id}: {output}");
        assert!(output.contains("outside the workspace"), "{id}: {output}");
    }
    for id in ["bad_hunk", "outside", "dotdot"] {
        assert!(
            completed(&turn, id).get("diff").is_none(),
            "{id}: a failed call has no diff"
        );
    }
    for name in ["a.rs", "b.rs", "c.rs"] {
        assert_eq!(
            fs::read_to_string(ws.join(name)).unwrap(),
            numbered(20),
            "{name}"
        );
    }
    assert!(!ws.join("added.txt").exists());
    assert!(!outside.path().join("escaped.txt").exists());
    assert!(!ws.parent().unwrap().join("moved-out.rs").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_patch_overwrites_an_added_file_and_a_move_destination_and_keeps_a_lone_cr() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "bad",
            "apply_patch",
            &patch(
                "*** Add File: notes.md\n+lost\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-a\n+A\n\
                 *** Update File: c.rs\n@@\n-not here\n+x\n",
            ),
        )]),
        calls(vec![call(
            "over",
            "apply_patch",
            &patch(
                "*** Add File: notes.md\n+# Notes\n+x\ry\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-a\n+A\n",
            ),
        )]),
        MockTurn::text("Overwritten."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    put(&ws.join("notes.md"), "old notes\n");
    put(&ws.join("a.rs"), "a\n");
    put(&ws.join("b.rs"), "b\n");
    put(&ws.join("c.rs"), "c\n");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "overwrite").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let (status, output) = result_of(&turn, "bad");
    assert_eq!(status, "error", "{output}");
    assert!(output.ends_with("Nothing was changed."), "{output}");

    let (status, output) = result_of(&turn, "over");
    assert_eq!(status, "ok", "{output}");
    assert_eq!(
        output,
        "applied the patch: 2 files\noverwrote `notes.md`\nmoved `a.rs` -> `b.rs` (overwrote `b.rs`)"
    );
    assert_eq!(envelope_for(&mock, "over")["output"], output);
    assert_eq!(fs::read(ws.join("notes.md")).unwrap(), b"# Notes\nx\ry\n");
    assert_eq!(fs::read_to_string(ws.join("b.rs")).unwrap(), "A\n");
    assert!(!ws.join("a.rs").exists());
    let diff = completed(&turn, "over")["diff"]
        .as_str()
        .expect("a diff")
        .to_owned();
    for part in [
        "--- a/notes.md\n+++ b/notes.md\n",
        "-old notes\n+# Notes\n",
        "--- a/b.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n",
        "--- a/a.rs\n+++ b/b.rs\n@@ -1 +1 @@\n-a\n+A\n",
    ] {
        assert!(diff.contains(part), "{part:?} not in:\n{diff}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_patch_touching_a_protected_path_asks_in_write_mode_and_is_denied_in_read_mode() {
    let protected = patch(
        "*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: .amber/rules.toml\n+[[rules]]\n",
    );
    let moved_to_hooks =
        patch("*** Update File: src/a.rs\n*** Move to: .git/hooks/pre-commit\n@@\n-a\n+b\n");
    let mock = MockLlm::start(vec![
        calls(vec![
            call("w_rules", "apply_patch", &protected),
            call("w_hooks", "apply_patch", &moved_to_hooks),
        ]),
        MockTurn::text("Asked."),
        done(),
        calls(vec![call(
            "r_plain",
            "apply_patch",
            &patch("*** Update File: src/a.rs\n@@\n-a\n+b\n"),
        )]),
        MockTurn::text("Denied."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    put(&ws.join("src/a.rs"), "a\n");
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let client = connect(&daemon).await;

    let sid = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "patch").await;
    for (id, path) in [
        ("w_rules", ".amber/rules.toml"),
        ("w_hooks", ".git/hooks/pre-commit"),
    ] {
        assert!(asked(&turn, id), "{id} did not ask: {turn:#?}");
        let request = of_type(&turn, "approval_requested")
            .into_iter()
            .find(|e| e["callId"] == id)
            .unwrap()
            .clone();
        assert_eq!(
            request["scope"], "this call only",
            "{id} is never grantable: {request}"
        );
        assert!(
            request["reason"].as_str().unwrap().contains(path),
            "{request}"
        );
        // No approver is connected: denied at once.
        assert_eq!(result_of(&turn, id).0, "denied", "{id}");
    }
    assert!(!ws.join(".amber").exists());
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(fs::read_to_string(ws.join("src/a.rs")).unwrap(), "a\n");

    let sid = new_session(&client, &daemon, Some(Mode::Read)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "patch").await;
    let (status, output) = result_of(&turn, "r_plain");
    assert_eq!(status, "denied", "{output}");
    assert!(output.contains("read mode"), "{output}");
    assert_eq!(fs::read_to_string(ws.join("src/a.rs")).unwrap(), "a\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_applies_edits_in_order_shows_near_misses_and_tolerates_indentation() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "e_many",
            "edit",
            &json!({"path": "many.rs", "edits": [
                {"old_string": "line 2\n", "new_string": "line two\n"},
                {"old_string": "line two\nline 3", "new_string": "line two\nline three"},
                {"old_string": "line 1", "new_string": "LINE 1", "replace_all": true}
            ]}),
        )]),
        calls(vec![call(
            "e_miss",
            "edit",
            &json!({"path": "miss.rs", "edits": [
                {"old_string": "line 5\n", "new_string": "line five\n"},
                {"old_string": "line 13\nline 14 changed\nline 15", "new_string": "x"}
            ]}),
        )]),
        calls(vec![call(
            "e_indent",
            "edit",
            &json!({"path": "indent.rs", "old_string": "if ready {\n    go();\n}", "new_string": "if ready {\n    go();\n    done();\n}"}),
        )]),
        MockTurn::text("Edited."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    put(&ws.join("many.rs"), &numbered(12));
    put(&ws.join("miss.rs"), &numbered(30));
    put(
        &ws.join("indent.rs"),
        "fn main() {\n        if ready {\n            go();\n        }\n}\n",
    );
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "edit").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let (status, output) = result_of(&turn, "e_many");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.starts_with("edited `many.rs`: 3 edits, 6 replacements\n"),
        "{output}"
    );
    let expected = numbered(12)
        .replace("line 2\n", "line two\n")
        .replace("line 3\n", "line three\n")
        .replace("line 1", "LINE 1");
    assert_eq!(fs::read_to_string(ws.join("many.rs")).unwrap(), expected);

    let (status, output) = result_of(&turn, "e_miss");
    assert_eq!(status, "error", "{output}");
    assert!(
        output.starts_with("edits[1]: `old_string` was not found in `miss.rs`"),
        "{output}"
    );
    assert!(output.contains("closest region is lines 13-15"), "{output}");
    assert!(
        output.contains("    14\tline 14\n"),
        "numbered lines: {output}"
    );
    assert!(
        output.contains("    11\tline 11\n"),
        "context before: {output}"
    );
    assert_eq!(
        fs::read_to_string(ws.join("miss.rs")).unwrap(),
        numbered(30),
        "the first edit is not written either"
    );
    assert!(completed(&turn, "e_miss").get("diff").is_none());

    let (status, output) = result_of(&turn, "e_indent");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.contains("ignoring indentation; `new_string` was re-indented"),
        "{output}"
    );
    assert_eq!(
        fs::read_to_string(ws.join("indent.rs")).unwrap(),
        "fn main() {\n        if ready {\n            go();\n            done();\n        }\n}\n"
    );
    let diff = completed(&turn, "e_indent")["diff"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        diff,
        "--- a/indent.rs\n+++ b/indent.rs\n@@ -1,5 +1,6 @@\n fn main() {\n         if ready {\n             go();\n+            done();\n         }\n }\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn write_edit_and_apply_patch_carry_a_diff_and_other_tools_none() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w_new",
            "write",
            &json!({"path": "w.txt", "content": "one\ntwo\n"}),
        )]),
        calls(vec![call(
            "w_over",
            "write",
            &json!({"path": "w.txt", "content": "one\n2\n"}),
        )]),
        calls(vec![call(
            "e_one",
            "edit",
            &json!({"path": "w.txt", "old_string": "one", "new_string": "1"}),
        )]),
        calls(vec![call(
            "p_one",
            "apply_patch",
            &patch("*** Update File: w.txt\n@@\n 1\n-2\n+two\n"),
        )]),
        calls(vec![call("r_one", "read", &json!({"path": "w.txt"}))]),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let diff = |id: &str| {
        completed(&turn, id)
            .get("diff")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    assert_eq!(
        diff("w_new").as_deref(),
        Some("--- /dev/null\n+++ b/w.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n")
    );
    assert_eq!(
        diff("w_over").as_deref(),
        Some("--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
    );
    assert_eq!(
        diff("e_one").as_deref(),
        Some("--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n-one\n+1\n 2\n")
    );
    assert_eq!(
        diff("p_one").as_deref(),
        Some("--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n 1\n-2\n+two\n")
    );
    assert_eq!(diff("r_one"), None, "read changes nothing");
    assert!(
        !envelope_for(&mock, "w_over")["output"]
            .as_str()
            .unwrap()
            .contains("+++"),
        "the model never gets the client diff"
    );
    // Replayed from the log, the diff is still there.
    let mut replay = Events::subscribe(&client, &sid, Some(0)).await;
    let replayed = replay.until("synced").await;
    assert_eq!(
        completed(&replayed, "p_one")["diff"],
        completed(&turn, "p_one")["diff"]
    );
}
