//! `amber-cli rpc`: stdin/stdout NDJSON bridge to the daemon's WebSocket.
//!
//! The connection is opened when the first input line has arrived, not before: the daemon
//! closes a WebSocket that has not sent `initialize` within `[server] initialize_timeout_ms`
//! of its upgrade, and a person typing into the bridge (or a script that computes its first
//! request) may take longer than that.

use amber_client::bridge::{RawConnection, run_bridge};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::args::ConnectArgs;
use crate::turn::exit;

pub(crate) async fn rpc(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let mut stdin = BufReader::new(tokio::io::stdin());
    // Waits for input without consuming it: the bridge reads the same bytes afterwards.
    let at_eof = stdin.fill_buf().await?.is_empty();
    let connection = RawConnection::connect(conn.socket.clone(), !conn.no_autostart).await?;
    if at_eof {
        return Ok(exit::OK);
    }
    run_bridge(connection, stdin, tokio::io::stdout()).await?;
    Ok(exit::OK)
}
