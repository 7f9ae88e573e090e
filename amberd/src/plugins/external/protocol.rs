//! The wire protocol between the daemon and an external plugin (docs/plugins.md): JSON-RPC
//! 2.0, one message per line. Owns encoding outgoing messages, classifying incoming lines,
//! the `initialize` result with its tool declarations (and their validation), and turning
//! a `tool/call` result into a [`ToolOutcome`].

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Value, json};

use amber_tools::ToolOutcome;

/// The protocol version the daemon speaks (`initialize.params.protocolVersion`).
pub(super) const PROTOCOL_VERSION: u32 = 1;

pub(super) const INITIALIZE: &str = "initialize";
pub(super) const TOOL_CALL: &str = "tool/call";
pub(super) const SHUTDOWN: &str = "shutdown";
/// Notification: the daemon no longer waits for request `id` (the turn was cancelled).
pub(super) const CANCEL_REQUEST: &str = "$/cancelRequest";
/// Notification from the plugin: `{level, message}` for the daemon log.
pub(super) const LOG: &str = "log";

/// JSON-RPC "method not found", for requests the plugin sends us (we serve none).
pub(super) const METHOD_NOT_FOUND: i64 = -32601;

/// Longest a tool name may be (what LLM APIs accept).
const MAX_TOOL_NAME: usize = 64;

/// One line to write: a request.
pub(super) fn request(id: u64, method: &str, params: Value) -> String {
    line(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// One line to write: a notification.
pub(super) fn notification(method: &str, params: Value) -> String {
    line(json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// One line to write: an error response to a request the plugin sent.
pub(super) fn error_response(id: Value, code: i64, message: &str) -> String {
    line(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn line(message: Value) -> String {
    // serde_json escapes control characters inside strings, so this is a single line.
    let mut text = message.to_string();
    text.push('\n');
    text
}

/// A JSON-RPC error object from the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// A classified line from the plugin's stdout.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Incoming {
    /// The answer to one of our requests. `id` is ours when it is a number we sent.
    Response {
        id: Option<u64>,
        result: Result<Value, RpcError>,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The plugin asked us something; we answer "method not found".
    Request {
        id: Value,
        method: String,
    },
}

/// Classifies one line; `Err` says why it is not a JSON-RPC message.
pub(super) fn parse(line: &[u8]) -> Result<Incoming, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON ({e})"))?;
    let Value::Object(mut object) = value else {
        return Err("not a JSON object".to_owned());
    };
    // Tolerate a missing `jsonrpc` (sloppy but unambiguous); a wrong one is not JSON-RPC.
    if let Some(version) = object.get("jsonrpc")
        && version.as_str() != Some("2.0")
    {
        return Err(format!("`jsonrpc` is {version}, not \"2.0\""));
    }
    if let Some(method) = object.get("method") {
        let Some(method) = method.as_str().map(str::to_owned) else {
            return Err("`method` is not a string".to_owned());
        };
        let params = object.remove("params").unwrap_or(Value::Null);
        return Ok(match object.remove("id") {
            Some(id) if !id.is_null() => Incoming::Request { id, method },
            _ => Incoming::Notification { method, params },
        });
    }
    let id = object.get("id").ok_or("neither `method` nor `id`")?;
    // Our ids are numbers; a plugin that echoes them as strings is still understood.
    let id = id
        .as_u64()
        .or_else(|| id.as_str().and_then(|s| s.parse().ok()));
    if let Some(error) = object.remove("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = match error.get("message").and_then(Value::as_str) {
            Some(message) => message.to_owned(),
            None => error.to_string(),
        };
        return Ok(Incoming::Response {
            id,
            result: Err(RpcError { code, message }),
        });
    }
    match object.remove("result") {
        Some(result) => Ok(Incoming::Response {
            id,
            result: Ok(result),
        }),
        None => Err("a response without `result` or `error`".to_owned()),
    }
}

/// The `initialize` params.
pub(super) fn initialize_params(daemon_name: &str, daemon_version: &str) -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "daemon": {"name": daemon_name, "version": daemon_version},
    })
}

/// The `initialize` result.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct InitializeResult {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    pub tools: Vec<ToolDecl>,
}

/// One tool as the plugin declares it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolDecl {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    /// amber extension: the tool changes nothing, so it may run in read mode.
    #[serde(default)]
    pub read_only: bool,
    /// amber extension: the tool may destroy data, so write mode asks first.
    #[serde(default)]
    pub destructive: bool,
}

fn empty_object_schema() -> Value {
    json!({"type": "object"})
}

impl InitializeResult {
    /// Reads and validates the result: every tool name valid and unique, every schema an
    /// object. Errors name the offending field.
    pub(super) fn from_value(value: Value) -> Result<Self, String> {
        let result: InitializeResult = serde_path_to_error::deserialize(value).map_err(|e| {
            format!(
                "malformed initialize result at `{}`: {}",
                e.path(),
                e.inner()
            )
        })?;
        let mut seen = HashSet::new();
        for (index, tool) in result.tools.iter().enumerate() {
            let bad = |why: String| format!("tools[{index}] (`{}`): {why}", tool.name);
            check_tool_name(&tool.name).map_err(bad)?;
            if !tool.input_schema.is_object() {
                return Err(bad("`inputSchema` must be a JSON object".to_owned()));
            }
            if !seen.insert(tool.name.as_str()) {
                return Err(bad("declared twice".to_owned()));
            }
        }
        Ok(result)
    }
}

