//! The policy decision for one tool call (SEED.md "approvals"): allow, deny, or ask.
//!
//! [`decide`] walks `DECISION_ORDER`; the first step that settles the call decides it, and
//! a call no step settles runs:
//! 1. a deny rule denies, in every mode;
//! 2. outside write mode, a write target the classifier cannot resolve (`rm -rf $D/x`) is
//!    denied when a `write`/`edit` deny rule exists: it might hit what the rule protects;
//! 3. read mode denies what is not read-only (read-only tools, and commands `shell_classify`
//!    finds read-only that read nothing outside the workspace), and a `fetch` from a host
//!    that no allow rule names;
//! 4. a read of a secret location (`secrets`) asks a person, in every mode, yolo included,
//!    for commands and file tools alike, whatever the rules say; and while the session has
//!    an OS sandbox, so does a file tool's write to a protected path (`protected`): the
//!    sandbox keeps those read-only for commands, and a file tool (which runs in the daemon)
//!    must not be the way around it (a `sandbox = false` rule in `.amber/rules.toml` would
//!    let commands escape unasked, a git hook would run at the user's next commit);
//! 5. yolo allows the rest without asking;
//! 6. an ask rule asks (`allow_always` then counts for the session only);
//! 7. read mode allows the rest: it is read-only;
//!
//! and in write mode:
//! 8. a broken workspace rules file makes whatever is not read-only ask;
//! 9. a command that writes outside the workspace (lexically, or through a symlink inside
//!    it), writes a protected path (`protected`), reads outside the workspace (unless a
//!    `read` allow rule naming the path allows it) or writes where the classifier cannot
//!    resolve asks a person: no allow rule, session grant or hook covers it;
//! 10. any other command runs when an allow rule covers it or it is read-only or benign;
//!     destructive and unknown commands ask;
//! 11. a file tool writing a protected path (for `apply_patch`: any path its patch names)
//!     asks a person (with the sandbox off too);
//! 12. a tool that says it may destroy data (an MCP `destructiveHint`) asks;
//! 13. a `fetch` runs when an allow rule names its host, and asks otherwise (granted per
//!     host).
//!
//! Last, a command that would run without the OS sandbox (`sandbox: false`, or the session's
//! sandbox unavailable) is settled by `escalation`: it asks a person in every mode unless a
//! `sandbox = false` rule covers it, whatever the steps above allowed.
//!
//! Two kinds of ask: [`Verdict::Ask`] is answered at once (allowed) when a session grant
//! covers every scope of the call, and a `pre_tool_use` hook's `allow` or an automatic
//! approver may answer it; [`Verdict::AskPerson`] ("never granted") carries a
//! [`PersonOnly`], which nothing but a person's answer in the approval flow turns into a
//! run: no rule, grant, hook or `--yes`, and that answer covers that one call. Which rules match is `in_force`'s business: besides a tool's
//! own rules, the `write`/`edit` path rules judge what a command writes and the `read` ones
//! what it reads. Confinement is not decided here: the tools themselves refuse paths outside
//! the workspace.

use std::path::Path;

use amber_proto::{Mode, ResolvedBy};
use serde_json::Value;

use super::escalation::{Escalation, SessionSandbox};
use super::grants::{Grants, Scope};
use super::protected::RULES_FILE;
use super::rules::{Rule, RuleDecision, RuleSet};
use super::secrets::SecretLocations;
use super::shell::ShellClass;
use super::target::{CommandTarget, Target, scopes, target};

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
    /// The session's OS sandbox, for commands that would run without it (`escalation`).
    pub sandbox: SessionSandbox<'a>,
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
    /// Allowed to run without the OS sandbox: a `sandbox = false` rule or a session grant
    /// of exactly this command unsandboxed covers it (`escalation`).
    AllowUnsandboxed,
    Deny {
        reason: String,
        by: ResolvedBy,
    },
    /// Ask the approvers; what they allow may be granted for the session or stored.
    Ask {
        reason: String,
        /// What an `allow_session` answer grants.
        scopes: Vec<Scope>,
        /// Whether `allow_always` may persist allow rules. Not when an ask rule asked:
        /// an allow rule would lose to it (ask > allow), so the answer counts for the
        /// session only.
        persist: bool,
    },
    /// Ask a person, for this call only (see [`PersonOnly`]).
    AskPerson(PersonOnly),
}

