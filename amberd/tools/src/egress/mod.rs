//! The network of a sandbox that is an allowlist, as the tools start commands in it: each
//! command gets its own egress link (`amber_exec::egress`), and the session's
//! [`EgressService`] (the proxy, which decides every connection) serves the link's listener
//! for as long as the command runs — the [`Serving`] guard the tool keeps beside the child.
//! The proxy itself is [`proxy`]: amberd serves its sessions' commands with it, and an
//! executor the commands it runs, each with its own [`proxy::Judge`].

pub mod proxy;

use std::sync::Arc;

use amber_exec::egress::{ChildEnd, DaemonEnd};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::sandbox::SpawnSandbox;
use crate::session::SessionTools;

/// Which command a connection comes from: what an approval and the audit trail name.
#[derive(Debug, Clone)]
pub struct EgressOrigin {
    /// Where the proxy notes the connections it refused or could not make, for the tool's
    /// result (the model reads why).
    pub log: Arc<ConnectionLog>,
    /// The tool call that started it (`bash`, or the `process` call of a background one).
    pub call_id: String,
    /// The turn's cancel at the start: asking a person is possible while it is live.
    pub turn: CancellationToken,
}

impl EgressOrigin {
    /// The origin of the commands the call of `ctx` starts.
    pub fn of_call(ctx: &crate::ToolContext) -> Self {
        Self {
            log: Arc::default(),
            call_id: ctx.call_id.clone(),
            turn: ctx.cancel.clone(),
        }
    }
}

/// The lines of one command's refused or failed connections (at most [`ConnectionLog::MAX`]
/// kept, then a count).
#[derive(Debug, Default)]
pub struct ConnectionLog {
    lines: std::sync::Mutex<(Vec<String>, usize)>,
}

impl ConnectionLog {
    pub const MAX: usize = 20;

    pub fn push(&self, line: String) {
        if let Ok(mut held) = self.lines.lock() {
            if held.0.len() < Self::MAX {
                held.0.push(line);
            } else {
                held.1 += 1;
            }
        }
    }

    /// The note for the tool's result, `None` when nothing was refused.
    pub fn note(&self) -> Option<String> {
        let held = self.lines.lock().ok()?;
        if held.0.is_empty() {
            return None;
        }
        let mut note = String::from("\n[egress proxy:");
        for line in &held.0 {
            note.push_str("\n  ");
            note.push_str(line);
        }
        if held.1 > 0 {
            note.push_str(&format!("\n  … and {} more", held.1));
        }
        note.push(']');
        Some(note)
    }
}

/// The session's egress proxy.
pub trait EgressService: Send + Sync {
    /// Serves the proxy of one command whose listener arrives over `link`, until `until` is
    /// cancelled (the command ended) — then its connections end too.
    fn serve(&self, link: DaemonEnd, origin: EgressOrigin, until: CancellationToken);
}

/// Stops serving a command's proxy when dropped; holds what it refused.
#[derive(Debug)]
pub struct Serving {
    _stop: DropGuard,
    log: Arc<ConnectionLog>,
}

impl Serving {
    /// The refused and failed connections of the command, as a note for its result.
    pub fn note(&self) -> Option<String> {
        self.log.note()
    }
}

/// One spawn's egress link: the helper's end, for the spawn, and the guard that serves the
/// other.
#[derive(Debug)]
pub struct Linked {
    pub child: ChildEnd,
    pub serving: Serving,
}

/// The egress link of one spawn: `None` unless `spawn` is a sandbox whose network is an
/// allowlist. Fails when the session has no proxy to serve it (the command must not start:
/// it would wait on a listener nobody accepts on).
pub fn link(
    spawn: &SpawnSandbox<'_>,
    session: &SessionTools,
    origin: EgressOrigin,
) -> Result<Option<Linked>, String> {
    let SpawnSandbox::Sandboxed(spec) = spawn else {
        return Ok(None);
    };
    if spec.egress.is_none() {
        return Ok(None);
    }
    let Some(service) = session.egress() else {
        return Err(
            "the sandbox's network is an allowlist, and this session has no egress proxy to serve it"
                .to_owned(),
        );
    };
    let (daemon, child) =
        amber_exec::egress::pair().map_err(|err| format!("cannot make the egress link: {err}"))?;
    let until = CancellationToken::new();
    let log = Arc::clone(&origin.log);
    service.serve(daemon, origin, until.clone());
    Ok(Some(Linked {
        child,
        serving: Serving {
            _stop: until.drop_guard(),
            log,
        },
    }))
}
