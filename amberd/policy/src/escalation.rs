//! Escalation: a command that would run without the OS sandbox always goes to approval.
//!
//! A `bash` call or `process` start runs unsandboxed when it says `sandbox: false`, or when
//! the session's sandbox is unavailable (the kernel cannot enforce it: amber fails closed).
//! Unless the session's sandbox is off (then nothing changes), such a call:
//! - is denied when the mode's own verdict denies it, and in read mode when it asked for
//!   `sandbox: false` (read mode always runs commands in the read-only sandbox);
//! - runs unsandboxed ([`Verdict::AllowUnsandboxed`]) without asking only when a
//!   `sandbox = false` allow rule covers it (`command_rules::allows_unsandboxed`) or a session
//!   grant covers exactly this command unsandboxed, and the mode's verdict would let it run
//!   (or, for the grant, would ask with something to grant);
//! - otherwise asks, in every mode, yolo included, with a reason that says it runs
//!   unsandboxed. What an `allow_session` answer grants is this command's exact text
//!   unsandboxed ([`Scope::Unsandboxed`]), nothing else; `allow_always` stores a
//!   `sandbox = false` allow rule for it (not for a command with a `*`, which a pattern would
//!   read as a wildcard, nor for one the parser cannot fully read, which no rule allows). A
//!   request the mode would never grant (a write outside the workspace …) stays ungrantable.
//!
//! Ordinary allow rules and grants never cover an unsandboxed run.

use amber_proto::{Mode, ResolvedBy};
use serde_json::Value;

use super::engine::{Request, Rules, Verdict};
use super::grants::{Grants, Scope};
use super::rules::Rule;
use super::target::Target;

/// The session's OS sandbox, as the policy weighs a command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionSandbox<'a> {
    /// `mode = "off"`: commands run with the daemon's access; `sandbox: false` changes
    /// nothing.
    #[default]
    Off,
    /// Commands start inside the sandbox unless approved to run without it.
    On,
    /// The session wants a sandbox the kernel cannot enforce (why): every command would run
    /// unsandboxed.
    Unavailable(&'a str),
}

/// A call that would start a command without the OS sandbox, and what may allow that.
pub(crate) struct Escalation<'a> {
    tool: &'a str,
    mode: Mode,
    command: String,
    /// The call says `sandbox: false`.
    asked: bool,
    /// Why the session's sandbox is unavailable, when it is.
    unavailable: Option<&'a str>,
    /// The `sandbox = false` allow rule covering the command.
    pub(crate) rule: Option<Rule>,
    /// A session grant covers exactly this command unsandboxed.
    granted: bool,
    /// An `allow_always` rule for the command would match it again.
    storable: bool,
}

impl<'a> Escalation<'a> {
    /// The escalation of this call, if it would start a command unsandboxed.
    pub(crate) fn of(
        req: &'a Request<'a>,
        target: &Target,
        rules: &Rules<'_>,
        grants: &Grants,
    ) -> Option<Escalation<'a>> {
        let Target::Command(c) = target else {
            return None;
        };
        if !starts_a_command(req.tool, req.args) {
            return None;
        }
        let asked = req.args.get("sandbox") == Some(&Value::Bool(false));
        let unavailable = match req.sandbox {
            SessionSandbox::Off => return None,
            SessionSandbox::On if !asked => return None,
            SessionSandbox::On => None,
            SessionSandbox::Unavailable(why) => Some(why),
        };
        let scope = Scope::Unsandboxed {
            tool: req.tool.to_owned(),
            command: c.command.clone(),
        };
        Some(Escalation {
            tool: req.tool,
            mode: req.mode,
            command: c.command.clone(),
            asked,
            unavailable,
            rule: rules.unsandboxed_rule(req.tool, c),
            granted: grants.covers(std::slice::from_ref(&scope)),
            storable: c.complete && !c.command.contains('*'),
        })
    }

    fn scope(&self) -> Scope {
        Scope::Unsandboxed {
            tool: self.tool.to_owned(),
            command: self.command.clone(),
        }
    }

    /// What the approval says: that the command runs unsandboxed, and why.
    fn reason(&self) -> String {
        match self.unavailable {
            Some(why) => format!(
                "the OS sandbox is unavailable ({why}): this command would run unsandboxed, \
                 with all of your access (files outside the workspace, the network)"
            ),
            None => format!(
                "`{}` asks to run this command unsandboxed (`sandbox: false`): without the OS \
                 sandbox it has all of your access (files outside the workspace, the network)",
                self.tool
            ),
        }
    }

    /// The verdict for the call, given the mode's own verdict on it.
    pub(crate) fn settle(&self, verdict: Verdict) -> Verdict {
        if matches!(verdict, Verdict::Deny { .. }) {
            return verdict;
        }
        if self.mode == Mode::Read && self.asked {
            return Verdict::Deny {
                reason: "read mode runs commands only inside the read-only OS sandbox; \
                         `sandbox: false` is refused"
                    .to_owned(),
                by: ResolvedBy::Policy,
            };
        }
        let (also, grantable, persist) = match verdict {
            Verdict::Deny { .. } => return verdict,
            Verdict::Allow | Verdict::AllowUnsandboxed if self.rule.is_some() || self.granted => {
                return Verdict::AllowUnsandboxed;
            }
            Verdict::Allow | Verdict::AllowUnsandboxed => (None, true, true),
            Verdict::Ask {
                reason,
                scopes,
                persist,
                ..
            } => {
                let grantable = !scopes.is_empty();
                if grantable && self.granted {
                    return Verdict::AllowUnsandboxed;
                }
                (Some(reason), grantable, persist)
            }
        };
        let reason = match also {
            Some(also) => format!("{}; it also needs approval because: {also}", self.reason()),
            None => self.reason(),
        };
        Verdict::Ask {
            reason,
            scopes: if grantable {
                vec![self.scope()]
            } else {
                Vec::new()
            },
            persist: grantable && persist && self.storable,
            unsandboxed: true,
        }
    }
}

/// `bash`, and `process` with `action: "start"`: the calls that start a command.
fn starts_a_command(tool: &str, args: &Value) -> bool {
    match tool {
        "bash" => true,
        "process" => args.get("action").and_then(Value::as_str) == Some("start"),
        _ => false,
    }
}
