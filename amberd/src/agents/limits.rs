//! What an agent keeps limiting once a session runs with it: the tool allow-list and the
//! iteration cap (its prompt, model, provider and mode are already the session's own).
//!
//! **Invariant:** the limits are fixed when the session is created and persisted in its
//! metadata (`amber_store::SessionAgent`), so a restored session behaves as before even if
//! the agent file changed; a stored allow-list that no longer compiles admits no tool.

use amber_store::SessionAgent;

use super::{Agent, ToolFilter};
use amber_tools::ToolRegistry;

/// A session's (or sub-agent's) agent limits.
#[derive(Debug, Clone)]
pub(crate) struct AgentLimits {
    name: String,
    tools: Option<ToolFilter>,
    max_iterations: Option<u32>,
}

impl AgentLimits {
    /// The limits `agent` sets.
    pub(crate) fn of(agent: &Agent) -> AgentLimits {
        let tools = agent.definition.tools.as_deref().map(|patterns| {
            // Checked when the file was parsed.
            ToolFilter::new(patterns).unwrap_or_else(|_| ToolFilter::nothing())
        });
        AgentLimits {
            name: agent.name.clone(),
            tools,
            max_iterations: agent.definition.max_iterations,
        }
    }

    /// The limits as a session's metadata stored them.
    pub(crate) fn from_meta(meta: &SessionAgent) -> AgentLimits {
        let tools = meta.tools.as_deref().map(|patterns| {
            ToolFilter::new(patterns).unwrap_or_else(|err| {
                tracing::error!(
                    target: "amberd::agents",
                    agent = %meta.name,
                    %err,
                    "the session's stored tool allow-list is broken; no tool is allowed"
                );
                ToolFilter::nothing()
            })
        });
        AgentLimits {
            name: meta.name.clone(),
            tools,
            max_iterations: meta.max_iterations,
        }
    }

    pub(crate) fn to_meta(&self) -> SessionAgent {
        SessionAgent {
            name: self.name.clone(),
            tools: self.tools.as_ref().map(|t| t.patterns().to_vec()),
            max_iterations: self.max_iterations,
        }
    }

    /// Whether the allow-list admits `tool` (every tool without one).
    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|filter| filter.allows(tool))
    }

    /// `registry` limited to the allow-list (all of it without one).
    pub(crate) fn restrict(&self, registry: ToolRegistry) -> ToolRegistry {
        match &self.tools {
            Some(filter) => filter.restrict(registry, &self.name),
            None => registry,
        }
    }

    /// The agent's iteration cap, else `default`.
    pub(crate) fn max_iterations(&self, default: u32) -> u32 {
        self.max_iterations.unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(tools: Option<&[&str]>) -> SessionAgent {
        SessionAgent {
            name: "scout".into(),
            tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
            max_iterations: Some(3),
        }
    }

    #[test]
    fn round_trips_through_the_session_meta() {
        let stored = meta(Some(&["read", "mcp__*"]));
        let limits = AgentLimits::from_meta(&stored);
        assert_eq!(limits.to_meta(), stored);
        assert_eq!(limits.max_iterations(20), 3);
        assert!(limits.allows("mcp__x__y") && !limits.allows("bash"));
        assert!(AgentLimits::from_meta(&meta(None)).allows("bash"));
        assert_eq!(
            AgentLimits::from_meta(&meta(None))
                .restrict(ToolRegistry::builtin())
                .len(),
            ToolRegistry::builtin().len()
        );
    }

    #[test]
    fn a_broken_stored_list_admits_nothing() {
        let limits = AgentLimits::from_meta(&meta(Some(&["["])));
        let registry = limits.restrict(ToolRegistry::builtin());
        assert!(registry.is_empty());
        assert!(registry.withheld("read").is_some());
    }

    #[test]
    fn nested_limits_intersect() {
        let outer = AgentLimits::from_meta(&meta(Some(&["read", "search", "bash"])));
        let inner = AgentLimits::from_meta(&meta(Some(&["bash", "write"])));
        let registry = inner.restrict(outer.restrict(ToolRegistry::builtin()));
        assert_eq!(registry.names(), ["bash"]);
        assert!(registry.withheld("write").is_some());
    }
}
