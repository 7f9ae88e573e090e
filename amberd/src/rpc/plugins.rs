//! Methods over the plugin registries: `tool/list`, `plugin/*`, `command/*`, `status/get`,
//! `panel/*`, `provider/list` and `session/setModel`.

use std::sync::Arc;

use amber_proto::{self as proto, errors, methods};
use jsonrpsee::types::ErrorObjectOwned;

use super::params::error;
use super::table::{MethodTable, RpcResult};
use crate::daemon::Daemon;
use crate::plugins::{CommandError, PluginError, SessionView, View};
use crate::session::SessionShared;
use crate::session::features::mcp::SessionMcp;

impl From<PluginError> for ErrorObjectOwned {
    fn from(err: PluginError) -> Self {
        error(errors::INVALID_PARAMS, err.to_string())
    }
}

impl From<CommandError> for ErrorObjectOwned {
    fn from(err: CommandError) -> Self {
        let code = match err {
            CommandError::Usage(_) | CommandError::NeedsSession(_) => errors::INVALID_PARAMS,
            CommandError::Failed(_) => errors::INTERNAL_ERROR,
        };
        error(code, err.to_string())
    }
}

fn session(d: &Daemon, id: Option<&str>) -> RpcResult<Option<Arc<SessionShared>>> {
    match id {
        Some(id) => Ok(Some(d.sessions.get(id)?.shared.clone())),
        None => Ok(None),
    }
}

/// What a command, segment or panel sees: the daemon as its host, and the session.
fn view<'a>(d: &'a Daemon, session: Option<&'a Arc<SessionShared>>) -> View<'a> {
    View {
        host: d,
        session: session.map(|s| &**s as &dyn SessionView),
    }
}