/// Tool names: non-empty, `[A-Za-z0-9_-]`, at most 64 characters (what LLM APIs accept).
pub(super) fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_owned());
    }
    if name.len() > MAX_TOOL_NAME {
        return Err(format!(
            "the name is longer than {MAX_TOOL_NAME} characters"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "the name may only use A-Z a-z 0-9 _ - (found {c:?})"
        ));
    }
    Ok(())
}

/// The `tool/call` params.
pub(super) fn call_params(tool: &str, arguments: Value, call_id: &str) -> Value {
    json!({"name": tool, "arguments": arguments, "callId": call_id})
}

/// A `tool/call` result as the model sees it. Liberal in what it accepts: `output` may be
/// any JSON (non-strings are stringified), a missing `status` means `ok`, and a result that
/// is not an object is itself the output.
pub(super) fn call_outcome(result: Value) -> ToolOutcome {
    let Value::Object(mut object) = result else {
        return ToolOutcome::ok(stringify(result));
    };
    let output = stringify(object.remove("output").unwrap_or(Value::Null));
    match object.get("status").and_then(Value::as_str) {
        None | Some("ok") => ToolOutcome::ok(output),
        Some("error") => ToolOutcome::error(output),
        Some(other) => ToolOutcome::error(format!(
            "the plugin answered with unknown status `{other}`: {output}"
        )),
    }
}

fn stringify(value: Value) -> String {
    match value {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use amber_proto::ToolStatus;

    use super::*;

    #[test]
    fn classifies_lines() {
        let ok = parse(br#"{"jsonrpc":"2.0","id":3,"result":{"a":1}}"#).unwrap();
        assert_eq!(
            ok,
            Incoming::Response {
                id: Some(3),
                result: Ok(json!({"a": 1}))
            }
        );
        let err = parse(br#"{"jsonrpc":"2.0","id":"4","error":{"code":-1,"message":"no"}}"#);
        assert_eq!(
            err.unwrap(),
            Incoming::Response {
                id: Some(4),
                result: Err(RpcError {
                    code: -1,
                    message: "no".into()
                })
            }
        );
        let note = parse(br#"{"jsonrpc":"2.0","method":"log","params":{"message":"hi"}}"#);
        assert!(matches!(note.unwrap(), Incoming::Notification { method, .. } if method == "log"));
        let req = parse(br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#).unwrap();
        assert!(matches!(req, Incoming::Request { method, .. } if method == "ping"));
        for garbage in [
            &b"hello"[..],
            b"[1,2]",
            b"{}",
            br#"{"jsonrpc":"1.0","id":1,"result":1}"#,
            br#"{"id":1}"#,
            br#"{"method":7}"#,
        ] {
            assert!(
                parse(garbage).is_err(),
                "{}",
                String::from_utf8_lossy(garbage)
            );
        }
    }

    #[test]
    fn encodes_one_line_per_message() {
        let text = request(1, TOOL_CALL, json!({"text": "a\nb"}));
        assert_eq!(text.matches('\n').count(), 1);
        assert!(text.ends_with('\n'));
        let back = parse(text.trim_end().as_bytes()).unwrap();
        assert!(matches!(back, Incoming::Request { method, .. } if method == TOOL_CALL));
    }

    #[test]
    fn validates_tool_declarations() {
        let ok = InitializeResult::from_value(json!({
            "name": "p", "version": "1",
            "tools": [{"name": "a-b_9", "description": "d", "readOnly": true}]
        }))
        .unwrap();
        assert_eq!(ok.tools[0].input_schema, json!({"type": "object"}));
        assert!(ok.tools[0].read_only && !ok.tools[0].destructive);

        let cases = [
            (json!({"tools": [{"name": ""}]}), "empty"),
            (json!({"tools": [{"name": "a b"}]}), "may only use"),
            (
                json!({"tools": [{"name": "x".repeat(65)}]}),
                "longer than 64",
            ),
            (json!({"tools": [{"name": "a"}, {"name": "a"}]}), "twice"),
            (
                json!({"tools": [{"name": "a", "inputSchema": []}]}),
                "JSON object",
            ),
            (json!({"tools": [{"description": "no name"}]}), "tools[0]"),
            (json!({"name": "p"}), "tools"),
            (json!("nope"), "malformed"),
        ];
        for (value, expected) in cases {
            let err = InitializeResult::from_value(value.clone()).unwrap_err();
            assert!(err.contains(expected), "{value}: {err}");
        }
    }

    #[test]
    fn call_results_are_read_liberally() {
        let cases = [
            (
                json!({"status": "ok", "output": "hi"}),
                ToolStatus::Ok,
                "hi",
            ),
            (
                json!({"status": "error", "output": "bad"}),
                ToolStatus::Error,
                "bad",
            ),
            (json!({"output": {"n": 1}}), ToolStatus::Ok, r#"{"n":1}"#),
            (json!({"status": "ok"}), ToolStatus::Ok, ""),
            (json!("bare"), ToolStatus::Ok, "bare"),
            (json!(42), ToolStatus::Ok, "42"),
        ];
        for (result, status, output) in cases {
            let outcome = call_outcome(result);
            assert_eq!((outcome.status, outcome.output.as_str()), (status, output));
        }
        let odd = call_outcome(json!({"status": "maybe", "output": "x"}));
        assert_eq!(odd.status, ToolStatus::Error);
        assert!(odd.output.contains("unknown status `maybe`"));
    }
}
