//! Harness for the real binaries: [`bin_path`] finds `amberd` / `amber-cli` in the target dir,
//! [`TestDaemon`] runs an isolated `amberd` (own socket, data dir, config, HOME and workspace)
//! and talks to it over plain HTTP on its Unix socket.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::unix_http;

/// How long [`TestDaemon::spawn`] waits for the daemon to answer `daemon/status`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Read/write timeout of one [`TestDaemon::rpc`] call.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// `target/<profile>/<name>`: the directory of the running test executable
/// (`target/<profile>/deps/<test>-<hash>`) minus `deps`. Panics if the binary is missing.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let mut dir = exe
        .parent()
        .expect("test executable has a parent dir")
        .to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "binary {name} not found at {}: run `cargo build --bins` before the tests",
        path.display()
    );
    path
}

/// The environment the sessions of a test run under `through_executor::` get
/// (tests/tests/all.rs): a local `amber-exec` over stdio, configured by [`TestDaemon`].
pub const TEST_EXECUTOR: &str = "executor:test-executor";

/// Whether this test runs its sessions' tools on an executor: the suites `all.rs` runs a
/// second time under `through_executor::` do. Read from the test's own thread (named after
/// the test), where its body and this kit's helpers run.
pub fn through_executor() -> bool {
    test_under("through_executor::")
}

/// Whether this test runs its sessions' tools on an executor reached over SSH (a real sshd
/// on loopback, [`crate::sshd`]): the suites `all.rs` runs under `through_ssh::` do.
pub fn through_ssh() -> bool {
    test_under("through_ssh::")
}

/// Whether this test runs its sessions' tools on an executor that dials in over TLS
/// ([`crate::dial`]): the suites `all.rs` runs under `through_dial::` do.
pub fn through_dial() -> bool {
    test_under("through_dial::")
}

/// Whether this test runs its sessions' tools on a local executor as in an unprivileged
/// container: started without `CAP_SYS_ADMIN` (`setpriv --bounding-set -sys_admin`), so no
/// namespace can be made and Landlock and seccomp alone sandbox its commands. The suites
/// `all.rs` runs under `through_container::` do.
pub fn through_container() -> bool {
    test_under("through_container::")
}

/// A script in `dir` that starts `amber-exec` as in an unprivileged container: without
/// `CAP_SYS_ADMIN` (`setpriv --bounding-set -sys_admin`), so it can make no namespace.
pub fn unprivileged_executor(dir: &Path) -> PathBuf {
    let wrapper = dir.join("amber-exec-unprivileged");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec setpriv --bounding-set -sys_admin '{}' \"$@\"\n",
            bin_path("amber-exec").display()
        ),
    )
    .expect("write the executor's wrapper");
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))
        .expect("chmod the executor's wrapper");
    wrapper
}

fn test_under(prefix: &str) -> bool {
    std::thread::current()
        .name()
        .is_some_and(|name| name.starts_with(prefix))
}

/// `session/new`'s `environment` for this test: [`TEST_EXECUTOR`] under
/// [`through_executor`], `ssh://exec-host` under [`through_ssh`], else none (local).
pub fn test_environment() -> Option<String> {
    if through_ssh() {
        return Some(format!("ssh://{}", crate::sshd::HOST));
    }
    if through_dial() {
        return Some(format!("executor:{}", crate::dial::NAME));
    }
    (through_executor() || through_container()).then(|| TEST_EXECUTOR.to_owned())
}

/// How to start a [`TestDaemon`].
#[derive(Debug, Clone, Default)]
pub struct DaemonOptions {
    /// `AMBER_BASE_URL`; with it `AMBER_MODEL=mock-model` and `AMBER_API_KEY=test-key` are set
    /// too. `None` leaves the provider to `config_toml`.
    pub base_url: Option<String>,
    /// Contents of `<dir>/config.toml` (may be empty).
    pub config_toml: String,
    /// Extra environment for amberd, applied last (overrides the defaults above). One
    /// variable is the kit's own: [`HOSTS_FILE_VAR`].
    pub env: Vec<(String, String)>,
}

