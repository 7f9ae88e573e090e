//! The session's background processes. Each one is `/bin/bash -c command`
//! in its own process group, supervised by a detached task that copies its
//! output into a bounded [`Ring`], reaps it and, when asked, terminates the
//! group (SIGTERM, SIGKILL after a grace). The tasks do not belong to any
//! turn: a process runs until it ends, is killed, or the table is shut down
//! or dropped. When the shell ends, whatever it left in its group is killed.

use amber_proto::sync::Locked;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use super::ring::Ring;
use crate::bash::decode;
use crate::egress::Linked;
use crate::git_guard::GitGuard;
use crate::sandbox::{RefusalCheck, SpawnSandbox};
use amber_exec::env_policy::ToolEnv;
use amber_exec::group::GroupGuard;
use amber_exec::spawn::spawn_shell;

/// Processes that may run at once in one session.
pub const MAX_RUNNING: usize = 16;
/// Entries kept in the table; the oldest finished ones make room.
pub const MAX_ENTRIES: usize = 64;
/// Output kept per process; older bytes are dropped.
pub const RING_BYTES: usize = 256 * 1024;
/// Between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to keep reading the pipe once the group is gone.
const DRAIN_WAIT: Duration = Duration::from_millis(100);
/// How long `kill` waits for the reap after SIGKILL.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// How a process is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessState {
    Running,
    Exited {
        code: i32,
    },
    /// Died of a signal nobody here sent.
    Signaled {
        signal: i32,
    },
    /// Ended by `kill` or shutdown; `forced` when SIGTERM was not enough.
    Killed {
        forced: bool,
    },
    /// The shell could not be waited for.
    Unknown {
        reason: String,
    },
}

impl ProcessState {
    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running)
    }
}

impl std::fmt::Display for ProcessState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Running => f.write_str("running"),
            Self::Exited { code } => write!(f, "exited with code {code}"),
            Self::Signaled { signal } => write!(f, "killed by signal {signal}"),
            Self::Killed { forced: false } => f.write_str("killed"),
            Self::Killed { forced: true } => f.write_str("killed (SIGKILL after SIGTERM grace)"),
            Self::Unknown { reason } => write!(f, "ended (could not wait: {reason})"),
        }
    }
}

/// A snapshot of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub id: String,
    pub pid: u32,
    pub command: String,
    pub state: ProcessState,
    /// Time since start while running, else how long it ran.
    pub uptime: Duration,
    /// Output read so far showed a refusal of its OS sandbox (a `[sandbox: …]` note).
    pub sandbox_refused: bool,
}

/// Output not yet read by `output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRead {
    pub info: ProcessInfo,
    /// Unread bytes that the ring dropped before they were read.
    pub dropped: u64,
    pub text: String,
    /// The `[sandbox: …]` note when `text` shows a refusal of the process's OS sandbox
    /// (not repeated on a read with no new output).
    pub note: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("no process `{id}`; {}", known_ids(known))]
    UnknownId { id: String, known: Vec<String> },
    #[error("too many background processes: {max} are running; kill one first")]
    TooMany { max: usize },
    #[error("the session is shutting down; no new processes")]
    Closed,
    #[error("background processes need the tokio runtime")]
    NoRuntime,
    #[error("failed to start /bin/bash: {0}")]
    Spawn(#[source] io::Error),
}

fn known_ids(known: &[String]) -> String {
    if known.is_empty() {
        "there are no processes".to_owned()
    } else {
        format!("known: {}", known.join(", "))
    }
}

/// State shared by the table and a process's supervisor task.
struct Shared {
    inner: Mutex<Inner>,
    /// Asks the supervisor to terminate the group.
    terminate: CancellationToken,
    /// Cancelled by the supervisor once the state is final.
    finished: CancellationToken,
}

struct Inner {
    ring: Ring,
    /// Stream offset up to which `output` has returned the text.
    read_pos: u64,
    state: ProcessState,
    ended: Option<Instant>,
    /// The last `[sandbox: …]` note `output` gave.
    last_note: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.locked()
    }
}

