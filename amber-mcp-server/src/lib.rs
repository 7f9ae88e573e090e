//! amber-mcp-server: amber as an MCP server over stdio, for other agents to delegate to —
//! what `amber-cli mcp-server [--yes]` runs ([`serve`]). Tools `amber_run` (a new session,
//! one turn) and `amber_reply` (the next turn of a session), each answered with the turn's
//! final text and `structuredContent: {sessionId, stopReason, usage}`.
//!
//! Invariants: stdout carries only MCP messages (logs and notes go to stderr); it is a
//! headless amberd client, an approver only with `--yes` (then it answers as `run --yes`
//! does: amber-client's `turn::yes_decision`); a failing call is a tool result with
//! `isError`, bad arguments the invalid-params error, and the server outlives both (and
//! amberd going away).
//!
//! - `tools`: the two tools, their schemas and argument parsing.
//! - `runner`: one call, one turn followed to its end.
//! - `progress`: `notifications/progress` of a call.
//! - `stdio`: the transport rmcp serves on, every line it cannot serve answered there.
//! - `tasks`: a call as a task (the Tasks extension), for a client that declared it.

pub mod http;
mod progress;
mod runner;
mod stdio;
mod tasks;
mod tools;

use amber_client::ConnectOptions;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use progress::Progress;
use runner::{Call, Target};
use stdio::Stdio;

/// Serves MCP on stdin/stdout until the client goes away (end of input). A handshake that
/// fails (an `initialize` rmcp refuses) is answered and the next one awaited: only end of
/// input or a signal ends the server.
///
/// `opts` says how to reach amberd (a new connection per call); with `yes` the server is an
/// approver and answers the approval requests of its turns as `run --yes` does (`approvals`
/// is set to match).
pub async fn serve(mut opts: ConnectOptions, yes: bool) {
    opts.approvals = yes;
    let server = AmberServer::new(opts, yes);
    let stdio = Stdio::start(
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    );
    loop {
        match server.clone().serve(stdio.transport()).await {
            Ok(running) => {
                if let Err(e) = running.waiting().await {
                    note(&format!("MCP server stopped: {e}"));
                }
                break;
            }
            Err(_) if stdio.input_ended() => break,
            Err(e) => note(&format!(
                "MCP handshake failed: {e}; waiting for another `initialize`"
            )),
        }
    }
    stdio.finish().await;
}

/// Serves MCP over Streamable HTTP at `listen` (see `http`) until a signal. The URL clients
/// use (with the token, for a TCP listener) is printed on stdout once the listener is bound.
pub async fn serve_http(
    mut opts: ConnectOptions,
    yes: bool,
    listen: http::Listen,
    token: String,
) -> Result<(), http::HttpError> {
    opts.approvals = yes;
    let server = AmberServer::new(opts, yes);
    http::serve(server, listen, token, |url| {
        println!("{url}");
        note(&format!("MCP over Streamable HTTP at {url}"));
    })
    .await
}

/// A note on stderr, as the binary that serves this speaks (`amber-cli: …`).
pub(crate) fn note(text: &str) {
    eprintln!("amber-cli: {text}");
}

/// The MCP server: how to reach amberd, whether it approves, and its calls running as tasks.
#[derive(Clone)]
struct AmberServer {
    opts: ConnectOptions,
    yes: bool,
    tasks: rmcp::task_manager::TaskManager,
}

impl AmberServer {
    fn new(opts: ConnectOptions, yes: bool) -> Self {
        Self {
            opts,
            yes,
            tasks: rmcp::task_manager::TaskManager::new(),
        }
    }
}

impl ServerHandler for AmberServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("amber", env!("CARGO_PKG_VERSION")).with_title("amber"),
        )
        .with_instructions(
            "amber is a coding agent. Call amber_run to hand it a self-contained coding task \
                 in a project directory; it returns its final answer and a sessionId. Call \
                 amber_reply with that sessionId to follow up in the same conversation.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::all().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let target = match request.name.as_ref() {
            tools::RUN => Target::New(tools::parse_run(request.arguments)?),
            tools::REPLY => Target::Reply(tools::parse_reply(request.arguments)?),
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool `{other}` (amber offers {} and {})",
                        tools::RUN,
                        tools::REPLY
                    ),
                    None,
                ));
            }
        };
        // A client that takes tasks gets one: a turn may run for a long time.
        if context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks())
        {
            let call = Call {
                opts: self.opts.clone(),
                yes: self.yes,
                progress: Progress::new(context.peer.clone(), None),
                ct: tokio_util::sync::CancellationToken::new(),
            };
            return Ok(tasks::start(
                &self.tasks,
                request.name.to_string(),
                call,
                target,
            ));
        }
        let call = Call {
            opts: self.opts.clone(),
            yes: self.yes,
            progress: Progress::new(context.peer.clone(), context.meta.get_progress_token()),
            ct: context.ct.clone(),
        };
        let result = runner::run(call, target).await;
        if result.is_error == Some(true) {
            let text = result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone())
                .unwrap_or_default();
            note(&format!("{}: {text}", request.name));
        }
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }
}
