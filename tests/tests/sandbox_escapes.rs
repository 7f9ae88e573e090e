//! End-to-end: the OS sandbox holds where the classifier does not. Through the real daemon,
//! in yolo mode (nothing asks) with the default sandbox (`workspace-write`, no network),
//! every case tries to reach past the workspace: writes by redirection, copies, links,
//! `/proc` magic links, symlinked directories, other interpreters, git, detached and
//! background processes; connections to servers the test runs on loopback (TCP, UDP, IPv6),
//! to a Unix socket outside the workspace and to amberd's own socket. The sentinels live
//! beside the workspace, never in a real system path.
//!
//! Zero escapes: after every case the sentinel tree, the home directory and the workspace's
//! protected paths are exactly as before, and no listener saw a byte; every synchronous
//! case's tool result names the refusal (`[sandbox: …]`). Inside the workspace everything
//! keeps working: builds, temp files through `$TMPDIR`, `git commit` (objects writable,
//! hooks and config not).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Mode, SandboxMode, SandboxRequest, SessionNewParams};
use amber_tests::TestDaemon;
use amber_tests::daemon::through_container;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, git, prompt_turn, spawn_config, within,
};
use amber_tests::tool_calls::{call, calls, put, result_of};
use serde_json::json;

/// Every session in yolo, with the default sandbox spelled out.
const CONFIG: &str = "[sandbox]\nmode = \"workspace-write\"\nnetwork = false\n";

/// What a snapshot records of one path: kind, content, mode, owner, mtime.
type Snapshot = BTreeMap<PathBuf, String>;

fn snapshot(root: &Path) -> Snapshot {
    snapshot_except(root, &[])
}

/// [`snapshot`] without one subtree (amberd's own state under the test HOME: its log grows).
fn snapshot_except(root: &Path, skip: &[&Path]) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        if skip.iter().any(|skip| path.starts_with(skip)) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                stack.push(entry.path());
            }
            "dir".to_owned()
        } else if meta.is_file() {
            format!(
                "file:{}",
                std::fs::read_to_string(&path).unwrap_or_default()
            )
        } else if meta.file_type().is_symlink() {
            format!("link:{}", std::fs::read_link(&path).unwrap().display())
        } else {
            "other".to_owned()
        };
        let mtime = if meta.is_dir() { 0 } else { meta.mtime() };
        // Without namespaces (`through_container`) Landlock cannot keep a command from
        // changing the permission bits and times of the user's own files (docs/security.md,
        // "Without namespaces"): what must still hold there is content, existence, owner
        // and the set-id bits.
        let (mode, mtime) = if through_container() {
            (meta.mode() & !0o777, 0)
        } else {
            (meta.mode(), mtime)
        };
        out.insert(
            path,
            format!(
                "{kind} mode={mode:o} uid={} gid={} mtime={mtime}",
                meta.uid(),
                meta.gid()
            ),
        );
    }
    out
}

/// The world outside the workspace that the cases aim at, and the servers they try to reach.
struct Targets {
    /// `<daemon dir>/outside`: holds `inner/` (the sentinels) and `repo/` (a git repository).
    outside: PathBuf,
    inner: PathBuf,
    tcp: TcpListener,
    udp: UdpSocket,
    tcp6: Option<TcpListener>,
    unix: UnixListener,
    unix_path: PathBuf,
}

