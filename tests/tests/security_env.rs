//! Tool processes never inherit the provider's secrets: the real daemon is started with
//! `AMBER_API_KEY`, a preset's key, a configured `api_key_env`, tokens, secrets and
//! passwords in its environment; a `bash` call and a `process` background command print
//! their whole environment, from `env` and from `/proc/PID/environ`, and none of the secret
//! values is in what they print, while ordinary variables are. `env` runs in read mode (the
//! audit's reproduction); the `/proc` listings run in yolo, since read mode refuses reads
//! outside the workspace, `/proc` included.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::steps::{Events, connect, done, eventually, new_session, prompt_turn, within};
use amber_tests::tool_calls::{bash, call, calls, result_of};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::json;

/// Secret variables of the daemon and their sentinel values.
const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sentinel-openai-4f1"),
    ("GITHUB_TOKEN", "sentinel-github-9c2"),
    ("MY_SECRET", "sentinel-mine-77a"),
    ("DB_PASSWORD", "sentinel-db-31e"),
    // Named by `[providers.corp] api_key_env`: matches none of the default globs.
    ("CORP_LLM_CREDENTIAL", "sentinel-corp-5b0"),
];
/// What TestDaemon gives as `AMBER_API_KEY` when it points the daemon at the mock.
const AMBER_KEY: &str = "test-key";
/// An ordinary variable: inherited (the default `inherit = "all"`).
const VISIBLE: (&str, &str) = ("AMBER_TEST_VISIBLE", "visible-value-8d");

/// Prints the environment twice: as `env` sees it and as the kernel holds it for the shell.
const PRINT_ENV: &str = "env; echo ---; tr '\\0' '\\n' < /proc/$$/environ; echo ---; \
                         cat /proc/self/environ | tr '\\0' '\\n'";

fn daemon(mock: &MockLlm, extra_config: &str) -> TestDaemon {
    let mut env: Vec<(String, String)> = SECRETS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.push((VISIBLE.0.to_owned(), VISIBLE.1.to_owned()));
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "[providers.corp]\nflavor = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             api_key_env = \"CORP_LLM_CREDENTIAL\"\n{extra_config}"
        ),
        env,
    })
}

