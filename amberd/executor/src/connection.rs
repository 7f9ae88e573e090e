//! One connection to the executor: newline-delimited JSON-RPC read from a stream, answered
//! on the same stream. Requests run concurrently (a long `session/open` does not hold up a
//! `job/read`); a line that is not JSON-RPC gets an error and the connection goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::executor::{Executor, Origin};
use crate::wire::{Frame, InitializeParams, Line, RpcError, code, line_of, method};

/// The longest line the executor reads: a `write` call carries a whole file.
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// The longest line a client reads from an executor: a `job/read` of a job's whole kept
/// output (8 MiB, escaped) and room to spare.
pub const MAX_ANSWER_BYTES: usize = 32 << 20;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// Serves one connection until it ends.
pub async fn serve<R, W>(executor: Arc<Executor>, reader: R, writer: W, origin: Origin)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let conn = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
    let (outbox, mut outgoing) = mpsc::unbounded_channel::<Line>();
    let writing = tokio::spawn(async move {
        let mut writer = tokio::io::BufWriter::new(writer);
        while let Some(line) = outgoing.recv().await {
            if writer.write_all(&line).await.is_err() {
                return;
            }
            // Flush when nothing else waits: batches a burst, never holds a lone frame.
            if outgoing.is_empty() && writer.flush().await.is_err() {
                return;
            }
        }
        let _ = writer.flush().await;
    });
    let mut lines = BufReader::new(reader);
    let mut initialized = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut lines, &mut line, MAX_LINE_BYTES).await {
            Ok(false) => break,
            Ok(true) => {}
            Err(err) => {
                let _ = outbox.send(response(
                    Value::Null,
                    Err(RpcError::new(code::PARSE_ERROR, err)),
                ));
                break;
            }
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let frame: Frame = match serde_json::from_slice(&line) {
            Ok(frame) => frame,
            Err(err) => {
                let _ = outbox.send(response(
                    Value::Null,
                    Err(RpcError::new(code::PARSE_ERROR, format!("not JSON: {err}"))),
                ));
                continue;
            }
        };
        let (Some(id), Some(method)) = (frame.id, frame.method) else {
            // Responses and notifications from the client carry nothing to act on.
            continue;
        };
        let params = frame.params.unwrap_or(Value::Object(Default::default()));
        if !initialized {
            let answer = if method == method::INITIALIZE {
                serde_json::from_value::<InitializeParams>(params)
                    .map_err(|e| RpcError::new(code::INVALID_PARAMS, e.to_string()))
                    .and_then(|p| executor.initialize(p, origin))
                    .and_then(|r| {
                        serde_json::to_value(r)
                            .map_err(|e| RpcError::new(code::INVALID_PARAMS, e.to_string()))
                    })
            } else {
                Err(RpcError::new(code::NOT_INITIALIZED, "initialize first"))
            };
            let failed = answer.is_err();
            let ok = !failed;
            let _ = outbox.send(response(id, answer));
            if ok {
                initialized = true;
                // From now on this connection receives the live output.
                executor.attach(conn, outbox.clone());
            } else if origin == Origin::Attached && method == method::INITIALIZE {
                // A wrong token gets one answer, not a second try on this connection.
                break;
            }
            continue;
        }
        if method == method::TOOL_CALL {
            // Started as read (not in a task of its own, as every other method is): a
            // session's calls start in the order they were sent.
            let _ = outbox.send(response(id, executor.start_call(params)));
            continue;
        }
        let executor = Arc::clone(&executor);
        let outbox = outbox.clone();
        tokio::spawn(async move {
            let answer = executor.handle(&method, params).await;
            let _ = outbox.send(response(id, answer));
        });
    }
    executor.detach(conn);
    drop(outbox);
    // Answers still running finish into a closed outbox; what was queued is written.
    let _ = writing.await;
}

/// Reads one line (without its newline) into `line`; `Ok(false)` at the end of the stream.
/// A line longer than `max` bytes is an error, never held whole: both ends read the other's
/// lines through it.
pub async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    max: usize,
) -> Result<bool, String> {
    loop {
        let available = match reader.fill_buf().await {
            Ok(bytes) => bytes,
            Err(err) => return Err(format!("read failed: {err}")),
        };
        if available.is_empty() {
            return Ok(!line.is_empty());
        }
        let (taken, done) = match memchr_newline(available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let end = if done { taken - 1 } else { taken };
        line.extend_from_slice(&available[..end]);
        reader.consume(taken);
        if line.len() > max {
            return Err(format!("a line longer than {max} bytes"));
        }
        if done {
            return Ok(true);
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

/// A response as a line.
fn response(id: Value, answer: Result<Value, RpcError>) -> Line {
    line_of(&Frame::response(id, answer))
}
