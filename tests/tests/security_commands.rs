//! End-to-end: commands that would run a program while looking read-only or benign, and
//! commands that read outside the workspace or a secret location, through the real daemon.
//!
//! - read mode, no approver: `git grep -O'touch …'`, `rg --hostname-bin PROG` (both
//!   spellings), `git log --ext-diff`, `cat OUTSIDE/secret` are denied and nothing runs; the
//!   everyday read-only commands still run; a `read` rule naming the outside directory lets
//!   a read there through;
//! - write mode: `tar -xf - --to-command=…` and `--checkpoint-action=exec=…` ask (and,
//!   with no approver, are denied: no sentinel), an outside read asks, never grantable;
//! - yolo: `cat ~/.ssh/…`, `cp ~/.ssh/… x`, `cat .env` and the `read` tool on `.env` ask,
//!   while an ordinary outside read runs.
//!
//! Sentinels live in temp dirs outside the workspace; the daemon's HOME is its own.

use std::path::Path;
use std::process::Command;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, new_session, of_type, prompt_turn, spawn, spawn_config,
    stop_reason,
};
use amber_tests::tool_calls::{asked, call, calls, put, result_of, sh};
use serde_json::{Value, json};

/// A git repository in `ws` with one commit of `notes.txt` (holding `hello`).
fn repo(ws: &Path) {
    put(&ws.join("notes.txt"), "hello\nworld\n");
    for args in [
        &["init", "-q"][..],
        &["add", "notes.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", ws)
            .status()
            .expect("run git");
        assert!(status.success(), "git {args:?}");
    }
    let status = Command::new("tar")
        .args(["-cf", "a.tar", "notes.txt"])
        .current_dir(ws)
        .status()
        .expect("run tar");
    assert!(status.success());
}

