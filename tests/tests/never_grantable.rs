//! End-to-end: never-grantable means never. Three asks only a person may answer — a file
//! tool writing `.amber/rules.toml`, a file tool writing `.git/hooks/x`, a command reading
//! `~/.ssh/id_x` (a fake HOME) — tried against every other way a call is let through: a
//! `pre_tool_use` hook answering `allow`, allow rules in the config, the same rules in a
//! trusted `.amber/rules.toml`, an `allow_session` answer, yolo mode, and `amber-cli run
//! --yes`. Each time each call asks a person (`personOnly`), and denied, nothing was written
//! and the model never saw the key.

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::TestDaemon;
use amber_tests::steps::{Events, FAST_RETRIES, done, new_session, run_bounded, spawn_config};
use amber_tests::tool_calls::{call, calls, connect_approver, put, respond, result_of};
use serde_json::{Value, json};

const SECRET: &str = "SECRET-KEY-SENTINEL-91c2";
const PLANTED_RULE: &str =
    "[[rules]]\ntool = \"bash\"\npattern = \"*\"\nsandbox = false\ndecision = \"allow\"\n";

/// Rules that allow every one of the three calls, were they grantable.
const ALLOW_ALL: &str = r#"
[[rules]]
tool = "*"
pattern = "**"
decision = "allow"

[[rules]]
tool = "write"
pattern = ".amber/**"
decision = "allow"

[[rules]]
tool = "write"
pattern = ".git/**"
decision = "allow"

[[rules]]
tool = "read"
pattern = "~/.ssh/**"
decision = "allow"

[[rules]]
tool = "bash"
pattern = "cat*"
decision = "allow"
"#;

const HOOK_ALLOWS_EVERYTHING: &str = r#"
[[hooks]]
event = "pre_tool_use"
command = ["sh", "-c", "cat >/dev/null; echo '{\"decision\": \"allow\"}'"]
"#;

/// The three calls, ids suffixed with `round`.
fn attempts(round: &str) -> MockTurn {
    let calls_of_round: Vec<MockToolCall> = vec![
        call(
            &format!("w_rules{round}"),
            "write",
            &json!({"path": ".amber/rules.toml", "content": PLANTED_RULE}),
        ),
        call(
            &format!("w_hook{round}"),
            "write",
            &json!({"path": ".git/hooks/x", "content": "#!/bin/sh\ntouch pwned\n"}),
        ),
        call(
            &format!("r_ssh{round}"),
            "bash",
            &json!({"command": "cat ~/.ssh/id_x"}),
        ),
    ];
    calls(calls_of_round)
}

const IDS: [&str; 3] = ["w_rules", "w_hook", "r_ssh"];

#[derive(Debug, Clone, Copy)]
enum Bypass {
    HookAllow,
    ConfigRule,
    TrustedWorkspaceRule,
    SessionGrant,
    Yolo,
}

fn config(bypass: Bypass) -> String {
    let extra = match bypass {
        Bypass::HookAllow => HOOK_ALLOWS_EVERYTHING,
        Bypass::ConfigRule => ALLOW_ALL,
        Bypass::TrustedWorkspaceRule | Bypass::SessionGrant | Bypass::Yolo => "",
    };
    format!("{FAST_RETRIES}\n[sandbox]\nmode = \"workspace-write\"\n{extra}")
}

/// The daemon's fake HOME holds the key; the workspace is a git repository's.
fn prepare(daemon: &TestDaemon) {
    put(&daemon.dir.path().join("home/.ssh/id_x"), SECRET);
    std::fs::create_dir_all(daemon.workspace.join(".git/hooks")).unwrap();
}

/// Nothing the three calls would do was done.
fn assert_untouched(daemon: &TestDaemon, mock: &MockLlm, rules_before: Option<&str>, case: &str) {
    let rules = std::fs::read_to_string(daemon.workspace.join(".amber/rules.toml")).ok();
    assert_eq!(
        rules.as_deref(),
        rules_before,
        "{case}: the rules file changed"
    );
    assert!(
        !daemon.workspace.join(".git/hooks/x").exists(),
        "{case}: a git hook was planted"
    );
    assert!(
        !mock
            .requests()
            .iter()
            .any(|r| r.to_string().contains(SECRET)),
        "{case}: the model saw the key"
    );
}

/// Runs a prompt's turn, answering each request with `decide`; the turn's events and the
/// requests.
async fn turn(
    client: &amber_client::Client,
    events: &mut Events,
    sid: &str,
    decide: impl Fn(&Value) -> Decision,
) -> (Vec<Value>, Vec<Value>) {
    client.session_prompt(sid, "try").await.unwrap();
    let (mut seen, mut asked) = (Vec::new(), Vec::new());
    loop {
        let event = events.next().await;
        if event["type"] == "approval_requested" {
            let rid = event["requestId"].as_str().unwrap().to_owned();
            assert!(respond(client, sid, &rid, decide(&event)).await.unwrap());
            asked.push(event.clone());
        }
        let last = event["type"] == "turn_completed";
        seen.push(event);
        if last {
            return (seen, asked);
        }
    }
}

