//! `[mcp]` configuration: the host's timeouts and the servers it connects at start
//! (`[mcp.servers.NAME]`), plus the validation shared with `mcp/add`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use amber_proto::McpTransport;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// `[mcp]`: host-wide settings and the configured servers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// A `tools/call` (or prompt/resource request) that takes longer is cancelled.
    pub call_timeout_ms: u64,
    /// Spawning or reaching a server, `initialize` and the first listings must fit in this.
    pub connect_timeout_ms: u64,
    /// First reconnect delay; doubles per failed attempt (with jitter) up to `reconnect_max_ms`.
    pub reconnect_base_ms: u64,
    pub reconnect_max_ms: u64,
    /// A ready server is pinged this often so a dead HTTP endpoint is noticed without a
    /// call failing first. 0 turns pings off.
    pub ping_interval_ms: u64,
    /// Whether MCP tools are offered lazily: `auto` (the default) defers them once their
    /// schemas would take more than `tool_search_min_tokens` of every request, `on`
    /// always, `off` never. Deferred tools are listed by name and one line in the
    /// `tool_search` tool, which loads their schemas when the model asks.
    pub tool_search: ToolSearchMode,
    /// `auto`'s threshold: estimated prompt tokens of the deferrable tools' schemas.
    pub tool_search_min_tokens: u64,
    /// `[mcp.servers.NAME]`, in file order.
    #[serde(deserialize_with = "servers_in_order")]
    pub servers: Vec<McpServerEntry>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            call_timeout_ms: 120_000,
            connect_timeout_ms: 30_000,
            reconnect_base_ms: 500,
            reconnect_max_ms: 30_000,
            ping_interval_ms: 30_000,
            tool_search: ToolSearchMode::Auto,
            tool_search_min_tokens: 8_000,
            servers: Vec::new(),
        }
    }
}

impl McpConfig {
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms.max(1))
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms.max(1))
    }

    /// (base, max) of the reconnect backoff; max is never below base.
    pub fn reconnect_backoff(&self) -> (Duration, Duration) {
        let base = self.reconnect_base_ms.max(1);
        (
            Duration::from_millis(base),
            Duration::from_millis(self.reconnect_max_ms.max(base)),
        )
    }

    pub fn ping_interval(&self) -> Option<Duration> {
        (self.ping_interval_ms > 0).then(|| Duration::from_millis(self.ping_interval_ms))
    }
}

/// `[mcp] tool_search`: when MCP tools are deferred behind `tool_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSearchMode {
    /// When the deferrable schemas exceed `tool_search_min_tokens`.
    #[default]
    Auto,
    On,
    Off,
}

/// `oauth_client_id`, `oauth_scopes` of an HTTP server: how `amber-cli mcp login` registers
/// with its authorization server (default: amber registers itself, scopes as the server
/// advertises them).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct OAuthSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// One configured server: its name and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpServerEntry {
    pub name: String,
    pub transport: McpTransport,
    /// `always_load = true`: its tools are always offered whole, never deferred.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub always_load: bool,
    #[serde(skip_serializing_if = "is_default_oauth")]
    pub oauth: OAuthSettings,
    /// `lazy = true`: not connected when amberd starts but when a `tool_search` names it
    /// (with `[mcp] tool_search = "off"` it starts with the others).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,

    /// `sandbox = "workspace-write" | "read-only"` (a stdio server only; `network` stays
    /// on unless `network = false`); `None`: unsandboxed, the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<amber_proto::SandboxInfo>,
}

/// The keys a `[mcp.servers.NAME]` table may hold; which ones make sense together is
/// checked by [`RawServer::into_transport`] so the error can say what is wrong.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawServer {
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    url: Option<String>,
    headers: BTreeMap<String, String>,
    sandbox: Option<amber_proto::SandboxMode>,
    network: Option<bool>,
    always_load: bool,
    lazy: bool,
    oauth_client_id: Option<String>,
    oauth_scopes: Vec<String>,
}

impl RawServer {
    /// The server's sandbox: only a stdio server (a child of amberd) has one.
    fn sandbox(&self, name: &str) -> Result<Option<amber_proto::SandboxInfo>, String> {
        if self.url.is_some() && (self.sandbox.is_some() || self.network.is_some()) {
            return Err(format!(
                "[mcp.servers.{name}]: `sandbox` and `network` only apply to `command` servers"
            ));
        }
        amber_exec::sandbox_env::extension_sandbox(self.sandbox, self.network)
            .map_err(|message| format!("[mcp.servers.{name}]: {message}"))
    }

