//! `[agents.acp.NAME]` of config.toml: an external agent that speaks the Agent Client
//! Protocol on stdio, run as a sub-agent by `task {agent: "NAME"}`. Only the user's own
//! config.toml declares one (never a workspace file): its command runs with the user's
//! rights unless its table names a sandbox.

use std::collections::BTreeMap;

use amber_proto::{SandboxInfo, SandboxMode};
use serde::Deserialize;

/// Longest agent name (it is part of tool names in events: `acp__NAME__KIND`).
const MAX_NAME_CHARS: usize = 40;

/// One external ACP agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcpAgentConfig {
    /// The program (looked up on `PATH`) and its arguments.
    pub command: String,
    pub args: Vec<String>,
    /// Added to the tool environment (provider keys removed); `"${NAME}"` passes amberd's
    /// own variable, as for MCP servers.
    pub env: BTreeMap<String, String>,
    /// What `agent/list` says it is for.
    pub description: Option<String>,
    /// `"workspace-write"` or `"read-only"`: the agent process runs in the OS sandbox with
    /// the session's workspace as its own; unset or `"off"`: unsandboxed, with the user's
    /// rights (its permission requests then need a person).
    pub sandbox: Option<SandboxMode>,
    /// With `sandbox`: whether it may use the network (default: yes; an agent calls its
    /// model over it).
    pub network: Option<bool>,
    /// The agent reports what it spends (ACP `usage_update` with a cost): then it may run
    /// under a dollar cap, and the cap stops it once its reported cost reaches it.
    pub reports_cost: bool,
}

impl AcpAgentConfig {
    /// The sandbox its process starts in; `None`: unsandboxed.
    pub(crate) fn sandbox(&self) -> Option<SandboxInfo> {
        // `check` refused the combinations `extension_sandbox` rejects.
        amber_exec::sandbox_env::extension_sandbox(self.sandbox, self.network)
            .ok()
            .flatten()
    }

    fn check(&self, name: &str) -> Result<(), String> {
        if self.command.trim().is_empty() {
            return Err(format!("[agents.acp.{name}]: `command` is required"));
        }
        amber_exec::sandbox_env::extension_sandbox(self.sandbox, self.network)
            .map_err(|message| format!("[agents.acp.{name}]: {message}"))?;
        Ok(())
    }
}

/// Every `[agents.acp.NAME]`: a name an agent file could have, and a command each.
pub(crate) fn check_all(agents: &BTreeMap<String, AcpAgentConfig>) -> Result<(), String> {
    for (name, agent) in agents {
        let valid = name.chars().count() <= MAX_NAME_CHARS
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(format!(
                "[agents.acp.{name}]: an ACP agent's name is letters, digits, `-` and `_`, \
                 starting with a letter or digit, at most {MAX_NAME_CHARS} characters"
            ));
        }
        if matches!(name.as_str(), "plan" | "review") {
            return Err(format!(
                "[agents.acp.{name}]: `{name}` is a bundled agent's name; pick another"
            ));
        }
        agent.check(name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BTreeMap<String, AcpAgentConfig>, String> {
        let agents: BTreeMap<String, AcpAgentConfig> =
            toml::from_str(text).map_err(|e| e.to_string())?;
        check_all(&agents)?;
        Ok(agents)
    }

    #[test]
    fn an_agent_table_reads_its_command_and_sandbox() {
        let agents = parse(
            "[claude]\ncommand = \"claude-code-acp\"\nargs = [\"--x\"]\n\
             sandbox = \"workspace-write\"\nnetwork = false\nreports_cost = true\n",
        )
        .unwrap();
        let claude = &agents["claude"];
        assert_eq!(claude.command, "claude-code-acp");
        assert_eq!(claude.args, ["--x"]);
        assert!(claude.reports_cost);
        assert_eq!(
            claude.sandbox(),
            Some(SandboxInfo::new(
                SandboxMode::WorkspaceWrite,
                amber_proto::NetworkMode::from_bool(false)
            ))
        );
        let plain = parse("[a]\ncommand = \"a\"\n").unwrap();
        assert_eq!(plain["a"].sandbox(), None);
    }

    #[test]
    fn bad_tables_are_refused_naming_the_key() {
        let cases = [
            ("[a]\nargs = []\n", "`command` is required"),
            ("[\"a b\"]\ncommand = \"x\"\n", "letters, digits"),
            ("[plan]\ncommand = \"x\"\n", "bundled agent's name"),
            (
                "[a]\ncommand = \"x\"\nnetwork = false\n",
                "`network` only applies",
            ),
            ("[a]\ncommand = \"x\"\nsurprise = 1\n", "unknown field"),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