/// Every call of `round` asked a person and was denied.
fn assert_asked_a_person(seen: &[Value], asked: &[Value], round: &str, case: &str) {
    for id in IDS {
        let id = format!("{id}{round}");
        let request = asked
            .iter()
            .find(|a| a["callId"] == id.as_str())
            .unwrap_or_else(|| panic!("{case}: {id} was not asked: {asked:#?}"));
        assert_eq!(request["personOnly"], true, "{case}: {request}");
        assert_eq!(request["scope"], "this call only", "{case}: {request}");
        let (status, output) = result_of(seen, &id);
        assert_eq!(status, "denied", "{case}: {id}: {output}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_hook_rule_trusted_rule_grant_or_mode_answers_a_person_only_ask() {
    for bypass in [
        Bypass::HookAllow,
        Bypass::ConfigRule,
        Bypass::TrustedWorkspaceRule,
        Bypass::SessionGrant,
        Bypass::Yolo,
    ] {
        let case = format!("{bypass:?}");
        let mut script = vec![attempts(""), MockTurn::text("Tried."), done()];
        if matches!(bypass, Bypass::SessionGrant) {
            script.extend([attempts("_again"), MockTurn::text("Again."), done()]);
        }
        let mock = MockLlm::start(script).await;
        let daemon = spawn_config(&mock, &config(bypass));
        prepare(&daemon);
        let rules_before = matches!(bypass, Bypass::TrustedWorkspaceRule).then(|| {
            put(&daemon.workspace.join(".amber/rules.toml"), ALLOW_ALL);
            assert!(daemon.trust_if_pending(".amber/rules.toml"), "{case}");
            ALLOW_ALL
        });
        let mode = match bypass {
            Bypass::Yolo => Mode::Yolo,
            _ => Mode::Write,
        };
        let client = connect_approver(&daemon).await;
        let sid = new_session(&client, &daemon, Some(mode)).await;
        let mut events = Events::live(&client, &sid).await;

        if matches!(bypass, Bypass::SessionGrant) {
            // `allow_session` lets each call run once and grants nothing: the same calls
            // ask again.
            let (seen, asked) = turn(&client, &mut events, &sid, |_| Decision::AllowSession).await;
            for id in IDS {
                let request = asked.iter().find(|a| a["callId"] == id).unwrap();
                assert_eq!(request["personOnly"], true, "{case}: {request}");
                assert_ne!(result_of(&seen, id).0, "denied", "{case}: {id}");
            }
            std::fs::remove_file(daemon.workspace.join(".amber/rules.toml")).unwrap();
            std::fs::remove_file(daemon.workspace.join(".git/hooks/x")).unwrap();
            let (seen, asked) = turn(&client, &mut events, &sid, |_| Decision::Deny).await;
            assert_asked_a_person(&seen, &asked, "_again", &case);
            assert!(
                !daemon.workspace.join(".amber/rules.toml").exists(),
                "{case}: the rules file was written again"
            );
            assert!(!daemon.workspace.join(".git/hooks/x").exists(), "{case}");
            continue;
        }
        let (seen, asked) = turn(&client, &mut events, &sid, |_| Decision::Deny).await;
        assert_asked_a_person(&seen, &asked, "", &case);
        assert_untouched(&daemon, &mock, rules_before, &case);
    }
}

#[test]
fn amber_cli_run_yes_never_answers_a_person_only_ask() {
    let mock = MockLlm::start_blocking(vec![attempts(""), MockTurn::text("Tried."), done()]);
    let daemon = spawn_config(&mock, &config(Bypass::ConfigRule));
    prepare(&daemon);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", "--yes", "try"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = lines
        .last()
        .unwrap_or_else(|| panic!("no output: {stderr}"));
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(code, Some(4), "ended with calls denied: {stderr}");
    let asked: Vec<&Value> = lines
        .iter()
        .filter(|e| e["type"] == "approval_requested")
        .collect();
    assert_eq!(asked.len(), 3, "{lines:#?}");
    assert!(asked.iter().all(|a| a["personOnly"] == true), "{asked:#?}");
    let resolved: Vec<&Value> = lines
        .iter()
        .filter(|e| e["type"] == "approval_resolved")
        .collect();
    assert!(
        resolved.iter().all(|r| r["decision"] == "deny"),
        "{resolved:#?}"
    );
    assert!(stderr.contains("only a person may answer it"), "{stderr}");
    let denied = result["permissionDenials"].as_array().unwrap();
    assert_eq!(denied.len(), 3, "{result}");
    assert_untouched(&daemon, &mock, None, "--yes");
}
