//! The Tool adapter: one tool an external plugin declared, called with `tool/call` on the
//! plugin's connection. A call that outlives the per-call timeout fails the plugin (a hung
//! plugin is not trusted further); a cancelled turn abandons the call without failing it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::process::{CallError, Connection};
use super::protocol::{self, ToolDecl};
use amber_tools::{Tool, ToolContext, ToolOutcome};

/// A tool of an external plugin, bound to the process that declared it.
pub(super) struct PluginTool {
    plugin: String,
    decl: ToolDecl,
    conn: Arc<Connection>,
    timeout: Duration,
}

impl PluginTool {
    pub(super) fn new(
        plugin: &str,
        decl: ToolDecl,
        conn: Arc<Connection>,
        timeout: Duration,
    ) -> Self {
        Self {
            plugin: plugin.to_owned(),
            decl,
            conn,
            timeout,
        }
    }

    fn error(&self, err: CallError) -> ToolOutcome {
        match err {
            // The plugin is fine; the call itself failed.
            CallError::Rpc(err) => ToolOutcome::error(err.to_string()),
            CallError::Dead(reason) => {
                ToolOutcome::error(format!("plugin `{}` is not running: {reason}", self.plugin))
            }
            CallError::TimedOut(_) => {
                ToolOutcome::error(format!("plugin `{}` did not answer in time", self.plugin))
            }
        }
    }
}

impl Tool for PluginTool {
    fn name(&self) -> &str {
        &self.decl.name
    }

    fn description(&self) -> &str {
        &self.decl.description
    }

    fn input_schema(&self) -> Value {
        self.decl.input_schema.clone()
    }

    fn read_only(&self) -> bool {
        self.decl.read_only
    }

    fn destructive(&self) -> bool {
        self.decl.destructive
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            if ctx.cancel.is_cancelled() {
                return ToolOutcome::error("cancelled");
            }
            let params = protocol::call_params(&self.decl.name, args, &ctx.call_id);
            let pending = match self.conn.send(protocol::TOOL_CALL, params) {
                Ok(pending) => pending,
                Err(err) => return self.error(err),
            };
            let id = pending.id;
            tokio::select! {
                answer = pending.rx => match answer {
                    Ok(Ok(result)) => protocol::call_outcome(result),
                    Ok(Err(err)) => self.error(err),
                    Err(_) => self.error(self.conn.gone()),
                },
                () = tokio::time::sleep(self.timeout) => {
                    let reason = format!(
                        "hung: no answer to tool/call within {}",
                        humantime::format_duration(self.timeout)
                    );
                    // Its state is unknown (stuck, or still working on the call): stop it.
                    self.conn.die(reason.clone());
                    ToolOutcome::error(format!(
                        "plugin `{}` {reason}; it was stopped (plugin/enable restarts it)",
                        self.plugin
                    ))
                }
                () = ctx.cancel.cancelled() => {
                    // Only this call is abandoned: the plugin may stop working on it, and
                    // a late answer is ignored.
                    self.conn.forget(id);
                    self.conn.notify(protocol::CANCEL_REQUEST, json!({"id": id}));
                    ToolOutcome::error("cancelled")
                }
            }
        })
    }
}
