//! The `panels` plugin: panels clients toggle (todos, MCP servers, processes), and the
//! `/mcp` command that shares the MCP rendering.

use std::sync::Arc;

use amber_proto::{CommandRunResult, McpServerInfo, McpStatus, McpTransport, TodoStatus};

use super::commands::reply;
use crate::plugins::{CommandError, Contributions, Panel, View};

type Render = fn(View<'_>) -> Vec<String>;

struct Static {
    name: &'static str,
    title: &'static str,
    render: Render,
}

impl Panel for Static {
    fn name(&self) -> &str {
        self.name
    }

    fn title(&self) -> &str {
        self.title
    }

    fn render(&self, view: View<'_>) -> Vec<String> {
        (self.render)(view)
    }
}

pub(super) fn install(c: &mut Contributions) {
    let panels: [(&'static str, &'static str, Render); 3] = [
        ("todos", "Todos", todos),
        ("mcp", "MCP servers", |v| {
            v.host.mcp().list().iter().map(mcp_line).collect()
        }),
        ("processes", "Processes", processes),
    ];
    for (name, title, render) in panels {
        c.panel(Arc::new(Static {
            name,
            title,
            render,
        }));
    }
}

fn todos(view: View<'_>) -> Vec<String> {
    let Some(shared) = view.session else {
        return Vec::new();
    };
    shared
        .tools()
        .todos()
        .iter()
        .map(|t| {
            let mark = match t.status {
                TodoStatus::Pending => "[ ]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Done => "[x]",
            };
            format!("{mark} {}", t.text)
        })
        .collect()
}

fn processes(view: View<'_>) -> Vec<String> {
    let Some(shared) = view.session else {
        return Vec::new();
    };
    shared
        .tools()
        .processes
        .list()
        .iter()
        .map(|p| {
            format!(
                "{} pid {} {} {}s  {}",
                p.id,
                p.pid,
                p.state,
                p.uptime.as_secs(),
                p.command
            )
        })
        .collect()
}

fn status_name(status: McpStatus) -> &'static str {
    match status {
        McpStatus::Connecting => "connecting",
        McpStatus::Ready => "ready",
        McpStatus::Failed => "failed",
        McpStatus::Closed => "closed",
    }
}

fn mcp_line(s: &McpServerInfo) -> String {
    let mut line = format!(
        "{} {} — {} tools, {} resources, {} prompts",
        s.name,
        status_name(s.status),
        s.tools,
        s.resources,
        s.prompts
    );
    if let Some(error) = &s.error {
        line.push_str(&format!(" ({error})"));
    }
    line
}

/// `/mcp [list | add NAME COMMAND [ARGS…] | add NAME URL | remove NAME | call [--defaults] NAME TOOL [JSON]]`.
pub(super) async fn mcp_command(
    view: View<'_>,
    args: &str,
) -> Result<CommandRunResult, CommandError> {
    let host = view.host.mcp();
    let words: Vec<&str> = args.split_whitespace().collect();
    let usage = || {
        CommandError::Usage(
            "usage: /mcp [list | add NAME COMMAND [ARGS…] | add NAME URL | remove NAME | call [--defaults] NAME TOOL [JSON]]"
                .to_owned(),
        )
    };
    match words.as_slice() {
        [] | ["list"] => {
            let servers = host.list();
            if servers.is_empty() {
                return Ok(reply("no MCP servers"));
            }
            Ok(reply(
                servers.iter().map(mcp_line).collect::<Vec<_>>().join("\n"),
            ))
        }
        ["add" | "connect", name, target, rest @ ..] => {
            let transport = if target.starts_with("http://") || target.starts_with("https://") {
                if !rest.is_empty() {
                    return Err(usage());
                }
                McpTransport::Http {
                    url: (*target).to_owned(),
                    headers: Default::default(),
                }
            } else {
                McpTransport::Stdio {
                    command: (*target).to_owned(),
                    args: rest.iter().map(|a| (*a).to_owned()).collect(),
                    env: Default::default(),
                }
            };
            let info = host
                .add(name, transport)
                .map_err(|e| CommandError::Failed(e.to_string()))?;
            Ok(reply(mcp_line(&info)))
        }
        ["call", "--defaults", name, tool, ..] | ["call", name, tool, ..] => {
            let form_defaults = words[1] == "--defaults";
            // The JSON as typed: its strings keep their spaces.
            let skip = if form_defaults { 4 } else { 3 };
            let arguments = match after_words(args, skip).trim() {
                "" => serde_json::Map::new(),
                json => match serde_json::from_str::<serde_json::Value>(json) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => {
                        return Err(CommandError::Usage(
                            "the arguments of /mcp call are one JSON object".to_owned(),
                        ));
                    }
                },
            };
            let (text, failed) = host
                .call(name, tool, arguments, form_defaults)
                .await
                .map_err(|e| CommandError::Failed(e.to_string()))?;
            if failed {
                return Err(CommandError::Failed(format!(
                    "{name} {tool} failed: {text}"
                )));
            }
            Ok(reply(text))
        }
        ["remove" | "disconnect", name] => {
            host.remove(name)
                .await
                .map_err(|e| CommandError::Failed(e.to_string()))?;
            Ok(reply(format!("removed MCP server {name}")))
        }
        _ => Err(usage()),
    }
}

/// `text` after its first `n` whitespace-separated words, as it was written.
fn after_words(text: &str, n: usize) -> &str {
    let mut rest = text.trim_start();
    for _ in 0..n {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::after_words;

    #[test]
    fn the_text_after_the_first_words_is_kept_as_written() {
        let cases = [
            (
                "call srv tool {\"q\": \"a  b\\tc\"}",
                3,
                "{\"q\": \"a  b\\tc\"}",
            ),
            ("  call   srv\ttool   {}", 3, "{}"),
            ("call srv tool", 3, ""),
            ("call srv", 3, ""),
        ];
        for (text, n, want) in cases {
            assert_eq!(after_words(text, n), want, "{text:?}");
        }
    }
}
