//! The MCP server's stdin/stdout, one line at a time, each on its own: rmcp sees only
//! messages it can serve, and every other line is answered here and the next one read.
//!
//! - A line over [`MAX_LINE_BYTES`] is never held whole (`amber_client::bridge::lines`): it
//!   gets an invalid-request error naming the limit, with its id when its head shows one.
//! - Not UTF-8, not JSON (a lone surrogate included): a parse error, with the line's id when
//!   it was read before the fault, else `id` null.
//! - JSON that is not an object: an invalid-request error, `id` null.
//! - An object that is no MCP message: a request (it has an id) gets an invalid-request
//!   error with its id; a notification or a response is dropped (JSON-RPC answers neither).
//! - Before `initialize`, notifications and responses are dropped: the handshake must open
//!   with a request (rmcp would end the server on anything else).
//!
//! One task writes stdout, for rmcp and for these answers alike, so lines never interleave.
//! End of input ends the stream rmcp reads, and so the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use amber_client::bridge::envelope::Envelope;
use amber_client::bridge::lines::{BoundedLines, Line, MAX_LINE_BYTES};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

const PARSE_ERROR: i32 = -32700;
const INVALID_REQUEST: i32 = -32600;

/// Messages waiting for rmcp, and lines waiting for stdout: bounded, so a client that floods
/// faster than the server reads is held back instead of buffered.
const QUEUE: usize = 64;

/// stdout is gone: nothing more can be said to the client.
#[derive(Debug, thiserror::Error)]
#[error("stdout is closed")]
pub(crate) struct OutputClosed;

/// The server's stdio: [`Stdio::transport`] gives rmcp a handle (a new one for each
/// handshake attempt; all share the same lines).
pub(crate) struct Stdio {
    incoming: Arc<Mutex<mpsc::Receiver<ClientJsonRpcMessage>>>,
    out: mpsc::Sender<String>,
    gate: Arc<Gate>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

/// What the reader knows of the handshake and of its input.
#[derive(Default)]
struct Gate {
    /// An `initialize` request went to rmcp.
    initialize_sent: AtomicBool,
    /// stdin ended.
    input_ended: AtomicBool,
}

impl Stdio {
    /// Starts reading `input` and writing `output`.
    pub(crate) fn start<I, O>(input: I, output: O) -> Stdio
    where
        I: AsyncBufRead + Unpin + Send + 'static,
        O: AsyncWrite + Unpin + Send + 'static,
    {
        let (incoming_tx, incoming_rx) = mpsc::channel(QUEUE);
        let (out_tx, out_rx) = mpsc::channel(QUEUE);
        let gate = Arc::new(Gate::default());
        let reader = tokio::spawn(read_lines(
            BoundedLines::new(input, MAX_LINE_BYTES),
            incoming_tx,
            out_tx.clone(),
            gate.clone(),
        ));
        let writer = tokio::spawn(write_lines(output, out_rx));
        Stdio {
            incoming: Arc::new(Mutex::new(incoming_rx)),
            out: out_tx,
            gate,
            reader,
            writer,
        }
    }

    /// A transport for one handshake attempt (and the session that follows it).
    pub(crate) fn transport(&self) -> StdioTransport {
        self.gate.initialize_sent.store(false, Ordering::SeqCst);
        StdioTransport {
            incoming: self.incoming.clone(),
            out: self.out.clone(),
        }
    }

    /// stdin has ended.
    pub(crate) fn input_ended(&self) -> bool {
        self.gate.input_ended.load(Ordering::SeqCst)
    }

    /// Stops reading and lets the writer finish what was queued.
    pub(crate) async fn finish(self) {
        self.reader.abort();
        drop(self.out);
        let _ = self.writer.await;
    }
}

/// One rmcp transport over the shared lines.
pub(crate) struct StdioTransport {
    incoming: Arc<Mutex<mpsc::Receiver<ClientJsonRpcMessage>>>,
    out: mpsc::Sender<String>,
}

impl Transport<RoleServer> for StdioTransport {
    type Error = OutputClosed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), OutputClosed>> + Send + 'static {
        let out = self.out.clone();
        async move {
            let line = serde_json::to_string(&item).map_err(|e| {
                tracing::warn!("mcp-server: cannot encode a message: {e}");
                OutputClosed
            })?;
            out.send(line).await.map_err(|_| OutputClosed)
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.incoming.lock().await.recv().await
    }

