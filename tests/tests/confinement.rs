//! End-to-end: confinement to the workspace, through the real daemon.
//!
//! - The file tools (`write`, `read`, `edit`) and bash's `cwd`, case by case — `..` escapes,
//!   absolute paths outside, a sibling `/ws2` beside `/ws`, a symlink pointing outside, a
//!   symlink loop, an empty path, a NUL byte. Each is an `error` naming the path, and nothing
//!   outside changes.
//! - The file tools replace files atomically, never through the inode: `write` and `edit` on
//!   a hardlink in the workspace to a file outside it leave the outside file untouched and
//!   give the workspace entry the new content; an executable stays executable; no temp file
//!   is left behind; a symlink out of the workspace is still refused.
//! - `session/new` refuses workspace roots that make confinement meaningless — the filesystem
//!   root, a system directory, the daemon user's home directory and what holds it, also by way
//!   of a symlink — with -32004 and the reason, naming the key that allows them; with
//!   `[sessions] allow_broad_workspace = true` they are accepted, and a project directory
//!   under the home directory always is.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::steps::{Events, connect, done, new_session, prompt_turn, spawn, stop_reason};
use amber_tests::tool_calls::{call, calls, envelope_for, put, result_of};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

const SECRET: &str = "TOP-SECRET-CONTENT";

/// Beside the workspace `<root>/workspace`: `<root>/outside` (with a secret) and the
/// sibling `<root>/workspace2`; inside: a symlink to `outside`, a symlink loop, a file.
struct Layout {
    ws: PathBuf,
    outside: PathBuf,
    sibling: PathBuf,
}

fn layout(daemon: &TestDaemon) -> Layout {
    let ws = daemon.workspace.clone();
    let root = ws.parent().unwrap().to_owned();
    let outside = root.join("outside");
    let sibling = root.join("workspace2");
    put(&outside.join("secret.txt"), SECRET);
    put(&sibling.join("sib.txt"), SECRET);
    put(&ws.join("inside.txt"), "inside\n");
    symlink(&outside, ws.join("link_out")).unwrap();
    symlink(ws.join("loop_b"), ws.join("loop_a")).unwrap();
    symlink(ws.join("loop_a"), ws.join("loop_b")).unwrap();
    Layout {
        ws,
        outside,
        sibling,
    }
}

/// Every file under `dir` with its contents, sorted (to prove nothing changed).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// One case: a call, and the text its error output must contain (the path as given, or
/// what is wrong with it).
struct Case {
    call: MockToolCall,
    names: String,
}

fn case(id: &str, tool: &str, args: &Value, names: &str) -> Case {
    Case {
        call: call(id, tool, args),
        names: names.to_owned(),
    }
}

