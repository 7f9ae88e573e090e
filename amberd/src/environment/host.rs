//! The tool host of a session whose tools run on an executor: each workspace tool call
//! becomes a job there, its live output is emitted as it arrives, and the call resolves with
//! the job's outcome. A call whose executor is gone for good fails with a typed error, and
//! the turn is interrupted (`ToolHost::take_interruption`).

use std::sync::{Arc, Mutex};

use amber_executor::wire::{CallLimits, ToolCallParams, method};
use amber_proto::sync::Locked;
use amber_tools::{Tool, ToolContext, ToolHost, ToolOutcome};
use futures::future::BoxFuture;
use serde_json::Value;

use super::link::{ExecutorLink, JobEvent};

/// The live stream of a call is bounded at this many times the output cap: above the
/// tools' own bound (`bash` stops streaming at 4×), so only an executor that misbehaves
/// reaches it.
const STREAM_FACTOR: usize = 5;
/// How long a cancelled call waits for the executor to confirm before it gives up.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs a session's workspace tools on its executor.
pub(crate) struct RemoteToolHost {
    pub(crate) link: Arc<ExecutorLink>,
    pub(crate) session: String,
    /// The session's deny rules for tools that reveal files without naming them.
    pub(crate) deny: Box<dyn Fn() -> Vec<amber_policy::Rule> + Send + Sync>,
    /// Why the executor was lost during the last batch of calls, until the turn takes it.
    interruption: Mutex<Option<String>>,
    /// The session's background processes running there, as the last call reported.
    running: std::sync::atomic::AtomicUsize,
    /// A fleet session: a lost runner does not end the turn, which goes on on the next
    /// runner from the newest checkpoint.
    moves_on_loss: bool,
}

impl RemoteToolHost {
    pub(crate) fn new(
        link: Arc<ExecutorLink>,
        session: String,
        deny: Box<dyn Fn() -> Vec<amber_policy::Rule> + Send + Sync>,
    ) -> Self {
        Self {
            link,
            session,
            deny,
            interruption: Mutex::new(None),
            running: std::sync::atomic::AtomicUsize::new(0),
            moves_on_loss: false,
        }
    }

    /// A fleet session's host: a call its lost runner took down fails, and the turn goes
    /// on; the next call waits for the next runner.
    pub(crate) fn moving_on_loss(mut self) -> Self {
        self.moves_on_loss = true;
        self
    }

    async fn run(&self, tool: &Arc<dyn Tool>, args: Value, ctx: &ToolContext) -> ToolOutcome {
        let job = uuid::Uuid::new_v4().to_string();
        let mut events = self.link.register(&job, &self.session);
        let mut guard = Release {
            link: &self.link,
            job: &job,
            cancel: true,
        };
        let params = ToolCallParams {
            session: self.session.clone(),
            job: job.clone(),
            call_id: ctx.call_id.clone(),
            tool: tool.name().to_owned(),
            args,
            limits: CallLimits {
                max_output_bytes: ctx.limits.max_output_bytes,
                bash_default_timeout_ms: u64::try_from(ctx.limits.bash_default_timeout.as_millis())
                    .unwrap_or(u64::MAX),
            },
            unsandboxed: ctx.unsandboxed.is_some(),
            // The mode's sandbox in force now, as this session's own commands would get.
            sandbox: Some(ctx.session.sandbox().info()),
            deny: (self.deny)(),
        };
        if let Err(err) = self.link.call(method::TOOL_CALL, &params).await {
            // A link that dropped after the call left is read back once attached again;
            // anything else never started it.
            if err.message != "the link dropped" {
                guard.cancel = false;
                return self.lost(format!("cannot reach the executor: {}", err.message));
            }
        }
        let mut cancel_deadline = None;
        // What an executor sends past the bound reaches no client (the call's result is
        // capped by dispatch anyway).
        let stream_cap = ctx.limits.max_output_bytes.saturating_mul(STREAM_FACTOR);
        let mut streamed = 0usize;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = ctx.cancel.cancelled(), if cancel_deadline.is_none() => {
                    cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_WAIT);
                    let _ = self.link.call(method::JOB_CANCEL, &amber_executor::wire::JobParams { job: job.clone() }).await;
                    continue;
                }
                () = sleep_until(cancel_deadline) => {
                    return ToolOutcome::error("[cancelled] the executor did not confirm in time");
                }
            };
            match event {
                Some(JobEvent::Output(text)) => {
                    if streamed < stream_cap {
                        streamed = streamed.saturating_add(text.len());
                        ctx.emit(text);
                        if streamed >= stream_cap {
                            ctx.emit("\n[… live output stops here; the result has the rest]\n");
                        }
                    }
                }
                Some(JobEvent::Done(done)) => {
                    guard.cancel = false;
                    if let Some(running) = done.running_processes {
                        self.running.store(
                            usize::try_from(running).unwrap_or(usize::MAX),
                            std::sync::atomic::Ordering::Relaxed,
                        );
                    }
                    return ToolOutcome {
                        status: done.status,
                        output: done.output,
                        diff: done.diff,
                    };
                }
                Some(JobEvent::Gone(reason)) => {
                    guard.cancel = false;
                    return self.lost(reason);
                }
                None => return self.lost("the link to the executor closed".to_owned()),
            }
        }
    }

    fn lost(&self, reason: String) -> ToolOutcome {
        if self.moves_on_loss {
            return ToolOutcome::error(format!(
                "[executor lost] {reason}; the call's effects there are unknown. The session \
                 moves to another runner, whose workspace is a fresh clone with the newest \
                 checkpoint restored (changes since it are not there): the next call waits \
                 for it"
            ));
        }
        let message = format!(
            "[executor lost] {} ({}); the call's effects there are unknown",
            reason,
            self.link.info().spec
        );
        *self.interruption.locked() = Some(message.clone());
        ToolOutcome::error(message)
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Forgets the job when the call ends, however it ends (cancelling it on the executor when
/// the call was dropped before its outcome).
struct Release<'a> {
    link: &'a Arc<ExecutorLink>,
    job: &'a str,
    cancel: bool,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.link.release(self.job, self.cancel);
    }
}

impl ToolHost for RemoteToolHost {
    fn call<'a>(
        &'a self,
        tool: &'a Arc<dyn Tool>,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(self.run(tool, args, ctx))
    }

    fn take_interruption(&self) -> Option<String> {
        self.interruption.locked().take()
    }

    fn processes_running(&self) -> usize {
        self.running.load(std::sync::atomic::Ordering::Relaxed)
    }
}
