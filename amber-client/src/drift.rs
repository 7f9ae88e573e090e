//! Environment drift: the running daemon was started with another provider setup than the
//! caller's shell now has (the trap of an autostarted, unconfigured amberd and an
//! `AMBER_BASE_URL` exported afterwards). Compares `daemon/status.provider` with the
//! caller's `AMBER_BASE_URL`, `AMBER_MODEL`, `AMBER_FLAVOR` and `AMBER_API_KEY` /
//! `OPENAI_API_KEY` (set or not — a key is never sent or compared). [`follow`] restarts an
//! idle autostarted daemon so that it does follow them.

use std::time::Duration;

use amber_proto::ProviderStatus;

/// The variables that decide the daemon's default provider.
pub const PROVIDER_VARIABLES: [&str; 5] = [
    "AMBER_BASE_URL",
    "AMBER_MODEL",
    "AMBER_FLAVOR",
    "AMBER_API_KEY",
    "OPENAI_API_KEY",
];

/// Whether the caller's environment sets any provider variable (no need to ask the daemon
/// otherwise).
pub fn sets_provider(env: &dyn Fn(&str) -> Option<String>) -> bool {
    PROVIDER_VARIABLES.iter().any(|v| value(env, v).is_some())
}

/// One warning naming each variable the daemon does not follow, and the way out; `None`
/// when the daemon already uses what the environment says.
pub fn provider_drift(
    daemon: &ProviderStatus,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let differs = differences(daemon, env);
    if differs.is_empty() {
        return None;
    }
    Some(format!(
        "the running amberd was started with another provider setup than this shell: {}; \
         `amber-cli daemon restart` starts it again with this environment",
        differs.join(", ")
    ))
}

/// Each provider variable of `env` the daemon does not follow, as `NAME=value (amberd uses
/// …)` (a key only as "is set").
fn differences(daemon: &ProviderStatus, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut differs = Vec::new();
    if let Some(url) = value(env, "AMBER_BASE_URL")
        && daemon.base_url.as_deref().map(normalize_url) != Some(normalize_url(&url))
    {
        let uses = daemon.base_url.as_deref().unwrap_or("no endpoint");
        differs.push(format!("AMBER_BASE_URL={url} (amberd uses {uses})"));
    }
    if let Some(model) = value(env, "AMBER_MODEL")
        && model != daemon.model
    {
        differs.push(format!(
            "AMBER_MODEL={model} (amberd uses {})",
            daemon.model
        ));
    }
    if let Some(flavor) = value(env, "AMBER_FLAVOR")
        && let Some(uses) = daemon.flavor.as_deref()
        && !flavor.eq_ignore_ascii_case(uses)
    {
        differs.push(format!("AMBER_FLAVOR={flavor} (amberd uses {uses})"));
    }
    if !daemon.key_set {
        // OPENAI_API_KEY is only the key of the default `openai` flavor.
        let openai = daemon
            .flavor
            .as_deref()
            .is_none_or(|f| f.eq_ignore_ascii_case("openai"));
        let keys = ["AMBER_API_KEY"]
            .into_iter()
            .chain(openai.then_some("OPENAI_API_KEY"));
        for key in keys.filter(|k| value(env, k).is_some()) {
            differs.push(format!("{key} is set (amberd has no key)"));
        }
    }
    differs
}

/// The warning for a config edit the daemon did not apply (`daemon/status.configError`:
/// file, line and column, and why), so that a rejected edit is never silent.
fn config_warning(error: &str) -> String {
    format!(
        "warning: amberd did not apply the last edit of its config (the one before it is in \
         force): {}",
        error.trim_end()
    )
}

/// How long a daemon asked to stop may take to be gone before the restart gives up.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Makes the daemon `client` talks to follow this shell's provider variables when it can:
/// a daemon a client's autostart started (not the user's, not systemd's), with no turn
/// running, no approval pending and no other client connected, is stopped and started
/// again with this environment — nothing is lost, sessions live in the store. Otherwise
/// the connection is kept and the note is [`provider_drift`]'s warning (never for a remote
/// daemon: this shell's variables are not the remote host's business). A config edit the daemon did
/// not apply is said too. One `daemon/status` for both. Returns the connection to use and
/// what to tell the user.
pub async fn follow(
    client: crate::Client,
    opts: &crate::ConnectOptions,
) -> Result<(crate::Client, Vec<String>), crate::ClientError> {
    let Ok(status) = client.daemon_status().await else {
        return Ok((client, Vec::new()));
    };
    let (client, drift, restarted) = follow_provider(client, opts, &status).await?;
    // A restarted daemon read its config afresh: the old one's complaint is stale.
    let config = status
        .config_error
        .as_deref()
        .filter(|_| !restarted)
        .map(config_warning);
    Ok((client, drift.into_iter().chain(config).collect()))
}

