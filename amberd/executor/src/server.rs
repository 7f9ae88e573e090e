//! The executor process's server: its own pipe as the first connection, the attach socket
//! for later ones (same user only, token checked by `initialize`), and the linger rule: with
//! no client for the linger time it stops everything and exits — at once when no session is
//! open (its client closed them all, or never opened one).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

use crate::executor::{Executor, Origin};
use crate::state_dir::current_uid;

/// Serves until no client has been connected for `linger`, then shuts the executor down.
pub async fn run(
    executor: Arc<Executor>,
    own: Option<UnixStream>,
    listener: UnixListener,
    linger: Duration,
) {
    let connected = Arc::new(AtomicUsize::new(0));
    let changed = Arc::new(Notify::new());
    let start = |stream: UnixStream, origin: Origin| {
        let executor = Arc::clone(&executor);
        let connected = Arc::clone(&connected);
        let changed = Arc::clone(&changed);
        connected.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let (reader, writer) = stream.into_split();
            crate::connection::serve(executor, reader, writer, origin).await;
            connected.fetch_sub(1, Ordering::SeqCst);
            changed.notify_one();
        });
    };
    if let Some(own) = own {
        start(own, Origin::Own);
    }
    loop {
        let idle = connected.load(Ordering::SeqCst) == 0;
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let same_user = stream.peer_cred().is_ok_and(|c| c.uid() == current_uid());
                    if same_user {
                        start(stream, Origin::Attached);
                    } else {
                        tracing::warn!("refused a connection from another user");
                    }
                }
                Err(err) => {
                    tracing::warn!("accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = changed.notified() => {}
            () = tokio::time::sleep(linger), if idle => {
                tracing::info!(linger_secs = linger.as_secs(), "no client for the linger time; stopping");
                break;
            }
            // Nothing open and nobody attached: no client will come back for anything here.
            () = std::future::ready(()), if idle && !executor.has_open_sessions() => {
                tracing::info!("no session open and no client; stopping");
                break;
            }
        }
    }
    executor.shut_down().await;
}
