//! The policy decision for one tool call (SEED.md "approvals"): allow, deny, or ask.
//!
//! Order: a deny rule always wins (in every mode); read mode allows only read-only calls
//! (read-only tools, and commands `shell_classify` finds read-only); yolo allows the rest
//! without asking; write mode follows ask/allow rules, then lets file tools and benign
//! in-workspace commands run and sends destructive, outside-workspace or unknown commands
//! to approval — unless a session grant already covers every scope of the call.
//! Confinement is not decided here: the tools themselves refuse paths outside the workspace.

use std::path::{Path, PathBuf};

use amber_proto::{Mode, ResolvedBy};
use serde_json::Value;

use super::grants::{Grants, Scope};
use super::paths::confine;
use super::rules::{Rule, RuleDecision, RuleSet, Subject};
use super::shell::{ShellClass, classify};

/// One call, as the policy sees it.
pub struct Request<'a> {
    pub tool: &'a str,
    /// The tool never changes anything (`read`, `search`, …).
    pub tool_read_only: bool,
    /// The tool says it may destroy data (an MCP `destructiveHint`): write mode asks.
    pub tool_destructive: bool,
    pub args: &'a Value,
    pub mode: Mode,
    pub workspace: &'a Path,
}

/// The rules in force: the config's and the workspace's (`Err` when its file is broken —
/// then nothing is allowed by rule and writes ask).
pub struct Rules<'a> {
    pub config: &'a RuleSet,
    pub workspace: Result<&'a RuleSet, String>,
}

/// The verdict for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny {
        reason: String,
        by: ResolvedBy,
    },
    Ask {
        reason: String,
        /// What an `allow_session` answer grants (empty: nothing can be granted).
        scopes: Vec<Scope>,
    },
}

/// What the call touches.
enum Target {
    Command {
        command: String,
        class: ShellClass,
        reason: String,
        outside: bool,
        programs: Vec<String>,
    },
    Path {
        relative: String,
        folder: String,
    },
    Nothing,
}

pub fn decide(req: &Request<'_>, rules: &Rules<'_>, grants: &Grants) -> Verdict {
    let target = target(req);
    let subject = match &target {
        Target::Command { command, .. } => Subject::Command(command),
        Target::Path { relative, .. } => Subject::Path(relative),
        Target::Nothing => Subject::None,
    };
    let rule = strongest(rules, req.tool, subject);
    if let Some((RuleDecision::Deny, rule)) = &rule {
        return Verdict::Deny {
            reason: format!("denied by rule `{} {}`", rule.tool, rule.pattern),
            by: ResolvedBy::Rule,
        };
    }
    let read_only = req.tool_read_only
        || (req.tool == "bash"
            && matches!(
                &target,
                Target::Command {
                    class: ShellClass::ReadOnly,
                    outside: false,
                    ..
                }
            ));
    let scopes = scopes(req.tool, &target);
    let ask = |reason: String| {
        if grants.covers(&scopes) {
            Verdict::Allow
        } else {
            Verdict::Ask {
                reason,
                scopes: scopes.clone(),
            }
        }
    };
    let ask_rule = matches!(&rule, Some((RuleDecision::Ask, _)));
    let rule_text = |r: &Option<(RuleDecision, Rule)>| {
        r.as_ref()
            .map(|(_, r)| format!("rule `{} {}` asks", r.tool, r.pattern))
            .unwrap_or_default()
    };

    match req.mode {
        Mode::Read if !read_only => Verdict::Deny {
            reason: format!(
                "read mode allows only read-only tools; `{}` {}",
                req.tool,
                match &target {
                    Target::Command { reason, .. } => format!("is not read-only: {reason}"),
                    _ => "changes things".to_owned(),
                }
            ),
            by: ResolvedBy::Policy,
        },
        Mode::Read if ask_rule => ask(rule_text(&rule)),
        Mode::Read | Mode::Yolo => Verdict::Allow,
        Mode::Write => {
            if ask_rule {
                return ask(rule_text(&rule));
            }
            if rules.workspace.is_err() && !read_only {
                let err = rules.workspace.as_ref().err().cloned().unwrap_or_default();
                return ask(format!("the workspace rules file is broken ({err})"));
            }
            match &target {
                Target::Command {
                    class,
                    reason,
                    outside,
                    ..
                } => {
                    // An allow rule never lets a command reach outside the workspace.
                    let allowed_by_rule =
                        matches!(&rule, Some((RuleDecision::Allow, _))) && !outside;
                    if allowed_by_rule {
                        return Verdict::Allow;
                    }
                    match class {
                        _ if *outside => Verdict::Ask {
                            reason: format!("writes outside the workspace: {reason}"),
                            // Never grantable: a session grant is for the workspace only.
                            scopes: Vec::new(),
                        },
                        ShellClass::ReadOnly | ShellClass::Benign => Verdict::Allow,
                        ShellClass::Destructive | ShellClass::Unknown => ask(reason.clone()),
                    }
                }
                _ if req.tool_destructive && !read_only => {
                    ask(format!("`{}` says it may destroy data", req.tool))
                }
                Target::Path { .. } | Target::Nothing => Verdict::Allow,
            }
        }
    }
}