/// One turn of these calls in a new session of `mode` on a client that is not an approver.
async fn run_turn(
    mock: &MockLlm,
    daemon: &amber_tests::TestDaemon,
    mode: Mode,
    list: Vec<amber_mock_llm::MockToolCall>,
) -> Vec<Value> {
    mock.push([calls(list), MockTurn::text("Done."), done()]);
    let client = connect(daemon).await;
    let sid = new_session(&client, daemon, Some(mode)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    turn
}

fn assert_denied(turn: &[Value], id: &str, secret: &str) {
    let (status, output) = result_of(turn, id);
    assert_eq!(status, "denied", "{id}: {output}");
    assert!(
        !output.contains(secret),
        "{id} leaked the content: {output}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn read_mode_denies_program_running_options_and_outside_reads() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().canonicalize().unwrap();
    let allowed = out.join("allowed");
    put(&out.join("secret.txt"), "TOP-SECRET-OUTSIDE");
    put(&allowed.join("ok.txt"), "ALLOWED-CONTENT");
    // A program that leaves a sentinel when anything runs it.
    let prog = out.join("prog.sh");
    put(
        &prog,
        &format!("#!/bin/sh\ntouch {}/prog-ran\necho host\n", out.display()),
    );
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let rules = format!(
        "[[rules]]\ntool = \"read\"\npattern = \"{}/**\"\ndecision = \"allow\"\n",
        allowed.display()
    );
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}{rules}"));
    let ws = daemon.workspace.clone();
    repo(&ws);
    let o = out.display();
    let denied = [
        (
            "grep_pager",
            format!("git grep -O'touch {o}/grep-ran' hello"),
        ),
        (
            "grep_pager_long",
            format!("git grep --open-files-in-pager='touch {o}/grep2-ran' hello"),
        ),
        (
            "rg_host",
            format!(
                "rg --hostname-bin {} --hyperlink-format default hello",
                prog.display()
            ),
        ),
        (
            "rg_host_eq",
            format!(
                "rg --hostname-bin={} --hyperlink-format default hello",
                prog.display()
            ),
        ),
        ("rg_pre", format!("rg --pre {} hello", prog.display())),
        (
            "git_c",
            format!("git -c core.pager='touch {o}/c-ran' -p log"),
        ),
        ("cat_outside", format!("cat {o}/secret.txt")),
        ("grep_outside", format!("grep -r TOP-SECRET {o}")),
        ("redirect_outside", format!("wc -c < {o}/secret.txt")),
        ("xargs_unknown", format!("echo {o}/secret.txt | xargs cat")),
        ("git_dir_outside", format!("git -C {o} status")),
    ];
    let ordinary = [
        ("status", "git status"),
        ("log", "git log --oneline -n 5"),
        ("diff", "git diff HEAD -- notes.txt"),
        ("ls", "ls -la"),
        ("grep", "grep -rn hello ."),
        ("find", "find . -name '*.txt'"),
        ("sed", "sed -n 1,2p notes.txt"),
        ("cat", "cat notes.txt notes.txt"),
        ("head", "head -n 1 notes.txt"),
        ("wc", "wc -l notes.txt"),
        ("sort", "sort -u notes.txt"),
        ("tar_list", "tar -tf a.tar"),
    ];
    let mut list: Vec<_> = denied.iter().map(|(id, c)| sh(id, c)).collect();
    list.extend(ordinary.iter().map(|(id, c)| sh(id, c)));
    list.push(sh(
        "allowed_dir",
        &format!("cat {}/ok.txt", allowed.display()),
    ));
    let turn = run_turn(&mock, &daemon, Mode::Read, list).await;

    for (id, command) in &denied {
        assert_denied(&turn, id, "TOP-SECRET-OUTSIDE");
        assert!(
            !asked(&turn, id),
            "{command}: read mode asked instead of denying"
        );
    }
    for sentinel in ["grep-ran", "grep2-ran", "prog-ran", "c-ran"] {
        assert!(!out.join(sentinel).exists(), "{sentinel}: a program ran");
    }
    for (id, command) in &ordinary {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{command}: {output}");
    }
    let (status, output) = result_of(&turn, "allowed_dir");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("ALLOWED-CONTENT"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn write_mode_asks_for_program_running_tar_and_outside_reads() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().canonicalize().unwrap();
    put(&out.join("secret.txt"), "TOP-SECRET-OUTSIDE");
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    repo(&ws);
    let o = out.display();
    let asks = [
        (
            "tar_command",
            format!("tar -xf - --to-command='touch {o}/tar-ran' < a.tar"),
        ),
        (
            "tar_checkpoint",
            format!(
                "tar -cf b.tar --checkpoint=1 --checkpoint-action=exec='touch {o}/cp-ran' notes.txt"
            ),
        ),
        (
            "tar_compress",
            format!("tar -I 'touch {o}/gz-ran' -cf c.tar notes.txt"),
        ),
        (
            "sort_compress",
            format!("sort --compress-program='touch {o}/sort-ran' notes.txt"),
        ),
        ("cat_outside", format!("cat {o}/secret.txt")),
    ];
    let mut list: Vec<_> = asks.iter().map(|(id, c)| sh(id, c)).collect();
    if amber_tests::daemon::through_container() {
        // Without namespaces the top of the workspace takes no new entry from a command
        // (docs/security.md, "Without namespaces"): the directory is there already.
        std::fs::create_dir(ws.join("x")).unwrap();
    }
    list.push(sh("extract", "mkdir -p x && tar -xf a.tar -C x"));
    let turn = run_turn(&mock, &daemon, Mode::Write, list).await;

    let requested = of_type(&turn, "approval_requested");
    for (id, command) in &asks {
        assert!(asked(&turn, id), "{command} ran without asking: {turn:#?}");
        assert_denied(&turn, id, "TOP-SECRET-OUTSIDE");
    }
    let outside_ask = requested
        .iter()
        .find(|e| e["callId"] == "cat_outside")
        .unwrap();
    assert_eq!(outside_ask["scope"], "this call only", "{outside_ask}");
    for sentinel in ["tar-ran", "cp-ran", "gz-ran", "sort-ran"] {
        assert!(!out.join(sentinel).exists(), "{sentinel}: a program ran");
    }
    assert_eq!(result_of(&turn, "extract").0, "ok");
    assert!(!asked(&turn, "extract"));
    assert!(ws.join("x/notes.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn secret_locations_ask_even_in_yolo() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().canonicalize().unwrap();
    put(&out.join("plain.txt"), "PLAIN-OUTSIDE");
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    let home = daemon.dir.path().canonicalize().unwrap().join("home");
    put(&home.join(".ssh/id_test"), "SSH-PRIVATE-KEY");
    put(&home.join(".aws/credentials"), "AWS-SECRET-KEY");
    put(&ws.join(".env"), "API_TOKEN=ENV-SECRET");
    put(&ws.join("notes.txt"), "hello");
    let asks = [
        ("ssh", "cat ~/.ssh/id_test".to_owned()),
        (
            "ssh_home_var",
            "head -c 100 \"$HOME/.ssh/id_test\"".to_owned(),
        ),
        ("aws", format!("cat {}/.aws/credentials", home.display())),
        ("grep_home", "grep -r SECRET ~".to_owned()),
        ("env_cat", "cat .env".to_owned()),
        ("ssh_copy", "cp ~/.ssh/id_test stolen.txt".to_owned()),
    ];
    let mut list: Vec<_> = asks.iter().map(|(id, c)| sh(id, c)).collect();
    list.push(call("env_read", "read", &json!({ "path": ".env" })));
    list.push(sh(
        "plain_outside",
        &format!("cat {}/plain.txt", out.display()),
    ));
    list.push(sh("inside", "cat notes.txt"));
    let turn = run_turn(&mock, &daemon, Mode::Yolo, list).await;

    for (id, command) in &asks {
        assert!(
            asked(&turn, id),
            "{command} ran in yolo without asking: {turn:#?}"
        );
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "denied", "{command}: {output}");
        for secret in ["SSH-PRIVATE-KEY", "AWS-SECRET-KEY", "ENV-SECRET"] {
            assert!(!output.contains(secret), "{command} leaked: {output}");
        }
    }
    assert!(
        !ws.join("stolen.txt").exists(),
        "the key was copied into the workspace"
    );
    assert!(asked(&turn, "env_read"), "read .env did not ask");
    assert_denied(&turn, "env_read", "ENV-SECRET");
    let (status, output) = result_of(&turn, "plain_outside");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("PLAIN-OUTSIDE"));
    assert_eq!(result_of(&turn, "inside").0, "ok");
}
