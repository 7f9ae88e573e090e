//! The sandbox a session's commands start in, as the tools see it: [`ToolSandbox`] is set
//! by the session (from `[sandbox]`, `session/new {sandbox}`, its mode and the daemon's
//! probe of the kernel) and read by `bash` and `process` for every start. A command asked
//! to run with `sandbox: false` gets [`SpawnSandbox::Unsandboxed`] only after the policy
//! approved exactly that. [`RefusalCheck`] reads a sandboxed command's output for a refusal
//! of the sandbox, the same way for a `bash` result and a background process's `output`.

use std::sync::Arc;

pub use amber_exec::child::Unsandboxed;
pub use amber_exec::containment::{RefusalCheck, SpawnSandbox, append_line};
use amber_exec::sandbox::{SandboxInfo, SandboxMode, SandboxSpec};

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
            ToolSandbox::Off => {
                SandboxInfo::new(SandboxMode::Off, amber_proto::NetworkMode::from_bool(true))
            }
            ToolSandbox::On(spec) => SandboxInfo::new(spec.mode, spec.network_mode()),
            ToolSandbox::Unavailable { info, .. } => *info,
        }
    }
}

/// The sandbox one command starts in, chosen from the session's and the call's.
#[derive(Debug, Clone)]
pub enum Chosen {
    Sandboxed(Arc<SandboxSpec>),
    Unsandboxed(Unsandboxed),
}

impl Chosen {
    pub fn spawn(&self) -> SpawnSandbox<'_> {
        match self {
            Chosen::Sandboxed(spec) => SpawnSandbox::Sandboxed(spec),
            Chosen::Unsandboxed(leave) => SpawnSandbox::Unsandboxed(*leave),
        }
    }

    /// How the command's output is read for a refusal of its sandbox.
    pub fn refusal_check(&self) -> Option<RefusalCheck> {
        RefusalCheck::of(self.spawn())
    }
}

/// Chooses the sandbox of one `bash` call or `process` start. `wants_unsandboxed`: the call
/// says `sandbox: false`; `approved`: the leave an approval (or a stored rule) gave this
/// call to run without the sandbox. Never runs a command unsandboxed that was not approved
/// so, unless the session's sandbox is off: the policy asks first, and this is the wall
/// behind it.
pub fn choose(
    session: &ToolSandbox,
    wants_unsandboxed: bool,
    approved: Option<Unsandboxed>,
) -> Result<Chosen, String> {
    match (session, approved) {
        (ToolSandbox::Off, _) => Ok(Chosen::Unsandboxed(Unsandboxed::configured_by_user())),
        (ToolSandbox::On(spec), _) if !wants_unsandboxed => {
            Ok(Chosen::Sandboxed(Arc::clone(spec)))
        }
        (ToolSandbox::On(_), Some(leave)) => Ok(Chosen::Unsandboxed(leave)),
        (ToolSandbox::On(_), None) => Err(
            "`sandbox: false` runs the command without the OS sandbox and needs the user's approval; it was not approved, so the command did not run"
                .to_owned(),
        ),
        (ToolSandbox::Unavailable { .. }, Some(leave)) => Ok(Chosen::Unsandboxed(leave)),
        (ToolSandbox::Unavailable { reason, .. }, None) => Err(format!(
            "the OS sandbox is unavailable ({reason}); commands need the user's approval to run without it, and this one was not approved, so it did not run"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Arc<SandboxSpec> {
        Arc::new(SandboxSpec {
            egress: None,
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
            guarded_pids: Vec::new(),
            simulate_landlock_abi: None,
            in_place: false,
        })
    }

    #[test]
    fn only_a_sandboxed_command_is_checked_for_refusals() {
        assert_eq!(
            Chosen::Unsandboxed(Unsandboxed::approved_by_person()).refusal_check(),
            None
        );
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
        let approved = Some(Unsandboxed::approved_by_person());
        let on = ToolSandbox::On(spec());
        assert!(matches!(choose(&on, false, None), Ok(Chosen::Sandboxed(_))));
        assert!(choose(&on, true, None).is_err());
        assert!(matches!(
            choose(&on, true, approved),
            Ok(Chosen::Unsandboxed(leave)) if leave.by_approval()
        ));
        let unavailable = ToolSandbox::Unavailable {
            info: SandboxInfo::default(),
            reason: "no Landlock".into(),
        };
        assert!(
            choose(&unavailable, false, None)
                .unwrap_err()
                .contains("no Landlock")
        );
        assert!(matches!(
            choose(&unavailable, false, approved),
            Ok(Chosen::Unsandboxed(leave)) if leave.by_approval()
        ));
        assert!(matches!(
            choose(&ToolSandbox::Off, true, None),
            Ok(Chosen::Unsandboxed(leave)) if !leave.by_approval()
        ));
    }
}
