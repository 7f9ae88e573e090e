//! Autostart: two racing clients start exactly one daemon; failures name the log file.
//!
//! `amberd` is replaced by a shell script (via `$AMBER_DAEMON_BIN`) that records each start
//! and waits; the test itself then serves the fake daemon on the socket. One test function
//! per concern, all in this binary, since they set the process environment.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use amber_client::{Client, ClientError, ConnectOptions};

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn opts(socket: &Path) -> ConnectOptions {
    ConnectOptions {
        socket: Some(socket.to_owned()),
        ..ConnectOptions::new("test", "0")
    }
}

/// Serves the fake daemon once the script has recorded a start.
async fn serve_when_started(starts: PathBuf, socket: PathBuf) -> jsonrpsee::server::ServerHandle {
    while !starts.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Give a second (wrong) start the chance to show up before the socket answers.
    tokio::time::sleep(Duration::from_millis(100)).await;
    crate::common::serve(&socket, 1)
}

#[tokio::test]
async fn autostart() {
    let dir = tempfile::tempdir().unwrap();

    // 1. Two racing clients: one start, both connected.
    let socket = dir.path().join("run/amber/amberd.sock");
    let starts = dir.path().join("starts");
    let script = dir.path().join("fake-amberd");
    write_script(
        &script,
        &format!(
            // Bounded: the test may finish (and delete the socket) between two polls, and
            // an unbounded loop would outlive it.
            "echo \"$*\" >> {starts}\nfor _ in $(seq 250); do [ -S \"$2\" ] && break; sleep 0.02; done\nsleep 1",
            starts = starts.display()
        ),
    );
    // SAFETY: this binary runs a single test; nothing else reads the environment concurrently.
    unsafe { std::env::set_var("AMBER_DAEMON_BIN", &script) };

    let server = tokio::spawn(serve_when_started(starts.clone(), socket.clone()));
    let (a, b) = tokio::join!(
        Client::connect(opts(&socket)),
        Client::connect(opts(&socket))
    );
    let _handle = server.await.unwrap();
    a.unwrap().daemon_status().await.unwrap();
    b.unwrap().daemon_status().await.unwrap();
    let recorded = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(recorded.lines().count(), 1, "{recorded}");
    assert_eq!(
        recorded.trim(),
        format!("--socket {} --autostarted", socket.display()),
        "amberd gets --socket, and knows a client started it"
    );
    let mode = std::fs::metadata(socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    // 2. A daemon that dies at once: a clear error naming the log, which has its stderr.
    let socket = dir.path().join("dead/amberd.sock");
    let script = dir.path().join("dying-amberd");
    write_script(&script, "echo boom >&2\nexit 3");
    // SAFETY: as above.
    unsafe { std::env::set_var("AMBER_DAEMON_BIN", &script) };
    let err = Client::connect(opts(&socket)).await.unwrap_err();
    let ClientError::Autostart { log, reason, .. } = &err else {
        panic!("expected an autostart error, got {err}");
    };
    assert!(reason.contains("exited"), "{reason}");
    assert!(err.to_string().contains("amberd.log"), "{err}");
    assert_eq!(std::fs::read_to_string(log).unwrap(), "boom\n");

    // 3. No binary at all.
    // SAFETY: as above.
    unsafe { std::env::set_var("AMBER_DAEMON_BIN", dir.path().join("missing")) };
    let err = Client::connect(opts(&socket)).await.unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
}
