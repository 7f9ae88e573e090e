//! The LLM I/O thread: every chat request's HTTP connection and SSE decoding run on one
//! dedicated single-threaded tokio runtime, shared by all clients and sessions.
//!
//! Why: hyper hands a response body over one chunk at a time, through a channel between its
//! connection task and the reader. On the daemon's multi-threaded runtime those two tasks
//! land on different workers, and every chunk costs a cross-thread wake-up (an eventfd write
//! and a context switch). With both on one thread the hand-over is a local queue push:
//! measured, amberd's CPU per 20,000-chunk reply fell from 80 to about 50 ms
//! (docs/benchmarks.md). Decoded deltas cross to the session's task through an unbounded
//! channel, which wakes it once per burst, not once per chunk.
//!
//! reqwest spawns its connection tasks on the runtime that polls the request, so pooled
//! connections live on this thread too. Decoding is cheap (about a microsecond per chunk),
//! so one thread carries many concurrent streams.

use std::sync::OnceLock;

use tokio::runtime::Handle;

use super::ApiError;

static IO_THREAD: OnceLock<Result<Handle, String>> = OnceLock::new();

/// The I/O thread's runtime, started on first use.
pub(crate) fn handle() -> Result<&'static Handle, ApiError> {
    IO_THREAD
        .get_or_init(start)
        .as_ref()
        .map_err(|e| ApiError::Connect(format!("cannot start the LLM I/O thread: {e}")))
}

fn start() -> Result<Handle, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("amberd-llm-io".into())
        // Drives the spawned requests for the life of the process.
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(|e| e.to_string())?;
    Ok(handle)
}
