//! The daemon under test: `amberd` exec'd next to this binary with a temp socket, HOME, XDG
//! dirs, config and data dir (nothing of the user's is read or written), or a running one
//! given with `--socket`. Also the plain-HTTP probe of the socket (no client library, so the
//! ready time measures the daemon, not a handshake) and `VmRSS` from /proc.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::error::BenchError;

/// How long a started daemon may take to answer before the run fails.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a daemon gets to exit after SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a started daemon talks to.
#[derive(Debug, Clone)]
pub(crate) struct DaemonSpec {
    pub amberd: PathBuf,
    pub base_url: String,
    pub model: String,
    /// `AMBER_API_KEY`; `None` leaves the environment's (for a real endpoint).
    pub api_key: Option<String>,
    /// `[agent] confirm_finish`.
    pub confirm_finish: bool,
    /// More `config.toml` text after the `[agent]` section (a KPI's own settings, e.g.
    /// `[checkpoints]`); empty for the suite's daemons.
    pub extra_config: String,
}

/// A started `amberd`, stopped (SIGTERM) and its temp dir removed when dropped.
pub(crate) struct DaemonProc {
    child: Child,
    pub socket: PathBuf,
    pub pid: u32,
    pub log: PathBuf,
    /// Its `--data-dir` (sessions, the checkpoint store).
    pub data_dir: PathBuf,
    /// When `exec` was called.
    pub spawned: Instant,
    _dir: TempDir,
}

impl DaemonProc {
    /// Execs amberd in a fresh temp dir; returns at once (see [`DaemonProc::wait_ready`]).
    pub(crate) fn spawn(spec: &DaemonSpec) -> Result<DaemonProc, BenchError> {
        let dir = tempfile::Builder::new()
            .prefix("amber-bench-")
            .tempdir()
            .map_err(BenchError::io("create a temp dir for amberd"))?;
        let root = dir.path();
        for sub in ["home", "config", "data", "state", "cache", "run"] {
            std::fs::create_dir_all(root.join(sub)).map_err(BenchError::io(format!(
                "create {}",
                root.join(sub).display()
            )))?;
        }
        let config = root.join("config.toml");
        let text = format!(
            "[agent]\nconfirm_finish = {}\n{}",
            spec.confirm_finish, spec.extra_config
        );
        std::fs::write(&config, text).map_err(BenchError::io("write amberd's config"))?;
        // amberd binds, and clients connect, only in a private socket directory.
        std::fs::set_permissions(root.join("run"), std::fs::Permissions::from_mode(0o700))
            .map_err(BenchError::io("make the socket directory private"))?;
        let socket = root.join("run").join("amberd.sock");
        let log = root.join("amberd.log");
        let data_dir = root.join("data");
        let log_file = std::fs::File::create(&log).map_err(BenchError::io("create amberd.log"))?;
        let mut cmd = Command::new(&spec.amberd);
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(&data_dir)
            .env("HOME", root.join("home"))
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_DATA_HOME", root.join("data"))
            .env("XDG_STATE_HOME", root.join("state"))
            .env("XDG_CACHE_HOME", root.join("cache"))
            .env("XDG_RUNTIME_DIR", root.join("run"))
            .env("AMBER_LOG", "warn")
            .env("AMBER_BASE_URL", &spec.base_url)
            .env("AMBER_MODEL", &spec.model)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        for var in [
            "AMBER_SOCKET",
            "AMBER_CONFIG",
            "AMBER_DATA_DIR",
            "AMBER_WORKSPACE",
            "AMBER_FLAVOR",
            "LISTEN_FDS",
            "LISTEN_PID",
            "LISTEN_FDNAMES",
            "NOTIFY_SOCKET",
            "WATCHDOG_USEC",
            "WATCHDOG_PID",
        ] {
            cmd.env_remove(var);
        }
        if let Some(key) = &spec.api_key {
            cmd.env("AMBER_API_KEY", key);
        }
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .map_err(BenchError::io(format!("exec {}", spec.amberd.display())))?;
        Ok(DaemonProc {
            pid: child.id(),
            child,
            socket,
            log,
            data_dir,
            spawned,
            _dir: dir,
        })
    }

    /// Spawns amberd and waits until it answers, on a blocking thread; `what` names the
    /// caller in a join error.
    pub(crate) async fn start(spec: &DaemonSpec, what: &str) -> Result<DaemonProc, BenchError> {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || {
            let mut daemon = DaemonProc::spawn(&spec)?;
            daemon.wait_ready()?;
            Ok::<_, BenchError>(daemon)
        })
        .await
        .map_err(|e| BenchError::Failed(format!("{what}: {e}")))?
    }

    /// Polls `daemon/status` over plain HTTP in a tight loop; the time from exec to the first
    /// answer. Blocking: call it from a blocking thread.
    pub(crate) fn wait_ready(&mut self) -> Result<Duration, BenchError> {
        loop {
            if status_answers(&self.socket) {
                return Ok(self.spawned.elapsed());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.failure(&format!("exited before answering ({status})")));
            }
            if self.spawned.elapsed() > READY_TIMEOUT {
                return Err(self.failure("did not answer daemon/status in 20 s"));
            }
            // Spin, but let the daemon have the core.
            std::thread::yield_now();
        }
    }

    /// An error naming the socket, with the tail of the daemon's log.
    pub(crate) fn failure(&self, message: &str) -> BenchError {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        BenchError::Daemon {
            socket: self.socket.clone(),
            message: format!("{message}; log: {}", tail.join(" | ")),
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited in time. Blocking.
    pub(crate) fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(self.pid) {
            // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DaemonProc {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// One JSON-RPC call as an HTTP/1.1 POST on the socket; the response's JSON body.
pub(crate) fn http_call(socket: &Path, method: &str, params: &Value) -> Result<Value, BenchError> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        .to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = BenchError::io(format!("call {method} on {}", socket.display()));
    let mut stream = UnixStream::connect(socket).map_err(io)?;
    let mut response = Vec::new();
    stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.read_to_end(&mut response))
        .map_err(BenchError::io(format!(
            "call {method} on {}",
            socket.display()
        )))?;
    let text = String::from_utf8_lossy(&response);
    let json = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(json).map_err(|e| BenchError::Daemon {
        socket: socket.to_owned(),
        message: format!("{method}: unreadable answer ({e}): {text}"),
    })
}

/// Whether `daemon/status` gets a result right now.
fn status_answers(socket: &Path) -> bool {
    http_call(
        socket,
        amber_proto::methods::DAEMON_STATUS,
        &serde_json::json!({}),
    )
    .is_ok_and(|v| v.get("result").is_some())
}

/// `VmRSS` of a process, in KiB.
pub(crate) fn rss_kib(pid: u32) -> Result<u64, BenchError> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(BenchError::io(format!("read {path}")))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| BenchError::Failed(format!("no VmRSS in {path}")))
}

/// A binary next to this one (`target/<profile>/NAME`), or the path given.
pub(crate) fn sibling(
    given: Option<PathBuf>,
    binary: &'static str,
    flag: &'static str,
) -> Result<PathBuf, BenchError> {
    let path = match given {
        Some(path) => path,
        None => std::env::current_exe()
            .map_err(BenchError::io("find this executable"))?
            .with_file_name(binary),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(BenchError::MissingBinary { binary, path, flag })
    }
}