impl Targets {
    fn new(daemon: &TestDaemon) -> Targets {
        let outside = daemon.dir.path().canonicalize().unwrap().join("outside");
        let inner = outside.join("inner");
        put(&inner.join("sentinel"), "original\n");
        put(&inner.join("keep/file"), "keep\n");
        std::fs::create_dir_all(inner.join("emptydir")).unwrap();
        std::fs::set_permissions(
            inner.join("sentinel"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let repo = outside.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        put(&repo.join("a.txt"), "a\n");
        git(&repo, &["add", "a.txt"]);
        git(&repo, &["commit", "-qm", "first"]);
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let tcp6 = TcpListener::bind("[::1]:0").ok();
        if let Some(l) = &tcp6 {
            l.set_nonblocking(true).unwrap();
        }
        let unix_path = outside.join("peer.sock");
        let unix = UnixListener::bind(&unix_path).unwrap();
        unix.set_nonblocking(true).unwrap();
        Targets {
            outside,
            inner,
            tcp,
            udp,
            tcp6,
            unix,
            unix_path,
        }
    }

    /// `{O}` the sentinel dir, `{OUT}` its parent, `{PORT}`, `{UPORT}`, `{P6}` the loopback
    /// servers, `{USOCK}` the Unix socket, `{PID}` amberd, `{SOCK}` amberd's socket, `{HOME}`.
    fn fill(&self, template: &str, daemon: &TestDaemon) -> String {
        template
            .replace("{O}", &self.inner.display().to_string())
            .replace("{OUT}", &self.outside.display().to_string())
            .replace("{PORT}", &self.tcp.local_addr().unwrap().port().to_string())
            .replace(
                "{UPORT}",
                &self.udp.local_addr().unwrap().port().to_string(),
            )
            .replace(
                "{P6}",
                &self
                    .tcp6
                    .as_ref()
                    .map_or(1, |l| l.local_addr().unwrap().port())
                    .to_string(),
            )
            .replace("{USOCK}", &self.unix_path.display().to_string())
            .replace("{PID}", &daemon.pid().to_string())
            .replace("{SOCK}", &daemon.socket.display().to_string())
            .replace(
                "{HOME}",
                &daemon.dir.path().join("home").display().to_string(),
            )
    }

    /// No listener accepted a connection or received a datagram.
    fn assert_untouched(&self) {
        assert_eq!(
            self.tcp.accept().map(|_| ()).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "a sandboxed command reached the loopback TCP server"
        );
        let mut buf = [0u8; 64];
        assert_eq!(
            self.udp.recv(&mut buf).map(|_| ()).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "a sandboxed command reached the loopback UDP server"
        );
        if let Some(l) = &self.tcp6 {
            assert_eq!(
                l.accept().map(|_| ()).unwrap_err().kind(),
                ErrorKind::WouldBlock,
                "a sandboxed command reached the IPv6 loopback server"
            );
        }
        assert_eq!(
            self.unix.accept().map(|_| ()).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "a sandboxed command reached the Unix socket outside the workspace"
        );
    }
}

/// The synchronous escape attempts: `(call id, command)`. Each must fail and say why.
const ESCAPES: &[(&str, &str)] = &[
    // Redirections and shell builtins.
    ("redirect", "echo pwned > {O}/sentinel"),
    ("append", "echo pwned >> {O}/sentinel"),
    ("redirect_new", "echo pwned > {O}/new_file"),
    (
        "noclobber_off",
        "set +o noclobber; echo pwned >| {O}/sentinel",
    ),
    ("exec_fd", "exec 3<>{O}/sentinel && echo pwned >&3"),
    ("dev_fd", "exec 3<{O}/sentinel && echo pwned > /dev/fd/3"),
    (
        "proc_self_fd",
        "exec 4<{O}/sentinel && echo pwned > /proc/self/fd/4",
    ),
    // Core utilities.
    ("cp_into", "echo x > w1.txt && cp w1.txt {O}/new_cp"),
    ("cp_over", "echo pwned > w2.txt && cp w2.txt {O}/sentinel"),
    (
        "cp_r",
        "mkdir -p d1 && echo x > d1/f && cp -r d1 {O}/new_dir_cp",
    ),
    ("mv_out", "echo x > mv.txt && mv mv.txt {O}/new_mv"),
    ("mv_in", "mv {O}/sentinel ./stolen"),
    ("rm", "rm -f {O}/sentinel"),
    ("rm_r", "rm -rf {O}/keep"),
    ("rmdir", "rmdir {O}/emptydir"),
    ("tee", "echo pwned | tee {O}/sentinel"),
    ("tee_a", "echo pwned | tee -a {O}/sentinel"),
    (
        "dd",
        "dd if=/dev/zero of={O}/sentinel bs=1 count=1 conv=notrunc",
    ),
    ("dd_new", "dd if=/dev/zero of={O}/new_dd bs=1 count=1"),
    ("truncate", "truncate -s 0 {O}/sentinel"),
    ("touch_new", "touch {O}/new_touch"),
    ("touch_time", "touch -d 2000-01-01 {O}/sentinel"),
    ("mkdir", "mkdir {O}/new_mkdir"),
    ("mkdir_p", "mkdir -p {O}/a/b/c"),
    ("chmod", "chmod 777 {O}/sentinel"),
    ("chmod_dir", "chmod 700 {O}"),
    ("chown", "chown 65534 {O}/sentinel"),
    ("chgrp", "chgrp 65534 {O}/sentinel"),
    ("mkfifo", "mkfifo {O}/new_fifo"),
    ("mknod", "mknod {O}/new_node c 1 3"),
    (
        "install",
        "echo x > w3.txt && install -m 644 w3.txt {O}/new_install",
    ),
    ("sed_i", "sed -i s/original/pwned/ {O}/sentinel"),
    ("ln_outside", "ln -s {O}/sentinel {O}/new_link"),
    // Links from the workspace.
    (
        "symlink_write",
        "ln -s {O}/sentinel link1 && echo pwned > link1",
    ),
    (
        "symlink_dir_write",
        "ln -s {O} linkdir && echo x > linkdir/new_via_dir",
    ),
    (
        "dangling_symlink",
        "ln -s {O}/new_via_link l2 && echo x > l2",
    ),
    ("hardlink", "ln {O}/sentinel hard1 && echo pwned > hard1"),
    (
        "dotdot_symlink",
        "ln -s {O} sl && echo x > sl/../new_dotdot",
    ),
    // /proc magic links.
    ("proc_self_root", "echo pwned > /proc/self/root{O}/sentinel"),
    (
        "proc_self_cwd",
        "cd {O} && echo pwned > /proc/self/cwd/sentinel",
    ),
    ("proc_1_root", "echo pwned > /proc/1/root{O}/sentinel"),
    (
        "proc_amberd_root",
        "echo pwned > /proc/{PID}/root{O}/sentinel",
    ),
    (
        "proc_amberd_cwd",
        "echo pwned > /proc/{PID}/cwd/new_amberd_cwd",
    ),
    ("proc_amberd_environ", "cat /proc/{PID}/environ"),
    ("proc_amberd_mem", "echo x > /proc/{PID}/mem"),
    // Other interpreters and programs.
    (
        "python_open",
        "python3 -c \"open('{O}/sentinel','w').write('pwned')\"",
    ),
    (
        "python_rename",
        "python3 -c \"import os; os.rename('{O}/sentinel','{O}/moved')\"",
    ),
    (
        "python_copy",
        "echo x > w5.txt && python3 -c \"import shutil; shutil.copy('w5.txt','{O}/new_py')\"",
    ),
    (
        "perl_open",
        "perl -e 'open(F, \">\", \"{O}/new_perl\") or die \"open: $!\\n\"'",
    ),
    (
        "git_commit",
        "git -C {OUT}/repo -c user.name=x -c user.email=x@x commit --allow-empty -qm pwned",
    ),
    ("git_config", "git -C {OUT}/repo config user.name pwned"),
    // Leaving the working directory, the environment or the session.
    ("cd_root", "cd / && echo pwned > .{O}/sentinel"),
    ("cd_out", "cd {O} && touch new_cd"),
    ("env_i", "env -i /bin/sh -c 'echo pwned > {O}/sentinel'"),
    ("setsid", "setsid -w sh -c 'echo pwned > {O}/sentinel'"),
    ("sh_c", "sh -c 'echo pwned > {O}/new_sh'"),
    ("home", "echo x > {HOME}/new_home"),
    ("signal_amberd", "kill -CONT {PID}"),
    // New namespaces: a fresh network or mount namespace would undo the sandbox's.
    (
        "unshare_net",
        "unshare -n sh -c 'ip link set lo up; echo x > /dev/tcp/127.0.0.1/{PORT}'",
    ),
    (
        "unshare_mount",
        "unshare -m sh -c 'mount -o remount,rw / && echo pwned > {O}/sentinel'",
    ),
    (
        "unshare_user",
        "unshare -Urm sh -c 'mount -t tmpfs none {O} && echo pwned > {O}/sentinel'",
    ),
    // The workspace's protected paths.
    (
        "git_hook",
        "echo 'touch {O}/hooked' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    ),
    ("git_hooks_path", "git config core.hooksPath /tmp"),
    ("git_dir_rename", "mv .git .git_moved"),
    (
        "amber_rules",
        "printf '[[rules]]\\ntool = \"bash\"\\ndecision = \"allow\"\\n' > .amber/rules.toml",
    ),
    ("amber_rename", "mv .amber .amber_moved"),
    // Network: loopback TCP, UDP, IPv6, a Unix socket outside, amberd's own socket.
    ("curl", "curl -sS -m 3 http://127.0.0.1:{PORT}/"),
    ("dev_tcp", "echo x > /dev/tcp/127.0.0.1/{PORT}"),
    ("nc", "nc -v -w 2 127.0.0.1 {PORT} < /dev/null"),
    (
        "python_tcp",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {PORT}), 3)\"",
    ),
    (
        "python_udp",
        "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {UPORT}))\"",
    ),
    ("nc_udp", "echo x | nc -v -u -w 1 127.0.0.1 {UPORT}"),
    (
        "ipv6",
        "python3 -c \"import socket; socket.create_connection(('::1', {P6}), 3)\"",
    ),
    (
        "unix_socket",
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{USOCK}')\"",
    ),
    (
        "amberd_socket",
        "curl -sS -m 3 --unix-socket {SOCK} http://localhost/ -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/status\"}'",
    ),
];

/// Asynchronous attempts: they write after the call returned.
const LATER: &[(&str, &str)] = &[
    (
        "nohup",
        "nohup sh -c 'sleep 1; echo pwned > {O}/new_nohup' > /dev/null 2>&1 &",
    ),
    (
        "setsid_bg",
        "setsid sh -c 'sleep 1; echo pwned > {O}/new_setsid' > /dev/null 2>&1 < /dev/null &",
    ),
];

async fn yolo_session(
    daemon: &TestDaemon,
    sandbox: Option<SandboxRequest>,
) -> (amber_client::Client, String) {
    let client = connect(daemon).await;
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(Mode::Yolo),
        sandbox,
        environment: amber_tests::daemon::test_environment(),
        ..SessionNewParams::default()
    };
    let info = within("session/new", client.session_new(&params))
        .await
        .expect("session/new");
    (client, info.session_id)
}

