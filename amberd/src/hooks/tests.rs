//! Unit tests of hooks: the spec and its checks, matchers, reading answers, the schema
//! check of rewrites, the trust store, and real hook processes (stdin, caps, timeouts).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::decision::{self, Decision, HookFailure};
use super::process::{self, Exit, HookRun, MAX_STDOUT};
use super::*;
use crate::trust::TrustStore;
use amber_exec::env_policy::ToolEnv;
use amber_tools::sandbox::ToolSandbox;

fn spec(event: HookEvent, command: &[&str]) -> HookSpec {
    HookSpec {
        event,
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        matcher: None,
        timeout_ms: 2_000,
        sandbox: None,
        origin: HookOrigin::Workspace,
    }
}

fn run_of(exit: Exit, stdout: &str, stderr: &str) -> HookRun {
    HookRun {
        exit,
        stdout: stdout.to_owned(),
        stdout_truncated: false,
        stderr: stderr.to_owned(),
    }
}

#[test]
fn a_hooks_table_parses_with_its_defaults() {
    let file = HooksFile::parse(
        "[[hooks]]\nevent = \"pre_tool_use\"\ncommand = [\"./check.sh\", \"--strict\"]\nmatcher = \"bash\"\n\
         [[hooks]]\nevent = \"turn_completed\"\ncommand = [\"notify-send\", \"done\"]\ntimeout_ms = 500\n",
    )
    .unwrap();
    assert_eq!(file.hooks.len(), 2);
    assert_eq!(file.hooks[0].event, HookEvent::PreToolUse);
    assert_eq!(file.hooks[0].command, ["./check.sh", "--strict"]);
    assert_eq!(file.hooks[0].matcher.as_deref(), Some("bash"));
    assert_eq!(file.hooks[0].timeout_ms, spec::DEFAULT_TIMEOUT_MS);
    assert_eq!(file.hooks[1].timeout_ms, 500);
}

#[test]
fn an_unknown_event_is_a_config_error_naming_the_known_ones() {
    let err =
        crate::config::Config::parse("[[hooks]]\nevent = \"before_tool\"\ncommand = [\"x\"]\n")
            .unwrap_err()
            .to_string();
    assert!(err.contains("before_tool"), "{err}");
    assert!(err.contains("pre_tool_use"), "{err}");
}