/// An ask that only a person's answer in the approval flow settles, for that one call:
/// a secret read, a write the sandbox would refuse a command (a protected path), a command
/// reaching outside the workspace, a run without the OS sandbox. Its fields are private and
/// it converts to nothing: whoever holds one can only put it to a person (amberd's gate),
/// so a new path through the code (a hook, a rule, a grant, an automatic approver) cannot
/// quietly turn it into an allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonOnly {
    reason: String,
    unsandboxed: bool,
}

impl PersonOnly {
    pub(crate) fn new(reason: String, unsandboxed: bool) -> PersonOnly {
        PersonOnly {
            reason,
            unsandboxed,
        }
    }

    /// Why it asks, as the approval request says it.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The call would run without the OS sandbox: an answer that allows it allows that.
    pub fn unsandboxed(&self) -> bool {
        self.unsandboxed
    }
}

/// Decides one call, with the daemon's installed secret locations.
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
    let call = Call::new(req, rules, grants, secrets);
    let verdict = DECISION_ORDER
        .iter()
        .find_map(|step| step(&call))
        .unwrap_or(Verdict::Allow);
    match &call.escalation {
        Some(escalation) => escalation.settle(verdict),
        None => verdict,
    }
}

/// One step of the decision: settles the call, or leaves it to the next step (`None`).
type Step = fn(&Call<'_>) -> Option<Verdict>;

/// The steps in the order the module header gives them.
const DECISION_ORDER: &[Step] = &[
    deny_rule_denies,
    unresolved_write_meets_a_deny_rule,
    read_mode_refuses_changes,
    read_mode_fetches_only_allowed_hosts,
    secret_reads_ask,
    protected_write_asks_while_sandboxed,
    yolo_allows,
    ask_rule_asks,
    read_mode_allows,
    // Read and yolo mode are settled above: write mode from here on.
    broken_workspace_rules_ask,
    ungrantable_command_asks,
    command_by_rule_and_class,
    protected_path_write_asks,
    destructive_tool_asks,
    host_by_rule_or_ask,
];

/// One call with what the steps judge it by, worked out once.
struct Call<'a> {
    req: &'a Request<'a>,
    rules: &'a Rules<'a>,
    grants: &'a Grants,
    target: Target,
    /// The strongest rule that matches the call (deny > ask > allow).
    rule: Option<(RuleDecision, Rule)>,
    /// The command's reads outside the workspace that no `read` rule allows, as shown.
    outside_reads: Vec<String>,
    /// Why each read that no rule allows is a secret location.
    secret_reads: Vec<String>,
    /// Nothing the call does changes anything.
    read_only: bool,
    /// What an `allow_session` answer would grant.
    scopes: Vec<Scope>,
    /// The command would run without the OS sandbox.
    escalation: Option<Escalation<'a>>,
}

impl<'a> Call<'a> {
    fn new(
        req: &'a Request<'a>,
        rules: &'a Rules<'a>,
        grants: &'a Grants,
        secrets: &SecretLocations,
    ) -> Self {
        let target = target(req.tool, req.args, req.workspace, secrets);
        let rule = rules.strongest(req.tool, &target);
        let (outside_reads, secret_reads) = unallowed_reads(rules, &target);
        let read_only = req.tool_read_only || read_only_command(req.tool, &target, &outside_reads);
        let scopes = scopes(req.tool, &target);
        let escalation = Escalation::of(req, &target, rules);
        Call {
            req,
            rules,
            grants,
            target,
            rule,
            outside_reads,
            secret_reads,
            read_only,
            scopes,
            escalation,
        }
    }

    fn command(&self) -> Option<&CommandTarget> {
        match &self.target {
            Target::Command(c) => Some(c),
            Target::Path { .. } | Target::Files(_) | Target::Host(_) | Target::Nothing => None,
        }
    }

    /// Asks, unless a session grant already covers every scope of the call.
    fn ask(&self, reason: String, persist: bool) -> Verdict {
        if self.grants.covers(&self.scopes) {
            Verdict::Allow
        } else {
            Verdict::Ask {
                reason,
                scopes: self.scopes.clone(),
                persist,
            }
        }
    }
}

/// Asks a person: no session grant, rule or hook ever covers such a call.
fn never_granted(reason: String) -> Verdict {
    Verdict::AskPerson(PersonOnly::new(reason, false))
}

