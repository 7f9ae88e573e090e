//! amberd's slash commands in ACP: offered through `available_commands_update`, and a prompt
//! that starts with `/NAME` of one of them runs it through `command/run` (its output as the
//! agent's message; an MCP prompt's command waits for the turn it starts).

use amber_client::Client;
use amber_proto::{
    CommandAction, CommandInfo, CommandListResult, CommandRunParams, Empty, methods,
};
use serde_json::{Value, json};

use super::wire::RpcError;

/// Commands that only make sense in amber's own clients (leaving the client, switching it
/// to another session).
const CLIENT_ONLY: &[&str] = &["detach", "new"];

/// The commands an ACP client is offered.
pub(crate) async fn offered(client: &Client) -> Result<Vec<CommandInfo>, RpcError> {
    let list: CommandListResult = client.request::<methods::CommandList>(&Empty {}).await?;
    Ok(list
        .commands
        .into_iter()
        .filter(|c| !CLIENT_ONLY.contains(&c.name.as_str()))
        .collect())
}

/// The `available_commands_update` for `commands`.
pub(crate) fn update(commands: &[CommandInfo]) -> Value {
    let available: Vec<Value> = commands
        .iter()
        .map(|c| {
            let mut entry = json!({"name": c.name, "description": c.description});
            if let Some(hint) = input_hint(c) {
                entry["input"] = json!({"hint": hint});
            }
            entry
        })
        .collect();
    json!({"sessionUpdate": "available_commands_update", "availableCommands": available})
}

/// What a command takes after its name, from its description: `…: /mode [read|write|yolo]`
/// → `[read|write|yolo]`, an MCP prompt's `… — city=…` → `city=…`.
fn input_hint(command: &CommandInfo) -> Option<String> {
    let usage = format!("/{} ", command.name);
    if let Some(at) = command.description.find(&usage) {
        return Some(command.description[at + usage.len()..].trim().to_owned());
    }
    command
        .description
        .rsplit_once(" — ")
        .map(|(_, args)| args.trim().to_owned())
}

/// `/NAME args` when `text` names one of `commands`.
pub(crate) fn parse<'t>(text: &'t str, commands: &[CommandInfo]) -> Option<(&'t str, &'t str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    commands
        .iter()
        .any(|c| c.name == name)
        .then_some((name, args.trim()))
}

/// What running a command asks of the prompt: its output to show, and the turn it started.
pub(crate) struct Ran {
    pub output: String,
    pub turn_id: Option<String>,
}

pub(crate) async fn run(
    client: &Client,
    session_id: &str,
    name: &str,
    args: &str,
) -> Result<Ran, RpcError> {
    let params = CommandRunParams {
        session_id: Some(session_id.to_owned()),
        name: format!("/{name}"),
        args: match args {
            "" => Value::Null,
            args => Value::String(args.to_owned()),
        },
    };
    let result = client.request::<methods::CommandRun>(&params).await?;
    let turn_id = match result.action {
        Some(CommandAction::Prompted { turn_id }) => Some(turn_id),
        _ => None,
    };
    Ok(Ran {
        output: result.output,
        turn_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(name: &str, description: &str) -> CommandInfo {
        CommandInfo {
            name: name.into(),
            description: description.into(),
        }
    }

    #[test]
    fn a_prompt_names_a_command_only_when_one_has_that_name() {
        let commands = [
            cmd("compact", "Compact"),
            cmd("mode", "Show or set the mode: /mode [read|write|yolo]"),
        ];
        assert_eq!(parse("/mode yolo", &commands), Some(("mode", "yolo")));
        assert_eq!(parse("  /compact", &commands), Some(("compact", "")));
        assert_eq!(parse("/etc/hosts is odd", &commands), None);
        assert_eq!(parse("please /compact", &commands), None);
    }

    #[test]
    fn hints_come_from_the_usage_in_the_description() {
        let mode = cmd("mode", "Show or set the mode: /mode [read|write|yolo]");
        assert_eq!(input_hint(&mode).as_deref(), Some("[read|write|yolo]"));
        let prompt = cmd("mcp__ev__args", "A prompt — city=… [state=…]");
        assert_eq!(input_hint(&prompt).as_deref(), Some("city=… [state=…]"));
        assert_eq!(
            input_hint(&cmd("compact", "Compact the conversation now")),
            None
        );
    }
}