#[test]
fn bad_hooks_are_config_errors_with_a_clear_message() {
    let cases = [
        (
            "event = \"pre_tool_use\"\ncommand = []",
            "`command` of a `pre_tool_use` hook is empty",
        ),
        (
            "event = \"pre_tool_use\"\ncommand = [\" \"]",
            "empty program name",
        ),
        (
            "event = \"user_prompt\"\ncommand = [\"x\"]\nmatcher = \"bash\"",
            "`matcher` is for events about a tool call",
        ),
        (
            "event = \"pre_tool_use\"\ncommand = [\"x\"]\nmatcher = \"[\"",
            "is not a glob",
        ),
        (
            "event = \"pre_tool_use\"\ncommand = [\"x\"]\ntimeout_ms = 0",
            "at least 1",
        ),
        (
            "event = \"pre_tool_use\"\ncommand = [\"x\"]\ntimeout = 5",
            "timeout",
        ),
        ("command = [\"x\"]", "event"),
    ];
    for (body, expected) in cases {
        let err = crate::config::Config::parse(&format!("[[hooks]]\n{body}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{body}: {err}");
    }
    let err = crate::config::Config::parse(
        "[[hooks]]\nevent = \"turn_completed\"\ncommand = [\"x\"]\n[[hooks]]\nevent = \"pre_tool_use\"\ncommand = []\n",
    )
    .unwrap_err().to_string();
    assert!(err.contains("hooks[1]"), "names the entry: {err}");
}

#[test]
fn matchers_are_globs_over_the_tool_name() {
    let mut hook = spec(HookEvent::PreToolUse, &["x"]);
    assert!(hook.applies(HookEvent::PreToolUse, Some("bash")));
    assert!(!hook.applies(HookEvent::PostToolUse, Some("bash")));
    hook.matcher = Some("mcp__*".into());
    assert!(hook.applies(HookEvent::PreToolUse, Some("mcp__github__create_issue")));
    assert!(!hook.applies(HookEvent::PreToolUse, Some("bash")));
    hook.matcher = Some("bash".into());
    assert!(hook.applies(HookEvent::PreToolUse, Some("bash")));
    assert!(!hook.applies(HookEvent::PreToolUse, Some("bash2")));
    assert!(!hook.applies(HookEvent::PreToolUse, None));
}

#[test]
fn exit_2_blocks_a_call_with_stderr_as_the_reason() {
    let answer = decision::pre_tool_use(&run_of(Exit::Code(2), "", "no pushing\n"), 10).unwrap();
    assert_eq!(answer.decision, Some(Decision::Deny));
    assert_eq!(answer.reason.as_deref(), Some("no pushing"));
    let silent = decision::pre_tool_use(&run_of(Exit::Code(2), "", ""), 10).unwrap();
    assert_eq!(
        silent.reason.as_deref(),
        Some("blocked by a pre_tool_use hook")
    );
}

#[test]
fn a_json_answer_decides_and_rewrites() {
    let answer = decision::pre_tool_use(
        &run_of(
            Exit::Code(0),
            r#"{"decision":"allow","reason":"fine","arguments":{"command":"ls"}}"#,
            "",
        ),
        10,
    )
    .unwrap();
    assert_eq!(answer.decision, Some(Decision::Allow));
    assert_eq!(answer.reason.as_deref(), Some("fine"));
    assert_eq!(answer.arguments, Some(json!({"command": "ls"})));
    let ask = decision::pre_tool_use(&run_of(Exit::Code(0), r#"{"decision":"ask"}"#, ""), 10);
    assert_eq!(ask.unwrap().decision, Some(Decision::Ask));
    let deny = decision::pre_tool_use(
        &run_of(
            Exit::Code(0),
            r#"{"decision":"deny","arguments":{"a":1}}"#,
            "",
        ),
        10,
    )
    .unwrap();
    assert_eq!(deny.decision, Some(Decision::Deny));
    assert_eq!(deny.arguments, None, "a deny rewrites nothing");
    let quiet = decision::pre_tool_use(&run_of(Exit::Code(0), "  \n", ""), 10).unwrap();
    assert_eq!(quiet, decision::PreToolAnswer::default());
}

#[test]
fn every_bad_ending_is_a_failure_with_a_reason() {
    let cases = [
        (
            run_of(Exit::Code(1), "", "boom"),
            "exited with code 1: boom",
        ),
        (run_of(Exit::Signal(9), "", ""), "killed by signal 9"),
        (run_of(Exit::TimedOut, "", ""), "timed out after 10 ms"),
        (
            run_of(Exit::SpawnFailed("nope: not found".into()), "", ""),
            "could not start: nope",
        ),
        (
            run_of(Exit::Code(0), "all good!", ""),
            "not a JSON object on stdout: all good!",
        ),
        (run_of(Exit::Code(0), "[1,2]", ""), "not a JSON object"),
        (
            run_of(Exit::Code(0), r#"{"decision":"maybe"}"#, ""),
            "decision `maybe`",
        ),
        (
            run_of(Exit::Code(0), r#"{"arguments":"rm"}"#, ""),
            "`arguments` that is not a JSON object",
        ),
        (
            run_of(Exit::Code(0), r#"{"reason":5}"#, ""),
            "`reason` that is not a string",
        ),
    ];
    for (run, expected) in cases {
        let err = decision::pre_tool_use(&run, 10).unwrap_err().to_string();
        assert!(err.contains(expected), "{run:?}: {err}");
    }
    let mut big = run_of(Exit::Code(0), "{", "");
    big.stdout_truncated = true;
    assert_eq!(
        decision::pre_tool_use(&big, 10).unwrap_err(),
        HookFailure::TooMuchOutput
    );
}

#[test]
fn user_prompt_answers_block_or_add_context() {
    let blocked = decision::user_prompt(&run_of(Exit::Code(2), "", "not now"), 10).unwrap();
    assert_eq!(blocked.blocked.as_deref(), Some("not now"));
    let denied = decision::user_prompt(
        &run_of(
            Exit::Code(0),
            r#"{"decision":"deny","reason":"frozen"}"#,
            "",
        ),
        10,
    )
    .unwrap();
    assert_eq!(denied.blocked.as_deref(), Some("frozen"));
    let context = decision::user_prompt(
        &run_of(Exit::Code(0), r#"{"additionalContext":"branch: main"}"#, ""),
        10,
    )
    .unwrap();
    assert_eq!(context.blocked, None);
    assert_eq!(context.additional_context.as_deref(), Some("branch: main"));
    assert!(decision::user_prompt(&run_of(Exit::Code(3), "", ""), 10).is_err());
}

#[test]
fn fire_and_forget_hooks_fail_only_by_how_they_end() {
    assert!(decision::fire_and_forget(&run_of(Exit::Code(0), "whatever text", ""), 10).is_ok());
    assert!(decision::fire_and_forget(&run_of(Exit::Code(2), "", ""), 10).is_err());
    assert!(decision::fire_and_forget(&run_of(Exit::TimedOut, "", ""), 10).is_err());
}

#[test]
fn rewrites_are_checked_against_the_tool_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_ms": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "list": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["command"],
        "additionalProperties": false
    });
    assert!(schema::check(&json!({"command": "ls"}), &schema).is_ok());
    let cases = [
        (
            json!({"command": 5}),
            "at /command: 5 is not of type \"string\"",
        ),
        (json!({}), "\"command\" is a required property"),
        (
            json!({"command": "ls", "extra": 1}),
            "'extra' was unexpected",
        ),
        (
            json!({"command": "ls", "timeout_ms": 0}),
            "at /timeout_ms: 0 is less than the minimum of 1",
        ),
        (
            json!({"command": "ls", "timeout_ms": 1.5}),
            "is not of type \"integer\"",
        ),
        (json!({"command": "ls", "mode": "c"}), "at /mode:"),
        (
            json!({"command": "ls", "list": ["a", 1]}),
            "at /list/1: 1 is not of type \"string\"",
        ),
        (json!("ls"), "is not of type \"object\""),
    ];
    for (value, expected) in cases {
        let err = schema::check(&value, &schema).unwrap_err();
        assert!(err.contains(expected), "{value}: {err}");
    }
    // The real bash schema accepts what bash takes.
    let bash = amber_tools::builtin_tools(Default::default())
        .into_iter()
        .find(|t| t.name() == "bash")
        .unwrap();
    assert!(
        schema::check(
            &json!({"command": "echo hi", "timeout_ms": 100}),
            &bash.input_schema()
        )
        .is_ok()
    );
    assert!(schema::check(&json!({"command": ["echo"]}), &bash.input_schema()).is_err());
}

#[test]
fn the_trust_store_remembers_a_file_by_hash() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".amber")).unwrap();
    assert!(trust::read_workspace(&ws).unwrap().is_none());
    std::fs::write(
        ws.join(".amber/hooks.toml"),
        "[[hooks]]\nevent = \"turn_completed\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let file = trust::read_workspace(&ws).unwrap().unwrap();
    assert_eq!(file.hooks.len(), 1);
    let store = TrustStore::new(&dir.path().join("data"));
    assert!(!store.is_trusted(&file.path, &file.hash));
    store.remember(&file.path, &file.hash).unwrap();
    assert!(store.is_trusted(&file.path, &file.hash));
    // Another store on the same data dir (a restarted daemon) still knows it.
    assert!(TrustStore::new(&dir.path().join("data")).is_trusted(&file.path, &file.hash));
    std::fs::write(
        ws.join(".amber/hooks.toml"),
        "[[hooks]]\nevent = \"turn_completed\"\ncommand = [\"false\"]\n",
    )
    .unwrap();
    let changed = trust::read_workspace(&ws).unwrap().unwrap();
    assert_ne!(changed.hash, file.hash);
    assert!(
        !store.is_trusted(&changed.path, &changed.hash),
        "a changed file is untrusted"
    );
    std::fs::write(
        ws.join(".amber/hooks.toml"),
        "[[hooks]]\nevent = \"nope\"\n",
    )
    .unwrap();
    assert!(trust::read_workspace(&ws).is_err());
}

fn env(dir: &std::path::Path) -> HookEnv {
    HookEnv {
        session_id: "s1".into(),
        workspace: dir.to_path_buf(),
        sandbox: ToolSandbox::Off,
        env: Arc::new(ToolEnv::minimal()),
        scratch: dir.join("scratch"),
    }
}

#[tokio::test]
async fn a_hook_reads_its_input_on_stdin_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let hook = spec(
        HookEvent::TurnCompleted,
        &["/bin/sh", "-c", "cat > got.json; pwd > cwd.txt"],
    );
    let mut input = HookInput::new(HookEvent::TurnCompleted, "s1", Some("t1"), dir.path());
    input.stop_reason = Some(amber_proto::StopReason::EndTurn);
    let run = process::run(&hook, &input.to_json(), &env(dir.path()), None).await;
    assert_eq!(run.exit, Exit::Code(0), "{run:?}");
    let got: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("got.json")).unwrap())
            .unwrap();
    assert_eq!(got["event"], "turn_completed");
    assert_eq!(got["sessionId"], "s1");
    assert_eq!(got["turnId"], "t1");
    assert_eq!(got["stopReason"], "end_turn");
    assert!(got.get("tool").is_none(), "{got}");
    let cwd = std::fs::read_to_string(dir.path().join("cwd.txt")).unwrap();
    assert_eq!(cwd.trim(), dir.path().to_str().unwrap());
    let left: Vec<_> = std::fs::read_dir(dir.path().join("scratch"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "the input file is removed: {left:?}");
}