    fn into_transport(self, name: &str) -> Result<McpTransport, String> {
        let transport = match (self.command, self.url) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "[mcp.servers.{name}]: set either `command` (stdio) or `url` (streamable HTTP), not both"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "[mcp.servers.{name}]: needs `command` (a stdio server) or `url` (a streamable HTTP server)"
                ));
            }
            (Some(command), None) => {
                if !self.headers.is_empty() {
                    return Err(format!(
                        "[mcp.servers.{name}]: `headers` only applies to `url` servers"
                    ));
                }
                McpTransport::Stdio {
                    command,
                    args: self.args,
                    env: self.env,
                }
            }
            (None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err(format!(
                        "[mcp.servers.{name}]: `args` and `env` only apply to `command` servers"
                    ));
                }
                McpTransport::Http {
                    url,
                    headers: self.headers,
                }
            }
        };
        validate_transport(&transport)
            .map_err(|message| format!("[mcp.servers.{name}]: {message}"))?;
        Ok(transport)
    }
}

fn is_default_oauth(oauth: &OAuthSettings) -> bool {
    *oauth == OAuthSettings::default()
}

/// Why a server name is refused, if it is: it becomes part of tool names
/// (`mcp__NAME__TOOL`), which only allow `[A-Za-z0-9_-]`.
pub(crate) fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > 40 {
        return Some("must be at most 40 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Some("may only contain letters, digits, `_` and `-`");
    }
    if name.contains("__") {
        // `mcp__a__b__x` would name tool `b__x` of `a` and tool `x` of `a__b` alike.
        return Some("must not contain `__` (it separates the server from the tool in tool names)");
    }
    None
}

