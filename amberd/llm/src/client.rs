//! `LlmClient`: the reqwest transport. One request per attempt, run on the LLM I/O thread;
//! retries with jittered exponential backoff while nothing has been streamed yet; connect
//! and idle timeouts; the cancel token is raced against every await, the backoff sleep
//! included. A reply is returned at its final event; what is left of its body is read in
//! the background (`release_connection`), so the connection goes back to the pool when the
//! body ends and is closed when a server holds it open.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::error_chain::error_chain as chain;
use super::io_thread;
use super::limits::{Oversized, ReplyLimits};
use super::retry::{Backoff, parse_retry_after};
use super::sse::{read_buffered, read_sse};
use super::{ApiError, ChatRequest, ChatResponse, Dialect, LlmSettings, StreamEvent, make_dialect};

/// Most of an error body we keep for the message.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long the rest of a body read to its final event may take to end (normally it is
/// just the end of the chunked encoding, there already) before its connection is closed.
const RELEASE_WAIT: Duration = Duration::from_secs(5);
/// Most bytes read past a reply's final event while waiting for its body to end.
const RELEASE_MAX_BYTES: usize = 64 * 1024;

/// Streaming chat client for one configured endpoint. Cheap to clone.
#[derive(Clone)]
pub struct LlmClient {
    inner: Arc<Inner>,
}

struct Inner {
    settings: LlmSettings,
    dialect: Arc<dyn Dialect>,
    http: reqwest::Client,
    backoff: Backoff,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("settings", &self.inner.settings)
            .field("dialect", &self.inner.dialect.name())
            .finish_non_exhaustive()
    }
}

impl LlmClient {
    /// Build the client and resolve the dialect from `settings.flavor`. A missing
    /// `base_url` is not an error here (the daemon must start unconfigured); `stream_chat`
    /// reports `NotConfigured`.
    pub fn new(settings: LlmSettings) -> Result<Self, ApiError> {
        let dialect = make_dialect(&settings.flavor);
        Self::with_dialect(settings, dialect)
    }

