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
}
