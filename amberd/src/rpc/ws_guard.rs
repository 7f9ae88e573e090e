//! The WebSocket guard: amber's layer between a WebSocket's socket and jsonrpsee (whose
//! reader, soketto, cannot be configured to do any of this). It reads the client's frames
//! itself ([`FrameReader`]) and hands jsonrpsee only whole, checked messages, each as one
//! frame; it follows what jsonrpsee writes ([`WriteTracker`]) so it can put frames of its
//! own between jsonrpsee's. It
//!
//! - fails the connection as RFC 6455 says: a protocol error closes with 1002, a text
//!   message that is not UTF-8 with 1007;
//! - answers what jsonrpsee would get wrong ([`envelope::check`]): invalid ids and non-requests
//!   get -32600 with `id: null`, an oversized message -32007, a message past the daemon's
//!   byte budget -32003;
//! - stops reading while `max_unanswered_calls` calls are unanswered (jsonrpsee itself
//!   would read on and park every reply in a task of its own: backpressure, not memory);
//! - closes (1008) a connection that has not sent `initialize` within `initialize_timeout`
//!   of the upgrade, or leaves a started message unfinished for `frame_timeout`.
//!
//! Both jsonrpsee's reader and writer reach it through one lock (soketto splits the stream
//! with a `BiLock`), so its state needs no synchronisation; each side keeps the other's
//! waker to wake it when it made progress the other waits for.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use amber_proto::errors;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::budget::{ByteBudget, Reserved};
use super::envelope::{self, Verdict};
use super::gate::WsConn;
use super::ws_frames::{
    Discard, Event, FrameReader, Phase, Violation, WriteTracker, client_frame, close,
    server_close_frame, server_text_frame,
};

/// The limits one WebSocket runs under (from `[server]`).
#[derive(Debug, Clone, Copy)]
pub(super) struct WsLimits {
    pub max_message: usize,
    pub max_unanswered: usize,
    pub initialize_timeout: Duration,
    pub frame_timeout: Duration,
}

/// How long a failing connection waits for its close frame to go out.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;
/// While reading is paused, at most this much more input is taken in, only so that a
/// client that hung up is seen to be gone (its end of file lies behind what it sent).
const PAUSED_READ_AHEAD: usize = 64 * 1024;

enum CloseState {
    Open,
    /// The close frame is queued; the connection ends once it is written (or by `give_up`).
    Closing {
        give_up: Instant,
    },
    Closed,
}

/// One WebSocket's guard state; see the module header.
pub(super) struct WsGuard {
    limits: WsLimits,
    conn: Arc<WsConn>,
    budget: ByteBudget,
    reader: FrameReader,
    writes: WriteTracker,
    /// Read from the socket, not yet through the reader.
    input: Vec<u8>,
    input_pos: usize,
    /// Checked bytes for jsonrpsee, each with the budget its message holds.
    out: VecDeque<(Vec<u8>, Reserved)>,
    out_pos: usize,
    /// Budget held by the message being gathered.
    gathering: Reserved,
    /// The guard's own frames (answers, the close frame), written at frame boundaries.
    inject: Vec<u8>,
    inject_pos: usize,
    unanswered: usize,
    paused: bool,
    /// The client hung up (end of file while paused, or a failed write): jsonrpsee reads
    /// end of file, so the connection ends even with replies still queued for it.
    peer_gone: bool,
    initialize_by: Option<Instant>,
    message_started: Option<Instant>,
    closing: CloseState,
    /// Fires when the connection's slot went to another client (only before `initialize`).
    evicted: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    timer: Pin<Box<Sleep>>,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

impl WsGuard {
    /// `leftover`: bytes the client sent after its upgrade request's head.
    pub(super) fn new(
        limits: WsLimits,
        conn: Arc<WsConn>,
        budget: ByteBudget,
        leftover: Vec<u8>,
    ) -> Self {
        let evicted = conn
            .evicted()
            .map(|token| Box::pin(token.clone().cancelled_owned()));
        Self {
            limits,
            conn,
            budget,
            reader: FrameReader::new(limits.max_message),
            writes: WriteTracker::default(),
            input: leftover,
            input_pos: 0,
            out: VecDeque::new(),
            out_pos: 0,
            gathering: Reserved::default(),
            inject: Vec::new(),
            inject_pos: 0,
            unanswered: 0,
            paused: false,
            peer_gone: false,
            initialize_by: None,
            message_started: None,
            closing: CloseState::Open,
            evicted,
            timer: Box::pin(tokio::time::sleep(Duration::from_secs(3600))),
            read_waker: None,
            write_waker: None,
        }
    }

