//! Engine tests for what commands write: targets the classifier cannot resolve (asked,
//! never granted, in write mode; denied elsewhere under a `write` deny rule), `write` and
//! `edit` path rules judging what a command writes, writes through symlinks, and
//! `apply_patch` judged by every path its patch names (where its links lead: an added file
//! or a move overwrites what is there).

use super::*;

/// An ask only a person may answer: no rule, grant or hook covers it.
fn never_granted(v: &Verdict) -> bool {
    matches!(v, Verdict::AskPerson(_))
}

#[test]
fn unresolvable_write_targets_ask_and_are_never_covered_by_rules_or_grants() {
    let mut c = Case::new().rules(&[
        ("bash", "rm", RuleDecision::Allow),
        ("bash", "echo", RuleDecision::Allow),
    ]);
    c.grants.grant(&[
        Scope::Program {
            tool: "bash".into(),
            program: "rm".into(),
        },
        Scope::Program {
            tool: "bash".into(),
            program: "echo".into(),
        },
    ]);
    assert_eq!(c.bash(Mode::Write, "rm -rf build2"), Verdict::Allow);
    assert_eq!(c.bash(Mode::Write, "echo x > out"), Verdict::Allow);
    for command in [
        "rm -rf \"$(pwd)/../outside/zz\"",
        "rm -rf ${X:-/outside/zz}",
        "D=..; rm -rf $D/outside/zz",
        "rm -rf `echo ..`/outside/zz",
        "D=/outside; echo pwned > $D/h",
        "CDPATH=/outside cd dir && echo x > f",
        "export CDPATH=/outside; cd dir && echo x > f",
        "cd - && rm -f f",
    ] {
        let v = c.bash(Mode::Write, command);
        assert!(never_granted(&v), "{command}: {v:?}");
    }
}

