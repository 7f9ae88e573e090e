//! The real `amber-cli` binary's `checkpoints`, `diff`, `rewind` and `fork` against a fake
//! daemon that answers the four methods and records their params: output, `--json`, how
//! a TURN is resolved (a number through `checkpoint/list {all}`, an id as is), and exit
//! codes. The real daemon's answers are `tests/tests/checkpoints_cli.rs`'s.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use jsonrpsee::server::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{Value, json};

/// Every call the fake daemon got: (method, params).
type Calls = Arc<Mutex<Vec<(String, Value)>>>;

fn checkpoints() -> Value {
    json!([
        {"turnId": "turn_a", "seq": 1, "time": "2026-01-02T03:04:05.250Z", "turn": 1,
         "prompt": "write the notes", "skipped": [],
         "changed": [{"path": "notes.md", "status": "added"}]},
        {"turnId": "turn_c", "seq": 20, "time": "2026-01-02T03:14:05Z", "turn": 3,
         "prompt": "fix the build", "skipped": ["big.bin"],
         "changed": [{"path": "src/lib.rs", "status": "modified"},
                     {"path": "old.rs", "status": "deleted"}],
         "incomplete": "big.bin could not be read"}
    ])
}

fn session(id: &str) -> Value {
    json!({"sessionId": id, "cwd": "/ws", "mode": "write", "model": "m", "title": "", "state": "idle",
           "createdAt": "x", "updatedAt": "x", "usage": {}})
}

fn known(params: &Value) -> Result<(), ErrorObjectOwned> {
    if params["sessionId"] == "s1" {
        Ok(())
    } else {
        Err(ErrorObjectOwned::owned(
            -32001,
            format!("session not found: {}", params["sessionId"]),
            None::<()>,
        ))
    }
}

fn module(calls: Calls) -> RpcModule<Calls> {
    let mut m = RpcModule::new(calls);
    m.register_method("initialize", |_, _, _| {
        json!({"protocolVersion": 1, "serverInfo": {"name": "fake", "version": "0"}, "capabilities": {}})
    })
    .unwrap();
    m.register_method("checkpoint/list", |params, calls, _| {
        let p: Value = params.parse().unwrap();
        calls
            .lock()
            .unwrap()
            .push(("checkpoint/list".into(), p.clone()));
        known(&p)?;
        let mut rows = checkpoints();
        if p["all"] == true {
            // Every turn: the one between them changed no files.
            let between = json!({"turnId": "turn_b", "seq": 10, "time": "2026-01-02T03:10:05Z",
                                 "turn": 2, "prompt": "explain", "skipped": [], "changed": [],
                                 "checkpoint": "none"});
            rows.as_array_mut().unwrap().insert(1, between);
        }
        Ok::<_, ErrorObjectOwned>(json!({"checkpoints": rows}))
    })
    .unwrap();
    m.register_method("checkpoint/diff", |params, calls, _| {
        let p: Value = params.parse().unwrap();
        calls
            .lock()
            .unwrap()
            .push(("checkpoint/diff".into(), p.clone()));
        known(&p)?;
        let diff = format!(
            "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-{}\n+new",
            p["turnId"].as_str().unwrap()
        );
        Ok::<_, ErrorObjectOwned>(
            json!({"diff": diff, "changed": [{"path": "src/lib.rs", "status": "modified"}]}),
        )
    })
    .unwrap();
    m.register_method("session/rewind", |params, calls, _| {
        let p: Value = params.parse().unwrap();
        calls
            .lock()
            .unwrap()
            .push(("session/rewind".into(), p.clone()));
        known(&p)?;
        // As amberd does: a forced conflict is put back, and still listed.
        let restored = if p["force"] == true {
            json!(["notes.md", "src/lib.rs"])
        } else {
            json!(["notes.md"])
        };
        Ok::<_, ErrorObjectOwned>(
            json!({"restored": restored, "conflicts": ["src/lib.rs"], "removedTurns": 2}),
        )
    })
    .unwrap();
    m.register_method("session/fork", |params, calls, _| {
        let p: Value = params.parse().unwrap();
        calls
            .lock()
            .unwrap()
            .push(("session/fork".into(), p.clone()));
        known(&p)?;
        Ok::<_, ErrorObjectOwned>(session("s2"))
    })
    .unwrap();
    m
}

fn serve(socket: &Path, calls: Calls) -> jsonrpsee::server::ServerHandle {
    crate::support::serve_module(socket, module(calls))
}

/// Runs `amber-cli --socket S --no-autostart ARGS…`: (exit code, stdout, stderr).
async fn cli(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amber-cli"));
    cmd.arg("--socket")
        .arg(socket)
        .arg("--no-autostart")
        .args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A temp dir fit to hold a socket: clients trust only a private (0700) socket directory.
fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// A fake daemon on a fresh socket; the calls it records.
fn daemon() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    Calls,
    jsonrpsee::server::ServerHandle,
) {
    let dir = private_dir();
    let socket = dir.path().join("amberd.sock");
    let calls = Calls::default();
    let handle = serve(&socket, Arc::clone(&calls));
    (dir, socket, calls, handle)
}

