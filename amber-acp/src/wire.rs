//! The ACP wire: JSON-RPC 2.0, one message per line on stdin/stdout. Parsing a line
//! into what it is (request, notification, response), building the lines we send, and
//! the error codes ACP uses. Pure: no I/O.
//!
//! Every line is answered on its own: one that is not UTF-8 or not JSON gets a parse error
//! (with the line's id when it was read before the fault, else `id` null), JSON that is not a request, notification or response an invalid-request
//! error, and a line over the bridge's limit (read without holding it:
//! `amber_client::bridge::lines`) an invalid-request error naming the limit, with the
//! request's id when its head shows one.

use amber_client::bridge::envelope::Envelope as Head;
use amber_client::bridge::lines::Line;
use serde::Deserialize;
use serde_json::{Value, json};

/// JSON-RPC: the line was not JSON.
pub(crate) const PARSE_ERROR: i32 = -32700;
/// JSON-RPC: JSON, but not a request, notification or response.
pub(crate) const INVALID_REQUEST: i32 = -32600;
pub(crate) const METHOD_NOT_FOUND: i32 = -32601;
pub(crate) const INVALID_PARAMS: i32 = -32602;
pub(crate) const INTERNAL_ERROR: i32 = -32603;
/// ACP's "resource not found" (an unknown session id).
pub(crate) const RESOURCE_NOT_FOUND: i32 = -32002;
/// Too many of the client's requests in flight (amber's `-32003`, as amberd says it).
pub(crate) const OVERLOADED: i32 = amber_proto::errors::OVERLOADED;

/// An error answer to a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub code: i32,
    pub message: String,
}

impl RpcError {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    pub(crate) fn session_not_found(session_id: &str) -> Self {
        Self::new(
            RESOURCE_NOT_FOUND,
            format!("session not found: {session_id}"),
        )
    }
}

/// An amberd error as ACP sees it: amber's "session not found" is ACP's resource not
/// found; everything else keeps its message, and amberd's own code when ACP has none for it
/// (an editor's log then says which refusal it was).
impl From<amber_client::ClientError> for RpcError {
    fn from(e: amber_client::ClientError) -> Self {
        match e.code() {
            Some(-32001) => RpcError::new(RESOURCE_NOT_FOUND, e.to_string()),
            Some(INVALID_PARAMS) | Some(-32004) => RpcError::invalid_params(e.to_string()),
            Some(code) => RpcError::internal(format!("amberd error {code}: {e}")),
            None => RpcError::internal(e.to_string()),
        }
    }
}

/// One incoming line, classified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The client's answer to one of our requests (`session/request_permission`).
    Response {
        id: Value,
        result: Result<Value, Value>,
    },
    /// Not something we can act on: answered with this error (`id` null when unknown).
    Invalid {
        id: Value,
        error: RpcError,
    },
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// Classifies one line as read from stdin (`limit`: the bridge's, named in the answer).
pub(crate) fn parse_input(line: &Line, limit: usize) -> Option<Incoming> {
    let bytes = match line {
        Line::Complete(bytes) => bytes,
        Line::Oversized { head, len } => {
            return Some(Incoming::Invalid {
                id: Head::of(head).reply_id(),
                error: RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "invalid request: the message has {len} bytes, over this agent's limit of \
                         {limit} bytes per line; it was not read"
                    ),
                ),
            });
        }
    };
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_line(text),
        Err(e) => Some(Incoming::Invalid {
            id: Head::of(bytes).reply_id(),
            error: RpcError::new(
                PARSE_ERROR,
                format!("parse error: the line is not UTF-8: {e}"),
            ),
        }),
    }
}

