//! End-to-end: remote daemons (`--remote HOST`, `AMBER_REMOTE`, `AMBER_REMOTE_COMMAND`)
//! through a stand-in `ssh` on `PATH` that runs the remote command here (`amber-cli rpc`,
//! which finds the test daemon by `AMBER_SOCKET` / `XDG_RUNTIME_DIR`): a run with its
//! approval answered over the remote connection; `sessions` and `attach`; the stand-in
//! dropping the first connection mid-stream, after which the run reconnects and prints
//! every durable event exactly once and the reply whole; the host from the environment and
//! a custom command; a command that fails and a host that would be an option; and the TUI
//! attached over the remote connection, showing a streamed reply.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{done, run_bounded, spawn};
use amber_tests::{TestDaemon, bin_path};
use serde_json::{Value, json};

use crate::support::tmux;
use tmux::Tmux;

/// The stand-in `ssh`: skips its options, records the host and counts connections in its
/// directory, then runs the rest of its argv here. When `drop-after` holds N, the first
/// connection's output is cut after N lines (the command dies of the closed pipe on its
/// next line; a read loop, not `head`, whose buffered output would hold lines back): a
/// dropped SSH connection.
const STAND_IN: &str = r#"#!/bin/sh
dir="$(dirname "$0")"
echo "$0 $*" >> "$dir/argv"
while [ $# -gt 0 ]; do
  case "$1" in
    -o) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
