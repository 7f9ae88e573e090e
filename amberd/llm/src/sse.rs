//! Response body → reply: bytes are framed by `SseDecoder`, decoded by the dialect's
//! decoder for this stream (`Dialect::stream`, made once per read) and folded by
//! `StreamState`. The idle timeout is measured between body chunks (keep-alive
//! comments count as life); the cancel token is checked at every await. The reply ends at
//! its dialect's final event, not at the end of the body, and is bounded in size
//! (`limits.rs`): its lines and events by the decoder, its content by `StreamState`.

use std::fmt::Display;
use std::pin::Pin;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::decode::{Decoded, StreamState};
use super::dialect::{Dialect, StreamDecoder};
use super::error::CONNECTION_LOST;
use super::limits::{Oversized, ReplyLimits};
use super::pace::{Next, Pacer};
use super::sse_decoder::{SseDecoder, SseEvent, TooLong};
use super::{ApiError, ChatResponse, StreamEvent};

/// Most body bytes taken without waiting before deltas are forwarded and cancel checked.
const MAX_BURST_BYTES: usize = 256 * 1024;

/// Whether reading goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Continue,
    /// End of the reply: the dialect's final event (`[DONE]`, `message_stop`,
    /// `response.completed`), or a wait or transport error after it was complete.
    Stop,
}

/// What one wait for the body brought.
enum Waited<B, E> {
    /// The next body piece; `None` is the end of the body.
    Piece(Option<Result<B, E>>),
    /// The idle timeout passed after the reply was complete: reading stops, all fine.
    Complete,
}

/// Read an SSE body to the end of the reply.
///
/// Completion rules: the dialect's final event (`[DONE]`, Anthropic's `message_stop`, the
/// Responses API's `response.completed` / `.incomplete`) ends reading at once — the reader
/// never waits for the end of a body a proxy may hold open. A `finish_reason` alone makes
/// the reply complete, and reading continues for the usage chunk until the final event, end
/// of body, a transport error or the idle timeout (all fine then). Without either, the end
/// of the body is `Truncated`. A line or event past `limits.event`, a reply past
/// `limits.reply`, or a body past `limits.wire` is `ReplyTooLarge`.
///
/// Body chunks already in hand are decoded as one burst and their text is forwarded as one
/// delta, just before the reader waits for more, so latency is that of the first chunk.
/// A stream faster than any human reads is forwarded once per millisecond instead
/// (`pace.rs`).
pub(crate) async fn read_sse<S, B, E>(
    body: S,
    dialect: &dyn Dialect,
    idle: Duration,
    limits: ReplyLimits,
    cancel: &CancellationToken,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatResponse, ApiError>
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]>,
    E: Display + Send,
{
    let body = std::pin::pin!(body);
    let decoder = SseDecoder::new(limits.event);
    let reader = Reader {
        // One decoder for the whole stream: its state spans the events, its box is made once.
        events: dialect.stream(),
        state: StreamState::new(limits),
        undecodable: None,
    };
    let pacer = Pacer::new(Instant::now());
    // One of each for the whole stream, not one per wait: a fast stream waits once per
    // chunk, and registering timers and cancel waiters per chunk was measurable.
    let cancelled = std::pin::pin!(cancel.cancelled());
    let idle_timer = std::pin::pin!(tokio::time::sleep(idle));
    let flush_timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
    SseRead {
        body,
        decoder,
        limits,
        reader,
        pacer,
        burst: 0,
        taken: 0,
        ended: false,
        idle,
        cancelled,
        idle_timer,
        flush_timer,
        flush_due: None,
    }
    .run(emit)
    .await
}

/// One `read_sse` under way: the body, its framing and decoding, the pace of forwarding,
/// and the waits. `'r` is the read's own pinned state, `'c` the caller's cancel token.
struct SseRead<'r, 'c, S> {
    body: Pin<&'r mut S>,
    decoder: SseDecoder,
    limits: ReplyLimits,
    reader: Reader,
    pacer: Pacer,
    /// Body bytes taken since the last wait.
    burst: usize,
    /// Body bytes taken in all (bounded by `limits.wire`).
    taken: usize,
    /// The body has ended (its last event is in the decoder).
    ended: bool,
    idle: Duration,
    cancelled: Pin<&'r mut WaitForCancellationFuture<'c>>,
    idle_timer: Pin<&'r mut Sleep>,
    flush_timer: Pin<&'r mut Sleep>,
    /// When the held text of a fast stream is due (the flush timer is armed for it).
    flush_due: Option<Instant>,
}

