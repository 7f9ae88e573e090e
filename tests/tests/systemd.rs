//! End-to-end: amberd as a systemd service, without systemd. The test plays the service
//! manager: it binds the Unix listener itself, execs the real amberd with it as fd 3 and
//! `LISTEN_FDS=1` / `LISTEN_PID=<amberd's pid>`, and listens on a datagram socket named by
//! `NOTIFY_SOCKET`. Checked: READY=1 after start-up, requests answered on the passed socket,
//! STOPPING=1 and exit 0 on `daemon/shutdown` and SIGTERM, exit 0 when idle (socket left in
//! place, and a connection waiting in it is answered by the next amberd; not while a turn
//! runs), WATCHDOG=1 pings,
//! and that a daemon which bound its own socket ignores idle exit and logs to a file that
//! `amber-cli daemon logs` shows.

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::run_bounded;
use amber_tests::unix_http;
use amber_tests::{DaemonOptions, TestDaemon, bin_path};
use serde_json::{Value, json};
use tempfile::TempDir;

const EXIT_TIMEOUT: Duration = Duration::from_secs(15);
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// A socket-activated amberd and the "service manager" around it.
struct Activated {
    dir: TempDir,
    socket: PathBuf,
    /// The test's copy of the listening socket: like systemd's, it outlives amberd.
    listener: UnixListener,
    notify: UnixDatagram,
    child: Child,
}

impl Activated {
    fn start(config_toml: &str, env: &[(&str, &str)]) -> Activated {
        let dir = tempfile::Builder::new()
            .prefix("amber-e2e7-")
            .tempdir()
            .unwrap();
        let root = dir.path();
        for sub in ["data", "home", "run"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("config.toml"), config_toml).unwrap();
        // As systemd's `DirectoryMode=0700` makes it: clients trust only a private directory.
        std::fs::set_permissions(root.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let socket = root.join("run/amberd.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let notify = UnixDatagram::bind(root.join("notify.sock")).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let child = exec_activated(root, &listener, env);
        Activated {
            dir,
            socket,
            listener,
            notify,
            child,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("amberd.stderr")).unwrap_or_default()
    }

    /// Notification datagrams until one has the line `want`; all of them, in order.
    fn wait_notify(&self, want: &str) -> Vec<String> {
        let deadline = Instant::now() + NOTIFY_TIMEOUT;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.notify.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                let done = msg.lines().any(|l| l == want);
                got.push(msg);
                if done {
                    return got;
                }
            }
        }
        panic!(
            "no {want} within {NOTIFY_TIMEOUT:?}; got {got:?}\n--- amberd log ---\n{}",
            self.log()
        );
    }

    fn rpc(&self, method: &str) -> Value {
        rpc(&self.socket, method)
    }

    fn wait_exit(&mut self) -> i32 {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "amberd still running after {EXIT_TIMEOUT:?}\n--- amberd log ---\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, signal: i32) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our un-reaped child.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

impl Drop for Activated {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- amberd log ---\n{}", self.log());
        }
    }
}

