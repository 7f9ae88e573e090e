//! The two tools `amber-cli mcp-server` offers (`amber_run`, `amber_reply`): their
//! definitions as another agent's model sees them (descriptions, input and output schemas)
//! and the parsing of their arguments. Arguments that do not fit are the MCP invalid-params
//! error, never a tool result.

use std::path::PathBuf;
use std::sync::Arc;

use amber_proto::Mode;
use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

pub(crate) const RUN: &str = "amber_run";
pub(crate) const REPLY: &str = "amber_reply";

const RUN_DESCRIPTION: &str = "Delegate a coding task to amber, a coding agent with its own tools \
(read, write, edit, search, bash, sub-agents). Starts a NEW amber session in `cwd` (an absolute \
path to the project's root directory; amber can only touch files under it), runs one turn on \
`prompt` until the agent has finished, and returns the agent's final answer as text. \
`structuredContent.sessionId` names the session: pass it to `amber_reply` to ask a follow-up \
question or give further instructions with the whole conversation kept. Write the prompt as a \
complete, self-contained task (the goal, relevant files, constraints, what to report back): amber \
does not see your conversation. `mode`: `read` (only reads and searches, changes nothing), \
`write` (default: edits files in the workspace, runs benign commands) or `yolo` (nothing asks \
for approval). A turn can take minutes; progress is reported while it runs.";

const REPLY_DESCRIPTION: &str = "Continue an existing amber session (from `amber_run`'s \
`structuredContent.sessionId`, or any session listed by `amber-cli sessions`): sends `prompt` as \
the next user message, runs one turn with the whole earlier conversation in context, and returns \
the agent's final answer as text. Use it for follow-ups, corrections and next steps on the same \
task instead of starting over.";

/// Both tools, as `tools/list` shows them.
pub(crate) fn all() -> Vec<Tool> {
    vec![run_tool(), reply_tool()]
}

fn run_tool() -> Tool {
    Tool::new(
        RUN,
        RUN_DESCRIPTION,
        object(json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "minLength": 1, "description": "The task for amber, complete and self-contained."},
                "cwd": {"type": "string", "description": "Absolute path of the workspace (project root) the session works in."},
                "mode": {"type": "string", "enum": ["read", "write", "yolo"], "description": "What amber may do without asking: read (nothing changes), write (default), yolo."},
                "model": {"type": "string", "description": "A model name for this session (default: amberd's configured model)."}
            },
            "required": ["prompt", "cwd"],
            "additionalProperties": false
        })),
    )
    .with_title("Run a task with amber")
    .with_raw_output_schema(output_schema())
    .annotate(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    )
}

fn reply_tool() -> Tool {
    Tool::new(
        REPLY,
        REPLY_DESCRIPTION,
        object(json!({
            "type": "object",
            "properties": {
                "sessionId": {"type": "string", "minLength": 1, "description": "The session to continue (structuredContent.sessionId of amber_run)."},
                "prompt": {"type": "string", "minLength": 1, "description": "The next message to the agent."}
            },
            "required": ["sessionId", "prompt"],
            "additionalProperties": false
        })),
    )
    .with_title("Continue an amber session")
    .with_raw_output_schema(output_schema())
    .annotate(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    )
}

/// The `structuredContent` both tools return.
fn output_schema() -> Arc<JsonObject> {
    let usage = json!({
        "type": "object",
        "properties": {
            "promptTokens": {"type": "integer"},
            "completionTokens": {"type": "integer"},
            "cachedTokens": {"type": "integer"},
            "totalTokens": {"type": "integer"}
        }
    });
    object(json!({
        "type": "object",
        "properties": {
            "sessionId": {"type": "string", "description": "The amber session: continue it with amber_reply."},
            "stopReason": {"type": "string", "enum": ["end_turn", "cancelled", "loop_detected", "tool_failures", "max_iterations", "error"]},
            "usage": usage
        },
        "required": ["sessionId", "stopReason", "usage"]
    }))
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// `amber_run`'s arguments.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    pub prompt: String,
    pub cwd: PathBuf,
    #[serde(default)]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub model: Option<String>,
}

