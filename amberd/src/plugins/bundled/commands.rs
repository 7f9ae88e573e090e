//! The `commands` plugin: the built-in slash commands. They run in the daemon and act on
//! the session the client is attached to; client-side effects (detach, switch session)
//! come back as a [`CommandAction`].

use std::sync::Arc;

use amber_proto::{CommandAction, CommandRunResult, Mode, SessionNewParams};
use futures::future::BoxFuture;

use crate::plugins::{Command, CommandError, Contributions, SessionView, View};

type Handler =
    for<'a> fn(View<'a>, &'a str) -> BoxFuture<'a, Result<CommandRunResult, CommandError>>;

/// A command made of a name, a one-line description and a handler.
struct Builtin {
    name: &'static str,
    description: &'static str,
    handler: Handler,
}

impl Command for Builtin {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn run<'a>(
        &'a self,
        view: View<'a>,
        args: &'a str,
    ) -> BoxFuture<'a, Result<CommandRunResult, CommandError>> {
        (self.handler)(view, args)
    }
}

pub(super) fn install(c: &mut Contributions) {
    let commands: [(&'static str, &'static str, Handler); 11] = [
        (
            "goal",
            "Show, set or clear the session's goal: /goal [TEXT | clear]",
            |v, a| Box::pin(goal(v, a)),
        ),
        ("help", "List the commands", |v, a| Box::pin(help(v, a))),
        (
            "mode",
            "Show or set the mode: /mode [read|write|yolo]",
            |v, a| Box::pin(mode(v, a)),
        ),
        (
            "model",
            "Show or set the model and provider: /model [MODEL] [@PROVIDER]",
            |v, a| Box::pin(model(v, a)),
        ),
        ("compact", "Compact the conversation now", |v, a| {
            Box::pin(compact(v, a))
        }),
        (
            "clear",
            "Forget the conversation (the system prompt stays)",
            |v, a| Box::pin(clear(v, a)),
        ),
        (
            "new",
            "Start a new session in the same directory, mode and model",
            |v, a| Box::pin(new(v, a)),
        ),
        ("sessions", "List the sessions", |v, a| {
            Box::pin(sessions(v, a))
        }),
        (
            "mcp",
            "MCP servers: /mcp [list | add NAME COMMAND [ARGS…] | add NAME URL | remove NAME]",
            |v, a| Box::pin(super::panels::mcp_command(v, a)),
        ),
        (
            "plugins",
            "Plugins: /plugins [list | enable NAME | disable NAME]",
            |v, a| Box::pin(plugins(v, a)),
        ),
        (
            "detach",
            "Leave the session running in the daemon and exit the client",
            |_, _| {
                Box::pin(async {
                    Ok(reply_with(
                        "detached; the session keeps running",
                        CommandAction::Detach,
                    ))
                })
            },
        ),
    ];
    for (name, description, handler) in commands {
        c.command(Arc::new(Builtin {
            name,
            description,
            handler,
        }));
    }
}

pub(super) fn reply(output: impl Into<String>) -> CommandRunResult {
    CommandRunResult {
        output: output.into(),
        action: None,
    }
}

fn reply_with(output: impl Into<String>, action: CommandAction) -> CommandRunResult {
    CommandRunResult {
        output: output.into(),
        action: Some(action),
    }
}

pub(super) fn session<'a>(
    view: View<'a>,
    command: &str,
) -> Result<&'a dyn SessionView, CommandError> {
    view.session
        .ok_or_else(|| CommandError::NeedsSession(command.to_owned()))
}

async fn help(view: View<'_>, _args: &str) -> Result<CommandRunResult, CommandError> {
    let commands = view.host.plugins().registries().commands();
    let width = commands.iter().map(|c| c.name().len()).max().unwrap_or(0) + 1;
    let lines: Vec<String> = commands
        .iter()
        .map(|c| format!("/{:<width$}  {}", c.name(), c.description()))
        .collect();
    Ok(reply(lines.join("\n")))
}

async fn mode(view: View<'_>, args: &str) -> Result<CommandRunResult, CommandError> {
    let shared = session(view, "mode")?;
    if args.is_empty() {
        return Ok(reply(format!("mode: {}", mode_name(shared.mode()))));
    }
    let mode = match args.to_ascii_lowercase().as_str() {
        "read" => Mode::Read,
        "write" => Mode::Write,
        "yolo" => Mode::Yolo,
        other => {
            return Err(CommandError::Usage(format!(
                "unknown mode `{other}`: use read, write or yolo"
            )));
        }
    };
    let info = shared.set_mode(mode);
    Ok(reply(format!("mode: {}", mode_name(info.mode))))
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
        Mode::Yolo => "yolo",
    }
}

async fn model(view: View<'_>, args: &str) -> Result<CommandRunResult, CommandError> {
    let shared = session(view, "model")?;
    let mut model = None;
    let mut provider = None;
    for word in args.split_whitespace() {
        match word.strip_prefix('@') {
            Some(p) => provider = Some(p.to_owned()),
            None if model.is_none() => model = Some(word.to_owned()),
            None => {
                return Err(CommandError::Usage(
                    "usage: /model [MODEL] [@PROVIDER]".to_owned(),
                ));
            }
        }
    }
    if model.is_none() && provider.is_none() {
        let info = shared.info();
        let providers = view.host.provider_names().join(", ");
        return Ok(reply(format!(
            "model: {}\nprovider: {}\nproviders: {providers}",
            info.model,
            info.provider.as_deref().unwrap_or("default")
        )));
    }
    let info = view
        .host
        .set_model(shared, model, provider)
        .map_err(CommandError::Usage)?;
    Ok(reply(format!(
        "model: {} (provider: {})",
        info.model,
        info.provider.as_deref().unwrap_or("default")
    )))
}

