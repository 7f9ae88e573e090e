//! Engine tests: modes, rules (deny rules on wrapped and opaque commands too), grants and
//! their scopes, protected paths, plugin tools.

use amber_proto::{Mode, ResolvedBy};
use serde_json::{Value, json};

use super::{Request, Rules, Verdict, decide};
use crate::grants::{Grants, Scope};
use crate::rules::{Rule, RuleDecision, RuleSet, Subject};
use crate::rules_for;

struct Case {
    ws: tempfile::TempDir,
    config: RuleSet,
    workspace: RuleSet,
    grants: Grants,
    sandbox: crate::SessionSandbox<'static>,
}

impl Case {
    fn new() -> Case {
        Case {
            ws: tempfile::tempdir().unwrap(),
            config: RuleSet::default(),
            workspace: RuleSet::default(),
            grants: Grants::default(),
            sandbox: crate::SessionSandbox::Off,
        }
    }

    fn rules(mut self, rules: &[(&str, &str, RuleDecision)]) -> Case {
        let rules: Vec<Rule> = rules
            .iter()
            .map(|(tool, pattern, decision)| Rule {
                tool: (*tool).into(),
                pattern: (*pattern).into(),
                host: None,
                sandbox: None,
                decision: *decision,
            })
            .collect();
        self.config = RuleSet::new(&rules).unwrap();
        self
    }

    fn decide(&self, mode: Mode, tool: &str, read_only: bool, args: Value) -> Verdict {
        let request = Request {
            tool,
            tool_read_only: read_only,
            tool_destructive: false,
            args: &args,
            mode,
            workspace: self.ws.path(),
            sandbox: self.sandbox,
        };
        let rules = Rules {
            config: &self.config,
            workspace: Ok(&self.workspace),
        };
        decide(&request, &rules, &self.grants)
    }

    fn bash(&self, mode: Mode, command: &str) -> Verdict {
        self.decide(mode, "bash", false, json!({ "command": command }))
    }
}

/// Any ask: one the approvers may grant, or one only a person may answer.
fn is_ask(v: &Verdict) -> bool {
    matches!(v, Verdict::Ask { .. } | Verdict::AskPerson(_))
}

/// An ask only a person may answer: nothing is granted or stored from it.
fn is_person_ask(v: &Verdict) -> bool {
    matches!(v, Verdict::AskPerson(_))
}

#[test]
fn read_mode_allows_only_read_only_calls() {
    let c = Case::new();
    assert_eq!(
        c.decide(Mode::Read, "read", true, json!({"path": "a"})),
        Verdict::Allow
    );
    assert!(matches!(
        c.decide(
            Mode::Read,
            "write",
            false,
            json!({"path": "a", "content": ""})
        ),
        Verdict::Deny {
            by: ResolvedBy::Policy,
            ..
        }
    ));
    assert_eq!(c.bash(Mode::Read, "ls -la | wc -l"), Verdict::Allow);
    assert!(matches!(
        c.bash(Mode::Read, "rm -rf build"),
        Verdict::Deny { .. }
    ));
}

