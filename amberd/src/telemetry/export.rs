//! The exporter: finished spans go into a bounded channel (a full one drops the span, never
//! blocks a turn); a background task sends them in batches, every second or 256 spans.

use std::time::Duration;

use tokio::sync::mpsc;

use super::Span;

/// Spans waiting to be sent, at most.
const QUEUE: usize = 4096;
/// Spans per request, at most.
const BATCH: usize = 256;
/// How often waiting spans are sent.
const EVERY: Duration = Duration::from_secs(1);
/// How long one export may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where finished spans go; cheap to clone.
#[derive(Debug, Clone)]
pub struct Exporter {
    spans: mpsc::Sender<Span>,
}

impl Exporter {
    /// Starts the exporter to `endpoint` (an OTLP/HTTP base URL) as `service`.
    pub fn start(endpoint: &str, service: String) -> Exporter {
        let (spans, waiting) = mpsc::channel(QUEUE);
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        tokio::spawn(send_batches(url, service, waiting));
        Exporter { spans }
    }

    /// Queues a finished span; dropped when the queue is full.
    pub fn finish(&self, span: Span) {
        if self.spans.try_send(span).is_err() {
            tracing::debug!("the trace export queue is full: a span was dropped");
        }
    }
}

async fn send_batches(url: String, service: String, mut waiting: mpsc::Receiver<Span>) {
    // reqwest's TLS comes without a crypto provider: amber's is ring, as everywhere.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder().timeout(TIMEOUT).build() {
        Ok(client) => client,
        Err(err) => {
            tracing::warn!("no trace export: {err}");
            return;
        }
    };
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let Some(first) = waiting.recv().await else {
            return;
        };
        batch.push(first);
        let deadline = tokio::time::sleep(EVERY);
        tokio::pin!(deadline);
        while batch.len() < BATCH {
            tokio::select! {
                span = waiting.recv() => match span {
                    Some(span) => batch.push(span),
                    None => break,
                },
                () = &mut deadline => break,
            }
        }
        let body = super::request_body(&service, &batch);
        let sent = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => tracing::warn!(
                status = %response.status(),
                spans = batch.len(),
                "the trace collector refused a batch"
            ),
            Err(err) => tracing::warn!(spans = batch.len(), "cannot export traces: {err}"),
        }
        batch.clear();
    }
}
