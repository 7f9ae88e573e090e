//! Following a turn across a lost connection: the daemon restarted, or the remote command
//! (`--remote`: the SSH connection) dropped. The client connects again — running the
//! remote command again — and resubscribes with `afterSeq` = the last durable seq it
//! handled, so the replay fills the gap exactly: nothing is printed twice (the caller skips
//! seqs it has seen) and no durable event is missed. Live deltas sent while it was away are
//! gone; the durable `message_completed` that follows them carries the whole text.

use std::time::{Duration, Instant};

use amber_client::{Client, ClientError, ConnectOptions, RawEventStream};

use crate::output::note;

/// How long a lost connection is tried again before the run gives up.
pub(crate) const RECONNECT_FOR: Duration = Duration::from_secs(30);
/// The first pause between attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Whether `err` means the connection itself is gone (not an answer the daemon gave).
pub(crate) fn is_connection_loss(err: &ClientError, client: &Client) -> bool {
    !client.is_connected() || matches!(err, ClientError::Transport(_) | ClientError::Remote { .. })
}

/// Connects again and resubscribes to `session_id` after `last_seq`, trying for
/// [`RECONNECT_FOR`]; the last error when it never succeeded. `interrupted` resolves when
/// the user gives up (Ctrl-C): then `Ok(None)`.
pub(crate) async fn resume(
    opts: &ConnectOptions,
    session_id: &str,
    last_seq: u64,
    why: &ClientError,
    interrupted: impl std::future::Future<Output = ()>,
) -> Result<Option<(Client, RawEventStream)>, ClientError> {
    let target = match &opts.remote {
        Some(remote) => format!("amberd on {}", remote.host),
        None => "amberd".to_owned(),
    };
    note(&format!(
        "lost the connection to {target} ({why}); reconnecting…"
    ));
    let attempts = async {
        let deadline = Instant::now() + RECONNECT_FOR;
        let mut pause = FIRST_PAUSE;
        loop {
            let attempt = async {
                let client = Client::connect(opts.clone()).await?;
                let events = client.subscribe_raw(session_id, Some(last_seq)).await?;
                Ok::<_, ClientError>((client, events))
            };
            match attempt.await {
                Ok(found) => return Ok(found),
                // The daemon answered: the session is gone, trying again changes nothing.
                Err(e @ ClientError::Rpc { .. }) => return Err(e),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {}
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    };
    tokio::select! {
        found = attempts => {
            let found = found?;
            note(&format!("reconnected to {target}; resuming after seq {last_seq}"));
            Ok(Some(found))
        }
        () = interrupted => Ok(None),
    }
}
