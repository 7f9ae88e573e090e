//! MCP onto the Tool port: every server tool becomes `mcp__SERVER__TOOL`, and a server
//! with resources gets `mcp__SERVER__read_resource` and `mcp__SERVER__list_resources`.
//! Calls go to whatever connection the server has *now*, so tools survive reconnects.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use super::client::{Peer, chain};
use super::render;
use super::supervisor::Server;
use amber_tools::{Tool, ToolContext, ToolOutcome};

/// Longest tool name OpenAI-compatible APIs accept.
const MAX_NAME: usize = 64;

/// The adapters for one server's current tool list.
pub(super) fn tools(
    server: &Arc<Server>,
    listed: &[rmcp::model::Tool],
    resources: bool,
) -> Vec<Arc<dyn Tool>> {
    let mut names = Vec::new();
    let mut out: Vec<Arc<dyn Tool>> = Vec::new();
    for tool in listed {
        let name = unique(tool_name(&server.name, &tool.name), &names);
        names.push(name.clone());
        let annotations = tool.annotations.as_ref();
        out.push(Arc::new(McpTool {
            server: server.clone(),
            name,
            remote: tool.name.to_string(),
            description: tool
                .description
                .as_deref()
                .or(tool.title.as_deref())
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    format!("Tool `{}` of MCP server `{}`.", tool.name, server.name)
                }),
            schema: Value::Object((*tool.input_schema).clone()),
            read_only: annotations.and_then(|a| a.read_only_hint) == Some(true),
            destructive: annotations.and_then(|a| a.destructive_hint) == Some(true),
        }));
    }
    if resources {
        // After the server's own tools, so a server tool that happens to be called
        // `read_resource` keeps its name and ours gets the suffix.
        for kind in [ResourceOp::Read, ResourceOp::List] {
            let name = unique(tool_name(&server.name, kind.suffix()), &names);
            names.push(name.clone());
            out.push(Arc::new(ResourceTool {
                server: server.clone(),
                name,
                op: kind,
            }));
        }
    }
    out
}

/// `mcp__SERVER__TOOL` (also the command name of a prompt) in `[A-Za-z0-9_-]`, at most 64 characters; a longer name keeps
/// its head and gets a hash of the whole so distinct tools stay distinct.
pub(crate) fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    let hash = raw.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{}_{hash:08x}", &clean[..MAX_NAME - 9])
}

/// `name`, or `name_2`, `name_3`… when sanitizing made two names equal.
fn unique(name: String, taken: &[String]) -> String {
    if !taken.contains(&name) {
        return name;
    }
    (2..)
        .map(|n| {
            let suffix = format!("_{n}");
            let head = &name[..name.len().min(MAX_NAME - suffix.len())];
            format!("{head}{suffix}")
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(name)
}

/// One MCP tool.
struct McpTool {
    server: Arc<Server>,
    name: String,
    /// The name the server knows it by.
    remote: String,
    description: String,
    schema: Value,
    read_only: bool,
    destructive: bool,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    /// `readOnlyHint: true` only; no hint means "may write".
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// `destructiveHint: true` only. The spec's default for a missing hint is "may be
    /// destructive", but the user configured this server on purpose, and asking before
    /// every unannotated tool would make most servers unusable in write mode; read mode
    /// still blocks every tool that is not read-only.
    fn destructive(&self) -> bool {
        self.destructive
    }

    fn defer_group(&self) -> Option<&str> {
        (!self.server.always_load).then_some(self.server.name.as_str())
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let arguments = match args {
                Value::Object(map) => Some(map),
                Value::Null => None,
                _ => return ToolOutcome::error("arguments must be a JSON object"),
            };
            let peer = match self.server.peer() {
                Ok(peer) => peer,
                Err(message) => return ToolOutcome::error(message),
            };
            let mut params = CallToolRequestParams::new(self.remote.clone());
            if let Some(arguments) = arguments {
                params = params.with_arguments(arguments);
            }
            let what = format!("tools/call `{}`", self.remote);
            // While it runs, the server's questions go to this call's session.
            let _caller = ctx
                .session
                .server_asks()
                .map(|asks| self.server.callers.enter(&ctx.call_id, asks));
            let call = call_answering(&self.server, &peer, params);
            match request(&self.server, ctx, &what, call).await {
                Ok(result) if result.is_error == Some(true) => {
                    ToolOutcome::error(render::call_result(&result))
                }
                Ok(result) => ToolOutcome::ok(render::call_result(&result)),
                Err(outcome) => outcome,
            }
        })
    }
}

