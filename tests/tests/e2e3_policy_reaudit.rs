//! End-to-end: the holes found by the policy re-audit stay closed, through the real daemon
//! (the first audit's cases are in `e2e3_policy_audit.rs`). Write targets that cannot be
//! resolved (variables, substitutions, CDPATH) ask and are never covered by an allow rule
//! or grantable; bash runs without CDPATH and with OLDPWD at its working directory; deny
//! rules apply to commands whose program the parser cannot see, even in yolo; `write` deny
//! rules cover bash writes; `npm install` asks, scoped without its read-only parts.
//!
//! Most cases run with a client that is not an approver: a call that needs approval is
//! then denied at once with `by: "no_approver"`, after an `approval_requested` — which
//! tells "asked" from "denied by rule" from "ran".

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::e2e::{
    Events, FAST_RETRIES, connect, done, new_session, of_type, prompt_turn, spawn_config,
    stop_reason,
};
use amber_tests::e2e3::{asked, calls, put, result_of, sh};

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
