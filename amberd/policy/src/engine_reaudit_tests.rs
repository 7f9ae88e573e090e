//! Engine tests from the policy re-audit: unresolvable write targets, opaque commands
//! against deny rules in yolo, `write` rules judging bash writes, `npm install` grants.

use super::*;

fn never_granted(v: &Verdict) -> bool {
    matches!(v, Verdict::Ask { scopes, persist: false, .. } if scopes.is_empty())
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
