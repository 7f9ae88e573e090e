//! The network by allowlist, end to end: real clients (curl, Python) in the real sandbox
//! reach a "remote" host — an HTTP server in a network namespace of the test's own — only
//! through amberd's egress proxy, and only where the allowlist lets them; a process that
//! ignores the proxy reaches nothing; private-address tricks (IP literals in every
//! spelling, names resolving to loopback, redirects) are refused whatever the allowlist
//! says; and every connection is a durable `network_connection` event.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::netns::NetNs;
use amber_tests::steps::{FAST_RETRIES, done, spawn_config};
use serde_json::{Value, json};

/// What the remote server answers `/hello.txt` with.
const SENTINEL: &str = "hello-from-the-remote-host";

/// The remote's port.
const PORT: u16 = 8080;
/// Its port of a protocol whose server speaks first (a greeting, as SMTP or FTP).
const BANNER_PORT: u16 = 8025;

/// A server process in a namespace of the test's: killed on drop.
struct Served(Child);

impl Served {
    /// `command`, once something listens on `addr`:[`PORT`].
    fn start(mut command: Command, addr: &str) -> Served {
        let served = Served(
            command
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a server in the namespace"),
        );
        for _ in 0..100 {
            if std::net::TcpStream::connect((addr, PORT)).is_ok() {
                return served;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server at {addr}:{PORT} did not start");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTTP server on the namespace's address: `/hello.txt`, and `/redirect?to=URL`.
struct Remote {
    _server: Served,
    netns: NetNs,
}

impl Remote {
    fn start() -> Remote {
        Remote::numbered(0)
    }

    /// The `index`th remote of this test (0..4), each a "machine" of its own.
    fn numbered(index: u32) -> Remote {
        let netns = NetNs::numbered(index);
        let script = format!(
            r#"
import http.server, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/redirect":
            to = urllib.parse.parse_qs(url.query)["to"][0]
            self.send_response(302); self.send_header("Location", to)
            self.send_header("Content-Length", "0"); self.end_headers(); return
        body = b"{SENTINEL}\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
import socket, threading
def banner():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("{addr}", {BANNER_PORT})); s.listen()
    while True:
        c, _ = s.accept(); c.sendall(b"220 remote ready\r\n"); c.close()
threading.Thread(target=banner, daemon=True).start()
http.server.ThreadingHTTPServer(("{addr}", {PORT}), H).serve_forever()
"#,
            addr = netns.addr
        );
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &netns.name, "python3", "-c", &script]);
        Remote {
            _server: Served::start(command, &netns.addr),
            netns,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}:{PORT}{path}", self.netns.addr)
    }
}

/// A package registry (npm and PyPI) and a git host (dumb HTTP) on a namespace's address,
/// served by `tests/fixtures/registry.py`.
struct Registry {
    _server: Served,
    netns: NetNs,
    _root: tempfile::TempDir,
}

impl Registry {
    const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/registry.py");

    fn start(index: u32) -> Registry {
        let netns = NetNs::numbered(index);
        let base = format!("http://{}:{PORT}", netns.addr);
        Registry::start_in(netns, &base)
    }

    /// In `netns`, its packages naming their files at `base`.
    fn start_in(netns: NetNs, base: &str) -> Registry {
        let root = tempfile::tempdir().unwrap();
        let built = Command::new("python3")
            .args([Self::SCRIPT, "build"])
            .arg(root.path())
            .arg(base)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let mut command = Command::new("ip");
        command
            .args([
                "netns",
                "exec",
                &netns.name,
                "python3",
                Self::SCRIPT,
                "serve",
            ])
            .arg(root.path())
            .args([netns.addr.as_str(), &PORT.to_string()]);
        Registry {
            _server: Served::start(command, &netns.addr),
            netns,
            _root: root,
        }
    }

    fn base(&self) -> String {
        format!("http://{}:{PORT}", self.netns.addr)
    }
}

/// A listener on the host's loopback that counts who reached it: what the proxy must never
/// connect a sandboxed command to.
struct Sentinel {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Sentinel {
    fn start() -> Sentinel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Sentinel { port, hits }
    }
}

/// A yolo session of the config's sandbox that runs `batch` side by side in one turn.
async fn run_batch(daemon: &TestDaemon, mock: &MockLlm, batch: &[(&str, String)]) -> Vec<Value> {
    amber_tests::steps::run_batch(daemon, mock, None, batch).await
}

/// The `network_connection` events of `events` whose call is `call_id`.
fn connections<'a>(events: &'a [Value], call_id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "network_connection" && e["callId"] == call_id)
        .collect()
}