    pub(super) fn poll_read(
        &mut self,
        inner: &mut UnixStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.peer_gone {
                return Poll::Ready(Ok(()));
            }
            if !self.inject.is_empty() && self.poll_inject(inner, cx).is_ready() {
                // The writer may wait for these bytes to be out (or for the socket).
                wake(&mut self.write_waker);
            }
            match self.closing {
                CloseState::Closed => return Poll::Ready(Ok(())),
                CloseState::Closing { give_up } => {
                    if self.inject.is_empty() || Instant::now() >= give_up {
                        let _ = Pin::new(&mut *inner).poll_shutdown(cx);
                        self.closing = CloseState::Closed;
                        wake(&mut self.write_waker);
                        return Poll::Ready(Ok(()));
                    }
                    if self.timer_fired(give_up, cx) {
                        continue;
                    }
                    return Poll::Pending;
                }
                CloseState::Open => {}
            }
            if let Some((bytes, _)) = self.out.front() {
                let n = (bytes.len() - self.out_pos).min(buf.remaining());
                buf.put_slice(&bytes[self.out_pos..self.out_pos + n]);
                self.out_pos += n;
                if self.out_pos == bytes.len() {
                    self.out.pop_front();
                    self.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            match self.writes.phase() {
                Phase::Refused => return Poll::Ready(Ok(())),
                Phase::ResponseHead => {
                    // Frames are read only once the 101 is out.
                    self.read_waker = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Phase::Frames => {}
            }
            if self
                .evicted
                .as_mut()
                .is_some_and(|evicted| evicted.as_mut().poll(cx).is_ready())
            {
                self.evicted = None;
                self.fail(Violation {
                    code: close::POLICY_VIOLATION,
                    reason: "every slot was taken: this connection had not sent `initialize`, so it gave its slot up",
                });
                continue;
            }
            let now = Instant::now();
            if let Some(violation) = self.expired(now) {
                self.fail(violation);
                continue;
            }
            if self.unanswered >= self.limits.max_unanswered {
                self.paused = true;
                self.read_waker = Some(cx.waker().clone());
                if self.poll_hangup(inner, cx) {
                    continue;
                }
                if let Some(at) = self.next_deadline()
                    && self.timer_fired(at, cx)
                {
                    continue;
                }
                return Poll::Pending;
            }
            if self.paused {
                // The client was not slow: the daemon stopped reading. Its time restarts.
                self.paused = false;
                if self.message_started.is_some() {
                    self.message_started = Some(now);
                }
            }
            if self.process(now) {
                continue;
            }
            let mut chunk = [0u8; READ_CHUNK];
            let mut chunk_buf = ReadBuf::new(&mut chunk);
            match Pin::new(&mut *inner).poll_read(cx, &mut chunk_buf) {
                Poll::Ready(Ok(())) if chunk_buf.filled().is_empty() => {
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(())) => {
                    self.input.extend_from_slice(chunk_buf.filled());
                }
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => {
                    if let Some(at) = self.next_deadline()
                        && self.timer_fired(at, cx)
                    {
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    pub(super) fn poll_write(
        &mut self,
        inner: &mut UnixStream,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_own_frames(inner, cx))?;
        if !matches!(self.closing, CloseState::Open) && self.writes.at_frame_boundary() {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let n = match Pin::new(&mut *inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(err)) => {
                // The client is gone: the reader must see it too, or a paused one would
                // hold the connection (and its slot) forever.
                self.peer_gone = true;
                wake(&mut self.read_waker);
                return Poll::Ready(Err(err));
            }
            Poll::Pending => {
                self.write_waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
        };
        let before = self.writes.phase();
        let written = self.writes.advance(&buf[..n]);
        self.conn.unread.written(written.data_bytes);
        if written.replies > 0 {
            self.unanswered = self.unanswered.saturating_sub(written.replies);
            wake(&mut self.read_waker);
        }
        if before == Phase::ResponseHead && self.writes.phase() != Phase::ResponseHead {
            self.initialize_by = Some(Instant::now() + self.limits.initialize_timeout);
            wake(&mut self.read_waker);
        }
        Poll::Ready(Ok(n))
    }

    pub(super) fn poll_flush(
        &mut self,
        inner: &mut UnixStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_own_frames(inner, cx))?;
        Pin::new(inner).poll_flush(cx)
    }

    /// Writes the guard's queued frames if the output is between frames; `Pending` while
    /// they wait (for the boundary or the socket).
    fn poll_own_frames(
        &mut self,
        inner: &mut UnixStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if matches!(self.closing, CloseState::Closed) {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if self.inject.is_empty() || !self.writes.at_frame_boundary() {
            return Poll::Ready(Ok(()));
        }
        match self.poll_inject(inner, cx) {
            Poll::Ready(result) => {
                wake(&mut self.read_waker);
                Poll::Ready(result)
            }
            Poll::Pending => {
                self.write_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn poll_inject(
        &mut self,
        inner: &mut UnixStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while self.inject_pos < self.inject.len() {
            if !self.writes.at_frame_boundary() {
                return Poll::Pending;
            }
            let n = ready!(Pin::new(&mut *inner).poll_write(cx, &self.inject[self.inject_pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.inject_pos += n;
        }
        self.inject.clear();
        self.inject_pos = 0;
        Poll::Ready(Ok(()))
    }

    /// While paused: reads a little ahead (into the input, not through the reader) to see
    /// a hang-up; true once the client is known to be gone.
    fn poll_hangup(&mut self, inner: &mut UnixStream, cx: &mut Context<'_>) -> bool {
        if self.input.len() - self.input_pos >= PAUSED_READ_AHEAD {
            return false;
        }
        let mut chunk = [0u8; READ_CHUNK];
        let mut chunk_buf = ReadBuf::new(&mut chunk);
        match Pin::new(&mut *inner).poll_read(cx, &mut chunk_buf) {
            Poll::Ready(Ok(())) if chunk_buf.filled().is_empty() => self.peer_gone = true,
            Poll::Ready(Ok(())) => self.input.extend_from_slice(chunk_buf.filled()),
            Poll::Ready(Err(_)) => self.peer_gone = true,
            Poll::Pending => {}
        }
        self.peer_gone
    }

    /// Runs buffered input through the reader; whether anything happened.
    fn process(&mut self, now: Instant) -> bool {
        let mut input = &self.input[self.input_pos..];
        let before = input.len();
        let result = self.reader.feed(&mut input);
        let consumed = before - input.len();
        self.input_pos += consumed;
        if self.input_pos == self.input.len() {
            self.input.clear();
            self.input_pos = 0;
        }
        let progressed = match result {
            Err(violation) => {
                self.fail(violation);
                return true;
            }
            Ok(Some(event)) => {
                self.on_event(event);
                true
            }
            Ok(None) => consumed > 0,
        };
        if self.reader.mid_message() {
            self.message_started.get_or_insert(now);
        } else {
            self.message_started = None;
        }
        progressed
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::DataFrame { len } => match self.budget.try_take(len) {
                Some(reserved) => self.gathering.merge(reserved),
                None => {
                    self.gathering = Reserved::default();
                    self.reader.discard_message(Discard::Overloaded);
                }
            },
            Event::Control(raw) => self.out.push_back((raw, Reserved::default())),
            Event::Message { text, payload } => {
                let reserved = std::mem::take(&mut self.gathering);
                if text && std::str::from_utf8(&payload).is_err() {
                    self.fail(Violation {
                        code: close::INVALID_PAYLOAD,
                        reason: "a text message must be valid UTF-8",
                    });
                    return;
                }
                match envelope::check(&payload) {
                    Verdict::Pass { expects_reply } => {
                        self.unanswered += usize::from(expects_reply);
                        self.hand_on(text, payload, reserved);
                    }
                    Verdict::Rewrite(batch) => {
                        self.unanswered += 1;
                        self.hand_on(text, batch.into_bytes(), reserved);
                    }
                    Verdict::Answer(answer) => self.answer(&answer),
                }
            }
            Event::Discarded(why) => {
                self.gathering = Reserved::default();
                let answer = match why {
                    Discard::TooLarge => too_large(self.limits.max_message),
                    Discard::Overloaded => overloaded(),
                };
                self.answer(&answer);
            }
        }
    }

    fn hand_on(&mut self, text: bool, payload: Vec<u8>, reserved: Reserved) {
        self.out
            .push_back((client_frame(text, payload.len()), Reserved::default()));
        self.out.push_back((payload, reserved));
    }

    fn answer(&mut self, json: &str) {
        self.inject
            .extend_from_slice(&server_text_frame(json.as_bytes()));
        wake(&mut self.write_waker);
    }

    /// Fails the connection: nothing more is read or handed on; the close frame follows
    /// whatever the guard already queued.
    fn fail(&mut self, violation: Violation) {
        if !matches!(self.closing, CloseState::Open) {
            return;
        }
        tracing::debug!(
            code = violation.code,
            reason = violation.reason,
            "failing a WebSocket"
        );
        self.input.clear();
        self.input_pos = 0;
        self.out.clear();
        self.out_pos = 0;
        self.gathering = Reserved::default();
        self.inject
            .extend_from_slice(&server_close_frame(violation.code, violation.reason));
        self.closing = CloseState::Closing {
            give_up: Instant::now() + CLOSE_GRACE,
        };
        wake(&mut self.write_waker);
    }

    fn expired(&mut self, now: Instant) -> Option<Violation> {
        if self.conn.is_initialized() {
            self.initialize_by = None;
        }
        if self.initialize_by.is_some_and(|at| now >= at) {
            return Some(Violation {
                code: close::POLICY_VIOLATION,
                reason: "`initialize` was not sent in time after the upgrade",
            });
        }
        let frame_deadline = self
            .message_started
            .map(|at| at + self.limits.frame_timeout);
        if !self.paused && frame_deadline.is_some_and(|at| now >= at) {
            return Some(Violation {
                code: close::POLICY_VIOLATION,
                reason: "a started message was not finished in time",
            });
        }
        None
    }

    fn next_deadline(&self) -> Option<Instant> {
        let initialize = self.initialize_by.filter(|_| !self.conn.is_initialized());
        let message = self
            .message_started
            .filter(|_| !self.paused)
            .map(|at| at + self.limits.frame_timeout);
        [initialize, message].into_iter().flatten().min()
    }

    fn timer_fired(&mut self, at: Instant, cx: &mut Context<'_>) -> bool {
        if self.timer.deadline() != at {
            self.timer.as_mut().reset(at);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }
}

fn wake(waker: &mut Option<Waker>) {
    if let Some(waker) = waker.take() {
        waker.wake();
    }
}

fn too_large(max: usize) -> String {
    let limit = u32::try_from(max).unwrap_or(u32::MAX);
    error_json(jsonrpsee::types::error::reject_too_big_request(limit))
}

fn overloaded() -> String {
    error_json(jsonrpsee::types::ErrorObject::owned(
        errors::OVERLOADED,
        "too many request bytes in flight on the daemon; retry later",
        None::<()>,
    ))
}

fn error_json(error: jsonrpsee::types::ErrorObjectOwned) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": error}).to_string()
}