/// `amber_reply`'s arguments.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ReplyArgs {
    pub session_id: String,
    pub prompt: String,
}

/// Parses `amber_run`'s arguments: `cwd` must be absolute, `prompt` not blank.
pub(crate) fn parse_run(arguments: Option<JsonObject>) -> Result<RunArgs, ErrorData> {
    let args: RunArgs = parse(RUN, arguments)?;
    non_blank(RUN, "prompt", &args.prompt)?;
    if !args.cwd.is_absolute() {
        return Err(ErrorData::invalid_params(
            format!(
                "{RUN}: `cwd` must be an absolute path, not `{}`",
                args.cwd.display()
            ),
            None,
        ));
    }
    if args.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(ErrorData::invalid_params(
            format!("{RUN}: `model` must not be empty (leave it out for the default)"),
            None,
        ));
    }
    Ok(args)
}

/// Parses `amber_reply`'s arguments.
pub(crate) fn parse_reply(arguments: Option<JsonObject>) -> Result<ReplyArgs, ErrorData> {
    let args: ReplyArgs = parse(REPLY, arguments)?;
    non_blank(REPLY, "sessionId", &args.session_id)?;
    non_blank(REPLY, "prompt", &args.prompt)?;
    Ok(args)
}

fn parse<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: Option<JsonObject>,
) -> Result<T, ErrorData> {
    let value = Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(value)
        .map_err(|e| ErrorData::invalid_params(format!("{tool}: invalid arguments: {e}"), None))
}

fn non_blank(tool: &str, field: &str, value: &str) -> Result<(), ErrorData> {
    if value.trim().is_empty() {
        return Err(ErrorData::invalid_params(
            format!("{tool}: `{field}` must not be empty"),
            None,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    use super::*;
    use rmcp::model::ErrorCode;

    fn args(value: Value) -> Option<JsonObject> {
        match value {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    #[test]
    fn run_arguments_parse_with_their_options() {
        let got = parse_run(args(
            json!({"prompt": "fix it", "cwd": "/w", "mode": "read", "model": "m1"}),
        ))
        .unwrap();
        assert_eq!(got.cwd, PathBuf::from("/w"));
        assert_eq!(got.mode, Some(Mode::Read));
        assert_eq!(got.model.as_deref(), Some("m1"));
    }

    #[test]
    fn bad_run_arguments_are_invalid_params() {
        for bad in [
            json!({"prompt": "x"}),
            json!({"prompt": "x", "cwd": "relative/dir"}),
            json!({"prompt": " ", "cwd": "/w"}),
            json!({"prompt": "x", "cwd": "/w", "mode": "admin"}),
            json!({"prompt": "x", "cwd": "/w", "extra": 1}),
        ] {
            let err = parse_run(args(bad.clone())).unwrap_err();
            assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{bad}");
            assert!(err.message.starts_with("amber_run"), "{}", err.message);
        }
        assert!(parse_run(None).is_err());
    }

    #[test]
    fn reply_arguments_need_a_session_and_a_prompt() {
        let got = parse_reply(args(json!({"sessionId": "s1", "prompt": "more"}))).unwrap();
        assert_eq!(got.session_id, "s1");
        let err = parse_reply(args(json!({"prompt": "more"}))).unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_PARAMS);
        assert!(err.message.contains("sessionId"), "{}", err.message);
    }

    #[test]
    fn both_tools_declare_input_and_output_schemas() {
        let tools = all();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [RUN, REPLY]);
        for tool in &tools {
            assert_eq!(tool.input_schema["type"], "object");
            let out = tool.output_schema.as_ref().unwrap();
            assert_eq!(out["required"], json!(["sessionId", "stopReason", "usage"]));
            assert!(tool.description.as_ref().unwrap().len() > 100);
        }
    }
}
