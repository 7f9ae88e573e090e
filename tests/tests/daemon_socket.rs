//! End-to-end: the daemon on its socket.
//!
//! - Its life there: graceful stop on SIGTERM and `daemon/shutdown`, refusing to start over a
//!   live daemon, replacing a stale socket, and refusing peers of another uid.
//! - Who may stand between a client and amberd: the daemon refuses to bind in a directory
//!   that others can write without the sticky bit (its own, or one above it); every client
//!   refuses, before it sends anything, a socket whose directory is not the user's private
//!   one (0700) or whose peer (SO_PEERCRED) is another uid — naming the path.
//!
//! Sentinel sockets and directories live in temp dirs only. Acting as another user needs root
//! (uid 65534 via `setuid`); elsewhere those tests say so and return.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{Events, connect, new_session, run_bounded, spawn, stop_reason, within};
use amber_tests::{DaemonOptions, TestDaemon, bin_path};
use serde_json::json;

use crate::support::tmux;

const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_mid_turn_cancels_it_exits_zero_and_removes_the_socket() {
    let chunks = (0..30).map(|i| format!("word{i} ")).collect();
    let mock = MockLlm::start(vec![MockTurn::Slow {
        chunks,
        interval_ms: 1_000,
    }])
    .await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "stream").await.unwrap();
    events.until("message_delta").await;

    daemon.kill(libc::SIGTERM);
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    // Then the subscription ends (session closed / connection gone), nothing else.
    let end = events.try_next().await;
    assert!(end.is_err(), "expected the end of the stream, got {end:?}");
    let code = tokio::task::block_in_place(|| daemon.wait_exit(EXIT_TIMEOUT));
    assert_eq!(code, Some(0), "amberd exit code after SIGTERM");
    assert!(!daemon.socket.exists(), "socket file left behind");
    assert!(daemon.log().contains("SIGTERM"));
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_shutdown_rpc_exits_zero() {
    let mut daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let client = connect(&daemon).await;
    let result = within("daemon/shutdown", client.daemon_shutdown())
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(result).unwrap(), json!({}));
    let code = tokio::task::block_in_place(|| daemon.wait_exit(EXIT_TIMEOUT));
    assert_eq!(code, Some(0));
    assert!(!daemon.socket.exists(), "socket file left behind");
    within("the connection to close", client.closed()).await;
}

#[test]
fn a_second_daemon_on_a_live_socket_exits_non_zero_with_a_clear_message() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let other = daemon.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut cmd = Command::new(bin_path("amberd"));
    cmd.arg("--socket")
        .arg(&daemon.socket)
        .arg("--data-dir")
        .arg(other.join("data"))
        .arg("--config")
        .arg(daemon.dir.path().join("config.toml"))
        .env("HOME", &other)
        .env_remove("AMBER_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env("AMBER_LOG", "warn");
    let (code, _, stderr) = run_bounded(cmd);
    assert!(matches!(code, Some(c) if c != 0), "exit code {code:?}");
    assert!(
        stderr.contains("already") && stderr.contains(&daemon.socket.display().to_string()),
        "unclear message: {stderr}"
    );
    // The first daemon is untouched.
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["pid"], daemon.pid());
}

#[test]
fn a_stale_socket_left_by_sigkill_is_replaced_on_the_next_start() {
    let mut daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let old_pid = daemon.pid();
    daemon.kill(libc::SIGKILL);
    assert_eq!(daemon.wait_exit(EXIT_TIMEOUT), Some(128 + libc::SIGKILL));
    assert!(daemon.socket.exists(), "SIGKILL leaves the socket file");
    let refused = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    daemon.restart();
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["pid"], daemon.pid());
    assert_ne!(daemon.pid(), old_pid);
    assert!(daemon.log().contains("stale"), "the replacement is logged");
}

/// `euid == 0` is needed to act as another user; elsewhere the test says so and returns.
#[test]
fn a_peer_with_another_uid_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED a_peer_with_another_uid_is_refused: needs root to connect as uid 65534");
        return;
    }
    let Some(curl) = ["/usr/bin/curl", "/bin/curl", "/usr/local/bin/curl"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
    else {
        eprintln!("SKIPPED a_peer_with_another_uid_is_refused: no curl to connect with");
        return;
    };
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    // Let uid 65534 reach the socket at all: the refusal must come from the daemon.
    let run = daemon.dir.path().join("run");
    for path in [
        daemon.dir.path(),
        &run,
        &run.join("amber"),
        daemon.socket.as_path(),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}});
    let mut cmd = Command::new(curl);
    cmd.args(["-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}"])
        .arg("--unix-socket")
        .arg(&daemon.socket)
        .args(["-H", "Content-Type: application/json", "-d"])
        .arg(body.to_string())
        .arg("http://localhost/")
        .env_clear()
        .current_dir("/")
        .uid(65534)
        .gid(65534);
    let started = Instant::now();
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "curl failed: {stderr}");
    let (response, status) = stdout.rsplit_once('\n').unwrap();
    assert_eq!(status, "403", "HTTP status for a foreign uid: {stdout}");
    let response: serde_json::Value = serde_json::from_str(response).unwrap();
    assert!(response.get("result").is_none(), "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("65534"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(10), "refusal hung");

    assert!(
        daemon
            .log()
            .contains("refusing a connection from another user"),
        "the refusal is logged"
    );
    // Our own uid is still served, and nothing was created for the stranger.
    let list = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]));
}

// Socket trust: directories and peers a client must refuse.

const NOBODY: u32 = 65534;

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

    chmod(daemon.socket.parent().unwrap(), 0o755);
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
    chmod(daemon.socket.parent().unwrap(), 0o700);
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
    chmod(daemon.socket.parent().unwrap(), 0o755);
    let screen = tmux.wait("t", "the refusal", |s| {
        s.contains("refusing to talk to amberd") || s.contains("[amber exited")
    });
    assert!(screen.contains("refusing to talk to amberd"), "{screen}");
    chmod(daemon.socket.parent().unwrap(), 0o700);
}