#[test]
fn write_mode_runs_file_tools_and_asks_for_destructive_commands() {
    let c = Case::new();
    let write = json!({"path": "src/a.rs", "content": "x"});
    assert_eq!(c.decide(Mode::Write, "write", false, write), Verdict::Allow);
    assert_eq!(c.bash(Mode::Write, "ls"), Verdict::Allow);
    match c.bash(Mode::Write, "rm -rf build") {
        Verdict::Ask { scopes, .. } => assert_eq!(
            scopes,
            vec![Scope::Program {
                tool: "bash".into(),
                program: "rm".into()
            }]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_session_grant_covers_the_program_inside_the_workspace_only() {
    let mut c = Case::new();
    c.grants.grant(&[Scope::Program {
        tool: "bash".into(),
        program: "rm".into(),
    }]);
    assert_eq!(c.bash(Mode::Write, "rm -rf build2"), Verdict::Allow);
    match c.bash(Mode::Write, "rm -rf /etc/amber-test") {
        Verdict::AskPerson(_) => {}
        other => panic!("outside the workspace must still ask: {other:?}"),
    }
}

#[test]
fn npm_install_asks_and_its_session_grant_covers_it() {
    let mut c = Case::new();
    let v = c.bash(Mode::Write, "npm install");
    let scopes = ask_scopes(&v).to_vec();
    assert_eq!(
        scopes,
        [Scope::Program {
            tool: "bash".into(),
            program: "npm install".into(),
        }]
    );
    c.grants.grant(&scopes);
    assert_eq!(c.bash(Mode::Write, "npm install left-pad"), Verdict::Allow);
    assert!(is_ask(&c.bash(Mode::Write, "npm ci")));
    assert_eq!(c.bash(Mode::Write, "npm run build"), Verdict::Allow);
}

#[test]
fn grant_scopes_leave_read_only_parts_out() {
    let c = Case::new();
    let v = c.bash(Mode::Write, "git status && git push");
    assert_eq!(
        ask_scopes(&v),
        [Scope::Program {
            tool: "bash".into(),
            program: "git push".into(),
        }]
    );
}

#[test]
fn yolo_asks_nothing_but_deny_rules_still_deny() {
    let c = Case::new().rules(&[("write", "secrets/**", RuleDecision::Deny)]);
    assert_eq!(c.bash(Mode::Yolo, "rm -rf build"), Verdict::Allow);
    let secret = json!({"path": "secrets/key", "content": "x"});
    assert!(matches!(
        c.decide(Mode::Yolo, "write", false, secret),
        Verdict::Deny {
            by: ResolvedBy::Rule,
            ..
        }
    ));
}

#[test]
fn rule_precedence_is_deny_then_ask_then_allow() {
    let c = Case::new().rules(&[
        ("bash", "git*", RuleDecision::Allow),
        ("bash", "git push*", RuleDecision::Ask),
        ("bash", "git push --force*", RuleDecision::Deny),
    ]);
    assert_eq!(c.bash(Mode::Write, "git status"), Verdict::Allow);
    assert!(is_ask(&c.bash(Mode::Write, "git push origin main")));
    assert!(matches!(
        c.bash(Mode::Write, "git push --force origin"),
        Verdict::Deny { .. }
    ));
    // An ask rule asks even in read mode for a read-only tool.
    let c = Case::new().rules(&[("read", "private/**", RuleDecision::Ask)]);
    assert!(is_ask(&c.decide(
        Mode::Read,
        "read",
        true,
        json!({"path": "private/x"})
    )));
}

#[test]
fn an_allow_rule_never_reaches_outside_the_workspace() {
    let c = Case::new().rules(&[("bash", "rm", RuleDecision::Allow)]);
    assert_eq!(c.bash(Mode::Write, "rm -rf build"), Verdict::Allow);
    assert!(is_person_ask(&c.bash(Mode::Write, "rm -rf /etc/x")));
}

#[test]
fn a_broken_workspace_rules_file_makes_writes_ask() {
    let c = Case::new();
    let request = Request {
        tool: "write",
        tool_read_only: false,
        tool_destructive: false,
        args: &json!({"path": "a", "content": ""}),
        mode: Mode::Write,
        workspace: c.ws.path(),
        sandbox: crate::SessionSandbox::Off,
    };
    let rules = Rules {
        config: &c.config,
        workspace: Err("bad toml".into()),
    };
    assert!(is_ask(&decide(&request, &rules, &c.grants)));
}

#[test]
fn a_broken_workspace_rules_file_lets_read_only_calls_run_and_its_asks_persist() {
    let c = Case::new();
    let rules = Rules {
        config: &c.config,
        workspace: Err("bad toml".into()),
    };
    let in_write_mode = |tool, read_only, args: Value| {
        let request = Request {
            tool,
            tool_read_only: read_only,
            tool_destructive: false,
            args: &args,
            mode: Mode::Write,
            workspace: c.ws.path(),
            sandbox: crate::SessionSandbox::Off,
        };
        decide(&request, &rules, &c.grants)
    };
    assert_eq!(
        in_write_mode("read", true, json!({"path": "a"})),
        Verdict::Allow
    );
    assert_eq!(
        in_write_mode("bash", false, json!({"command": "ls"})),
        Verdict::Allow
    );
    match in_write_mode("bash", false, json!({"command": "touch a"})) {
        Verdict::Ask {
            reason, persist, ..
        } => {
            assert!(reason.contains("bad toml"), "{reason}");
            assert!(persist, "the answer to a broken file may store a rule");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_ask_rule_asks_in_read_and_write_mode_not_in_yolo_and_a_grant_answers_it() {
    let mut c = Case::new().rules(&[("bash", "git log*", RuleDecision::Ask)]);
    for mode in [Mode::Read, Mode::Write] {
        match c.bash(mode, "git log") {
            Verdict::Ask { persist, .. } => assert!(!persist, "{mode:?}"),
            other => panic!("{mode:?}: {other:?}"),
        }
    }
    assert_eq!(c.bash(Mode::Yolo, "git log"), Verdict::Allow);
    let scopes = ask_scopes(&c.bash(Mode::Write, "git log")).to_vec();
    c.grants.grant(&scopes);
    assert_eq!(c.bash(Mode::Write, "git log"), Verdict::Allow);
}

#[test]
fn allow_always_rules_match_their_scopes() {
    let rules = rules_for(&[
        Scope::Program {
            tool: "bash".into(),
            program: "git push".into(),
        },
        Scope::Folder {
            tool: "write".into(),
            folder: "src".into(),
        },
    ]);
    let set = RuleSet::new(&rules).unwrap();
    let got = |tool, subject| set.decide(tool, subject).map(|(d, _)| d);
    let c = crate::shell::classify(
        "git push origin",
        std::path::Path::new("/ws"),
        std::path::Path::new("/ws"),
    );
    let facts = crate::command_rules::CommandFacts {
        raw: "git push origin",
        lines: &c.commands,
        complete: c.complete,
    };
    assert_eq!(
        crate::command_rules::decide(&[&set], "bash", &facts).map(|(d, _)| d),
        Some(RuleDecision::Allow)
    );
    assert_eq!(
        got("write", Subject::Path("src/a/b.rs")),
        Some(RuleDecision::Allow)
    );
    assert_eq!(got("write", Subject::Path("docs/a.md")), None);
}

#[test]
fn plugin_tools_are_not_read_as_shell_commands_and_destructive_ones_ask() {
    let c = Case::new();
    // A plugin tool's `command` argument is not a shell command to classify.
    assert_eq!(
        c.decide(
            Mode::Write,
            "mcp__s__run",
            false,
            json!({"command": "rm -rf /"})
        ),
        Verdict::Allow
    );
    let request = |destructive: bool, read_only: bool, mode: Mode| Request {
        tool: "mcp__s__drop_table",
        tool_read_only: read_only,
        tool_destructive: destructive,
        args: &Value::Null,
        mode,
        workspace: c.ws.path(),
        sandbox: crate::SessionSandbox::Off,
    };
    let rules = Rules {
        config: &c.config,
        workspace: Ok(&c.workspace),
    };
    match decide(&request(true, false, Mode::Write), &rules, &c.grants) {
        Verdict::Ask { scopes, .. } => assert_eq!(
            scopes,
            vec![Scope::Tool {
                tool: "mcp__s__drop_table".into()
            }]
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        decide(&request(true, false, Mode::Yolo), &rules, &c.grants),
        Verdict::Allow
    );
    assert!(matches!(
        decide(&request(true, false, Mode::Read), &rules, &c.grants),
        Verdict::Deny { .. }
    ));
    assert_eq!(
        decide(&request(false, true, Mode::Read), &rules, &c.grants),
        Verdict::Allow
    );
}

/// What an ask grants: nothing for an ask only a person may answer.
fn ask_scopes(v: &Verdict) -> &[Scope] {
    match v {
        Verdict::Ask { scopes, .. } => scopes,
        Verdict::AskPerson(_) => &[],
        other => panic!("expected ask, got {other:?}"),
    }
}

#[test]
fn an_allow_rule_covers_a_compound_command_only_when_it_covers_every_part() {
    let c = Case::new().rules(&[("bash", "rm", RuleDecision::Allow)]);
    assert_eq!(c.bash(Mode::Write, "rm -rf build2"), Verdict::Allow);
    assert!(is_ask(&c.bash(Mode::Write, "rm -f a.txt; git clean -fdx")));
    assert!(is_ask(&c.bash(Mode::Write, "rm -rf x && git push")));
    assert_eq!(c.bash(Mode::Write, "ls && rm -rf build2"), Verdict::Allow);
}

#[test]
fn bash_deny_rules_cover_wrapped_commands_and_process_start() {
    let c = Case::new().rules(&[
        ("bash", "touch*", RuleDecision::Deny),
        ("bash", "git push*", RuleDecision::Ask),
    ]);
    for command in [
        "env touch t1",
        "bash -c \"touch t2\"",
        "(touch t3)",
        "FOO=1 touch t4",
        "echo $(touch t5)",
        "timeout 5 touch t6",
        "/usr/bin/touch t7",
        "if true; then touch t9; fi",
    ] {
        assert!(
            matches!(c.bash(Mode::Write, command), Verdict::Deny { .. }),
            "{command}"
        );
    }
    let start = json!({"action": "start", "command": "touch t10"});
    assert!(matches!(
        c.decide(Mode::Write, "process", false, start),
        Verdict::Deny { .. }
    ));
    match c.bash(Mode::Write, "git -C . push") {
        Verdict::Ask { persist, .. } => assert!(!persist, "an ask rule's answer is not stored"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deny_rules_apply_to_opaque_commands_in_every_mode() {
    let c = Case::new().rules(&[("bash", "touch*", RuleDecision::Deny)]);
    for command in [
        "T=touch; $T a",
        "echo touch a | bash",
        "bash <<< \"touch a\"",
        "env -S \"touch a\"",
        "flock F touch a",
        "ionice touch a",
        "chroot / touch a",
        "setpriv --reuid=1 touch a",
        "nice -n 1 touch a",
    ] {
        for mode in [Mode::Yolo, Mode::Write] {
            let v = c.bash(mode, command);
            assert!(
                matches!(v, Verdict::Deny { .. }),
                "{command} in {mode:?}: {v:?}"
            );
        }
    }
    // Without rules an opaque command still runs in yolo.
    assert_eq!(
        Case::new().bash(Mode::Yolo, "T=touch; $T a"),
        Verdict::Allow
    );
    assert_eq!(c.bash(Mode::Yolo, "ls | wc -l"), Verdict::Allow);
}

#[test]
fn a_write_rule_covers_edit() {
    let c = Case::new().rules(&[("write", "secrets/**", RuleDecision::Deny)]);
    let edit = json!({"path": "secrets/key.env", "old": "a", "new": "b"});
    assert!(matches!(
        c.decide(Mode::Write, "edit", false, edit),
        Verdict::Deny { .. }
    ));
}

#[test]
fn protected_paths_always_ask_in_write_mode_and_are_never_granted() {
    let mut c = Case::new();
    c.grants.grant(&[
        Scope::Folder {
            tool: "write".into(),
            folder: ".".into(),
        },
        Scope::Program {
            tool: "bash".into(),
            program: "tee".into(),
        },
    ]);
    for path in [".amber/rules.toml", ".git/hooks/pre-commit", ".git/config"] {
        let args = json!({"path": path, "content": "x"});
        let v = c.decide(Mode::Write, "write", false, args.clone());
        assert!(ask_scopes(&v).is_empty(), "{path}: {v:?}");
        assert_eq!(
            c.decide(Mode::Yolo, "write", false, args.clone()),
            Verdict::Allow
        );
        assert!(matches!(
            c.decide(Mode::Read, "write", false, args),
            Verdict::Deny { .. }
        ));
        let read = json!({ "path": path });
        assert_eq!(c.decide(Mode::Write, "read", true, read), Verdict::Allow);
    }
    for command in [
        "echo '[[rules]]' > .amber/rules.toml",
        "tee -a .amber/rules.toml < x",
        "cp hook .git/hooks/pre-commit",
        "chmod +x .git/hooks/pre-commit",
        "cd .git/hooks && echo x > pre-commit",
        "mv cfg .git/config",
    ] {
        let v = c.bash(Mode::Write, command);
        assert!(ask_scopes(&v).is_empty(), "{command}: {v:?}");
    }
    // Elsewhere the grants still hold.
    let ok = json!({"path": "src/a.rs", "content": "x"});
    assert_eq!(c.decide(Mode::Write, "write", false, ok), Verdict::Allow);
    assert_eq!(c.bash(Mode::Write, "tee -a notes.txt < x"), Verdict::Allow);
}

#[test]
fn program_running_git_config_and_outside_build_dirs_ask() {
    let c = Case::new();
    for command in [
        "git config core.hooksPath /tmp/h",
        "git config alias.st '!sh -c x'",
        "git init /tmp/amber-outside/g2",
        "cargo build --target-dir /tmp/amber-outside",
        "make -C /tmp/amber-outside",
        "npm --prefix /tmp/amber-outside install",
    ] {
        assert!(is_ask(&c.bash(Mode::Write, command)), "{command}");
    }
    for command in [
        "git config --get user.name",
        "git config -l",
        "git init sub",
    ] {
        assert_eq!(c.bash(Mode::Write, command), Verdict::Allow, "{command}");
    }
}

#[path = "engine_writes_tests.rs"]
mod writes;

#[path = "engine_reads_tests.rs"]
mod reads;

#[path = "engine_fetch_tests.rs"]
mod fetch;

#[path = "engine_escalation_tests.rs"]
mod escalation;