/// Checks what can be checked before connecting: a command, an http(s) URL, header
/// names and values HTTP accepts and that the transport does not set itself.
pub(crate) fn validate_transport(transport: &McpTransport) -> Result<(), String> {
    match transport {
        McpTransport::Stdio { command, env, .. } => {
            if command.trim().is_empty() {
                return Err("`command` must not be empty".into());
            }
            if let Some(key) = env.keys().find(|k| k.is_empty() || k.contains('=')) {
                return Err(format!("invalid environment variable name `{key}`"));
            }
        }
        McpTransport::Http { url, headers } => {
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                return Err(format!(
                    "`url` must start with http:// or https:// (got `{url}`)"
                ));
            }
            for (name, value) in headers {
                let header = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("invalid header name `{name}`"))?;
                http::HeaderValue::from_str(value)
                    .map_err(|_| format!("invalid value for header `{name}`"))?;
                if RESERVED_HEADERS.contains(&header.as_str()) {
                    return Err(format!(
                        "header `{name}` is set by the MCP transport itself"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Headers the streamable HTTP transport manages (rmcp rejects them as custom headers).
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Deserializes `[mcp.servers]` keeping the file's order (the toml crate is built with
/// `preserve_order`), so `mcp/list` shows servers as the user wrote them.
fn servers_in_order<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<McpServerEntry>, D::Error> {
    struct Servers;
    impl<'de> Visitor<'de> for Servers {
        type Value = Vec<McpServerEntry>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of MCP servers")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut servers = Vec::new();
            while let Some((name, raw)) = map.next_entry::<String, RawServer>()? {
                if let Some(problem) = name_problem(&name) {
                    return Err(de::Error::custom(format!(
                        "invalid MCP server name `{name}`: {problem}"
                    )));
                }
                let sandbox = raw.sandbox(&name).map_err(de::Error::custom)?;
                let (always_load, lazy) = (raw.always_load, raw.lazy);
                if raw.url.is_none()
                    && (raw.oauth_client_id.is_some() || !raw.oauth_scopes.is_empty())
                {
                    return Err(de::Error::custom(format!(
                        "[mcp.servers.{name}]: `oauth_client_id` and `oauth_scopes` only apply to `url` servers"
                    )));
                }
                let oauth = OAuthSettings {
                    client_id: raw.oauth_client_id.clone(),
                    scopes: raw.oauth_scopes.clone(),
                };
                let transport = raw.into_transport(&name).map_err(de::Error::custom)?;
                servers.push(McpServerEntry {
                    name,
                    transport,
                    always_load,
                    oauth,
                    lazy,
                    sandbox,
                });
            }
            Ok(servers)
        }
    }
    d.deserialize_map(Servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_file_order() {
        let cfg = parse(
            r#"
            call_timeout_ms = 5000
            [servers.zeta]
            command = "zeta-server"
            args = ["--stdio"]
            env = { TOKEN = "x" }
            [servers.alpha]
            url = "https://example.com/mcp"
            headers = { Authorization = "Bearer t" }
            "#,
        )
        .unwrap();
        assert_eq!(cfg.call_timeout_ms, 5000);
        assert_eq!(cfg.connect_timeout_ms, 30_000);
        let names: Vec<_> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha"]);
        assert!(matches!(
            &cfg.servers[0].transport,
            McpTransport::Stdio { command, args, env }
                if command == "zeta-server" && args == &["--stdio"] && env["TOKEN"] == "x"
        ));
        assert!(
            matches!(&cfg.servers[1].transport, McpTransport::Http { headers, .. }
            if headers["Authorization"] == "Bearer t")
        );
        assert_eq!(McpConfig::default().servers, vec![]);
    }

    #[test]
    fn both_or_neither_transport_is_an_error() {
        let err = parse("[servers.x]\ncommand = \"a\"\nurl = \"http://h\"").unwrap_err();
        assert!(err.contains("not both"), "{err}");
        let err = parse("[servers.x]\nargs = [\"a\"]").unwrap_err();
        assert!(err.contains("needs `command`"), "{err}");
        let err = parse("[servers.x]\nurl = \"http://h\"\nargs = [\"a\"]").unwrap_err();
        assert!(err.contains("only apply to `command`"), "{err}");
        let err = parse("[servers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }").unwrap_err();
        assert!(err.contains("only applies to `url`"), "{err}");
        let err = parse("[servers.x]\ncommand = \"a\"\ntypo = 1").unwrap_err();
        assert!(err.contains("typo"), "{err}");
    }

    #[test]
    fn a_stdio_server_may_be_sandboxed_with_the_network_on_unless_said_otherwise() {
        let cfg = parse(
            "[servers.a]\ncommand = \"a\"\nsandbox = \"workspace-write\"\n\
             [servers.b]\ncommand = \"b\"\nsandbox = \"read-only\"\nnetwork = false\n\
             [servers.c]\ncommand = \"c\"\nsandbox = \"off\"\n\
             [servers.d]\ncommand = \"d\"",
        )
        .unwrap();
        let sandboxes: Vec<_> = cfg.servers.iter().map(|s| s.sandbox).collect();
        let info = |mode, network| {
            Some(amber_proto::SandboxInfo::new(
                mode,
                amber_proto::NetworkMode::from_bool(network),
            ))
        };
        assert_eq!(
            sandboxes,
            [
                info(amber_proto::SandboxMode::WorkspaceWrite, true),
                info(amber_proto::SandboxMode::ReadOnly, false),
                None,
                None
            ]
        );
        let err = parse("[servers.x]\nurl = \"http://h\"\nsandbox = \"read-only\"").unwrap_err();
        assert!(err.contains("only apply to `command`"), "{err}");
        let err = parse("[servers.x]\ncommand = \"a\"\nnetwork = false").unwrap_err();
        assert!(err.contains("`network` only applies with"), "{err}");
        let err = parse("[servers.x]\ncommand = \"a\"\nsandbox = \"tight\"").unwrap_err();
        assert!(err.contains("tight"), "{err}");
    }

    #[test]
    fn names_urls_and_headers_are_checked() {
        let err = parse("[servers.\"a.b\"]\ncommand = \"a\"").unwrap_err();
        assert!(err.contains("invalid MCP server name `a.b`"), "{err}");
        let err = parse("[servers.x]\nurl = \"ftp://h\"").unwrap_err();
        assert!(err.contains("http://"), "{err}");
        let err = parse("[servers.x]\nurl = \"http://h\"\nheaders = { Mcp-Session-Id = \"s\" }")
            .unwrap_err();
        assert!(err.contains("set by the MCP transport"), "{err}");
        assert_eq!(name_problem("ok_name-1"), None);
        assert!(name_problem("").is_some());
        assert!(name_problem("sp ace").is_some());
        assert!(name_problem("a__b").is_some());
        assert_eq!(name_problem("a_b"), None);
    }
}