/// `/goal`: shows the goal; `/goal TEXT` sets it; `/goal clear` drops it.
async fn goal(view: View<'_>, args: &str) -> Result<CommandRunResult, CommandError> {
    let shared = session(view, "goal")?;
    let args = args.trim();
    if args.is_empty() {
        return Ok(reply(match shared.info().goal {
            Some(goal) => format!(
                "goal ({}, checked {} times): {}{}",
                match goal.state {
                    amber_proto::GoalState::Active => "active",
                    amber_proto::GoalState::Met => "met",
                },
                goal.checks,
                goal.text,
                goal.summary
                    .map(|s| format!("\nsummary: {s}"))
                    .unwrap_or_default()
            ),
            None => "no goal; set one with /goal TEXT".to_owned(),
        }));
    }
    let goal = (args != "clear").then(|| args.to_owned());
    let info = view
        .host
        .set_goal(shared.id(), goal)
        .map_err(CommandError::Usage)?;
    Ok(reply(match info.goal {
        Some(goal) => format!(
            "goal set: {}\nEach turn checks it before it ends, and goes on while it is not met.",
            goal.text
        ),
        None => "goal cleared".to_owned(),
    }))
}

async fn compact(view: View<'_>, _args: &str) -> Result<CommandRunResult, CommandError> {
    let shared = session(view, "compact")?;
    let r = view.host.compact(shared.id()).await?;
    Ok(reply(format!(
        "compacted: ~{} → ~{} tokens",
        r.tokens_before, r.tokens_after
    )))
}

async fn clear(view: View<'_>, _args: &str) -> Result<CommandRunResult, CommandError> {
    let shared = session(view, "clear")?;
    let removed = view.host.clear(shared.id()).await?;
    Ok(reply_with(
        format!("cleared {removed} messages"),
        CommandAction::Cleared,
    ))
}

async fn new(view: View<'_>, _args: &str) -> Result<CommandRunResult, CommandError> {
    let shared = session(view, "new")?;
    let info = shared.info();
    let created = view.host.create_session(SessionNewParams {
        cwd: info.cwd,
        mode: Some(info.mode),
        model: Some(info.model),
        title: None,
        system_prompt: None,
        provider: info.provider,
        // A new session like this one: with its agent too.
        agent: info.agent,
        // Its sandbox too. In read mode the one in force is read-only whatever was asked,
        // and the new session is in read mode as well: its mode then follows the config,
        // not to stay read-only once it leaves read mode.
        sandbox: info.sandbox.map(|s| amber_proto::SandboxRequest {
            mode: (info.mode != Mode::Read).then_some(s.mode),
            network: Some(s.network_mode),
            ..Default::default()
        }),
        // `/new` starts beside this one: in its cwd, without a worktree of its own.
        worktree: None,
        // A session's own MCP servers came from its client for it alone.
        mcp_servers: Vec::new(),
        // A fresh session gets fresh budgets of the same size.
        max_budget_usd: info.max_budget_usd,
        max_tokens_total: info.max_tokens_total,
        // Names are unique: this one stays with the session that has it.
        name: None,
        // Beside this one: where its tools run too.
        environment: info.environment.map(|e| e.spec),
        ..Default::default()
    })?;
    Ok(reply_with(
        format!("new session {}", created.session_id),
        CommandAction::OpenSession {
            session_id: created.session_id,
        },
    ))
}

async fn sessions(view: View<'_>, _args: &str) -> Result<CommandRunResult, CommandError> {
    let (sessions, more) = view.host.list_sessions(None, Some(50))?;
    if sessions.is_empty() {
        return Ok(reply("no sessions"));
    }
    let mut lines: Vec<String> = sessions
        .iter()
        .map(|s| {
            let state = serde_json::to_value(s.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            // A name leads the title: it is what the user chose to call the session by.
            let title = match s.name.as_deref() {
                Some(name) if s.title.is_empty() => format!("[{name}]"),
                Some(name) => format!("[{name}] {}", s.title),
                None => s.title.clone(),
            };
            format!(
                "{}  {:<16}  {}  {}  {title}",
                s.session_id, state, s.updated_at, s.cwd
            )
        })
        .collect();
    if more.is_some() {
        lines.push("… (more: session/list)".to_owned());
    }
    Ok(reply(lines.join("\n")))
}

async fn plugins(view: View<'_>, args: &str) -> Result<CommandRunResult, CommandError> {
    let runtime = view.host.plugins();
    let mut words = args.split_whitespace();
    let row = match (words.next(), words.next()) {
        (None | Some("list"), None) => None,
        (Some("enable"), Some(name)) => Some(runtime.enable(name).await),
        (Some("disable"), Some(name)) => Some(runtime.disable(name).await),
        _ => {
            return Err(CommandError::Usage(
                "usage: /plugins [list | enable NAME | disable NAME]".to_owned(),
            ));
        }
    };
    let rows = match row {
        Some(result) => vec![result.map_err(|e| CommandError::Usage(e.to_string()))?],
        None => runtime.list(),
    };
    let lines: Vec<String> = rows
        .iter()
        .map(|p| {
            let state = serde_json::to_value(p.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let mut line = format!(
                "{:<12} {:<11} {} contributions",
                p.name,
                state,
                p.capabilities.len()
            );
            if let Some(error) = &p.error {
                line.push_str(&format!(" — {error}"));
            }
            line
        })
        .collect();
    Ok(reply(lines.join("\n")))
}