/// [`follow`]'s provider part: the connection, the note, and whether the daemon was
/// restarted.
async fn follow_provider(
    client: crate::Client,
    opts: &crate::ConnectOptions,
    status: &amber_proto::DaemonStatus,
) -> Result<(crate::Client, Option<String>, bool), crate::ClientError> {
    let env = |key: &str| std::env::var(key).ok();
    if client.remote().is_some() || !sets_provider(&env) {
        return Ok((client, None, false));
    }
    let Some(provider) = status.provider.as_ref() else {
        return Ok((client, None, false));
    };
    let differs = differences(provider, &env);
    if differs.is_empty() {
        return Ok((client, None, false));
    }
    let restartable = opts.autostart
        && status.autostarted == Some(true)
        && status.busy == Some(0)
        && status.connections <= 1;
    if !restartable || client.daemon_shutdown().await.is_err() {
        let warning = provider_drift(provider, &env).map(|w| format!("warning: {w}"));
        return Ok((client, warning, false));
    }
    drop(client);
    wait_until_gone(status.pid).await;
    let client = crate::Client::connect(opts.clone()).await?;
    let note = format!(
        "restarted amberd (it was idle) to follow this shell: {}",
        differs.join(", ")
    );
    Ok((client, Some(note), true))
}

/// Waits (bounded) until process `pid` has exited: the socket is free once it has.
async fn wait_until_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + STOP_WAIT;
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn value(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    env(key)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn normalize_url(url: &str) -> &str {
    url.trim().trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(base_url: Option<&str>, model: &str, flavor: &str, key_set: bool) -> ProviderStatus {
        ProviderStatus {
            base_url: base_url.map(str::to_owned),
            model: model.to_owned(),
            key_set,
            flavor: Some(flavor.to_owned()),
        }
    }

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_same_setup_is_no_drift() {
        let daemon = status(Some("http://127.0.0.1:8080/v1/"), "m", "openai", true);
        let shell = env(&[
            ("AMBER_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("AMBER_MODEL", "m"),
            ("AMBER_FLAVOR", "OpenAI"),
            ("AMBER_API_KEY", "k"),
        ]);
        assert_eq!(provider_drift(&daemon, &shell), None);
        assert!(sets_provider(&shell));
        assert!(!sets_provider(&env(&[("AMBER_MODEL", "  ")])));
    }

    #[test]
    fn an_unconfigured_daemon_names_every_variable_and_the_restart() {
        let daemon = status(None, "gpt-4o-mini", "openai", false);
        let shell = env(&[
            ("AMBER_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("AMBER_MODEL", "qwen"),
            ("OPENAI_API_KEY", "sk"),
        ]);
        let warning = provider_drift(&daemon, &shell).unwrap();
        assert!(
            warning.contains("AMBER_BASE_URL=http://127.0.0.1:8080/v1 (amberd uses no endpoint)"),
            "{warning}"
        );
        assert!(warning.contains("AMBER_MODEL=qwen (amberd uses gpt-4o-mini)"));
        assert!(warning.contains("OPENAI_API_KEY is set"));
        assert!(warning.contains("`amber-cli daemon restart`"));
        assert!(!warning.contains("sk"), "never the key: {warning}");
    }

    #[test]
    fn openai_key_matters_only_for_the_openai_flavor() {
        let daemon = status(Some("http://127.0.0.1:1"), "m", "anthropic", false);
        assert_eq!(
            provider_drift(&daemon, &env(&[("OPENAI_API_KEY", "sk")])),
            None
        );
        assert!(provider_drift(&daemon, &env(&[("AMBER_API_KEY", "k")])).is_some());
    }
}
