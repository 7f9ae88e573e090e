//! The MCP host against the real reference server (`@modelcontextprotocol/server-everything`
//! from npm) over stdio: handshake, listings, tool/resource/prompt adapters, a list change,
//! reconnecting after the child is killed, failures, removal and shutdown.
//! `tests_http.rs` runs the same checks over streamable HTTP.
use std::sync::Arc;
use std::time::Duration;

use amber_proto::{McpStatus, McpTransport, ToolStatus, errors};
use serde_json::{Map, json};

use super::config::McpServerEntry;
use super::tests_support::*;
use super::{McpConfig, McpError, McpHost};
use amber_tools::ToolContext;

const S: &str = "everything";

/// Adds the server and waits until it is ready.
pub(super) async fn ready_host(
    config: &McpConfig,
    transport: McpTransport,
) -> (Arc<McpHost>, Arc<RecordingSink>) {
    let sink = Arc::new(RecordingSink::default());
    let host = McpHost::new(
        config,
        sink.clone(),
        amber_exec::sandbox_env::SandboxEnv::for_tests(),
        None,
    );
    let info = host.add(S, transport).unwrap();
    assert_eq!(info.status, McpStatus::Connecting);
    let ready = sink.wait_status(S, McpStatus::Ready, 15).await;
    assert_eq!(
        sink.read(|r| r.statuses_of(S))[..2],
        [McpStatus::Connecting, McpStatus::Ready]
    );
    let version = ready.protocol_version.clone().unwrap();
    assert!(
        version.starts_with("20"),
        "negotiated protocol version {version}"
    );
    assert!(
        ready.tools >= 10 && ready.resources >= 1 && ready.prompts >= 3,
        "{ready:?}"
    );
    (host, sink)
}

/// Tools, a call of `echo` and `get-sum`, a resource listed and read, prompts listed and
/// one fetched — the same over every transport.
pub(super) async fn exercise(host: &McpHost, sink: &RecordingSink) {
    let names: Vec<String> =
        sink.read(|r| r.tools[S].iter().map(|t| t.name().to_owned()).collect());
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__read_resource",
        "mcp__everything__list_resources",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not in {names:?}"
        );
    }
    let echo = sink.read(|r| r.tool(S, "mcp__everything__echo")).unwrap();
    assert!(echo.read_only(), "echo has readOnlyHint: true");
    assert!(!echo.destructive());
    assert_eq!(
        echo.input_schema()["properties"]["message"]["type"],
        "string"
    );

    let out = call(
        sink,
        S,
        "mcp__everything__echo",
        json!({"message": "hello amber"}),
    )
    .await;
    assert_eq!(
        (out.status, out.output.as_str()),
        (ToolStatus::Ok, "Echo: hello amber")
    );
    let out = call(
        sink,
        S,
        "mcp__everything__get-sum",
        json!({"a": 2, "b": 40}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.output.contains("42"), "{}", out.output);
    // Invalid arguments come back as an error outcome, not a crash.
    let out = call(sink, S, "mcp__everything__get-sum", json!({"a": "x"})).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.output);

    let listing = call(sink, S, "mcp__everything__list_resources", json!({})).await;
    assert_eq!(listing.status, ToolStatus::Ok);
    let uri = listing
        .output
        .lines()
        .find_map(|l| {
            l.split(" — ")
                .next()
                .filter(|u| u.starts_with("demo://resource/static/"))
        })
        .unwrap_or_else(|| panic!("no static resource in {}", listing.output))
        .to_owned();
    assert!(
        listing.output.contains("template demo://resource/dynamic/"),
        "{}",
        listing.output
    );
    let read = call(
        sink,
        S,
        "mcp__everything__read_resource",
        json!({"uri": uri}),
    )
    .await;
    assert_eq!(read.status, ToolStatus::Ok, "{}", read.output);
    assert!(
        read.output.starts_with(&format!("[resource {uri}]\n")),
        "{}",
        read.output
    );
    assert!(read.output.len() > uri.len() + 20, "{}", read.output);

    let prompts: Vec<String> = sink.read(|r| r.prompts[S].iter().map(|p| p.name.clone()).collect());
    assert!(prompts.contains(&"simple-prompt".to_owned()), "{prompts:?}");
    let args_prompt = sink.read(|r| {
        r.prompts[S]
            .iter()
            .find(|p| p.name == "args-prompt")
            .cloned()
    });
    let args_prompt = args_prompt.unwrap();
    assert_eq!(args_prompt.server, S);
    assert!(
        args_prompt
            .arguments
            .iter()
            .any(|a| a.name == "city" && a.required)
    );
    let text = host
        .get_prompt(S, "simple-prompt", Map::new())
        .await
        .unwrap();
    assert_eq!(text, "This is a simple prompt without arguments.");
    let args = Map::from_iter([("city".to_owned(), json!("Paris"))]);
    assert_eq!(
        host.get_prompt(S, "args-prompt", args).await.unwrap(),
        "What's weather in Paris?"
    );
    let err = host.get_prompt(S, "nope", Map::new()).await.unwrap_err();
    assert!(matches!(err, McpError::UnknownPrompt { .. }), "{err}");
    assert_eq!(err.code(), errors::MCP_SERVER_ERROR);
}

