//! The metrics listener: `GET /metrics` on `[metrics] listen` until the daemon stops
//! (`amber_executor::metrics_http`, which a runner's `--metrics-listen` uses too).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Metrics, Snapshot};

/// Why the listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("[metrics] cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// What the gauges read at each scrape.
pub type Now = Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// Serves `metrics` on `addr` until `shutdown`; returns where it listens.
pub async fn serve(
    addr: &str,
    metrics: Arc<Metrics>,
    now: Now,
    shutdown: CancellationToken,
) -> Result<std::net::SocketAddr, ServeError> {
    let render: amber_executor::metrics_http::Render = Arc::new(move || metrics.render(&now()));
    let local = amber_executor::metrics_http::serve(addr, render, shutdown)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.to_owned(),
            source,
        })?;
    tracing::info!(%local, "serving metrics");
    Ok(local)
}
