//! End-to-end: the policy bypasses found by the audits stay closed, through the real daemon.
//!
//! - An allow rule covers a compound command only when it covers every part; bash deny rules
//!   see through wrappers and nesting and cover `process start`, and `write` rules cover
//!   `edit`; the agent cannot write its own rules or git hooks without asking; writes through
//!   a symlink to outside, program-running `git config` and build tools pointed outside ask;
//!   `search` never shows a file a deny rule hides; `allow_always` on a call an ask rule
//!   matched counts for the session only.
//! - Write targets that cannot be resolved (variables, substitutions, CDPATH) ask and are
//!   never covered by an allow rule or grantable; bash runs without CDPATH and with OLDPWD at
//!   its working directory; deny rules apply to commands whose program the parser cannot see,
//!   even in yolo; `write` deny rules cover bash writes; `npm install` asks, scoped without
//!   its read-only parts.
//!
//! Most cases run with a client that is not an approver: a call that needs approval is
//! then denied at once with `by: "no_approver"`, after an `approval_requested` — which
//! tells "asked" from "denied by rule" from "ran".

use std::os::unix::fs::symlink;

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_proto::Decision;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, new_session, of_type, prompt_turn, spawn, spawn_config,
    stop_reason,
};
use amber_tests::tool_calls::{
    asked, bash, call, calls, connect_approver, next_approval, put, request_id, respond, result_of,
    sh,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn an_allow_always_rule_does_not_let_a_whole_compound_command_run() {
    let mock = MockLlm::start(vec![
        bash("a_rm", "rm -rf build2"),
        MockTurn::text("Removed build2."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    std::fs::create_dir_all(ws.join("build2")).unwrap();
    std::fs::create_dir_all(ws.join("build3")).unwrap();
    put(&ws.join("a.txt"), "a");
    put(&ws.join("keep/untracked.txt"), "u");
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "clean").await.unwrap();
    let (_, first) = next_approval(&mut events).await;
    assert!(
        respond(&client, &sid, &request_id(&first), Decision::AllowAlways)
            .await
            .unwrap()
    );
    let turn = events.turn().await;
    assert_eq!(result_of(&turn, "a_rm").0, "ok");
    let stored = std::fs::read_to_string(ws.join(".amber/rules.toml")).unwrap();
    assert!(stored.contains("pattern = \"rm\""), "{stored}");

    // A new session: the stored `rm` allow covers `rm` alone, not `rm …; git clean`.
    mock.push([
        calls(vec![
            sh("a_rm3", "rm -rf build3"),
            sh("a_both", "rm -f a.txt; git clean -fdx"),
        ]),
        MockTurn::text("Done."),
        done(),
    ]);
    let observer = connect(&daemon).await;
    let other = new_session(&observer, &daemon, None).await;
    let mut other_events = Events::live(&observer, &other).await;
    let turn = prompt_turn(&observer, &mut other_events, &other, "clean more").await;
    assert_eq!(result_of(&turn, "a_rm3").0, "ok", "{turn:#?}");
    assert!(!ws.join("build3").exists());
    assert!(!asked(&turn, "a_rm3"));
    assert!(
        asked(&turn, "a_both"),
        "the compound command ran on the `rm` rule"
    );
    assert_eq!(result_of(&turn, "a_both").0, "denied");
    assert!(ws.join("a.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_deny_rules_see_through_wrappers_and_cover_process_start_and_edit() {
    let rules = r#"
[[rules]]
tool = "bash"
pattern = "touch*"
decision = "deny"

[[rules]]
tool = "bash"
pattern = "git push*"
decision = "deny"

[[rules]]
tool = "write"
pattern = "secrets/**"
decision = "deny"
"#;
    let commands = [
        ("d1", "env touch t1"),
        ("d2", "bash -c \"touch t2\""),
        ("d3", "(touch t3)"),
        ("d4", "FOO=1 touch t4"),
        ("d5", "echo $(touch t5)"),
        ("d6", "timeout 5 touch t6"),
        ("d7", "/usr/bin/touch t7"),
        ("d9", "if true; then touch t9; fi"),
        ("d_push", "git -C . push"),
    ];
    let mut list: Vec<MockToolCall> = commands.iter().map(|(id, c)| sh(id, c)).collect();
    list.push(call(
        "d10",
        "process",
        &json!({"action": "start", "command": "touch t10"}),
    ));
    list.push(call(
        "d_edit",
        "edit",
        &json!({"path": "secrets/key.env", "old_string": "k", "new_string": "x"}),
    ));
    list.push(sh("d_ok", "echo fine > ok.txt"));
    let mock = MockLlm::start(vec![calls(list), MockTurn::text("Refused."), done()]).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}{rules}"));
    let ws = daemon.workspace.clone();
    put(&ws.join("secrets/key.env"), "k");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    for (id, command) in commands
        .iter()
        .chain(&[("d10", "process start"), ("d_edit", "edit")])
    {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "denied", "{command}: {output}");
        assert!(output.contains("rule"), "{command}: {output}");
    }
    for n in [1, 2, 3, 4, 5, 6, 7, 9, 10] {
        assert!(!ws.join(format!("t{n}")).exists(), "t{n} was created");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("secrets/key.env")).unwrap(),
        "k"
    );
    assert_eq!(result_of(&turn, "d_ok").0, "ok");
    assert!(of_type(&turn, "approval_requested").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn protected_paths_symlinks_git_config_and_outside_build_dirs_ask_in_write_mode() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().display().to_string();
    let asks = [
        (
            "p_hooks_path",
            "git config core.hooksPath /tmp/amber-hooks".to_owned(),
        ),
        ("p_alias", "git config alias.st '!touch pwned'".to_owned()),
        (
            "p_bash_rules",
            "echo '[[rules]]' >> .amber/rules.toml".to_owned(),
        ),
        (
            "p_hook",
            "echo 'touch pwned' > .git/hooks/pre-commit".to_owned(),
        ),
        ("p_chmod", "chmod +x .git/hooks/pre-commit".to_owned()),
        ("p_redirect", "echo x > lnk/f".to_owned()),
        ("p_cp", "cp a.txt lnk/copied".to_owned()),
        ("p_cd", "cd lnk && touch f".to_owned()),
        ("p_ln", format!("ln -s {out} lnk2")),
        ("p_init", format!("git init -q {out}/g2")),
        ("p_cargo", format!("cargo build --target-dir {out}/t")),
        ("p_make", format!("make -C {out}")),
    ];
    let runs = [
        ("r_get", "git config --get user.name || true"),
        ("r_list", "git config -l > /dev/null"),
        ("r_inside", "echo inside > b.txt"),
    ];
    let mut list: Vec<MockToolCall> = asks.iter().map(|(id, c)| sh(id, c)).collect();
    list.extend(runs.iter().map(|(id, c)| sh(id, c)));
    for (id, path) in [
        ("w_rules", ".amber/rules.toml"),
        ("w_hook", ".git/hooks/pre-commit"),
        ("w_config", ".git/config"),
    ] {
        list.push(call(
            id,
            "write",
            &json!({"path": path, "content": "[[rules]]\ntool='bash'\npattern='rm'\ndecision='allow'\n"}),
        ));
    }
    let mock = MockLlm::start(vec![calls(list), MockTurn::text("Asked."), done()]).await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(git.success());
    put(&ws.join("a.txt"), "a");
    symlink(outside.path(), ws.join("lnk")).unwrap();
    let config_before = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let requested = of_type(&turn, "approval_requested");
    for id in asks
        .iter()
        .map(|(id, _)| *id)
        .chain(["w_rules", "w_hook", "w_config"])
    {
        assert!(asked(&turn, id), "{id} did not ask: {turn:#?}");
        assert_eq!(result_of(&turn, id).0, "denied", "{id}");
    }
    // Protected and outside writes are never grantable; the unknown ones (git config of a
    // program-running key, a link to outside) are, like any unknown command.
    let never_granted = [
        "p_bash_rules",
        "p_hook",
        "p_chmod",
        "p_redirect",
        "p_cp",
        "p_cd",
        "p_init",
        "p_cargo",
        "p_make",
        "w_rules",
        "w_hook",
        "w_config",
    ];
    for id in never_granted {
        let request = requested.iter().find(|e| e["callId"] == id).unwrap();
        assert_eq!(
            request["scope"], "this call only",
            "{id} must not be grantable: {request}"
        );
    }
    for (id, command) in runs {
        assert!(!asked(&turn, id), "{command} asked");
        assert_eq!(result_of(&turn, id).0, "ok", "{command}");
    }
    // (The sandbox makes an empty `.amber/` as the mount point that keeps it read-only.)
    assert!(
        !ws.join(".amber/rules.toml").exists(),
        "the agent wrote its own rules"
    );
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        config_before
    );
    let leaked: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leaked.is_empty(), "wrote outside: {leaked:?}");
    assert!(!ws.join("lnk2").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn search_never_shows_files_a_deny_rule_hides() {
    let rules = "[[rules]]\ntool = \"*\"\npattern = \"secrets/**\"\ndecision = \"deny\"\n";
    let mock = MockLlm::start(vec![
        calls(vec![
            call("s_grep", "search", &json!({"pattern": "API_KEY"})),
            call(
                "s_dir",
                "search",
                &json!({"pattern": "API_KEY", "path": "secrets"}),
            ),
            call(
                "s_sem",
                "search",
                &json!({"pattern": "API_KEY", "mode": "semantic"}),
            ),
            call("s_read", "read", &json!({"path": "secrets/key.env"})),
        ]),
        MockTurn::text("Searched."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}{rules}"));
    let ws = daemon.workspace.clone();
    put(&ws.join("secrets/key.env"), "API_KEY=sk-live-123\n");
    put(&ws.join("src/config.rs"), "let name = \"API_KEY\";\n");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "find the key").await;

    for id in ["s_grep", "s_sem"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {output}");
        assert!(output.contains("src/config.rs"), "{id}: {output}");
        assert!(
            !output.contains("secrets/") && !output.contains("sk-live"),
            "{id} leaked the secret: {output}"
        );
    }
    for id in ["s_dir", "s_read"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "denied", "{id}: {output}");
        assert!(!output.contains("sk-live"), "{id}: {output}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_always_on_a_call_an_ask_rule_matched_counts_for_the_session_only() {
    let rules = "[[rules]]\ntool = \"bash\"\npattern = \"echo ask*\"\ndecision = \"ask\"\n";
    let mock = MockLlm::start(vec![
        bash("k_1", "echo ask one"),
        bash("k_2", "echo ask two"),
        MockTurn::text("Echoed."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}{rules}"));
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "echo").await.unwrap();
    let (_, asked_first) = next_approval(&mut events).await;
    assert_eq!(asked_first["scope"], "bash: echo", "{asked_first}");
    let reason = asked_first["reason"].as_str().unwrap();
    assert!(
        reason.contains("echo ask*") && reason.contains("this session only"),
        "{asked_first}"
    );
    assert!(
        respond(
            &client,
            &sid,
            &request_id(&asked_first),
            Decision::AllowAlways
        )
        .await
        .unwrap()
    );
    let turn = events.turn().await;
    let resolved = of_type(&turn, "approval_resolved");
    assert_eq!(resolved[0]["decision"], "allow_session", "{turn:#?}");
    // The grant holds for this session: the second echo ran without asking.
    assert!(of_type(&turn, "approval_requested").is_empty(), "{turn:#?}");
    assert_eq!(result_of(&turn, "k_1").0, "ok");
    assert_eq!(result_of(&turn, "k_2").0, "ok");
    assert!(
        !daemon.workspace.join(".amber/rules.toml").exists(),
        "an allow rule that the ask rule beats was stored"
    );
}

// Write targets the parser cannot resolve, hidden programs, `npm install`.

#[tokio::test(flavor = "multi_thread")]
async fn unresolvable_write_targets_ask_even_with_allow_rules_and_cannot_be_granted() {
    let rules = r#"
[[rules]]
tool = "bash"
pattern = "rm"
decision = "allow"

[[rules]]
tool = "bash"
pattern = "echo"
decision = "allow"

[[rules]]
tool = "write"
pattern = "secrets/**"
decision = "deny"
"#;
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    let (parent, name) = (
        out.parent().unwrap().display().to_string(),
        out.file_name().unwrap().to_string_lossy().into_owned(),
    );
    let out = out.display().to_string();
    let daemon_mock = MockLlm::start(vec![]).await;
    let daemon = spawn_config(&daemon_mock, &format!("{FAST_RETRIES}{rules}"));
    let ws = daemon.workspace.clone();
    // A sibling of the workspace, reached through `$(pwd)/..`.
    let sibling = ws.parent().unwrap().join("amber-reaudit-sibling");
    put(&sibling.join("keep"), "k");
    let sibling_name = sibling.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::create_dir_all(ws.join(&name)).unwrap();
    for file in ["zz/keep", "zz2/keep", "zz3/keep"] {
        put(&outside.path().join(file), "k");
    }
    let asks = [
        ("u_pwd", format!("rm -rf \"$(pwd)/../{sibling_name}\"")),
        ("u_default", format!("rm -rf ${{X:-{out}/zz}}")),
        ("u_var", format!("D={out}; rm -rf $D/zz2")),
        ("u_tick", format!("rm -rf `echo {out}`/zz3")),
        ("u_redirect", format!("D={out}; echo pwned > $D/h")),
        (
            "u_cdpath",
            format!("CDPATH={parent} cd {name} && echo x > f1"),
        ),
        (
            "u_export",
            format!("export CDPATH={parent}; cd {name} && echo x > f2"),
        ),
        ("u_npm", "npm install \"$(pwd)/pkg\"".to_owned()),
    ];
    let mut list: Vec<MockToolCall> = asks.iter().map(|(id, c)| sh(id, c)).collect();
    list.push(sh("u_secret", "echo x > secrets/key.txt"));
    list.push(sh(
        "u_env",
        "printf '%s|%s' \"${CDPATH-unset}\" \"$OLDPWD\"",
    ));
    list.push(sh("u_inside", "rm -rf build2 && echo ok > inside.txt"));
    daemon_mock.push([calls(list), MockTurn::text("Asked."), done()]);
    std::fs::create_dir_all(ws.join("build2")).unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let requested = of_type(&turn, "approval_requested");
    for (id, command) in &asks {
        assert!(asked(&turn, id), "{command} ran without asking: {turn:#?}");
        assert_eq!(result_of(&turn, id).0, "denied", "{command}");
        let request = requested.iter().find(|e| e["callId"] == *id).unwrap();
        if *id == "u_npm" {
            // npm install runs lifecycle scripts: it asks, grantable as `npm install`
            // only (the read-only `pwd` is no part of the scope).
            assert_eq!(request["scope"], "bash: npm install", "{request}");
        } else {
            assert_eq!(request["scope"], "this call only", "{command}: {request}");
        }
    }
    let (status, output) = result_of(&turn, "u_secret");
    assert_eq!(status, "denied", "{output}");
    assert!(output.contains("secrets/**"), "{output}");
    assert!(!asked(&turn, "u_secret"));
    assert!(!ws.join("secrets").exists());
    let (status, output) = result_of(&turn, "u_env");
    assert_eq!(status, "ok", "{output}");
    assert!(output.starts_with("unset|/"), "{output}");
    assert!(
        output.trim_end().ends_with(&*ws.to_string_lossy())
            || output.contains(ws.file_name().unwrap().to_str().unwrap()),
        "OLDPWD is not the working directory: {output}"
    );
    assert_eq!(result_of(&turn, "u_inside").0, "ok");
    assert!(!asked(&turn, "u_inside"));
    assert!(sibling.join("keep").exists());
    for file in ["zz/keep", "zz2/keep", "zz3/keep"] {
        assert!(outside.path().join(file).exists(), "{file} was deleted");
    }
    for file in ["h", "f1", "f2"] {
        assert!(
            !outside.path().join(file).exists(),
            "{file} written outside"
        );
    }
    std::fs::remove_dir_all(&sibling).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn yolo_deny_rules_catch_hidden_programs_and_write_rules_catch_bash_writes() {
    let rules = r#"
[[rules]]
tool = "bash"
pattern = "touch*"
decision = "deny"

[[rules]]
tool = "write"
pattern = "secrets/**"
decision = "deny"
"#;
    let denied = [
        ("h_var", "T=touch; $T h1"),
        ("h_pipe", "echo touch h2 | bash"),
        ("h_here", "bash <<< \"touch h3\""),
        ("h_split", "env -S \"touch h4\""),
        ("h_flock", "flock lockfile touch h5"),
        ("h_ionice", "ionice touch h6"),
        ("h_chroot", "chroot / touch h7"),
        ("h_secret", "echo x > secrets/key.txt"),
        ("h_secret_cd", "cd secrets && cp ../a.txt b.txt"),
        ("h_unresolved", "F=secrets/k2; echo x > $F"),
    ];
    let mut list: Vec<MockToolCall> = denied.iter().map(|(id, c)| sh(id, c)).collect();
    list.push(sh("h_ok", "echo fine > ok.txt"));
    let mock = MockLlm::start(vec![calls(list), MockTurn::text("Refused."), done()]).await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}{rules}"));
    let ws = daemon.workspace.clone();
    put(&ws.join("a.txt"), "a");
    std::fs::create_dir_all(ws.join("secrets")).unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    for (id, command) in denied {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "denied", "{command}: {output}");
        assert!(output.contains("rule"), "{command}: {output}");
    }
    for n in 1..=7 {
        assert!(!ws.join(format!("h{n}")).exists(), "h{n} was created");
    }
    let secrets: Vec<_> = std::fs::read_dir(ws.join("secrets")).unwrap().collect();
    assert!(secrets.is_empty(), "wrote into secrets/: {secrets:?}");
    assert_eq!(result_of(&turn, "h_ok").0, "ok");
    assert!(of_type(&turn, "approval_requested").is_empty());
}
