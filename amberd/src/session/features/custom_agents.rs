//! Custom agents as a session feature (`agents/` reads and lists the definitions):
//! `session/new {agent}` takes the agent's model, provider, mode and prompt where the
//! caller set none, and its limits — a tool allow-list and an iteration cap — hold for
//! every turn of the session, restored from its metadata.
//!
//! **Invariant:** a workspace agent is used only in a version the user trusted (the trust
//! is remembered in the data dir: there is no session yet to ask in).

use std::path::Path;
use std::sync::Arc;

use amber_proto::{AgentInfo, SessionNewParams};
use amber_store::SessionMeta;
use amber_tools::ToolRegistry;

use crate::agents::{self, Agent, AgentDirs, AgentLimits};
use crate::session::feature::{Attach, Draft, Feature, SessionFeature};
use crate::session::trust::untrusted_agent;
use crate::session::{SessionError, SessionManager};
use crate::trust::TrustStore;

/// The feature: a session's custom agent.
pub(crate) struct CustomAgentsFeature;

impl Feature for CustomAgentsFeature {
    /// The session's agent, found and trusted: its defaults fill what the caller left out
    /// (explicit params first, then the agent's, then the configuration's).
    fn prepare(&self, draft: &mut Draft<'_>) -> Result<(), SessionError> {
        let Some(name) = draft.params.agent.clone() else {
            return Ok(());
        };
        if draft.services.live().config.agents.acp.contains_key(&name) {
            return Err(SessionError::InvalidParams(format!(
                "agent: `{name}` is an external ACP agent ([agents.acp.{name}]): it runs as a \
                 sub-agent through the `task` tool, not as a session's agent"
            )));
        }
        let agent = find_trusted(draft.workspace, &name, &draft.services.trust)?;
        let defaults = &agent.definition;
        let params: &mut SessionNewParams = draft.params;
        if params.provider.is_none()
            && let Some(wanted) = defaults.provider.as_deref()
        {
            // Checked here so that the error names the agent.
            params.provider = draft.services.llm.selection(wanted).map_err(|e| {
                SessionError::InvalidParams(format!(
                    "agent: agent `{}` sets provider: {e}",
                    agent.name
                ))
            })?;
        }
        if params.model.as_deref().is_none_or(|m| m.trim().is_empty())
            && let Some(model) = &defaults.model
        {
            params.model = Some(model.clone());
        }
        params.mode = params.mode.or(defaults.mode);
        if params.system_prompt.is_none() {
            params.system_prompt = Some(defaults.prompt.clone());
        }
        params.agent = Some(agent.name.clone());
        draft.meta.agent = Some(AgentLimits::of(&agent).to_meta());
        if let Some(sandbox) = with_agent_network(params.sandbox.take(), defaults) {
            // Kept with the session as its own request (the sandbox feature read the
            // caller's before the agent was known).
            draft.meta.sandbox = Some(sandbox.clone());
            params.sandbox = Some(sandbox);
        }
        Ok(())
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let limits = AgentLimits::from_meta(session.meta.agent.as_ref()?);
        Some(Arc::new(SessionAgent(limits)))
    }
}

/// The caller's sandbox request with the agent's network: its mode where the caller set none,
/// its allowlist entries added to the caller's. `None` when neither says anything.
fn with_agent_network(
    request: Option<amber_proto::SandboxRequest>,
    agent: &agents::Definition,
) -> Option<amber_proto::SandboxRequest> {
    let agent_says = agent.network.is_some()
        || !agent.allow_domains.is_empty()
        || !agent.deny_domains.is_empty();
    if !agent_says {
        return request;
    }
    let mut request = request.unwrap_or_default();
    request.network = request.network.or(agent.network);
    request
        .allow_domains
        .extend(agent.allow_domains.iter().cloned());
    request
        .deny_domains
        .extend(agent.deny_domains.iter().cloned());
    Some(request)
}

/// The limits of a session's custom agent, fixed at creation.
pub(crate) struct SessionAgent(AgentLimits);

impl SessionFeature for SessionAgent {
    /// After the features that add tools: the agent withholds what its allow-list does not
    /// name, theirs included.
    fn offer_tools(&self, tools: &mut ToolRegistry) {
        *tools = self.0.restrict(std::mem::take(tools));
    }

    fn allows_tool(&self, tool: &str) -> bool {
        self.0.allows(tool)
    }

    fn max_iterations(&self, current: u32) -> u32 {
        self.0.max_iterations(current)
    }

    fn save(&self, meta: &mut SessionMeta) {
        meta.agent = Some(self.0.to_meta());
    }
}

/// `agent/list`: the agents a session in `cwd` can use (validated as `session/new`'s
/// `cwd`); without one, the user's and the bundled agents only.
pub(crate) fn list(
    sessions: &SessionManager,
    cwd: Option<&str>,
) -> Result<Vec<AgentInfo>, SessionError> {
    let workspace = cwd.map(|cwd| sessions.workspace_of(cwd)).transpose()?;
    let services = sessions.services();
    let trust = &services.trust;
    // External ACP agents first: they win a name clash with a file.
    let acp = &services.live().config.agents.acp;
    let mut listed: Vec<AgentInfo> = acp
        .iter()
        .map(|(name, agent)| AgentInfo {
            name: name.clone(),
            description: agent
                .description
                .clone()
                .unwrap_or_else(|| format!("external ACP agent (`{}`)", agent.command)),
            source: amber_proto::AgentSource::Acp,
            untrusted: false,
        })
        .collect();
    listed.extend(
        agents::list(&AgentDirs::new(workspace.as_deref()), &|pinned| {
            trust.is_trusted(&pinned.path, &pinned.hash)
        })
        .into_iter()
        .filter(|info| !acp.contains_key(&info.name)),
    );
    Ok(listed)
}

/// Agent `name`, read from `workspace`'s, the user's or the bundled agents. A workspace
/// agent must be a version the user trusted.
fn find_trusted(workspace: &Path, name: &str, trust: &TrustStore) -> Result<Agent, SessionError> {
    let agent = agents::find(&AgentDirs::new(Some(workspace)), name)
        .map_err(|e| SessionError::InvalidParams(format!("agent: {e}")))?;
    if let Some(pinned) = &agent.pinned
        && !trust.is_trusted(&pinned.path, &pinned.hash)
    {
        return Err(SessionError::InvalidParams(format!(
            "agent: {}",
            untrusted_agent(&agent.name, &pinned.relative)
        )));
    }
    Ok(agent)
}
