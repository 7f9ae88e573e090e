//! Plays a rendered body's [`Step`]s as an HTTP body stream: frames handed over as the
//! connection takes them, pauses slept, a scripted cut as an I/O error. Each content frame is
//! timestamped, and the request's record is completed as the last frame is handed over (not
//! when the stream is polled once more: by then the client may already have the whole answer
//! and be reading the record), or before a scripted hold. A stream dropped before its end
//! counts as interrupted; a repeated frame is sent until the client goes away.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;

use crate::reply::{Frame, Step};
use crate::server::Shared;

/// Counts a streamed answer as interrupted if it is dropped before its scripted end.
struct EndGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.count_interrupted();
        }
    }
}

/// Where a body stream is.
struct Playing {
    steps: Arc<[Step]>,
    at: usize,
    /// Record number `index` is completed at the end.
    index: usize,
    times: Vec<Instant>,
    include_usage: bool,
    guard: EndGuard,
}

impl Playing {
    /// The next chunk of the body, or `None` at its end.
    async fn next(&mut self) -> Option<std::io::Result<bytes::Bytes>> {
        while let Some(step) = self.steps.get(self.at) {
            self.at += 1;
            match step {
                Step::Sleep(pause) => tokio::time::sleep(*pause).await,
                Step::Data(_, Frame::Usage) if !self.include_usage => {}
                Step::Data(bytes, frame) => {
                    let bytes = bytes.clone();
                    let now = Instant::now();
                    if *frame == Frame::Content {
                        self.times.push(now);
                    }
                    // The last frame, or the last before a hold: the answer is all sent.
                    if matches!(self.steps.get(self.at), None | Some(Step::Hold(_))) {
                        self.finish(Some(now));
                    }
                    return Some(Ok(bytes));
                }
                Step::Hold(pause) => tokio::time::sleep(*pause).await,
                Step::Repeat(bytes) => {
                    self.at -= 1;
                    return Some(Ok(bytes.clone()));
                }
                Step::Cut => {
                    self.finish(None);
                    self.at = self.steps.len();
                    return Some(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "mock llm: scripted connection drop",
                    )));
                }
            }
        }
        self.finish(None);
        None
    }

    /// The scripted end: the record gets its frame times (and `last_byte`, unless cut).
    fn finish(&mut self, last_byte: Option<Instant>) {
        if self.guard.finished {
            return;
        }
        self.guard.finished = true;
        let times = std::mem::take(&mut self.times);
        self.guard.shared.complete(self.index, times, last_byte);
    }
}

/// The body playing `steps` (of which `content` are content frames) for record `index`; the
/// usage-only chunk is left out unless `include_usage`.
pub(crate) fn body(
    shared: Arc<Shared>,
    index: usize,
    steps: Arc<[Step]>,
    content: usize,
    include_usage: bool,
) -> Body {
    let playing = Playing {
        steps,
        at: 0,
        index,
        times: Vec::with_capacity(content),
        include_usage,
        guard: EndGuard {
            shared,
            finished: false,
        },
    };
    let stream = futures::stream::unfold(playing, |mut playing| async move {
        let chunk = playing.next().await?;
        Some((chunk, playing))
    });
    Body::from_stream(stream)
}