    async fn close(&mut self) -> Result<(), OutputClosed> {
        Ok(())
    }
}

/// What to do with one input line.
#[derive(Debug)]
enum Verdict {
    /// A message for rmcp.
    Serve(Box<ClientJsonRpcMessage>),
    /// Answered here with this line.
    Answer(String),
    /// Nothing to say (a blank line, a stray notification or response); why, for the log.
    Drop(&'static str),
}

async fn read_lines<I: AsyncBufRead + Unpin>(
    mut lines: BoundedLines<I>,
    incoming: mpsc::Sender<ClientJsonRpcMessage>,
    out: mpsc::Sender<String>,
    gate: Arc<Gate>,
) {
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("mcp-server: stdin: {e}");
                break;
            }
        };
        let initialized = gate.initialize_sent.load(Ordering::SeqCst);
        let verdict = judge(&line, lines.limit(), initialized);
        drop(line);
        match verdict {
            Verdict::Serve(message) => {
                if is_initialize(&message) {
                    gate.initialize_sent.store(true, Ordering::SeqCst);
                }
                if incoming.send(*message).await.is_err() {
                    break;
                }
            }
            Verdict::Answer(answer) => {
                if out.send(answer).await.is_err() {
                    break;
                }
            }
            Verdict::Drop(why) => {
                if !why.is_empty() {
                    crate::note(&format!(
                        "mcp-server: line {} ignored: {why}",
                        lines.number()
                    ));
                }
            }
        }
    }
    gate.input_ended.store(true, Ordering::SeqCst);
}

async fn write_lines<O: AsyncWrite + Unpin>(mut output: O, mut lines: mpsc::Receiver<String>) {
    while let Some(line) = lines.recv().await {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(req) if matches!(req.request, ClientRequest::InitializeRequest(_)))
}

/// Judges one line; `initialized`: an `initialize` request was already passed on.
fn judge(line: &Line, limit: usize, initialized: bool) -> Verdict {
    let bytes = match line {
        Line::Complete(bytes) => {
            let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
            // A byte-order mark some writers put first is no part of the message.
            bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes)
        }
        Line::Oversized { head, len } => {
            return Verdict::Answer(error_line(
                Envelope::of(head).reply_id(),
                INVALID_REQUEST,
                format!(
                    "Invalid request: the message has {len} bytes, over amber's limit of {limit} \
                     bytes per line; it was not read"
                ),
            ));
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Drop("");
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return Verdict::Answer(error_line(
                Envelope::of(bytes).reply_id(),
                PARSE_ERROR,
                format!("Parse error: the line is not UTF-8: {e}"),
            ));
        }
    };
    // The common case parses once, into the message itself; only a line that does not
    // parse is looked at again to say what is wrong with it.
    let message = match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(message) => message,
        Err(e) => return diagnose(text, &e),
    };
    if !initialized && !matches!(message, ClientJsonRpcMessage::Request(_)) {
        return Verdict::Drop("the client has not sent `initialize` yet");
    }
    Verdict::Serve(Box::new(message))
}

/// What to answer a line that is no MCP message (`error`: why rmcp's types refused it).
fn diagnose(text: &str, error: &serde_json::Error) -> Verdict {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return Verdict::Answer(error_line(
                Envelope::of(text.as_bytes()).reply_id(),
                PARSE_ERROR,
                format!("Parse error: {e}"),
            ));
        }
    };
    let Some(object) = value.as_object() else {
        return Verdict::Answer(error_line(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: a message is a JSON object (batches are not part of MCP)".into(),
        ));
    };
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let has_method = object.contains_key("method");
    match id {
        // A request, or an object that is neither a notification nor a response: it is owed
        // an answer, with its id.
        Some(id) if has_method || !is_response(object) => Verdict::Answer(error_line(
            id,
            INVALID_REQUEST,
            format!("Invalid request: {error}"),
        )),
        _ => Verdict::Drop("not an MCP message"),
    }
}

