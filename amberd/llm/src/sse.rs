//! Response body → reply: bytes are framed by `SseDecoder`, decoded by the dialect and
//! folded by `StreamState`. The idle timeout is measured between body chunks (keep-alive
//! comments count as life); the cancel token is checked at every await.

use std::fmt::Display;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::decode::{Decoded, StreamState};
use super::error::CONNECTION_LOST;
use super::pace::{Next, Pacer};
use super::sse_decoder::{SseDecoder, SseEvent};
use super::{ApiError, ChatResponse, ChunkMemo, Dialect, StreamEvent};

/// Most body bytes taken without waiting before deltas are forwarded and cancel checked.
const MAX_BURST_BYTES: usize = 256 * 1024;

/// What the reader does after one event.
enum Step {
    Continue,
    /// End of the reply (`[DONE]`).
    Stop,
}

/// Read an SSE body to the end of the reply.
///
/// Completion rules: `[DONE]` ends reading; a `finish_reason` makes the reply complete, and
/// reading continues for the usage chunk until `[DONE]`, end of body, a transport error or
/// the idle timeout (all fine then). Without either, the end of the body is `Truncated`.
///
/// Body chunks already in hand are decoded as one burst and their text is forwarded as one
/// delta, just before the reader waits for more, so latency is that of the first chunk.
/// A stream faster than any human reads is forwarded once per millisecond instead
/// (`pace.rs`).
pub(crate) async fn read_sse<S, B, E>(
    body: S,
    dialect: &dyn Dialect,
    idle: Duration,
    cancel: &CancellationToken,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatResponse, ApiError>
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]>,
    E: Display + Send,
{
    let mut body = std::pin::pin!(body);
    let mut decoder = SseDecoder::default();
    let mut reader = Reader {
        dialect,
        memo: ChunkMemo::default(),
        state: StreamState::default(),
        undecodable: None,
    };
    let mut pacer = Pacer::new(Instant::now());
    let (mut burst, mut ended) = (0usize, false);
    // One of each for the whole stream, not one per wait: a fast stream waits once per
    // chunk, and registering timers and cancel waiters per chunk was measurable.
    let mut cancelled = std::pin::pin!(cancel.cancelled());
    let mut idle_timer = std::pin::pin!(tokio::time::sleep(idle));
    let mut flush_timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
    let mut flush_due: Option<Instant> = None;
    let mut waiting_since;
    'read: loop {
        while let Some(event) = decoder.next_event() {
            pacer.on_event();
            match reader.step(&event, emit) {
                Ok(Step::Continue) => {}
                Ok(Step::Stop) => break 'read,
                Err(e) => {
                    reader.state.flush(emit);
                    return Err(e);
                }
            }
        }
        if ended {
            break;
        }
        // Bytes already in hand join this burst (a fast stream is batched by time instead).
        let ready = if burst < MAX_BURST_BYTES && !pacer.is_fast() {
            body.next().now_or_never()
        } else {
            None
        };
        let next = match ready {
            Some(next) => next,
            None => {
                burst = 0;
                let now = Instant::now();
                waiting_since = now;
                match pacer.next(now) {
                    Next::FlushAndWait => {
                        reader.state.flush(emit);
                        pacer.flushed(now);
                        flush_due = None;
                    }
                    Next::WaitUntil(due) => {
                        if flush_due != Some(due) {
                            flush_timer.as_mut().reset(due);
                            flush_due = Some(due);
                        }
                    }
                }
                loop {
                    tokio::select! {
                        biased;
                        () = &mut cancelled => return Err(ApiError::Cancelled),
                        next = body.next() => break next,
                        // Still waiting when a fast stream's text is due: forward it.
                        () = &mut flush_timer, if flush_due.is_some() => {
                            flush_due = None;
                            reader.state.flush(emit);
                            pacer.flushed(Instant::now());
                        }
                        // Armed `idle` after some earlier wait began; only a wait that has
                        // itself lasted `idle` times out.
                        () = &mut idle_timer => {
                            // An idle timeout too large to add never expires.
                            let deadline = waiting_since.checked_add(idle);
                            if let Some(deadline) = deadline.filter(|d| *d > Instant::now()) {
                                idle_timer.as_mut().reset(deadline);
                            } else if deadline.is_none() {
                                idle_timer.as_mut().reset(Instant::now() + Duration::from_secs(86_400));
                            } else if reader.state.is_complete() {
                                break 'read;
                            } else {
                                return Err(ApiError::Idle {
                                    after: idle,
                                    streaming: true,
                                });
                            }
                        }
                    }
                }
            }
        };
        match next {
            Some(Ok(bytes)) => {
                burst += bytes.as_ref().len();
                decoder.feed(bytes.as_ref());
            }
            None => {
                decoder.finish();
                ended = true;
            }
            Some(Err(_)) if reader.state.is_complete() => {
                tracing::debug!("ignoring body error after the reply completed");
                break 'read;
            }
            Some(Err(e)) => {
                reader.state.flush(emit);
                return Err(ApiError::Connect(format!("{CONNECTION_LOST}: {e}")));
            }
        }
    }
    if let Some(err) = reader.undecodable {
        tracing::debug!(%err, "last SSE event was cut off");
    }
    reader.state.finish(emit)
}

/// The decoding state of one `read_sse`.
struct Reader<'a> {
    dialect: &'a dyn Dialect,
    memo: ChunkMemo,
    state: StreamState,
    /// A chunk that failed to parse: an error if more events follow, truncation if it was
    /// the (cut) last one.
    undecodable: Option<ApiError>,
}

impl Reader<'_> {
    fn step(
        &mut self,
        event: &SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Step, ApiError> {
        if let Some(err) = self.undecodable.take() {
            return Err(err);
        }
        match self
            .dialect
            .decode_stream_event(&mut self.memo, event.event, event.data)
        {
            Ok(Decoded::Done) => {
                self.state.mark_done();
                return Ok(Step::Stop);
            }
            Ok(Decoded::Skip) => {}
            Ok(Decoded::Chunk(delta)) => self.state.apply(delta, emit),
            Err(e @ ApiError::Decode(_)) => self.undecodable = Some(e),
            Err(e) => return Err(e),
        }
        Ok(Step::Continue)
    }
}

/// A non-streamed body (the server answered `application/json`): one chunk, complete.
pub(crate) fn read_buffered(
    body: &str,
    dialect: &dyn Dialect,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatResponse, ApiError> {
    let delta = dialect.decode_response(body)?;
    let mut state = StreamState::default();
    state.apply(delta, emit);
    state.mark_done();
    state.finish(emit)
}