#[test]
fn an_unresolvable_write_target_is_denied_by_a_write_deny_rule_outside_write_mode() {
    let c = Case::new().rules(&[("write", "secrets/**", RuleDecision::Deny)]);
    for mode in [Mode::Read, Mode::Yolo] {
        match c.bash(mode, "rm -f $F") {
            Verdict::Deny { reason, by } => {
                assert_eq!(by, ResolvedBy::Rule, "{mode:?}");
                assert!(reason.contains("secrets/**"), "{mode:?}: {reason}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
    }
    assert!(never_granted(&c.bash(Mode::Write, "rm -f $F")));
}

#[test]
fn write_rules_judge_what_bash_writes() {
    let c = Case::new().rules(&[
        ("write", "secrets/**", RuleDecision::Deny),
        ("edit", "docs/**", RuleDecision::Ask),
    ]);
    for mode in [Mode::Write, Mode::Yolo] {
        for command in [
            "echo x > secrets/key.txt",
            "cd secrets && touch key.txt",
            "cp a secrets/b",
            "rm secrets/key.txt",
        ] {
            let v = c.bash(mode, command);
            assert!(
                matches!(v, Verdict::Deny { .. }),
                "{command} in {mode:?}: {v:?}"
            );
        }
    }
    assert!(is_ask(&c.bash(Mode::Write, "echo x > docs/a.md")));
    assert_eq!(c.bash(Mode::Write, "echo x > src/a.rs"), Verdict::Allow);
    // An unresolvable target might be a secret: asks in write mode, refused in yolo.
    assert!(never_granted(&c.bash(Mode::Write, "echo x > $F")));
    assert!(matches!(
        c.bash(Mode::Yolo, "echo x > $F"),
        Verdict::Deny { .. }
    ));
    assert_eq!(Case::new().bash(Mode::Yolo, "echo x > $F"), Verdict::Allow);
    // A `*` path rule (hiding secrets from every tool) judges bash writes too, but does not
    // turn every opaque command into a denial.
    let star = Case::new().rules(&[("*", "secrets/**", RuleDecision::Deny)]);
    assert!(matches!(
        star.bash(Mode::Yolo, "echo x > secrets/k"),
        Verdict::Deny { .. }
    ));
    assert!(matches!(
        star.bash(Mode::Yolo, "echo x > $F"),
        Verdict::Deny { .. }
    ));
    assert_eq!(star.bash(Mode::Yolo, "T=ls; $T"), Verdict::Allow);
}

#[test]
fn writes_through_a_symlink_that_leaves_the_workspace_ask() {
    let c = Case::new();
    let outside = tempfile::tempdir().unwrap();
    let ws = c.ws.path();
    std::os::unix::fs::symlink(outside.path(), ws.join("lnk")).unwrap();
    std::os::unix::fs::symlink(ws.join(".git"), ws.join("gitdir")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    for command in [
        "echo x > lnk/f",
        "cp a.txt lnk/copied",
        "cd lnk && touch f",
        "cd lnk && make",
        "mkdir -p lnk/sub",
    ] {
        let v = c.bash(Mode::Write, command);
        assert!(ask_scopes(&v).is_empty(), "{command}: {v:?}");
    }
    let v = c.bash(Mode::Write, "echo x > gitdir/hooks/pre-commit");
    assert!(ask_scopes(&v).is_empty(), "{v:?}");
    // Writing inside is fine; reading through the link reads outside: it asks, never granted.
    assert_eq!(
        c.bash(Mode::Write, "cat a.txt; echo x > b.txt"),
        Verdict::Allow
    );
    let v = c.bash(Mode::Write, "cat lnk/f");
    assert!(is_ask(&v) && ask_scopes(&v).is_empty(), "{v:?}");
    // The file tools are confined on their own; the engine does not ask for them.
    assert!(is_ask(&c.bash(Mode::Write, "ln -s /etc etc2")));
}

fn patch(c: &Case, mode: Mode, patch: &str) -> Verdict {
    c.decide(mode, "apply_patch", false, json!({ "patch": patch }))
}

#[test]
fn apply_patch_is_judged_by_every_path_its_headers_name() {
    let c = Case::new();
    let plain = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: docs/n.md\n+x\n*** End Patch\n";
    assert_eq!(patch(&c, Mode::Write, plain), Verdict::Allow);
    assert_eq!(patch(&c, Mode::Yolo, plain), Verdict::Allow);
    assert!(matches!(
        patch(&c, Mode::Read, plain),
        Verdict::Deny {
            by: ResolvedBy::Policy,
            ..
        }
    ));
    for (protected, shown) in [
        ("*** Add File: .amber/rules.toml\n+x\n", ".amber/rules.toml"),
        ("*** Delete File: .git/config\n", ".git/config"),
        (
            "*** Update File: src/a.rs\n*** Move to: .git/hooks/pre-commit\n",
            ".git/hooks/pre-commit",
        ),
    ] {
        let text = format!(
            "*** Begin Patch\n*** Update File: ok.rs\n@@\n-a\n+b\n{protected}*** End Patch"
        );
        let v = patch(&c, Mode::Write, &text);
        assert!(never_granted(&v), "{protected}: {v:?}");
        let Verdict::AskPerson(ask) = v else {
            unreachable!()
        };
        assert!(ask.reason().contains(shown), "{}", ask.reason());
        assert_eq!(
            patch(&c, Mode::Yolo, &text),
            Verdict::Allow,
            "yolo asks nothing"
        );
    }
}

#[test]
fn a_patch_overwriting_a_protected_file_through_a_link_asks_a_person() {
    let c = Case::new();
    let ws = c.ws.path();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink(".git/config", ws.join("cfg")).unwrap();
    for body in [
        "*** Add File: cfg\n+x\n",
        "*** Update File: a.rs\n*** Move to: cfg\n@@\n-a\n+b\n",
    ] {
        let text = format!("*** Begin Patch\n{body}*** End Patch\n");
        let v = patch(&c, Mode::Write, &text);
        let Verdict::AskPerson(ask) = v else {
            panic!("{body}: {v:?}");
        };
        assert!(ask.reason().contains(".git/config"), "{}", ask.reason());
    }
}

#[test]
fn write_rules_judge_each_file_of_a_patch_and_grants_are_per_folder() {
    let mut c = Case::new().rules(&[
        ("write", "secrets/**", RuleDecision::Deny),
        ("write", "docs/**", RuleDecision::Ask),
    ]);
    let denied = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Delete File: secrets/k\n*** End Patch";
    assert!(matches!(
        patch(&c, Mode::Write, denied),
        Verdict::Deny {
            by: ResolvedBy::Rule,
            ..
        }
    ));
    let asked = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Update File: docs/x.md\n@@\n-a\n+b\n*** End Patch";
    let Verdict::Ask { scopes, .. } = patch(&c, Mode::Write, asked) else {
        panic!("a docs write asks");
    };
    let folder = |f: &str| Scope::Folder {
        tool: "apply_patch".into(),
        folder: f.into(),
    };
    assert_eq!(scopes, [folder("src"), folder("docs")]);
    c.grants.grant(&scopes);
    assert_eq!(
        patch(&c, Mode::Write, asked),
        Verdict::Allow,
        "the grant covers both folders"
    );
}
