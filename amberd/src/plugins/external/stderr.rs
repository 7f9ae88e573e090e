//! What a plugin says for humans goes to the daemon log, tagged with the plugin's name:
//! its `log` notifications and its stderr. The stderr pipe is always drained (a plugin
//! blocked on a full stderr would look hung), but what reaches the log is bounded: long
//! lines are cut and a chatty plugin is rate limited. The last line is kept so an exit can
//! say why ("exited with status 1; last stderr line: ModuleNotFoundError: …").

use amber_proto::sync::Locked;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;
use tokio::time::Instant;

/// Longest stderr line logged (the rest is cut).
const MAX_LOGGED_LINE: usize = 2000;
/// A line without a newline is logged once it gets this long.
const MAX_PENDING: usize = 64 * 1024;
/// Lines logged per second; more are counted and summarized.
const LINES_PER_SECOND: u32 = 200;

/// The last non-empty stderr line, shared with the supervisor.
#[derive(Clone, Default)]
pub(super) struct LastLine(Arc<Mutex<Option<String>>>);

impl LastLine {
    pub(super) fn get(&self) -> Option<String> {
        self.0.locked().clone()
    }

    fn set(&self, line: String) {
        *self.0.locked() = Some(line);
    }
}

/// Drains `pipe` until it closes, logging each line.
pub(super) async fn drain(plugin: String, mut pipe: ChildStderr, last: LastLine) {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    let mut window = Instant::now();
    let mut logged = 0u32;
    let mut dropped = 0u64;
    loop {
        let closed = match pipe.read_buf(&mut buf).await {
            Ok(0) | Err(_) => true,
            Ok(_) => false,
        };
        loop {
            let line = match memchr::memchr(b'\n', &buf) {
                Some(at) => buf.split_to(at + 1),
                None if closed || buf.len() > MAX_PENDING => buf.split(),
                None => break,
            };
            if line.is_empty() {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            if text.is_empty() {
                continue;
            }
            let text = cut(text);
            if window.elapsed() >= Duration::from_secs(1) {
                if dropped > 0 {
                    tracing::warn!(target: "amberd::plugin::stderr", plugin = %plugin, dropped, "stderr lines not logged (too many)");
                }
                window = Instant::now();
                logged = 0;
                dropped = 0;
            }
            if logged < LINES_PER_SECOND {
                logged += 1;
                tracing::info!(target: "amberd::plugin::stderr", plugin = %plugin, "{text}");
            } else {
                dropped += 1;
            }
            last.set(text);
        }
        if closed {
            if dropped > 0 {
                tracing::warn!(target: "amberd::plugin::stderr", plugin = %plugin, dropped, "stderr lines not logged (too many)");
            }
            return;
        }
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_LOGGED_LINE) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A `log` notification from the plugin: `{level, message}` into the daemon log.
pub(super) fn log(plugin: &str, params: &Value) {
    let message = match params.get("message") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => params.to_string(),
    };
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .unwrap_or("info");
    match level {
        "error" => tracing::error!(target: "amberd::plugin", plugin, "{message}"),
        "warn" | "warning" => tracing::warn!(target: "amberd::plugin", plugin, "{message}"),
        "debug" => tracing::debug!(target: "amberd::plugin", plugin, "{message}"),
        "trace" => tracing::trace!(target: "amberd::plugin", plugin, "{message}"),
        _ => tracing::info!(target: "amberd::plugin", plugin, "{message}"),
    }
}
