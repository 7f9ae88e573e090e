//! Steps of the MCP and plugin suites (`tests/tests/mcp.rs`, `plugins.rs`): the MCP reference
//! server (over stdio, or over streamable HTTP on a free port), polling `mcp/list` and
//! `plugin/list` with a deadline, and finding the daemon's child processes.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::TestDaemon;

/// How long a status poll waits before failing the test.
const POLL_DEADLINE: Duration = Duration::from_secs(20);

/// `mcp-server-everything` (`@modelcontextprotocol/server-everything`, installed by
/// `.ci/run` under tests/mcp-servers).
pub fn everything() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-servers/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run `npm ci --prefix tests/mcp-servers` (.ci/run does)",
        bin.display()
    );
    bin
}

/// The `mcp/list` row of `name`, if there is one.
pub fn mcp_row(daemon: &TestDaemon, name: &str) -> Option<Value> {
    let list = daemon.rpc_ok("mcp/list", json!({}));
    list["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

/// Polls `mcp/list` until `name`'s row satisfies `done`; returns the row.
pub fn wait_mcp(
    daemon: &TestDaemon,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + POLL_DEADLINE;
    loop {
        let row = mcp_row(daemon, name);
        if let Some(row) = row.as_ref().filter(|r| done(r)) {
            return row.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{name} never got {what}: {row:?}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Polls `mcp/list` until `name` has `status`; returns its row.
pub fn wait_mcp_status(daemon: &TestDaemon, name: &str, status: &str) -> Value {
    wait_mcp(daemon, name, status, |r| r["status"] == status)
}

/// `tests/mcp-servers/modern-server.mjs`: an MCP server on the official TypeScript SDK v2,
/// speaking the stateless 2026-07-28 revision (and, unless `MODERN_ONLY`, 2025-11-25).
pub fn modern_server() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp-servers/modern-server.mjs");
    let sdk = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-servers/node_modules/@modelcontextprotocol/server");
    assert!(
        sdk.exists(),
        "{} is missing: run `npm ci --prefix tests/mcp-servers` (.ci/run does)",
        sdk.display()
    );
    script
}

/// The `tool/list` entry named `name`.
pub fn listed_tool(daemon: &TestDaemon, name: &str) -> Option<Value> {
    let tools = daemon.rpc_ok("tool/list", json!({}));
    tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
}

/// Names of the `tool/list` entries whose `source` is `source`.
pub fn tools_from(daemon: &TestDaemon, source: &str) -> Vec<String> {
    let tools = daemon.rpc_ok("tool/list", json!({}));
    tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter(|t| t["source"] == source)
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

/// The `plugin/list` row of `name`.
pub fn plugin_row(daemon: &TestDaemon, name: &str) -> Value {
    let list = daemon.rpc_ok("plugin/list", json!({}));
    list["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no plugin {name}: {list}"))
}

/// Polls `plugin/list` until `name` is in `state`; returns its row.
pub fn wait_plugin_state(daemon: &TestDaemon, name: &str, state: &str) -> Value {
    let deadline = Instant::now() + POLL_DEADLINE;
    loop {
        let row = plugin_row(daemon, name);
        if row["state"] == state {
            return row;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never became {state}: {row}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live child processes of `parent` (from /proc) with their command lines.
pub fn children_of(parent: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) S ppid ...`: the fields after the last ')'.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .unwrap_or("")
            .split_whitespace();
        let state = fields.next();
        let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) || matches!(state, Some("Z" | "X")) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((pid, cmdline));
    }
    found
}

/// `mcp-server-everything streamableHttp` on a free loopback port, in its own process
/// group; killed (the whole group) on drop.
pub struct HttpEverything {
    pub port: u16,
    child: Child,
}

/// Whether an MCP server answers `initialize` at `port` (and not some other listener).
fn answers_as_itself(port: u16) -> bool {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"readiness-probe","version":"0"}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
        if String::from_utf8_lossy(&answer).contains("serverInfo") {
            return true;
        }
    }
    false
}

impl HttpEverything {
    /// Starts the server and waits until it answers an MCP `initialize` as itself. A free
    /// port found by binding one may be taken again before the server listens (by another
    /// test's listener): then the server exits, and a mere connect would have reached the
    /// other listener. So readiness is the server's own answer, and a server that exited
    /// is started again on another port.
    pub fn start() -> HttpEverything {
        use std::os::unix::process::CommandExt;
        for _attempt in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let child = Command::new(everything())
                .arg("streamableHttp")
                .env("PORT", port.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("start mcp-server-everything");
            let mut server = HttpEverything { port, child };
            let deadline = Instant::now() + POLL_DEADLINE;
            loop {
                if answers_as_itself(port) {
                    return server;
                }
                if server.child.try_wait().ok().flatten().is_some() {
                    // It could not listen there (the port was taken): another port.
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the HTTP MCP server did not start"
                );
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        panic!("the HTTP MCP server could not find a port to listen on");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: killpg only sends a signal, to the group this test started.
            unsafe {
                libc::killpg(pid, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}
