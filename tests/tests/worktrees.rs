//! End-to-end: a worktree per session (`session/new {worktree}`, `amber-cli run
//! --worktree`) in a real git repository — the model's writes land in the session's
//! worktree, not the user's checkout; its branch exists; two sessions edit the same file
//! name apart; outside a repository the request is -32004; `sessions` shows the branch;
//! the worktree survives a daemon restart; `amber-cli rm` keeps it by default off a
//! terminal, `--remove-worktree` removes a clean one and refuses (exit 1) a dirty one.

use std::path::{Path, PathBuf};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{done, git, run_bounded, spawn};
use serde_json::{Value, json};

/// The daemon's workspace as a git repository with one commit: `sub/a.txt`.
fn repo(daemon: &TestDaemon) -> PathBuf {
    let repo = daemon.workspace.clone();
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::write(repo.join("sub/a.txt"), "original\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// `amber-cli ARGS` (no autostart) in `dir`: exit code, stdout, stderr.
fn cli_in(daemon: &TestDaemon, dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = daemon.cli();
    cmd.current_dir(dir).arg("--no-autostart").args(args);
    run_bounded(cmd)
}

/// The result line of `amber-cli run --json`.
fn result_line(stdout: &str, stderr: &str) -> Value {
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output: {stderr}"));
    serde_json::from_str(last).unwrap()
}

fn session(daemon: &TestDaemon, id: &str) -> Value {
    daemon.rpc_ok("session/get", json!({"sessionId": id}))["session"].clone()
}

fn branch_exists(repo: &Path, branch: &str) -> bool {
    let out = std::process::Command::new("git")
        .args(["branch", "--list", branch])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains(branch)
}

/// A new session with a worktree over plain HTTP.
fn new_worktree_session(daemon: &TestDaemon, cwd: &Path, worktree: Value) -> Value {
    daemon.rpc(
        "session/new",
        json!({"cwd": cwd.display().to_string(), "worktree": worktree}),
    )
}

#[test]
fn run_worktree_writes_in_the_worktree_and_not_in_the_checkout() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::tool_call(
            "write",
            &json!({"path": "a.txt", "content": "from amber\n"}),
        ),
        MockTurn::text("Wrote it."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let repo = repo(&daemon);
    let (code, stdout, stderr) = cli_in(
        &daemon,
        &repo.join("sub"),
        &["run", "--json", "--yes", "--worktree", "rewrite a.txt"],
    );
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let result = result_line(&stdout, &stderr);
    let id = result["sessionId"].as_str().unwrap().to_owned();
    let info = session(&daemon, &id);
    let tree = &info["worktree"];
    let path = PathBuf::from(tree["path"].as_str().unwrap());
    let branch = tree["branch"].as_str().unwrap();
    assert_eq!(branch, format!("amber/{}", &id[..8]), "{info}");
    assert!(path.starts_with(daemon.dir.path().canonicalize().unwrap().join("data")));
    // The cwd follows the requested one into the worktree.
    assert_eq!(info["cwd"], path.join("sub").display().to_string());
    assert_eq!(
        std::fs::read_to_string(path.join("sub/a.txt")).unwrap(),
        "from amber\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("sub/a.txt")).unwrap(),
        "original\n",
        "the user's checkout was edited"
    );
    assert!(branch_exists(&repo, branch));

    // `sessions` names the branch, `--json` has the worktree.
    let (code, table, stderr) = cli_in(&daemon, &repo, &["sessions"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(table.lines().next().unwrap().contains("BRANCH"), "{table}");
    assert!(table.contains(branch), "{table}");
    let (_, listed, _) = cli_in(&daemon, &repo, &["sessions", "--json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["worktree"]["branch"], branch, "{listed}");
}

#[test]
fn a_sandboxed_command_writes_in_the_worktree() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::tool_call(
            "bash",
            &json!({"command": "printf 'by a command\\n' > made.txt"}),
        ),
        MockTurn::text("Made it."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let repo = repo(&daemon);
    let (code, stdout, stderr) = cli_in(
        &daemon,
        &repo,
        &[
            "run",
            "--json",
            "--worktree",
            "--sandbox",
            "workspace-write",
            "make a file",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let completed: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_call_completed")
        .collect();
    assert_eq!(completed[0]["status"], "ok", "{stdout}");
    let id = result_line(&stdout, &stderr)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let info = session(&daemon, &id);
    assert_eq!(info["sandbox"]["mode"], "workspace-write", "{info}");
    let cwd = PathBuf::from(info["cwd"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(cwd.join("made.txt")).unwrap(),
        "by a command\n"
    );
    assert!(!repo.join("made.txt").exists());
}

#[test]
fn two_sessions_with_worktrees_edit_the_same_file_apart() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let repo = repo(&daemon);
    let one = new_worktree_session(&daemon, &repo, json!(true))["result"].clone();
    let two =
        new_worktree_session(&daemon, &repo, json!({"branch": "feature/two"}))["result"].clone();
    assert_eq!(two["worktree"]["branch"], "feature/two");
    let (p1, p2) = (
        PathBuf::from(one["cwd"].as_str().unwrap()),
        PathBuf::from(two["cwd"].as_str().unwrap()),
    );
    assert_ne!(p1, p2);
    // Each session's edits (its tools write in its cwd) stay in its own tree.
    std::fs::write(p1.join("sub/a.txt"), "one\n").unwrap();
    std::fs::write(p2.join("sub/a.txt"), "two\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(p1.join("sub/a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(p2.join("sub/a.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("sub/a.txt")).unwrap(),
        "original\n"
    );
    // A branch that exists is refused, and nothing is left behind.
    let again = new_worktree_session(&daemon, &repo, json!({"branch": "feature/two"}));
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{again}"
    );
    let worktrees = std::fs::read_dir(daemon.dir.path().join("data/worktrees"))
        .unwrap()
        .count();
    assert_eq!(worktrees, 2);
}

#[test]
fn a_worktree_outside_a_git_repository_is_an_invalid_workspace() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let answer = new_worktree_session(&daemon, &daemon.workspace, json!(true));
    assert_eq!(answer["error"]["code"], -32004, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not inside a git repository") && message.contains("worktree"),
        "{message}"
    );
    // No session was made.
    let list = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]));
    // `worktree: false` is no worktree at all.
    let plain = new_worktree_session(&daemon, &daemon.workspace, json!(false));
    assert!(plain["result"]["worktree"].is_null(), "{plain}");
}

#[test]
fn the_worktree_survives_a_daemon_restart() {
    let mock = MockLlm::start_blocking(vec![]);
    let mut daemon = spawn(&mock);
    let repo = repo(&daemon);
    let made = new_worktree_session(&daemon, &repo, json!(true))["result"].clone();
    let id = made["sessionId"].as_str().unwrap().to_owned();
    daemon.restart();
    let info = session(&daemon, &id);
    assert_eq!(info["worktree"], made["worktree"], "{info}");
    assert_eq!(info["cwd"], made["cwd"]);
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["worktree"], made["worktree"]);
}

#[test]
fn rm_keeps_the_worktree_off_a_terminal_and_removes_a_clean_one_when_asked() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let repo = repo(&daemon);
    // Neither flag, no terminal: kept, and where it is is printed.
    let kept = new_worktree_session(&daemon, &repo, json!(true))["result"].clone();
    let kept_path = kept["worktree"]["path"].as_str().unwrap().to_owned();
    let id = kept["sessionId"].as_str().unwrap();
    let (code, _, stderr) = cli_in(&daemon, &repo, &["rm", id]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&kept_path), "{stderr}");
    assert!(Path::new(&kept_path).is_dir());
    let gone = daemon.rpc("session/get", json!({"sessionId": id}));
    assert_eq!(gone["error"]["code"], -32001);

    // --remove-worktree on a clean one: removed; the branch stays.
    let clean = new_worktree_session(&daemon, &repo, json!(true))["result"].clone();
    let clean_path = clean["worktree"]["path"].as_str().unwrap().to_owned();
    let branch = clean["worktree"]["branch"].as_str().unwrap().to_owned();
    let id = clean["sessionId"].as_str().unwrap();
    let (code, _, stderr) = cli_in(&daemon, &repo, &["delete", id, "--remove-worktree"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!Path::new(&clean_path).exists(), "{stderr}");
    assert!(branch_exists(&repo, &branch));
}

#[test]
fn rm_remove_worktree_refuses_a_dirty_one_and_deletes_nothing() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let repo = repo(&daemon);
    let dirty = new_worktree_session(&daemon, &repo, json!(true))["result"].clone();
    let path = PathBuf::from(dirty["worktree"]["path"].as_str().unwrap());
    let id = dirty["sessionId"].as_str().unwrap();
    std::fs::write(path.join("sub/a.txt"), "unsaved work\n").unwrap();
    std::fs::write(path.join("new.txt"), "untracked\n").unwrap();
    let (code, _, stderr) = cli_in(&daemon, &repo, &["rm", id, "--remove-worktree"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("uncommitted changes")
            && stderr.contains("sub/a.txt")
            && stderr.contains("new.txt"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("sub/a.txt")).unwrap(),
        "unsaved work\n"
    );
    // The refusal left the session as it was.
    session(&daemon, id);
    // Over the protocol, `force` removes it.
    let forced = daemon.rpc(
        "session/delete",
        json!({"sessionId": id, "removeWorktree": true, "force": true}),
    );
    assert!(forced["error"].is_null(), "{forced}");
    assert!(!path.exists());
}

/// `amber-cli --no-autostart ARGS` on a terminal (a pty from script(1)) whose keyboard
/// types `answers`: exit code and everything the terminal showed.
fn rm_on_a_terminal(daemon: &TestDaemon, args: &[&str], answers: &str) -> (Option<i32>, String) {
    use std::io::{Read, Write};
    let quote = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    let mut line = vec![
        quote(&amber_tests::bin_path("amber-cli").display().to_string()),
        "--no-autostart".to_owned(),
    ];
    line.extend(args.iter().map(|a| quote(a)));
    let cli = daemon.cli();
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &line.join(" "), "/dev/null"]);
    for (key, value) in cli.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let mut child = cmd
        .current_dir(&daemon.workspace)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(answers.as_bytes()).unwrap();
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "amber-cli {args:?} still runs"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(stdin);
    (status.code(), reader.join().unwrap())
}

#[test]
fn rm_on_a_terminal_removes_a_dirty_worktree_only_after_a_second_yes() {
    let mock = MockLlm::start_blocking(vec![]);
    let daemon = spawn(&mock);
    let repo = repo(&daemon);
    let made = new_worktree_session(&daemon, &repo, json!(true))["result"].clone();
    let path = PathBuf::from(made["worktree"]["path"].as_str().unwrap());
    let id = made["sessionId"].as_str().unwrap();
    std::fs::write(path.join("sub/a.txt"), "unsaved work\n").unwrap();

    // Yes to removing it, no to losing the changes: nothing is deleted.
    let (code, shown) = rm_on_a_terminal(&daemon, &["rm", id], "y\nn\n");
    assert_eq!(code, Some(1), "{shown}");
    assert!(shown.contains("Remove the worktree?"), "{shown}");
    assert!(
        shown.contains("uncommitted changes") && shown.contains("sub/a.txt"),
        "{shown}"
    );
    assert!(shown.contains("nothing was deleted"), "{shown}");
    assert!(path.join("sub/a.txt").is_file());
    session(&daemon, id);

    // Yes twice: removed, the session too.
    let (code, shown) = rm_on_a_terminal(&daemon, &["rm", id, "--remove-worktree"], "y\n");
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("lose those changes"), "{shown}");
    assert!(!path.exists(), "{shown}");
    let gone = daemon.rpc("session/get", json!({"sessionId": id}));
    assert_eq!(gone["error"]["code"], -32001);
}
