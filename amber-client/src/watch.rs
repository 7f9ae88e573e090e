//! The stream of `session/watch`: every session's changes, typed. When the watch ends — the
//! daemon closed it (a lagging watcher, the daemon stopping), or the connection went away —
//! the stream yields one error item carrying the reason, then ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use amber_proto::{Event, SessionChange, SessionChangeKind, SessionInfo};
use futures::{Stream, StreamExt};
use jsonrpsee::core::client::Subscription;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::events::close_error;
use crate::transport::CloseReasons;
use crate::{Client, ClientError};

/// The changes of a `session/watch`, as [`SessionChange`]s. A change whose `event` is of a
/// type this client does not know still comes, with `event: None` (its session info is
/// what a console needs); a change of a kind it does not know is skipped.
pub struct SessionWatchStream {
    sub: Subscription<Box<RawValue>>,
    sub_id: Option<String>,
    client: Client,
    reasons: CloseReasons,
    done: bool,
}

impl SessionWatchStream {
    pub(crate) fn new(
        sub: Subscription<Box<RawValue>>,
        sub_id: Option<String>,
        client: Client,
        reasons: CloseReasons,
    ) -> Self {
        Self {
            sub,
            sub_id,
            client,
            reasons,
            done: false,
        }
    }

    /// The client this stream came from (`approval/respond` for an approver watch goes
    /// through it).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Ends the watch (`session/unwatch`); an approver watch stops approving with it.
    pub async fn unsubscribe(self) -> Result<(), ClientError> {
        self.sub
            .unsubscribe()
            .await
            .map_err(|e| ClientError::from_rpc(amber_proto::methods::SESSION_UNWATCH, e))
    }
}

/// A change as sent, its event still unread (it may be of a type this client lacks).
#[derive(Deserialize)]
struct Received {
    change: SessionChangeKind,
    session: SessionInfo,
    #[serde(default)]
    event: Option<Box<RawValue>>,
}

/// One change, or `None` for a kind (or shape) this client does not know.
fn parse(raw: &RawValue) -> Option<SessionChange> {
    let received: Received = match serde_json::from_str(raw.get()) {
        Ok(received) => received,
        Err(e) => {
            tracing::debug!("session change not understood ({e}): {}", raw.get());
            return None;
        }
    };
    let event = received
        .event
        .and_then(|event| serde_json::from_str::<Event>(event.get()).ok());
    Some(SessionChange {
        change: received.change,
        session: received.session,
        event,
    })
}

impl Stream for SessionWatchStream {
    type Item = Result<SessionChange, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match self.sub.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(raw))) => match parse(&raw) {
                    Some(change) => return Poll::Ready(Some(Ok(change))),
                    None => continue,
                },
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Some(Err(ClientError::Protocol(format!(
                        "undecodable session change: {e}"
                    )))));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    let error = close_error(
                        &self.sub,
                        self.sub_id.as_deref(),
                        &self.client,
                        &self.reasons,
                        "this client fell behind the session watch; watch again, then list",
                    );
                    return Poll::Ready(Some(Err(error)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = r#"{"sessionId":"s","cwd":"/w","mode":"write","model":"m","title":"t",
        "state":"waiting_approval","createdAt":"1","updatedAt":"2",
        "usage":{"promptTokens":0,"completionTokens":0,"cachedTokens":0,"totalTokens":0}}"#;

    fn raw(json: String) -> Box<RawValue> {
        RawValue::from_string(json).unwrap()
    }

    #[test]
    fn a_change_keeps_its_info_when_its_event_is_unknown_and_an_unknown_kind_is_skipped() {
        let known = format!(
            r#"{{"change":"updated","session":{INFO},"event":{{"seq":3,"sessionId":"s",
            "time":"1","type":"turn_started","prompt":"hi"}}}}"#
        );
        let change = parse(&raw(known)).unwrap();
        assert_eq!(change.change, SessionChangeKind::Updated);
        assert_eq!(change.session.title, "t");
        assert_eq!(change.event.unwrap().seq, Some(3));

        let future_event = format!(
            r#"{{"change":"updated","session":{INFO},"event":{{"seq":4,"sessionId":"s",
            "time":"1","type":"from_the_future"}}}}"#
        );
        let change = parse(&raw(future_event)).unwrap();
        assert!(change.event.is_none());
        assert_eq!(change.session.session_id, "s");

        let deleted = format!(r#"{{"change":"deleted","session":{INFO}}}"#);
        assert_eq!(
            parse(&raw(deleted)).unwrap().change,
            SessionChangeKind::Deleted
        );
        let future_kind = format!(r#"{{"change":"archived","session":{INFO}}}"#);
        assert!(parse(&raw(future_kind)).is_none());
    }
}
