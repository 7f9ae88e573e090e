//! `session/new` refuses workspace roots that make confinement meaningless — the filesystem
//! root, a system directory, the daemon user's home directory and what holds it, also by way
//! of a symlink — with -32004 and the reason, naming the key that allows them; with
//! `[sessions] allow_broad_workspace = true` they are accepted, and a project directory
//! under the home directory always is.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

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

fn new_session(d: &TestDaemon, cwd: &str) -> Value {
    d.rpc("session/new", json!({"cwd": cwd, "mode": "read"}))
}

#[test]
fn broad_workspace_roots_are_refused_with_the_reason() {
    let d = daemon("");
    for (cwd, reason) in broad_roots(&d) {
        let response = new_session(&d, &cwd);
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