/// Execs amberd with `listener` as fd 3, the way systemd does. `LISTEN_PID` must be amberd's
/// own pid, which only the child knows: a shell exports `$$` and execs amberd in its place
/// (same pid), so nothing but dup2 runs between fork and exec.
fn exec_activated(root: &Path, listener: &UnixListener, env: &[(&str, &str)]) -> Child {
    let stderr = std::fs::File::create(root.join("amberd.stderr")).unwrap();
    let home = root.join("home");
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(r#"export LISTEN_PID=$$ WATCHDOG_PID=$$; exec "$0" "$@""#)
        .arg(bin_path("amberd"))
        .arg("--data-dir")
        .arg(root.join("data"))
        .arg("--config")
        .arg(root.join("config.toml"))
        .env_clear()
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_RUNTIME_DIR", root.join("run"))
        .env("AMBER_LOG", "debug")
        .env("LISTEN_FDS", "1")
        .env("NOTIFY_SOCKET", root.join("notify.sock"))
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let fd = listener.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and calls only dup2 and
    // fcntl, which are async-signal-safe; it allocates nothing and touches no shared state.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                // Already in place: only drop close-on-exec.
                if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("spawn amberd")
}

fn rpc(socket: &Path, method: &str) -> Value {
    rpc_with(socket, method, json!({}))
}

fn rpc_with(socket: &Path, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, body) = unix_http::post(socket, &request.to_string(), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(status, 200, "{method}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn serves_the_passed_socket_notifies_ready_and_stops_on_daemon_shutdown() {
    let mut d = Activated::start("", &[]);
    let ready = d.wait_notify("READY=1");
    let last = ready.last().unwrap();
    assert!(
        last.lines().any(|l| l.starts_with("STATUS=serving ")),
        "{last}"
    );

    let status = d.rpc("daemon/status");
    assert_eq!(status["result"]["pid"], d.pid(), "{status}");

    let shutdown = d.rpc("daemon/shutdown");
    assert!(shutdown.get("result").is_some(), "{shutdown}");
    d.wait_notify("STOPPING=1");
    assert_eq!(d.wait_exit(), 0, "{}", d.log());

    // The socket belongs to the service manager: still there, still listening.
    assert!(d.socket.exists());
    assert!(UnixStream::connect(&d.socket).is_ok());
    // Under systemd stderr is the journal: no log file of its own.
    let log_file = d.dir.path().join("home/.local/state/amber/amberd.log");
    assert!(!log_file.exists(), "{}", log_file.display());
}

#[test]
fn sigterm_exits_zero() {
    let mut d = Activated::start("", &[]);
    d.wait_notify("READY=1");
    d.signal(libc::SIGTERM);
    d.wait_notify("STOPPING=1");
    assert_eq!(d.wait_exit(), 0, "{}", d.log());
    assert!(d.socket.exists());
}

#[test]
fn exits_when_idle_and_the_next_connection_is_served_by_the_next_daemon() {
    let mut d = Activated::start("[server]\nidle_exit_secs = 1\n", &[]);
    // An open connection is activity: no exit while it lasts. Made before amberd is
    // ready (it waits in the backlog) so a slow machine cannot let the daemon idle first.
    let held = UnixStream::connect(&d.socket).unwrap();
    d.wait_notify("READY=1");
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "exited with a client connected\n{}",
        d.log()
    );
    drop(held);

    d.wait_notify("STOPPING=1");
    assert_eq!(d.wait_exit(), 0, "{}", d.log());
    assert!(d.log().contains("idle: exiting"), "{}", d.log());
    assert!(
        d.socket.exists(),
        "the socket file must stay for the next activation"
    );

    // A client arriving now waits in the listener's backlog, as with systemd, and the
    // next amberd started on the same socket answers it.
    let socket = d.socket.clone();
    let waiting = std::thread::spawn(move || rpc(&socket, "daemon/status"));
    std::thread::sleep(Duration::from_millis(200));
    let next = exec_activated(d.dir.path(), &d.listener, &[]);
    let answer = waiting.join().unwrap();
    assert_eq!(answer["result"]["pid"], next.id(), "{answer}");
    d.child = next;
    d.wait_notify("READY=1");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), 0, "{}", d.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_turn_keeps_an_idle_exit_daemon_alive() {
    // ~3 s of streaming; nobody connected meanwhile.
    let chunks = (0..12).map(|i| format!("w{i} ")).collect();
    let mock = MockLlm::start(vec![MockTurn::Slow {
        chunks,
        interval_ms: 250,
    }])
    .await;
    let base = mock.base_url();
    tokio::task::spawn_blocking(move || {
        let env = [
            ("AMBER_BASE_URL", base.as_str()),
            ("AMBER_MODEL", "mock-model"),
            ("AMBER_API_KEY", "test-key"),
        ];
        let config = "[server]\nidle_exit_secs = 1\n[agent]\nconfirm_finish = false\n";
        let mut d = Activated::start(config, &env);
        d.wait_notify("READY=1");
        // Not the test dir itself: it holds HOME, so it is too broad a workspace root.
        let cwd = d.dir.path().canonicalize().unwrap().join("workspace");
        std::fs::create_dir_all(&cwd).unwrap();
        let session = rpc_with(&d.socket, "session/new", json!({"cwd": cwd}));
        let id = session["result"]["sessionId"].as_str().unwrap().to_owned();
        let turn = rpc_with(
            &d.socket,
            "session/prompt",
            json!({"sessionId": id, "text": "stream slowly"}),
        );
        assert!(turn.get("result").is_some(), "{turn}");
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(2_000));
        assert!(
            d.child.try_wait().unwrap().is_none(),
            "exited mid-turn\n{}",
            d.log()
        );
        // Once the turn has ended and a second has passed, it goes.
        assert_eq!(d.wait_exit(), 0, "{}", d.log());
        assert!(
            started.elapsed() >= Duration::from_millis(2_500),
            "{}",
            d.log()
        );
        assert!(d.log().contains("idle: exiting"), "{}", d.log());
    })
    .await
    .unwrap();
}

#[test]
fn pings_the_watchdog_when_asked() {
    let mut d = Activated::start("", &[("WATCHDOG_USEC", "200000")]);
    d.wait_notify("READY=1");
    // Every 100 ms (half the interval): two pings arrive well within the timeout.
    d.wait_notify("WATCHDOG=1");
    d.wait_notify("WATCHDOG=1");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), 0, "{}", d.log());
}

#[test]
fn a_daemon_that_bound_its_socket_ignores_idle_exit_and_logs_to_a_file() {
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        config_toml: "[server]\nidle_exit_secs = 1\n".into(),
        ..DaemonOptions::default()
    });
    std::thread::sleep(Duration::from_millis(2_000));
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["pid"], daemon.pid());
    assert!(
        daemon.log().contains("idle exit ignored"),
        "{}",
        daemon.log()
    );

    let file = daemon.dir.path().join("home/.local/state/amber/amberd.log");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("amberd ready"), "{text}");

    let mut cmd = daemon.cli();
    cmd.args(["daemon", "logs", "-n", "500"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("amberd ready"), "{stdout}\n{stderr}");
}
