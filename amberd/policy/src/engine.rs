//! The policy decision for one tool call (SEED.md "approvals"): allow, deny, or ask.
//!
//! Order: a deny rule always wins (in every mode); read mode allows only read-only calls
//! (read-only tools, and commands `shell_classify` finds read-only); yolo allows the rest
//! without asking; write mode follows ask/allow rules, then lets file tools and benign
//! in-workspace commands run and sends destructive, outside-workspace or unknown commands
//! to approval — unless a session grant already covers every scope of the call. Writes to
//! protected paths (`protected`) and writes outside the workspace (lexically, or through a
//! symlink inside it) always ask in write mode: no allow rule or grant covers them, and
//! neither do write targets the classifier cannot resolve (`rm -rf $D/x`). The path rules
//! of `write` and `edit` also judge the paths a command writes; with a `write`/`edit` deny
//! rule, an unresolvable write target is denied in read and yolo mode.
//! What a command reads counts like the file tools' paths: outside the workspace it is denied
//! in read mode and asks (never granted) in write mode unless a `read` allow rule naming the
//! path allows it; secret locations (`secrets`) ask in every mode, yolo included, for commands
//! and file tools alike, unless a rule allows them.
//! Confinement is not decided here: the tools themselves refuse paths outside the workspace.

use std::path::Path;

use amber_proto::{Mode, ResolvedBy};
use serde_json::Value;

use super::command_rules::{self, CommandFacts};
use super::grants::{Grants, Scope};
use super::rules::{Rule, RuleDecision, RuleSet, Subject};
use super::secrets::SecretLocations;
use super::shell::ShellClass;
use super::target::{ReadCheck, Target, scopes, target};

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
        /// Whether `allow_always` may persist allow rules. Not when an ask rule asked:
        /// an allow rule would lose to it (ask > allow), so the answer counts for the
        /// session only.
        persist: bool,
    },
}

pub fn decide(req: &Request<'_>, rules: &Rules<'_>, grants: &Grants) -> Verdict {
    decide_with(req, rules, grants, SecretLocations::installed())
}

/// [`decide`] with these secret locations (tests give their own).
pub(crate) fn decide_with(
    req: &Request<'_>,
    rules: &Rules<'_>,
    grants: &Grants,
    secrets: &SecretLocations,
) -> Verdict {
    let target = target(req.tool, req.args, req.workspace, secrets);
    let rule = strongest(rules, req.tool, &target);
    if let Some((RuleDecision::Deny, rule)) = &rule {
        return Verdict::Deny {
            reason: format!("denied by rule `{} {}`", rule.tool, rule.pattern),
            by: ResolvedBy::Rule,
        };
    }
    // A write nobody can resolve might hit what a `write` deny rule protects: outside
    // write mode (where it asks, never granted) it is refused.
    if let Target::Command(c) = &target
        && c.unresolved
        && req.mode != Mode::Write
        && let Some(rule) = write_deny_rule(rules)
    {
        return Verdict::Deny {
            reason: format!(
                "a write target cannot be resolved, and rule `{} {}` denies writes",
                rule.tool, rule.pattern
            ),
            by: ResolvedBy::Rule,
        };
    }
    // Reads outside the workspace that no `read` rule allows, and secret reads no rule
    // allows (outside reads need a rule naming an absolute or `~/` path).
    let (outside_reads, secret_reads) = match &target {
        Target::Command(c) => (
            c.reads
                .iter()
                .filter(|r| r.outside && !read_allowed(rules, r, true))
                .map(|r| r.shown.clone())
                .collect::<Vec<_>>(),
            c.reads
                .iter()
                .filter(|r| r.secret.is_some() && !read_allowed(rules, r, r.outside))
                .filter_map(|r| r.secret.clone())
                .collect::<Vec<_>>(),
        ),
        Target::Path {
            secret: Some(why), ..
        } if !matches!(&rule, Some((RuleDecision::Allow, _))) => (Vec::new(), vec![why.clone()]),
        _ => (Vec::new(), Vec::new()),
    };
    let read_only = req.tool_read_only
        || (req.tool == "bash"
            && matches!(
                &target,
                Target::Command(c) if c.class == ShellClass::ReadOnly && !c.outside && !c.protected
            )
            && outside_reads.is_empty());
    let scopes = scopes(req.tool, &target);
    let ask = |reason: String, persist: bool| {
        if grants.covers(&scopes) {
            Verdict::Allow
        } else {
            Verdict::Ask {
                reason,
                scopes: scopes.clone(),
                persist,
            }
        }
    };
    let ask_rule = match &rule {
        Some((RuleDecision::Ask, r)) => Some(format!("rule `{} {}` asks", r.tool, r.pattern)),
        _ => None,
    };

    let never_granted = |reason: String| Verdict::Ask {
        reason,
        scopes: Vec::new(),
        persist: false,
    };
    if req.mode == Mode::Read && !read_only {
        let why = match &target {
            Target::Command(c) if c.class == ShellClass::ReadOnly && !outside_reads.is_empty() => {
                format!("reads outside the workspace: {}", outside_reads.join("; "))
            }
            Target::Command(c) => format!("is not read-only: {}", c.reason),
            _ => "changes things".to_owned(),
        };
        return Verdict::Deny {
            reason: format!(
                "read mode allows only read-only tools; `{}` {why}",
                req.tool
            ),
            by: ResolvedBy::Policy,
        };
    }
    // Secret locations ask in every mode, yolo included; no grant covers them.
    if !secret_reads.is_empty() {
        return never_granted(format!(
            "reads a secret location ({}); a `read` allow rule for the path lets it through",
            secret_reads.join("; ")
        ));
    }

    match req.mode {
        Mode::Read | Mode::Yolo => match ask_rule {
            Some(reason) if req.mode == Mode::Read => ask(reason, false),
            _ => Verdict::Allow,
        },
        Mode::Write => {
            if let Some(reason) = ask_rule {
                return ask(reason, false);
            }
            if rules.workspace.is_err() && !read_only {
                let err = rules.workspace.as_ref().err().cloned().unwrap_or_default();
                return ask(format!("the workspace rules file is broken ({err})"), true);
            }
            match &target {
                Target::Command(c) => {
                    // An allow rule never lets a command reach outside the workspace or
                    // write a protected path.
                    if c.outside {
                        return never_granted(format!(
                            "writes outside the workspace: {}",
                            c.reason
                        ));
                    }
                    if c.protected {
                        return never_granted(c.reason.clone());
                    }
                    if !outside_reads.is_empty() {
                        return never_granted(format!(
                            "reads outside the workspace: {}",
                            outside_reads.join("; ")
                        ));
                    }
                    if c.unresolved {
                        return never_granted(format!(
                            "a write target cannot be resolved (it could be outside the \
                             workspace): {}",
                            c.reason
                        ));
                    }
                    if matches!(&rule, Some((RuleDecision::Allow, _))) {
                        return Verdict::Allow;
                    }
                    match c.class {
                        ShellClass::ReadOnly | ShellClass::Benign => Verdict::Allow,
                        ShellClass::Destructive | ShellClass::Unknown => {
                            ask(c.reason.clone(), true)
                        }
                    }
                }
                Target::Path {
                    relative,
                    protected: true,
                    ..
                } if !read_only => never_granted(format!(
                    "`{}` writes {relative}, a protected path (amber rules and skills, git hooks \
                     and config): it always asks",
                    req.tool
                )),
                _ if req.tool_destructive && !read_only => {
                    ask(format!("`{}` says it may destroy data", req.tool), true)
                }
                Target::Path { .. } | Target::Nothing => Verdict::Allow,
            }
        }
    }
}

