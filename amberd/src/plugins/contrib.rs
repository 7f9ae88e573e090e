//! What a plugin can contribute: tools, providers, commands, status segments and panels,
//! and the ports (traits) commands, segments and panels implement.

use std::sync::Arc;

use amber_llm::ProviderSpec;
use amber_proto::{Capability, CommandRunResult};
use futures::future::BoxFuture;

use super::host::{Host, HostError, SessionView};
use amber_tools::Tool;

/// The five kinds of contribution the ledger records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapabilityKind {
    Tool,
    Provider,
    Command,
    Status,
    Panel,
}

impl CapabilityKind {
    /// The wire name (`plugin/list` capabilities).
    pub fn as_str(self) -> &'static str {
        match self {
            CapabilityKind::Tool => "tool",
            CapabilityKind::Provider => "provider",
            CapabilityKind::Command => "command",
            CapabilityKind::Status => "status",
            CapabilityKind::Panel => "panel",
        }
    }

    pub fn capability(self, name: &str) -> Capability {
        Capability {
            kind: self.as_str().to_owned(),
            name: name.to_owned(),
        }
    }
}

/// What commands, segments and panels may look at.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub host: &'a dyn Host,
    /// The session the client is looking at, if any.
    pub session: Option<&'a dyn SessionView>,
}

/// Why a command could not run; the RPC layer maps these to error codes.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Bad or missing arguments (-32602).
    #[error("{0}")]
    Usage(String),
    /// The command needs a `sessionId`.
    #[error("`/{0}` needs a sessionId")]
    NeedsSession(String),
    /// Anything else the command ran into.
    #[error("{0}")]
    Failed(String),
}

impl From<HostError> for CommandError {
    fn from(err: HostError) -> Self {
        CommandError::Failed(err.to_string())
    }
}

/// A slash command (`/help`, `/mode`, an MCP prompt, …). Runs in the daemon.
pub trait Command: Send + Sync {
    /// Without the leading `/`.
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// `args` is the text after the name (trimmed; empty when none was given).
    fn run<'a>(
        &'a self,
        view: View<'a>,
        args: &'a str,
    ) -> BoxFuture<'a, Result<CommandRunResult, CommandError>>;
}

/// One segment of a client's status line (model, mode, context use, …).
pub trait StatusSegment: Send + Sync {
    fn name(&self) -> &str;
    /// The segment's text for this session, or `None` to leave it out.
    fn render(&self, view: View<'_>) -> Option<String>;
}

/// A panel clients can toggle (todos, MCP servers, processes).
pub trait Panel: Send + Sync {
    fn name(&self) -> &str;
    fn title(&self) -> &str;
    /// The rows, newest state. A panel about a session shows nothing without one.
    fn render(&self, view: View<'_>) -> Vec<String>;
}

/// Everything one plugin's `install` contributes. The runtime registers it all or nothing.
#[derive(Default)]
pub struct Contributions {
    pub tools: Vec<Arc<dyn Tool>>,
    pub providers: Vec<ProviderSpec>,
    pub commands: Vec<Arc<dyn Command>>,
    pub status: Vec<Arc<dyn StatusSegment>>,
    pub panels: Vec<Arc<dyn Panel>>,
}

impl Contributions {
    pub fn tool(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.push(tool);
        self
    }

    pub fn provider(&mut self, provider: ProviderSpec) -> &mut Self {
        self.providers.push(provider);
        self
    }

    pub fn command(&mut self, command: Arc<dyn Command>) -> &mut Self {
        self.commands.push(command);
        self
    }

    pub fn status(&mut self, segment: Arc<dyn StatusSegment>) -> &mut Self {
        self.status.push(segment);
        self
    }

    pub fn panel(&mut self, panel: Arc<dyn Panel>) -> &mut Self {
        self.panels.push(panel);
        self
    }

    /// `(kind, name)` of every contribution, in a stable order.
    pub fn keys(&self) -> Vec<(CapabilityKind, String)> {
        let tools = self
            .tools
            .iter()
            .map(|t| (CapabilityKind::Tool, t.name().to_owned()));
        let providers = self
            .providers
            .iter()
            .map(|p| (CapabilityKind::Provider, p.name.clone()));
        let commands = self
            .commands
            .iter()
            .map(|c| (CapabilityKind::Command, c.name().to_owned()));
        let status = self
            .status
            .iter()
            .map(|s| (CapabilityKind::Status, s.name().to_owned()));
        let panels = self
            .panels
            .iter()
            .map(|p| (CapabilityKind::Panel, p.name().to_owned()));
        tools
            .chain(providers)
            .chain(commands)
            .chain(status)
            .chain(panels)
            .collect()
    }
}
