//! The MCP host against the reference server over streamable HTTP
//! (`mcp-server-everything streamableHttp` on a free loopback port): the same checks as
//! over stdio, a list change, and surviving the server being killed and restarted.
use amber_proto::{McpStatus, McpTransport, ToolStatus};
use serde_json::json;

use super::McpConfig;
use super::tests::{exercise, list_change, ready_host};
use super::tests_support::*;

const S: &str = "everything";

fn http(server: &HttpServer) -> McpTransport {
    McpTransport::Http {
        url: server.url(),
        headers: [("X-Amber-Test".to_owned(), "1".to_owned())].into(),
    }
}

#[tokio::test]
async fn http_lists_calls_reads_prompts_and_follows_list_changes() {
    let server = HttpServer::start().await;
    let (host, sink) = ready_host(&fast_config(), http(&server)).await;
    exercise(&host, &sink).await;
    list_change(&sink).await;
    host.shutdown().await;
}

#[tokio::test]
async fn http_reconnects_after_the_server_is_killed_and_restarted() {
    let mut server = HttpServer::start().await;
    let config = McpConfig {
        ping_interval_ms: 200,
        ..fast_config()
    };
    let (host, sink) = ready_host(&config, http(&server)).await;
    server.kill().await;
    // Pings notice the dead endpoint without any call failing first.
    let failed = sink.wait_status(S, McpStatus::Failed, 10).await;
    assert!(failed.error.is_some());
    let out = call(&sink, S, "mcp__everything__echo", json!({"message": "x"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.output.contains("`everything`"), "{}", out.output);

    server.restart().await;
    sink.wait("ready again", 15, |r| {
        let statuses = r.statuses_of(S);
        statuses.last() == Some(&McpStatus::Ready)
            && statuses.iter().filter(|s| **s == McpStatus::Ready).count() == 2
    })
    .await;
    let out = call(
        &sink,
        S,
        "mcp__everything__get-sum",
        json!({"a": 1, "b": 2}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(out.output.contains('3'), "{}", out.output);
    host.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_url_fails_with_a_clear_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let sink = std::sync::Arc::new(RecordingSink::default());
    let host = super::McpHost::new(
        &fast_config(),
        sink.clone(),
        amber_exec::sandbox_env::SandboxEnv::for_tests(),
        None,
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    host.add(
        "down",
        McpTransport::Http {
            url,
            headers: Default::default(),
        },
    )
    .unwrap();
    let failed = sink.wait_status("down", McpStatus::Failed, 10).await;
    let error = failed.error.unwrap();
    assert_eq!(
        error,
        format!("initialize failed: connection refused (http://127.0.0.1:{port}/mcp)")
    );
    host.shutdown().await;
}
