//! Response body → reply: bytes are stitched into UTF-8 text (split code points tolerated,
//! invalid bytes → U+FFFD), framed by eventsource-stream, decoded by the dialect and folded
//! by `StreamState`. The idle timeout is measured between body chunks (keep-alive comments
//! count as life); the cancel token is checked at every await.

use std::fmt::Display;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::decode::{Decoded, StreamState};
use super::{ApiError, ChatResponse, Dialect, StreamEvent};

/// Incremental UTF-8 decoding that keeps an incomplete trailing code point for the next
/// chunk and replaces invalid bytes with U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stitcher {
    pending: Vec<u8>,
}

impl Utf8Stitcher {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::with_capacity(self.pending.len());
        let mut start = 0;
        while start < self.pending.len() {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                }
                Err(e) => {
                    let valid = start + e.valid_up_to();
                    out.push_str(
                        std::str::from_utf8(&self.pending[start..valid]).unwrap_or_default(),
                    );
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start = valid + bad;
                        }
                        None => {
                            start = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }

    /// End of input: a dangling partial code point becomes U+FFFD.
    pub(crate) fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            char::REPLACEMENT_CHARACTER.to_string()
        }
    }
}

/// Why the body stream stopped early.
#[derive(Debug)]
enum BodyError<E> {
    Transport(E),
    Idle(Duration),
}

/// Bytes → text chunks, with the idle timeout applied per body chunk. At the end a blank
/// line is appended so a final event whose terminating blank line never came is dispatched.
fn text_stream<S, B, E>(
    body: S,
    idle: Duration,
) -> impl Stream<Item = Result<String, BodyError<E>>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]>,
    E: Send,
{
    let state = (Box::pin(body), Utf8Stitcher::default(), false);
    futures::stream::unfold(state, move |(mut body, mut utf8, ended)| async move {
        if ended {
            return None;
        }
        let item = match tokio::time::timeout(idle, body.next()).await {
            Ok(Some(Ok(bytes))) => Ok(utf8.push(bytes.as_ref())),
            Ok(Some(Err(e))) => Err(BodyError::Transport(e)),
            Ok(None) => {
                let mut tail = utf8.finish();
                tail.push_str("\n\n");
                return Some((Ok(tail), (body, utf8, true)));
            }
            Err(_) => Err(BodyError::Idle(idle)),
        };
        let ended = item.is_err();
        Some((item, (body, utf8, ended)))
    })
}

/// Read an SSE body to the end of the reply.
///
/// Completion rules: `[DONE]` ends reading; a `finish_reason` makes the reply complete, and
/// reading continues for the usage chunk until `[DONE]`, end of body, a transport error or
/// the idle timeout (all fine then). Without either, the end of the body is `Truncated`.
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
    let mut events = std::pin::pin!(text_stream(body, idle).eventsource());
    let mut state = StreamState::default();
    // A chunk that failed to parse: an error if more events follow, truncation if it was
    // the (cut) last one.
    let mut undecodable: Option<ApiError> = None;
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ApiError::Cancelled),
            next = events.next() => next,
        };
        let event = match next {
            None => break,
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                if state.is_complete() {
                    tracing::debug!("ignoring body error after the reply completed");
                    break;
                }
                return Err(match e {
                    EventStreamError::Transport(BodyError::Idle(d)) => {
                        ApiError::Timeout(format!("no data from the LLM endpoint for {d:?}"))
                    }
                    EventStreamError::Transport(BodyError::Transport(e)) => {
                        ApiError::Connect(format!("connection lost while streaming: {e}"))
                    }
                    EventStreamError::Utf8(e) => ApiError::Decode(e.to_string()),
                    EventStreamError::Parser(e) => {
                        ApiError::Decode(format!("bad SSE framing: {e}"))
                    }
                });
            }
        };
        if let Some(err) = undecodable.take() {
            return Err(err);
        }
        match dialect.decode_event(&event.event, &event.data) {
            Ok(Decoded::Done) => {
                state.mark_done();
                break;
            }
            Ok(Decoded::Skip) => {}
            Ok(Decoded::Chunk(delta)) => state.apply(delta, emit),
            Err(e @ ApiError::Decode(_)) => undecodable = Some(e),
            Err(e) => return Err(e),
        }
    }
    if let Some(err) = undecodable {
        tracing::debug!(%err, "last SSE event was cut off");
    }
    state.finish()
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
    state.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn stitcher_handles_split_and_invalid_bytes() {
        let text = "aé世🎉z";
        let bytes = text.as_bytes();
        for split in 0..=bytes.len() {
            let mut s = Utf8Stitcher::default();
            let mut out = s.push(&bytes[..split]);
            out.push_str(&s.push(&bytes[split..]));
            out.push_str(&s.finish());
            assert_eq!(out, text, "split at {split}");
        }
        let mut s = Utf8Stitcher::default();
        assert_eq!(s.push(b"a\xffb"), "a\u{FFFD}b");
        assert_eq!(s.push(b"\xe4\xb8"), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }
}