/// `args` as the command sees it: a string as is, an array joined with spaces, an object
/// (named prompt arguments) as JSON.
fn command_args(args: &serde_json::Value) -> String {
    match args {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.trim().to_owned(),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

pub(super) fn register(m: &mut MethodTable) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.method::<methods::ToolList>(|p, d, _| {
        // With a session, only the tools its turns are offered (a custom agent's allow-list).
        let session = p
            .session_id
            .as_ref()
            .map(|id| d.sessions.get(id))
            .transpose()?;
        let mut entries = d.sessions.services().registries.tool_entries();
        if let Some(mcp) = session
            .as_ref()
            .and_then(|s| s.shared.feature::<SessionMcp>())
        {
            // The session's own MCP servers' tools, over daemon-wide ones of the same name.
            for (server, tool) in mcp.tools() {
                entries.retain(|e| e.tool.name() != tool.name());
                entries.push(crate::plugins::registry::ToolEntry {
                    tool,
                    source: format!("mcp:{server}"),
                });
            }
        }
        let tools = entries
            .into_iter()
            .filter(|e| {
                session
                    .as_ref()
                    .is_none_or(|s| s.shared.allows_tool(e.tool.name()))
            })
            .map(|e| proto::ToolInfo {
                name: e.tool.name().to_owned(),
                description: e.tool.description().to_owned(),
                source: e.source,
                read_only: e.tool.read_only(),
                input_schema: e.tool.input_schema(),
            })
            .collect();
        Ok(proto::ToolListResult { tools })
    })?;

    m.method::<methods::PluginList>(|proto::Empty {}, d, _| {
        Ok(proto::PluginListResult {
            plugins: d.plugins.list(),
        })
    })?;

    m.async_method::<methods::PluginEnable, _, _>(|p, d, _| async move {
        Ok(d.plugins.enable(&p.name).await?)
    })?;

    m.async_method::<methods::PluginDisable, _, _>(|p, d, _| async move {
        Ok(d.plugins.disable(&p.name).await?)
    })?;

    m.method::<methods::CommandList>(|proto::Empty {}, d, _| {
        let commands = d
            .plugins
            .registries()
            .commands()
            .iter()
            .map(|c| proto::CommandInfo {
                name: c.name().to_owned(),
                description: c.description().to_owned(),
            })
            .collect();
        Ok(proto::CommandListResult { commands })
    })?;

    m.async_method::<methods::CommandRun, _, _>(|p, d, _| async move {
        let name = p.name.trim().trim_start_matches('/');
        let Some(command) = d.plugins.registries().command(name) else {
            return Err(error(
                errors::INVALID_PARAMS,
                format!("invalid params: name: no command `/{name}`; `command/list` lists them"),
            ));
        };
        let shared = session(&d, p.session_id.as_deref())?;
        let args = command_args(&p.args);
        Ok(command.run(view(&d, shared.as_ref()), &args).await?)
    })?;

    m.method::<methods::StatusGet>(|p, d, _| {
        let shared = session(d, Some(&p.session_id))?;
        let view = view(d, shared.as_ref());
        let segments = d
            .plugins
            .registries()
            .status_segments()
            .iter()
            .filter_map(|s| {
                s.render(view).map(|text| proto::StatusSegmentInfo {
                    name: s.name().to_owned(),
                    text,
                })
            })
            .collect();
        let context = view.session.map(|s| proto::ContextUse {
            tokens: view.host.context_tokens(s),
            window: view.host.context_window(s),
        });
        Ok(proto::StatusGetResult { segments, context })
    })?;

    m.method::<methods::PanelList>(|proto::Empty {}, d, _| {
        let panels = d
            .plugins
            .registries()
            .panels()
            .iter()
            .map(|p| proto::PanelInfo {
                name: p.name().to_owned(),
                title: p.title().to_owned(),
            })
            .collect();
        Ok(proto::PanelListResult { panels })
    })?;

    m.method::<methods::PanelGet>(|p, d, _| {
        let shared = session(d, p.session_id.as_deref())?;
        let panel = d
            .plugins
            .registries()
            .panels()
            .into_iter()
            .find(|panel| panel.name() == p.name)
            .ok_or_else(|| {
                error(
                    errors::INVALID_PARAMS,
                    format!("invalid params: name: no panel `{}`", p.name),
                )
            })?;
        let view = view(d, shared.as_ref());
        Ok(proto::PanelGetResult {
            name: panel.name().to_owned(),
            title: panel.title().to_owned(),
            lines: panel.render(view),
        })
    })?;

    m.method::<methods::ProviderList>(|proto::Empty {}, d, _| {
        Ok(proto::ProviderListResult {
            providers: d.sessions.services().llm.infos(),
        })
    })?;

    m.async_method::<methods::ProviderCheck, _, _>(|p, d, _| async move {
        let pool = d.sessions.services().llm.clone();
        let provider = p.provider.as_deref();
        let model = pool.default_model(provider);
        let client = match pool.client(provider) {
            Ok(client) => client,
            // Not configured or unknown: the answer says so; the call itself succeeded.
            Err(message) => {
                return Ok(proto::ProviderCheckResult {
                    base_url: None,
                    model,
                    key_set: false,
                    reachable: false,
                    status: None,
                    key_accepted: None,
                    model_known: None,
                    models: Vec::new(),
                    error: Some(message),
                });
            }
        };
        let found = amber_llm::check_provider(&client, &model).await;
        let settings = client.settings();
        Ok(proto::ProviderCheckResult {
            base_url: settings.base_url.clone(),
            model,
            key_set: settings.api_key.is_some(),
            reachable: found.reachable,
            status: found.status,
            key_accepted: found.key_accepted,
            model_known: found.model_known,
            models: found.models,
            error: found.error,
        })
    })?;

    m.method::<methods::SessionSetModel>(|p, d, _| {
        let shared = d.sessions.get(&p.session_id)?.shared.clone();
        d.set_session_model(&*shared, p.model, p.provider)
            .map_err(|message| {
                error(
                    errors::INVALID_PARAMS,
                    format!("invalid params: provider: {message}"),
                )
            })
    })?;

    Ok(())
}
