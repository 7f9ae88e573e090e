//! amber-client: the only crate that knows sockets and jsonrpsee on the client side.
//!
//! - socket discovery (PROTOCOL.md's rule) and autostart of `amberd` under a lock file;
//! - [`Client`]: a WebSocket connection over the Unix socket, `initialize`d, with typed calls
//!   (`client.request::<amber_proto::methods::M>(&params)`, and a convenience method per common call);
//! - [`EventStream`] / [`RawEventStream`]: `session/subscribe` as a `futures::Stream`;
//! - [`SessionWatchStream`]: `session/watch`, every session's changes, as a `futures::Stream`;
//! - [`bridge`]: the raw NDJSON bridge behind `amber-cli rpc`;
//! - [`drift`]: whether the running daemon follows the caller's provider variables;
//! - [`remote`]: the same protocol over a command's stdin/stdout (`ssh HOST amber-cli rpc`),
//!   when [`ConnectOptions::remote`] is set;
//! - [`turn`]: one turn followed from its events (pure), for the headless clients;
//! - [`standalone`]: a private daemon for one client's lifetime (`run --standalone`).

pub mod autostart;
pub mod bridge;
mod client;
pub mod drift;
mod error;
mod events;
mod history;
mod in_flight;
pub mod remote;
pub mod standalone;
mod transport;
pub mod turn;
mod watch;

pub use client::{Client, ConnectOptions, REQUEST_TIMEOUT, SUBSCRIPTION_BUFFER};
pub use error::ClientError;
pub use events::{EventStream, RawEvent, RawEventStream};
pub use remote::Remote;
pub use transport::resolve_socket;
pub use watch::SessionWatchStream;

/// Whether something answers at `socket` right now (no handshake, no autostart).
pub async fn daemon_answers(socket: &std::path::Path) -> bool {
    tokio::net::UnixStream::connect(socket).await.is_ok()
}
