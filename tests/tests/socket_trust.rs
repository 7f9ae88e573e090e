//! End-to-end: who may stand between a client and amberd. The daemon refuses to bind in a
//! directory that others can write without the sticky bit (its own, or one above it); every
//! client refuses, before it sends anything, a socket whose directory is not the user's private
//! one (0700) or whose peer (SO_PEERCRED) is another uid — naming the path.
//!
//! Sentinel sockets and directories live in temp dirs only. Acting as another user needs root
//! (uid 65534 via `setuid`); elsewhere those tests say so and return.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use amber_tests::steps::run_bounded;
use amber_tests::{DaemonOptions, TestDaemon, bin_path};

const NOBODY: u32 = 65534;

#[path = "support/tmux.rs"]
mod tmux;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `amberd --socket SOCKET` in the sandbox of `daemon` (its own data dir and config): the
/// exit code and stderr of a daemon that should refuse to start.
fn amberd_on(daemon: &TestDaemon, socket: &Path) -> (Option<i32>, String) {
    let root = daemon.dir.path();
    let mut cmd = Command::new(bin_path("amberd"));
    cmd.arg("--socket")
        .arg(socket)
        .arg("--data-dir")
        .arg(root.join("second-data"))
        .arg("--config")
        .arg(root.join("config.toml"))
        .env("HOME", root.join("home"))
        .env("XDG_RUNTIME_DIR", root.join("run"))
        .env("XDG_STATE_HOME", root.join("home/.local/state"))
        .env_remove("AMBER_SOCKET")
        .current_dir(root);
    let (code, _stdout, stderr) = run_bounded(cmd);
    (code, stderr)
}

/// `amber-cli daemon status --no-autostart --socket SOCKET`.
fn status_via(daemon: &TestDaemon, socket: &Path) -> (Option<i32>, String, String) {
    let mut cmd = daemon.cli();
    cmd.args(["daemon", "status", "--no-autostart", "--socket"])
        .arg(socket);
    run_bounded(cmd)
}

#[test]
fn amberd_refuses_a_socket_directory_others_can_write_without_the_sticky_bit() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let open = daemon.dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    chmod(&open, 0o777);
    let (code, stderr) = amberd_on(&daemon, &open.join("amberd.sock"));
    assert_ne!(
        code,
        Some(0),
        "amberd started in a 0777 directory: {stderr}"
    );
    assert!(
        stderr.contains(&open.display().to_string()) && stderr.contains("sticky"),
        "the refusal names the directory and why: {stderr}"
    );
    assert!(!open.join("amberd.sock").exists(), "nothing was bound");
    assert_eq!(
        std::fs::metadata(&open).unwrap().permissions().mode() & 0o7777,
        0o777,
        "a directory the user chose is never chmod-ed"
    );

    // A private directory inside such a one can be swapped as a whole: refused too.
    let inner = open.join("inner");
    std::fs::create_dir(&inner).unwrap();
    chmod(&inner, 0o700);
    let (code, stderr) = amberd_on(&daemon, &inner.join("amberd.sock"));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&open.display().to_string()), "{stderr}");

    // Sticky (as /tmp is), the inner directory cannot be swapped: amberd serves there.
    chmod(&open, 0o1777);
    let mut cmd = daemon.cli();
    cmd.args(["daemon", "start", "--socket"])
        .arg(inner.join("amberd.sock"));
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let mut cmd = daemon.cli();
    cmd.args(["daemon", "stop", "--socket"])
        .arg(inner.join("amberd.sock"));
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn clients_refuse_a_socket_directory_that_is_not_private() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let (code, stdout, stderr) = status_via(&daemon, &daemon.socket);
    assert_eq!(
        code,
        Some(0),
        "the private directory is trusted: {stdout}{stderr}"
    );

    chmod(daemon.dir.path(), 0o755);
    let (code, stdout, stderr) = status_via(&daemon, &daemon.socket);
    assert_ne!(
        code,
        Some(0),
        "a 0755 socket directory was trusted: {stdout}"
    );
    assert!(
        stderr.contains(&daemon.socket.display().to_string())
            && stderr.contains("0755")
            && stderr.contains("nothing was sent"),
        "the refusal names the socket and why: {stderr}"
    );
    // The rpc bridge and run are clients too.
    let mut cmd = daemon.cli();
    cmd.args(["rpc", "--no-autostart"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("not trusted"), "{stderr}");
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "hello"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("not trusted"), "{stderr}");
    chmod(daemon.dir.path(), 0o700);
}