/// File tools whose path rules also govern what commands write.
const WRITE_TOOLS: &[&str] = &["write", "edit"];
/// The file tool whose path rules also govern what commands read.
const READ_TOOL: &str = "read";

/// Whether a `read` allow rule covers this read (and no `read` deny or ask rule matches
/// it). Outside the workspace only rules naming an absolute or `~/` path count: a
/// workspace glob such as `**` never reaches out.
fn read_allowed(rules: &Rules<'_>, read: &ReadCheck, outside: bool) -> bool {
    let mut sets = vec![rules.config];
    if let Ok(set) = &rules.workspace {
        sets.push(set);
    }
    let applies = |r: &Rule| !outside || r.pattern.starts_with('/') || r.pattern.starts_with('~');
    !read.subjects.is_empty()
        && read.subjects.iter().any(|subject| {
            sets.iter()
                .filter_map(|set| set.decide_where(READ_TOOL, Subject::Path(subject), applies))
                .max_by_key(|(d, _)| *d)
                .is_some_and(|(d, _)| d == RuleDecision::Allow)
        })
}

/// The first deny rule of a file tool that writes, if any.
fn write_deny_rule(rules: &Rules<'_>) -> Option<Rule> {
    let mut sets = vec![rules.config];
    if let Ok(set) = &rules.workspace {
        sets.push(set);
    }
    sets.iter()
        .flat_map(|set| set.rules())
        .find(|r| {
            r.decision == RuleDecision::Deny
                && WRITE_TOOLS
                    .iter()
                    .any(|t| super::rules::applies(&r.tool, t))
        })
        .cloned()
}

fn strongest(rules: &Rules<'_>, tool: &str, target: &Target) -> Option<(RuleDecision, Rule)> {
    let mut sets = vec![rules.config];
    if let Ok(set) = &rules.workspace {
        sets.push(set);
    }
    if let Target::Command(c) = target {
        let facts = CommandFacts {
            raw: &c.command,
            lines: &c.lines,
            complete: c.complete,
        };
        let command = command_rules::decide(&sets, tool, &facts).map(|(d, r)| (d, r.clone()));
        // What the command writes is subject to the path rules of the file tools that
        // write (deny and ask; allow stays the command rules' business).
        let by_path = c
            .written
            .iter()
            .flat_map(|path| {
                sets.iter().flat_map(move |set| {
                    WRITE_TOOLS
                        .iter()
                        .filter_map(move |t| set.decide(t, Subject::Path(path)))
                })
            })
            .chain(c.reads.iter().flat_map(|read| {
                read.subjects.iter().flat_map(|subject| {
                    sets.iter()
                        .filter_map(move |set| set.decide(READ_TOOL, Subject::Path(subject)))
                })
            }))
            .filter(|(d, _)| *d != RuleDecision::Allow)
            .max_by_key(|(d, _)| *d)
            .map(|(d, r)| (d, r.clone()));
        return match (command, by_path) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
            (a, b) => b.or(a),
        };
    }
    let subject = match target {
        Target::Path { relative, .. } => Subject::Path(relative),
        _ => Subject::None,
    };
    sets.iter()
        .filter_map(|set| set.decide(tool, subject))
        .max_by_key(|(decision, _)| *decision)
        .map(|(d, r)| (d, r.clone()))
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