struct Entry {
    id: String,
    pid: u32,
    command: String,
    started: Instant,
    shared: Arc<Shared>,
    /// How its output is read for refusals of its sandbox; `None`: unsandboxed.
    refusal: Option<RefusalCheck>,
}

impl Entry {
    fn info(&self) -> ProcessInfo {
        let inner = self.shared.lock();
        self.info_with(&inner)
    }

    fn info_with(&self, inner: &Inner) -> ProcessInfo {
        let end = inner.ended.unwrap_or_else(Instant::now);
        ProcessInfo {
            id: self.id.clone(),
            pid: self.pid,
            command: self.command.clone(),
            state: inner.state.clone(),
            uptime: end.saturating_duration_since(self.started),
            sandbox_refused: inner.last_note.is_some(),
        }
    }

    fn running(&self) -> bool {
        !self.shared.finished.is_cancelled()
    }
}

#[derive(Default)]
struct Table {
    next_id: u64,
    entries: Vec<Entry>,
    closed: bool,
}

/// A session's background processes. Dropping it terminates them all.
#[derive(Default)]
pub struct ProcessTable {
    table: Mutex<Table>,
}

impl std::fmt::Debug for ProcessTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTable")
            .field("processes", &self.lock().entries.len())
            .finish()
    }
}

