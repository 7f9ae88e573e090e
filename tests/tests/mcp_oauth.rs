//! End-to-end: OAuth for a remote MCP server, against an MCP server that requires it
//! (tests/mcp-servers/oauth-server.mjs: the protected resource on the official TypeScript
//! SDK v2's auth helpers, beside a small authorization server with dynamic client
//! registration, PKCE and refresh tokens). Without tokens the server is `failed` and names
//! the command; `amber-cli mcp login` prints the authorization URL, the test's curl plays
//! the person's browser, amberd takes the redirect and the server gets ready; the model calls
//! its tool; an expired token is refreshed; the tokens live in a 0600 file and nowhere in the
//! session; `mcp logout` forgets them.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::mcp_plugins::{wait_mcp, wait_mcp_status};
use amber_tests::steps::{Events, connect, done, new_session, prompt_turn, spawn_config};
use amber_tests::tool_calls::{call, calls, result_of};
use serde_json::Value;

/// The OAuth-protected server: its MCP URL and the token events it printed.
struct OAuthServer {
    child: Child,
    url: String,
    events: Arc<Mutex<Vec<Value>>>,
}

impl OAuthServer {
    fn start(access_ttl_secs: u64) -> OAuthServer {
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-servers/oauth-server.mjs");
        let mut child = Command::new("node")
            .arg(script)
            .env("ACCESS_TTL", access_ttl_secs.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = lines.next().unwrap().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(event) = serde_json::from_str(&line) {
                    sink.lock().unwrap().push(event);
                }
            }
        });
        OAuthServer { child, url, events }
    }

    fn grants(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e["grant"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn tokens(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .flat_map(|e| [e["accessToken"].clone(), e["refreshToken"].clone()])
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_requiring_oauth_is_signed_in_to_refreshed_and_signed_out() {
    let server = OAuthServer::start(3);
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp]\nreconnect_base_ms = 100\nreconnect_max_ms = 400\n\n\
         [mcp.servers.remote]\nurl = {:?}\n",
        server.url
    );
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w1",
            "mcp__remote__whoami",
            &serde_json::json!({}),
        )]),
        MockTurn::text("first"),
        done(),
        calls(vec![call(
            "w2",
            "mcp__remote__whoami",
            &serde_json::json!({}),
        )]),
        MockTurn::text("second"),
        done(),
        calls(vec![call(
            "w3",
            "mcp__remote__whoami",
            &serde_json::json!({}),
        )]),
        MockTurn::text("third"),
        done(),
    ])
    .await;
    let mut daemon = spawn_config(&mock, &config);

    // No tokens yet: the server says what to run.
    let failed = wait_mcp(&daemon, "remote", "a login hint", |r| {
        r["status"] == "failed"
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("amber-cli mcp login remote"))
    });
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("needs authorization"),
        "{failed}"
    );

    // The login: the URL on stdout, the test's curl as the browser.
    let mut login = daemon
        .cli()
        .args(["--no-autostart", "mcp", "login", "remote", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut authorization = String::new();
    BufReader::new(login.stdout.take().unwrap())
        .read_line(&mut authorization)
        .unwrap();
    let authorization = authorization.trim().to_owned();
    assert!(authorization.contains("code_challenge="), "{authorization}");
    assert!(authorization.contains("/authorize?"), "{authorization}");
    let browser = Command::new("curl")
        .args(["-s", "-L", "--max-redirs", "3", "--max-time", "20"])
        .arg(&authorization)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&browser.stdout);
    assert!(
        page.contains("signed in"),
        "the redirect reached amberd: {page}"
    );
    let status = login.wait().unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(&mut login.stderr.take().unwrap(), &mut said).unwrap();
    assert!(status.success(), "mcp login: {said}");
    assert!(said.contains("`remote` is ready"), "{said}");
    let ready = wait_mcp_status(&daemon, "remote", "ready");
    assert_eq!(ready["tools"], 1, "{ready}");
    assert_eq!(server.grants(), ["authorization_code"]);

    // The tokens are kept in a private file of the data dir.
    let stored = daemon.dir.path().join("data/mcp-auth/remote.json");
    let mode = std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(stored.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);

    // The model calls the server's tool with them.
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "who am I").await;
    let (status, output) = result_of(&turn, "w1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("signed in as client-"), "{output}");

    // Past the access token's life, the next call refreshes it first.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    let (status, output) = result_of(&turn, "w2");
    assert_eq!(status, "ok", "{output}");
    assert!(
        server.grants().iter().any(|g| g == "refresh_token"),
        "{:?}",
        server.grants()
    );

    // No token reached the session's record.
    let journal = std::fs::read_to_string(daemon.session_log(&sid)).unwrap();
    for token in server.tokens() {
        assert!(!journal.contains(&token), "a token in the session log");
    }

    // A restarted amberd goes on with the stored tokens, finding the authorization server
    // as the login did: from the challenge it started from, kept beside them.
    let challenge = daemon.dir.path().join("data/mcp-auth/remote.challenge");
    assert!(challenge.exists(), "the login's challenge is kept");
    daemon.kill(libc::SIGTERM);
    daemon
        .wait_exit(Duration::from_secs(10))
        .expect("amberd stops");
    daemon.restart();
    wait_mcp_status(&daemon, "remote", "ready");
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "after a restart").await;
    let (status, output) = result_of(&turn, "w3");
    assert_eq!(status, "ok", "{output}");

    // Signing out forgets them.
    let out = daemon
        .cli()
        .args(["--no-autostart", "mcp", "logout", "remote"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("signed out"));
    assert!(!stored.exists());
    assert!(!challenge.exists());
    // And a login for a stdio server, or a server nobody configured, is refused.
    let out = daemon
        .cli()
        .args(["--no-autostart", "mcp", "login", "nobody", "--no-browser"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no MCP server named `nobody`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