echo "$1" >> "$dir/hosts"
shift
n=$(cat "$dir/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$dir/count"
if [ -f "$dir/drop-after" ] && [ "$n" = 1 ]; then
  limit=$(cat "$dir/drop-after")
  "$@" | {
    i=0
    while [ "$i" -lt "$limit" ] && IFS= read -r line; do
      printf '%s\n' "$line"
      i=$((i + 1))
    done
  }
  exit 255
fi
echo "$$" >> "$dir/pids"
exec "$@"
"#;

/// A directory with the stand-in as `ssh` (and as `other-ssh`, for a custom command).
struct StandIn {
    dir: tempfile::TempDir,
}

impl StandIn {
    fn new() -> StandIn {
        let dir = tempfile::Builder::new()
            .prefix("amber-ssh-")
            .tempdir()
            .unwrap();
        for name in ["ssh", "other-ssh"] {
            let path = dir.path().join(name);
            std::fs::write(&path, STAND_IN).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        StandIn { dir }
    }

    /// `PATH` with the stand-in first and the built binaries (`amber-cli`) next.
    fn path(&self) -> String {
        let bins = bin_path("amber-cli").parent().unwrap().to_owned();
        format!(
            "{}:{}:{}",
            self.dir.path().display(),
            bins.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    fn drop_first_after(&self, lines: usize) {
        std::fs::write(self.dir.path().join("drop-after"), lines.to_string()).unwrap();
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(file)).unwrap_or_default()
    }

    /// Kills the remote command of connection `n` (1-based; it runs as the stand-in's pid).
    fn kill_connection(&self, n: usize) {
        let pids = self.read("pids");
        let pid: i32 = pids
            .lines()
            .nth(n - 1)
            .unwrap_or_else(|| panic!("no connection {n}: {pids}"))
            .trim()
            .parse()
            .unwrap();
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is the stand-in's.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    fn connections(&self) -> usize {
        self.read("count").trim().parse().unwrap_or(0)
    }
}

/// `amber-cli ARGS` as a user on another machine would run it: the stand-in on `PATH`.
fn remote_cli(daemon: &TestDaemon, ssh: &StandIn, args: &[&str]) -> Command {
    let mut cmd = daemon.cli();
    cmd.env("PATH", ssh.path())
        .env_remove("AMBER_REMOTE")
        .env_remove("AMBER_REMOTE_COMMAND")
        .args(args);
    cmd
}

/// The JSON lines of `run --json` output.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn remote_run_answers_its_approval_through_the_stand_in_ssh() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::tool_call("bash", &json!({"command": "rm -rf build"})),
        MockTurn::text("Cleaned."),
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let ssh = StandIn::new();
    let cmd = remote_cli(
        &daemon,
        &ssh,
        &[
            "--remote",
            "box",
            "run",
            "--json",
            "--yes",
            "clean the build",
        ],
    );
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let lines = json_lines(&stdout);
    let resolved = lines
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .unwrap_or_else(|| panic!("no approval asked: {stdout}"));
    assert_eq!(resolved["by"], "client", "{resolved}");
    assert_eq!(resolved["decision"], "allow_once");
    assert!(!daemon.workspace.join("build").exists());
    assert_eq!(lines.last().unwrap()["text"], "Cleaned.");
    assert_eq!(ssh.read("hosts").trim(), "box");
    assert!(
        ssh.read("argv").contains(" -T box amber-cli rpc"),
        "{}",
        ssh.read("argv")
    );
}

#[test]
fn remote_sessions_and_attach_show_the_daemons_sessions() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Remote hello."), done()]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    let made = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string(), "title": "far away"}),
    );
    let id = made["sessionId"].as_str().unwrap().to_owned();
    let (code, stdout, stderr) =
        run_bounded(remote_cli(&daemon, &ssh, &["--remote", "box", "sessions"]));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&id[..8]) && stdout.contains("far away"),
        "{stdout}"
    );
    let (code, stdout, stderr) = run_bounded(remote_cli(
        &daemon,
        &ssh,
        &["--remote", "box", "daemon", "status"],
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("on the remote host box"), "{stdout}");
    assert!(
        stdout.contains(&format!("pid          {}", daemon.pid())),
        "{stdout}"
    );

    // attach follows the session live over the remote connection.
    let mut attach = remote_cli(&daemon, &ssh, &["--remote", "box", "attach", &id, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(attach.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["type"], "synced", "{first}");
    daemon.rpc_ok("session/prompt", json!({"sessionId": id, "text": "hi"}));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut reply = None;
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["type"] == "message_completed" {
            reply = Some(event["text"].clone());
            break;
        }
        assert!(Instant::now() < deadline, "no reply in time");
    }
    assert_eq!(reply, Some(json!("Remote hello.")));
    attach.kill().unwrap();
    attach.wait().unwrap();
}

/// A reply long and slow enough that the first connection drops in its middle.
fn slow_reply() -> (Vec<String>, String) {
    let chunks: Vec<String> = (1..=30).map(|i| format!("word{i} ")).collect();
    let text = chunks.concat();
    (chunks, text)
}

#[test]
fn a_dropped_ssh_connection_mid_stream_loses_and_repeats_no_event() {
    let (chunks, text) = slow_reply();
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 60,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    // initialize, session/new, subscribe, synced, prompt_queued, the prompt's answer,
    // turn_started, then a few deltas.
    ssh.drop_first_after(12);
    let cmd = remote_cli(
        &daemon,
        &ssh,
        &["--remote", "box", "run", "--json", "tell me"],
    );
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    assert_eq!(ssh.connections(), 2, "{stderr}");
    assert!(stderr.contains("reconnect"), "{stderr}");
    let lines = json_lines(&stdout);
    let seqs: Vec<u64> = lines.iter().filter_map(|e| e["seq"].as_u64()).collect();
    let expected: Vec<u64> = (1..=*seqs.last().unwrap()).collect();
    assert_eq!(seqs, expected, "durable events lost or repeated:\n{stdout}");
    let types: Vec<&str> = lines.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types.iter().filter(|t| **t == "turn_completed").count(),
        1,
        "{types:?}"
    );
    assert_eq!(
        lines.iter().filter(|e| e["type"] == "synced").count(),
        2,
        "one synced per subscription: {types:?}"
    );
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["text"], text);
}

#[test]
fn a_dropped_ssh_connection_mid_stream_prints_the_reply_whole_and_once() {
    let (chunks, text) = slow_reply();
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 60,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    ssh.drop_first_after(12);
    let cmd = remote_cli(&daemon, &ssh, &["--remote", "box", "run", "tell me"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    assert_eq!(ssh.connections(), 2, "{stderr}");
    assert_eq!(stdout.trim_end(), text.trim_end(), "{stderr}");
}

#[test]
fn amber_remote_and_a_custom_remote_command_come_from_the_environment() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string(), "title": "env made"}),
    );
    let mut cmd = remote_cli(&daemon, &ssh, &["sessions", "--json"]);
    cmd.env("AMBER_REMOTE", "envhost").env(
        "AMBER_REMOTE_COMMAND",
        "other-ssh -o 'ServerAliveInterval 5' user@{host} amber-cli rpc",
    );
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let sessions: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(sessions[0]["title"], "env made", "{sessions}");
    let argv = ssh.read("argv");
    assert!(
        argv.contains("other-ssh -o ServerAliveInterval 5 user@envhost amber-cli rpc"),
        "{argv}"
    );
    assert_eq!(ssh.read("hosts").trim(), "user@envhost");
}

