//! The MCP host's view of the daemon: server status changes become `mcp_status` events in
//! every loaded session (through the [`Host`]), and a server's tools and prompts are registered under
//! `Owner::Mcp(server)` (prompts as commands), replaced whenever its lists change.

use amber_proto::sync::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use amber_proto::{CommandAction, CommandRunResult, EventKind, McpServerInfo};
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::contrib::{Command, CommandError, Contributions, View};
use super::host::Host;
use super::registry::{Owner, Registries};
use crate::mcp::{McpPrompt, McpSink};
use amber_tools::Tool;

pub(crate) struct McpBridge {
    /// Weak: the host owns the MCP host that owns this bridge.
    host: Weak<dyn Host>,
    registries: Arc<Registries>,
    /// The last status broadcast per server: a repeated one is not sent again.
    last: Mutex<HashMap<String, McpServerInfo>>,
}

impl McpBridge {
    pub(crate) fn new(host: Weak<dyn Host>, registries: Arc<Registries>) -> Self {
        Self {
            host,
            registries,
            last: Mutex::new(HashMap::new()),
        }
    }
}

impl McpSink for McpBridge {
    fn status(&self, info: &McpServerInfo) {
        {
            let mut last = self.last.locked();
            if last.get(&info.name) == Some(info) {
                return;
            }
            last.insert(info.name.clone(), info.clone());
        }
        tracing::info!(server = %info.name, status = ?info.status, error = ?info.error, "MCP server status");
        if let Some(host) = self.host.upgrade() {
            host.publish_all(EventKind::McpStatus(info.clone()));
        }
    }

    fn contributions(&self, server: &str, tools: Vec<Arc<dyn Tool>>, prompts: Vec<McpPrompt>) {
        let owner = Owner::Mcp(server.to_owned());
        if tools.is_empty() && prompts.is_empty() {
            self.registries.unwind(&owner);
            return;
        }
        let mut c = Contributions::default();
        for tool in tools {
            c.tool(tool);
        }
        for prompt in prompts {
            c.command(Arc::new(PromptCommand::new(prompt)));
        }
        self.registries.replace(&owner, &format!("mcp:{server}"), c);
    }
}

/// An MCP prompt as a command: `/mcp__SERVER__PROMPT args` fetches the prompt and sends
/// its text to the session as a prompt.
struct PromptCommand {
    name: String,
    description: String,
    prompt: McpPrompt,
}

impl PromptCommand {
    fn new(prompt: McpPrompt) -> Self {
        let name = crate::mcp::tool_name(&prompt.server, &prompt.name);
        let args: Vec<String> = prompt
            .arguments
            .iter()
            .map(|a| {
                if a.required {
                    format!("{}=…", a.name)
                } else {
                    format!("[{}=…]", a.name)
                }
            })
            .collect();
        let mut description = prompt
            .description
            .clone()
            .unwrap_or_else(|| format!("MCP prompt `{}` of {}", prompt.name, prompt.server));
        if !args.is_empty() {
            description.push_str(&format!(" — {}", args.join(" ")));
        }
        Self {
            name,
            description,
            prompt,
        }
    }

    /// `{"a": 1}` (JSON), `a=1 b="two words"`, or one bare value for a prompt with a
    /// single argument.
    fn arguments(&self, args: &str) -> Result<Map<String, Value>, CommandError> {
        let args = args.trim();
        if args.is_empty() {
            return Ok(Map::new());
        }
        if args.starts_with('{') {
            return serde_json::from_str(args)
                .map_err(|e| CommandError::Usage(format!("arguments are not a JSON object: {e}")));
        }
        let words = shell_words(args);
        if !words.iter().any(|w| w.contains('=')) && self.prompt.arguments.len() == 1 {
            let name = self.prompt.arguments[0].name.clone();
            return Ok(Map::from_iter([(name, Value::String(words.join(" ")))]));
        }
        words
            .into_iter()
            .map(|w| match w.split_once('=') {
                Some((k, v)) => Ok((k.to_owned(), Value::String(v.to_owned()))),
                None => Err(CommandError::Usage(format!(
                    "expected NAME=VALUE, got `{w}`; {}",
                    self.description
                ))),
            })
            .collect()
    }
}

impl Command for PromptCommand {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn run<'a>(
        &'a self,
        view: View<'a>,
        args: &'a str,
    ) -> BoxFuture<'a, Result<CommandRunResult, CommandError>> {
        Box::pin(async move {
            let session = view
                .session
                .ok_or_else(|| CommandError::NeedsSession(self.name.clone()))?;
            let arguments = self.arguments(args)?;
            let text = view
                .host
                .mcp()
                .get_prompt(&self.prompt.server, &self.prompt.name, arguments)
                .await
                .map_err(|e| CommandError::Failed(e.to_string()))?;
            let turn_id = view.host.prompt(session.id(), text.clone())?;
            Ok(CommandRunResult {
                output: text,
                action: Some(CommandAction::Prompted { turn_id }),
            })
        })
    }
}

/// Splits on whitespace, keeping "double" or 'single' quoted parts together.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for ch in text.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(ch);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            (None, c) => current.push(c),
        }
    }
    if started || !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_quotes_together() {
        assert_eq!(
            shell_words(r#"a=1 b="two words" c='x y' d="""#),
            vec!["a=1", "b=two words", "c=x y", "d="]
        );
        assert!(shell_words("   ").is_empty());
    }
}
