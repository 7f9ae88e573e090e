//! The one error of starting a mock ([`MockError`]); serving never fails.

use std::net::SocketAddr;

/// Why a [`MockLlm`](crate::MockLlm) could not start.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    #[error("cannot bind the scripted endpoint to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot {what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

impl MockError {
    /// An I/O error with what was being done.
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> MockError {
        move |source| MockError::Io { what, source }
    }
}
