//! Escalation: a command that would run without the OS sandbox always goes to a person.
//!
//! A `bash` call or `process` start runs unsandboxed when it says `sandbox: false`, or when
//! the session's sandbox is unavailable (the kernel cannot enforce it: amber fails closed).
//! Unless the session's sandbox is off (then nothing changes), such a call:
//! - is denied when the mode's own verdict denies it, and in read mode when it asked for
//!   `sandbox: false` (read mode always runs commands in the read-only sandbox);
//! - runs unsandboxed ([`Verdict::AllowUnsandboxed`]) without asking only when a
//!   `sandbox = false` allow rule covers it (`command_rules::allows_unsandboxed`) and the
//!   mode's verdict would let it run;
//! - otherwise asks a person ([`Verdict::AskPerson`]), in every mode, yolo included, with a
//!   reason that says it runs unsandboxed; the answer covers that call only.
//!
//! Why no grant: an unsandboxed command runs workspace content with all of the user's
//! access — `make test` runs the Makefile, every script and included file its recipes name,
//! and the code the model wrote that the tests build. No list of files recorded with a grant
//! covers that (a recipe's script sources another; a test is code), so a grant or stored
//! rule made from an answer would stay valid after the model changed what the command runs.
//! `allow_session` and `allow_always` therefore count for this call only (the reason says
//! so), and only a `sandbox = false` rule a person wrote (config.toml, or a trusted
//! `.amber/rules.toml`) lets a command out unasked. Ordinary allow rules never do.

use amber_proto::{Mode, ResolvedBy};
use serde_json::Value;

use super::engine::PersonOnly;
use super::engine::{Request, Rules, Verdict};
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
    /// The call says `sandbox: false`.
    asked: bool,
    /// Why the session's sandbox is unavailable, when it is.
    unavailable: Option<&'a str>,
    /// The `sandbox = false` allow rule covering the command.
    pub(crate) rule: Option<Rule>,
}

impl<'a> Escalation<'a> {
    /// The escalation of this call, if it would start a command unsandboxed.
    pub(crate) fn of(
        req: &'a Request<'a>,
        target: &Target,
        rules: &Rules<'_>,
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
        Some(Escalation {
            tool: req.tool,
            mode: req.mode,
            asked,
            unavailable,
            rule: rules.unsandboxed_rule(req.tool, c),
        })
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
        let also = match verdict {
            Verdict::Deny { .. } => return verdict,
            Verdict::Allow | Verdict::AllowUnsandboxed if self.rule.is_some() => {
                return Verdict::AllowUnsandboxed;
            }
            Verdict::Allow | Verdict::AllowUnsandboxed => None,
            Verdict::Ask { reason, .. } => Some(reason),
            Verdict::AskPerson(ask) => Some(ask.reason().to_owned()),
        };
        let reason = match also {
            Some(also) => format!("{}; it also needs approval because: {also}", self.reason()),
            None => self.reason(),
        };
        Verdict::AskPerson(PersonOnly::new(
            format!(
                "{reason} (an answer counts for this call only: the command runs what the \
                 workspace holds when it starts)"
            ),
            true,
        ))
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
