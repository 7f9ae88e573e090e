//! The TUI's error type.

use amber_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error("{0}")]
    Usage(String),
    /// The attached session was deleted (by another client) while on screen.
    #[error("session {0} was deleted (by another client); nothing to show any more")]
    SessionDeleted(String),
}
