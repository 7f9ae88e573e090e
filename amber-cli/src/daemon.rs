//! `daemon start|stop|status`. `stop` and `status` never autostart: asking a daemon that
//! is not running for its status or to stop must not start one.

use std::time::{Duration, Instant};

use amber_client::{Client, ClientError, daemon_answers, resolve_socket};
use amber_proto::DaemonStatus;
use serde_json::Value;

use crate::args::ConnectArgs;
use crate::output::{self, connect_options};
use crate::turn::exit;

/// How long `daemon stop` waits for the socket to go quiet.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// `daemon start`: autostart explicitly, print socket and pid.
pub async fn start(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let socket = resolve_socket(conn.socket.clone());
    let was_running = daemon_answers(&socket).await;
    let mut opts = connect_options(conn, false);
    opts.autostart = true;
    let client = Client::connect(opts).await?;
    let status = client.daemon_status().await?;
    let verb = if was_running {
        "already running"
    } else {
        "started"
    };
    output::line(&format!(
        "amberd {verb}: pid {} on {}",
        status.pid,
        client.socket().display()
    ))?;
    Ok(exit::OK)
}

/// `daemon stop`: `daemon/shutdown`, then wait until the socket stops answering.
pub async fn stop(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let socket = resolve_socket(conn.socket.clone());
    let mut opts = connect_options(conn, false);
    opts.autostart = false;
    let client = match Client::connect(opts).await {
        Ok(client) => client,
        Err(ClientError::DaemonNotRunning { socket }) => {
            output::line(&format!("amberd is not running at {}", socket.display()))?;
            return Ok(exit::OK);
        }
        Err(e) => return Err(e.into()),
    };
    match client.daemon_shutdown().await {
        // The daemon may close the connection before its answer gets out.
        Ok(_) | Err(ClientError::Transport(_)) => {}
        Err(e) => return Err(e.into()),
    }
    drop(client);
    let deadline = Instant::now() + STOP_TIMEOUT;
    while daemon_answers(&socket).await {
        if Instant::now() >= deadline {
            anyhow::bail!(
                "amberd at {} still answers {} s after daemon/shutdown",
                socket.display(),
                STOP_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    output::line("amberd stopped")?;
    Ok(exit::OK)
}

/// `daemon status [--json]`.
pub async fn status(conn: &ConnectArgs, json: bool) -> anyhow::Result<u8> {
    let mut opts = connect_options(conn, false);
    opts.autostart = false;
    let client = match Client::connect(opts).await {
        Ok(client) => client,
        Err(ClientError::DaemonNotRunning { socket }) => {
            output::note(&format!("amberd is not running at {}", socket.display()));
            return Ok(exit::ERROR);
        }
        Err(e) => return Err(e.into()),
    };
    let raw: Value = client
        .call(amber_proto::methods::DAEMON_STATUS, amber_proto::Empty {})
        .await?;
    if json {
        output::line(&serde_json::to_string_pretty(&raw)?)?;
        return Ok(exit::OK);
    }
    let status: DaemonStatus = serde_json::from_value(raw)?;
    let server = &client.server_info().server_info;
    output::line(&status_text(
        &status,
        &server.name,
        &client.socket().display().to_string(),
    ))?;
    Ok(exit::OK)
}

/// `daemon status`'s human text.
pub fn status_text(s: &DaemonStatus, name: &str, socket: &str) -> String {
    let name = if name.is_empty() { "amberd" } else { name };
    format!(
        "{name} {}\npid          {}\nsocket       {socket}\nuptime       {}\nsessions     {}\nconnections  {}",
        s.version,
        s.pid,
        uptime(s.uptime_ms),
        s.sessions,
        s.connections
    )
}

/// `3d 4h`, `2h 05m`, `4m 07s`, `12s`.
pub fn uptime(ms: u64) -> String {
    let secs = ms / 1000;
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptimes() {
        assert_eq!(uptime(999), "0s");
        assert_eq!(uptime(65_000), "1m 05s");
        assert_eq!(uptime(3_700_000), "1h 01m");
        assert_eq!(uptime(90_000_000), "1d 1h");
    }

    #[test]
    fn status_lines() {
        let s = DaemonStatus {
            version: "0.1.0".into(),
            pid: 42,
            uptime_ms: 5000,
            sessions: 2,
            connections: 1,
            sessions_loaded: None,
        };
        assert_eq!(
            status_text(&s, "amberd", "/tmp/a.sock"),
            "amberd 0.1.0\npid          42\nsocket       /tmp/a.sock\nuptime       5s\nsessions     2\nconnections  1"
        );
    }
}