/// Set in [`DaemonOptions::env`] to a file: amberd runs in a mount namespace of its own
/// where that file is `/etc/hosts`, so names resolve to the test's "remote machines" for it
/// (and what it starts) alone; the machine's own file is never touched.
pub const HOSTS_FILE_VAR: &str = "AMBER_TESTS_HOSTS_FILE";

/// A running `amberd` in a temp dir of its own. SIGTERM, then SIGKILL, on drop; when the test
/// is panicking the daemon log is printed to stderr.
pub struct TestDaemon {
    /// Holds `data/`, `config.toml`, `amberd.log`, `home/`, `run/` (the socket) and `workspace/`.
    pub dir: TempDir,
    /// `<dir>/run/amber/amberd.sock`, where amberd puts it by default
    /// (`$XDG_RUNTIME_DIR/amber`): a directory of its own, apart from the workspace, which
    /// sandboxed commands must not see.
    pub socket: PathBuf,
    /// A fresh, empty workspace directory (`<dir>/workspace`, canonical path).
    pub workspace: PathBuf,
    child: Child,
    exit: Option<ExitStatus>,
    opts: DaemonOptions,
    /// The SSH server its sessions' executors are reached through, under [`through_ssh`].
    _sshd: Option<crate::sshd::Sshd>,
    /// The executor that dials in to it, under [`through_dial`] (dropped first).
    _dialler: Option<crate::dial::Dialler>,
    _dial: Option<crate::dial::DialSetup>,
    next_id: AtomicU64,
}

impl TestDaemon {
    /// Starts amberd against the OpenAI-compatible endpoint at `base_url`.
    pub fn spawn(base_url: &str) -> TestDaemon {
        TestDaemon::spawn_with(DaemonOptions {
            base_url: Some(base_url.to_owned()),
            ..DaemonOptions::default()
        })
    }