/// A process of uid 65534 listening on `socket` (bound as root in a directory 65534 cannot
/// write, then `setuid`: SO_PEERCRED reports the uid of `listen`). It accepts one connection,
/// prints "ready" first and, once the client hung up, how many bytes it received.
struct ForeignServer {
    child: Child,
    out: BufReader<ChildStdout>,
}

const FOREIGN_SERVER: &str = r#"
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
os.setgid(int(sys.argv[2]))
os.setuid(int(sys.argv[2]))
s.listen(4)
s.settimeout(25)
print("ready", flush=True)
conn, _ = s.accept()
conn.settimeout(25)
total = 0
while True:
    data = conn.recv(65536)
    if not data:
        break
    total += len(data)
print(total, flush=True)
"#;

impl ForeignServer {
    fn start(socket: &Path, uid: u32) -> Option<ForeignServer> {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(FOREIGN_SERVER)
            .arg(socket)
            .arg(uid.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the fake server did not start");
        Some(ForeignServer { child, out })
    }

    /// Bytes the server received on its one connection.
    fn received(mut self) -> u64 {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let _ = self.child.wait();
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("fake server said {line:?}"))
    }
}

impl Drop for ForeignServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn clients_refuse_a_socket_served_by_another_uid_and_send_nothing() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to serve a socket as uid {NOBODY}");
        return;
    }
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    // A directory that passes the directory check: ours, 0700.
    let dir = daemon.dir.path().join("private");
    std::fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o700);
    let socket = dir.join("amberd.sock");
    let Some(server) = ForeignServer::start(&socket, NOBODY) else {
        eprintln!("SKIPPED: no python3 to serve a socket as uid {NOBODY}");
        return;
    };
    let (code, stdout, stderr) = status_via(&daemon, &socket);
    assert_ne!(code, Some(0), "a foreign peer was trusted: {stdout}");
    assert!(
        stderr.contains(&socket.display().to_string())
            && stderr.contains(&format!("uid {NOBODY}"))
            && stderr.contains("nothing was sent"),
        "the refusal names the socket and the peer: {stderr}"
    );
    assert_eq!(server.received(), 0, "the client sent bytes to a stranger");
}

#[test]
fn clients_refuse_a_socket_directory_pre_created_by_another_user() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to hand a directory to uid {NOBODY}");
        return;
    }
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    // What a local user squatting on `/tmp/amber-$UID` would leave: their own directory.
    let squatted = daemon.dir.path().join(format!("amber-{}", 0));
    std::fs::create_dir(&squatted).unwrap();
    std::os::unix::fs::chown(&squatted, Some(NOBODY), Some(NOBODY)).unwrap();
    chmod(&squatted, 0o777);
    let socket = squatted.join("amberd.sock");
    let Some(server) = ForeignServer::start(&socket, NOBODY) else {
        eprintln!("SKIPPED: no python3 to serve a socket as uid {NOBODY}");
        return;
    };
    let (code, stdout, stderr) = status_via(&daemon, &socket);
    assert_ne!(code, Some(0), "a squatted directory was trusted: {stdout}");
    assert!(
        stderr.contains(&socket.display().to_string()) && stderr.contains(&format!("uid {NOBODY}")),
        "{stderr}"
    );
    // Refused before connecting at all: the server's accept never returns; end it.
    drop(server);
    // amberd, asked to serve there, refuses as well.
    let (code, stderr) = amberd_on(&daemon, &squatted.join("other.sock"));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&squatted.display().to_string()), "{stderr}");
}

/// The TUI, reconnecting after it lost its daemon, finds the socket's directory opened up
/// (0755): it says why it does not connect, instead of only "reconnecting…", and sends nothing.
#[test]
fn the_tui_says_why_it_refuses_an_untrusted_socket_when_reconnecting() {
    let mut daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let tmux = tmux::Tmux::new("trust");
    tmux.start("t", &daemon, &[]);
    tmux.wait("t", "the welcome screen", |s| s.contains("Type a prompt"));
    daemon.kill(libc::SIGKILL);
    chmod(daemon.dir.path(), 0o755);
    let screen = tmux.wait("t", "the refusal", |s| {
        s.contains("refusing to talk to amberd") || s.contains("[amber exited")
    });
    assert!(screen.contains("refusing to talk to amberd"), "{screen}");
    chmod(daemon.dir.path(), 0o700);
}