#[test]
fn a_failing_remote_command_and_an_option_like_host_are_clear_errors() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    let mut cmd = remote_cli(&daemon, &ssh, &["--remote", "box", "sessions"]);
    cmd.env(
        "AMBER_REMOTE_COMMAND",
        "sh -c 'echo ssh: connect to host {host}: refused >&2; exit 255'",
    );
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("remote daemon") && stderr.contains("connect to host box: refused"),
        "{stderr}"
    );
    let cmd = remote_cli(&daemon, &ssh, &["--remote=-oProxyCommand=x", "sessions"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("would be read as an option"), "{stderr}");
    assert_eq!(ssh.connections(), 0);
    // What acts on this machine's daemon refuses --remote.
    let (code, _, stderr) = run_bounded(remote_cli(
        &daemon,
        &ssh,
        &["--remote", "box", "daemon", "stop"],
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not take --remote"), "{stderr}");
}

/// Starts `amber --remote box ARGS` in tmux with the stand-in on `PATH`.
fn start_remote_tui(tmux: &Tmux, daemon: &TestDaemon, ssh: &StandIn, args: &[&str]) {
    let home = daemon.dir.path().join("home");
    // Set in the command itself: a shell may set PATH again when it starts.
    let mut shell = format!(
        "export PATH='{}' AMBER_SOCKET='{}'; '{}' --remote box",
        ssh.path(),
        daemon.socket.display(),
        bin_path("amber").display()
    );
    for a in args {
        shell.push_str(&format!(" '{a}'"));
    }
    shell.push_str("; echo \"[amber exited $?]\"; sleep 600");
    let env = |k: &str, v: &Path| format!("{k}={}", v.display());
    let out = tmux
        .cmd()
        .args(["new-session", "-d", "-s", "remote", "-x", "80", "-y", "24"])
        .args(["-e", &env("HOME", &home)])
        .args(["-e", "RUST_BACKTRACE=0"])
        .args(["-e", &env("XDG_CONFIG_HOME", &home.join(".config"))])
        .args(["-e", &env("XDG_STATE_HOME", &home.join(".local/state"))])
        .args(["-c", &daemon.workspace.display().to_string()])
        .arg(shell)
        .env("TERM", "xterm-256color")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tmux new-session: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_tui_attaches_over_a_remote_connection_and_shows_a_streamed_reply() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks: vec![
                "Streaming ".into(),
                "from the ".into(),
                "remote daemon.".into(),
            ],
            interval_ms: 100,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    let made = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    let id = made["sessionId"].as_str().unwrap().to_owned();
    let tmux = Tmux::new("remote");
    start_remote_tui(&tmux, &daemon, &ssh, &["--session", &id]);
    tmux.wait("remote", "the attached session", |s| {
        s.contains("Type a prompt")
    });
    tmux.type_text("remote", "say something");
    tmux.keys("remote", &["Enter"]);
    let screen = tmux.wait("remote", "the streamed reply", |s| {
        s.contains("Streaming from the remote daemon.")
    });
    assert!(screen.contains("› say something"), "{screen}");
    assert_eq!(ssh.read("hosts").trim(), "box");

    // A `!` command would run on this machine, not the session's: refused, in words.
    let marker = daemon.workspace.join("bang-ran-here");
    tmux.type_text("remote", &format!("!touch {}", marker.display()));
    tmux.keys("remote", &["Enter"]);
    tmux.wait("remote", "the refusal", |s| s.contains("on another host"));
    assert!(!marker.exists(), "the ! command ran locally");
}

#[test]
fn the_tui_reconnects_after_the_ssh_connection_drops_mid_reply() {
    let chunks: Vec<String> = (1..=12).map(|i| format!("part{i} ")).collect();
    let whole = chunks.concat();
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 150,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let ssh = StandIn::new();
    let made = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    let id = made["sessionId"].as_str().unwrap().to_owned();
    let tmux = Tmux::new("remote-drop");
    start_remote_tui(&tmux, &daemon, &ssh, &["--session", &id]);
    tmux.wait("remote", "the attached session", |s| {
        s.contains("Type a prompt")
    });
    tmux.type_text("remote", "tell me");
    tmux.keys("remote", &["Enter"]);
    tmux.wait("remote", "the reply streaming", |s| s.contains("part2"));
    ssh.kill_connection(1);
    let screen = tmux.wait("remote", "the whole reply after the reconnection", |s| {
        s.contains(whole.trim_end()) && !s.contains("reconnecting")
    });
    assert_eq!(screen.matches("part1 ").count(), 1, "{screen}");
    assert!(ssh.connections() >= 2, "{screen}");
    assert!(!screen.contains("amber exited"), "{screen}");
}
