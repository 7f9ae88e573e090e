//! The harness's error type: what failed, with the path, scenario or command it concerns.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("scenario {origin}: {message}")]
    Scenario { origin: String, message: String },
    #[error("{0}")]
    Client(#[from] amber_client::ClientError),
    #[error("{0}")]
    Endpoint(#[from] amber_mock_llm::MockError),
    #[error("amberd at {socket}: {message}")]
    Daemon { socket: PathBuf, message: String },
    #[error("{binary} not found at {path} (build it, or pass --{flag} PATH)")]
    MissingBinary {
        binary: &'static str,
        path: PathBuf,
        flag: &'static str,
    },
    #[error("{0}")]
    Usage(String),
    /// A measurement could not be taken (the message says which and why).
    #[error("{0}")]
    Failed(String),
    /// A measurement this configuration cannot take (e.g. `--base-url`): a note, not a
    /// failure.
    #[error("{0}")]
    Skipped(String),
}

impl BenchError {
    /// An I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }
}