impl<S, B, E> SseRead<'_, '_, S>
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]>,
    E: Display + Send,
{
    /// Decode what is in hand, then take the next body piece — one already in hand, else
    /// one waited for — until the reply ends.
    async fn run(
        mut self,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ApiError> {
        loop {
            if self.decode_in_hand(emit)? == Step::Stop || self.ended {
                break;
            }
            let piece = match self.piece_in_hand() {
                Some(piece) => piece,
                None => match self.wait_for_piece(emit).await? {
                    Waited::Piece(piece) => piece,
                    Waited::Complete => break,
                },
            };
            if self.take_piece(piece, emit)? == Step::Stop {
                break;
            }
        }
        self.finish(emit)
    }

    /// Decodes and folds every complete event the decoder holds; their text waits for the
    /// next flush. A decode error forwards what came before it.
    fn decode_in_hand(&mut self, emit: &mut dyn FnMut(StreamEvent)) -> Result<Step, ApiError> {
        loop {
            let event = match self.decoder.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(TooLong) => {
                    self.reader.state.flush(emit);
                    return Err(self.limits.exceeded(Oversized::Event));
                }
            };
            self.pacer.on_event();
            match self.reader.step(&event, emit) {
                Ok(Step::Continue) => {}
                Ok(Step::Stop) => return Ok(Step::Stop),
                Err(e) => {
                    self.reader.state.flush(emit);
                    return Err(e);
                }
            }
        }
        Ok(Step::Continue)
    }

    /// A body piece that is ready without waiting: it joins this burst (a fast stream is
    /// batched by time instead, and a burst is capped so deltas and cancel are not held).
    fn piece_in_hand(&mut self) -> Option<Option<Result<B, E>>> {
        if self.burst < MAX_BURST_BYTES && !self.pacer.is_fast() {
            self.body.next().now_or_never()
        } else {
            None
        }
    }

    /// Waits for the next body piece, racing cancel, the flush of a fast stream's held
    /// text and the idle timeout.
    async fn wait_for_piece(
        &mut self,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Waited<B, E>, ApiError> {
        self.burst = 0;
        let waiting_since = Instant::now();
        self.pace(waiting_since, emit);
        loop {
            tokio::select! {
                biased;
                () = &mut self.cancelled => return Err(ApiError::Cancelled),
                next = self.body.next() => return Ok(Waited::Piece(next)),
                // Still waiting when a fast stream's text is due: forward it.
                () = &mut self.flush_timer, if self.flush_due.is_some() => {
                    self.flush_due = None;
                    self.reader.state.flush(emit);
                    self.pacer.flushed(Instant::now());
                }
                () = &mut self.idle_timer => {
                    if self.idle_timer_fired(waiting_since)? == Step::Stop {
                        return Ok(Waited::Complete);
                    }
                }
            }
        }
    }

    /// Before a wait: forward what is pending, or, for a fast stream whose text is not due
    /// yet, arm the flush timer for when it is.
    fn pace(&mut self, now: Instant, emit: &mut dyn FnMut(StreamEvent)) {
        match self.pacer.next(now) {
            Next::FlushAndWait => {
                self.reader.state.flush(emit);
                self.pacer.flushed(now);
                self.flush_due = None;
            }
            Next::WaitUntil(due) => {
                if self.flush_due != Some(due) {
                    self.flush_timer.as_mut().reset(due);
                    self.flush_due = Some(due);
                }
            }
        }
    }

    /// The idle timer was armed `idle` after some earlier wait began; only a wait that has
    /// itself lasted `idle` (since `waiting_since`) times out, else the timer is re-armed.
    /// A timeout after the reply was complete stops reading; before, it is an error.
    fn idle_timer_fired(&mut self, waiting_since: Instant) -> Result<Step, ApiError> {
        // An idle timeout too large to add never expires.
        let deadline = waiting_since.checked_add(self.idle);
        if let Some(deadline) = deadline.filter(|d| *d > Instant::now()) {
            self.idle_timer.as_mut().reset(deadline);
        } else if deadline.is_none() {
            self.idle_timer
                .as_mut()
                .reset(Instant::now() + Duration::from_secs(86_400));
        } else if self.reader.state.is_complete() {
            return Ok(Step::Stop);
        } else {
            return Err(ApiError::Idle {
                after: self.idle,
                streaming: true,
            });
        }
        Ok(Step::Continue)
    }

    /// One body piece: bytes go to the decoder, the end of the body finishes its last
    /// event, a transport error ends the reply (quietly once it was complete).
    fn take_piece(
        &mut self,
        piece: Option<Result<B, E>>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Step, ApiError> {
        match piece {
            Some(Ok(bytes)) => {
                let len = bytes.as_ref().len();
                self.burst += len;
                self.taken = self.taken.saturating_add(len);
                if self.taken > self.limits.wire {
                    self.reader.state.flush(emit);
                    return Err(self.limits.exceeded(Oversized::Stream));
                }
                self.decoder.feed(bytes.as_ref());
            }
            None => {
                self.decoder.finish();
                self.ended = true;
            }
            Some(Err(_)) if self.reader.state.is_complete() => {
                tracing::debug!("ignoring body error after the reply completed");
                return Ok(Step::Stop);
            }
            Some(Err(e)) => {
                self.reader.state.flush(emit);
                return Err(ApiError::Connect(format!("{CONNECTION_LOST}: {e}")));
            }
        }
        Ok(Step::Continue)
    }

    /// The reply as read: complete, or `Truncated` (a cut-off last event only logged).
    fn finish(self, emit: &mut dyn FnMut(StreamEvent)) -> Result<ChatResponse, ApiError> {
        if let Some(err) = self.reader.undecodable {
            tracing::debug!(%err, "last SSE event was cut off");
        }
        self.reader.state.finish(emit)
    }
}

/// The decoding state of one `read_sse`.
struct Reader {
    /// The dialect's decoder of this stream's events.
    events: Box<dyn StreamDecoder>,
    state: StreamState,
    /// A chunk that failed to parse: an error if more events follow, truncation if it was
    /// the (cut) last one.
    undecodable: Option<ApiError>,
}

impl Reader {
    fn step(
        &mut self,
        event: &SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Step, ApiError> {
        if let Some(err) = self.undecodable.take() {
            return Err(err);
        }
        match self.events.decode(event.event, event.data) {
            Ok(Decoded::Done) => {
                self.state.mark_done();
                return Ok(Step::Stop);
            }
            Ok(Decoded::Final(delta)) => {
                self.state.apply(delta, emit)?;
                self.state.mark_done();
                return Ok(Step::Stop);
            }
            Ok(Decoded::Skip) => {}
            Ok(Decoded::Chunk(delta)) => self.state.apply(delta, emit)?,
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
    limits: ReplyLimits,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatResponse, ApiError> {
    let delta = dialect.decode_response(body)?;
    let mut state = StreamState::new(limits);
    state.apply(delta, emit)?;
    state.mark_done();
    state.finish(emit)
}