fn methods(calls: &Calls) -> Vec<(String, Value)> {
    std::mem::take(&mut *calls.lock().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn checkpoints_prints_a_table_or_the_answer() {
    let (_dir, socket, _calls, _h) = daemon();
    let (code, out, err) = cli(&socket, &["checkpoints", "s1"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "TURN  TIME                  ADDED  MODIFIED  DELETED  SKIPPED  PROMPT\n\
         1     2026-01-02T03:04:05Z  1      0         0        0        write the notes\n\
         3     2026-01-02T03:14:05Z  0      1         1        1        fix the build  [incomplete: big.bin could not be read]\n"
    );
    let (code, out, _) = cli(&socket, &["checkpoints", "s1", "--json"]).await;
    assert_eq!(code, 0);
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got, json!({"checkpoints": checkpoints()}));
    let (code, out, err) = cli(&socket, &["checkpoints", "nope"]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("session not found") && !err.contains("-32001"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_defaults_to_the_last_checkpoint_and_resolves_turns() {
    let (_dir, socket, calls, _h) = daemon();
    let (code, out, err) = cli(&socket, &["diff", "s1"]).await;
    assert_eq!(code, 0, "{err}");
    // Printed as sent, with the final newline the daemon left off.
    assert_eq!(
        out,
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-turn_c\n+new\n"
    );
    let sent = methods(&calls);
    assert_eq!(
        sent[0],
        ("checkpoint/list".into(), json!({"sessionId": "s1"})),
        "the last checkpoint, not the last turn"
    );
    assert_eq!(
        sent[1],
        (
            "checkpoint/diff".into(),
            json!({"sessionId": "s1", "turnId": "turn_c"})
        )
    );

    // A number is the `turn` of a row, not its position; the path goes after `--`.
    let (code, _, err) = cli(&socket, &["diff", "s1", "1", "--", "notes.md"]).await;
    assert_eq!(code, 0, "{err}");
    let sent = methods(&calls);
    assert_eq!(sent[0].1, json!({"sessionId": "s1", "all": true}));
    assert_eq!(
        sent[1].1,
        json!({"sessionId": "s1", "turnId": "turn_a", "path": "notes.md"})
    );
    // Any turn of the history has a number, one without a checkpoint too.
    let (code, _, err) = cli(&socket, &["diff", "s1", "2"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(methods(&calls)[1].1["turnId"], "turn_b");

    // An id goes as is, without a list.
    let (code, out, _) = cli(&socket, &["diff", "s1", "turn_zz", "--json"]).await;
    assert_eq!(code, 0);
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        got["changed"],
        json!([{"path": "src/lib.rs", "status": "modified"}])
    );
    let sent = methods(&calls);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1["turnId"], "turn_zz");

    // A number without a row: exit 1, and no diff asked for.
    let (code, out, err) = cli(&socket, &["diff", "s1", "7"]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("session s1 has no turn 7 (its turns are 1 to 3)"),
        "{err}"
    );
    assert_eq!(methods(&calls).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn rewind_exits_1_when_conflicts_were_left_alone_not_when_forced() {
    let (_dir, socket, calls, _h) = daemon();
    let (code, out, err) = cli(&socket, &["rewind", "s1", "3"]).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        out,
        "restored  notes.md\nconflict  src/lib.rs\n\
         rewound to before turn 3: 1 file(s) restored, 2 turn(s) removed from the conversation; \
         1 conflict(s) left alone (changed outside amber since; not overwritten without --force)\n"
    );
    let sent = methods(&calls);
    assert_eq!(
        sent[1],
        (
            "session/rewind".into(),
            json!({"sessionId": "s1", "turnId": "turn_c", "files": true, "conversation": true, "force": false})
        )
    );

    let (code, out, err) = cli(&socket, &["rewind", "s1", "turn_a", "--force", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        got,
        json!({"restored": ["notes.md", "src/lib.rs"], "conflicts": ["src/lib.rs"], "removedTurns": 2})
    );
    assert_eq!(methods(&calls)[0].1["force"], true);
    let (code, out, err) = cli(&socket, &["rewind", "s1", "1", "--force"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("forced    src/lib.rs\n"), "{out}");
    assert!(out.ends_with("were put back too (--force)\n"), "{out}");
    methods(&calls);

    let (_, _, _) = cli(&socket, &["rewind", "s1", "turn_a", "--files-only"]).await;
    let (_, _, _) = cli(&socket, &["rewind", "s1", "turn_a", "--conversation-only"]).await;
    let flags: Vec<(Value, Value)> = methods(&calls)
        .into_iter()
        .map(|(_, p)| (p["files"].clone(), p["conversation"].clone()))
        .collect();
    assert_eq!(
        flags,
        [(json!(true), json!(false)), (json!(false), json!(true))]
    );

    let (code, _, err) = cli(
        &socket,
        &["rewind", "s1", "1", "--files-only", "--conversation-only"],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(methods(&calls).is_empty(), "a usage error calls nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn fork_prints_the_new_session() {
    let (_dir, socket, calls, _h) = daemon();
    let (code, out, err) = cli(&socket, &["fork", "s1"]).await;
    assert_eq!((code, out.as_str()), (0, "s2\n"), "{err}");
    assert_eq!(
        methods(&calls),
        [("session/fork".into(), json!({"sessionId": "s1"}))]
    );
    let (code, out, _) = cli(&socket, &["fork", "s1", "3", "--json"]).await;
    assert_eq!(code, 0);
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got, session("s2"));
    assert_eq!(
        methods(&calls)[1].1,
        json!({"sessionId": "s1", "turnId": "turn_c"})
    );
    let (code, _, err) = cli(&socket, &["fork", "nope"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("session not found"), "{err}");
}
