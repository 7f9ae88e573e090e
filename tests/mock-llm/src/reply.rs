//! A rendered answer ([`Reply`]): the status, headers and body the server sends, the body being
//! either whole bytes or [`Step`]s (frames, pauses, a cut). What the renderers produce and the
//! server plays; rendered once per request, or once at start for a [`Conversation`]'s turns.
//!
//! [`Conversation`]: crate::Conversation

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;

use crate::turn::{Deltas, MockTurn, Shape};

/// Pause before a scripted cut, so the server flushes the data already sent (an error from
/// the body stream makes hyper drop the connection without writing what it has buffered).
pub(crate) const FLUSH_PAUSE: Duration = Duration::from_millis(20);

/// What a frame of a streamed body carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Reply text: the server timestamps it as it hands it over.
    Content,
    /// The usage-only chunk: sent only when the request asked for it
    /// (`stream_options.include_usage`).
    Usage,
    /// A reasoning delta (what an endless reasoning turn repeats).
    Reasoning,
    /// Anything else.
    Other,
}

/// One step of a streamed body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Bytes to write as they are.
    Data(Bytes, Frame),
    /// Pause before the next step.
    Sleep(Duration),
    /// Close the connection mid-body (no terminating chunk).
    Cut,
    /// Keep the connection open this long without a byte (a proxy that does not close
    /// after the final event), then end the body. The answer counts as complete before it.
    Hold(Duration),
    /// These bytes again and again, as fast as the client reads, until it goes away.
    Repeat(Bytes),
}

/// A response body.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    /// Sent at once, with a `Content-Length`.
    Whole(Bytes),
    /// Streamed step by step; `content` counts the content frames.
    Steps { steps: Arc<[Step]>, content: usize },
}

impl Body {
    pub(crate) fn steps(steps: Vec<Step>) -> Body {
        let content = steps
            .iter()
            .filter(|s| matches!(s, Step::Data(_, Frame::Content)))
            .count();
        Body::Steps {
            steps: steps.into(),
            content,
        }
    }
}

/// One answer as the server sends it.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub retry_after: Option<u64>,
    /// Wait before the response head (a paced turn answered whole).
    pub pause: Duration,
    pub body: Body,
}

impl Reply {
    /// Every data frame of a streamed reply as text (tests read what a client would).
    #[cfg(test)]
    pub(crate) fn streamed_text(&self) -> String {
        let Body::Steps { steps, .. } = &self.body else {
            return String::new();
        };
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(b, _) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    /// A 200 `text/event-stream` of these steps (sent with `Cache-Control: no-cache`).
    pub(crate) fn event_stream(steps: Vec<Step>) -> Reply {
        Reply {
            content_type: EVENT_STREAM,
            ..Reply::ok_json(Body::steps(steps))
        }
    }
    /// The whole answer for a turn that draws no deltas (a status or a raw body), or the
    /// deltas the API's renderer streams: both dialects share this first step.
    pub(crate) fn unless_deltas(turn: &MockTurn) -> Result<Deltas, Reply> {
        match turn.shape() {
            Shape::Status {
                code,
                retry_after,
                body,
            } => Err(Reply::status(code, retry_after, body)),
            Shape::Raw(body) => Err(Reply::raw(body)),
            Shape::Deltas(deltas) => Ok(deltas),
        }
    }

    /// This exact body as a 200 `text/event-stream`.
    pub(crate) fn raw(body: &str) -> Reply {
        let bytes = Bytes::from(body.to_owned());
        Reply::event_stream(vec![Step::Data(bytes, Frame::Other)])
    }

    /// A 200 `application/json` answer.
    pub(crate) fn ok_json(body: Body) -> Reply {
        Reply {
            status: StatusCode::OK,
            content_type: "application/json",
            retry_after: None,
            pause: Duration::ZERO,
            body,
        }
    }

    /// A scripted non-200 answer: JSON if `body` parses as JSON, else plain text.
    pub(crate) fn status(code: u16, retry_after: Option<u64>, body: &str) -> Reply {
        let content_type = if serde_json::from_str::<serde_json::Value>(body).is_ok() {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        };
        Reply {
            status: StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            content_type,
            retry_after,
            pause: Duration::ZERO,
            body: Body::Whole(Bytes::from(body.to_owned())),
        }
    }
}

/// The content type of a streamed answer.
pub(crate) const EVENT_STREAM: &str = "text/event-stream";

/// A whole body cut in half, then the connection closed: a truncated non-streamed answer.
pub(crate) fn cut_in_half(whole: &[u8]) -> Vec<Step> {
    let half = whole.len() / 2;
    vec![
        Step::Data(Bytes::copy_from_slice(&whole[..half]), Frame::Other),
        Step::Sleep(FLUSH_PAUSE),
        Step::Cut,
    ]
}