    /// Starts amberd with `opts` and waits until it answers `daemon/status`.
    pub fn spawn_with(opts: DaemonOptions) -> TestDaemon {
        let tmp = tempfile::Builder::new()
            .prefix("amber-test-")
            .tempdir()
            .expect("create temp dir");
        let root = tmp.path().canonicalize().expect("canonicalize temp dir");
        let workspace = root.join("workspace");
        for sub in ["data", "home", "run", "workspace"] {
            fs::create_dir_all(root.join(sub)).expect("create test dirs");
        }
        // Private, as amber's own directories are (clients trust a socket only in one).
        for dir in [root.clone(), root.join("run")] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).expect("chmod test dirs");
        }
        let mut config = opts.config_toml.clone();
        let dial = through_dial().then(crate::dial::DialSetup::new);
        if let Some(dial) = &dial {
            config.push_str(&dial.config());
        }
        if through_executor() || through_container() {
            let program = if through_container() {
                unprivileged_executor(&root)
            } else {
                bin_path("amber-exec")
            };
            config.push_str(&format!(
                "\n[environments.test-executor]\nprogram = \"{}\"\nlinger_secs = 30\nreconnect_secs = 10\nsandbox_in_place = {}\n",
                program.display(),
                through_container()
            ));
        }
        fs::write(root.join("config.toml"), config).expect("write config.toml");
        let sshd = through_ssh().then(crate::sshd::Sshd::start);
        let mut opts = opts;
        if let Some(sshd) = &sshd {
            opts.env.push(("PATH".to_owned(), sshd.path_env()));
        }
        let child = start_child(&root, &opts);
        let mut daemon = TestDaemon {
            socket: socket_path(&root),
            dir: tmp,
            workspace,
            child,
            exit: None,
            opts,
            _sshd: sshd,
            _dialler: None,
            _dial: None,
            next_id: AtomicU64::new(1),
        };
        daemon.wait_ready();
        if let Some(dial) = dial {
            daemon._dialler = Some(dial.dial(dial.port, &dial.token_file));
            daemon._dial = Some(dial);
        }
        daemon
    }

    /// Stops the daemon (SIGTERM, then SIGKILL after 5 s) and starts it again on the same
    /// socket, data dir and config; waits until it is ready. Returns the old exit code.
    pub fn restart(&mut self) -> Option<i32> {
        let code = self.stop(Duration::from_secs(5));
        self.child = start_child(self.dir.path(), &self.opts);
        self.exit = None;
        self.wait_ready();
        code
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        let status = json!({"jsonrpc": "2.0", "id": 0, "method": "daemon/status", "params": {}});
        let status = status.to_string();
        let mut last_error = String::from("socket never appeared");
        loop {
            if let Some(code) = self.try_exit() {
                panic!(
                    "amberd exited with {code} before it was ready\n--- amberd log ---\n{}",
                    self.log()
                );
            }
            if self.socket.exists() {
                match unix_http::post(&self.socket, &status, Duration::from_secs(2)) {
                    Ok((200, body)) if body.contains("\"result\"") => return,
                    Ok((code, body)) => last_error = format!("HTTP {code}: {body}"),
                    Err(e) => last_error = e.to_string(),
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "amberd not ready after {READY_TIMEOUT:?} (last: {last_error})\n\
                     --- amberd log ---\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `amber-cli` with `AMBER_SOCKET` pointing at this daemon, the same isolated HOME/XDG
    /// dirs, and the workspace as current dir. `--no-autostart` is the caller's choice.
    pub fn cli(&self) -> Command {
        let mut cmd = Command::new(bin_path("amber-cli"));
        isolate_env(&mut cmd, self.dir.path());
        cmd.env("AMBER_SOCKET", &self.socket)
            .current_dir(&self.workspace);
        cmd
    }

    /// Another `amberd` on this daemon's data dir and config, serving `socket`: for tests of
    /// what a second daemon may do. Not started; stdio is the caller's.
    pub fn second_amberd(&self, socket: &Path) -> Command {
        amberd_command(self.dir.path(), socket)
    }

    /// One JSON-RPC call as an HTTP POST on the socket; the whole response object.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (status, body) = self.raw_http(&request.to_string());
        serde_json::from_str(&body).unwrap_or_else(|e| {
            panic!("{method}: HTTP {status}, response is not JSON ({e}): {body:?}")
        })
    }

    /// Like [`TestDaemon::rpc`], but returns `result` and panics on a JSON-RPC error.
    pub fn rpc_ok(&self, method: &str, params: Value) -> Value {
        let response = self.rpc(method, params);
        match response.get("result") {
            Some(result) if response.get("error").is_none() => result.clone(),
            _ => panic!("{method} failed: {response}"),
        }
    }

    /// The workspace's configuration files as `trust/list` reports them.
    pub fn trust_list(&self) -> Vec<Value> {
        let listed = self.rpc_ok("trust/list", json!({"cwd": self.workspace}));
        listed["files"].as_array().cloned().unwrap_or_default()
    }

    /// Trusts the current version of the workspace configuration file `relative` (as a
    /// person would with `amber-cli trust`), when it is one waiting for trust; returns
    /// whether it was.
    pub fn trust_if_pending(&self, relative: &str) -> bool {
        let files = self.trust_list();
        let Some(file) = files
            .iter()
            .find(|f| f["path"] == relative && f["state"] == "untrusted")
        else {
            return false;
        };
        let decided = self.rpc_ok(
            "trust/respond",
            json!({"cwd": self.workspace, "path": relative, "hash": file["hash"], "decision": "trust"}),
        );
        assert_eq!(decided["state"], "trusted", "{decided}");
        true
    }

    /// POSTs an arbitrary body; returns HTTP status and body.
    pub fn raw_http(&self, body: &str) -> (u16, String) {
        unix_http::post(&self.socket, body, RPC_TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "HTTP POST to {} failed: {e}\n--- amberd log ---\n{}",
                self.socket.display(),
                self.log()
            )
        })
    }

    /// Everything amberd wrote to stderr/stdout so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("amberd.log")).unwrap_or_default()
    }

    /// The daemon's process id.
    /// The append-only log of session `id` in the daemon's data dir.
    pub fn session_log(&self, id: &str) -> PathBuf {
        self.dir.path().join("data/sessions").join(id).join("log")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) to the daemon; a no-op once it has exited.
    pub fn kill(&mut self, signal: i32) {
        if self.try_exit().is_some() {
            return;
        }
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our own un-reaped child.
        unsafe {
            libc::kill(pid, signal);
        }
    }

    /// Waits up to `timeout` for the daemon to exit: its exit code, `128 + signal` if a signal
    /// ended it, `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(code) = self.try_exit() {
                return Some(code);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn try_exit(&mut self) -> Option<i32> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().expect("try_wait on amberd");
        }
        self.exit
            .map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)))
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL and reap.
    fn stop(&mut self, grace: Duration) -> Option<i32> {
        self.kill(libc::SIGTERM);
        if let Some(code) = self.wait_exit(grace) {
            return Some(code);
        }
        self.kill(libc::SIGKILL);
        self.wait_exit(Duration::from_secs(5))
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
        if std::thread::panicking() {
            eprintln!(
                "--- amberd log ({}) ---\n{}",
                self.dir.path().display(),
                self.log()
            );
        }
    }
}

