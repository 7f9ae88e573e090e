//! The sandbox a session's commands start in, as the tools see it: [`ToolSandbox`] is set
//! by the session (from `[sandbox]`, `session/new {sandbox}`, its mode and the daemon's
//! probe of the kernel) and read by `bash` and `process` for every start. A command asked
//! to run with `sandbox: false` gets [`SpawnSandbox::Unsandboxed`] only after the policy
//! approved exactly that. [`RefusalCheck`] reads a sandboxed command's output for a refusal
//! of the sandbox, the same way for a `bash` result and a background process's `output`.

use std::path::PathBuf;
use std::sync::Arc;

use amber_policy::sandbox::{SandboxInfo, SandboxMode, SandboxSpec, refusal_note};

/// A session's sandbox for the commands it runs.
#[derive(Debug, Clone, Default)]
pub enum ToolSandbox {
    /// `mode = "off"` (or a detached context in unit tests): commands run with the daemon's
    /// access.
    #[default]
    Off,
    /// Commands start inside this sandbox.
    On(Arc<SandboxSpec>),
    /// The session wants a sandbox the kernel cannot give: no command runs sandboxed; each
    /// one needs an approval to run without it (fail closed).
    Unavailable { info: SandboxInfo, reason: String },
}

impl ToolSandbox {
    /// The effective sandbox as `SessionInfo` reports it.
    pub fn info(&self) -> SandboxInfo {
        match self {
            ToolSandbox::Off => SandboxInfo {
                mode: SandboxMode::Off,
                network: true,
            },
            ToolSandbox::On(spec) => SandboxInfo {
                mode: spec.mode,
                network: spec.network,
            },
            ToolSandbox::Unavailable { info, .. } => *info,
        }
    }
}

/// How one spawn is contained.
#[derive(Debug, Clone, Copy)]
pub enum SpawnSandbox<'a> {
    /// Inside the session's sandbox.
    Sandboxed(&'a SandboxSpec),
    /// Without one: the session's sandbox is off, or an approval allowed `sandbox: false`.
    Unsandboxed,
}

/// What a sandboxed command's output is read against for a refusal of its sandbox: the
/// sandbox it runs in. A command that runs unsandboxed has none (nothing of it is refused
/// by a sandbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalCheck {
    info: SandboxInfo,
    /// The directories hidden from it (amberd's socket directory).
    hidden: Vec<PathBuf>,
}

impl RefusalCheck {
    /// The check of a command spawned in `sandbox`; `None` when it runs unsandboxed.
    pub fn of(sandbox: SpawnSandbox<'_>) -> Option<Self> {
        match sandbox {
            SpawnSandbox::Sandboxed(spec) => Some(Self {
                info: SandboxInfo {
                    mode: spec.mode,
                    network: spec.network,
                },
                hidden: spec.hidden.clone(),
            }),
            SpawnSandbox::Unsandboxed => None,
        }
    }

    /// The `[sandbox: …]` note for `output` of `command`, when it shows a refusal.
    pub fn note(&self, command: &str, output: &str) -> Option<String> {
        refusal_note(self.info, &self.hidden, command, output)
    }

    /// Appends the note for `body` (on a line of its own), when it shows a refusal.
    pub fn append_note(&self, command: &str, body: &mut String) {
        if let Some(note) = self.note(command, body) {
            append_line(body, &note);
        }
    }
}

/// Appends `line` to `body`, starting a new line first when `body` has an unfinished one.
pub(crate) fn append_line(body: &mut String, line: &str) {
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    body.push_str(line);
}

/// The sandbox one command starts in, chosen from the session's and the call's.
#[derive(Debug, Clone)]
pub(crate) enum Chosen {
    Sandboxed(Arc<SandboxSpec>),
    Unsandboxed,
}

impl Chosen {
    pub(crate) fn spawn(&self) -> SpawnSandbox<'_> {
        match self {
            Chosen::Sandboxed(spec) => SpawnSandbox::Sandboxed(spec),
            Chosen::Unsandboxed => SpawnSandbox::Unsandboxed,
        }
    }

    /// How the command's output is read for a refusal of its sandbox.
    pub(crate) fn refusal_check(&self) -> Option<RefusalCheck> {
        RefusalCheck::of(self.spawn())
    }
}

/// Chooses the sandbox of one `bash` call or `process` start. `wants_unsandboxed`: the call
/// says `sandbox: false`; `approved_unsandboxed`: an approval (or a stored rule) allowed
/// this call to run without the sandbox. Never runs a command unsandboxed that was not
/// approved so, unless the session's sandbox is off: the policy asks first, and this is
/// the wall behind it.
pub(crate) fn choose(
    session: &ToolSandbox,
    wants_unsandboxed: bool,
    approved_unsandboxed: bool,
) -> Result<Chosen, String> {
    match session {
        ToolSandbox::Off => Ok(Chosen::Unsandboxed),
        ToolSandbox::On(spec) if !wants_unsandboxed => Ok(Chosen::Sandboxed(Arc::clone(spec))),
        ToolSandbox::On(_) if approved_unsandboxed => Ok(Chosen::Unsandboxed),
        ToolSandbox::On(_) => Err(
            "`sandbox: false` runs the command without the OS sandbox and needs the user's approval; it was not approved, so the command did not run"
                .to_owned(),
        ),
        ToolSandbox::Unavailable { .. } if approved_unsandboxed => Ok(Chosen::Unsandboxed),
        ToolSandbox::Unavailable { reason, .. } => Err(format!(
            "the OS sandbox is unavailable ({reason}); commands need the user's approval to run without it, and this one was not approved, so it did not run"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Arc<SandboxSpec> {
        Arc::new(SandboxSpec {
            masked: Vec::new(),
            allow_unix_sockets: Vec::new(),
            nested_checkouts: Vec::new(),
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            workspace: "/ws".into(),
            tmp_dir: "/tmp/t".into(),
            writable_roots: vec![],
            hidden: vec![],
            daemon_pid: None,
            simulate_landlock_abi: None,
        })
    }

    #[test]
    fn only_a_sandboxed_command_is_checked_for_refusals() {
        assert_eq!(Chosen::Unsandboxed.refusal_check(), None);
        let check = Chosen::Sandboxed(spec()).refusal_check().unwrap();
        let mut body = "touch: cannot touch '/outside/x': Read-only file system".to_owned();
        check.append_note("touch /outside/x", &mut body);
        let (output, note) = body.split_once('\n').unwrap();
        assert!(output.ends_with("Read-only file system"), "{body}");
        assert!(
            note.starts_with("[sandbox: writing /outside/x was refused"),
            "{body}"
        );
        let mut clean = "all good\n".to_owned();
        check.append_note("ls", &mut clean);
        assert_eq!(clean, "all good\n");
    }

    #[test]
    fn an_unapproved_unsandboxed_run_never_happens() {
        let on = ToolSandbox::On(spec());
        assert!(matches!(
            choose(&on, false, false),
            Ok(Chosen::Sandboxed(_))
        ));
        assert!(choose(&on, true, false).is_err());
        assert!(matches!(choose(&on, true, true), Ok(Chosen::Unsandboxed)));
        let unavailable = ToolSandbox::Unavailable {
            info: SandboxInfo::default(),
            reason: "no Landlock".into(),
        };
        assert!(
            choose(&unavailable, false, false)
                .unwrap_err()
                .contains("no Landlock")
        );
        assert!(matches!(
            choose(&unavailable, false, true),
            Ok(Chosen::Unsandboxed)
        ));
        assert!(matches!(
            choose(&ToolSandbox::Off, true, false),
            Ok(Chosen::Unsandboxed)
        ));
    }
}