impl ProcessTable {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.locked()
    }

    /// Start `/bin/bash -c command` in `cwd` (already confined by the caller) with the
    /// environment `env`; `session` names the owner in the group's orphan record
    /// (`amber_exec::reaper`).
    pub fn start(
        &self,
        command: &str,
        cwd: &Path,
        env: &ToolEnv,
        session: &str,
        sandbox: SpawnSandbox<'_>,
        egress: impl FnOnce(&SpawnSandbox<'_>) -> Result<Option<Linked>, String>,
    ) -> Result<ProcessInfo, ProcessError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ProcessError::NoRuntime)?;
        let mut table = self.lock();
        if table.closed {
            return Err(ProcessError::Closed);
        }
        if table.entries.iter().filter(|e| e.running()).count() >= MAX_RUNNING {
            return Err(ProcessError::TooMany { max: MAX_RUNNING });
        }
        if table.entries.len() >= MAX_ENTRIES
            && let Some(oldest) = table.entries.iter().position(|e| !e.running())
        {
            table.entries.remove(oldest);
        }
        let guarded = match sandbox {
            SpawnSandbox::Sandboxed(spec) => GitGuard::around(spec),
            SpawnSandbox::Unsandboxed(_) => None,
        };
        let spawn = match &guarded {
            Some((_, spec)) => SpawnSandbox::Sandboxed(spec),
            None => sandbox,
        };
        let (reader, child, serving) = {
            let _enter = runtime.enter();
            let linked =
                egress(&spawn).map_err(|why| ProcessError::Spawn(io::Error::other(why)))?;
            let (end, serving) = linked.map(|linked| (linked.child, linked.serving)).unzip();
            let (reader, child) =
                spawn_shell(command, cwd, env, spawn, end).map_err(ProcessError::Spawn)?;
            (reader, child, serving)
        };
        let git_guard = guarded.map(|(guard, _)| guard);
        let Some(pid) = child.id() else {
            return Err(ProcessError::Spawn(io::Error::other("no process id")));
        };
        let Ok(pgid) = libc::pid_t::try_from(pid) else {
            return Err(ProcessError::Spawn(io::Error::other(
                "process id out of range",
            )));
        };
        // process_group(0): the shell leads a new group whose id is its pid.
        let group = GroupGuard::new(pgid, session);
        table.next_id += 1;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                ring: Ring::new(RING_BYTES),
                read_pos: 0,
                state: ProcessState::Running,
                ended: None,
                last_note: None,
            }),
            terminate: CancellationToken::new(),
            finished: CancellationToken::new(),
        });
        let entry = Entry {
            id: format!("p{}", table.next_id),
            pid,
            command: command.to_owned(),
            started: Instant::now(),
            shared: Arc::clone(&shared),
            refusal: RefusalCheck::of(sandbox),
        };
        let info = entry.info();
        table.entries.push(entry);
        runtime.spawn(async move {
            supervise(child, reader, group, pgid, shared, git_guard).await;
            // Its proxy serves until the process has ended.
            drop(serving);
        });
        Ok(info)
    }

    /// Every process, oldest first.
    pub fn list(&self) -> Vec<ProcessInfo> {
        self.lock().entries.iter().map(Entry::info).collect()
    }

    /// How many processes are running.
    pub fn running(&self) -> usize {
        self.lock().entries.iter().filter(|e| e.running()).count()
    }

    fn find<T>(&self, id: &str, f: impl FnOnce(&Entry) -> T) -> Result<T, ProcessError> {
        let table = self.lock();
        match table.entries.iter().find(|e| e.id == id) {
            Some(entry) => Ok(f(entry)),
            None => Err(ProcessError::UnknownId {
                id: id.to_owned(),
                known: table.entries.iter().map(|e| e.id.clone()).collect(),
            }),
        }
    }

    /// The output written since the last `output` call, and the state.
    pub fn output(&self, id: &str) -> Result<OutputRead, ProcessError> {
        self.find(id, |entry| {
            let mut inner = entry.shared.lock();
            let finished = !inner.state.is_running();
            let slice = inner.ring.since(inner.read_pos);
            let mut pending = slice.bytes;
            // A cut through a multi-byte character is not worth a U+FFFD.
            let mut skipped = 0;
            if slice.dropped > 0 {
                skipped = pending
                    .iter()
                    .take(3)
                    .take_while(|b| (**b & 0xC0) == 0x80)
                    .count();
                pending.drain(..skipped);
            }
            let available = pending.len();
            let text = decode(&mut pending, finished);
            let consumed = (skipped + available - pending.len()) as u64;
            inner.read_pos = slice.start + consumed;
            let note = entry
                .refusal
                .as_ref()
                .and_then(|check| check.note(&entry.command, &text));
            let note = fresh_note(note, text.is_empty(), &mut inner.last_note);
            OutputRead {
                info: entry.info_with(&inner),
                dropped: slice.dropped,
                text,
                note,
            }
        })
    }

    /// Terminate one process's group (SIGTERM, SIGKILL after [`KILL_GRACE`])
    /// and wait for the reap. Killing a finished process changes nothing.
    pub async fn kill(&self, id: &str) -> Result<ProcessInfo, ProcessError> {
        let (shared, info) = self.find(id, |e| (Arc::clone(&e.shared), e.info()))?;
        if !info.state.is_running() {
            return Ok(info);
        }
        shared.terminate.cancel();
        let finished = shared.finished.clone();
        if tokio::time::timeout(KILL_GRACE + REAP_WAIT, finished.cancelled())
            .await
            .is_err()
        {
            tracing::warn!(
                id,
                pid = info.pid,
                "process: killed group not reaped in time"
            );
        }
        self.find(id, Entry::info)
    }

    /// Terminate every process and refuse new ones. Does not wait: each
    /// process's supervisor escalates to SIGKILL after the grace and reaps it.
    pub fn shutdown(&self) {
        let mut table = self.lock();
        table.closed = true;
        terminate_all(&table);
    }
}

impl ProcessTable {
    /// Wait until every process has been reaped, at most `timeout`; true when
    /// none is left running.
    pub async fn wait_all(&self, timeout: Duration) -> bool {
        let finished: Vec<CancellationToken> = self
            .lock()
            .entries
            .iter()
            .map(|e| e.shared.finished.clone())
            .collect();
        tokio::time::timeout(timeout, async {
            for token in finished {
                token.cancelled().await;
            }
        })
        .await
        .is_ok()
    }
}

fn terminate_all(table: &Table) {
    for entry in &table.entries {
        entry.shared.terminate.cancel();
    }
}

impl Drop for ProcessTable {
    fn drop(&mut self) {
        terminate_all(&self.lock());
    }
}

