//! Writing to the terminal: rendered pieces, JSON lines, and the connect options every
//! subcommand shares.

use std::io::{self, Write};

use amber_client::ConnectOptions;

use crate::args::ConnectArgs;
use crate::render::Out;

/// Connect options from the global flags.
pub(crate) fn connect_options(conn: &ConnectArgs, approvals: bool) -> ConnectOptions {
    ConnectOptions {
        socket: conn.socket.clone(),
        autostart: !conn.no_autostart,
        approvals,
        remote: conn
            .remote
            .as_deref()
            .filter(|h| !h.trim().is_empty())
            .map(amber_client::Remote::from_env),
        ..ConnectOptions::new("amber-cli", env!("CARGO_PKG_VERSION"))
    }
}

/// Writes rendered pieces, flushing stdout so streamed text shows at once.
pub(crate) fn emit(pieces: Vec<Out>) -> io::Result<()> {
    for piece in pieces {
        match piece {
            Out::Stdout(s) => {
                let mut out = io::stdout().lock();
                out.write_all(s.as_bytes())?;
                out.flush()?;
            }
            Out::Stderr(s) => {
                let mut err = io::stderr().lock();
                err.write_all(s.as_bytes())?;
            }
        }
    }
    Ok(())
}

/// One line on stdout, flushed.
pub(crate) fn line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

/// A note on stderr.
pub(crate) fn note(text: &str) {
    eprintln!("amber-cli: {text}");
}

/// The `turnId` of an event this client cannot parse fully.
pub(crate) fn raw_turn_id(json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Envelope {
        turn_id: Option<String>,
    }
    serde_json::from_str::<Envelope>(json).ok()?.turn_id
}