fn cases(l: &Layout) -> Vec<Case> {
    let abs = l.outside.join("abs.txt").display().to_string();
    let sib = l.sibling.join("new.txt").display().to_string();
    let sib_dir = l.sibling.display().to_string();
    let out_dir = l.outside.display().to_string();
    let secret = l.outside.join("secret.txt").display().to_string();
    let w = |path: &str| json!({"path": path, "content": "pwned"});
    let e = |path: &str| json!({"path": path, "old_string": SECRET, "new_string": "pwned"});
    let r = |path: &str| json!({"path": path});
    let sh = |cwd: &str| json!({"command": "touch escaped-by-cwd.txt", "cwd": cwd});
    vec![
        // write
        case("w_dotdot", "write", &w("../escape.txt"), "../escape.txt"),
        case(
            "w_deep",
            "write",
            &w("a/../../escape2.txt"),
            "a/../../escape2.txt",
        ),
        case("w_abs", "write", &w(&abs), &abs),
        case("w_sibling", "write", &w(&sib), &sib),
        case(
            "w_sib_rel",
            "write",
            &w("../workspace2/rel.txt"),
            "../workspace2/rel.txt",
        ),
        case(
            "w_link",
            "write",
            &w("link_out/evil.txt"),
            "link_out/evil.txt",
        ),
        case(
            "w_link_over",
            "write",
            &w("link_out/secret.txt"),
            "link_out/secret.txt",
        ),
        case("w_loop", "write", &w("loop_a/x.txt"), "loop_a"),
        case("w_empty", "write", &w(""), "empty"),
        case("w_nul", "write", &w("ok\0.txt"), "NUL"),
        // read: nothing of the secret may come back
        case(
            "r_dotdot",
            "read",
            &r("../outside/secret.txt"),
            "../outside/secret.txt",
        ),
        case("r_abs", "read", &r(&secret), &secret),
        case(
            "r_sibling",
            "read",
            &r("../workspace2/sib.txt"),
            "../workspace2/sib.txt",
        ),
        case(
            "r_link",
            "read",
            &r("link_out/secret.txt"),
            "link_out/secret.txt",
        ),
        case("r_loop", "read", &r("loop_b"), "loop_b"),
        case("r_empty", "read", &r(""), "empty"),
        case("r_nul", "read", &r("inside.txt\0"), "NUL"),
        // edit
        case(
            "e_dotdot",
            "edit",
            &e("../outside/secret.txt"),
            "../outside/secret.txt",
        ),
        case("e_abs", "edit", &e(&secret), &secret),
        case(
            "e_link",
            "edit",
            &e("link_out/secret.txt"),
            "link_out/secret.txt",
        ),
        case("e_sibling", "edit", &e(&sib), &sib),
        case("e_empty", "edit", &e(""), "empty"),
        case("e_nul", "edit", &e("in\0side.txt"), "NUL"),
        // bash cwd
        case("b_dotdot", "bash", &sh(".."), ".."),
        case("b_abs", "bash", &sh(&out_dir), &out_dir),
        case("b_sibling", "bash", &sh(&sib_dir), &sib_dir),
        case("b_link", "bash", &sh("link_out"), "link_out"),
        case("b_loop", "bash", &sh("loop_a"), "loop_a"),
        case("b_nul", "bash", &sh("sub\0dir"), "NUL"),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_escape_is_an_error_naming_the_path_and_touches_nothing_outside() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let l = layout(&daemon);
    let root = l.ws.parent().unwrap().to_owned();
    let outside_before = snapshot(&l.outside);
    let sibling_before = snapshot(&l.sibling);
    let cases = cases(&l);
    // A harmless call after each refused one keeps the tool-failure guard from stopping
    // the turn (it counts consecutive failures).
    let mut batch = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        batch.push(c.call.clone());
        let echo = json!({"command": format!("echo ok-{i}")});
        batch.push(call(&format!("ok_{i}"), "bash", &echo));
    }
    mock.push([calls(batch), MockTurn::text("Nothing escaped."), done()]);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "try to escape").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let mut failures = Vec::new();
    for c in &cases {
        let id = c.call.id.as_deref().unwrap();
        let (status, output) = result_of(&turn, id);
        if status != "error" {
            failures.push(format!("{id}: status {status}: {output}"));
            continue;
        }
        if !output.contains(&c.names) {
            failures.push(format!(
                "{id}: the error does not name {:?}: {output}",
                c.names
            ));
        }
        if output.contains(SECRET) {
            failures.push(format!("{id}: leaked the secret: {output}"));
        }
        let seen = envelope_for(&mock, id);
        if seen["status"] != "error" || seen["output"].as_str().unwrap().contains(SECRET) {
            failures.push(format!("{id}: the model saw {seen}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Nothing outside changed, nothing was created beside the workspace.
    assert_eq!(snapshot(&l.outside), outside_before);
    assert_eq!(snapshot(&l.sibling), sibling_before);
    for name in ["escape.txt", "escape2.txt", "escaped-by-cwd.txt"] {
        assert!(
            !root.join(name).exists(),
            "{name} created beside the workspace"
        );
    }
    assert!(
        !l.ws.join("escaped-by-cwd.txt").exists(),
        "bash ran in the wrong cwd"
    );
    // The workspace itself is intact: no stray files from the refused calls.
    assert_eq!(
        std::fs::read_to_string(l.ws.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert!(!l.ws.join("ok.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn paths_that_stay_inside_still_work() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let l = layout(&daemon);
    std::fs::create_dir_all(l.ws.join("sub")).unwrap();
    symlink(l.ws.join("sub"), l.ws.join("link_in")).unwrap();
    let abs_inside = l.ws.join("abs.txt").display().to_string();
    mock.push([
        calls(vec![
            call(
                "i_dot",
                "write",
                &json!({"path": "sub/../dot.txt", "content": "d"}),
            ),
            call(
                "i_abs",
                "write",
                &json!({"path": abs_inside, "content": "a"}),
            ),
            call(
                "i_link",
                "write",
                &json!({"path": "link_in/via-link.txt", "content": "l"}),
            ),
            call(
                "i_new",
                "write",
                &json!({"path": "new/deep/file.txt", "content": "n"}),
            ),
            call(
                "i_cwd",
                "bash",
                &json!({"command": "touch from-cwd.txt", "cwd": "link_in"}),
            ),
        ]),
        MockTurn::text("All inside."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write inside").await;
    for id in ["i_dot", "i_abs", "i_link", "i_new", "i_cwd"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {output}");
    }
    assert_eq!(std::fs::read_to_string(l.ws.join("dot.txt")).unwrap(), "d");
    assert_eq!(std::fs::read_to_string(l.ws.join("abs.txt")).unwrap(), "a");
    assert_eq!(
        std::fs::read_to_string(l.ws.join("sub/via-link.txt")).unwrap(),
        "l"
    );
    assert!(l.ws.join("new/deep/file.txt").is_file());
    assert!(l.ws.join("sub/from-cwd.txt").is_file());
}

// Atomic replacement: never through the inode.

const SENTINEL: &str = "sentinel: outside the workspace\n";

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn write_and_edit_replace_a_hardlink_without_touching_its_outside_target() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let outside = daemon.dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let ws = &daemon.workspace;
    for name in ["w-target", "e-target"] {
        fs::write(outside.join(name), SENTINEL).unwrap();
    }
    fs::hard_link(outside.join("w-target"), ws.join("w-link")).unwrap();
    fs::hard_link(outside.join("e-target"), ws.join("e-link")).unwrap();
    fs::write(ws.join("run.sh"), "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();

    mock.push([
        calls(vec![
            call(
                "w_link",
                "write",
                &json!({"path": "w-link", "content": "written\n"}),
            ),
            call(
                "e_link",
                "edit",
                &json!({"path": "e-link", "old_string": "outside", "new_string": "inside"}),
            ),
            call(
                "e_exec",
                "edit",
                &json!({"path": "run.sh", "old_string": "old", "new_string": "new"}),
            ),
            call(
                "w_out",
                "write",
                &json!({"path": "out/w-target", "content": "x"}),
            ),
        ]),
        MockTurn::text("Done."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "write them").await;

    for id in ["w_link", "e_link", "e_exec"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {output}");
    }
    assert_ne!(
        result_of(&turn, "w_out").0,
        "ok",
        "a symlink out stays refused"
    );

    for name in ["w-target", "e-target"] {
        assert_eq!(
            fs::read_to_string(outside.join(name)).unwrap(),
            SENTINEL,
            "{name}"
        );
    }
    assert_eq!(fs::read_to_string(ws.join("w-link")).unwrap(), "written\n");
    assert_eq!(
        fs::read_to_string(ws.join("e-link")).unwrap(),
        "sentinel: inside the workspace\n"
    );
    for name in ["w-link", "e-link"] {
        assert_eq!(fs::metadata(ws.join(name)).unwrap().nlink(), 1, "{name}");
    }
    let script = fs::metadata(ws.join("run.sh")).unwrap();
    assert_eq!(script.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        fs::read_to_string(ws.join("run.sh")).unwrap(),
        "#!/bin/sh\necho new\n"
    );
    assert_eq!(
        names(ws),
        ["e-link", "out", "run.sh", "w-link"],
        "no temp file left"
    );
    assert_eq!(names(&outside), ["e-target", "w-target"]);
}

// Workspace roots too broad to confine anything.

fn daemon(config_toml: &str) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        config_toml: config_toml.to_owned(),
        ..DaemonOptions::default()
    })
}

/// `(cwd, what the refusal says)`: every broad root of this daemon.
fn broad_roots(d: &TestDaemon) -> Vec<(String, &'static str)> {
    let root = d.dir.path().canonicalize().unwrap();
    let link = d.workspace.join("to-root");
    std::os::unix::fs::symlink("/", &link).unwrap();
    vec![
        ("/".to_owned(), "filesystem root"),
        ("/etc".to_owned(), "system directory"),
        ("/usr".to_owned(), "system directory"),
        (
            root.join("home").display().to_string(),
            "home directory itself",
        ),
        (root.display().to_string(), "holds the home directory"),
        (link.display().to_string(), "filesystem root"),
    ]
}

/// `session/new` in read mode at `cwd`: the whole response, error or result.
fn try_session_new(d: &TestDaemon, cwd: &str) -> Value {
    d.rpc("session/new", json!({"cwd": cwd, "mode": "read"}))
}

#[test]
fn broad_workspace_roots_are_refused_with_the_reason() {
    let d = daemon("");
    for (cwd, reason) in broad_roots(&d) {
        let response = try_session_new(&d, &cwd);
        assert!(response.get("result").is_none(), "{cwd}: {response}");
        assert_eq!(response["error"]["code"], -32004, "{cwd}: {response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains(reason), "{cwd}: {message}");
        assert!(
            message.contains("allow_broad_workspace"),
            "{cwd}: {message}"
        );
    }
    let list = d.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]), "nothing was created");

    // A project in the home directory is fine.
    let project = d.dir.path().join("home/src/app");
    std::fs::create_dir_all(&project).unwrap();
    let info = d.rpc_ok(
        "session/new",
        json!({"cwd": project.display().to_string(), "mode": "read"}),
    );
    assert!(info["sessionId"].is_string(), "{info}");
}

#[test]
fn allow_broad_workspace_accepts_them() {
    let d = daemon("[sessions]\nallow_broad_workspace = true\n");
    for (cwd, _) in broad_roots(&d) {
        let info = d.rpc_ok("session/new", json!({"cwd": cwd, "mode": "read"}));
        let expected = std::path::Path::new(&cwd).canonicalize().unwrap();
        assert_eq!(info["cwd"], expected.display().to_string(), "{info}");
    }
}
