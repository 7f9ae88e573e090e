//! `amber-cli rpc`: stdin/stdout NDJSON bridge to the daemon's WebSocket.

use amber_client::bridge::{RawConnection, run_bridge};
use tokio::io::BufReader;

use crate::args::ConnectArgs;
use crate::turn::exit;

pub async fn rpc(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let connection = RawConnection::connect(conn.socket.clone(), !conn.no_autostart).await?;
    run_bridge(
        connection,
        BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    )
    .await?;
    Ok(exit::OK)
}
