//! MCP servers scoped to one session (`session/new {mcpServers}`, `mcp/add {sessionId}`):
//! the ACP bridge's way to hand a session the servers its editor configured.
//!
//! A server is written `{name, transport}` as `mcp/add` takes it; ACP's flat shapes are
//! accepted too (`{name, command, args, env: [{name, value}]}` for stdio,
//! `{type: "http", name, url, headers: [{name, value}]}`), so a client may pass an ACP
//! `mcpServers` array through unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::McpTransport;

/// One session-scoped MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMcpServer {
    pub name: String,
    pub transport: McpTransport,
}

impl<'de> Deserialize<'de> for SessionMcpServer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Written::deserialize(deserializer)?;
        raw.into_server().map_err(serde::de::Error::custom)
    }
}

/// Either shape, as written.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Nested {
        name: String,
        transport: McpTransport,
    },
    Flat(Flat),
}

/// ACP's `McpServer`: stdio without a `type`, `http` and `sse` with one.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Flat {
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Pairs,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: Pairs,
}

/// `[{name, value}]` (ACP) or `{name: value}` (amber's own maps).
#[derive(Default, Deserialize)]
#[serde(untagged)]
enum Pairs {
    #[default]
    None,
    List(Vec<Pair>),
    Map(BTreeMap<String, String>),
}

#[derive(Deserialize)]
struct Pair {
    name: String,
    value: String,
}

impl Pairs {
    fn into_map(self) -> BTreeMap<String, String> {
        match self {
            Pairs::None => BTreeMap::new(),
            Pairs::List(pairs) => pairs.into_iter().map(|p| (p.name, p.value)).collect(),
            Pairs::Map(map) => map,
        }
    }
}

impl Written {
    fn into_server(self) -> Result<SessionMcpServer, String> {
        let flat = match self {
            Written::Nested { name, transport } => return Ok(SessionMcpServer { name, transport }),
            Written::Flat(flat) => flat,
        };
        let name = flat.name;
        let transport = match flat.kind.as_deref().unwrap_or("stdio") {
            "stdio" => McpTransport::Stdio {
                command: flat.command.ok_or_else(|| {
                    format!("MCP server `{name}`: a stdio server needs `command`")
                })?,
                args: flat.args,
                env: flat.env.into_map(),
            },
            "http" => McpTransport::Http {
                url: flat
                    .url
                    .ok_or_else(|| format!("MCP server `{name}`: an http server needs `url`"))?,
                headers: flat.headers.into_map(),
            },
            other => {
                return Err(format!(
                    "MCP server `{name}`: transport `{other}` is not supported (stdio or http)"
                ));
            }
        };
        Ok(SessionMcpServer { name, transport })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: serde_json::Value) -> Result<SessionMcpServer, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn the_mcp_add_shape_and_the_acp_shapes_read_alike() {
        let nested = parse(
            json!({"name": "fs", "transport": {"type": "stdio", "command": "srv",
            "args": ["-v"], "env": {"K": "1"}}}),
        )
        .unwrap();
        let acp = parse(json!({"name": "fs", "command": "srv", "args": ["-v"],
            "env": [{"name": "K", "value": "1"}]}))
        .unwrap();
        assert_eq!(nested, acp);
        let http = parse(
            json!({"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer x"}]}),
        )
        .unwrap();
        assert_eq!(
            http.transport,
            McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
            }
        );
        // It is written back in the `mcp/add` shape.
        let back = serde_json::to_value(&http).unwrap();
        assert_eq!(back["transport"]["type"], "http");
    }

    #[test]
    fn sse_and_incomplete_servers_are_refused_by_name() {
        let sse = parse(json!({"type": "sse", "name": "old", "url": "http://x", "headers": []}));
        assert!(sse.unwrap_err().contains("`sse` is not supported"));
        let bare = parse(json!({"name": "nothing"}));
        assert!(bare.unwrap_err().contains("needs `command`"));
    }
}