/// `gzip-file-as-resource` registers a session resource, and the server sends
/// `notifications/resources/list_changed`: the host re-lists and tells the sink.
pub(super) async fn list_change(sink: &RecordingSink) {
    let before = sink.read(|r| r.last(S).unwrap().resources);
    let published = sink.read(|r| r.publications[S]);
    let out = call(
        sink,
        S,
        "mcp__everything__gzip-file-as-resource",
        json!({"name": "amber.txt.gz", "data": "data:text/plain;base64,aGVsbG8gYW1iZXI=", "outputType": "resource"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(
        out.output.contains("demo://resource/session/amber.txt.gz"),
        "{}",
        out.output
    );
    sink.wait("the resource list change", 10, |r| {
        r.last(S).unwrap().resources == before + 1 && r.publications[S] > published
    })
    .await;
    let listing = call(sink, S, "mcp__everything__list_resources", json!({})).await;
    assert!(
        listing
            .output
            .contains("demo://resource/session/amber.txt.gz"),
        "{}",
        listing.output
    );
}

#[tokio::test]
async fn stdio_lists_calls_reads_prompts_and_follows_list_changes() {
    let (host, sink) = ready_host(&fast_config(), stdio_everything()).await;
    exercise(&host, &sink).await;
    list_change(&sink).await;
    assert_eq!(host.list()[0].status, McpStatus::Ready);
    host.shutdown().await;
}

#[tokio::test]
async fn stdio_reconnects_after_the_child_is_killed() {
    let config = McpConfig {
        reconnect_base_ms: 1500,
        reconnect_max_ms: 1500,
        ..fast_config()
    };
    let (host, sink) = ready_host(&config, stdio_everything()).await;
    let pid = host.server(S).unwrap().pid().unwrap();
    // SAFETY: the host's own child, which the test means to kill.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let failed = sink.wait_status(S, McpStatus::Failed, 10).await;
    let error = failed.error.unwrap();
    assert!(error.contains("exited"), "the error says why: {error}");
    // The tools stay registered while the host waits to reconnect; calls say so.
    let out = call(&sink, S, "mcp__everything__echo", json!({"message": "x"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.output.contains("`everything` is reconnecting"),
        "{}",
        out.output
    );

    let ready = sink.wait_status(S, McpStatus::Ready, 15).await;
    let statuses = sink.read(|r| r.statuses_of(S));
    assert_eq!(
        statuses[statuses.len() - 3..],
        [McpStatus::Failed, McpStatus::Connecting, McpStatus::Ready]
    );
    // The reconnect attempt reports no counts or version from the dead session; ready
    // has them again.
    let connecting = sink.read(|r| {
        r.statuses
            .iter()
            .rev()
            .find(|s| s.name == S && s.status == McpStatus::Connecting)
            .cloned()
            .unwrap()
    });
    assert_eq!(
        (
            connecting.protocol_version,
            connecting.tools,
            connecting.resources,
            connecting.prompts
        ),
        (None, 0, 0, 0)
    );
    assert!(
        ready.protocol_version.is_some() && ready.tools >= 10,
        "{ready:?}"
    );
    let new_pid = host.server(S).unwrap().pid().unwrap();
    assert_ne!(new_pid, pid);
    let out = call(
        &sink,
        S,
        "mcp__everything__echo",
        json!({"message": "again"}),
    )
    .await;
    assert_eq!(out.output, "Echo: again");
    host.shutdown().await;
    wait_gone(new_pid, 5).await;
}

#[tokio::test]
async fn calls_time_out_and_cancel_with_the_turn() {
    let config = McpConfig {
        call_timeout_ms: 300,
        ..fast_config()
    };
    let (host, sink) = ready_host(&config, stdio_everything()).await;
    let long = sink
        .read(|r| r.tool(S, "mcp__everything__trigger-long-running-operation"))
        .unwrap();
    let args = json!({"duration": 5, "steps": 5});
    let started = std::time::Instant::now();
    let ctx = ToolContext::new(std::env::temp_dir(), "c1");
    let out = long.call(args.clone(), &ctx).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.output.contains("did not answer"), "{}", out.output);

    let ctx = ToolContext::new(std::env::temp_dir(), "c2");
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let out = long.call(args, &ctx).await;
    assert!(out.output.contains("cancelled"), "{}", out.output);
    assert!(started.elapsed() < Duration::from_secs(3));
    // The server is still fine after both abandoned calls.
    let out = call(&sink, S, "mcp__everything__echo", json!({"message": "ok"})).await;
    assert_eq!(out.output, "Echo: ok");
    host.shutdown().await;
}

#[tokio::test]
async fn a_missing_command_fails_clearly_and_the_host_keeps_going() {
    let (host, sink) = ready_host(&fast_config(), stdio_everything()).await;
    let ghost = McpTransport::Stdio {
        command: "/nonexistent/amber-no-such-mcp-server".into(),
        args: vec![],
        env: Default::default(),
    };
    host.add("ghost", ghost).unwrap();
    let failed = sink.wait_status("ghost", McpStatus::Failed, 5).await;
    let error = failed.error.unwrap();
    assert!(
        error.contains("cannot start `/nonexistent/amber-no-such-mcp-server`"),
        "{error}"
    );
    // It keeps retrying (with backoff) without disturbing the other server; only the first
    // retry is reported, later ones failing the same way stay quiet.
    sink.wait("a retry", 5, |r| r.statuses_of("ghost").len() >= 4)
        .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        sink.read(|r| r.statuses_of("ghost")),
        [
            McpStatus::Connecting,
            McpStatus::Failed,
            McpStatus::Connecting,
            McpStatus::Failed
        ]
    );
    let out = call(
        &sink,
        S,
        "mcp__everything__echo",
        json!({"message": "fine"}),
    )
    .await;
    assert_eq!(out.output, "Echo: fine");
    let names: Vec<_> = host.list().into_iter().map(|s| s.name).collect();
    assert_eq!(names, [S, "ghost"]);
    let err = host.remove("nope").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "no MCP server named `nope` (known: everything, ghost)"
    );
    host.remove("ghost").await.unwrap();
    assert_eq!(
        sink.read(|r| r.last("ghost").unwrap().status),
        McpStatus::Closed
    );
    host.shutdown().await;
}

#[tokio::test]
async fn remove_closes_the_server_and_empties_its_contributions() {
    let (host, sink) = ready_host(&fast_config(), stdio_everything()).await;
    let pid = host.server(S).unwrap().pid().unwrap();
    let echo = sink.read(|r| r.tool(S, "mcp__everything__echo")).unwrap();
    host.remove(S).await.unwrap();
    let closed = sink.read(|r| r.last(S).cloned()).unwrap();
    assert_eq!(closed.status, McpStatus::Closed);
    assert_eq!(
        (
            closed.protocol_version,
            closed.tools,
            closed.resources,
            closed.prompts
        ),
        (None, 0, 0, 0),
        "a closed server keeps no counts"
    );
    assert!(sink.read(|r| r.tools[S].is_empty() && r.prompts[S].is_empty()));
    assert!(host.list().is_empty());
    wait_gone(pid, 5).await;
    // A tool an old tool list still holds answers clearly.
    let out = echo
        .call(json!({"message": "x"}), &ToolContext::new("/", "c"))
        .await;
    assert!(out.output.contains("was removed"), "{}", out.output);
    let err = host.remove(S).await.unwrap_err();
    assert!(matches!(err, McpError::UnknownServer { .. }));
    assert_eq!(err.code(), errors::INVALID_PARAMS);
    assert_eq!(
        err.to_string(),
        "no MCP server named `everything` (there are none)"
    );
    // The name is free again.
    host.add(S, stdio_everything()).unwrap();
    host.shutdown().await;
}

#[tokio::test]
async fn add_validates_before_connecting() {
    let sink = Arc::new(RecordingSink::default());
    let host = McpHost::new(
        &fast_config(),
        sink.clone(),
        amber_exec::sandbox_env::SandboxEnv::for_tests(),
        None,
    );
    let stdio = || McpTransport::Stdio {
        command: "true".into(),
        args: vec![],
        env: Default::default(),
    };
    for bad in ["", "has space", "dots.no", "ü"] {
        let err = host.add(bad, stdio()).unwrap_err();
        assert!(matches!(err, McpError::InvalidName { .. }), "{bad}: {err}");
        assert_eq!(err.code(), errors::INVALID_PARAMS);
    }
    let http = McpTransport::Http {
        url: "ftp://x".into(),
        headers: Default::default(),
    };
    let err = host.add("x", http).unwrap_err();
    assert!(matches!(err, McpError::InvalidTransport { .. }), "{err}");
    host.add("x", stdio()).unwrap();
    let err = host.add("x", stdio()).unwrap_err();
    assert!(matches!(err, McpError::NameTaken(_)));
    host.shutdown().await;
    let err = host.add("y", stdio()).unwrap_err();
    assert!(matches!(err, McpError::ShuttingDown));
}

#[tokio::test]
async fn configured_servers_start_in_file_order_and_shutdown_kills_them() {
    let config = McpConfig {
        servers: vec![
            McpServerEntry {
                name: "zeta".into(),
                transport: stdio_everything(),
                always_load: false,
                oauth: Default::default(),
                lazy: false,
                sandbox: None,
            },
            McpServerEntry {
                name: "alpha".into(),
                transport: stdio_everything(),
                always_load: false,
                oauth: Default::default(),
                lazy: false,
                sandbox: None,
            },
        ],
        ..fast_config()
    };
    let sink = Arc::new(RecordingSink::default());
    let host = McpHost::new(
        &config,
        sink.clone(),
        amber_exec::sandbox_env::SandboxEnv::for_tests(),
        None,
    );
    let listed: Vec<_> = host
        .list()
        .into_iter()
        .map(|s| (s.name, s.status))
        .collect();
    assert_eq!(
        listed,
        [
            ("zeta".into(), McpStatus::Connecting),
            ("alpha".into(), McpStatus::Connecting)
        ]
    );
    host.add("beta", stdio_everything()).unwrap();
    host.start_configured();
    for name in ["zeta", "alpha", "beta"] {
        sink.wait_status(name, McpStatus::Ready, 15).await;
    }
    let names: Vec<_> = host.list().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["zeta", "alpha", "beta"]);
    let pids: Vec<i32> = ["zeta", "alpha", "beta"]
        .iter()
        .map(|n| host.server(n).unwrap().pid().unwrap())
        .collect();
    host.shutdown().await;
    for pid in pids {
        assert!(!alive(pid), "child {pid} outlived shutdown");
    }
    assert!(host.list().is_empty());
}
