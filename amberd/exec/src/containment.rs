//! How one child is contained: [`SpawnSandbox`] (inside a sandbox, or not with an
//! [`Unsandboxed`] leave, which only a person's decision mints) and the [`RefusalCheck`] its
//! output is read against for a refusal of that sandbox (the `[sandbox: …]` note the model
//! sees).

use std::path::PathBuf;

use crate::sandbox::{SandboxInfo, SandboxSpec, refusal_note_with};

/// Leave to start one child without the OS sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsandboxed {
    why: Why,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    PersonApproved,
    UserConfigured,
}

impl Unsandboxed {
    /// A person approved exactly this run without the sandbox: their answer in the approval
    /// flow, or a `sandbox = false` rule they stored. Only the approval gate mints it.
    pub fn approved_by_person() -> Self {
        Self {
            why: Why::PersonApproved,
        }
    }

    /// The user's own configuration (or one they trusted) starts this child without a
    /// sandbox: the session's sandbox is off, or an extension's or hook's table names none.
    pub fn configured_by_user() -> Self {
        Self {
            why: Why::UserConfigured,
        }
    }

    /// Whether a person's answer (rather than the configuration) let it out.
    pub fn by_approval(self) -> bool {
        self.why == Why::PersonApproved
    }
}

/// How one spawn is contained.
#[derive(Debug, Clone, Copy)]
pub enum SpawnSandbox<'a> {
    /// Inside the session's sandbox.
    Sandboxed(&'a SandboxSpec),
    /// Without one: the session's sandbox is off, or an approval allowed `sandbox: false`.
    Unsandboxed(Unsandboxed),
}

/// What a sandboxed command's output is read against for a refusal of its sandbox: the
/// sandbox it runs in. A command that runs unsandboxed has none (nothing of it is refused
/// by a sandbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalCheck {
    info: SandboxInfo,
    /// The directories hidden from it (amberd's socket directory).
    hidden: Vec<PathBuf>,
    /// It may run in place (without namespaces), where the top of the workspace and its
    /// `.git` take no new entries.
    in_place: bool,
}

impl RefusalCheck {
    /// The check of a command spawned in `sandbox`; `None` when it runs unsandboxed.
    pub fn of(sandbox: SpawnSandbox<'_>) -> Option<Self> {
        match sandbox {
            SpawnSandbox::Sandboxed(spec) => Some(Self {
                info: SandboxInfo::new(spec.mode, spec.network_mode()),
                hidden: spec.hidden.clone(),
                in_place: spec.in_place,
            }),
            SpawnSandbox::Unsandboxed(_) => None,
        }
    }

    /// The `[sandbox: …]` note for `output` of `command`, when it shows a refusal.
    pub fn note(&self, command: &str, output: &str) -> Option<String> {
        refusal_note_with(self.info, &self.hidden, self.in_place, command, output)
    }

    /// Appends the note for `body` (on a line of its own), when it shows a refusal.
    pub fn append_note(&self, command: &str, body: &mut String) {
        if let Some(note) = self.note(command, body) {
            append_line(body, &note);
        }
    }
}

/// Appends `line` to `body`, starting a new line first when `body` has an unfinished one.
pub fn append_line(body: &mut String, line: &str) {
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    body.push_str(line);
}
