//! A metrics endpoint: `GET /metrics` answered with the text a closure renders at each
//! scrape, over a minimal HTTP/1.1 exchange (one request per connection, its head bounded
//! and timed); anything else is 404. Shared by a runner (`--metrics-listen`) and amberd
//! (`[metrics] listen`): a scrape needs no web framework.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The most a request's head may be.
const MAX_REQUEST_BYTES: usize = 8 << 10;
/// How long a client may take to send it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What a scrape answers.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `render` at `/metrics` on `addr` until `stop`; returns where it listens.
pub async fn serve(
    addr: &str,
    render: Render,
    stop: CancellationToken,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = stop.cancelled() => return,
            };
            let Ok((mut stream, _)) = accepted else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let render = Arc::clone(&render);
            tokio::spawn(async move {
                let Ok(Some(path)) =
                    tokio::time::timeout(REQUEST_TIMEOUT, request_path(&mut stream)).await
                else {
                    return;
                };
                let response = if path == "/metrics" {
                    let body = tokio::task::spawn_blocking(move || render())
                        .await
                        .unwrap_or_default();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .to_owned()
                };
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(local)
}

/// The path of a `GET` request, once its head is read; `None` for anything else.
async fn request_path(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_REQUEST_BYTES {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut words = line.split(' ');
    if words.next()? != "GET" {
        return None;
    }
    let target = words.next()?;
    Some(target.split('?').next().unwrap_or(target).to_owned())
}
