//! End-to-end: secret locations are unreachable from inside the sandbox, not only asked
//! about, and with the network on the user's other Unix sockets stay out of reach. Through
//! the real daemon in yolo: a fake home holds `~/.ssh`, `~/.aws`, `~/.netrc` and a
//! `[sandbox] secret_paths` directory, each with a sentinel secret; commands read them by
//! the routes the classifier cannot name — globs, links made first, archives that carry a
//! link, `dd if=`, interpreters — and no secret reaches a result. With `network = true` a
//! Unix socket outside, an abstract socket and amberd's socket are refused, and a socket
//! `[sandbox] allow_unix_sockets` names is reachable while the others stay refused.

use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixListener;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Mode, SandboxRequest, SessionNewParams};
use amber_tests::TestDaemon;
use amber_tests::steps::{Events, FAST_RETRIES, connect, done, prompt_turn, spawn_config, within};
use amber_tests::tool_calls::{call, calls, put, result_of};
use serde_json::json;

const SECRETS: &[(&str, &str)] = &[
    (".ssh/id_ed25519", "SSH-SENTINEL-KEY"),
    (".aws/credentials", "AWS-SENTINEL-KEY"),
    (".netrc", "NETRC-SENTINEL-KEY"),
    ("private/token", "CONFIGURED-SENTINEL-KEY"),
];

/// Reads by routes the classifier cannot name (`{H}`: the home directory).
const READS: &[(&str, &str)] = &[
    ("glob_question", "cat {H}/.ss?/id_*"),
    ("glob_class", "cat {H}/.[s]sh/*"),
    ("glob_star", "cat {H}/.*/*"),
    ("dd", "dd if={H}/.aws/credentials status=none"),
    ("link_then_read", "ln -s {H}/.ssh s && cat s/id_ed25519"),
    ("link_file", "ln -s {H}/.netrc n && cat n"),
    (
        "tar_link",
        "mkdir -p t && ln -s {H}/.ssh t/k && tar -chf - t | tar -xOf -",
    ),
    (
        "python",
        "python3 -c \"print(open('{H}/.aws/credentials').read())\"",
    ),
    ("find_exec", "find {H}/.ssh -type f -exec cat {} +"),
    ("configured", "cat {H}/priv*/token"),
    ("grep_home", "grep -r SENTINEL {H}"),
];

async fn yolo(daemon: &TestDaemon, network: bool) -> (amber_client::Client, String) {
    let client = connect(daemon).await;
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(Mode::Yolo),
        sandbox: Some(SandboxRequest {
            network: Some(amber_proto::NetworkMode::from_bool(network)),
            ..Default::default()
        }),
        ..SessionNewParams::default()
    };
    let sid = within("session/new", client.session_new(&params))
        .await
        .unwrap()
        .session_id;
    (client, sid)
}

fn attempt(cmd: &str) -> String {
    format!("( {cmd} ); echo \"[attempt exited $?]\"")
}

#[tokio::test(flavor = "multi_thread")]
async fn secret_locations_are_masked_whatever_route_reads_them() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(
        &mock,
        &format!("{FAST_RETRIES}\n[sandbox]\nsecret_paths = [\"~/private\"]\n"),
    );
    let home = daemon.dir.path().canonicalize().unwrap().join("home");
    for (path, secret) in SECRETS {
        put(&home.join(path), &format!("{secret}\n"));
    }
    let (client, sid) = yolo(&daemon, false).await;
    let mut events = Events::live(&client, &sid).await;
    let h = home.display().to_string();
    mock.push(vec![
        calls(
            READS
                .iter()
                .map(|(id, cmd)| {
                    call(
                        id,
                        "bash",
                        &json!({ "command": attempt(&cmd.replace("{H}", &h)) }),
                    )
                })
                .collect(),
        ),
        MockTurn::text("read"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "read the keys").await;
    let mut ran = 0;
    for (id, _) in READS {
        let (status, output) = result_of(&turn, id);
        if status != "denied" {
            ran += 1;
        }
        for (_, secret) in SECRETS {
            assert!(!output.contains(secret), "{id} read {secret}: {output}");
        }
    }
    assert!(
        ran >= READS.len() - 2,
        "the classifier stopped most reads: nothing was tried"
    );
    // The files themselves are untouched.
    for (path, secret) in SECRETS {
        assert_eq!(
            std::fs::read_to_string(home.join(path)).unwrap(),
            format!("{secret}\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_network_on_other_unix_sockets_stay_out_of_reach() {
    let mock = MockLlm::start(Vec::new()).await;
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    let allowed_path = outside.join("allowed.sock");
    let daemon = spawn_config(
        &mock,
        &format!(
            "{FAST_RETRIES}\n[sandbox]\nallow_unix_sockets = [\"{}\"]\n",
            allowed_path.display()
        ),
    );
    // A second daemon without the allowance: nothing may be created.
    let strict = spawn_config(&mock, FAST_RETRIES);
    let other = UnixListener::bind(outside.join("other.sock")).unwrap();
    other.set_nonblocking(true).unwrap();
    let allowed = UnixListener::bind(&allowed_path).unwrap();
    allowed.set_nonblocking(true).unwrap();
    let abstract_name = format!("amber-test-abstract-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();
    let connect_py = |target: &str| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect({target}); s.send(b'x'); print('connected')\""
        )
    };
    let other_target = format!("'{}'", outside.join("other.sock").display());
    let allowed_target = format!("'{}'", allowed_path.display());
    let abstract_target = format!("'\\\\0{abstract_name}'");

    for (daemon, allow) in [(&strict, false), (&daemon, true)] {
        let (client, sid) = yolo(daemon, true).await;
        let mut events = Events::live(&client, &sid).await;
        mock.push(vec![
            calls(vec![
                call("other", "bash", &json!({ "command": attempt(&connect_py(&other_target)) })),
                call("abstract", "bash", &json!({ "command": attempt(&connect_py(&abstract_target)) })),
                call("allowed", "bash", &json!({ "command": attempt(&connect_py(&allowed_target)) })),
                call(
                    "amberd",
                    "bash",
                    &json!({ "command": attempt(&connect_py(&format!("'{}'", daemon.socket.display()))) }),
                ),
            ]),
            MockTurn::text("connected"),
            done(),
        ]);
        let turn = prompt_turn(&client, &mut events, &sid, "connect").await;
        let outcome = |id: &str| result_of(&turn, id).1;
        assert!(
            !outcome("amberd").contains("connected"),
            "{}",
            outcome("amberd")
        );
        assert!(
            !outcome("abstract").contains("connected"),
            "{}",
            outcome("abstract")
        );
        assert_eq!(
            outcome("allowed").contains("connected"),
            allow,
            "allow_unix_sockets = {allow}: {}",
            outcome("allowed")
        );
        // Allowing one socket opens that one, not the others.
        assert!(
            !outcome("other").contains("connected"),
            "allow_unix_sockets = {allow}: {}",
            outcome("other")
        );
    }
    let unread = |listener: &UnixListener| match listener.accept() {
        Err(e) => e.kind() == ErrorKind::WouldBlock,
        Ok((mut stream, _)) => {
            let mut buf = [0u8; 1];
            stream.set_nonblocking(false).unwrap();
            stream.read(&mut buf).unwrap_or(0) == 0
        }
    };
    assert!(unread(&abstract_listener), "an abstract socket was reached");
}