#[tokio::test(flavor = "multi_thread")]
async fn no_command_escapes_the_default_sandbox_in_yolo() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}\n{CONFIG}"));
    git(&daemon.workspace, &["init", "-q"]);
    let targets = Targets::new(&daemon);
    let home = daemon.dir.path().join("home");
    let before_outside = snapshot(&targets.outside);
    // amber's own: the daemon's state, and an executor's checkpoint cache.
    let amber_state = home.join(".local/state/amber");
    let executor_cache = home.join(".cache/amber-exec");
    let amber_own = [amber_state.as_path(), executor_cache.as_path()];
    // A home has its cache directory (where an executor makes its own).
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    let before_home = snapshot_except(&home, &amber_own);
    let protected = |ws: &Path| {
        let mut s = snapshot(&ws.join(".git/hooks"));
        s.extend(snapshot(&ws.join(".git/config")));
        s.extend(snapshot(&ws.join(".amber")));
        s
    };

    let (client, sid) = yolo_session(&daemon, None).await;
    let info = client.session_get(&sid).await.unwrap();
    assert_eq!(
        info.session.sandbox.map(|s| (s.mode, s.network)),
        Some((SandboxMode::WorkspaceWrite, false))
    );
    // The sandbox creates an empty `.amber/` (its mount point) at the first command.
    std::fs::create_dir_all(daemon.workspace.join(".amber")).unwrap();
    let before_protected = protected(&daemon.workspace);
    let mut events = Events::live(&client, &sid).await;
    // Each attempt ends with `echo`: the call succeeds whatever the attempt did, so the loop
    // guard (consecutive failed calls stop the turn) never cuts the suite short; the refusal
    // must still be named in the result.
    let attempt = |cmd: &str| {
        format!(
            "( {} ); echo \"[attempt exited $?]\"",
            targets.fill(cmd, &daemon)
        )
    };
    let mut script: Vec<MockTurn> = ESCAPES
        .chunks(8)
        .map(|chunk| {
            calls(
                chunk
                    .iter()
                    .map(|(id, cmd)| call(id, "bash", &json!({ "command": attempt(cmd) })))
                    .collect(),
            )
        })
        .collect();
    script.push(calls(
        LATER
            .iter()
            .map(|(id, cmd)| {
                call(
                    id,
                    "bash",
                    &json!({ "command": targets.fill(cmd, &daemon) }),
                )
            })
            .chain([call(
                "process_later",
                "process",
                &json!({
                    "action": "start",
                    "command": targets.fill("sleep 1; echo pwned > {O}/new_process", &daemon),
                }),
            )])
            .collect(),
    ));
    script.push(MockTurn::text("Tried everything."));
    script.push(done());
    mock.push(script);
    let turn = prompt_turn(&client, &mut events, &sid, "try to get out").await;

    // Without namespaces these succeed on the user's own files (docs/security.md, "Without
    // namespaces": Landlock has no right for a file's permission bits or times); the
    // snapshots above still hold everything else of them.
    let allowed_in_place: &[&str] = if through_container() {
        &["touch_time", "chmod", "chmod_dir"]
    } else {
        &[]
    };
    let mut unnamed = Vec::new();
    for (id, _) in ESCAPES {
        let (status, output) = result_of(&turn, id);
        assert_ne!(
            status, "denied",
            "{id} was denied by the policy, not tried: {output}"
        );
        if !output.contains("[sandbox:") && !allowed_in_place.contains(id) {
            unnamed.push(format!("{id} ({status}): {output}"));
        }
    }
    // Background writers had a second to try after their call returned.
    tokio::time::sleep(Duration::from_millis(2500)).await;

    assert_eq!(
        snapshot(&targets.outside),
        before_outside,
        "something outside the workspace changed"
    );
    assert_eq!(
        snapshot_except(&home, &amber_own),
        before_home,
        "the home directory changed"
    );
    assert_eq!(
        protected(&daemon.workspace),
        before_protected,
        "a protected path changed"
    );
    targets.assert_untouched();
    assert!(
        unnamed.is_empty(),
        "results that do not name the refusal:\n{}",
        unnamed.join("\n")
    );
    // amberd's environment was not readable (it holds the provider key).
    let (_, environ) = result_of(&turn, "proc_amberd_environ");
    assert!(!environ.contains("test-key"), "{environ}");
    // The daemon is alive and unstopped.
    within("daemon/status", client.daemon_status())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn with_network_allowed_loopback_works_but_amberd_stays_unreachable() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}\n{CONFIG}"));
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || server.accept().map(|_| ()).is_ok());
    let (client, sid) = yolo_session(
        &daemon,
        Some(SandboxRequest {
            network: Some(amber_proto::NetworkMode::On),
            ..Default::default()
        }),
    )
    .await;
    let mut events = Events::live(&client, &sid).await;
    mock.push([
        calls(vec![
            call("loopback", "bash", &json!({ "command": format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo connected") })),
            call("amberd", "bash", &json!({ "command": format!("curl -sS -m 3 --unix-socket {} http://localhost/ -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/status\"}}'", daemon.socket.display()) })),
            call("outside", "bash", &json!({ "command": "touch ../outside_with_network" })),
        ]),
        MockTurn::text("Done."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "connect").await;
    let (status, output) = result_of(&turn, "loopback");
    assert_eq!(status, "ok", "{output}");
    assert!(accept.join().unwrap());
    let (status, output) = result_of(&turn, "amberd");
    assert_eq!(status, "error", "{output}");
    assert!(
        !output.contains("\"result\""),
        "amberd answered a sandboxed command: {output}"
    );
    assert!(output.contains("[sandbox:"), "{output}");
    let (status, output) = result_of(&turn, "outside");
    assert_eq!(status, "error", "{output}");
    assert!(
        !daemon
            .workspace
            .parent()
            .unwrap()
            .join("outside_with_network")
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn inside_the_workspace_builds_temp_files_and_git_keep_working() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}\n{CONFIG}"));
    let ws = daemon.workspace.clone();
    git(&ws, &["init", "-q"]);
    put(&ws.join("README.md"), "hello\n");
    git(&ws, &["add", "README.md"]);
    git(&ws, &["commit", "-qm", "first"]);
    let (client, sid) = yolo_session(&daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let commands = [
        (
            "make",
            "printf 'all:\\n\\tmkdir -p build && echo built > build/out.txt\\n' > Makefile && make -s && cat build/out.txt",
        ),
        (
            "npm_like",
            "mkdir -p node_modules/left-pad && echo 'module.exports = 1' > node_modules/left-pad/index.js && printf '{\"name\":\"x\"}' > package.json && cat node_modules/left-pad/index.js",
        ),
        (
            "tmpdir",
            "f=$(mktemp) && echo temp > \"$f\" && cat \"$f\" && case \"$f\" in \"$TMPDIR\"/*) echo in-tmpdir;; esac",
        ),
        (
            "python_tmp",
            "python3 -c \"import tempfile; f = tempfile.NamedTemporaryFile(delete=False); f.write(b'x'); print('py-tmp-ok')\"",
        ),
        (
            "git_commit",
            "echo more >> README.md && git add README.md && git -c user.name=a -c user.email=a@a commit -qm second && git log --oneline | wc -l",
        ),
    ];
    // The daemon's HOME is the test's own; rustup and cargo live in the real one.
    let real_home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let rustup = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{real_home}/.rustup"));
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{real_home}/.cargo"));
    let cargo = format!(
        "unset CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR; export RUSTUP_HOME={rustup} CARGO_HOME={cargo_home} PATH={cargo_home}/bin:$PATH; \
         mkdir -p crate && cd crate && cargo init -q --name demo --vcs none . && cargo build -q --offline && ls target/debug/demo"
    );
    // Without namespaces the top of the workspace and its `.git` take no new entries from a
    // command (docs/security.md, "Without namespaces"): builds work one level down, and git
    // cannot commit from inside the sandbox.
    let in_place = through_container();
    let below = |cmd: &str| {
        if in_place {
            format!("cd work && {cmd}")
        } else {
            cmd.to_owned()
        }
    };
    if in_place {
        std::fs::create_dir(ws.join("work")).unwrap();
    }
    let owned: Vec<(&str, String)> = commands
        .into_iter()
        .chain([("cargo", cargo.as_str())])
        .filter(|(id, _)| !(in_place && *id == "git_commit"))
        .map(|(id, cmd)| (id, below(cmd)))
        .collect();
    let commands: Vec<(&str, &str)> = owned.iter().map(|(id, c)| (*id, c.as_str())).collect();
    let refused_in_place = [
        ("top_file", "echo t > top.txt"),
        (
            "git_commit_in_place",
            "echo more >> README.md && git add README.md && git -c user.name=a -c user.email=a@a commit -qm second",
        ),
    ];
    let refused: &[(&str, &str)] = if in_place { &refused_in_place } else { &[] };
    mock.push([
        calls(
            commands
                .iter()
                .chain(refused)
                .map(|(id, cmd)| call(id, "bash", &json!({ "command": cmd, "timeout_ms": 240000 })))
                .collect(),
        ),
        MockTurn::text("Built."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "build").await;
    for (id, _) in &commands {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {output}");
        assert!(!output.contains("[sandbox:"), "{id}: {output}");
    }
    let at = |rel: &str| {
        if in_place {
            ws.join("work").join(rel)
        } else {
            ws.join(rel)
        }
    };
    assert_eq!(
        std::fs::read_to_string(at("build/out.txt")).unwrap(),
        "built\n"
    );
    assert!(result_of(&turn, "tmpdir").1.contains("in-tmpdir"));
    assert!(at("crate/target/debug/demo").exists());
    if in_place {
        for (id, _) in refused {
            let (_, output) = result_of(&turn, id);
            assert!(output.contains("[sandbox:"), "{id}: {output}");
        }
        assert!(!ws.join("top.txt").exists());
    } else {
        assert!(result_of(&turn, "git_commit").1.contains('2'));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_process_refused_by_the_sandbox_is_told_so_in_its_output() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}\n{CONFIG}"));
    let outside = daemon.dir.path().canonicalize().unwrap().join("outside");
    put(&outside.join("sentinel"), "original\n");
    let (client, sid) = yolo_session(&daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let write = format!("echo pwned > {}/sentinel; echo tried", outside.display());
    mock.push([
        calls(vec![
            call(
                "refused",
                "process",
                &json!({ "action": "start", "command": write }),
            ),
            call(
                "clean",
                "process",
                &json!({ "action": "start", "command": "echo all-good" }),
            ),
        ]),
        // Both have finished after a second.
        calls(vec![call("wait", "bash", &json!({ "command": "sleep 1" }))]),
        calls(vec![
            call(
                "out_refused",
                "process",
                &json!({ "action": "output", "id": "p1" }),
            ),
            call(
                "out_clean",
                "process",
                &json!({ "action": "output", "id": "p2" }),
            ),
        ]),
        calls(vec![
            call(
                "again",
                "process",
                &json!({ "action": "output", "id": "p1" }),
            ),
            call("list", "process", &json!({ "action": "list" })),
        ]),
        MockTurn::text("Read."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "start").await;
    let (status, output) = result_of(&turn, "out_refused");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("tried"), "the process ran: {output}");
    assert!(
        output.contains("[sandbox: writing ") && output.contains("/outside/sentinel was refused"),
        "{output}"
    );
    let (_, output) = result_of(&turn, "out_clean");
    assert!(output.contains("all-good"), "{output}");
    assert!(!output.contains("[sandbox:"), "{output}");
    // Said once: a read with nothing new does not repeat it; the list remembers it.
    let (_, output) = result_of(&turn, "again");
    assert!(!output.contains("[sandbox:"), "{output}");
    let (_, output) = result_of(&turn, "list");
    let lines: Vec<&str> = output.lines().collect();
    assert!(lines[0].contains("sandbox refused"), "{output}");
    assert!(!lines[1].contains("sandbox refused"), "{output}");
    assert_eq!(
        std::fs::read_to_string(outside.join("sentinel")).unwrap(),
        "original\n"
    );
}

/// On a kernel without Landlock's signal scope (ABI < 6, simulated by the test switch) the
/// seccomp filter keeps amberd out of reach of signals — its pid, its process group, and
/// every process at once (`kill -1`) — while a command may still signal itself; the rest of
/// the sandbox holds as before.
#[tokio::test(flavor = "multi_thread")]
async fn without_landlock_signal_scoping_amberd_still_cannot_be_signalled() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = amber_tests::TestDaemon::spawn_with(amber_tests::DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!("{FAST_RETRIES}\n{CONFIG}"),
        env: vec![("AMBER_TEST_SANDBOX_LANDLOCK_ABI".into(), "5".into())],
    });
    let pid = daemon.pid();
    // SAFETY: getpgid only reads the process group of a live child.
    let pgid = unsafe { libc::getpgid(libc::pid_t::try_from(pid).unwrap()) };
    assert!(pgid > 0);
    let outside = daemon.dir.path().canonicalize().unwrap().join("outside");
    put(&outside.join("sentinel"), "original\n");
    let (client, sid) = yolo_session(&daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    // SIGCONT: harmless should the filter fail.
    let attempts = [
        ("kill_pid", format!("kill -CONT {pid}")),
        ("kill_group", format!("kill -CONT -- -{pgid}")),
        ("kill_all", "kill -CONT -- -1".to_owned()),
        (
            "python_kill",
            format!("python3 -c \"import os, signal; os.kill({pid}, signal.SIGCONT)\""),
        ),
        (
            "write",
            format!("echo pwned > {}/sentinel", outside.display()),
        ),
    ];
    let attempt = |cmd: &str| format!("( {cmd} ); echo \"[attempt exited $?]\"");
    mock.push([
        calls(
            attempts
                .iter()
                .map(|(id, cmd)| call(id, "bash", &json!({ "command": attempt(cmd) })))
                .chain([call(
                    "self",
                    "bash",
                    &json!({ "command": "kill -CONT $$ && echo self-signalled" }),
                )])
                .collect(),
        ),
        MockTurn::text("Tried."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "signal").await;
    for (id, _) in &attempts {
        let (_, output) = result_of(&turn, id);
        assert!(
            output.contains("[attempt exited 1]") && output.contains("[sandbox:"),
            "{id}: {output}"
        );
    }
    let (status, output) = result_of(&turn, "self");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("self-signalled"), "{output}");
    assert_eq!(
        std::fs::read_to_string(outside.join("sentinel")).unwrap(),
        "original\n"
    );
    within("daemon/status", client.daemon_status())
        .await
        .unwrap();
}

/// The sandbox protects what exists without creating anything: a command in a workspace
/// that is neither a repository nor has `.amber/` leaves only what it made itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_command_leaves_nothing_in_the_workspace_it_did_not_make() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}\n{CONFIG}"));
    put(&daemon.workspace.join("README.md"), "hello\n");
    let before = snapshot(&daemon.workspace);
    let (client, sid) = yolo_session(&daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    mock.push([
        calls(vec![call(
            "touch",
            "bash",
            &json!({ "command": "cat README.md && echo made > made.txt" }),
        )]),
        MockTurn::text("Done."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "make one file").await;
    let (status, output) = result_of(&turn, "touch");
    assert_eq!(status, "ok", "{output}");
    let mut after: Vec<PathBuf> = snapshot(&daemon.workspace).into_keys().collect();
    let made = daemon.workspace.join("made.txt");
    assert!(after.contains(&made), "{after:?}");
    after.retain(|p| *p != made);
    let before: Vec<PathBuf> = before.into_keys().collect();
    assert_eq!(after, before, "the sandbox left something in the workspace");
}
