//! End-to-end: amberd's own git runs nothing a repository configures, and a model cannot
//! plant what git runs. The workspace is a repository as a tarball or a copied directory
//! would bring it — its `.git/config` names an fsmonitor hook, filter drivers, a signing
//! program and a pager, its `.git/hooks` are executable — each of which, if run, writes the
//! environment it saw into a sentinel file beside the workspace. amberd's environment block
//! (at a session's first prompt, read mode too) and worktree creation and removal run none
//! of them. In yolo, with nothing asking, a model's commands try to rewrite what git
//! reads (config, hooks, a worktree's `.git` file, `info/`), by every route; afterwards
//! neither amberd's git nor the user's own `git status` runs anything.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Mode, SessionNewParams};
use amber_tests::TestDaemon;
use amber_tests::steps::{Events, connect, done, git, messages, prompt_turn, spawn, within};
use amber_tests::tool_calls::{call, calls, result_of};
use serde_json::json;

/// The sentinel directory beside the workspace; empty unless something ran.
fn sentinels(daemon: &TestDaemon) -> PathBuf {
    let dir = daemon.dir.path().canonicalize().unwrap().join("ran");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ran_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A script that records that it ran, and the environment it saw, as `SENTINELS/NAME`.
fn payload(sentinels: &Path, name: &str) -> String {
    format!("sh -c 'env > {}/{name}; cat'", sentinels.display())
}

/// Makes the daemon's workspace a hostile repository; returns the sentinel directory.
fn hostile_repository(daemon: &TestDaemon) -> PathBuf {
    let ran = sentinels(daemon);
    let ws = &daemon.workspace;
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/a.txt"), "original\n").unwrap();
    std::fs::write(ws.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
    git(ws, &["init", "-q", "-b", "main"]);
    git(ws, &["add", "."]);
    git(ws, &["commit", "-q", "-m", "init"]);
    for (key, value) in [
        ("core.fsmonitor", payload(&ran, "fsmonitor")),
        ("filter.evil.clean", payload(&ran, "clean")),
        ("filter.evil.smudge", payload(&ran, "smudge")),
        ("filter.evil.required", "true".to_owned()),
        ("diff.evil.textconv", payload(&ran, "textconv")),
        ("core.pager", payload(&ran, "pager")),
        ("log.showSignature", "true".to_owned()),
        ("gpg.program", payload(&ran, "gpg")),
    ] {
        git(ws, &["config", key, &value]);
    }
    for hook in [
        "post-checkout",
        "pre-commit",
        "reference-transaction",
        "post-index-change",
    ] {
        let path = ws.join(".git/hooks").join(hook);
        std::fs::write(
            &path,
            format!("#!/bin/sh\nenv > {}/{hook}\n", ran.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A changed tracked file: `git status` would run the clean filter on it.
    std::fs::write(ws.join("sub/a.txt"), "changed\n").unwrap();
    ran
}

/// The user's own `git status` in `ws` succeeds and runs nothing planted.
fn users_git_runs_nothing(ws: &Path, ran: &Path) {
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    assert!(
        ran_in(ran).is_empty(),
        "a planted program ran: {:?}",
        ran_in(ran)
    );
}

async fn session_in(daemon: &TestDaemon, client: &amber_client::Client, mode: Mode) -> String {
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(mode),
        ..SessionNewParams::default()
    };
    within("session/new", client.session_new(&params))
        .await
        .unwrap()
        .session_id
}

fn head_of(request: &serde_json::Value) -> String {
    messages(request)[0]["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn amberds_own_git_runs_nothing_the_repository_configures() {
    let mock = MockLlm::start(vec![MockTurn::text("one"), done()]).await;
    let daemon = spawn(&mock);
    let ran = hostile_repository(&daemon);
    let client = connect(&daemon).await;
    let sid = session_in(&daemon, &client, Mode::Read).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "hello").await;
    let head = head_of(&mock.requests()[0]);
    // The facts still come from git, which ran sandboxed with everything pinned off.
    assert!(head.contains("- Git branch: main"), "{head}");
    assert!(head.contains("- Changed files (git status): 1"), "{head}");
    assert!(head.contains("- Last commit: init"), "{head}");
    assert!(
        ran_in(&ran).is_empty(),
        "amberd's git ran: {:?}",
        ran_in(&ran)
    );

    // A session worktree of the same repository: made and removed, running nothing.
    let made = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string(), "worktree": {"branch": "amber/w"}}),
    );
    let tree = PathBuf::from(made["worktree"]["path"].as_str().unwrap());
    assert!(tree.join("sub/a.txt").is_file(), "{made}");
    let id = made["sessionId"].as_str().unwrap();
    daemon.rpc_ok(
        "session/delete",
        json!({"sessionId": id, "removeWorktree": true}),
    );
    assert!(!tree.exists(), "the clean worktree was not removed");
    assert!(
        ran_in(&ran).is_empty(),
        "worktree add/remove ran: {:?}",
        ran_in(&ran)
    );
}

/// Attempts to change what git reads to decide what it runs. `{EVIL}`: a git dir of the
/// command's making whose config names the fsmonitor payload.
const PLANTS: &[(&str, &str)] = &[
    (
        "config_write",
        "echo '[core] fsmonitor = {PAYLOAD}' >> .git/config",
    ),
    ("git_config", "git config core.fsmonitor '{PAYLOAD}'"),
    ("config_replace", "cp {EVIL}/config .git/config"),
    (
        "config_rm",
        "rm -f .git/config && cp {EVIL}/config .git/config",
    ),
    ("config_mv", "mv .git/config .git/config.old"),
    (
        "hooks_write",
        "printf '#!/bin/sh\\n{PAYLOAD}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    ),
    ("hooks_mv", "mv .git/hooks .git/hooks.old"),
    ("copy_git_dir", "cp -r {EVIL}/. .git/"),
    ("tar_over_git", "tar -C {EVIL} -cf - . | tar -C .git -xf -"),
    ("git_init_template", "git init --template={EVIL} ."),
    (
        "info_attributes",
        "echo '* filter=evil' > .git/info/attributes",
    ),
    ("git_dir_swap", "mv .git .git.old && cp -r {EVIL} .git"),
    ("commondir", "echo {EVIL} > .git/commondir"),
];

#[tokio::test(flavor = "multi_thread")]
async fn a_model_cannot_plant_what_git_runs() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let ran = hostile_repository(&daemon);
    // Start from a clean config: the plants must add the programs themselves.
    let ws = daemon.workspace.clone();
    for key in [
        "core.fsmonitor",
        "filter.evil.clean",
        "filter.evil.smudge",
        "core.pager",
        "gpg.program",
        "diff.evil.textconv",
    ] {
        git(&ws, &["config", "--unset", key]);
    }
    git(&ws, &["config", "--unset", "filter.evil.required"]);
    git(&ws, &["config", "--unset", "log.showSignature"]);
    for hook in std::fs::read_dir(ws.join(".git/hooks")).unwrap().flatten() {
        std::fs::remove_file(hook.path()).unwrap();
    }
    let evil = daemon.dir.path().canonicalize().unwrap().join("evil-git");
    let payload = format!("env > {}/planted", ran.display());
    std::fs::create_dir_all(evil.join("hooks")).unwrap();
    std::fs::write(
        evil.join("config"),
        format!("[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {payload}\n"),
    )
    .unwrap();
    std::fs::write(evil.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let config_before = std::fs::read(ws.join(".git/config")).unwrap();

    let client = connect(&daemon).await;
    let sid = session_in(&daemon, &client, Mode::Yolo).await;
    let mut events = Events::live(&client, &sid).await;
    let fill = |cmd: &str| {
        cmd.replace("{EVIL}", &evil.display().to_string())
            .replace("{PAYLOAD}", &payload)
    };
    mock.push(vec![
        calls(
            PLANTS
                .iter()
                .map(|(id, cmd)| {
                    let command = format!("( {} ); echo \"[attempt exited $?]\"", fill(cmd));
                    call(id, "bash", &json!({ "command": command }))
                })
                .collect(),
        ),
        MockTurn::text("planted"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "plant").await;
    for (id, _) in PLANTS {
        let (status, output) = result_of(&turn, id);
        // Asked-for commands are denied without an approver: those did not run at all.
        assert!(
            status == "denied" || !output.is_empty(),
            "{id}: {status} {output}"
        );
    }
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config_before
    );
    assert!(
        std::fs::read_dir(ws.join(".git/hooks"))
            .unwrap()
            .next()
            .is_none(),
        "a hook was planted"
    );

    // The next session's environment block (amberd's git) and the user's own git.
    mock.push(vec![MockTurn::text("two"), done()]);
    let second = session_in(&daemon, &client, Mode::Write).await;
    let mut events = Events::live(&client, &second).await;
    prompt_turn(&client, &mut events, &second, "hello").await;
    std::fs::write(ws.join("sub/a.txt"), "changed again\n").unwrap();
    users_git_runs_nothing(&ws, &ran);
    assert!(!ws.join(".git/commondir").exists());
}

/// A repository with a submodule: the model rewrites the submodule's `.git` file and its
/// git dir's config (refused: the mounts protect what existed), and in one command adds a
/// gitlink without `.gitmodules` whose `.git` names a git dir of its making (undone as the
/// command ends, and the result says so). The user's own `git status`, which descends into
/// both, runs nothing.
#[tokio::test(flavor = "multi_thread")]
async fn nested_checkouts_cannot_send_the_users_git_to_a_planted_config() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let ran = sentinels(&daemon);
    let ws = daemon.workspace.clone();
    let lib = daemon.dir.path().canonicalize().unwrap().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q"]);
    git(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "a.txt"]);
    git(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    git(&ws, &["commit", "-qm", "one"]);
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = env > {}/planted\n",
        ran.display()
    );
    let rewrites = format!(
        "mkdir -p planted.git && printf '{config}' > planted.git/config && echo x > planted.git/HEAD; \
         printf 'gitdir: ../../planted.git\\n' > vendor/lib/.git; \
         printf '{config}' >> .git/modules/vendor/lib/config; echo tried"
    );
    let gitlink = format!(
        "git init -q --bare evil.git && printf '{config}' > evil.git/config && \
         git update-index --add --cacheinfo 160000,1234567890123456789012345678901234567890,sub && \
         mkdir sub && echo \"gitdir: $PWD/evil.git\" > sub/.git && echo planted"
    );
    let client = connect(&daemon).await;
    let sid = session_in(&daemon, &client, Mode::Yolo).await;
    let mut events = Events::live(&client, &sid).await;
    mock.push(vec![
        calls(vec![call(
            "rewrite",
            "bash",
            &json!({ "command": rewrites }),
        )]),
        calls(vec![call(
            "gitlink",
            "bash",
            &json!({ "command": gitlink }),
        )]),
        MockTurn::text("planted"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "plant below").await;
    let (_, output) = result_of(&turn, "rewrite");
    assert!(output.contains("Read-only file system"), "{output}");
    let (status, output) = result_of(&turn, "gitlink");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.contains("planted") && output.contains("sub/.git"),
        "{output}"
    );
    assert!(!ws.join("sub/.git").exists());
    let module_config = std::fs::read_to_string(ws.join(".git/modules/vendor/lib/config")).unwrap();
    assert!(!module_config.contains("fsmonitor"), "{module_config}");
    users_git_runs_nothing(&ws, &ran);
}

/// Where there is no repository yet, one command makes one and fills its config and hooks
/// (nothing existed to be protected while it ran): afterwards the user's own git runs none
/// of it, and the command's result says what amber undid.
#[tokio::test(flavor = "multi_thread")]
async fn a_repository_a_command_creates_keeps_no_program_the_command_planted() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let ran = sentinels(&daemon);
    let ws = daemon.workspace.clone();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let payload = format!("env > {}/planted", ran.display());
    let command = format!(
        "git init -q && git config core.fsmonitor '{payload}' && git config user.name model && \
         printf '#!/bin/sh\\n{payload}\\n' > .git/hooks/pre-commit && \
         chmod +x .git/hooks/pre-commit && echo made"
    );
    let client = connect(&daemon).await;
    let sid = session_in(&daemon, &client, Mode::Yolo).await;
    let mut events = Events::live(&client, &sid).await;
    mock.push(vec![
        calls(vec![call("init", "bash", &json!({ "command": command }))]),
        MockTurn::text("made"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "make a repository").await;
    let (status, output) = result_of(&turn, "init");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("made"), "{output}");
    assert!(
        output.contains("core.fsmonitor"),
        "the result does not say: {output}"
    );
    // The user's own git in the new repository: status, add, commit (the pre-commit hook).
    for args in [
        &["status", "--porcelain"][..],
        &["add", "a.txt"],
        &[
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@u",
            "commit",
            "-qm",
            "x",
        ],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    assert!(
        ran_in(&ran).is_empty(),
        "a planted program ran: {:?}",
        ran_in(&ran)
    );
}

/// A background process plants `.git/commondir` after its call returned: once it ends the
/// plant is undone and its output says so; the user's own git then runs nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_background_process_cannot_plant_a_commondir_either() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let ran = sentinels(&daemon);
    let ws = daemon.workspace.clone();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["commit", "-qm", "one"]);
    let evil = daemon.dir.path().canonicalize().unwrap().join("evil-git");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(
        evil.join("config"),
        format!("[core]\n\tfsmonitor = env > {}/planted\n", ran.display()),
    )
    .unwrap();
    let client = connect(&daemon).await;
    let sid = session_in(&daemon, &client, Mode::Yolo).await;
    let mut events = Events::live(&client, &sid).await;
    let command = format!("sleep 0.3; echo {} > .git/commondir", evil.display());
    mock.push(vec![
        calls(vec![call(
            "bg",
            "process",
            &json!({"action": "start", "command": command}),
        )]),
        MockTurn::text("started"),
        done(),
    ]);
    prompt_turn(&client, &mut events, &sid, "plant later").await;
    // It plants at 0.3 s and ends right after; the guard runs as it ends.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // The process's output names what was undone.
    mock.push(vec![
        calls(vec![call(
            "out",
            "process",
            &json!({"action": "output", "id": "p1"}),
        )]),
        MockTurn::text("read"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "read it").await;
    let (_, output) = result_of(&turn, "out");
    assert!(output.contains("commondir"), "{output}");
    assert!(!ws.join(".git/commondir").exists());
    users_git_runs_nothing(&ws, &ran);
}