    /// Build the client around a dialect the caller resolved (once, e.g. through a provider
    /// plugin's factory).
    pub fn with_dialect(
        settings: LlmSettings,
        dialect: Arc<dyn Dialect>,
    ) -> Result<Self, ApiError> {
        // Err only means a provider is already installed, which is what we want.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .user_agent(concat!("amberd/", env!("CARGO_PKG_VERSION")));
        if settings
            .base_url
            .as_deref()
            .is_some_and(|b| b.trim_start().starts_with("http://"))
        {
            // A plain-HTTP endpoint (a local server) needs no root certificates; loading the
            // system's store was a quarter of the daemon's start-up (docs/benchmarks.md).
            builder = builder.tls_certs_only(Vec::new());
        }
        let http = builder
            .build()
            .map_err(|e| ApiError::InvalidConfig(format!("HTTP client: {}", chain(&e))))?;
        let backoff = Backoff {
            base: settings.retry_base,
            max: settings.retry_max,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                dialect,
                http,
                backoff,
            }),
        })
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.inner.settings
    }

    pub fn dialect(&self) -> &dyn Dialect {
        self.inner.dialect.as_ref()
    }

    /// The dialect, to build another client of this provider (`check.rs`'s probe).
    pub(crate) fn dialect_arc(&self) -> Arc<dyn Dialect> {
        Arc::clone(&self.inner.dialect)
    }

    /// Whether this provider takes a request's `response_format` (structured output): its
    /// dialect sends it and its quirks (or `structured_output` in its settings) say it is
    /// understood.
    pub fn structured_output(&self) -> bool {
        self.dialect().structured_output(self.settings())
    }

    /// Whether both are clones of one client (the pool's cache tests).
    #[cfg(test)]
    pub(crate) fn same_client(&self, other: &LlmClient) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Send `req`, stream deltas to `on_event`, return the assembled reply.
    ///
    /// The request runs on the LLM I/O thread (`io_thread.rs`); deltas come back through a
    /// channel and reach `on_event` on the caller's task, adjacent ones of a kind merged.
    /// Dropping the returned future cancels the request.
    pub async fn stream_chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ApiError> {
        let inner = &*self.inner;
        let settings = &inner.settings;
        let base = settings
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .ok_or_else(|| ApiError::NotConfigured {
                missing: "base_url".into(),
            })?;
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ApiError::InvalidConfig(format!(
                "base_url {base:?} must start with http:// or https://"
            )));
        }
        let call = Call {
            url: inner.dialect.endpoint(base),
            headers: inner.dialect.request_headers(settings)?,
            body: inner.dialect.body(req, settings).to_string(),
        };
        let io = io_thread::handle()?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = cancel.child_token();
        let _stop_on_drop = stop.clone().drop_guard();
        let client = self.clone();
        let task = io.spawn(async move {
            client
                .with_retries(&call, &stop, &mut |event| {
                    // The receiver only goes away with the caller, which stops this task.
                    let _ = tx.send(event);
                })
                .await
        });
        let mut batch = Vec::new();
        while rx.recv_many(&mut batch, 1024).await > 0 {
            for event in merge_adjacent(batch.drain(..)) {
                on_event(event);
            }
        }
        task.await.unwrap_or_else(|e| {
            Err(ApiError::Connect(format!(
                "the LLM request stopped unexpectedly: {e}"
            )))
        })
    }

    /// The attempts of one call: retried with backoff while nothing has been streamed.
    async fn with_retries(
        &self,
        call: &Call,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ApiError> {
        let inner = &*self.inner;
        let settings = &inner.settings;
        let mut retry = 0u32;
        loop {
            if cancel.is_cancelled() {
                return Err(ApiError::Cancelled);
            }
            let mut emitted = false;
            let result = {
                let mut sink = |ev: StreamEvent| {
                    emitted = true;
                    on_event(ev);
                };
                self.attempt(&call.url, &call.headers, &call.body, cancel, &mut sink)
                    .await
            };
            let err = match result {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            };
            if emitted || !err.is_retryable() || retry >= settings.max_retries {
                return Err(err);
            }
            let delay = inner
                .backoff
                .delay(retry, err.retry_after(), fastrand::f64());
            retry += 1;
            tracing::warn!(%err, attempt = retry, ?delay, "LLM request failed, retrying");
            on_event(StreamEvent::Retrying {
                attempt: retry,
                max_attempts: settings.max_retries,
                delay,
                reason: err.retry_reason(),
                error: err.to_string(),
            });
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn attempt(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &str,
        cancel: &CancellationToken,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ApiError> {
        let inner = &*self.inner;
        let idle = inner.settings.idle_timeout;
        let limits = ReplyLimits::new(inner.settings.max_reply_bytes);
        let send = inner
            .http
            .post(url)
            .headers(headers.clone())
            .body(body.to_owned())
            .send();
        let resp = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ApiError::Cancelled),
            r = tokio::time::timeout(idle, send) => match r {
                Err(_) => {
                    return Err(ApiError::Idle { after: idle, streaming: false })
                }
                Ok(Err(e)) => return Err(map_send_error(&e)),
                Ok(Ok(resp)) => resp,
            },
        };

        let status = resp.status();
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
        if !status.is_success() {
            let retry_after = parse_retry_after(header("retry-after"), header("retry-after-ms"));
            let (text, _cut) = read_capped(resp, MAX_ERROR_BODY, idle, cancel).await?;
            return Err(inner
                .dialect
                .classify_error(status.as_u16(), &text, retry_after));
        }
        let is_json = header("content-type").is_some_and(|ct| {
            ct.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
        if is_json {
            let (text, cut) = read_capped(resp, limits.event, idle, cancel).await?;
            if cut {
                return Err(limits.exceeded(Oversized::Body));
            }
            return read_buffered(&text, inner.dialect.as_ref(), limits, emit);
        }
        let mut body = Box::pin(resp.bytes_stream());
        let reply = read_sse(
            body.as_mut(),
            inner.dialect.as_ref(),
            idle,
            limits,
            cancel,
            emit,
        )
        .await;
        if reply.is_ok() {
            release_connection(body);
        }
        reply
    }
}

/// What one chat call sends, ready for the I/O thread.
struct Call {
    url: String,
    headers: HeaderMap,
    body: String,
}

/// Adjacent text deltas, and adjacent reasoning deltas, as one each (order kept).
fn merge_adjacent(events: impl Iterator<Item = StreamEvent>) -> Vec<StreamEvent> {
    let mut out: Vec<StreamEvent> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (Some(StreamEvent::TextDelta(text)), StreamEvent::TextDelta(more))
            | (Some(StreamEvent::ReasoningDelta(text)), StreamEvent::ReasoningDelta(more)) => {
                text.push_str(&more);
            }
            (_, event) => out.push(event),
        }
    }
    out
}

/// The rest of a body whose reply ended at its final event, read in the background: a body
/// that ends (within `RELEASE_WAIT` and `RELEASE_MAX_BYTES`) leaves its connection in the
/// pool; one a server holds open, or keeps sending on, is dropped with its connection. The
/// reply never waits for this.
fn release_connection<S, B, E>(mut body: std::pin::Pin<Box<S>>)
where
    S: futures::Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]>,
{
    tokio::spawn(async move {
        let drain = async {
            let mut read = 0usize;
            while let Some(Ok(piece)) = body.next().await {
                read += piece.as_ref().len();
                if read > RELEASE_MAX_BYTES {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(RELEASE_WAIT, drain).await;
    });
}

/// Read at most `cap` bytes of a body (lossy UTF-8), honouring idle timeout and cancel;
/// `true` when the body had more (the rest is not read).
async fn read_capped(
    resp: reqwest::Response,
    cap: usize,
    idle: Duration,
    cancel: &CancellationToken,
) -> Result<(String, bool), ApiError> {
    let mut body = resp.bytes_stream();
    let mut buf = Vec::new();
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ApiError::Cancelled),
            n = tokio::time::timeout(idle, body.next()) => n,
        };
        match next {
            Err(_) => {
                return Err(ApiError::Idle {
                    after: idle,
                    streaming: true,
                });
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(ApiError::Connect(format!(
                    "reading the response: {}",
                    chain(&e)
                )));
            }
            Ok(Some(Ok(bytes))) => {
                let room = cap.saturating_sub(buf.len());
                buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
                if bytes.len() > room {
                    return Ok((String::from_utf8_lossy(&buf).into_owned(), true));
                }
            }
        }
    }
    Ok((String::from_utf8_lossy(&buf).into_owned(), false))
}

