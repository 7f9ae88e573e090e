//! What a hook is: `[[hooks]]` of `config.toml` and of the workspace's `.amber/hooks.toml`
//! (the same shape), the events it can name, and the checks a hooks list must pass.

use serde::{Deserialize, Serialize};

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool call runs (after validation, before policy and approval); may block it,
    /// ask for approval, pre-approve it or rewrite its arguments.
    PreToolUse,
    /// After a tool call ran (fire-and-forget).
    PostToolUse,
    /// Before a prompt starts its turn; may block it or add context to that turn.
    UserPrompt,
    /// After a turn ended (fire-and-forget).
    TurnCompleted,
    /// When a tool call asks for approval (fire-and-forget).
    ApprovalRequested,
    /// When a session is created (fire-and-forget; not when one is restored).
    SessionStarted,
}

impl HookEvent {
    /// The name in config files, the hook's stdin and `hook_failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::UserPrompt => "user_prompt",
            HookEvent::TurnCompleted => "turn_completed",
            HookEvent::ApprovalRequested => "approval_requested",
            HookEvent::SessionStarted => "session_started",
        }
    }

    /// Whether the event is about one tool call (a `matcher` applies to it).
    pub fn has_tool(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::ApprovalRequested
        )
    }

    /// Whether the session waits for the hook's answer (the others run in the background).
    pub fn decides(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::UserPrompt)
    }
}

/// The default `timeout_ms`: 10 s.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    pub event: HookEvent,
    /// The program and its arguments (no shell unless the hook names one), run in the
    /// session's workspace.
    pub command: Vec<String>,
    /// A glob over the tool name (`"bash"`, `"mcp__*"`): the hook runs only for matching
    /// tools. Only for events about a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Killed (with everything it started) after this long.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// A hook of the user's own config runs as the user, outside the OS sandbox, unless this
    /// is `true`. A workspace's hooks always run in the session's sandbox: a repository's
    /// file cannot say otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// Where the hook was configured. Never read from a file: every hook is a workspace's
    /// (sandboxed) until the daemon marks the config file's as the user's.
    #[serde(skip)]
    pub origin: HookOrigin,
}

/// Whose configuration a hook comes from, which decides where it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HookOrigin {
    /// A workspace's `.amber/hooks.toml`, trusted: in the session's sandbox.
    #[default]
    Workspace,
    /// The user's `config.toml`: as the user's own command (as git runs the user's hooks).
    UserConfig,
}

impl HookSpec {
    /// Whether it runs outside the OS sandbox: the user's own hook that did not ask for it.
    pub fn runs_as_user(&self) -> bool {
        self.origin == HookOrigin::UserConfig && self.sandbox != Some(true)
    }

    /// Whether the hook runs for `event` on `tool` (`None` for events without a tool).
    pub fn applies(&self, event: HookEvent, tool: Option<&str>) -> bool {
        if self.event != event {
            return false;
        }
        match (&self.matcher, tool) {
            (None, _) => true,
            (Some(pattern), Some(tool)) => globset::Glob::new(pattern)
                .map(|glob| glob.compile_matcher().is_match(tool))
                .unwrap_or(false),
            (Some(_), None) => false,
        }
    }

    /// The checks serde cannot make: a program to run, a matcher that is a glob and only
    /// where there is a tool, a timeout above zero.
    pub fn check(&self) -> Result<(), String> {
        let event = self.event.as_str();
        match self.command.first() {
            None => {
                return Err(format!(
                    "`command` of a `{event}` hook is empty: give the program and its arguments as an array, e.g. [\"/path/to/hook.sh\"]"
                ));
            }
            Some(program) if program.trim().is_empty() => {
                return Err(format!(
                    "`command` of a `{event}` hook starts with an empty program name"
                ));
            }
            Some(_) => {}
        }
        if let Some(pattern) = &self.matcher {
            if !self.event.has_tool() {
                return Err(format!(
                    "`matcher` is for events about a tool call (pre_tool_use, post_tool_use, approval_requested), not `{event}`"
                ));
            }
            globset::Glob::new(pattern).map_err(|err| {
                format!("`matcher` `{pattern}` of a `{event}` hook is not a glob: {err}")
            })?;
        }
        if self.timeout_ms == 0 {
            return Err(format!(
                "`timeout_ms` of a `{event}` hook must be at least 1"
            ));
        }
        Ok(())
    }
}

/// Checks every hook of a list; the error names the entry (`hooks[2]`, counted from 0).
pub fn check_all(hooks: &[HookSpec]) -> Result<(), String> {
    for (index, hook) in hooks.iter().enumerate() {
        hook.check()
            .map_err(|message| format!("hooks[{index}]: {message}"))?;
    }
    Ok(())
}

/// The workspace's `.amber/hooks.toml`: `[[hooks]]` entries, nothing else.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksFile {
    pub hooks: Vec<HookSpec>,
}

impl HooksFile {
    /// Parses and checks a hooks file's text.
    pub fn parse(text: &str) -> Result<HooksFile, String> {
        let file: HooksFile = toml::from_str(text).map_err(|e| e.to_string())?;
        check_all(&file.hooks)?;
        Ok(file)
    }
}