/// The reads that no rule allows: a command's reads outside the workspace, as shown (only a
/// rule naming an absolute or `~/` path reaches out), and why each secret read is secret
/// (no rule allows those: only a person's answer does).
fn unallowed_reads(rules: &Rules<'_>, target: &Target) -> (Vec<String>, Vec<String>) {
    match target {
        Target::Command(c) => (
            c.reads
                .iter()
                .filter(|r| r.outside && !rules.read_allowed(r, true))
                .map(|r| r.shown.clone())
                .collect(),
            c.reads.iter().filter_map(|r| r.secret.clone()).collect(),
        ),
        Target::Path {
            secret: Some(why), ..
        } => (Vec::new(), vec![why.clone()]),
        Target::Files(files) => (
            Vec::new(),
            files.iter().filter_map(|f| f.secret.clone()).collect(),
        ),
        Target::Path { .. } | Target::Host(_) | Target::Nothing => (Vec::new(), Vec::new()),
    }
}

/// A `bash` command the classifier finds read-only that writes nothing outside the workspace
/// or protected, and reads nothing outside it that no rule allows.
fn read_only_command(tool: &str, target: &Target, outside_reads: &[String]) -> bool {
    tool == "bash"
        && matches!(
            target,
            Target::Command(c) if c.class == ShellClass::ReadOnly && !c.outside && !c.protected
        )
        && outside_reads.is_empty()
}

/// A deny rule denies, in every mode.
fn deny_rule_denies(call: &Call<'_>) -> Option<Verdict> {
    let Some((RuleDecision::Deny, rule)) = &call.rule else {
        return None;
    };
    Some(Verdict::Deny {
        reason: format!("denied by rule `{}`", rule.shown()),
        by: ResolvedBy::Rule,
    })
}

/// A write nobody can resolve might hit what a `write` deny rule protects: outside write
/// mode (where it asks, never granted) it is refused.
fn unresolved_write_meets_a_deny_rule(call: &Call<'_>) -> Option<Verdict> {
    if !call.command().is_some_and(|c| c.unresolved) || call.req.mode == Mode::Write {
        return None;
    }
    let rule = call.rules.write_deny_rule()?;
    Some(Verdict::Deny {
        reason: format!(
            "a write target cannot be resolved, and rule `{} {}` denies writes",
            rule.tool, rule.pattern
        ),
        by: ResolvedBy::Rule,
    })
}

/// Read mode allows only read-only calls.
fn read_mode_refuses_changes(call: &Call<'_>) -> Option<Verdict> {
    if call.req.mode != Mode::Read || call.read_only {
        return None;
    }
    let why = match &call.target {
        Target::Command(c) if c.class == ShellClass::ReadOnly && !call.outside_reads.is_empty() => {
            format!(
                "reads outside the workspace: {}",
                call.outside_reads.join("; ")
            )
        }
        Target::Command(c) => format!("is not read-only: {}", c.reason),
        Target::Path { .. } | Target::Files(_) | Target::Host(_) | Target::Nothing => {
            "changes things".to_owned()
        }
    };
    Some(Verdict::Deny {
        reason: format!(
            "read mode allows only read-only tools; `{}` {why}",
            call.req.tool
        ),
        by: ResolvedBy::Policy,
    })
}

/// Read mode reaches only the hosts an allow rule names: the network is not read-only.
fn read_mode_fetches_only_allowed_hosts(call: &Call<'_>) -> Option<Verdict> {
    let Target::Host(host) = &call.target else {
        return None;
    };
    if call.req.mode != Mode::Read || matches!(call.rule, Some((RuleDecision::Allow, _))) {
        return None;
    }
    Some(Verdict::Deny {
        reason: format!(
            "read mode fetches only from hosts an allow rule names, and none names {host} \
             (`[[rules]] tool = \"fetch\", host = \"{host}\", decision = \"allow\"`)"
        ),
        by: ResolvedBy::Policy,
    })
}

/// Secret locations ask a person in every mode, yolo included; no rule or grant covers them.
fn secret_reads_ask(call: &Call<'_>) -> Option<Verdict> {
    if call.secret_reads.is_empty() {
        return None;
    }
    Some(never_granted(format!(
        "reads a secret location ({}); only your answer lets it through, for this call",
        call.secret_reads.join("; ")
    )))
}

/// While commands are sandboxed, the sandbox keeps the protected paths (`.amber/`, git's
/// hooks and config) read-only for them; a file tool (which runs in the daemon, outside any
/// sandbox) writing one asks a person in every mode: a `sandbox = false` rule in the rules
/// file would let commands escape unasked, a hook would run at the user's next `git commit`.
fn protected_write_asks_while_sandboxed(call: &Call<'_>) -> Option<Verdict> {
    if call.req.sandbox == SessionSandbox::Off || call.read_only {
        return None;
    }
    let relative = protected_written(&call.target)?;
    let why = if relative.split(", ").any(|r| r == RULES_FILE) {
        format!(
            "{RULES_FILE} is the workspace rules file: a rule there can let commands run \
             without the OS sandbox"
        )
    } else {
        "the OS sandbox keeps it read-only for commands, so a file tool may write it only \
         with your answer"
            .to_owned()
    };
    Some(never_granted(format!(
        "`{}` writes {relative}, a protected path ({why}); it always asks",
        call.req.tool
    )))
}