/// Most rounds of input a stateless-era server may ask for in one call.
const MAX_INPUT_ROUNDS: usize = 8;

/// `tools/call`, answering the input a server of the stateless revision asks for (its
/// `input_required` results: elicitation and sampling, as the initialize era's requests
/// are, through `asks.rs`; roots: none) and retrying with the answers and its state. A
/// call the server turns into a task (the Tasks extension) is followed to its end
/// (`tasks.rs`).
pub(super) async fn call_answering(
    server: &Server,
    peer: &Peer,
    mut params: CallToolRequestParams,
) -> Result<rmcp::model::CallToolResult, ServiceError> {
    use rmcp::model::CallToolResponse;
    for _ in 0..MAX_INPUT_ROUNDS {
        let needed = match peer.call_tool_once(params.clone()).await? {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::InputRequired(needed) => needed,
            CallToolResponse::Task(created) => {
                return super::tasks::follow(server, peer, created).await;
            }
            _ => return Err(ServiceError::UnexpectedResponse),
        };
        let answers = answer_inputs(server, needed.input_requests.unwrap_or_default()).await?;
        params.input_responses = (!answers.is_empty()).then_some(answers);
        params.request_state = needed.request_state;
    }
    Err(ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_INPUT_ROUNDS,
    })
}

/// The answers to what a server asked for (a call's `input_required`, a task's
/// `inputRequests`), each through the person of the running call's session.
#[allow(deprecated)] // sampling: see asks.rs
pub(super) async fn answer_inputs(
    server: &Server,
    asked: rmcp::model::InputRequests,
) -> Result<rmcp::model::InputResponses, ServiceError> {
    use rmcp::model::{InputRequest, InputResponses};
    let mut answers = InputResponses::new();
    for (key, asked) in asked {
        let answer = match asked {
            InputRequest::Elicitation(request) => serde_json::to_value(
                super::asks::elicit(&server.callers, &server.name, request.params)
                    .await
                    .map_err(ServiceError::McpError)?,
            ),
            InputRequest::CreateMessage(request) => serde_json::to_value(
                super::asks::sample(&server.callers, &server.name, request.params)
                    .await
                    .map_err(ServiceError::McpError)?,
            ),
            InputRequest::ListRoots(_) => Ok(json!({"roots": []})),
            // A kind of input this amber does not know: the call cannot go on.
            _ => return Err(ServiceError::UnexpectedResponse),
        }
        .map_err(|_| ServiceError::UnexpectedResponse)?;
        answers.insert(key, answer);
    }
    Ok(answers)
}

/// Runs one request with the call timeout, cancelled with the turn. Dropping rmcp's
/// request future (timeout or cancel) sends `notifications/cancelled` to the server.
async fn request<T>(
    server: &Server,
    ctx: &ToolContext,
    what: &str,
    call: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, ToolOutcome> {
    let timeout = server.settings.call_timeout;
    tokio::select! {
        () = ctx.cancel.cancelled() => Err(ToolOutcome::error(format!("{what} was cancelled"))),
        r = tokio::time::timeout(timeout, call) => match r {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                server.report(&err);
                Err(ToolOutcome::error(format!(
                    "MCP server `{}`: {what} failed: {}",
                    server.name,
                    chain(&err)
                )))
            }
            Err(_) => Err(ToolOutcome::error(format!(
                "MCP server `{}` did not answer {what} within {} ms (cancelled)",
                server.name,
                timeout.as_millis()
            ))),
        },
    }
}

