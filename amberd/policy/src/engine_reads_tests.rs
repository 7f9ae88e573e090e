//! Engine tests for what commands read: outside the workspace (denied in read mode, asked
//! and never granted in write mode, allowed in yolo, unless a `read` rule naming the path
//! allows it), secret locations (asked in every mode, file tools included), `read` deny
//! rules judging what commands read, and reads through symlinks.

use super::*;
use crate::engine::decide_with;
use crate::secrets::SecretLocations;

/// An ask only a person may answer: no rule, grant or hook covers it.
fn never_granted(v: &Verdict) -> bool {
    matches!(v, Verdict::AskPerson(_))
}

/// A workspace, a sibling `outside/` and a `home/` (with `.ssh/id_x`), all in one temp dir.
struct Reads {
    case: Case,
    root: std::path::PathBuf,
    secrets: SecretLocations,
}

impl Reads {
    fn new(rules: &[(&str, &str, RuleDecision)]) -> Reads {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["ws", "outside/data", "home/.ssh", "amber-data"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("home/.ssh/id_x"), "k").unwrap();
        std::fs::write(root.join("outside/data/a.txt"), "a").unwrap();
        std::fs::write(root.join("ws/.env"), "T=1").unwrap();
        let mut case = Case::new().rules(rules);
        // The workspace lives inside `root`, which the temp dir owns.
        case.ws = dir;
        let secrets = SecretLocations::new(Some(root.join("home")), [root.join("amber-data")]);
        Reads {
            case,
            root,
            secrets,
        }
    }

    fn ws(&self) -> std::path::PathBuf {
        self.root.join("ws")
    }

    fn decide(&self, mode: Mode, tool: &str, read_only: bool, args: Value) -> Verdict {
        let ws = self.ws();
        let request = Request {
            tool,
            tool_read_only: read_only,
            tool_destructive: false,
            args: &args,
            mode,
            workspace: &ws,
            sandbox: crate::SessionSandbox::Off,
        };
        let rules = Rules {
            config: &self.case.config,
            workspace: Ok(&self.case.workspace),
        };
        decide_with(&request, &rules, &self.case.grants, &self.secrets)
    }

    fn bash(&self, mode: Mode, command: &str) -> Verdict {
        let command = command.replace("OUT", &self.root.join("outside").display().to_string());
        self.decide(mode, "bash", false, json!({ "command": command }))
    }
}

fn is_deny(v: &Verdict) -> bool {
    matches!(v, Verdict::Deny { .. })
}

#[test]
fn outside_reads_are_denied_in_read_mode_asked_in_write_mode_and_allowed_in_yolo() {
    let r = Reads::new(&[]);
    for command in [
        "cat OUT/data/a.txt",
        "grep -rn x OUT",
        "ls OUT",
        "wc -l < OUT/data/a.txt",
        "git -C OUT status",
        "cd OUT && cat data/a.txt",
        "cat $F",
        "echo OUT/data/a.txt | xargs cat",
        "cat ../outside/data/a.txt",
        "cp OUT/data/a.txt copied.txt",
        "rsync -a OUT/data/ mirror/",
    ] {
        let v = r.bash(Mode::Read, command);
        assert!(is_deny(&v), "{command}: {v:?}");
        let v = r.bash(Mode::Write, command);
        assert!(is_ask(&v), "{command}: {v:?}");
        assert_eq!(r.bash(Mode::Yolo, command), Verdict::Allow, "{command}");
    }
    // The outside read of a command never becomes a grant.
    assert!(never_granted(&r.bash(Mode::Write, "cat OUT/data/a.txt")));
    for command in [
        "cat a.txt",
        "grep -rn x .",
        "ls -la src",
        "cat /dev/null",
        "git status",
    ] {
        assert_eq!(r.bash(Mode::Read, command), Verdict::Allow, "{command}");
    }
    assert_eq!(r.bash(Mode::Write, "cp a.txt b.txt"), Verdict::Allow);
}