fn assert_no_secret(output: &str) {
    assert!(
        output.contains("---") && output.contains("PATH="),
        "the command printed no environment: {output}"
    );
    for (name, value) in SECRETS {
        assert!(!output.contains(value), "{name} reached the tool: {output}");
        assert!(
            !output.contains(&format!("{name}=")),
            "{name} is set: {output}"
        );
    }
    assert!(
        !output.contains(&format!("AMBER_API_KEY={AMBER_KEY}")),
        "AMBER_API_KEY reached the tool: {output}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn api_key_absent_from_tool_environ_in_read_mode() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = daemon(&mock, "");
    let client = connect(&daemon).await;
    let visible = format!("{}={}", VISIBLE.0, VISIBLE.1);

    // `bash env` in read mode, as the audit ran it.
    mock.push([
        bash("b_env", "env; echo ---"),
        MockTurn::text("Looked."),
        done(),
    ]);
    let session = new_session(&client, &daemon, Some(Mode::Read)).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "print env").await;
    let (status, output) = result_of(&turn, "b_env");
    assert_eq!(status, "ok", "{output}");
    assert_no_secret(&output);
    assert_eq!(output.matches(&visible).count(), 1, "{output}");
    assert!(output.contains("PAGER=cat"), "{output}");

    // What the kernel holds for the shell and for a process it starts.
    mock.push([bash("b_proc", PRINT_ENV), MockTurn::text("Looked."), done()]);
    let session = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "print environ").await;
    let (status, output) = result_of(&turn, "b_proc");
    assert_eq!(status, "ok", "{output}");
    assert_no_secret(&output);
    // The three listings agree on the ordinary variable: nothing else was filtered away.
    assert_eq!(output.matches(&visible).count(), 3, "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn api_key_absent_from_background_process_environ() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = daemon(&mock, "");
    // The listing lands in the workspace in one rename, once complete.
    let command = format!("{{ {PRINT_ENV}; }} > .bg-env.tmp 2>&1; mv .bg-env.tmp bg-env.txt");
    mock.push([
        calls(vec![call(
            "p_env",
            "process",
            &json!({"action": "start", "command": command}),
        )]),
        MockTurn::text("Started."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "start it").await;
    assert_eq!(result_of(&turn, "p_env").0, "ok", "{turn:#?}");
    let listing = daemon.workspace.join("bg-env.txt");
    eventually(
        "the background command to write its environment",
        Duration::from_secs(10),
        || listing.exists(),
    )
    .await;
    let output = std::fs::read_to_string(&listing).unwrap();
    assert_no_secret(&output);
    let visible = format!("{}={}", VISIBLE.0, VISIBLE.1);
    assert_eq!(output.matches(&visible).count(), 3, "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_env_core_and_set_shape_the_environment() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = daemon(
        &mock,
        "[tools.env]\ninherit = \"core\"\nset = { AMBER_TEST_SET = \"from-config\" }\n",
    );
    mock.push([bash("b_env", PRINT_ENV), MockTurn::text("Looked."), done()]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    let turn = within(
        "the turn",
        prompt_turn(&client, &mut events, &session, "print env"),
    )
    .await;
    let (status, output) = result_of(&turn, "b_env");
    assert_eq!(status, "ok", "{output}");
    assert_no_secret(&output);
    assert!(
        !output.contains(VISIBLE.1),
        "core keeps only the core set: {output}"
    );
    assert_eq!(
        output.matches("AMBER_TEST_SET=from-config").count(),
        3,
        "{output}"
    );
    assert!(output.contains("HOME="), "{output}");
}

/// MCP stdio servers and external plugins start with the tool environment policy too: the
/// provider keys stay with amberd, unless a server's or plugin's own `env` names one
/// (`${NAME}`), and their own `env` is added.
#[test]
fn mcp_servers_and_external_plugins_get_no_provider_key_unless_named() {
    let dumps = tempfile::tempdir().unwrap();
    let dump = |name: &str| dumps.path().join(name);
    let script = |name: &str| {
        format!(
            "[\"-c\", \"env > {}.tmp && mv {0}.tmp {0}; exec sleep 30\"]",
            dump(name).display()
        )
    };
    let config = format!(
        "[mcp.servers.envdump]\ncommand = \"sh\"\nargs = {}\n\
         env = {{ OWN_SETTING = \"own-value\", NAMED_KEY = \"${{GITHUB_TOKEN}}\" }}\n\
         [[plugins.external]]\nname = \"envplugin\"\ncommand = \"sh\"\nargs = {}\n\
         env = {{ OWN_SETTING = \"own-value\" }}\n",
        script("mcp"),
        script("plugin"),
    );
    let mock_url = "http://127.0.0.1:9/v1";
    let mut env: Vec<(String, String)> = SECRETS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.push((VISIBLE.0.to_owned(), VISIBLE.1.to_owned()));
    let _daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock_url.to_owned()),
        config_toml: format!(
            "[providers.corp]\nflavor = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             api_key_env = \"CORP_LLM_CREDENTIAL\"\n{config}"
        ),
        env,
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for name in ["mcp", "plugin"] {
        while !dump(name).exists() {
            assert!(std::time::Instant::now() < deadline, "{name} never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let seen = std::fs::read_to_string(dump(name)).unwrap();
        assert!(seen.contains("OWN_SETTING=own-value"), "{name}: {seen}");
        assert!(
            seen.contains(&format!("{}={}", VISIBLE.0, VISIBLE.1)),
            "{name}: {seen}"
        );
        assert!(
            !seen.contains(AMBER_KEY),
            "{name} got AMBER_API_KEY: {seen}"
        );
        for (key, value) in SECRETS {
            let named = name == "mcp" && *key == "GITHUB_TOKEN";
            assert_eq!(
                seen.contains(value),
                named,
                "{name}: {key} {}: {seen}",
                if named {
                    "was named but is missing"
                } else {
                    "reached it"
                }
            );
        }
    }
}