fn strongest(rules: &Rules<'_>, tool: &str, subject: Subject<'_>) -> Option<(RuleDecision, Rule)> {
    let from_config = rules.config.decide(tool, subject);
    let from_workspace = rules
        .workspace
        .as_ref()
        .ok()
        .and_then(|set| set.decide(tool, subject));
    [from_config, from_workspace]
        .into_iter()
        .flatten()
        .max_by_key(|(decision, _)| *decision)
        .map(|(d, r)| (d, r.clone()))
}

/// Tools whose `command` argument is a shell command, and whose `path` is a file.
const COMMAND_TOOLS: &[&str] = &["bash", "process"];
const PATH_TOOLS: &[&str] = &["read", "write", "edit", "search"];

fn target(req: &Request<'_>) -> Target {
    let text = |key: &str| req.args.get(key).and_then(Value::as_str);
    // Only the built-in tools' arguments mean what their names say; a plugin or MCP tool
    // with a `command` argument is not running a shell command we could classify.
    if let Some(command) = text("command").filter(|_| COMMAND_TOOLS.contains(&req.tool)) {
        let cwd = text("cwd")
            .and_then(|c| confine(req.workspace, c).ok())
            .unwrap_or_else(|| req.workspace.to_owned());
        let c = classify(command, req.workspace, &cwd);
        return Target::Command {
            command: command.to_owned(),
            class: c.class,
            reason: c.reason,
            outside: c.outside_workspace,
            programs: c.scopes,
        };
    }
    if let Some(path) = text("path").filter(|_| PATH_TOOLS.contains(&req.tool)) {
        let relative = relative_path(req.workspace, path);
        let folder = Path::new(&relative)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ".".to_owned());
        return Target::Path { relative, folder };
    }
    Target::Nothing
}

/// The path relative to the workspace (lexically, for rule globs and folder scopes).
fn relative_path(workspace: &Path, path: &str) -> String {
    let absolute: PathBuf = match confine(workspace, path) {
        Ok(p) => p,
        Err(_) => return path.to_owned(),
    };
    // `confine` resolves symlinks; compare against the canonical root too.
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    absolute
        .strip_prefix(&root)
        .or_else(|_| absolute.strip_prefix(workspace))
        .map(|p| p.to_string_lossy().into_owned())
        .map(|p| if p.is_empty() { ".".to_owned() } else { p })
        .unwrap_or_else(|_| path.to_owned())
}

fn scopes(tool: &str, target: &Target) -> Vec<Scope> {
    match target {
        Target::Command { outside: true, .. } => Vec::new(),
        Target::Command { programs, .. } => programs
            .iter()
            .map(|program| Scope::Program {
                tool: tool.to_owned(),
                program: program.clone(),
            })
            .collect(),
        Target::Path { folder, .. } => vec![Scope::Folder {
            tool: tool.to_owned(),
            folder: folder.clone(),
        }],
        Target::Nothing => vec![Scope::Tool {
            tool: tool.to_owned(),
        }],
    }
}

/// The rules an `allow_always` answer persists for these scopes.
pub fn rules_for(scopes: &[Scope]) -> Vec<Rule> {
    scopes
        .iter()
        .map(|scope| match scope {
            Scope::Program { tool, program } => Rule {
                tool: tool.clone(),
                pattern: program.clone(),
                decision: RuleDecision::Allow,
            },
            Scope::Folder { tool, folder } => Rule {
                tool: tool.clone(),
                pattern: if folder == "." {
                    "**".to_owned()
                } else {
                    format!("{folder}/**")
                },
                decision: RuleDecision::Allow,
            },
            Scope::Tool { tool } => Rule {
                tool: tool.clone(),
                pattern: "*".to_owned(),
                decision: RuleDecision::Allow,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    struct Case {
        ws: tempfile::TempDir,
        config: RuleSet,
        workspace: RuleSet,
        grants: Grants,
    }

    impl Case {
        fn new() -> Case {
            Case {
                ws: tempfile::tempdir().unwrap(),
                config: RuleSet::default(),
                workspace: RuleSet::default(),
                grants: Grants::default(),
            }
        }

        fn rules(mut self, rules: &[(&str, &str, RuleDecision)]) -> Case {
            let rules: Vec<Rule> = rules
                .iter()
                .map(|(tool, pattern, decision)| Rule {
                    tool: (*tool).into(),
                    pattern: (*pattern).into(),
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

    fn is_ask(v: &Verdict) -> bool {
        matches!(v, Verdict::Ask { .. })
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
            Verdict::Ask { scopes, .. } => assert!(scopes.is_empty()),
            other => panic!("outside the workspace must still ask: {other:?}"),
        }
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
        assert!(is_ask(&c.bash(Mode::Write, "rm -rf /etc/x")));
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
        };
        let rules = Rules {
            config: &c.config,
            workspace: Err("bad toml".into()),
        };
        assert!(is_ask(&decide(&request, &rules, &c.grants)));
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
        assert_eq!(
            got("bash", Subject::Command("git push origin")),
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
}