#[test]
fn a_read_rule_naming_an_outside_directory_allows_reads_there_only() {
    // Each Reads has its own temp dir: the rule names this one's outside directory.
    let probe = Reads::new(&[]);
    let pattern = format!("{}/outside/data/**", probe.root.display());
    let r = Reads {
        case: Case {
            config: RuleSet::new(&[
                Rule {
                    tool: "read".into(),
                    pattern,
                    host: None,
                    sandbox: None,
                    decision: RuleDecision::Allow,
                },
                Rule {
                    tool: "read".into(),
                    pattern: "**".into(),
                    host: None,
                    sandbox: None,
                    decision: RuleDecision::Allow,
                },
            ])
            .unwrap(),
            ..probe.case
        },
        ..probe
    };
    assert_eq!(r.bash(Mode::Read, "cat OUT/data/a.txt"), Verdict::Allow);
    assert_eq!(r.bash(Mode::Write, "grep -r a OUT/data"), Verdict::Allow);
    // `**` is a workspace glob: it never reaches outside.
    assert!(is_deny(&r.bash(Mode::Read, "cat OUT/other.txt")));
    assert!(is_deny(&r.bash(Mode::Read, "cat /etc/hostname")));
}

#[test]
fn secret_locations_ask_a_person_in_every_mode_whatever_the_rules() {
    let r = Reads::new(&[]);
    let home = r.root.join("home");
    let key = home.join(".ssh/id_x");
    for command in [
        "cat .env".to_owned(),
        "grep T .env".to_owned(),
        format!("cat {}", key.display()),
        format!("grep -r k {}", home.display()),
        format!("ls {}/amber-data", r.root.display()),
        "cp ~/.ssh/id_x stolen".to_owned(),
        "cp -r ~/.ssh keys".to_owned(),
        "cd ~ && cat .ssh/id_x".to_owned(),
        "cd ~/.ssh && cat id_x".to_owned(),
    ] {
        let v = r.bash(Mode::Yolo, &command);
        assert!(never_granted(&v), "{command}: {v:?}");
        let v = r.bash(Mode::Write, &command);
        assert!(never_granted(&v), "{command}: {v:?}");
    }
    assert!(never_granted(&r.bash(Mode::Read, "cat .env")));
    // Outside secrets are outside reads first: read mode denies them.
    assert!(is_deny(
        &r.bash(Mode::Read, &format!("cat {}", key.display()))
    ));
    // The file tools too.
    for mode in [Mode::Read, Mode::Write, Mode::Yolo] {
        let v = r.decide(mode, "read", true, json!({ "path": ".env" }));
        assert!(never_granted(&v), "{mode:?}: {v:?}");
    }
    assert_eq!(
        r.decide(Mode::Yolo, "read", true, json!({ "path": ".env.example" })),
        Verdict::Allow
    );
    // No rule allows them, not even one naming the path, nor a rule for every path.
    for rules in [
        &[("read", ".env", RuleDecision::Allow)][..],
        &[("*", "**", RuleDecision::Allow)][..],
        &[("bash", "cat", RuleDecision::Allow)][..],
    ] {
        let allowed = Reads::new(rules);
        assert!(
            never_granted(&allowed.bash(Mode::Yolo, "cat .env")),
            "{rules:?}"
        );
        let v = allowed.decide(Mode::Read, "read", true, json!({ "path": ".env" }));
        assert!(never_granted(&v), "{rules:?}: {v:?}");
    }
    // A deny rule still denies.
    let denied = Reads::new(&[("read", ".env", RuleDecision::Deny)]);
    assert!(is_deny(&denied.bash(Mode::Yolo, "cat .env")));
    // `~` stands for the daemon's home.
    let v = r.bash(Mode::Yolo, "cat ~/.ssh/id_x");
    assert!(never_granted(&v), "{v:?}");
    assert_eq!(r.bash(Mode::Yolo, "cat ~/notes.txt"), Verdict::Allow);
}

#[test]
fn read_rules_judge_what_commands_read_and_symlinks_are_followed() {
    let r = Reads::new(&[("read", "private/**", RuleDecision::Deny)]);
    let ws = r.ws();
    std::fs::create_dir_all(ws.join("private")).unwrap();
    assert!(is_deny(&r.bash(Mode::Yolo, "cat private/key")));
    assert!(is_deny(&r.bash(Mode::Write, "grep x private")));
    assert_eq!(r.bash(Mode::Write, "cat public.txt"), Verdict::Allow);
    // A link inside pointing outside reads outside.
    std::os::unix::fs::symlink(r.root.join("outside"), ws.join("lnk")).unwrap();
    assert!(is_deny(&r.bash(Mode::Read, "cat lnk/data/a.txt")));
    assert!(never_granted(&r.bash(Mode::Write, "cat lnk/data/a.txt")));
    // A link to a secret is a secret read.
    std::os::unix::fs::symlink(r.root.join("home/.ssh"), ws.join("keys")).unwrap();
    assert!(never_granted(&r.bash(Mode::Yolo, "cat keys/id_x")));
}