/// Classifies one line. Blank lines are `None`.
pub(crate) fn parse_line(line: &str) -> Option<Incoming> {
    if line.trim().is_empty() {
        return None;
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            // The id, when it was read before the fault, lets the client match the error.
            return Some(Incoming::Invalid {
                id: Head::of(line.as_bytes()).reply_id(),
                error: RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
            });
        }
    };
    let id_of = |v: &Value| v.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |v: &Value, why: &str| Incoming::Invalid {
        id: id_of(v),
        error: RpcError::new(INVALID_REQUEST, why.to_owned()),
    };
    if !value.is_object() {
        return Some(invalid(&value, "invalid request: not a JSON-RPC object"));
    }
    let env: Envelope = match serde_json::from_value(value.clone()) {
        Ok(env) => env,
        Err(e) => return Some(invalid(&value, &format!("invalid request: {e}"))),
    };
    let params = env.params.unwrap_or(Value::Null);
    Some(match (env.method, env.id) {
        (Some(method), Some(id)) if !id.is_null() => Incoming::Request { id, method, params },
        (Some(method), _) => Incoming::Notification { method, params },
        (None, Some(id)) => match (env.result, env.error) {
            (_, Some(error)) => Incoming::Response {
                id,
                result: Err(error),
            },
            (Some(result), None) => Incoming::Response {
                id,
                result: Ok(result),
            },
            (None, None) => invalid(&value, "invalid request: neither method nor result"),
        },
        (None, None) => invalid(&value, "invalid request: no method"),
    })
}

/// A success answer.
pub(crate) fn response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error answer.
pub(crate) fn error_response(id: &Value, error: &RpcError) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": error.code, "message": error.message},
    })
    .to_string()
}

/// A request of ours to the client.
pub(crate) fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A notification of ours to the client.
pub(crate) fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// Params of a request, typed; a shape that does not fit is invalid params.
pub(crate) fn params<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_json_is_a_parse_error_with_a_null_id() {
        let Some(Incoming::Invalid { id, error }) = parse_line("{nope") else {
            panic!("not invalid");
        };
        assert_eq!(id, Value::Null);
        assert_eq!(error.code, PARSE_ERROR);
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert!(matches!(
            parse_line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Some(Incoming::Request { method, .. }) if method == "initialize"
        ));
        assert!(matches!(
            parse_line(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Some(Incoming::Notification { method, .. }) if method == "session/cancel"
        ));
        assert!(matches!(
            parse_line(r#"{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}"#),
            Some(Incoming::Response { result: Ok(_), .. })
        ));
        assert!(matches!(
            parse_line(r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"x"}}"#),
            Some(Incoming::Response { result: Err(_), .. })
        ));
        assert!(matches!(
            parse_line(r#"[1,2]"#),
            Some(Incoming::Invalid { error, .. }) if error.code == INVALID_REQUEST
        ));
        assert_eq!(parse_line("   "), None);
    }

    #[test]
    fn every_bad_line_gets_its_error() {
        let long = Line::Oversized {
            head: br#"{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"#.to_vec(),
            len: 17 << 20,
        };
        // (line, expected code, expected id)
        let cases: Vec<(Line, i32, Value)> = vec![
            (
                Line::Complete(b"{\"id\":8,\"method\":\"\xff\"}".to_vec()),
                PARSE_ERROR,
                json!(8),
            ),
            (
                Line::Complete(br#"{"id":9,"params":{"t":"\ud800"}}"#.to_vec()),
                PARSE_ERROR,
                json!(9),
            ),
            (
                Line::Complete(b"\xff\xfe{}".to_vec()),
                PARSE_ERROR,
                Value::Null,
            ),
            (Line::Complete(b"{nope".to_vec()), PARSE_ERROR, Value::Null),
            (
                Line::Complete(br#"{"jsonrpc":"2.0","id":"\ud800","method":"x"}"#.to_vec()),
                PARSE_ERROR,
                Value::Null,
            ),
            (
                Line::Complete(b"[1,2]".to_vec()),
                INVALID_REQUEST,
                Value::Null,
            ),
            (Line::Complete(b"42".to_vec()), INVALID_REQUEST, Value::Null),
            (
                Line::Complete(br#"{"id":3}"#.to_vec()),
                INVALID_REQUEST,
                json!(3),
            ),
            (long, INVALID_REQUEST, json!(12)),
        ];
        for (line, code, id) in cases {
            let Some(Incoming::Invalid { id: got, error }) = parse_input(&line, 16 << 20) else {
                panic!("{line:?} is not invalid");
            };
            assert_eq!((error.code, &got), (code, &id), "{line:?}: {error:?}");
        }
        let Some(Incoming::Invalid { error, .. }) = parse_input(
            &Line::Oversized {
                head: Vec::new(),
                len: 5,
            },
            16 << 20,
        ) else {
            panic!()
        };
        assert!(error.message.contains("16777216"), "{}", error.message);
        assert_eq!(parse_input(&Line::Complete(b"\r".to_vec()), 10), None);
    }
}