/// The note to give for one `output` read: `note` (what the new text, and the command,
/// show), but not once more for a read with no new output when it was the last one given
/// (a silent network program is told once, not at every read). Remembers what it gives.
fn fresh_note(
    note: Option<String>,
    no_new_text: bool,
    last: &mut Option<String>,
) -> Option<String> {
    let note = note?;
    if no_new_text && last.as_deref() == Some(note.as_str()) {
        return None;
    }
    *last = Some(note.clone());
    Some(note)
}

/// Send `signal` to the group `pgid`.
fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    if pgid > 0 {
        // SAFETY: killpg only sends a signal. `pgid` is positive (never our own
        // group or every process) and is the group this table created; its
        // leader has not been reaped yet, so the id cannot have been reused.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// Copy the output into the ring until the shell has exited and the pipe is
/// closed; terminate on request. Dropping this future (runtime shutdown)
/// SIGKILLs the group through the guard.
async fn supervise(
    mut child: Child,
    mut reader: pipe::Receiver,
    group: GroupGuard,
    pgid: libc::pid_t,
    shared: Arc<Shared>,
    git_guard: Option<GitGuard>,
) {
    let far = || tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let escalate = tokio::time::sleep_until(far());
    tokio::pin!(escalate);
    let drain = tokio::time::sleep_until(far());
    tokio::pin!(drain);
    let mut buf = vec![0u8; 16 * 1024];
    let mut status: Option<io::Result<ExitStatus>> = None;
    let mut eof = false;
    let mut terminated = false;
    let mut forced = false;
    let terminate = shared.terminate.clone();
    loop {
        if eof && status.is_some() {
            break;
        }
        tokio::select! {
            biased;
            () = terminate.cancelled(), if !terminated && status.is_none() => {
                terminated = true;
                signal_group(pgid, libc::SIGTERM);
                escalate.as_mut().reset(tokio::time::Instant::now() + KILL_GRACE);
            },
            () = &mut escalate, if terminated && status.is_none() => {
                forced = true;
                group.kill();
                escalate.as_mut().reset(far());
            },
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => shared.lock().ring.push(&buf[..n]),
            },
            exited = child.wait(), if status.is_none() => {
                status = Some(exited);
                // Leftovers (`sleep 100 &`) must not outlive the shell.
                group.kill();
                drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_WAIT);
            },
            () = &mut drain, if status.is_some() && !eof => eof = true,
        }
    }
    group.disarm();
    let state = match status {
        _ if terminated => ProcessState::Killed { forced },
        Some(Ok(status)) => state_of(status),
        Some(Err(err)) => ProcessState::Unknown {
            reason: err.to_string(),
        },
        None => ProcessState::Unknown {
            reason: "no exit status".to_owned(),
        },
    };
    // What the mounts could not protect, undone once it ended; its output says so.
    let undone = git_guard.and_then(|guard| guard.after());
    {
        let mut inner = shared.lock();
        if let Some(note) = undone {
            inner.ring.push(note.as_bytes());
        }
        inner.state = state;
        inner.ended = Some(Instant::now());
    }
    shared.finished.cancel();
}

fn state_of(status: ExitStatus) -> ProcessState {
    match (status.code(), status.signal()) {
        (Some(code), _) => ProcessState::Exited { code },
        (None, Some(signal)) => ProcessState::Signaled { signal },
        (None, None) => ProcessState::Unknown {
            reason: "no code and no signal".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_given_for_each_new_refusal_but_not_again_for_silence() {
        let mut last = None;
        assert_eq!(fresh_note(None, false, &mut last), None);
        assert_eq!(last, None);
        let note = || Some("[sandbox: network access was refused]".to_owned());
        assert_eq!(fresh_note(note(), true, &mut last), note());
        assert_eq!(fresh_note(note(), true, &mut last), None, "said already");
        assert_eq!(fresh_note(note(), false, &mut last), note(), "new output");
        assert_eq!(last, note(), "remembered: the process is marked refused");
    }
}
