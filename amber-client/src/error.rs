//! `ClientError`: everything that can go wrong between a client and `amberd`.

use std::path::PathBuf;

/// An error of the client library. `code()` gives the JSON-RPC code of daemon errors.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers at the socket and autostart is off.
    #[error(
        "amberd is not running at {} (start it with `amber-cli daemon start`, or drop --no-autostart)",
        socket.display()
    )]
    DaemonNotRunning { socket: PathBuf },

    /// Starting `amberd` in the background failed.
    #[error("could not start amberd for {}: {reason} (see {})", socket.display(), log.display())]
    Autostart {
        socket: PathBuf,
        log: PathBuf,
        reason: String,
    },

    /// The socket exists but could not be reached (permissions, not a socket, ...).
    #[error("cannot connect to amberd at {}: {source}", socket.display())]
    Connect {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The socket is not the user's own daemon's: its directory is open to others, or another
    /// user serves it. Nothing was sent.
    #[error("refusing to talk to amberd at {}: {reason}; nothing was sent", socket.display())]
    UntrustedSocket { socket: PathBuf, reason: String },

    /// The remote command (`--remote`) could not be run, or ended.
    #[error("remote daemon through `{command}`: {reason}")]
    Remote { command: String, reason: String },

    /// The daemon answered a call with a JSON-RPC error. Shown in the user's words (the
    /// code stays available as [`ClientError::code`], and in `--json` output).
    #[error("{}", in_words(*code, message))]
    Rpc { code: i32, message: String },

    /// A call too large to send; nothing was sent and the connection stays up.
    #[error(
        "the request `{method}` has {bytes} bytes, over the {limit}-byte limit of a message; nothing was sent"
    )]
    TooLarge {
        method: String,
        bytes: usize,
        limit: usize,
    },

    /// The daemon speaks another protocol version.
    #[error("protocol version mismatch: amberd speaks {server}, this client speaks {client}")]
    VersionMismatch { server: u32, client: u32 },

    /// A call got no answer in time.
    #[error("no answer from amberd to `{method}` in time")]
    Timeout { method: String },

    /// The daemon closed an event subscription.
    #[error("amberd closed the event subscription: {reason}")]
    SubscriptionClosed { reason: String },

    /// The connection failed or was closed.
    #[error("connection to amberd: {0}")]
    Transport(String),

    /// The daemon sent something this client does not understand.
    #[error("protocol error: {0}")]
    Protocol(String),

    /// Local I/O (stdin/stdout of the rpc bridge, lock files, ...).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// A daemon's JSON-RPC error as a person reads it: the daemon's message, with what to do
/// next where the code says it, and no protocol number.
fn in_words(code: i32, message: &str) -> String {
    use amber_proto::errors;
    let message = message.trim();
    match code {
        errors::SESSION_NOT_FOUND => {
            format!("{message} (`amber-cli sessions` lists the sessions there are)")
        }
        errors::INVALID_PARAMS => message
            .strip_prefix("invalid params: ")
            .unwrap_or(message)
            .to_owned(),
        errors::METHOD_NOT_FOUND => format!(
            "amberd does not know this request ({message}): it is probably older than this \
             client; `amber-cli daemon restart` starts the installed one"
        ),
        errors::OVERLOADED => format!("amberd is busy ({message}); try again in a moment"),
        errors::INTERNAL_ERROR => {
            format!("amberd failed: {message} (its log says more: `amber-cli daemon logs`)")
        }
        _ => message.to_owned(),
    }
}

impl ClientError {
    /// The JSON-RPC error code, when the daemon answered with an error.
    pub fn code(&self) -> Option<i32> {
        match self {
            ClientError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Converts a jsonrpsee client error; `method` names the call for timeouts.
    pub(crate) fn from_rpc(method: &str, err: jsonrpsee::core::client::Error) -> Self {
        use jsonrpsee::core::client::Error;
        match err {
            Error::Call(obj) => ClientError::Rpc {
                code: obj.code(),
                message: obj.message().to_owned(),
            },
            Error::RequestTimeout => ClientError::Timeout {
                method: method.to_owned(),
            },
            Error::ParseError(e) => {
                ClientError::Protocol(format!("unexpected answer to `{method}`: {e}"))
            }
            Error::RestartNeeded(inner) => ClientError::Transport(format!("closed ({inner})")),
            Error::Transport(e) => ClientError::Transport(e.to_string()),
            other => ClientError::Protocol(other.to_string()),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ClientError::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_errors_carry_their_code() {
        let err = ClientError::Rpc {
            code: -32001,
            message: "session not found: s1".into(),
        };
        assert_eq!(err.code(), Some(-32001));
        assert_eq!(ClientError::Transport("x".into()).code(), None);
    }

    #[test]
    fn daemon_errors_read_in_words_without_protocol_numbers() {
        let table = [
            (
                -32001,
                "session not found: s1",
                "session not found: s1 (`amber-cli sessions` lists the sessions there are)",
            ),
            (
                -32602,
                "invalid params: sessionId: missing field",
                "sessionId: missing field",
            ),
            (-32602, "unknown command `exit`", "unknown command `exit`"),
            (
                -32601,
                "Method not found",
                "amberd does not know this request (Method not found): it is probably older \
                 than this client; `amber-cli daemon restart` starts the installed one",
            ),
            (
                -32003,
                "too many connections",
                "amberd is busy (too many connections); try again in a moment",
            ),
            (
                -32004,
                "workspace /x: not a directory",
                "workspace /x: not a directory",
            ),
        ];
        for (code, message, shown) in table {
            let err = ClientError::Rpc {
                code,
                message: message.into(),
            };
            assert_eq!(err.to_string(), shown, "{code}");
            assert!(!err.to_string().contains(&code.to_string()), "{code}");
        }
    }
}