fn is_response(object: &serde_json::Map<String, Value>) -> bool {
    object.contains_key("result") || object.contains_key("error")
}

fn error_line(id: Value, code: i32, message: String) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {

    use super::*;

    fn complete(s: &[u8]) -> Line {
        Line::Complete(s.to_vec())
    }

    fn answer(verdict: Verdict) -> Value {
        match verdict {
            Verdict::Answer(line) => serde_json::from_str(&line).unwrap(),
            other => panic!("not answered: {other:?}"),
        }
    }

    const INIT: &[u8] = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

    #[test]
    fn bad_lines_are_answered_with_the_right_error() {
        // (line, code, id)
        let cases: Vec<(Line, i32, Value)> = vec![
            (complete(b"\xff{}"), PARSE_ERROR, Value::Null),
            (
                complete(b"{\"id\":2,\"method\":\"\xff\"}"),
                PARSE_ERROR,
                json!(2),
            ),
            (
                complete(br#"{"id":3,"method":"tools/call","params":{"a":"\ud800"}}"#),
                PARSE_ERROR,
                json!(3),
            ),
            (complete(b"{oops"), PARSE_ERROR, Value::Null),
            (
                complete(br#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#),
                PARSE_ERROR,
                Value::Null,
            ),
            (complete(b"[1]"), INVALID_REQUEST, Value::Null),
            (complete(b"7"), INVALID_REQUEST, Value::Null),
            (
                complete(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":7}"#),
                INVALID_REQUEST,
                json!(4),
            ),
            (complete(br#"{"id":5}"#), INVALID_REQUEST, json!(5)),
            (
                Line::Oversized {
                    head: br#"{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"#
                        .to_vec(),
                    len: 1 << 30,
                },
                INVALID_REQUEST,
                json!("big"),
            ),
        ];
        for (line, code, id) in cases {
            for initialized in [false, true] {
                let v = answer(judge(&line, MAX_LINE_BYTES, initialized));
                assert_eq!(
                    (v["error"]["code"].as_i64(), &v["id"]),
                    (Some(i64::from(code)), &id),
                    "{line:?}: {v}"
                );
            }
        }
        let v = answer(judge(
            &Line::Oversized {
                head: Vec::new(),
                len: 9,
            },
            8,
            true,
        ));
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("limit of 8 bytes"),
            "{v}"
        );
    }

    #[test]
    fn before_initialize_only_requests_pass() {
        let initialized = complete(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(
            judge(&initialized, MAX_LINE_BYTES, false),
            Verdict::Drop(_)
        ));
        assert!(matches!(
            judge(&initialized, MAX_LINE_BYTES, true),
            Verdict::Serve(_)
        ));
        let Verdict::Serve(init) = judge(&complete(INIT), MAX_LINE_BYTES, false) else {
            panic!("initialize not served")
        };
        assert!(is_initialize(&init));
        let ping = complete(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(matches!(
            judge(&ping, MAX_LINE_BYTES, false),
            Verdict::Serve(_)
        ));
        assert!(matches!(
            judge(&complete(b"  \r"), MAX_LINE_BYTES, false),
            Verdict::Drop("")
        ));
        let with_bom = [&b"\xef\xbb\xbf"[..], INIT].concat();
        assert!(matches!(
            judge(&complete(&with_bom), MAX_LINE_BYTES, false),
            Verdict::Serve(_)
        ));
        // A stray response is never answered.
        let stray = complete(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
        assert!(matches!(
            judge(&stray, MAX_LINE_BYTES, false),
            Verdict::Drop(_)
        ));
    }
}
