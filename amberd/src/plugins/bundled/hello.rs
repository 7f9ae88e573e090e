//! `hello`: the smallest useful plugin, written as the example for plugin authors.
//!
//! A bundled plugin is a name plus an install function that fills [`Contributions`]. This
//! one contributes a tool (`hello`, which the model can call) and a command (`/hello`,
//! which a client can run). It is opt-in (`bundled::OPT_IN`): it starts with `[plugins]
//! enabled = ["hello"]` or `plugin/enable {"name": "hello"}`, and `plugin/disable` takes
//! both away again. An external plugin (a separate process,
//! see docs/plugins.md) contributes tools the same way, over JSON-RPC.

use std::sync::Arc;

use amber_proto::CommandRunResult;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::plugins::{Command, CommandError, Contributions, View};
use amber_tools::{Tool, ToolContext, ToolOutcome};

pub(crate) const HELLO: &str = "hello";

pub(super) fn install(c: &mut Contributions) {
    c.tool(Arc::new(HelloTool)).command(Arc::new(HelloCommand));
}

fn greeting(name: &str) -> String {
    let name = name.trim();
    let name = if name.is_empty() { "world" } else { name };
    format!("Hello, {name}! (from the hello plugin)")
}

struct HelloTool;

impl Tool for HelloTool {
    fn name(&self) -> &str {
        HELLO
    }

    fn description(&self) -> &str {
        "Greets someone by name. An example plugin tool; it changes nothing."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "name": { "type": "string", "description": "Who to greet" } },
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match args.get("name") {
                None | Some(Value::Null) => ToolOutcome::ok(greeting("")),
                Some(Value::String(name)) => ToolOutcome::ok(greeting(name)),
                Some(other) => ToolOutcome::error(format!("`name` must be a string, not {other}")),
            }
        })
    }
}

struct HelloCommand;

impl Command for HelloCommand {
    fn name(&self) -> &str {
        HELLO
    }

    fn description(&self) -> &str {
        "Say hello (example plugin command): /hello [name]"
    }

    fn run<'a>(
        &'a self,
        _view: View<'a>,
        args: &'a str,
    ) -> BoxFuture<'a, Result<CommandRunResult, CommandError>> {
        Box::pin(async move {
            Ok(CommandRunResult {
                output: greeting(args),
                action: None,
            })
        })
    }
}