fn allowlist_config(allow: &[&str], deny: &[&str]) -> String {
    format!(
        "{FAST_RETRIES}[sandbox]\nnetwork = \"allowlist\"\nallow_domains = {}\ndeny_domains = {}\n",
        json!(allow),
        json!(deny)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_host_is_reached_through_the_proxy_and_nothing_else_is() {
    let remote = Remote::start();
    let sentinel = Sentinel::start();
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(
        &mock,
        &allowlist_config(&[&remote.netns.addr, "*.example"], &["blocked.example"]),
    );
    let hello = remote.url("/hello.txt");
    let addr = remote.netns.addr.clone();
    let batch = [
        ("allowed", format!("curl -sS --max-time 20 {hello}")),
        (
            "socks",
            format!("curl -sS --max-time 20 --proxy \"$ALL_PROXY\" {hello}"),
        ),
        (
            "no_proxy",
            format!("curl -sS --noproxy '*' --max-time 5 {hello}; echo \"rc=$?\""),
        ),
        (
            "raw_socket",
            format!(
                "python3 -c \"import socket; socket.create_connection(('{addr}', {PORT}), timeout=3)\" 2>&1 | tail -1; echo done"
            ),
        ),
        (
            "unlisted",
            "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' http://unlisted.test/ ; echo".to_owned(),
        ),
        (
            "denied",
            "curl -sS --max-time 20 https://blocked.example/ 2>&1; echo \"rc=$?\"".to_owned(),
        ),
        (
            // A tunnel to the allowed address whose TLS names another host: domain
            // fronting, refused before a byte of it passes.
            "fronted",
            format!(
                "curl -sS -k --max-time 20 --connect-to front.test:443:{addr}:{PORT} https://front.test/ 2>&1; echo \"rc=$?\""
            ),
        ),
        (
            // A protocol whose server speaks first, through a tunnel: the greeting is not
            // held up waiting for the command's first bytes.
            "greeting",
            format!(
                "python3 -c \"
import os, socket, time
p = socket.create_connection(('127.0.0.1', 3128), timeout=5)
p.sendall(b'CONNECT {addr}:{BANNER_PORT} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
head = b''
while not head.endswith(b'\\r\\n\\r\\n'): head += p.recv(1)
started = time.monotonic()
print(head.split(b' ')[1].decode(), p.recv(100).decode().strip(), round(time.monotonic() - started, 1))
\""
            ),
        ),
        (
            "header",
            "curl -sS --max-time 20 -D - -o /dev/null http://unlisted.test/ | tr -d '\\r' | grep -i '^x-amber-refusal'".to_owned(),
        ),
    ];
    let turn = run_batch(&daemon, &mock, &batch).await;
    let output = |id: &str| amber_tests::tool_calls::result_of(&turn, id).1;

    assert!(
        output("allowed").contains(SENTINEL),
        "{}",
        output("allowed")
    );
    assert!(output("socks").contains(SENTINEL), "{}", output("socks"));
    let direct = output("no_proxy");
    assert!(
        !direct.contains(SENTINEL) && !direct.contains("rc=0"),
        "{direct}"
    );
    let raw = output("raw_socket");
    assert!(
        raw.contains("unreachable") || raw.contains("Errno"),
        "{raw}"
    );
    let unlisted = output("unlisted");
    assert!(unlisted.contains("403"), "{unlisted}");
    // The model reads why, in the call's result.
    assert!(
        unlisted.contains("[egress proxy:") && unlisted.contains("unlisted.test:80 denied"),
        "{unlisted}"
    );
    let denied = output("denied");
    assert!(
        denied.contains("403") && !denied.contains("rc=0"),
        "{denied}"
    );
    let header = output("header");
    assert!(
        header.contains("unlisted.test") && header.contains("allowlist"),
        "{header}"
    );

    let allowed = connections(&turn, "allowed");
    assert_eq!(allowed.len(), 1, "{allowed:?}");
    let allowed = allowed[0];
    assert_eq!(allowed["verdict"], "allowed", "{allowed}");
    assert_eq!(allowed["host"], addr.as_str());
    assert_eq!(allowed["port"], PORT);
    assert_eq!(allowed["protocol"], "http");
    assert_eq!(allowed["rule"], addr.as_str());
    assert!(
        allowed["bytesReceived"].as_u64().unwrap() > SENTINEL.len() as u64,
        "{allowed}"
    );
    assert!(allowed["bytesSent"].as_u64().unwrap() > 0, "{allowed}");
    assert!(allowed["seq"].is_u64(), "durable: {allowed}");
    let socks = connections(&turn, "socks");
    assert_eq!(socks.len(), 1, "{socks:?}");
    assert_eq!(socks[0]["protocol"], "socks5");
    assert_eq!(socks[0]["verdict"], "allowed");
    assert!(connections(&turn, "no_proxy").is_empty());
    let unlisted = connections(&turn, "unlisted");
    assert_eq!(unlisted[0]["verdict"], "denied", "{unlisted:?}");
    assert!(
        unlisted[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not on the network allowlist")
    );
    let denied = connections(&turn, "denied");
    assert_eq!(denied[0]["verdict"], "denied", "{denied:?}");
    assert_eq!(denied[0]["protocol"], "connect");
    assert_eq!(denied[0]["rule"], "blocked.example");
    let greeting = output("greeting");
    assert!(greeting.contains("200 220 remote ready 0."), "{greeting}");
    let fronted = output("fronted");
    assert!(!fronted.contains("rc=0"), "{fronted}");
    let fronted = connections(&turn, "fronted");
    assert_eq!(fronted.len(), 1, "{fronted:?}");
    assert_eq!(fronted[0]["verdict"], "denied", "{fronted:?}");
    assert_eq!(fronted[0]["host"], addr.as_str());
    let reason = fronted[0]["reason"].as_str().unwrap();
    assert!(reason.contains("carries TLS for front.test"), "{reason}");
    assert_eq!(
        fronted[0]["bytesSent"], 0,
        "nothing of the hello passed: {fronted:?}"
    );
    assert_eq!(sentinel.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn private_addresses_are_refused_in_every_spelling_and_through_redirects() {
    let remote = Remote::start();
    let sentinel = Sentinel::start();
    let mock = MockLlm::start(Vec::new()).await;
    // Every name allowed, and the remote's address: what is refused here is refused by
    // address, whatever the allowlist says.
    let daemon = spawn_config(&mock, &allowlist_config(&["*", &remote.netns.addr], &[]));
    let port = sentinel.port;
    let spellings = [
        format!("http://127.0.0.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://169.254.169.254:{port}/"),
        format!("http://0.0.0.0:{port}/"),
    ];
    // Through the proxy even where NO_PROXY would send them straight to the sandbox's own
    // loopback: the proxy is the one under test.
    let through = spellings
        .iter()
        .map(|url| {
            format!(
                "curl -s -o /dev/null -w '%{{http_code}} ' --proxy \"$HTTP_PROXY\" --noproxy '' --max-time 10 '{url}'"
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let tunnels = spellings
        .iter()
        .map(|url| {
            format!(
                "curl -s -o /dev/null -w '%{{http_code}} ' -p --proxy \"$HTTP_PROXY\" --noproxy '' --max-time 10 '{url}'"
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let redirect = remote.url(&format!("/redirect?to=http://127.0.0.1:{port}/"));
    let batch = [
        ("plain", through),
        ("tunnels", tunnels),
        (
            "redirect",
            // Every hop through the proxy (NO_PROXY would send the second straight to the
            // sandbox's own loopback, which holds nothing either).
            format!("curl -fsS -L --noproxy '' --max-time 20 '{redirect}' 2>&1; echo \"rc=$?\""),
        ),
    ];
    let turn = run_batch(&daemon, &mock, &batch).await;
    let output = |id: &str| amber_tests::tool_calls::result_of(&turn, id).1;
    for id in ["plain", "tunnels"] {
        let codes = output(id);
        let codes: Vec<&str> = codes
            .split_whitespace()
            .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        assert_eq!(codes.len(), spellings.len(), "{id}: {}", output(id));
        assert!(
            codes.iter().all(|c| *c == "403" || *c == "000"),
            "{id}: {codes:?}"
        );
        let refused = connections(&turn, id);
        assert!(
            refused.iter().all(|c| c["verdict"] == "denied"),
            "{id}: {refused:?}"
        );
    }
    let redirect = output("redirect");
    assert!(!redirect.contains("rc=0"), "{redirect}");
    let hops = connections(&turn, "redirect");
    // Published as each ends: the refused hop may come first.
    assert_eq!(hops.len(), 2, "{hops:?}");
    let allowed = hops.iter().find(|h| h["verdict"] == "allowed").unwrap();
    assert_eq!(allowed["host"], remote.netns.addr.as_str());
    let refused = hops.iter().find(|h| h["verdict"] == "denied").unwrap();
    assert_eq!(refused["host"], "127.0.0.1");
    assert!(
        refused["reason"].as_str().unwrap().contains("loopback"),
        "{hops:?}"
    );
    assert_eq!(
        sentinel.hits.load(Ordering::SeqCst),
        0,
        "a private address was reached"
    );
}

/// The approval of a connection from session `sid` whose command reaches `host`, answered
/// with `decision`; returns the request.
async fn answer_network_approval(
    approver: &amber_client::Client,
    events: &mut amber_tests::steps::Events,
    sid: &str,
    host: &str,
    decision: amber_proto::Decision,
) -> Value {
    let (_, asked) = amber_tests::tool_calls::next_approval(events).await;
    assert_eq!(asked["tool"], "network", "{asked}");
    assert_eq!(asked["arguments"]["host"], host, "{asked}");
    assert_eq!(asked["arguments"]["port"], PORT, "{asked}");
    assert_eq!(asked["personOnly"], true, "{asked}");
    assert_eq!(asked["scope"], format!("host:{host}"), "{asked}");
    let rid = amber_tests::tool_calls::request_id(&asked);
    assert!(
        amber_tests::tool_calls::respond(approver, sid, &rid, decision)
            .await
            .unwrap()
    );
    asked
}

/// A turn of session `sid` that runs `curl URL` once.
fn curl_turn(mock: &MockLlm, call_id: &str, url: &str) {
    mock.push([
        amber_tests::tool_calls::bash(call_id, &format!("curl -sS --max-time 30 {url}")),
        MockTurn::text("Ran."),
        done(),
    ]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlisted_host_is_asked_and_the_answer_holds_as_chosen() {
    use amber_proto::Decision;
    let session_host = Remote::numbered(0);
    let denied_host = Remote::numbered(1);
    let always_host = Remote::numbered(2);
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn_config(&mock, &allowlist_config(&[], &[]));
    let approver = amber_tests::tool_calls::connect_approver(&daemon).await;
    let sid =
        amber_tests::steps::new_session(&approver, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = amber_tests::steps::Events::live(&approver, &sid).await;

    // Allowed for the session: reached, and the next command is not asked again.
    curl_turn(&mock, "first", &session_host.url("/hello.txt"));
    approver.session_prompt(&sid, "fetch").await.unwrap();
    answer_network_approval(
        &approver,
        &mut events,
        &sid,
        &session_host.netns.addr,
        Decision::AllowSession,
    )
    .await;
    let turn = events.turn().await;
    let (_, output) = amber_tests::tool_calls::result_of(&turn, "first");
    assert!(output.contains(SENTINEL), "{output}");
    assert_eq!(
        connections(&turn, "first")[0]["rule"],
        "approved for the session"
    );
    curl_turn(&mock, "again", &session_host.url("/hello.txt"));
    let turn = amber_tests::steps::prompt_turn(&approver, &mut events, &sid, "again").await;
    assert!(
        amber_tests::steps::of_type(&turn, "approval_requested").is_empty(),
        "asked again: {turn:#?}"
    );
    assert!(
        amber_tests::tool_calls::result_of(&turn, "again")
            .1
            .contains(SENTINEL)
    );

    // Denied: refused with the reason, and the model reads it.
    curl_turn(&mock, "denied", &denied_host.url("/hello.txt"));
    approver.session_prompt(&sid, "fetch").await.unwrap();
    answer_network_approval(
        &approver,
        &mut events,
        &sid,
        &denied_host.netns.addr,
        Decision::Deny,
    )
    .await;
    let turn = events.turn().await;
    let (_, output) = amber_tests::tool_calls::result_of(&turn, "denied");
    assert!(!output.contains(SENTINEL), "{output}");
    assert!(
        output.contains("the user denied the connection"),
        "{output}"
    );
    assert_eq!(connections(&turn, "denied")[0]["verdict"], "denied");

    // Allowed always: kept for every later session, across a restart.
    curl_turn(&mock, "always", &always_host.url("/hello.txt"));
    approver.session_prompt(&sid, "fetch").await.unwrap();
    answer_network_approval(
        &approver,
        &mut events,
        &sid,
        &always_host.netns.addr,
        Decision::AllowAlways,
    )
    .await;
    let turn = events.turn().await;
    assert!(
        amber_tests::tool_calls::result_of(&turn, "always")
            .1
            .contains(SENTINEL)
    );
    drop(events);
    drop(approver);
    daemon.restart();
    let approver = amber_tests::tool_calls::connect_approver(&daemon).await;
    let other =
        amber_tests::steps::new_session(&approver, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = amber_tests::steps::Events::live(&approver, &other).await;
    curl_turn(&mock, "later", &always_host.url("/hello.txt"));
    let turn = amber_tests::steps::prompt_turn(&approver, &mut events, &other, "later").await;
    assert!(
        amber_tests::steps::of_type(&turn, "approval_requested").is_empty(),
        "asked again: {turn:#?}"
    );
    assert!(
        amber_tests::tool_calls::result_of(&turn, "later")
            .1
            .contains(SENTINEL)
    );
    assert_eq!(connections(&turn, "later")[0]["rule"], "approved always");
    // …and only that host: the session-wide answer stayed with its session.
    curl_turn(&mock, "not_kept", &session_host.url("/hello.txt"));
    approver.session_prompt(&other, "fetch").await.unwrap();
    answer_network_approval(
        &approver,
        &mut events,
        &other,
        &session_host.netns.addr,
        Decision::Deny,
    )
    .await;
    events.turn().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_shows_the_audit_trail_and_a_headless_run_says_what_was_refused() {
    let remote = Remote::start();
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &allowlist_config(&[&remote.netns.addr], &[]));
    mock.push([
        amber_tests::tool_calls::calls(vec![
            amber_tests::tool_calls::call(
                "ok",
                "bash",
                &json!({"command": format!("curl -sS --max-time 20 {}", remote.url("/hello.txt"))}),
            ),
            amber_tests::tool_calls::call(
                "refused",
                "bash",
                &json!({"command": "curl -sS --max-time 20 https://exfil.test/ 2>&1; true"}),
            ),
        ]),
        MockTurn::text("Ran."),
        done(),
    ]);
    let mut run = daemon.cli();
    run.args([
        "run",
        "--json",
        "--no-autostart",
        "--yes",
        "--mode",
        "yolo",
        "fetch it",
    ]);
    let (_, stdout, _) = amber_tests::steps::run_bounded(run);
    let result: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "result")
        .unwrap_or_else(|| panic!("no result line: {stdout}"));
    let network = &result["network"];
    assert_eq!(network["allowed"], 1, "{result}");
    assert_eq!(network["denied"], 1, "{result}");
    assert_eq!(network["refused"][0]["host"], "exfil.test", "{result}");
    assert!(network["bytesReceived"].as_u64().unwrap() > 0, "{result}");
    let sid = result["sessionId"].as_str().unwrap();
    let mut show = daemon.cli();
    show.args(["sessions", "show", sid]);
    let (code, text, stderr) = amber_tests::steps::run_bounded(show);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        text.contains("2 connections through the egress proxy: 1 allowed, 1 refused"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "[ok] network: {}:{PORT} allowed ({})",
            remote.netns.addr, remote.netns.addr
        )),
        "{text}"
    );
    assert!(
        text.contains("[refused] network: exfil.test:443 denied"),
        "{text}"
    );
    let json = daemon
        .cli()
        .args(["sessions", "show", "--json", sid])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["network"].as_array().unwrap().len(), 2, "{json}");
}

/// What the registry fixture's packages and repository hold.
const FIXTURE_MARK: &str = "amber-registry-fixture";

/// `git clone`, `pip download` and `npm install` in the sandbox, as a person would run them,
/// against `base`.
fn package_commands(base: &str, addr: &str) -> [(&'static str, String); 3] {
    // Each run in a directory of its own: the commands of two registries run side by side.
    let tmp = format!("$TMPDIR/{}", addr.replace('.', "-"));
    [
        (
            "git",
            format!(
                "git clone -q {base}/git/demo.git \"{tmp}/demo\" 2>&1 && cat \"{tmp}/demo/README\""
            ),
        ),
        (
            "pip",
            format!(
                "python3 -m pip download demo-pkg --no-deps --no-cache-dir \
                 --disable-pip-version-check --index-url {base}/simple --trusted-host {addr} \
                 -d \"{tmp}/dl\" 2>&1 && python3 -c 'import sys, zipfile; \
                 print(zipfile.ZipFile(sys.argv[1]).read(\"demo_pkg/__init__.py\").decode())' \
                 \"{tmp}\"/dl/demo_pkg-1.0-py3-none-any.whl"
            ),
        ),
        (
            "npm",
            format!(
                "mkdir -p \"{tmp}/proj\" && cd \"{tmp}/proj\" && \
                 echo '{{\"name\":\"x\",\"version\":\"1.0.0\"}}' > package.json && \
                 npm install demo-pkg --registry {base}/ --cache \"{tmp}/npm-cache\" \
                 --no-audit --no-fund --no-update-notifier 2>&1 && cat node_modules/demo-pkg/index.js"
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn git_pip_and_npm_fetch_from_an_allowed_registry_and_not_from_another() {
    let allowed = Registry::start(0);
    let other = Registry::start(1);
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &allowlist_config(&[&allowed.netns.addr], &[]));
    let mut batch: Vec<(&str, String)> = package_commands(&allowed.base(), &allowed.netns.addr)
        .into_iter()
        .collect();
    let refused = package_commands(&other.base(), &other.netns.addr);
    batch.extend(refused.iter().map(|(tool, command)| match *tool {
        "git" => ("git_other", command.clone()),
        "pip" => ("pip_other", command.clone()),
        _ => ("npm_other", command.clone()),
    }));
    let turn = run_batch(&daemon, &mock, &batch).await;
    for tool in ["git", "pip", "npm"] {
        let (status, output) = amber_tests::tool_calls::result_of(&turn, tool);
        assert_eq!(status, "ok", "{tool}: {output}");
        assert!(output.contains(FIXTURE_MARK), "{tool}: {output}");
        let seen = connections(&turn, tool);
        assert!(!seen.is_empty(), "{tool}: no connection recorded");
        for connection in &seen {
            assert_eq!(connection["verdict"], "allowed", "{tool}: {connection}");
            assert_eq!(connection["host"], allowed.netns.addr.as_str());
            assert_eq!(connection["rule"], allowed.netns.addr.as_str());
        }
        let other_id = format!("{tool}_other");
        let (_, output) = amber_tests::tool_calls::result_of(&turn, &other_id);
        assert!(!output.contains(FIXTURE_MARK), "{other_id}: {output}");
        assert!(output.contains("[egress proxy:"), "{other_id}: {output}");
        let seen = connections(&turn, &other_id);
        assert!(!seen.is_empty(), "{other_id}: no connection recorded");
        assert!(
            seen.iter().all(|c| c["verdict"] == "denied"),
            "{other_id}: {seen:?}"
        );
    }
}

/// A plain-text page on the host's loopback, for `fetch` (which runs in amberd, not in the
/// sandbox); its port.
fn page_server() -> u16 {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let body = format!("{SENTINEL}\n");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn fetch_follows_the_same_allowlist() {
    let port = page_server();
    let mock = MockLlm::start(Vec::new()).await;
    // Private addresses are fetch's own switch; the allowlist says which hosts go unasked.
    let config = format!(
        "{FAST_RETRIES}[tools]\nfetch = true\nfetch_allow_private = true\n\
         [sandbox]\nnetwork = \"allowlist\"\nallow_domains = [\"127.0.0.1\"]\n\
         deny_domains = [\"localhost\"]\n"
    );
    let daemon = spawn_config(&mock, &config);
    // An approver is there: nothing below may need one.
    let approver = amber_tests::tool_calls::connect_approver(&daemon).await;
    let sid =
        amber_tests::steps::new_session(&approver, &daemon, Some(amber_proto::Mode::Write)).await;
    let mut events = amber_tests::steps::Events::live(&approver, &sid).await;
    mock.push([
        amber_tests::tool_calls::calls(vec![
            amber_tests::tool_calls::call(
                "allowed",
                "fetch",
                &json!({"url": format!("http://127.0.0.1:{port}/page")}),
            ),
            amber_tests::tool_calls::call(
                "denied",
                "fetch",
                &json!({"url": format!("http://localhost:{port}/page")}),
            ),
        ]),
        MockTurn::text("Fetched."),
        done(),
    ]);
    let turn = amber_tests::steps::prompt_turn(&approver, &mut events, &sid, "fetch").await;
    assert!(
        amber_tests::steps::of_type(&turn, "approval_requested").is_empty(),
        "the allowlist decided both: {turn:#?}"
    );
    let (status, output) = amber_tests::tool_calls::result_of(&turn, "allowed");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains(SENTINEL), "{output}");
    let (status, output) = amber_tests::tool_calls::result_of(&turn, "denied");
    assert_eq!(status, "denied", "{output}");
    assert!(
        output.contains("denied by the network allowlist (`localhost`)"),
        "{output}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_agent_brings_its_network_and_entries_to_its_session() {
    let remote = Remote::start();
    let mock = MockLlm::start(Vec::new()).await;
    // The config leaves the network off; the agent asks for the allowlist and names the host.
    let daemon = spawn_config(&mock, FAST_RETRIES);
    amber_tests::tool_calls::put(
        &daemon.dir.path().join("home/.config/amber/agents/deps.md"),
        &format!(
            "---\ndescription: fetches dependencies\nnetwork: allowlist\nallow_domains: [\"{}\"]\n---\nYou fetch.\n",
            remote.netns.addr
        ),
    );
    let client = amber_tests::steps::connect(&daemon).await;
    let params = amber_proto::SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(amber_proto::Mode::Yolo),
        agent: Some("deps".into()),
        ..amber_proto::SessionNewParams::default()
    };
    let info = client.session_new(&params).await.unwrap();
    assert_eq!(
        info.sandbox.map(|s| s.network_mode),
        Some(amber_proto::NetworkMode::Allowlist)
    );
    let mut events = amber_tests::steps::Events::live(&client, &info.session_id).await;
    curl_turn(&mock, "agent", &remote.url("/hello.txt"));
    let turn =
        amber_tests::steps::prompt_turn(&client, &mut events, &info.session_id, "fetch").await;
    let (_, output) = amber_tests::tool_calls::result_of(&turn, "agent");
    assert!(output.contains(SENTINEL), "{output}");
    assert_eq!(
        connections(&turn, "agent")[0]["rule"],
        remote.netns.addr.as_str()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_an_executor_the_proxy_runs_next_to_the_commands_by_the_same_entries() {
    let remote = Remote::start();
    let mock = MockLlm::start(Vec::new()).await;
    let config = format!(
        "{}[environments.here]\nprogram = \"{}\"\nlinger_secs = 30\n",
        allowlist_config(&[&remote.netns.addr], &["blocked.example"]),
        amber_tests::daemon::bin_path("amber-exec").display()
    );
    let daemon = spawn_config(&mock, &config);
    let client = amber_tests::steps::connect(&daemon).await;
    let params = amber_proto::SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some("executor:here".into()),
        ..amber_proto::SessionNewParams::default()
    };
    let sid = client.session_new(&params).await.unwrap().session_id;
    let mut events = amber_tests::steps::Events::live(&client, &sid).await;
    mock.push([
        amber_tests::tool_calls::calls(vec![
            amber_tests::tool_calls::call(
                "allowed",
                "bash",
                &json!({"command": format!("curl -sS --max-time 20 {}", remote.url("/hello.txt"))}),
            ),
            amber_tests::tool_calls::call(
                "unlisted",
                "bash",
                &json!({"command": "curl -sS --max-time 20 https://unlisted.test/ 2>&1; true"}),
            ),
            amber_tests::tool_calls::call(
                "denied",
                "bash",
                &json!({"command": "curl -sS --max-time 20 http://blocked.example/ 2>&1; true"}),
            ),
        ]),
        MockTurn::text("Ran."),
        done(),
    ]);
    let turn = amber_tests::steps::prompt_turn(&client, &mut events, &sid, "fetch").await;
    let output = |id: &str| amber_tests::tool_calls::result_of(&turn, id).1;
    assert!(
        output("allowed").contains(SENTINEL),
        "{}",
        output("allowed")
    );
    let unlisted = output("unlisted");
    assert!(unlisted.contains("cannot ask for it"), "{unlisted}");
    // The executor's audit reaches the session as its own events.
    let allowed = connections(&turn, "allowed");
    assert_eq!(allowed.len(), 1, "{turn:#?}");
    assert_eq!(allowed[0]["verdict"], "allowed");
    assert_eq!(allowed[0]["rule"], remote.netns.addr.as_str());
    assert!(allowed[0]["bytesReceived"].as_u64().unwrap() > 0);
    assert_eq!(connections(&turn, "unlisted")[0]["verdict"], "denied");
    assert_eq!(connections(&turn, "denied")[0]["rule"], "blocked.example");
}

#[tokio::test(flavor = "multi_thread")]
async fn where_no_namespace_can_be_made_an_allowlist_runs_with_the_network_off() {
    let remote = Remote::start();
    let dir = tempfile::tempdir().unwrap();
    // As in an unprivileged container: no CAP_SYS_ADMIN, so no namespace can be made; the
    // executor sandboxes in place.
    let wrapper = amber_tests::daemon::unprivileged_executor(dir.path());
    let mock = MockLlm::start(Vec::new()).await;
    let config = format!(
        "{}[environments.box]\nprogram = \"{}\"\nsandbox_in_place = true\n",
        allowlist_config(&[&remote.netns.addr], &[]),
        wrapper.display()
    );
    let daemon = spawn_config(&mock, &config);
    let client = amber_tests::steps::connect(&daemon).await;
    let params = amber_proto::SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some("executor:box".into()),
        ..amber_proto::SessionNewParams::default()
    };
    let sid = client.session_new(&params).await.unwrap().session_id;
    let mut events = amber_tests::steps::Events::live(&client, &sid).await;
    curl_turn(&mock, "boxed", &remote.url("/hello.txt"));
    let turn = amber_tests::steps::prompt_turn(&client, &mut events, &sid, "fetch").await;
    let (_, output) = amber_tests::tool_calls::result_of(&turn, "boxed");
    assert!(!output.contains(SENTINEL), "reached the host: {output}");
    assert!(output.contains("[sandbox:"), "{output}");
    assert!(connections(&turn, "boxed").is_empty(), "{turn:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn registries_by_name_through_their_presets_and_no_name_rebinds_to_loopback() {
    // For amberd alone, the registries' names are the remote machine's address (and one is
    // loopback's); the sandbox resolves nothing itself.
    let registry_ns = NetNs::numbered(0);
    let addr = registry_ns.addr.clone();
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "127.0.0.1 localhost\n{addr} registry.npmjs.org pypi.org files.pythonhosted.org evil.test\n\
             127.0.0.1 static.crates.io\n"
        ),
    )
    .unwrap();
    let registry = Registry::start_in(registry_ns, "http://registry.npmjs.org:8080");
    let mock = MockLlm::start(Vec::new()).await;
    // The presets name the hosts; the remote's private address is named too, as a registry
    // mirror on a LAN would be: only that address may be reached by those names.
    let daemon = amber_tests::TestDaemon::spawn_with(amber_tests::DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: allowlist_config(&["preset:npm", "preset:pypi", "preset:crates", &addr], &[]),
        env: vec![(
            amber_tests::daemon::HOSTS_FILE_VAR.to_owned(),
            hosts.display().to_string(),
        )],
    });
    let tmp = "$TMPDIR/by-name";
    let batch = [
        (
            "npm",
            format!(
                "mkdir -p {tmp} && cd {tmp} && echo '{{\"name\":\"x\",\"version\":\"1.0.0\"}}' > package.json && \
                 npm install demo-pkg --registry http://registry.npmjs.org:8080/ --cache {tmp}/npm-cache \
                 --no-audit --no-fund --no-update-notifier 2>&1 && cat node_modules/demo-pkg/index.js"
            ),
        ),
        (
            "pip",
            format!(
                "python3 -m pip download demo-pkg --no-deps --no-cache-dir --disable-pip-version-check \
                 --index-url http://pypi.org:8080/simple --trusted-host pypi.org \
                 --trusted-host registry.npmjs.org -d {tmp}/dl 2>&1 | tail -1"
            ),
        ),
        (
            // SOCKS5 with the name for the proxy to resolve (`socks5h`, as ALL_PROXY says).
            "socks_name",
            "curl -sS --max-time 20 --proxy \"$ALL_PROXY\" http://registry.npmjs.org:8080/demo-pkg"
                .to_owned(),
        ),
        (
            "unlisted_name",
            "curl -sS --max-time 20 http://evil.test:8080/demo-pkg 2>&1; echo".to_owned(),
        ),
        (
            "rebound",
            "curl -sS --max-time 20 http://static.crates.io:8080/ 2>&1; echo".to_owned(),
        ),
    ];
    let turn = run_batch(&daemon, &mock, &batch).await;
    let output = |id: &str| amber_tests::tool_calls::result_of(&turn, id).1;
    assert!(output("npm").contains(FIXTURE_MARK), "{}", output("npm"));
    assert!(
        output("pip").contains("Successfully downloaded demo-pkg"),
        "{}",
        output("pip")
    );
    let npm = connections(&turn, "npm");
    assert!(!npm.is_empty());
    for connection in &npm {
        assert_eq!(connection["host"], "registry.npmjs.org", "{connection}");
        assert_eq!(connection["rule"], "preset:npm", "{connection}");
        assert_eq!(connection["verdict"], "allowed", "{connection}");
    }
    assert!(
        connections(&turn, "pip")
            .iter()
            .any(|c| c["host"] == "pypi.org" && c["rule"] == "preset:pypi"),
        "{turn:#?}"
    );
    assert!(
        output("socks_name").contains("\"dist-tags\""),
        "{}",
        output("socks_name")
    );
    let socks = connections(&turn, "socks_name");
    assert_eq!(
        (socks[0]["protocol"].as_str(), socks[0]["rule"].as_str()),
        (Some("socks5"), Some("preset:npm")),
        "{socks:?}"
    );
    // The same address under a name nobody allowed: refused by its name.
    let unlisted = connections(&turn, "unlisted_name");
    assert_eq!(unlisted[0]["verdict"], "denied", "{unlisted:?}");
    assert!(output("unlisted_name").contains("not on the network allowlist"));
    // An allowed name that resolves to loopback: refused by its address.
    let rebound = connections(&turn, "rebound");
    assert_eq!(rebound[0]["verdict"], "denied", "{rebound:?}");
    assert_eq!(rebound[0]["rule"], "preset:crates");
    let reason = rebound[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("resolves to 127.0.0.1") && reason.contains("loopback"),
        "{reason}"
    );
    drop(registry);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_process_goes_through_the_proxy_while_it_runs() {
    let remote = Remote::start();
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, &allowlist_config(&[&remote.netns.addr], &[]));
    let client = amber_tests::steps::connect(&daemon).await;
    let sid =
        amber_tests::steps::new_session(&client, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = amber_tests::steps::Events::live(&client, &sid).await;
    let command = format!(
        "sleep 1; curl -sS --max-time 20 {}; sleep 30",
        remote.url("/hello.txt")
    );
    mock.push([
        amber_tests::tool_calls::calls(vec![amber_tests::tool_calls::call(
            "started",
            "process",
            &json!({"action": "start", "command": command}),
        )]),
        MockTurn::text("Started."),
        done(),
    ]);
    amber_tests::steps::prompt_turn(&client, &mut events, &sid, "start").await;
    // The process connects after its turn ended: its record is the session's all the same.
    let connection = loop {
        let event = events.next().await;
        if event["type"] == "network_connection" {
            break event;
        }
    };
    assert_eq!(connection["callId"], "started", "{connection}");
    assert_eq!(connection["verdict"], "allowed", "{connection}");
    assert!(
        connection["bytesReceived"].as_u64().unwrap() > 0,
        "{connection}"
    );
}