fn map_send_error(e: &reqwest::Error) -> ApiError {
    let text = chain(e);
    if e.is_timeout() {
        ApiError::Timeout(text)
    } else if e.is_builder() {
        ApiError::InvalidConfig(text)
    } else {
        ApiError::Connect(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::Message;

    fn assert_send<T: Send>(_: &T) {}

    #[tokio::test]
    async fn stream_chat_future_is_send_and_reports_not_configured() {
        let client = LlmClient::new(LlmSettings::default()).unwrap();
        let req = ChatRequest {
            model: String::new(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            response_format: None,
            cache_key: None,
            max_tokens: None,
        };
        let cancel = CancellationToken::new();
        let mut sink = |_: StreamEvent| {};
        let fut = client.stream_chat(&req, &cancel, &mut sink);
        assert_send(&fut);
        let err = fut.await.unwrap_err();
        assert_eq!(err.code(), "not_configured");
        assert!(err.to_string().contains("AMBER_BASE_URL"));
    }

    #[test]
    fn adjacent_deltas_of_a_kind_merge_in_order() {
        let merged = merge_adjacent(
            [
                StreamEvent::ReasoningDelta("a".into()),
                StreamEvent::ReasoningDelta("b".into()),
                StreamEvent::TextDelta("c".into()),
                StreamEvent::TextDelta("d".into()),
                StreamEvent::ReasoningDelta("e".into()),
            ]
            .into_iter(),
        );
        assert_eq!(
            merged,
            vec![
                StreamEvent::ReasoningDelta("ab".into()),
                StreamEvent::TextDelta("cd".into()),
                StreamEvent::ReasoningDelta("e".into()),
            ]
        );
    }

    #[tokio::test]
    async fn bad_scheme_is_invalid_config() {
        let client = LlmClient::new(LlmSettings {
            base_url: Some("localhost:8080/v1".into()),
            ..LlmSettings::default()
        })
        .unwrap();
        let req = ChatRequest {
            model: String::new(),
            messages: vec![],
            tools: vec![],
            response_format: None,
            cache_key: None,
            max_tokens: None,
        };
        let err = client
            .stream_chat(&req, &CancellationToken::new(), &mut |_| {})
            .await
            .unwrap_err();
        assert_eq!(err.code(), "not_configured");
        assert!(!err.is_retryable());
    }
}
