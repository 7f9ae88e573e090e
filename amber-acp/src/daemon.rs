//! The bridge's connection to amberd, made on the first request that needs it rather than
//! at start: `initialize` and `authenticate` are answered without amberd (ACP registries
//! probe an agent started with an empty `HOME`, where no daemon can be reached), and a
//! request that needs amberd when it cannot be reached fails alone, with the reason. A
//! connection that closed (amberd restarted) is made again by the next request.

use amber_client::{Client, ConnectOptions};
use tokio::sync::Mutex;

use super::wire::{INTERNAL_ERROR, RpcError};

pub(crate) struct Daemon {
    opts: ConnectOptions,
    /// The live connection; one connect at a time, so concurrent first requests share it
    /// (and autostart amberd once).
    client: Mutex<Option<Client>>,
}

impl Daemon {
    /// `opts` as given, always an approver: the editor answers the approvals of the
    /// sessions it follows.
    pub(crate) fn new(mut opts: ConnectOptions) -> Self {
        opts.approvals = true;
        Daemon {
            opts,
            client: Mutex::new(None),
        }
    }

    /// The connection to amberd, connecting (and, when allowed, starting amberd) first if
    /// there is none or it closed.
    pub(crate) async fn client(&self) -> Result<Client, RpcError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| c.is_connected()) {
            return Ok(client.clone());
        }
        let client = Client::connect(self.opts.clone())
            .await
            .map_err(|e| unreachable(&e))?;
        *slot = Some(client.clone());
        Ok(client)
    }
}

/// The answer to a request that needs amberd when it cannot be reached.
fn unreachable(e: &amber_client::ClientError) -> RpcError {
    RpcError::new(INTERNAL_ERROR, format!("cannot reach amberd: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_daemon_fails_the_request_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("nobody-listens.sock");
        let mut opts = ConnectOptions::new("test", "0");
        opts.socket = Some(socket.clone());
        opts.autostart = false;
        let daemon = Daemon::new(opts);
        let error = daemon.client().await.unwrap_err();
        assert_eq!(error.code, INTERNAL_ERROR);
        assert!(
            error.message.starts_with("cannot reach amberd: ")
                && error.message.contains(&socket.display().to_string()),
            "{}",
            error.message
        );
        // Not remembered: the next request tries again (and fails again here).
        assert!(daemon.client().await.is_err());
    }
}