/// The protected paths a file tool's call writes, joined; `None` when it writes none.
fn protected_written(target: &Target) -> Option<String> {
    match target {
        Target::Path {
            relative,
            protected: true,
            ..
        } => Some(relative.clone()),
        Target::Files(files) if files.iter().any(|f| f.protected) => Some(
            files
                .iter()
                .filter(|f| f.protected)
                .map(|f| f.relative.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => None,
    }
}

/// Yolo asks nothing: what no rule denied and no secret read stopped runs.
fn yolo_allows(call: &Call<'_>) -> Option<Verdict> {
    (call.req.mode == Mode::Yolo).then_some(Verdict::Allow)
}

/// An ask rule asks. An allow rule would lose to it (ask > allow), so `allow_always`
/// may not persist one.
fn ask_rule_asks(call: &Call<'_>) -> Option<Verdict> {
    let Some((RuleDecision::Ask, rule)) = &call.rule else {
        return None;
    };
    Some(call.ask(format!("rule `{}` asks", rule.shown()), false))
}

/// Read mode runs the read-only calls it did not refuse.
fn read_mode_allows(call: &Call<'_>) -> Option<Verdict> {
    (call.req.mode == Mode::Read).then_some(Verdict::Allow)
}

/// A broken workspace rules file might hold a deny rule: whatever is not read-only asks.
fn broken_workspace_rules_ask(call: &Call<'_>) -> Option<Verdict> {
    let Err(err) = &call.rules.workspace else {
        return None;
    };
    (!call.read_only).then(|| call.ask(format!("the workspace rules file is broken ({err})"), true))
}

/// An allow rule or grant never lets a command reach outside the workspace, write a
/// protected path, or write where nobody can tell.
fn ungrantable_command_asks(call: &Call<'_>) -> Option<Verdict> {
    let c = call.command()?;
    let reason = if c.outside {
        format!("writes outside the workspace: {}", c.reason)
    } else if c.protected {
        c.reason.clone()
    } else if !call.outside_reads.is_empty() {
        format!(
            "reads outside the workspace: {}",
            call.outside_reads.join("; ")
        )
    } else if c.unresolved {
        format!(
            "a write target cannot be resolved (it could be outside the workspace): {}",
            c.reason
        )
    } else {
        return None;
    };
    Some(never_granted(reason))
}

/// Every other command: an allow rule, or a read-only or benign class, lets it run;
/// destructive and unknown commands ask. This settles every command.
fn command_by_rule_and_class(call: &Call<'_>) -> Option<Verdict> {
    let c = call.command()?;
    let unsandboxed_rule = call.escalation.as_ref().is_some_and(|e| e.rule.is_some());
    if matches!(call.rule, Some((RuleDecision::Allow, _))) || unsandboxed_rule {
        return Some(Verdict::Allow);
    }
    Some(match c.class {
        ShellClass::ReadOnly | ShellClass::Benign => Verdict::Allow,
        ShellClass::Destructive | ShellClass::Unknown => call.ask(c.reason.clone(), true),
    })
}

/// A file tool's write to a protected path always asks; no grant or rule covers it.
fn protected_path_write_asks(call: &Call<'_>) -> Option<Verdict> {
    let relative = protected_written(&call.target)?;
    (!call.read_only).then(|| {
        never_granted(format!(
            "`{}` writes {relative}, a protected path (amber rules and skills, git hooks \
             and config): it always asks",
            call.req.tool
        ))
    })
}

/// A tool that says it may destroy data asks.
fn destructive_tool_asks(call: &Call<'_>) -> Option<Verdict> {
    (call.req.tool_destructive && !call.read_only).then(|| {
        call.ask(
            format!("`{}` says it may destroy data", call.req.tool),
            true,
        )
    })
}

/// A host an allow rule names is fetched; any other asks, and an `allow_session` answer
/// covers that host for the rest of the session.
fn host_by_rule_or_ask(call: &Call<'_>) -> Option<Verdict> {
    let Target::Host(host) = &call.target else {
        return None;
    };
    if matches!(call.rule, Some((RuleDecision::Allow, _))) {
        return Some(Verdict::Allow);
    }
    Some(call.ask(
        format!("`{}` reaches {host}, which no rule allows", call.req.tool),
        true,
    ))
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