/// Points HOME and the XDG dirs into `root` and clears variables that would make a binary
/// reach outside it.
fn isolate_env(cmd: &mut Command, root: &Path) {
    let home = root.join("home");
    for var in [
        "AMBER_SOCKET",
        "AMBER_CONFIG",
        "AMBER_DATA_DIR",
        "AMBER_BASE_URL",
        "AMBER_API_KEY",
        "AMBER_MODEL",
        "AMBER_FLAVOR",
        "AMBER_LOG",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "NOTIFY_SOCKET",
        // Only a test that asks for it simulates a kernel without Landlock (`opts.env`).
        "AMBER_TEST_SANDBOX_NO_LANDLOCK",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_RUNTIME_DIR", root.join("run"));
}

/// Where the daemon of `root` binds.
fn socket_path(root: &Path) -> PathBuf {
    root.join("run").join("amber").join("amberd.sock")
}

/// `amberd` isolated in `root` (its HOME, data dir and config), serving `socket`; stdin
/// empty, the rest the caller's.
fn amberd_command(root: &Path, socket: &Path) -> Command {
    let mut cmd = Command::new(bin_path("amberd"));
    isolate_env(&mut cmd, root);
    cmd.arg("--socket")
        .arg(socket)
        .arg("--data-dir")
        .arg(root.join("data"))
        .arg("--config")
        .arg(root.join("config.toml"))
        .current_dir(root)
        .stdin(Stdio::null());
    cmd
}

/// `cmd` run where `hosts` is `/etc/hosts`: `unshare --mount` (private propagation), a bind
/// mount, then `exec` — the same process, so its pid is amberd's.
fn with_hosts_file(cmd: Command, hosts: &str) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
        .arg(hosts)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped.stdin(Stdio::null());
    wrapped
}

fn start_child(root: &Path, opts: &DaemonOptions) -> Child {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join("amberd.log"))
        .expect("open amberd.log");
    let log_out: File = log.try_clone().expect("clone log handle");
    let mut cmd = amberd_command(root, &socket_path(root));
    if let Some((_, hosts)) = opts.env.iter().find(|(k, _)| k == HOSTS_FILE_VAR) {
        cmd = with_hosts_file(cmd, hosts);
    }
    cmd.env("AMBER_LOG", "debug").stdout(log_out).stderr(log);
    if let Some(base_url) = &opts.base_url {
        cmd.env("AMBER_BASE_URL", base_url)
            .env("AMBER_MODEL", "mock-model")
            .env("AMBER_API_KEY", "test-key");
    }
    for (key, value) in &opts.env {
        cmd.env(key, value);
    }
    cmd.spawn().expect("spawn amberd")
}
