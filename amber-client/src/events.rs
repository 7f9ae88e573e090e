//! Event streams of `session/subscribe`: raw (JSON exactly as received, for `--json`
//! output) and typed. When the subscription ends — the daemon closed it (e.g. a lagging
//! subscriber), or the connection went away — the stream yields one error item carrying
//! the reason, then ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use amber_proto::Event;
use futures::{Stream, StreamExt};
use jsonrpsee::core::client::{Subscription, SubscriptionCloseReason};
use serde_json::value::RawValue;

use crate::transport::CloseReasons;
use crate::{Client, ClientError};

/// One event as received, and its typed form when this client knows its type.
#[derive(Debug, Clone)]
pub struct RawEvent {
    /// The event object exactly as the daemon sent it.
    pub raw: Box<RawValue>,
    /// `None` for event types (or shapes) this client does not know.
    pub event: Option<Event>,
}

impl RawEvent {
    /// Parses one event object.
    pub fn parse(raw: Box<RawValue>) -> Self {
        let event = match serde_json::from_str::<Event>(raw.get()) {
            Ok(event) => Some(event),
            Err(e) => {
                tracing::debug!("event not understood ({e}): {}", raw.get());
                None
            }
        };
        RawEvent { raw, event }
    }

    /// The event's JSON text, as received.
    pub fn json(&self) -> &str {
        self.raw.get()
    }
}

/// Raw events of one subscription.
pub struct RawEventStream {
    sub: Subscription<Box<RawValue>>,
    sub_id: Option<String>,
    client: Client,
    reasons: CloseReasons,
    done: bool,
}

impl RawEventStream {
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

    /// The client this stream came from.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Ends the subscription (`session/unsubscribe`).
    pub async fn unsubscribe(self) -> Result<(), ClientError> {
        self.sub
            .unsubscribe()
            .await
            .map_err(|e| ClientError::from_rpc(amber_proto::methods::SESSION_UNSUBSCRIBE, e))
    }

    fn close_error(&self) -> ClientError {
        close_error(
            &self.sub,
            self.sub_id.as_deref(),
            &self.client,
            &self.reasons,
            "this client fell behind the event stream; resubscribe with afterSeq",
        )
    }
}

/// Why a subscription's stream ended: the daemon's close reason if it sent one, else this
/// client's own lag (`lagged`: what to do about it), else the connection or a plain end.
pub(crate) fn close_error(
    sub: &Subscription<Box<RawValue>>,
    sub_id: Option<&str>,
    client: &Client,
    reasons: &CloseReasons,
    lagged: &str,
) -> ClientError {
    if let Some(reason) = sub_id.and_then(|id| reasons.take(id)) {
        return ClientError::SubscriptionClosed { reason };
    }
    if matches!(sub.close_reason(), Some(SubscriptionCloseReason::Lagged)) {
        return ClientError::SubscriptionClosed {
            reason: lagged.into(),
        };
    }
    if !client.is_connected() {
        return ClientError::Transport("amberd closed the connection".into());
    }
    ClientError::SubscriptionClosed {
        reason: "the subscription ended".into(),
    }
}

impl Stream for RawEventStream {
    type Item = Result<RawEvent, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.sub.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(raw))) => Poll::Ready(Some(Ok(RawEvent::parse(raw)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(ClientError::Protocol(format!(
                "undecodable event: {e}"
            ))))),
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(Some(Err(self.close_error())))
            }
        }
    }
}

/// Typed events of one subscription; unknown event types are skipped.
pub struct EventStream {
    inner: RawEventStream,
}

impl EventStream {
    pub(crate) fn new(inner: RawEventStream) -> Self {
        Self { inner }
    }

    /// Ends the subscription (`session/unsubscribe`).
    pub async fn unsubscribe(self) -> Result<(), ClientError> {
        self.inner.unsubscribe().await
    }

    /// The raw stream underneath.
    pub fn into_raw(self) -> RawEventStream {
        self.inner
    }
}

impl Stream for EventStream {
    type Item = Result<Event, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.inner.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(RawEvent {
                    event: Some(event), ..
                }))) => {
                    return Poll::Ready(Some(Ok(event)));
                }
                Poll::Ready(Some(Ok(RawEvent { event: None, .. }))) => continue,
            }
        }
    }
}