#[derive(Debug, Clone, Copy)]
enum ResourceOp {
    Read,
    List,
}

impl ResourceOp {
    fn suffix(self) -> &'static str {
        match self {
            ResourceOp::Read => "read_resource",
            ResourceOp::List => "list_resources",
        }
    }
}

/// `read_resource {uri}` or `list_resources {}` of one server; both read-only.
struct ResourceTool {
    server: Arc<Server>,
    name: String,
    op: ResourceOp,
}

impl Tool for ResourceTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn defer_group(&self) -> Option<&str> {
        (!self.server.always_load).then_some(self.server.name.as_str())
    }

    fn description(&self) -> &str {
        match self.op {
            ResourceOp::Read => {
                "Read a resource of this MCP server by URI (see its list_resources tool)."
            }
            ResourceOp::List => {
                "List the resources and resource templates of this MCP server (URIs, names, types)."
            }
        }
    }

    fn input_schema(&self) -> Value {
        match self.op {
            ResourceOp::Read => json!({
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The resource URI"}},
                "required": ["uri"],
                "additionalProperties": false
            }),
            ResourceOp::List => {
                json!({"type": "object", "properties": {}, "additionalProperties": false})
            }
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let peer = match self.server.peer() {
                Ok(peer) => peer,
                Err(message) => return ToolOutcome::error(message),
            };
            match self.op {
                ResourceOp::Read => {
                    let Some(uri) = args.get("uri").and_then(Value::as_str) else {
                        return ToolOutcome::error("missing string argument `uri`");
                    };
                    let params = ReadResourceRequestParams::new(uri);
                    let what = format!("resources/read `{uri}`");
                    match request(&self.server, ctx, &what, peer.read_resource(params)).await {
                        Ok(result) => ToolOutcome::ok(render::contents(&result.contents)),
                        Err(outcome) => outcome,
                    }
                }
                ResourceOp::List => {
                    match request(&self.server, ctx, "resources/list", list_resources(peer)).await {
                        Ok(text) => ToolOutcome::ok(text),
                        Err(outcome) => outcome,
                    }
                }
            }
        })
    }
}

/// Every resource and template, all pages, one per line.
async fn list_resources(peer: Peer) -> Result<String, ServiceError> {
    let resources = peer.list_all_resources().await?;
    let templates = match peer.list_all_resource_templates().await {
        Ok(templates) => templates,
        // Templates are optional.
        Err(ServiceError::McpError(_)) => Vec::new(),
        Err(err) => return Err(err),
    };
    let mut lines = Vec::new();
    for r in &resources {
        let mut line = format!("{} — {}", r.uri, r.name);
        if let Some(mime) = &r.mime_type {
            line.push_str(&format!(" ({mime})"));
        }
        if let Some(description) = &r.description {
            line.push_str(&format!(": {description}"));
        }
        lines.push(line);
    }
    for t in &templates {
        let mut line = format!("template {} — {}", t.uri_template, t.name);
        if let Some(description) = &t.description {
            line.push_str(&format!(": {description}"));
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return Ok("(no resources)".to_owned());
    }
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_bounded() {
        assert_eq!(
            tool_name("everything", "get-sum"),
            "mcp__everything__get-sum"
        );
        assert_eq!(tool_name("fs", "read.file v2"), "mcp__fs__read_file_v2");
        let long = tool_name("server", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert_ne!(long, tool_name("server", &"x".repeat(101)));
        let taken = vec!["mcp__fs__a_b".to_owned()];
        assert_eq!(unique("mcp__fs__a_b".into(), &taken), "mcp__fs__a_b_2");
        assert_eq!(unique("mcp__fs__c".into(), &taken), "mcp__fs__c");
    }
}
