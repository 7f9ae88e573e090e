//! Test helpers for the MCP host: where the reference server is, a sink that records
//! what the host reports and can wait for it, and a streamable HTTP reference server on
//! a free loopback port that can be killed and restarted.

// Tests start real servers and git of their own.
#![allow(clippy::disallowed_methods)]
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use amber_proto::{McpServerInfo, McpStatus, McpTransport};
use serde_json::Value;

use super::{McpConfig, McpPrompt, McpSink};
use amber_tools::{Tool, ToolContext, ToolOutcome};

/// `@modelcontextprotocol/server-everything`, installed by `.ci/run` (npm ci).
pub(super) fn everything_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp-servers/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run `npm ci --no-audit --no-fund --prefix tests/mcp-servers` \
         (.ci/run does) to install the MCP reference server the tests use",
        bin.display()
    );
    bin
}

pub(super) fn stdio_everything() -> McpTransport {
    McpTransport::Stdio {
        command: everything_bin().display().to_string(),
        args: vec!["stdio".into()],
        env: Default::default(),
    }
}

/// Short timeouts so failures and reconnects happen within a test's budget.
pub(super) fn fast_config() -> McpConfig {
    McpConfig {
        call_timeout_ms: 10_000,
        connect_timeout_ms: 10_000,
        reconnect_base_ms: 100,
        reconnect_max_ms: 400,
        ping_interval_ms: 0,
        servers: Vec::new(),
        ..McpConfig::default()
    }
}

/// Everything the host told the sink.
#[derive(Default)]
pub(super) struct Recorded {
    pub statuses: Vec<McpServerInfo>,
    pub tools: HashMap<String, Vec<Arc<dyn Tool>>>,
    pub prompts: HashMap<String, Vec<McpPrompt>>,
    /// How many contributions calls each server made.
    pub publications: HashMap<String, usize>,
}

impl Recorded {
    pub(super) fn last(&self, server: &str) -> Option<&McpServerInfo> {
        self.statuses.iter().rev().find(|s| s.name == server)
    }

    pub(super) fn statuses_of(&self, server: &str) -> Vec<McpStatus> {
        self.statuses
            .iter()
            .filter(|s| s.name == server)
            .map(|s| s.status)
            .collect()
    }

    pub(super) fn tool(&self, server: &str, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .get(server)?
            .iter()
            .find(|t| t.name() == name)
            .cloned()
    }
}

#[derive(Default)]
pub(super) struct RecordingSink(Mutex<Recorded>);

impl McpSink for RecordingSink {
    fn status(&self, info: &McpServerInfo) {
        self.0.lock().unwrap().statuses.push(info.clone());
    }

    fn contributions(&self, server: &str, tools: Vec<Arc<dyn Tool>>, prompts: Vec<McpPrompt>) {
        let mut r = self.0.lock().unwrap();
        r.tools.insert(server.to_owned(), tools);
        r.prompts.insert(server.to_owned(), prompts);
        *r.publications.entry(server.to_owned()).or_default() += 1;
    }
}

impl RecordingSink {
    pub(super) fn read<T>(&self, f: impl FnOnce(&Recorded) -> T) -> T {
        f(&self.0.lock().unwrap())
    }

    /// Polls until `done` holds; panics after `secs` with what was recorded.
    pub(super) async fn wait(&self, what: &str, secs: u64, done: impl Fn(&Recorded) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if self.read(&done) {
                return;
            }
            if Instant::now() > deadline {
                let statuses = self.read(|r| r.statuses.clone());
                panic!("timed out waiting for {what}; statuses: {statuses:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the server's latest status to be `status`.
    pub(super) async fn wait_status(
        &self,
        server: &str,
        status: McpStatus,
        secs: u64,
    ) -> McpServerInfo {
        let what = format!("{server} to be {status:?}");
        self.wait(&what, secs, |r| {
            r.last(server).is_some_and(|s| s.status == status)
        })
        .await;
        self.read(|r| r.last(server).cloned().unwrap())
    }
}

/// Calls a recorded tool.
pub(super) async fn call(
    sink: &RecordingSink,
    server: &str,
    tool: &str,
    args: Value,
) -> ToolOutcome {
    let tool = sink
        .read(|r| r.tool(server, tool))
        .unwrap_or_else(|| panic!("no tool {tool}"));
    let ctx = ToolContext::new(std::env::temp_dir(), "call-1");
    tool.call(args, &ctx).await
}

/// Whether a process with this pid still exists.
pub(super) fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Waits until the process is gone (reaped by its parent, the host).
pub(super) async fn wait_gone(pid: i32, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `mcp-server-everything streamableHttp` on a loopback port (PORT env var).
pub(super) struct HttpServer {
    pub port: u16,
    child: Option<tokio::process::Child>,
}

impl HttpServer {
    pub(super) async fn start() -> HttpServer {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let mut server = HttpServer { port, child: None };
        server.restart().await;
        server
    }

    pub(super) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// (Re)starts the server on the same port and waits until it accepts connections.
    pub(super) async fn restart(&mut self) {
        let child = tokio::process::Command::new(everything_bin())
            .arg("streamableHttp")
            .env("PORT", self.port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "HTTP MCP server did not start");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Kills the server (SIGKILL to its group) and waits until it is gone.
    pub(super) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                // SAFETY: only signals the group this test started.
                unsafe {
                    libc::killpg(pid as i32, libc::SIGKILL);
                }
            }
            let _ = child.wait().await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().and_then(|c| c.id()) {
            // SAFETY: only signals the group this test started.
            unsafe {
                libc::killpg(pid as i32, libc::SIGKILL);
            }
        }
    }
}