#[tokio::test]
async fn a_hanging_hook_is_killed_with_its_group_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = spec(
        HookEvent::PreToolUse,
        &["/bin/sh", "-c", "sleep 30 & echo $! > child.pid; wait"],
    );
    hook.timeout_ms = 300;
    let started = Instant::now();
    let run = process::run(&hook, "{}", &env(dir.path()), None).await;
    assert_eq!(run.exit, Exit::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let pid: i32 = std::fs::read_to_string(dir.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild went with the group (a zombie at worst, never still sleeping).
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the hook's child still runs: {stat}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failure = decision::pre_tool_use(&run, hook.timeout_ms).unwrap_err();
    assert_eq!(failure.to_string(), "timed out after 300 ms and was killed");
}

#[tokio::test]
async fn a_huge_stdout_is_capped_and_never_blocks_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let hook = spec(
        HookEvent::PreToolUse,
        &[
            "/bin/sh",
            "-c",
            "head -c 1000000 /dev/zero | tr '\\0' 'x'; echo done >&2",
        ],
    );
    let run = process::run(&hook, "{}", &env(dir.path()), None).await;
    assert_eq!(run.exit, Exit::Code(0));
    assert!(run.stdout_truncated);
    assert_eq!(run.stdout.len(), MAX_STDOUT);
    assert_eq!(run.stderr.trim(), "done");
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_failure() {
    let dir = tempfile::tempdir().unwrap();
    let hook = spec(HookEvent::PreToolUse, &["/nonexistent/hook"]);
    let run = process::run(&hook, "{}", &env(dir.path()), None).await;
    assert!(matches!(run.exit, Exit::SpawnFailed(_)), "{run:?}");
}

#[tokio::test]
async fn pre_tool_use_hooks_chain_rewrites_and_the_first_deny_wins() {
    let dir = tempfile::tempdir().unwrap();
    let schema = json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]});
    let rewrite = spec(
        HookEvent::PreToolUse,
        &[
            "/bin/sh",
            "-c",
            r#"echo '{"arguments":{"command":"echo rewritten"}}'"#,
        ],
    );
    // The second hook sees the first one's rewrite and asks.
    let check = spec(
        HookEvent::PreToolUse,
        &[
            "/bin/sh",
            "-c",
            r#"grep -q rewritten && echo '{"decision":"ask","reason":"look"}'"#,
        ],
    );
    let mut input = HookInput::new(HookEvent::PreToolUse, "s1", Some("t1"), dir.path());
    input.tool = Some("bash".into());
    input.arguments = Some(json!({"command": "echo original"}));
    let outcome = pre_tool_use(
        &[rewrite.clone(), check],
        input.clone(),
        &schema,
        &env(dir.path()),
        None,
    )
    .await;
    assert_eq!(outcome.verdict, PreToolVerdict::Ask("look".into()));
    assert_eq!(
        outcome.arguments,
        Some(json!({"command": "echo rewritten"}))
    );
    let deny = spec(
        HookEvent::PreToolUse,
        &["/bin/sh", "-c", "echo nope >&2; exit 2"],
    );
    let outcome = pre_tool_use(
        &[deny, rewrite],
        input.clone(),
        &schema,
        &env(dir.path()),
        None,
    )
    .await;
    assert_eq!(outcome.verdict, PreToolVerdict::Deny("nope".into()));
    assert!(outcome.failures.is_empty());
    let invalid = spec(
        HookEvent::PreToolUse,
        &[
            "/bin/sh",
            "-c",
            r#"echo '{"decision":"allow","arguments":{"command":7}}'"#,
        ],
    );
    let outcome = pre_tool_use(&[invalid], input, &schema, &env(dir.path()), None).await;
    let PreToolVerdict::Deny(reason) = &outcome.verdict else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("invalid shape"), "{reason}");
    assert_eq!(outcome.failures.len(), 1);
}
